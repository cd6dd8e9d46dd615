"""BiCGSTAB on a sparse ``A``, first vector kernel: the half step after ``v = A p``.

:func:`trnsolver.bicgstab` on a matrix with a device SpMV (trnsparse's CSR,
through the ``__trnsci_spmv__`` seam) runs each iteration as four launches:
SpMV ``v = A p``, this kernel, SpMV ``t = A s``, then
:mod:`.bicgstab_finish`. Between the two SpMVs the host reads ``||s||^2``:
SciPy's rule may stop there, on ``x + alpha p``, which this kernel has
already formed. Vectors use :mod:`.cg_update`'s layout (``[128, q]`` plus a
``[1, r]`` tail row, ``q, r = divmod(n, 128)``); dots are per-partition
reductions and one matmul with a ones matrix, so ``alpha`` is formed on
every partition.

Dimensions
----------
``x, r, p, v, rhat`` : ``[n]`` float32 (``v = A p`` from the SpMV launch).
``rho`` : ``[128, 1]`` float32, ``rhat . r`` on every partition.
Outputs: ``s``, ``x_half`` ``[n]``, ``alpha`` ``[128, 1]``, ``stats`` ``[1, 2]`` =
``(rhat . v, ||s||^2)``. ``rhat . v == 0`` makes ``alpha`` infinite: the host
stops before using it (as the torch path does).

Pseudocode
----------
    den = allreduce(rhat * v);   alpha = rho / den
    s = r - alpha v;   x_half = x + alpha p;   sn2 = allreduce(s * s)

Closed forms (np = [q > 0] + [r > 0] pieces per vector)
-------------------------------------------------------
    HBM read  = 4 (5 n + 128)            HBM write = 4 (2 n + 128 + 2)
    DMA       = 7 np + 3                 Tensor = 2
    Vector    = 18      (6 memsets, 3 x 2 per all-reduce, 2 alpha, 2 updates, 2 stats)
"""

from __future__ import annotations

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX
from trnsolver.kernels.cg_update import _load_vec, _store_vec, layout


def bicgstab_half_counts(n: int) -> dict:
    """The closed forms above."""
    q, r = layout(n)
    np_ = (q > 0) + (r > 0)
    return {
        "kernel": "bicgstab_half_kernel",
        "hbm_read_bytes": 4 * (5 * n + PMAX),
        "hbm_write_bytes": 4 * (2 * n + PMAX + 2),
        "dma": 7 * np_ + 3,
        "tensor": 2,
        "vector": 18,
    }


@nki.jit
def bicgstab_half_kernel(x, r, p, v, rhat, rho):
    """``(s, x_half, alpha, stats)``; see the module docstring."""
    n = x.shape[0]
    q, r_ = layout(n)
    w = q + r_
    f32 = nl.float32
    s_out = nl.ndarray((n,), dtype=f32, buffer=nl.shared_hbm)
    xh_out = nl.ndarray((n,), dtype=f32, buffer=nl.shared_hbm)
    alpha_out = nl.ndarray((PMAX, 1), dtype=f32, buffer=nl.shared_hbm)
    stats = nl.ndarray((1, 2), dtype=f32, buffer=nl.shared_hbm)

    def vec(name):
        return nl.ndarray((PMAX, w), dtype=f32, buffer=nl.sbuf, name=name)

    def col(name):
        return nl.ndarray((PMAX, 1), dtype=f32, buffer=nl.sbuf, name=name)

    X, R, P, V, RH, work = vec("x"), vec("r"), vec("p"), vec("v"), vec("rhat"), vec("work")
    for t_, src in ((X, x), (R, r), (P, p), (V, v), (RH, rhat)):
        nisa.memset(t_, 0.0)  # unused slots stay zero: they add nothing to the dots
        _load_vec(t_, src, n)
    rho_t = col("rho")
    nisa.dma_copy(dst=rho_t, src=rho)
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

    den, alpha, sn2 = col("den"), col("alpha"), col("sn2")
    allreduce(den, RH, V, "den")
    nisa.reciprocal(alpha, den)
    nisa.tensor_tensor(alpha, alpha, rho_t, nl.multiply)
    # s = r - alpha v (into R), x_half = x + alpha p (into X)
    nisa.scalar_tensor_tensor(dst=R, data=V, op0=nl.multiply, operand0=alpha, op1=nl.subtract, operand1=R,
                              reverse1=True)
    nisa.scalar_tensor_tensor(dst=X, data=P, op0=nl.multiply, operand0=alpha, op1=nl.add, operand1=X)
    allreduce(sn2, R, R, "sn")
    st = nl.ndarray((1, 2), dtype=f32, buffer=nl.sbuf, name="stats")
    nisa.tensor_copy(st[0:1, 0:1], den[0:1, 0:1])
    nisa.tensor_copy(st[0:1, 1:2], sn2[0:1, 0:1])
    _store_vec(s_out, R, n)
    _store_vec(xh_out, X, n)
    nisa.dma_copy(dst=alpha_out, src=alpha)
    nisa.dma_copy(dst=stats, src=st)
    return s_out, xh_out, alpha_out, stats
