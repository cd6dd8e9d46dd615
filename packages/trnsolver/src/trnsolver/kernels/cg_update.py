"""The vector half of one CG iteration, for an ``A`` whose matvec is another kernel.

:func:`trnsolver.cg` on a sparse ``A`` (a trnsparse CSR matrix) runs each
iteration as two launches: the matrix's SpMV kernel computes ``Ap = A p``
and this kernel does everything else -- the two dot products (per-partition
reductions, then one matmul with a ones matrix, which sums over partitions
and leaves the total on every partition), the ``x``/``r`` updates and the
next search direction -- so ``x, r, p`` and ``r^T r`` stay in HBM between
launches and only ``(r'^T r', p^T A p)`` come back to the host, which applies
SciPy's stopping rule. Vectors live in SBUF as ``[128, nt]`` tiles (element
``i`` at partition ``i % 128``, column ``i // 128``; the ragged tail is zero).

Dimensions
----------
``x, r, p, ap`` : ``[n, 1]`` float32 (``ap = A p`` from the SpMV launch).
``rz`` : ``[128, 1]`` float32, ``r^T r`` of the current ``r`` on every partition.
Outputs: ``x', r', p'``, ``rz'`` ``[128, 1]`` (``r'^T r'``) and ``stats`` ``[1, 2]`` =
``(r'^T r', p^T A p)``. ``p^T A p == 0`` makes ``alpha`` infinite: the host
discards that step (the torch path stops there too).

Pseudocode
----------
    pAp = allreduce(p * Ap)             alpha = rz / pAp
    x  += alpha p;    r -= alpha Ap
    rz' = allreduce(r * r)              beta = rz' / rz       p = r + beta p

Closed forms (nt = ceil(n / 128))
---------------------------------
    HBM read  = 4 (4 n + 128)            HBM write = 4 (3 n + 128 + 2)
    DMA       = 7 nt + 3                 Tensor = 2
    Vector    = 20      (5 memsets, 3 x 2 per all-reduce, 2 + 2 updates, 2 + 1 beta and p, 2 stats)
"""

from __future__ import annotations

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX, cdiv

#: Vectors of this order fit one [128, nt] SBUF tile each (five of them: 5 x 2 KiB per partition).
MAX_N = 65536


def cg_update_counts(n: int) -> dict:
    """The closed forms above."""
    nt = cdiv(n, PMAX)
    return {
        "kernel": "cg_update_kernel",
        "hbm_read_bytes": 4 * (4 * n + PMAX),
        "hbm_write_bytes": 4 * (3 * n + PMAX + 2),
        "dma": 7 * nt + 3,
        "tensor": 2,
        "vector": 20,
    }


def _load_vec(dst, src, n, nt):
    for t in nl.static_range(nt):
        t0 = t * PMAX
        rows = min(PMAX, n - t0)
        nisa.dma_copy(dst=dst[0:rows, t:t + 1], src=src[t0:t0 + rows, 0:1])


def _store_vec(dst, src, n, nt):
    for t in nl.static_range(nt):
        t0 = t * PMAX
        rows = min(PMAX, n - t0)
        nisa.dma_copy(dst=dst[t0:t0 + rows, 0:1], src=src[0:rows, t:t + 1])


@nki.jit
def cg_update_kernel(x, r, p, ap, rz):
    """The vector updates of one CG iteration: ``(x', r', p', rz', stats)``; see the module docstring."""
    n = x.shape[0]
    nt = cdiv(n, PMAX)
    f32 = nl.float32
    x_out = nl.ndarray((n, 1), dtype=f32, buffer=nl.shared_hbm)
    r_out = nl.ndarray((n, 1), dtype=f32, buffer=nl.shared_hbm)
    p_out = nl.ndarray((n, 1), dtype=f32, buffer=nl.shared_hbm)
    rz_out = nl.ndarray((PMAX, 1), dtype=f32, buffer=nl.shared_hbm)
    stats = nl.ndarray((1, 2), dtype=f32, buffer=nl.shared_hbm)

    def vec(name):
        return nl.ndarray((PMAX, nt), dtype=f32, buffer=nl.sbuf, name=name)

    def col(name):
        return nl.ndarray((PMAX, 1), dtype=f32, buffer=nl.sbuf, name=name)

    X, R, P, AP, work = vec("x"), vec("r"), vec("p"), vec("Ap"), vec("work")
    for t_ in (X, R, P, AP):
        nisa.memset(t_, 0.0)  # the ragged tail stays zero: it adds nothing to the dots
    _load_vec(X, x, n, nt)
    _load_vec(R, r, n, nt)
    _load_vec(P, p, n, nt)
    _load_vec(AP, ap, n, nt)
    rz_old = col("rz_prev")
    nisa.dma_copy(dst=rz_old, src=rz)
    ones = nl.ndarray((PMAX, PMAX), dtype=f32, buffer=nl.sbuf, name="ones")
    nisa.memset(ones, 1.0)

    def allreduce(dst, u, v, name):
        """dst [128, 1] = sum(u * v) on every partition."""
        part = col(name + "_part")
        nisa.tensor_tensor(work, u, v, nl.multiply)
        nisa.tensor_reduce(part, nl.add, work, axis=1)
        ps = nl.ndarray((PMAX, 1), dtype=f32, buffer=nl.psum, name=name + "_ps")
        nisa.nc_matmul(ps, ones, part)
        nisa.tensor_copy(dst, ps)

    pap, alpha, rz_new, beta = col("pAp"), col("alpha"), col("rz"), col("beta")
    allreduce(pap, P, AP, "pap")
    nisa.reciprocal(alpha, pap)
    nisa.tensor_tensor(alpha, alpha, rz_old, nl.multiply)
    nisa.scalar_tensor_tensor(dst=X, data=P, op0=nl.multiply, operand0=alpha, op1=nl.add, operand1=X)
    nisa.scalar_tensor_tensor(dst=R, data=AP, op0=nl.multiply, operand0=alpha, op1=nl.subtract, operand1=R,
                              reverse1=True)
    allreduce(rz_new, R, R, "rn")
    nisa.reciprocal(beta, rz_old)
    nisa.tensor_tensor(beta, beta, rz_new, nl.multiply)
    nisa.scalar_tensor_tensor(dst=P, data=P, op0=nl.multiply, operand0=beta, op1=nl.add, operand1=R)
    st = nl.ndarray((1, 2), dtype=f32, buffer=nl.sbuf, name="stats")
    nisa.tensor_copy(st[0:1, 0:1], rz_new[0:1, 0:1])
    nisa.tensor_copy(st[0:1, 1:2], pap[0:1, 0:1])
    _store_vec(x_out, X, n, nt)
    _store_vec(r_out, R, n, nt)
    _store_vec(p_out, P, n, nt)
    nisa.dma_copy(dst=rz_out, src=rz_new)
    nisa.dma_copy(dst=stats, src=st)
    return x_out, r_out, p_out, rz_out, stats
