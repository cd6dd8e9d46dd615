"""SYR2K kernel: one triangle of ``C[N, N] = a b^T + b a^T`` with ``a^T = x``, ``b^T = z`` (``[K, N]``).

The two products of a rank-2k update accumulate into the same PSUM tile:
for each tile, ``x[:, rows]^T z[:, cols]`` and ``z[:, rows]^T x[:, cols]``
over the ``tk`` contraction tiles (one accumulation group of ``2 tk``
matmuls). The kernel is the SYRK tiling (:mod:`trnblas.kernels.syrk`) with
two resident operands instead of one, and like it computes only the tiles
that touch the requested triangle; each operand is read from HBM once.

Dimensions
----------
``x``, ``z`` : ``[K, N]`` float32 or bfloat16, partition dim K (the host
               passes ``op(A)^T`` and ``op(B)^T``).
Constant ``upper`` (bool). Output ``c`` : ``[N, N]`` float32; tiles off the
triangle are not written (the host keeps the requested triangle and takes
the other from ``C``).

Pseudocode
----------
::

    load x, z (tk row tiles each, resident)
    for each 128-row tile m, each <=512-column tile j of the triangle's extent:
        acc = sum_kt x[kt, m]^T z[kt, j] + z[kt, m]^T x[kt, j]     (2 tk nc_matmul)
        c[m, j] = acc                          (copy, store)

Closed forms (b = bytes per element, tk = ceil(K/128), extents as SYRK)
-----------------------------------------------------------------------
    HBM bytes read    = 2 b K N            each operand once
    HBM bytes written = 4 * sum_m mm_m * extent_m
    Tensor Engine instructions = 2 tk * sum_m ceil(extent_m / 512)
    Vector instructions = sum_m ceil(extent_m / 512)
    DMA transfers     = 2 tk + sum_m ceil(extent_m / 512)
(about half of the matmuls of the full product, as SYRK). The HBM
minimum is ``2 b K N`` plus one fp32 triangle; the written diagonal tiles
are full 128-row squares, so writes exceed ``4 N (N + 1) / 2`` by at most
``4 * 128 N / 2``.
"""

from trnblas.kernels.syrk import SBUF_BUDGET, TK, TM, TN, _extent
from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import cdiv, ntiles, tile


def fits(K, N, itemsize):
    """True when both resident operands fit the SBUF budget (else the host uses the GEMM kernel)."""
    return 2 * cdiv(K, TK) * N * itemsize <= SBUF_BUDGET


def syr2k_counts(N, K, itemsize, upper):
    """The closed forms above as a dict (what the emulator must count)."""
    tk, tm = cdiv(K, TK), cdiv(N, TM)
    tiles = wbytes = flops = 0
    for m in range(tm):
        m0, mm = tile(m, N, TM)
        lo, hi = _extent(m0, mm, N, upper)
        tiles += cdiv(hi - lo, TN)
        wbytes += 4 * mm * (hi - lo)
        flops += 4 * K * mm * (hi - lo)
    return {"hbm_read_bytes": 2 * itemsize * K * N, "hbm_write_bytes": wbytes, "tensor": 2 * tk * tiles,
            "vector": tiles, "dma": 2 * tk + tiles, "flops": flops}


def _resident(src, K, N, tk, name):
    t = nl.ndarray((TK, tk * N), dtype=src.dtype, buffer=nl.sbuf, name=name)
    for kt in nl.static_range(tk):
        k0, kk = tile(kt, K, TK)
        nisa.dma_copy(dst=t[0:kk, kt * N:(kt + 1) * N], src=src[k0:k0 + kk, 0:N])
    return t


@nki.jit
def syr2k_kernel(x, z, upper):
    """Tiles of the ``upper``/lower triangle of ``x.T @ z``: x, z [K, N] -> C [N, N] fp32."""
    K, N = x.shape
    tk = cdiv(K, TK)
    c = nl.ndarray((N, N), dtype=nl.float32, buffer=nl.shared_hbm)
    xs = _resident(x, K, N, tk, "x_resident")
    zs = _resident(z, K, N, tk, "z_resident")
    for mt in nl.static_range(ntiles(N, TM)):
        m0, mm = tile(mt, N, TM)
        lo, hi = _extent(m0, mm, N, upper)
        for nt in nl.static_range(ntiles(hi, TN, lo)):
            j0, nn = tile(nt, hi, TN, lo)
            acc = nl.ndarray((mm, nn), dtype=nl.float32, buffer=nl.psum, name="acc")
            for kt in nl.static_range(tk):
                _, kk = tile(kt, K, TK)
                rows, cols = slice(kt * N + m0, kt * N + m0 + mm), slice(kt * N + j0, kt * N + j0 + nn)
                nisa.nc_matmul(acc, xs[0:kk, rows], zs[0:kk, cols])
                nisa.nc_matmul(acc, zs[0:kk, rows], xs[0:kk, cols])
            res = nl.ndarray((mm, nn), dtype=nl.float32, buffer=nl.sbuf, name="c_tile")
            nisa.tensor_copy(res, acc)
            nl.store(c[m0:m0 + mm, j0:j0 + nn], value=res)
    return c
