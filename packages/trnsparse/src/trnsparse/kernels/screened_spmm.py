"""Screened SpMM kernel: ``C[n, N] = (A * mask) @ B`` with a rank-1 Schwarz mask.

The mask ``mask_ij = |d_i| |d_j| > threshold`` is exact. The host turns it
into a comparison of integers (O(n log n) work, no n x n array):
``rank_j`` is the position of ``|d_j|`` among the sorted ``|d|`` (equal
values share a rank) and ``r_i`` the smallest sorted position ``k`` with
``|d_i| * sorted[k] > threshold`` (found by a vectorized binary search on
that same float64 predicate, monotone in k). Then
``mask_ij = (r_i <= rank_j)``: both are integers < 2^24, exact in fp32.

Dimensions
----------
``a_t``  : ``[n, n]`` float32, A transposed (``a_t[j, i] = A[i, j]``): the
           contraction index j is the partition dim of the stationary tile.
``b``    : ``[n, N]`` float32, j on the partition dim.
``rank`` : ``[n, 1]`` float32 (``rank_j``, one per partition).
``rthr`` : ``[1, n]`` float32 (``r_i``), read into every partition.
Output ``c`` : ``[n, N]`` float32.

Pseudocode
----------
Tiles T = 128, TN = 512, NP = 2048 columns per panel (4 PSUM banks)::

    for each panel, output row tile i:
        r = rthr[i] on every partition
        for contraction tile j:
            M = (r <= rank[j]) * a_t[j, i]                  (one Vector instruction)
            acc[sub] += M^T-stationary @ b[j, panel sub]    (one matmul per 512 columns)
        c[i, panel] = copy(acc)

Per panel and 128-row output tile i: ``r_i`` of the tile into all
partitions (one DMA, partition step 0); per 128-row contraction tile j:
the A^T tile, ``rank_j`` and the B rows (three DMAs), then ONE Vector
instruction ``scalar_tensor_tensor`` forms the masked tile
``(r_i <= rank_j) * A^T[j, i]`` (operand0 is the (P, 1) rank column, so the
row-wise comparison needs no broadcast), then one ``nc_matmul`` per
512-column sub-tile accumulates in PSUM; one copy and store per sub-tile.

Closed forms (t = ceil(n/128), tn = ceil(N/512), np = ceil(N/2048))
-------------------------------------------------------------------
    HBM bytes read    = np*(4*128*n + 4*n*n + 4*t*n) + 4*t*n*N
    HBM bytes written = 4*n*N
    Tensor Engine instructions (nc_matmul) = t*t*tn
    Vector instructions = np*t*t + t*tn     (masks, PSUM copies)
    DMA transfers     = np*t*(1 + 3*t) + t*tn
    matmul flops      = 2*n*n*N
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import cdiv, tile
from trnsparse.kernels.bsr_spmm import NP, TN, panels

T = 128


def screened_spmm_counts(n, N):
    """The closed forms above as a dict."""
    t, tn, npn = cdiv(n, T), cdiv(N, TN), cdiv(N, NP)
    return {
        "hbm_read_bytes": npn * (4 * T * n + 4 * n * n + 4 * t * n) + 4 * t * n * N,
        "hbm_write_bytes": 4 * n * N,
        "tensor": t * t * tn,
        "vector": npn * t * t + t * tn,
        "dma": npn * t * (1 + 3 * t) + t * tn,
        "flops": 2 * n * n * N,
    }


@nki.jit
def screened_spmm_kernel(a_t, b, rank, rthr):
    """``C = (A * [r_i <= rank_j]) @ b`` with ``a_t = A^T`` -> C [n, N] fp32."""
    n, N = b.shape
    c = nl.ndarray((n, N), dtype=nl.float32, buffer=nl.shared_hbm)
    t = cdiv(n, T)
    for n0, npw, nsub in panels(N):
        for it in nl.static_range(t):
            i0, mm = tile(it, n, T)
            rrow = nl.ndarray((T, mm), dtype=nl.float32, buffer=nl.sbuf, name="r_row")
            nisa.dma_copy(dst=rrow, src=rthr.ap(pattern=[[0, T], [1, mm]], offset=i0))
            accs = [nl.ndarray((mm, tile(s, npw, TN)[1]), dtype=nl.float32, buffer=nl.psum, name=f"acc{s}")
                    for s in range(nsub)]
            for jt in nl.static_range(t):
                j0, kk = tile(jt, n, T)
                at = nl.ndarray((kk, mm), dtype=nl.float32, buffer=nl.sbuf, name="a_t")
                nisa.dma_copy(dst=at, src=a_t[j0:j0 + kk, i0:i0 + mm])
                rc = nl.ndarray((kk, 1), dtype=nl.float32, buffer=nl.sbuf, name="rank")
                nisa.dma_copy(dst=rc, src=rank[j0:j0 + kk, :])
                bt = nl.ndarray((kk, npw), dtype=nl.float32, buffer=nl.sbuf, name="b_rows")
                nisa.dma_copy(dst=bt, src=b[j0:j0 + kk, n0:n0 + npw])
                msk = nl.ndarray((kk, mm), dtype=nl.float32, buffer=nl.sbuf, name="masked")
                # (r_i <= rank_j) * A^T[j, i]: the comparison gives 1.0 / 0.0
                nisa.scalar_tensor_tensor(msk, data=rrow[0:kk, :], op0=nl.less_equal, operand0=rc,
                                          op1=nl.multiply, operand1=at)
                for s in nl.static_range(nsub):
                    j, nn = tile(s, npw, TN)
                    nisa.nc_matmul(accs[s], msk, bt[:, j:j + nn])
            for s in nl.static_range(nsub):
                j, nn = tile(s, npw, TN)
                res = nl.ndarray((mm, nn), dtype=nl.float32, buffer=nl.sbuf, name="c_tile")
                nisa.tensor_copy(res, accs[s])
                nl.store(c[i0:i0 + mm, n0 + j:n0 + j + nn], value=res)
    return c
