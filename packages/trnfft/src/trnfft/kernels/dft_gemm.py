"""DFT-as-GEMM kernel for small lengths: ``[Yr | Yi] = [xr | xi] @ [[C, S], [-S, C]]``.

Dimensions
----------
``xt`` : ``[K, B]`` -- the rows' operands transposed so the contraction dim
         ``K`` is the partition dim: ``K = 2n`` rows ``[xr; xi]`` (float32 or
         bfloat16), or ``K = 6n`` for ``"bf16_refined"`` (see below).
``w``  : ``[K, N]`` -- the real block form of the DFT matrix ``W = C + i S``
         (``N = 2n`` columns ``[Yr | Yi]``; rows ``[C, S]`` for ``xr`` and
         ``[-S, C]`` for ``xi``; ``S`` negated for the inverse), same dtype.
Output ``y`` : ``[B, N]`` float32 ``[Yr | Yi]`` -- the batch is the partition
dim of the result (PSUM tiles ``[<= 128 rows, <= 512]``), stored as rows.

The complex product is real matmuls: each ``nc_matmul`` contracts one
128-row slice of ``K`` with the batch tile's ``xt`` slice as the stationary
operand (reused for every column tile) and a ``[<=128, <=512]`` tile of the
DFT matrix as the moving operand. When the whole DFT matrix fits
``W_BUDGET`` bytes per partition (``n <= 704`` fp32, ``n <= 1024`` bf16,
``n <= 585`` bf16-refined) it is loaded once and stays resident in SBUF for
every batch tile; otherwise its tiles stream in once per batch tile.

Precision modes (host side, same kernel): ``"bf16"`` passes both operands
in bfloat16 (fp32 PSUM accumulation); ``"bf16_refined"`` splits each
operand into a bf16 high part and a bf16 residual and stacks the
contraction, ``xt = [xh; xh; xl]``, ``w = [Wh; Wl; Wh]``, so one run adds
``xh Wh + xh Wl + xl Wh`` in PSUM (one residual-correction step).
``"ozaki"``/``"ozaki_hq"`` stack the same way one ``2n`` block per slice
pair ``(i, j)``, ``i + j < D``: ``xt = [x_i ...]``, ``w = [W_j ...]``
(``K = 2n D (D + 1) / 2``; :mod:`trnfft.algorithms`, ``ozaki_slices``).

Pseudocode
----------
::

    W = load w (all tk row tiles) if resident
    for batch tile bt (<= 128 rows):
        X = load xt[:, bt]                              (tk row tiles, stationary)
        for column tile nt (<= 512):
            acc = sum_kt X[kt]^T @ W[kt, nt]            (tk matmuls; W tiles streamed if not resident)
            y[bt, nt] = copy(acc)

Closed forms (b = bytes per operand element, tk = ceil(K/128),
tb = ceil(B/128), tn = ceil(N/512); resident = tk*N*b <= W_BUDGET)
------------------------------------------------------------------
    HBM bytes read    = b (K B + K N)          resident
                      = b (K B + tb K N)       streamed
    HBM bytes written = 4 B N
    Tensor Engine instructions = tb * tk * tn
    Vector instructions (PSUM -> SBUF) = tb * tn
    DMA transfers = tk + tb tk + tb tn          resident
                  = tb tk + tb tn tk + tb tn    streamed
    matmul flops  = 2 B K N

fp32 error: ``GEMM_BOUND(n) = 2 n u`` relative (an n-term dot product per output).
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX, PSUM_FMAX, cdiv, ntiles, tile

W_BUDGET = 64 * 1024  # bytes per partition for a resident DFT matrix
MAX_K = 16384  # xt slices of a batch tile: tk * 128 * 4 bytes <= 64 KiB per partition


def resident(K, N, itemsize):
    return cdiv(K, PMAX) * N * itemsize <= W_BUDGET


def dft_gemm_counts(B, K, N, itemsize):
    """The closed forms above as a dict (what the emulator must count)."""
    tk, tb, tn = cdiv(K, PMAX), cdiv(B, PMAX), cdiv(N, PSUM_FMAX)
    if resident(K, N, itemsize):
        read, dma = itemsize * (K * B + K * N), tk + tb * tk + tb * tn
    else:
        read, dma = itemsize * (K * B + tb * K * N), tb * tk + tb * tn * tk + tb * tn
    return {"hbm_read_bytes": read, "hbm_write_bytes": 4 * B * N, "tensor": tb * tk * tn,
            "vector": tb * tn, "dma": dma, "flops": 2 * B * K * N}


@nki.jit
def dft_gemm_kernel(xt, w):
    """``y[B, N] = xt.T @ w``: xt ``[K, B]``, w ``[K, N]`` (fp32 or bf16) -> fp32."""
    K, B = xt.shape
    N = w.shape[1]
    tk = cdiv(K, PMAX)
    y = nl.ndarray((B, N), dtype=nl.float32, buffer=nl.shared_hbm)
    keep = resident(K, N, w.dtype.itemsize)
    if keep:
        wt = nl.ndarray((PMAX, tk * N), dtype=w.dtype, buffer=nl.sbuf, name="dft_matrix")
        for kt in nl.static_range(tk):
            k0, kk = tile(kt, K, PMAX)
            nisa.dma_copy(dst=wt[0:kk, kt * N:(kt + 1) * N], src=w[k0:k0 + kk, :])
    for bt in nl.static_range(ntiles(B, PMAX)):
        b0, bb = tile(bt, B, PMAX)
        xs = nl.ndarray((PMAX, tk * bb), dtype=xt.dtype, buffer=nl.sbuf, name="x_slices")
        for kt in nl.static_range(tk):
            k0, kk = tile(kt, K, PMAX)
            nisa.dma_copy(dst=xs[0:kk, kt * bb:(kt + 1) * bb], src=xt[k0:k0 + kk, b0:b0 + bb])
        for nt in nl.static_range(ntiles(N, PSUM_FMAX)):
            j0, nn = tile(nt, N, PSUM_FMAX)
            acc = nl.ndarray((bb, nn), dtype=nl.float32, buffer=nl.psum, name="acc")
            for kt in nl.static_range(tk):
                k0, kk = tile(kt, K, PMAX)
                if keep:
                    mv = wt[0:kk, kt * N + j0:kt * N + j0 + nn]
                else:
                    mv = nl.ndarray((PMAX, nn), dtype=w.dtype, buffer=nl.sbuf, name="w_tile")[0:kk, :]
                    nisa.dma_copy(dst=mv, src=w[k0:k0 + kk, j0:j0 + nn])
                nisa.nc_matmul(acc, xs[0:kk, kt * bb:(kt + 1) * bb], mv)
            res = nl.ndarray((bb, nn), dtype=nl.float32, buffer=nl.sbuf, name="y_tile")
            nisa.tensor_copy(res, acc)
            nisa.dma_copy(dst=y[b0:b0 + bb, j0:j0 + nn], src=res)
    return y
