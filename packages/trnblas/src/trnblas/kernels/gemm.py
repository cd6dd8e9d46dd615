"""GEMM kernel: ``C[M, N] = A[M, K] @ B[K, N]`` on the Tensor Engine.

Dimensions
----------
``a_t`` : ``[K, M]``  -- A already transposed, so the contraction dim K is
          the partition dim of every stationary tile and its loads are
          straight row copies (no DMA transpose).
``b``   : ``[K, N]``  -- partition dim K as well.
Both float32 or both bfloat16. Output ``c`` : ``[M, N]`` float32 (PSUM
accumulates in fp32 whatever the input dtype; the host applies alpha/beta
and casts, so bf16 results are rounded once).

Why A^T and not ``nl.load_transpose2d``: a DMA transpose moves 2- or
4-byte elements one at a time and is far slower than a straight DMA on
hardware, and it would run once per B panel. The host transpose is one
pass over M*K elements, against 2*M*N*K flops in the kernel; for
``transA="T"`` (A stored as [K, M]) it costs nothing.

Tiling (TK = 128 = pmax, TM = 128 = gemm_stationary_fmax,
TN = 512 = gemm_moving_fmax = psum_fmax fp32, SM = 4*TM = 512)
-----------------------------------------------------------------
* B panel: columns ``[n0, n0 + NB)`` for all of K, resident in SBUF
  (``tk`` row tiles of ``[<=128, nb]``). NB is a multiple of 512 chosen so
  the panel plus two A strips (the next strip loads while the current one
  is in use) fit :data:`SBUF_BUDGET` bytes per partition; for 2048^3 bf16
  the whole B is one panel (fp32: two panels of 1536 and 512 columns).
* A strip: ``a_t[:, m0:m0+512]`` for all of K (``tk`` tiles ``[<=128, <=512]``);
  each 128-column slice of it is a stationary operand, reused across the
  whole n loop of the panel.
* For each 128-row tile of the strip and each <=512-column tile of the
  panel: ``tk`` ``nc_matmul`` into one PSUM tile ``[<=128, <=512]`` (one
  2 KiB bank), then one PSUM->SBUF ``tensor_copy`` and one store.
* Ragged edges are static slices: every extent is a compile-time
  constant, so a remainder tile is a smaller slice (``tile(i, X, T)`` of :mod:`trnsci.nki.tiling`).
  The tile loops are ``nl.static_range`` (unrolled) for that reason: the
  slice sizes are Python ints on hardware too.

Pseudocode
----------
::

    for each B panel [n0, n0 + NB):
        Bp = load b[:, panel]                       (tk row tiles)
        for each A strip [s0, s0 + 512):
            As = load a_t[:, strip]                 (tk row tiles)
            for mt (128 rows of the strip), nt (512 columns of the panel):
                acc = sum_kt As[kt, mt]^T @ Bp[kt, nt]    (tk matmuls into one PSUM bank)
                store c[mt, nt] = copy(acc)

Closed forms (b = bytes per input element; tk = ceil(K/128),
tm = ceil(M/128), tn = ceil(N/512), sm = ceil(M/512), np = ceil(N/NB))
-------------------------------------------------------------------------
    HBM bytes read    = b * (K*N + np*K*M)         B once, A once per panel
    HBM bytes written = 4 * M*N
    Tensor Engine instructions (nc_matmul) = tk * tm * tn
    Vector instructions (PSUM -> SBUF copies) = tm * tn
    DMA transfers     = np*tk + np*sm*tk + tm*tn    (B rows, A strips, C tiles)
    matmul flops      = 2*M*N*K

With np = 1 (B fits in one panel: tk*(N' + 1024)*b <= SBUF_BUDGET, N' = N
rounded up to 512)
the reads are the minimum, b*(K*N + K*M).
Tensor Engine busy time (modeled): tk * sum over tiles of
max(min(64, mm), nn) cycles (x4 for fp32) at 2.8 GHz on trn1: 512 cycles
per full tile, i.e. the full 128x128x512 MAC array rate.
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import cdiv, ntiles, sbuf_budget, tile

TK = 128  # contraction tile (partition dim)
TM = 128  # stationary free size
TN = 512  # moving free size / PSUM tile width (fp32)
SM = 4 * TM  # width of one A strip load
SBUF_BUDGET = sbuf_budget(reserve=12 * 1024)  # per partition: B panel + two A strips (double buffer)




def panel_width(K, N, itemsize):
    """Width NB of the resident B panel (a multiple of 512, >= 512).

    Raises ``ValueError`` when even a 512-wide panel and a 512-wide A strip
    do not fit the SBUF budget (K too large); the host then splits K.
    """
    tk = cdiv(K, TK)
    per_col = tk * itemsize  # bytes per partition per panel column
    fit = SBUF_BUDGET // per_col - 2 * SM
    if fit < TN:
        raise ValueError(f"gemm kernel: K={K} too large for one SBUF panel (max K for this dtype: {max_k(itemsize)})")
    return min(cdiv(N, TN) * TN, (fit // TN) * TN)


def max_k(itemsize):
    """Largest K the kernel takes for this element size (the host splits larger K)."""
    return (SBUF_BUDGET // ((TN + 2 * SM) * itemsize)) * TK


def gemm_counts(M, N, K, itemsize):
    """The closed forms above as a dict (what the emulator must count)."""
    tk, tm, tn, sm = cdiv(K, TK), cdiv(M, TM), cdiv(N, TN), cdiv(M, SM)
    nb = panel_width(K, N, itemsize)
    npn = cdiv(N, nb)
    return {
        "hbm_read_bytes": itemsize * (K * N + npn * K * M),
        "hbm_write_bytes": 4 * M * N,
        "tensor": tk * tm * tn,
        "vector": tm * tn,
        "dma": npn * tk + npn * sm * tk + tm * tn,
        "flops": 2 * M * N * K,
    }


def gemm_tiles(a_t, b, c):
    """Body shared by the GEMM and batched-GEMM kernels: c[M, N] = a_t.T @ b.

    ``a_t`` [K, M], ``b`` [K, N] are HBM views; ``c`` [M, N] an fp32 HBM view.
    """
    K, M = a_t.shape
    N = b.shape[1]
    tk = cdiv(K, TK)
    nb = panel_width(K, N, a_t.dtype.itemsize)
    for pn in nl.static_range(ntiles(N, nb)):
        n0, nbw = tile(pn, N, nb)
        # B panel: row tile kt lives in columns [kt*nbw, (kt+1)*nbw)
        bpan = nl.ndarray((TK, tk * nbw), dtype=b.dtype, buffer=nl.sbuf, name="b_panel")
        for kt in nl.static_range(tk):
            k0, kk = tile(kt, K, TK)
            nisa.dma_copy(dst=bpan[0:kk, kt * nbw:(kt + 1) * nbw], src=b[k0:k0 + kk, n0:n0 + nbw])
        for sm_ in nl.static_range(ntiles(M, SM)):
            s0, sw = tile(sm_, M, SM)
            astrip = nl.ndarray((TK, tk * sw), dtype=a_t.dtype, buffer=nl.sbuf, name="a_strip")
            for kt in nl.static_range(tk):
                k0, kk = tile(kt, K, TK)
                nisa.dma_copy(dst=astrip[0:kk, kt * sw:(kt + 1) * sw], src=a_t[k0:k0 + kk, s0:s0 + sw])
            for mt in nl.static_range(ntiles(sw, TM)):
                m0, mm = tile(mt, sw, TM)
                for nt in nl.static_range(ntiles(nbw, TN)):
                    j0, nn = tile(nt, nbw, TN)
                    acc = nl.ndarray((mm, nn), dtype=nl.float32, buffer=nl.psum, name="acc")
                    for kt in nl.static_range(tk):
                        _, kk = tile(kt, K, TK)
                        nisa.nc_matmul(
                            acc,
                            astrip[0:kk, kt * sw + m0:kt * sw + m0 + mm],
                            bpan[0:kk, kt * nbw + j0:kt * nbw + j0 + nn],
                        )
                    res = nl.ndarray((mm, nn), dtype=nl.float32, buffer=nl.sbuf, name="c_tile")
                    nisa.tensor_copy(res, acc)
                    nl.store(c[s0 + m0:s0 + m0 + mm, n0 + j0:n0 + j0 + nn], value=res)


@nki.jit
def gemm_kernel(a_t, b):
    """``C = a_t.T @ b``: a_t [K, M], b [K, N] (fp32 or bf16) -> C [M, N] fp32."""
    K, M = a_t.shape
    N = b.shape[1]
    c = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    gemm_tiles(a_t, b, c)
    return c
