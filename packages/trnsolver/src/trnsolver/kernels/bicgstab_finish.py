"""BiCGSTAB on a sparse ``A``, second vector kernel: the rest of the iteration after ``t = A s``,
and the next search direction.

Follows :mod:`.bicgstab_half` and the SpMV ``t = A s`` (see there for the
four-launch iteration). Forms ``omega``, the new iterate and residual, and
already the next iteration's ``rho`` and ``p`` (so the next iteration starts
with its SpMV). The host reads ``(||r'||^2, omega, rho')``: it stops on
``||r'||`` or ``omega == 0`` as SciPy does, and on ``rho' == 0`` at the start of
the next iteration, as the torch path does. Layout as :mod:`.cg_update`.

Dimensions
----------
``x_half, s, t, rhat, p, v`` : ``[n]`` float32.
``rho, alpha`` : ``[128, 1]`` float32 each, this iteration's on every partition.
Outputs: ``x'``, ``r'``, ``p'`` ``[n]``, ``rho'`` ``[128, 1]``, ``stats`` ``[1, 3]`` =
``(||r'||^2, omega, rho')``. ``omega = (t.s)/(t.t)``, or 0 when ``t = 0`` (``t.t``
is replaced by 1 then; ``t.s`` is 0 too). With ``omega == 0`` the host stops, and
``p'`` (divided by ``omega``) is never used.

Pseudocode
----------
    tt = allreduce(t * t);  ts = allreduce(t * s);  omega = ts / (tt + [tt == 0])
    x' = x_half + omega s;  r' = s - omega t;  rn2 = allreduce(r' * r')
    rho' = allreduce(rhat * r');  beta = (rho' / rho)(alpha / omega)
    p' = r' + beta (p - omega v)

Closed forms (np = [q > 0] + [r > 0] pieces per vector)
-------------------------------------------------------
    HBM read  = 4 (6 n + 2 * 128)        HBM write = 4 (3 n + 128 + 3)
    DMA       = 9 np + 4                 Tensor = 4
    Vector    = 34      (7 memsets, 3 x 4 per all-reduce, 3 omega, 2 updates,
                         5 beta, 2 p, 3 stats)
"""

from __future__ import annotations

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX
from trnsolver.kernels.cg_update import _load_vec, _store_vec, layout


def bicgstab_finish_counts(n: int) -> dict:
    """The closed forms above."""
    q, r = layout(n)
    np_ = (q > 0) + (r > 0)
    return {
        "kernel": "bicgstab_finish_kernel",
        "hbm_read_bytes": 4 * (6 * n + 2 * PMAX),
        "hbm_write_bytes": 4 * (3 * n + PMAX + 3),
        "dma": 9 * np_ + 4,
        "tensor": 4,
        "vector": 34,
    }


@nki.jit
def bicgstab_finish_kernel(x_half, s, t, rhat, p, v, rho, alpha):
    """``(x', r', p', rho', stats)``; see the module docstring."""
    n = s.shape[0]
    q, r_ = layout(n)
    w = q + r_
    f32 = nl.float32
    x_out = nl.ndarray((n,), dtype=f32, buffer=nl.shared_hbm)
    r_out = nl.ndarray((n,), dtype=f32, buffer=nl.shared_hbm)
    p_out = nl.ndarray((n,), dtype=f32, buffer=nl.shared_hbm)
    rho_out = nl.ndarray((PMAX, 1), dtype=f32, buffer=nl.shared_hbm)
    stats = nl.ndarray((1, 3), dtype=f32, buffer=nl.shared_hbm)

    def vec(name):
        return nl.ndarray((PMAX, w), dtype=f32, buffer=nl.sbuf, name=name)

    def col(name):
        return nl.ndarray((PMAX, 1), dtype=f32, buffer=nl.sbuf, name=name)

    XH, S, T, RH, P, V, work = (vec(nm) for nm in ("x_half", "s", "t", "rhat", "p", "v", "work"))
    for t_, src in ((XH, x_half), (S, s), (T, t), (RH, rhat), (P, p), (V, v)):
        nisa.memset(t_, 0.0)  # unused slots stay zero: they add nothing to the dots
        _load_vec(t_, src, n)
    rho0, alpha0 = col("rho_prev"), col("alpha_prev")
    nisa.dma_copy(dst=rho0, src=rho)
    nisa.dma_copy(dst=alpha0, src=alpha)
    ones = nl.ndarray((PMAX, PMAX), dtype=f32, buffer=nl.sbuf, name="ones")
    nisa.memset(ones, 1.0)

    def allreduce(dst, u, v_, name):
        """dst [128, 1] = sum(u * v_) on every partition."""
        part = col(name + "_part")
        nisa.tensor_tensor(work, u, v_, nl.multiply)
        nisa.tensor_reduce(part, nl.add, work, axis=1)
        ps = nl.ndarray((PMAX, 1), dtype=f32, buffer=nl.psum, name=name + "_ps")
        nisa.nc_matmul(ps, ones, part)
        nisa.tensor_copy(dst, ps)

    tt, ts, omega, tmp, rn2, rho_new, beta = (
        col(nm) for nm in ("tt", "ts", "omega", "tmp", "rn2", "rho", "beta"))
    allreduce(tt, T, T, "tt")
    allreduce(ts, T, S, "ts")
    nisa.tensor_scalar(tmp, tt, nl.equal, 0.0, op1=nl.add, operand1=tt)  # tt + [tt == 0]
    nisa.reciprocal(omega, tmp)
    nisa.tensor_tensor(omega, omega, ts, nl.multiply)
    # x' = x_half + omega s (into XH); r' = s - omega t (into T)
    nisa.scalar_tensor_tensor(dst=XH, data=S, op0=nl.multiply, operand0=omega, op1=nl.add, operand1=XH)
    nisa.scalar_tensor_tensor(dst=T, data=T, op0=nl.multiply, operand0=omega, op1=nl.subtract, operand1=S,
                              reverse1=True)
    allreduce(rn2, T, T, "rn")
    allreduce(rho_new, RH, T, "rho")
    # beta = (rho' / rho) (alpha / omega)
    nisa.reciprocal(beta, rho0)
    nisa.tensor_tensor(beta, beta, rho_new, nl.multiply)
    nisa.tensor_tensor(beta, beta, alpha0, nl.multiply)
    nisa.reciprocal(tmp, omega)
    nisa.tensor_tensor(beta, beta, tmp, nl.multiply)
    # p' = r' + beta (p - omega v)
    nisa.scalar_tensor_tensor(dst=P, data=V, op0=nl.multiply, operand0=omega, op1=nl.subtract, operand1=P,
                              reverse1=True)
    nisa.scalar_tensor_tensor(dst=P, data=P, op0=nl.multiply, operand0=beta, op1=nl.add, operand1=T)
    st = nl.ndarray((1, 3), dtype=f32, buffer=nl.sbuf, name="stats")
    for i, c in enumerate((rn2, omega, rho_new)):
        nisa.tensor_copy(st[0:1, i:i + 1], c[0:1, 0:1])
    _store_vec(x_out, XH, n)
    _store_vec(r_out, T, n)
    _store_vec(p_out, P, n)
    nisa.dma_copy(dst=rho_out, src=rho_new)
    nisa.dma_copy(dst=stats, src=st)
    return x_out, r_out, p_out, rho_out, stats
