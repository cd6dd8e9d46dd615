"""The vector half of one CG iteration, for an ``A`` whose matvec is another kernel.

:func:`trnsolver.cg` on a sparse ``A`` (a trnsparse CSR matrix) runs each
iteration as two launches: the matrix's SpMV kernel computes ``Ap = A p``
and this kernel does everything else -- the two dot products (per-partition
reductions, then one matmul with a ones matrix, which sums over partitions
and leaves the total on every partition), the ``x``/``r`` updates and the
next search direction -- so ``x, r, p`` and ``r^T r`` stay in HBM between
launches and only ``(r'^T r', p^T A p)`` come back to the host, which applies
SciPy's stopping rule. Vectors live in SBUF as ``[128, q + r]`` tiles with
``q, r = divmod(n, 128)`` (trnblas's vector layout): the first ``128 q``
elements as ``[128, q]``, partition ``p`` holding elements ``p q .. p q + q - 1``
(one contiguous run, one DMA for all of them), and the last ``r`` as a
``[1, r]`` row on partition 0 in columns ``q .. q + r - 1``; the other slots
are zero. Every vector uses the same layout, so the dots and updates need no
more (an element's position does not matter to them).

Dimensions
----------
``x, r, p, ap`` : ``[n]`` float32, contiguous (``ap = A p`` from the SpMV launch).
``rz`` : ``[128, 1]`` float32, ``r^T r`` of the current ``r`` on every partition.
Outputs: ``x', r', p'``, ``rz'`` ``[128, 1]`` (``r'^T r'``) and ``stats`` ``[1, 2]`` =
``(r'^T r', p^T A p)``. ``p^T A p == 0`` makes ``alpha`` infinite: the host
discards that step (the torch path stops there too).

Pseudocode
----------
    pAp = allreduce(p * Ap)             alpha = rz / pAp
    x  += alpha p;    r -= alpha Ap
    rz' = allreduce(r * r)              beta = rz' / rz       p = r + beta p

Closed forms (np = [q > 0] + [r > 0] pieces per vector)
-------------------------------------------------------
    HBM read  = 4 (4 n + 128)            HBM write = 4 (3 n + 128 + 2)
    DMA       = 7 np + 3                 Tensor = 2
    Vector    = 20      (5 memsets, 3 x 2 per all-reduce, 2 + 2 updates, 2 + 1 beta and p, 2 stats)
"""

from __future__ import annotations

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX

#: Vectors of this order fit one [128, q + r] SBUF tile each (five of them: 5 x 2 KiB per partition).
MAX_N = 65536


def layout(n: int) -> tuple[int, int]:
    """``(q, r)``: the first ``128 q`` elements as ``[128, q]`` (one contiguous run per
    partition), the last ``r < 128`` as one ``[1, r]`` row on partition 0 after them."""
    return divmod(n, PMAX)


def cg_update_counts(n: int) -> dict:
    """The closed forms above."""
    q, r = layout(n)
    np_ = (q > 0) + (r > 0)
    return {
        "kernel": "cg_update_kernel",
        "hbm_read_bytes": 4 * (4 * n + PMAX),
        "hbm_write_bytes": 4 * (3 * n + PMAX + 2),
        "dma": 7 * np_ + 3,
        "tensor": 2,
        "vector": 20,
    }


def _load_vec(dst, src, n):
    q, r = layout(n)
    if q:
        nisa.dma_copy(dst=dst[0:PMAX, 0:q], src=src[0:PMAX * q].reshape((PMAX, q)))
    if r:
        nisa.dma_copy(dst=dst[0:1, q:q + r], src=src[PMAX * q:n].reshape((1, r)))


def _store_vec(dst, src, n):
    q, r = layout(n)
    if q:
        nisa.dma_copy(dst=dst[0:PMAX * q].reshape((PMAX, q)), src=src[0:PMAX, 0:q])
    if r:
        nisa.dma_copy(dst=dst[PMAX * q:n].reshape((1, r)), src=src[0:1, q:q + r])


@nki.jit
def cg_update_kernel(x, r, p, ap, rz):
    """The vector updates of one CG iteration: ``(x', r', p', rz', stats)``; see the module docstring."""
    n = x.shape[0]
    q, r_ = layout(n)
    w = q + r_
    f32 = nl.float32
    x_out = nl.ndarray((n,), dtype=f32, buffer=nl.shared_hbm)
    r_out = nl.ndarray((n,), dtype=f32, buffer=nl.shared_hbm)
    p_out = nl.ndarray((n,), dtype=f32, buffer=nl.shared_hbm)
    rz_out = nl.ndarray((PMAX, 1), dtype=f32, buffer=nl.shared_hbm)
    stats = nl.ndarray((1, 2), dtype=f32, buffer=nl.shared_hbm)

    def vec(name):
        return nl.ndarray((PMAX, w), dtype=f32, buffer=nl.sbuf, name=name)

    def col(name):
        return nl.ndarray((PMAX, 1), dtype=f32, buffer=nl.sbuf, name=name)

    X, R, P, AP, work = vec("x"), vec("r"), vec("p"), vec("Ap"), vec("work")
    for t_ in (X, R, P, AP):
        nisa.memset(t_, 0.0)  # unused slots stay zero: they add nothing to the dots
    _load_vec(X, x, n)
    _load_vec(R, r, n)
    _load_vec(P, p, n)
    _load_vec(AP, ap, n)
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
    _store_vec(x_out, X, n)
    _store_vec(r_out, R, n)
    _store_vec(p_out, P, n)
    nisa.dma_copy(dst=rz_out, src=rz_new)
    nisa.dma_copy(dst=stats, src=st)
    return x_out, r_out, p_out, rz_out, stats
