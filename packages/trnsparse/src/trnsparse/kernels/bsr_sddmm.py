"""BSR SDDMM kernel: ``P_i = X[rows of tile i] @ Y[:, cols of tile i]`` for every stored 128x128 tile.

Dimensions
----------
``x_t`` : ``[k, m]`` -- X transposed, the contraction dim k on partitions.
``y``   : ``[k, n]`` -- k on partitions.
float32. Output ``p`` : ``[nblk, 128, 128]`` float32, tile i holding
``(X @ Y)`` restricted to the tile; entries outside ``m x n`` (ragged edge
tiles) are zero. Compile-time: ``row_ptrs`` and ``cols`` (the block row
pointers and block column indices as tuples): the kernel is specialized
to the sparsity pattern, and all slices are static.

Pseudocode
----------
::

    for block row r with a stored tile:
        Xr = load x_t[:, rows of r]                       (tk tiles, stationary)
        for stored tile i of r:
            Yi = load y[:, cols of i]                     (tk tiles)
            acc = sum_kt Xr[kt]^T @ Yi[kt]                (tk matmuls, one PSUM tile)
            p[i] = copy(acc) (zero-padded to 128 x 128)

Per block row with at least one stored tile: its rows of X^T, ``tk =
ceil(k/128)`` tiles ``[<=128, mm]`` (the stationary operands, loaded once
for all tiles of the row). Per stored tile: the tile's columns of Y
(``tk`` DMAs of ``[<=128, nn]``), ``tk`` ``nc_matmul`` accumulated in one
PSUM tile ``[mm, nn]``, one PSUM -> SBUF copy into a 128x128 tile (zeroed
first by a memset only for ragged edge tiles) and one store. Only the
stored tiles are computed, and only their rows of X and columns of Y read.

Closed forms (s = 4 bytes, tk = ceil(k/128), R = block rows with a tile,
mm_r / nn_i the valid rows / columns of block row r / tile i, g = ragged
tiles (mm < 128 or nn < 128))
------------------------------------------------------------------------
    HBM bytes read    = 4*k*(sum_{r in R} mm_r + sum_i nn_i)
    HBM bytes written = 4*128*128*nblk
    Tensor Engine instructions (nc_matmul) = tk*nblk
    Vector instructions = nblk + g
    DMA transfers     = tk*|R| + tk*nblk + nblk
    matmul flops      = 2*k*sum_i mm_i*nn_i
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import cdiv, tile

TB = 128


def bsr_sddmm_counts(m, n, k, row_ptrs, cols):
    """The closed forms above as a dict."""
    tk = cdiv(k, TB)
    nblk = len(cols)
    rows_read, cols_read, ragged, flops, nonempty = 0, 0, 0, 0, 0
    for r in range(len(row_ptrs) - 1):
        lo, hi = row_ptrs[r], row_ptrs[r + 1]
        if lo == hi:
            continue
        nonempty += 1
        _, mm = tile(r, m, TB)
        rows_read += mm
        for i in range(lo, hi):
            _, nn = tile(int(cols[i]), n, TB)
            cols_read += nn
            ragged += mm < TB or nn < TB
            flops += 2 * k * mm * nn
    return {
        "hbm_read_bytes": 4 * k * (rows_read + cols_read),
        "hbm_write_bytes": 4 * TB * TB * nblk,
        "tensor": tk * nblk,
        "vector": nblk + ragged,
        "dma": tk * nonempty + tk * nblk + nblk,
        "flops": flops,
    }


@nki.jit
def bsr_sddmm_kernel(x_t, y, row_ptrs=(), cols=()):
    """The stored tiles of ``X @ Y`` (x_t = X^T [k, m], y [k, n]) -> [nblk, 128, 128] fp32."""
    k, m = x_t.shape
    n = y.shape[1]
    nblk = len(cols)
    p = nl.ndarray((max(nblk, 1), TB, TB), dtype=nl.float32, buffer=nl.shared_hbm)
    tk = cdiv(k, TB)
    for r in nl.static_range(len(row_ptrs) - 1):
        lo, hi = row_ptrs[r], row_ptrs[r + 1]
        if lo == hi:
            continue
        m0, mm = tile(r, m, TB)
        xs = nl.ndarray((TB, tk * mm), dtype=x_t.dtype, buffer=nl.sbuf, name="x_rows")
        for kt in nl.static_range(tk):
            _, kk = tile(kt, k, TB)
            nisa.dma_copy(dst=xs[0:kk, kt * mm:(kt + 1) * mm], src=x_t[kt * TB:kt * TB + kk, m0:m0 + mm])
        for i in nl.static_range(lo, hi):
            c0, nn = tile(cols[i], n, TB)
            ys = nl.ndarray((TB, tk * nn), dtype=y.dtype, buffer=nl.sbuf, name="y_cols")
            acc = nl.ndarray((mm, nn), dtype=nl.float32, buffer=nl.psum, name="acc")
            for kt in nl.static_range(tk):
                _, kk = tile(kt, k, TB)
                nisa.dma_copy(dst=ys[0:kk, kt * nn:(kt + 1) * nn], src=y[kt * TB:kt * TB + kk, c0:c0 + nn])
                nisa.nc_matmul(acc, xs[0:kk, kt * mm:(kt + 1) * mm], ys[0:kk, kt * nn:(kt + 1) * nn])
            res = nl.ndarray((TB, TB), dtype=nl.float32, buffer=nl.sbuf, name="p_tile")
            if mm < TB or nn < TB:
                nisa.memset(res, 0.0)
            nisa.tensor_copy(res[0:mm, 0:nn], acc)
            nl.store(p[i], value=res)
    return p
