"""Cholesky of one diagonal tile (``potf2``, n <= 128) on the Vector/Scalar Engines.

The blocked Cholesky of :mod:`trnsolver._nki.factor_blocked` factors its 128 x 128
diagonal blocks with this kernel (and a matrix of order <= 128 is this one
launch). Partition ``c`` holds row ``c`` of the symmetric tile (= column
``c``), so step ``j`` scales partition ``j``'s row into column ``j`` of ``L``
and the rank-1 trailing update reaches every partition through one ``K = 1``
matmul with a ones row (the Tensor Engine is the cross-partition path).

Dimensions
----------
``a`` : ``[n, n]`` float32 in HBM, symmetric (the host mirrors the triangle it
        was given), ``1 <= n <= 128``.
Outputs: ``lt`` ``[n, n]``: on and above the diagonal ``L^T`` (row ``j`` is
column ``j`` of ``L``); below it stale values the host drops. ``d`` ``[n, 1]``:
the pivot ``d_j`` (the Schur complement's ``(j, j)`` entry) before its square
root; the first ``d_j <= 0`` (or NaN) is the non-positive-definite leading
minor of order ``j + 1`` (``potrf``'s ``info``). A non-positive pivot is
replaced by 1 so the remaining steps stay finite; the host reports the
failure and ignores the factor.

Pseudocode
----------
Step j = 0 .. n-1, on partition j unless marked:

    d_j = P[j, j];  ok = d_j > 0;  c = ok ? d_j : 1        Vector (3 ops, arithmetic select)
    r = rsqrt(c)                                            Scalar
    P[j, j:] *= r                                           Vector: P[j, j] = sqrt(d_j), then l
    if j < n-1:
        B = ones[j]^T P[j, j+1:]          (all partitions)  one K = 1 matmul (PSUM)
        l_c = rowsum(B * I[:, j+1:])      (all partitions)  = l_c for c > j, 0 otherwise
        P[:, j+1:] -= l_c * B                               Vector

Closed forms
------------
    HBM read  = 4 n^2               HBM write = 4 n^2 + 4 n
    DMA       = 3                   Tensor = n - 1
    Scalar    = n                   GpSimd = 1 (iota)
    Vector    = 2 + 5 n + 3 (n - 1)  (ones, identity; per step copy d, select (3), scale;
                                      product, reduce, update)
"""

from __future__ import annotations

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX

MAX_N = PMAX  # one tile: the partition dim


def potrf_tile_counts(n: int) -> dict:
    """The closed forms above."""
    return {
        "kernel": "potrf_tile_kernel",
        "hbm_read_bytes": 4 * n * n,
        "hbm_write_bytes": 4 * n * n + 4 * n,
        "dma": 3,
        "tensor": n - 1,
        "scalar": n,
        "vector": 2 + 5 * n + 3 * (n - 1),
        "gpsimd": 1,
    }


@nki.jit
def potrf_tile_kernel(a):
    """Factor the symmetric tile ``a`` [n, n]: ``(lt [n, n], d [n, 1])``; see the module docstring."""
    n = a.shape[0]
    f32 = nl.float32
    lt = nl.ndarray((n, n), dtype=f32, buffer=nl.shared_hbm)
    d_out = nl.ndarray((n, 1), dtype=f32, buffer=nl.shared_hbm)

    P = nl.ndarray((n, n), dtype=f32, buffer=nl.sbuf, name="tile")
    nisa.dma_copy(dst=P, src=a)
    ones = nl.ndarray((n, n), dtype=f32, buffer=nl.sbuf, name="ones")
    nisa.memset(ones, 1.0)
    eye = nl.ndarray((n, n), dtype=f32, buffer=nl.sbuf, name="eye")
    nisa.iota(eye, pattern=[[-1, n]], channel_multiplier=1)          # c - x
    nisa.tensor_scalar(eye, eye, nl.equal, 0.0)
    d = nl.ndarray((n, 1), dtype=f32, buffer=nl.sbuf, name="pivots")
    ok = nl.ndarray((n, 1), dtype=f32, buffer=nl.sbuf, name="positive")
    alt = nl.ndarray((n, 1), dtype=f32, buffer=nl.sbuf, name="fallback")
    c = nl.ndarray((n, 1), dtype=f32, buffer=nl.sbuf, name="safe_pivot")
    r = nl.ndarray((n, 1), dtype=f32, buffer=nl.sbuf, name="rsqrt_pivot")
    lc = nl.ndarray((n, 1), dtype=f32, buffer=nl.sbuf, name="l_own")
    tmp = nl.ndarray((n, n), dtype=f32, buffer=nl.sbuf, name="work")

    for j in nl.static_range(n):
        s = slice(j, j + 1)
        nisa.tensor_copy(d[s, 0:1], P[s, j:j + 1])
        nisa.tensor_scalar(ok[s, 0:1], d[s, 0:1], nl.greater, 0.0)
        nisa.tensor_scalar(alt[s, 0:1], ok[s, 0:1], nl.multiply, -1.0, op1=nl.add, operand1=1.0)
        nisa.scalar_tensor_tensor(dst=c[s, 0:1], data=d[s, 0:1], op0=nl.multiply, operand0=ok[s, 0:1],
                                  op1=nl.add, operand1=alt[s, 0:1])
        nisa.activation(r[s, 0:1], op=nl.rsqrt, data=c[s, 0:1])
        nisa.tensor_scalar(P[s, j:n], P[s, j:n], nl.multiply, r[s, 0:1])
        if j < n - 1:
            w = n - j - 1
            B = nl.ndarray((n, w), dtype=f32, buffer=nl.psum, name="bcast_l")
            nisa.nc_matmul(B, ones[s, 0:n], P[s, j + 1:n])
            nisa.tensor_tensor(tmp[0:n, 0:w], B, eye[0:n, j + 1:n], nl.multiply)
            nisa.tensor_reduce(lc, nl.add, tmp[0:n, 0:w], axis=1)
            nisa.scalar_tensor_tensor(dst=P[0:n, j + 1:n], data=B, op0=nl.multiply, operand0=lc,
                                      op1=nl.subtract, operand1=P[0:n, j + 1:n], reverse1=True)

    nisa.dma_copy(dst=lt, src=P)
    nisa.dma_copy(dst=d_out, src=d)
    return lt, d_out
