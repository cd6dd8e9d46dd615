"""One conjugate-gradient iteration on the device (dense ``A``; no preconditioner or Jacobi's).

The host loop of :func:`trnsolver.cg` launches this kernel once per
iteration and reads back only two scalars (``||r||^2`` and ``p^T A p``) to
apply SciPy's stopping rule; ``x``, ``r``, ``p`` and ``r^T r`` stay in HBM
between launches. Vectors live in SBUF as ``[128, nt]`` tiles (element
``i`` at partition ``i % 128``, column ``i // 128``; the ragged tail is
zero), so the matvec is ``nt^2`` Tensor Engine matmuls with ``A``'s blocks as
the stationary operand (``A`` symmetric: block ``(k, i)`` is ``A_ik^T``) and
every dot product is a per-partition reduction followed by one matmul with a
ones matrix, which sums over partitions and leaves the total on every
partition (no scalar has to come back to the host to be broadcast).

Dimensions
----------
``a``  : ``[n, n]`` float32 symmetric.   ``x, r, p`` : ``[n, 1]`` float32.
``rz`` : ``[128, 1]`` float32, ``r^T z`` of the previous iteration on every
         partition (the first launch passes ones with ``p = 0``).
``dinv`` : optional ``[n, 1]`` float32, ``1 / diag(A)`` (Jacobi preconditioner,
         ``z = dinv * r``; without it ``z = r``).
Outputs: ``x', r', p'``, ``rz'`` ``[128, 1]`` (this iteration's ``r^T r``), and
``stats`` ``[1, 2]`` = ``(||r'||^2, p'^T A p')``. ``p^T A p == 0`` makes
``alpha`` infinite: the host discards that step (the torch path stops there too).

Pseudocode
----------
    z    = r (or dinv * r)
    rz'  = allreduce(r * z)             beta = rz' / rz        p = z + beta p
    Ap   = A p                          (nt^2 matmuls, PSUM accumulation per row block)
    pAp  = allreduce(p * Ap)            alpha = rz' / pAp
    x   += alpha p;   r -= alpha Ap;    rn2 = allreduce(r * r)

Closed forms (nt = ceil(n / 128); with dinv: + 4 n HBM read, + nt DMA, + 2 Vector)
----------------------------------------------------------------------------------
    HBM read  = 4 (n^2 + 3 n + 128)      HBM write = 4 (3 n + 128 + 2)
    DMA       = nt^2 + 6 nt + 3          Tensor = nt^2 + 3
    Vector    = 23 + nt      (4 + 1 memsets, 3 x 3 per all-reduce, 2 + 1 + nt + 2 + 2 + 2)
"""

from __future__ import annotations

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX, cdiv, tile

#: A matrix of this order keeps the kernel's vectors in one [128, nt] tile each (SBUF is not the limit: A streams).
MAX_N = 65536


def cg_step_counts(n: int, jacobi: bool = False) -> dict:
    """The closed forms above (``jacobi``: with the diagonal preconditioner ``dinv``)."""
    nt = cdiv(n, PMAX)
    return {
        "kernel": "cg_step_kernel",
        "hbm_read_bytes": 4 * (n * n + (4 if jacobi else 3) * n + PMAX),
        "hbm_write_bytes": 4 * (3 * n + PMAX + 2),
        "dma": nt * nt + (7 if jacobi else 6) * nt + 3,
        "tensor": nt * nt + 3,
        "vector": 23 + nt + (2 if jacobi else 0),
    }


def _load_vec(dst, src, n, nt):
    for t in nl.static_range(nt):
        t0, rows = tile(t, n, PMAX)
        nisa.dma_copy(dst=dst[0:rows, t:t + 1], src=src[t0:t0 + rows, 0:1])


def _store_vec(dst, src, n, nt):
    for t in nl.static_range(nt):
        t0, rows = tile(t, n, PMAX)
        nisa.dma_copy(dst=dst[t0:t0 + rows, 0:1], src=src[0:rows, t:t + 1])


@nki.jit
def cg_step_kernel(a, x, r, p, rz, dinv=None):
    """One CG iteration: ``(x', r', p', rz', stats)``; see the module docstring."""
    n = a.shape[0]
    nt = cdiv(n, PMAX)
    f32 = nl.float32
    x_out = nl.ndarray((n, 1), dtype=f32, buffer=nl.shared_hbm)
    r_out = nl.ndarray((n, 1), dtype=f32, buffer=nl.shared_hbm)
    p_out = nl.ndarray((n, 1), dtype=f32, buffer=nl.shared_hbm)
    rz_out = nl.ndarray((PMAX, 1), dtype=f32, buffer=nl.shared_hbm)
    stats = nl.ndarray((1, 2), dtype=f32, buffer=nl.shared_hbm)

    def vec(name):
        return nl.ndarray((PMAX, nt), dtype=f32, buffer=nl.sbuf, name=name)

    X, R, P, AP, work = vec("x"), vec("r"), vec("p"), vec("Ap"), vec("work")
    for t_ in (X, R, P, AP):
        nisa.memset(t_, 0.0)
    _load_vec(X, x, n, nt)
    _load_vec(R, r, n, nt)
    _load_vec(P, p, n, nt)
    rz_old = nl.ndarray((PMAX, 1), dtype=f32, buffer=nl.sbuf, name="rz_prev")
    nisa.dma_copy(dst=rz_old, src=rz)
    ones = nl.ndarray((PMAX, PMAX), dtype=f32, buffer=nl.sbuf, name="ones")
    nisa.memset(ones, 1.0)

    def allreduce(dst, u, v, name):
        """dst [128, 1] = sum(u * v) on every partition."""
        part = nl.ndarray((PMAX, 1), dtype=f32, buffer=nl.sbuf, name=name + "_part")
        nisa.tensor_tensor(work, u, v, nl.multiply)
        nisa.tensor_reduce(part, nl.add, work, axis=1)
        ps = nl.ndarray((PMAX, 1), dtype=f32, buffer=nl.psum, name=name + "_ps")
        nisa.nc_matmul(ps, ones, part)
        nisa.tensor_copy(dst, ps)

    def col(name):
        return nl.ndarray((PMAX, 1), dtype=f32, buffer=nl.sbuf, name=name)

    rz_new, beta, pap, alpha, rn2 = col("rz"), col("beta"), col("pAp"), col("alpha"), col("rn2")
    Z = R
    if dinv is not None:  # Jacobi preconditioner: z = r / diag(A)
        D, Z = vec("dinv"), vec("z")
        nisa.memset(D, 0.0)
        _load_vec(D, dinv, n, nt)
        nisa.tensor_tensor(Z, R, D, nl.multiply)
    allreduce(rz_new, R, Z, "rz")
    nisa.reciprocal(beta, rz_old)
    nisa.tensor_tensor(beta, beta, rz_new, nl.multiply)
    nisa.scalar_tensor_tensor(dst=P, data=P, op0=nl.multiply, operand0=beta, op1=nl.add, operand1=Z)
    # Ap = A p, row block i: sum_k A_ik p_k with stationary a[k-block, i-block] = A_ik^T (A symmetric)
    for i in nl.static_range(nt):
        i0, ri = tile(i, n, PMAX)
        ps = nl.ndarray((ri, 1), dtype=f32, buffer=nl.psum, name="Ap_ps")
        for k in nl.static_range(nt):
            k0, rk = tile(k, n, PMAX)
            blk = nl.ndarray((rk, ri), dtype=f32, buffer=nl.sbuf, name="a_block")
            nisa.dma_copy(dst=blk, src=a[k0:k0 + rk, i0:i0 + ri])
            nisa.nc_matmul(ps, blk, P[0:rk, k:k + 1])
        nisa.tensor_copy(AP[0:ri, i:i + 1], ps)
    allreduce(pap, P, AP, "pap")
    nisa.reciprocal(alpha, pap)
    nisa.tensor_tensor(alpha, alpha, rz_new, nl.multiply)
    nisa.scalar_tensor_tensor(dst=X, data=P, op0=nl.multiply, operand0=alpha, op1=nl.add, operand1=X)
    nisa.scalar_tensor_tensor(dst=R, data=AP, op0=nl.multiply, operand0=alpha, op1=nl.subtract, operand1=R,
                              reverse1=True)
    allreduce(rn2, R, R, "rn")
    st = nl.ndarray((1, 2), dtype=f32, buffer=nl.sbuf, name="stats")
    nisa.tensor_copy(st[0:1, 0:1], rn2[0:1, 0:1])
    nisa.tensor_copy(st[0:1, 1:2], pap[0:1, 0:1])
    _store_vec(x_out, X, n, nt)
    _store_vec(r_out, R, n, nt)
    _store_vec(p_out, P, n, nt)
    nisa.dma_copy(dst=rz_out, src=rz_new)
    nisa.dma_copy(dst=stats, src=st)
    return x_out, r_out, p_out, rz_out, stats
