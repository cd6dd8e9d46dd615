"""One Arnoldi step of GMRES on the device: ``w = A v_j`` orthogonalized against the basis (CGS2).

The host loop of :func:`trnsolver.gmres` launches this kernel once per inner
iteration; the ``(j + 2)``-entry Hessenberg column it returns is all the host
needs for GMRES's Givens rotations and residual estimate (the small
least-squares problem stays on the host, as in every GPU GMRES); the basis
vectors stay in HBM. Projections are matmuls over the partition (row)
dimension: ``h = V^T w`` with ``V``'s row tiles as the stationary operand
(``K`` = rows, ``M = k`` basis vectors), ``w -= V h`` with ``V^T``'s column
tiles stationary (``K = k``); classical Gram-Schmidt done twice, as the
torch path does.

Dimensions
----------
``a``  : ``[n, n]`` float32, ``A^T``.
``V``  : ``[n, k]`` float32, the basis so far (``1 <= k <= 128``); ``v_j`` is its last column.
``VT`` : ``[k, n]`` float32, the same basis transposed.
Outputs: ``v_next`` ``[n, 1]`` = ``w / ||w||`` (``w`` itself when ``||w|| = 0``),
``h`` ``[k, 1]`` = the two projections summed, ``hn`` ``[1, 1]`` = ``||w||``.

Pseudocode
----------
Nt = ceil(n / 128):

    w = A v_j                                   nt^2 matmuls
    2 x:  h_i = V^T w (nt matmuls, PSUM accumulation);  w -= V h_i (nt matmuls)
    hn = sqrt(allreduce(w . w));  v_next = w / (hn + [hn == 0])

Closed forms
------------
    HBM read  = 4 (n^2 + 2 n k)              HBM write = 4 (n + k + 1)
    DMA       = nt^2 + 2 nt + 3              Tensor = nt^2 + 4 nt + 1
    Scalar    = 1 (sqrt)                     Vector = 14 + 3 nt
"""

from __future__ import annotations

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX, cdiv, tile
from trnsolver.kernels.cg_step import _store_vec

MAX_K = 128
TINY = 2.0 ** -100


def gmres_arnoldi_counts(n: int, k: int) -> dict:
    """The closed forms above."""
    nt = cdiv(n, PMAX)
    return {
        "kernel": "gmres_arnoldi_kernel",
        "hbm_read_bytes": 4 * (n * n + 2 * n * k),
        "hbm_write_bytes": 4 * (n + k + 1),
        "dma": nt * nt + 2 * nt + 3,
        "tensor": nt * nt + 4 * nt + 1,
        "scalar": 1,
        "vector": 14 + 3 * nt,
    }


@nki.jit
def gmres_arnoldi_kernel(a, V, VT):
    """One Arnoldi step: ``(v_next, h, hn)``; see the module docstring."""
    n, k = V.shape
    nt = cdiv(n, PMAX)
    f32 = nl.float32
    v_out = nl.ndarray((n, 1), dtype=f32, buffer=nl.shared_hbm)
    h_out = nl.ndarray((k, 1), dtype=f32, buffer=nl.shared_hbm)
    hn_out = nl.ndarray((1, 1), dtype=f32, buffer=nl.shared_hbm)

    Vs = nl.ndarray((PMAX, nt * k), dtype=f32, buffer=nl.sbuf, name="V_rows")
    for t in nl.static_range(nt):
        t0, rows = tile(t, n, PMAX)
        nisa.dma_copy(dst=Vs[0:rows, t * k:(t + 1) * k], src=V[t0:t0 + rows, 0:k])
    VTs = nl.ndarray((k, n), dtype=f32, buffer=nl.sbuf, name="V_cols")
    nisa.dma_copy(dst=VTs, src=VT)
    W = nl.ndarray((PMAX, nt), dtype=f32, buffer=nl.sbuf, name="w")
    nisa.memset(W, 0.0)
    # w = A v_j  (v_j: the last basis column)
    for i in nl.static_range(nt):
        i0, ri = tile(i, n, PMAX)
        ps = nl.ndarray((ri, 1), dtype=f32, buffer=nl.psum, name="Av_ps")
        for kk in nl.static_range(nt):
            k0, rk = tile(kk, n, PMAX)
            blk = nl.ndarray((rk, ri), dtype=f32, buffer=nl.sbuf, name="a_block")
            nisa.dma_copy(dst=blk, src=a[k0:k0 + rk, i0:i0 + ri])
            nisa.nc_matmul(ps, blk, Vs[0:rk, kk * k + k - 1:kk * k + k])
        nisa.tensor_copy(W[0:ri, i:i + 1], ps)

    hsum = nl.ndarray((k, 1), dtype=f32, buffer=nl.sbuf, name="h_sum")
    for rep in nl.static_range(2):  # classical Gram-Schmidt, twice
        hp = nl.ndarray((k, 1), dtype=f32, buffer=nl.psum, name="h_ps")
        for t in nl.static_range(nt):
            _, rows = tile(t, n, PMAX)
            nisa.nc_matmul(hp, Vs[0:rows, t * k:(t + 1) * k], W[0:rows, t:t + 1])
        h = nl.ndarray((k, 1), dtype=f32, buffer=nl.sbuf, name="h")
        nisa.tensor_copy(h, hp)
        if rep == 0:
            nisa.tensor_copy(hsum, h)
        else:
            nisa.tensor_tensor(hsum, hsum, h, nl.add)
        for t in nl.static_range(nt):
            t0, rows = tile(t, n, PMAX)
            pw = nl.ndarray((rows, 1), dtype=f32, buffer=nl.psum, name="Vh_ps")
            nisa.nc_matmul(pw, VTs[0:k, t0:t0 + rows], h)
            nisa.tensor_tensor(W[0:rows, t:t + 1], W[0:rows, t:t + 1], pw, nl.subtract)

    # ||w|| on every partition, then v_next = w / (||w|| + [||w|| == 0])
    sq = nl.ndarray((PMAX, nt), dtype=f32, buffer=nl.sbuf, name="w2")
    nisa.tensor_tensor(sq, W, W, nl.multiply)
    part = nl.ndarray((PMAX, 1), dtype=f32, buffer=nl.sbuf, name="w2_part")
    nisa.tensor_reduce(part, nl.add, sq, axis=1)
    ones = nl.ndarray((PMAX, PMAX), dtype=f32, buffer=nl.sbuf, name="ones")
    nisa.memset(ones, 1.0)
    tot = nl.ndarray((PMAX, 1), dtype=f32, buffer=nl.psum, name="w2_ps")
    nisa.nc_matmul(tot, ones, part)
    tiny = nl.ndarray((PMAX, 1), dtype=f32, buffer=nl.sbuf, name="tiny")
    nisa.memset(tiny, TINY)
    hn = nl.ndarray((PMAX, 1), dtype=f32, buffer=nl.sbuf, name="hn")
    nisa.activation(hn, op=nl.sqrt, data=tot, bias=tiny)
    nz = nl.ndarray((PMAX, 1), dtype=f32, buffer=nl.sbuf, name="nonzero")
    nisa.tensor_scalar(nz, tot, nl.greater, 0.0)
    nisa.tensor_tensor(hn, hn, nz, nl.multiply)
    safe = nl.ndarray((PMAX, 1), dtype=f32, buffer=nl.sbuf, name="safe")
    nisa.tensor_scalar(safe, hn, nl.equal, 0.0, op1=nl.add, operand1=hn)
    nisa.reciprocal(safe, safe)
    nisa.tensor_scalar(W, W, nl.multiply, safe)
    _store_vec(v_out, W, n, nt)
    nisa.dma_copy(dst=h_out, src=hsum)
    nisa.dma_copy(dst=hn_out, src=hn[0:1, 0:1])
    return v_out, h_out, hn_out
