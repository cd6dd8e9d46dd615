"""One BiCGSTAB iteration on the device (dense ``A``, no preconditioner).

The host loop of :func:`trnsolver.bicgstab` launches this kernel once per
iteration and reads back five scalars to apply SciPy's stopping rule --
including its mid-iteration exit on ``||s||`` -- while the vectors stay in
HBM. Layout and building blocks are :mod:`trnsolver.kernels.cg_step`'s:
vectors as ``[128, nt]`` tiles, the matvec as ``nt^2`` matmuls with ``A``'s
blocks stationary (the kernel takes ``a = A^T``), dot products all-reduced
over partitions by one matmul with a ones matrix, so every scalar of the
recurrence (``rho``, ``alpha``, ``omega``, ``beta``) is formed on every
partition and never visits the host.

Dimensions
----------
``a`` : ``[n, n]`` float32, ``A^T``.   ``x, r, rhat, p, v`` : ``[n, 1]`` float32.
``sc`` : ``[128, 3]`` float32, ``(rho, alpha, omega)`` of the previous
         iteration on every partition (the first launch: ones, with ``p = v = 0``).
Outputs: ``x_full = x + alpha p + omega s``, ``x_half = x + alpha p`` (the
iterate when the host stops on ``||s||``), ``r' = s - omega t``, ``p'``,
``v' = A p'``, ``sc'`` = ``(rho', alpha', omega')``, ``stats`` ``[1, 5]`` =
``(rho', rhat.v', ||s||^2, ||r'||^2, omega')``. ``omega' = (t.s)/(t.t)``, or
0 when ``t = 0`` (the ``t.t`` is replaced by 1 then: ``t.s`` is 0 too).

Pseudocode
----------
    rho'  = rhat.r;  beta = (rho'/rho)(alpha/omega);  p' = r + beta (p - omega v)
    v'    = A p';    alpha' = rho' / rhat.v'
    s     = r - alpha' v';  t = A s;  omega' = t.s / t.t
    x_half = x + alpha' p';  x_full = x_half + omega' s;  r' = s - omega' t

Closed forms (nt = ceil(n / 128))
---------------------------------
    HBM read  = 4 (2 n^2 + 5 n + 3 * 128)    HBM write = 4 (5 n + 3 * 128 + 5)
    DMA       = 2 nt^2 + 10 nt + 3            Tensor = 2 nt^2 + 6
    Vector    = 50 + 2 nt
"""

from __future__ import annotations

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX, cdiv, tile
from trnsolver.kernels.cg_step import _load_vec, _store_vec


def bicgstab_step_counts(n: int) -> dict:
    """The closed forms above."""
    nt = cdiv(n, PMAX)
    return {
        "kernel": "bicgstab_step_kernel",
        "hbm_read_bytes": 4 * (2 * n * n + 5 * n + 3 * PMAX),
        "hbm_write_bytes": 4 * (5 * n + 3 * PMAX + 5),
        "dma": 2 * nt * nt + 10 * nt + 3,
        "tensor": 2 * nt * nt + 6,
        "vector": 50 + 2 * nt,
    }


@nki.jit
def bicgstab_step_kernel(a, x, r, rhat, p, v, sc):
    """One BiCGSTAB iteration: ``(x_full, x_half, r', p', v', sc', stats)``; see the module docstring."""
    n = a.shape[0]
    nt = cdiv(n, PMAX)
    f32 = nl.float32
    outs = [nl.ndarray((n, 1), dtype=f32, buffer=nl.shared_hbm) for _ in range(5)]
    sc_out = nl.ndarray((PMAX, 3), dtype=f32, buffer=nl.shared_hbm)
    stats = nl.ndarray((1, 5), dtype=f32, buffer=nl.shared_hbm)

    def vec(name):
        return nl.ndarray((PMAX, nt), dtype=f32, buffer=nl.sbuf, name=name)

    def col(name):
        return nl.ndarray((PMAX, 1), dtype=f32, buffer=nl.sbuf, name=name)

    X, R, RH, P, V = vec("x"), vec("r"), vec("rhat"), vec("p"), vec("v")
    S, T, XH, work = vec("s"), vec("t"), vec("x_half"), vec("work")
    for t_, src in ((X, x), (R, r), (RH, rhat), (P, p), (V, v)):
        nisa.memset(t_, 0.0)
        _load_vec(t_, src, n, nt)
    nisa.memset(S, 0.0)
    nisa.memset(T, 0.0)
    old = nl.ndarray((PMAX, 3), dtype=f32, buffer=nl.sbuf, name="rho_alpha_omega")
    nisa.dma_copy(dst=old, src=sc)
    ones = nl.ndarray((PMAX, PMAX), dtype=f32, buffer=nl.sbuf, name="ones")
    nisa.memset(ones, 1.0)

    def allreduce(dst, u, w, name):
        part = col(name + "_part")
        nisa.tensor_tensor(work, u, w, nl.multiply)
        nisa.tensor_reduce(part, nl.add, work, axis=1)
        ps = nl.ndarray((PMAX, 1), dtype=f32, buffer=nl.psum, name=name + "_ps")
        nisa.nc_matmul(ps, ones, part)
        nisa.tensor_copy(dst, ps)

    def matvec(dst, src):
        for i in nl.static_range(nt):
            i0, ri = tile(i, n, PMAX)
            ps = nl.ndarray((ri, 1), dtype=f32, buffer=nl.psum, name="Av_ps")
            for k in nl.static_range(nt):
                k0, rk = tile(k, n, PMAX)
                blk = nl.ndarray((rk, ri), dtype=f32, buffer=nl.sbuf, name="a_block")
                nisa.dma_copy(dst=blk, src=a[k0:k0 + rk, i0:i0 + ri])
                nisa.nc_matmul(ps, blk, src[0:rk, k:k + 1])
            nisa.tensor_copy(dst[0:ri, i:i + 1], ps)

    rho, den, alpha, sn2, tt, ts, omega, rn2, tmp, beta = (
        col(nm) for nm in ("rho", "den", "alpha", "sn2", "tt", "ts", "omega", "rn2", "tmp", "beta"))
    rho0, alpha0, omega0 = old[0:PMAX, 0:1], old[0:PMAX, 1:2], old[0:PMAX, 2:3]
    allreduce(rho, RH, R, "rho")
    # beta = (rho / rho0) (alpha0 / omega0)
    nisa.reciprocal(beta, rho0)
    nisa.tensor_tensor(beta, beta, rho, nl.multiply)
    nisa.tensor_tensor(beta, beta, alpha0, nl.multiply)
    nisa.reciprocal(tmp, omega0)
    nisa.tensor_tensor(beta, beta, tmp, nl.multiply)
    # p = r + beta (p - omega0 v)
    nisa.scalar_tensor_tensor(dst=P, data=V, op0=nl.multiply, operand0=omega0, op1=nl.subtract, operand1=P,
                              reverse1=True)
    nisa.scalar_tensor_tensor(dst=P, data=P, op0=nl.multiply, operand0=beta, op1=nl.add, operand1=R)
    matvec(V, P)
    allreduce(den, RH, V, "den")
    nisa.reciprocal(alpha, den)
    nisa.tensor_tensor(alpha, alpha, rho, nl.multiply)
    nisa.scalar_tensor_tensor(dst=S, data=V, op0=nl.multiply, operand0=alpha, op1=nl.subtract, operand1=R,
                              reverse1=True)
    allreduce(sn2, S, S, "sn")
    matvec(T, S)
    allreduce(tt, T, T, "tt")
    allreduce(ts, T, S, "ts")
    # omega = ts / (tt + [tt == 0])
    nisa.tensor_scalar(tmp, tt, nl.equal, 0.0, op1=nl.add, operand1=tt)
    nisa.reciprocal(omega, tmp)
    nisa.tensor_tensor(omega, omega, ts, nl.multiply)
    nisa.scalar_tensor_tensor(dst=XH, data=P, op0=nl.multiply, operand0=alpha, op1=nl.add, operand1=X)
    nisa.scalar_tensor_tensor(dst=X, data=S, op0=nl.multiply, operand0=omega, op1=nl.add, operand1=XH)
    nisa.scalar_tensor_tensor(dst=R, data=T, op0=nl.multiply, operand0=omega, op1=nl.subtract, operand1=S,
                              reverse1=True)
    allreduce(rn2, R, R, "rn")
    new = nl.ndarray((PMAX, 3), dtype=f32, buffer=nl.sbuf, name="rho_alpha_omega_new")
    nisa.tensor_copy(new[0:PMAX, 0:1], rho)
    nisa.tensor_copy(new[0:PMAX, 1:2], alpha)
    nisa.tensor_copy(new[0:PMAX, 2:3], omega)
    st = nl.ndarray((1, 5), dtype=f32, buffer=nl.sbuf, name="stats")
    for i, c in enumerate((rho, den, sn2, rn2, omega)):
        nisa.tensor_copy(st[0:1, i:i + 1], c[0:1, 0:1])
    for dst, src in zip(outs, (X, XH, R, P, V)):
        _store_vec(dst, src, n, nt)
    nisa.dma_copy(dst=sc_out, src=new)
    nisa.dma_copy(dst=stats, src=st)
    return (*outs, sc_out, stats)
