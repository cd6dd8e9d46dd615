"""SYRK kernel: one triangle of ``C[N, N] = X^T X`` on the Tensor Engine.

Dimensions
----------
``x`` : ``[K, N]`` float32 or bfloat16, partition dim K (the contraction).
        The host passes ``A^T`` for ``trans="N"`` (``C = A A^T``) and ``A``
        itself for ``trans="T"`` (``C = A^T A``).
Constant ``upper`` (bool). Output ``c`` : ``[N, N]`` float32; only the tiles
that touch the requested triangle are written. Diagonal 128x128 tiles are
computed in full (both triangles); the host keeps the requested triangle
(``tril``/``triu``) and takes the other from ``C``.

Tiling
------
The whole of ``x`` stays in SBUF (``tk`` row tiles ``[<=128, N]``; the host
routes matrices with ``tk*N*b > SBUF_BUDGET`` to the GEMM kernel), so every
stationary operand (``x[:, m0:m0+128]``, 128 rows of C) and every moving
operand (<= 512 columns of C) is a slice of it: ``x`` is read exactly once.
For row tile ``m`` (rows ``[m0, m0+mm)``) the needed columns are
``[0, m0+mm)`` (lower) or ``[m0, N)`` (upper); they are cut into
``e_m = ceil(extent_m / 512)`` moving tiles, each accumulated over the
``tk`` contraction tiles in one PSUM bank, copied to SBUF and stored.

Pseudocode
----------
::

    X = load x                                   (tk row tiles, resident)
    for mt (rows [m0, m0 + mm)):
        for each 512-column tile nt of [lo, hi) (lower: [0, m0 + mm); upper: [m0, N)):
            acc = sum_kt X[kt, mt]^T @ X[kt, nt]     (tk matmuls into one PSUM bank)
            store c[mt, nt] = copy(acc)

Closed forms (b = bytes per element, tk = ceil(K/128), tm = ceil(N/128),
mm_m = rows of tile m, extent_m = m0+mm_m (lower) or N-m0 (upper))
-------------------------------------------------------------------------
    HBM bytes read    = b*K*N
    HBM bytes written = 4 * sum_m mm_m * extent_m
    Tensor Engine instructions = tk * sum_m ceil(extent_m / 512)
    DMA transfers     = tk + sum_m ceil(extent_m / 512)

For N = 512*q (q >= 1) both triangles give
    sum_m ceil(extent_m/512) = 4 * q(q+1)/2 = 2 q(q+1)
against GEMM's tm*ceil(N/512) = 4 q^2: a ratio of (q+1)/(2q) (0.625 at
N = 2048, 0.5625 at 4096, -> 1/2). Tensor Engine busy cycles (proportional
to the moving columns) are sum_m extent_m / (tm*N) = (tm+1)/(2 tm) of
GEMM's: 0.53 at N = 2048.
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import cdiv, ntiles, sbuf_budget, tile, tiles

TK = 128
TM = 128
TN = 512
SBUF_BUDGET = sbuf_budget(reserve=16 * 1024)




def fits(K, N, itemsize):
    """True when x [K, N] fits the SBUF budget (else the host uses the GEMM kernel)."""
    return cdiv(K, TK) * N * itemsize <= SBUF_BUDGET


def _extent(m0, mm, N, upper):
    return (m0, N) if upper else (0, m0 + mm)


def syrk_counts(N, K, itemsize, upper):
    """The closed forms above as a dict (what the emulator must count)."""
    tk = cdiv(K, TK)
    ntile = wbytes = flops = 0
    for m0, mm in tiles(N, TM):
        lo, hi = _extent(m0, mm, N, upper)
        ntile += ntiles(hi, TN, lo)
        wbytes += 4 * mm * (hi - lo)
        flops += 2 * K * mm * (hi - lo)
    return {
        "hbm_read_bytes": itemsize * K * N,
        "hbm_write_bytes": wbytes,
        "tensor": tk * ntile,
        "vector": ntile,
        "dma": tk + ntile,
        "flops": flops,
    }


@nki.jit
def syrk_kernel(x, upper):
    """Tiles of the ``upper``/lower triangle of ``x.T @ x``: x [K, N] -> C [N, N] fp32."""
    K, N = x.shape
    tk = cdiv(K, TK)
    c = nl.ndarray((N, N), dtype=nl.float32, buffer=nl.shared_hbm)
    xs = nl.ndarray((TK, tk * N), dtype=x.dtype, buffer=nl.sbuf, name="x_resident")
    for kt in nl.static_range(tk):
        k0, kk = tile(kt, K, TK)
        nisa.dma_copy(dst=xs[0:kk, kt * N:(kt + 1) * N], src=x[k0:k0 + kk, 0:N])
    for mt in nl.static_range(ntiles(N, TM)):
        m0, mm = tile(mt, N, TM)
        lo, hi = _extent(m0, mm, N, upper)
        for nt in nl.static_range(ntiles(hi, TN, lo)):
            j0, nn = tile(nt, hi, TN, lo)
            acc = nl.ndarray((mm, nn), dtype=nl.float32, buffer=nl.psum, name="acc")
            for kt in nl.static_range(tk):
                _, kk = tile(kt, K, TK)
                nisa.nc_matmul(acc, xs[0:kk, kt * N + m0:kt * N + m0 + mm], xs[0:kk, kt * N + j0:kt * N + j0 + nn])
            res = nl.ndarray((mm, nn), dtype=nl.float32, buffer=nl.sbuf, name="c_tile")
            nisa.tensor_copy(res, acc)
            nl.store(c[m0:m0 + mm, j0:j0 + nn], value=res)
    return c
