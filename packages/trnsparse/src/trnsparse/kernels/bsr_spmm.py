"""BSR SpMM kernel: ``C[M, N] = A @ B`` with A block-sparse (128 x 128 tiles).

Dimensions
----------
``blocks_t`` : ``[nblk, 128, 128]`` -- the stored tiles of A, each
               transposed (``blocks_t[i] = A_tile_i^T``), so the tile's column
               index (the contraction index) is the partition dim of the
               stationary operand. Tiles on A's ragged right/bottom edges are
               zero-padded (the BSR format stores them that way).
``bcol``     : ``[1, nblk]`` int32 -- the block column of each stored tile.
``b``        : ``[K, N]`` -- the dense operand, K on the partition dim.
fp32 or bf16 (A and B alike). Output ``c`` : ``[M, N]`` float32.
Compile-time: ``row_ptrs`` (the block row pointers, a tuple; the loop
structure), ``M`` and optionally ``cols`` (the block column indices as a
tuple: lets B's row tiles stay resident, below).

Pseudocode
----------
::

    gidx[p, i] = 128 bcol[i] + p                           (once)
    for each N panel (<= 2048 columns):
        Bg = gather b[gidx[:, c], panel] per distinct column c (resident) -- else per tile below
        for block row r:
            acc[sub] = sum_{tile i of r} blocks_t[i]^T-stationary @ Bg[i][:, sub]   (per 512 columns)
            c[r, panel] = copy(acc)   (zeros for an empty block row)

In detail:

* Once: the block column indices are read into every partition
  (``[128, nblk]``, one DMA with a zero partition step), and turned into
  the B row each partition of each tile needs,
  ``gidx[p, i] = 128 * bcol[i] + p`` (``iota`` + one bitvec ``tensor_scalar``:
  shift left by 7, or with p).
* B's rows are gathered from HBM by indirect DMA
  (``b.ap(pattern=, offset=n0, vector_offset=gidx[:, i], indirect_dim=0)``),
  rows past K skipped (``oob_mode.skip``) and left zero by a ``memset``
  (ragged last block column only). *Resident* mode (``cols`` given and the
  row tiles of all distinct block columns fit SBUF, :func:`resident`): one
  gather per distinct block column per panel, shared by all its tiles.
  Otherwise one gather per stored tile (memset on every tile when K is
  ragged: the column is known only at run time).
* Per N panel of up to ``NP = 2048`` columns (four 2 KiB PSUM banks) and
  per block row: for each stored tile one DMA of ``blocks_t[i]`` and one
  ``nc_matmul`` per 512-column sub-tile, the row's tiles accumulating in
  PSUM; one PSUM -> SBUF copy and one store per sub-tile. A block row with
  no stored tile stores zeros from a memset tile. Only stored tiles, and
  only the B rows they touch, are read: nothing of A is densified.

Closed forms (s = bytes per element, nblk stored tiles, mb = ceil(M/128),
tn = ceil(N/512), np = ceil(N/2048) panels, G = the gathers per panel:
the distinct block columns (resident) or all stored tiles, kv_c = the
extent of ``tile(c, K, 128)`` (:mod:`trnsci.nki.tiling`), the B rows a
gather of block column c reads, z = the
gathers zeroed first, e = block rows with no tile)
----------------------------------------------------------------------------
    HBM bytes read    = 4*128*nblk + np*nblk*128*128*s + s*N*sum_{c in G} kv_c
    HBM bytes written = 4*M*N
    Tensor Engine instructions (nc_matmul) = nblk*tn
    DMA transfers     = 1 + np*(nblk + |G|) + mb*tn
    Vector instructions = 1 + (mb - e)*tn + e*np + np*z
                          (gidx, PSUM copies, zero tiles, B tile memsets)
    GpSimd instructions = 1 (iota)
    matmul flops      = 2*128*128*N*nblk
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import cdiv, ntiles, sbuf_budget, tile

TB = 128  # tile (block) size: the partition count and the stationary free size
TN = 512  # PSUM tile width (fp32 bank)
NP = 4 * TN  # columns per panel: four PSUM banks accumulate at once
SBUF_BUDGET = sbuf_budget(reserve=12 * 1024)


def panels(N):
    """The column panels of an N-column product: (n0, width, 512-column sub-tiles) each."""
    for pn in nl.static_range(ntiles(N, NP)):
        n0, npw = tile(pn, N, NP)
        yield n0, npw, cdiv(npw, TN)


def _per_partition(nblk, n_b_tiles, N, itemsize):
    # index tiles, one A tile, the B row tiles, a zero tile and an output tile
    return 8 * nblk + TB * itemsize + n_b_tiles * min(N, NP) * itemsize + 4 * min(N, NP) + 4 * TN


def fits(nblk, itemsize, N=NP):
    """Whether the SBUF plan with one B row tile at a time (the fallback) fits."""
    return _per_partition(nblk, 1, N, itemsize) <= SBUF_BUDGET


def resident(bcol, N, itemsize):
    """Whether the B rows of every distinct block column fit SBUF at once (gathered once per panel)."""
    return _per_partition(len(bcol), len(set(bcol)), N, itemsize) <= SBUF_BUDGET


def distinct_columns(bcol):
    """{block column: index of its first stored tile}, in order of first appearance."""
    first = {}
    for i, c in enumerate(bcol):
        first.setdefault(int(c), i)
    return first


def bsr_spmm_counts(M, K, N, bcol, row_ptrs, itemsize, keep_b=None):
    """The closed forms above as a dict (bcol: the block column indices, a sequence).

    ``keep_b``: whether B's row tiles are resident (the kernel got ``cols``); by default
    what :func:`resident` says, i.e. what the lowering runs.
    """
    bcol = [int(c) for c in bcol]
    nblk = len(bcol)
    mb, tn, npn = cdiv(M, TB), cdiv(N, TN), cdiv(N, NP)
    empty = sum(1 for r in range(mb) if row_ptrs[r + 1] == row_ptrs[r])
    keep = resident(bcol, N, itemsize) if keep_b is None else keep_b
    gathered = list(distinct_columns(bcol)) if keep else bcol
    kv = sum(tile(c, K, TB)[1] for c in gathered)
    # resident: only the ragged last block column's tile is zeroed; per tile gathers zero every tile
    # when K is ragged (the column is known only at run time)
    memsets = sum(1 for c in gathered if TB * c + TB > K) if keep else (nblk if K % TB else 0)
    return {
        "hbm_read_bytes": 4 * TB * nblk + npn * nblk * TB * TB * itemsize + itemsize * N * kv,
        "hbm_write_bytes": 4 * M * N,
        "tensor": nblk * tn,
        "dma": 1 + npn * (nblk + len(gathered)) + mb * tn,
        "vector": 1 + (mb - empty) * tn + empty * npn + npn * memsets,
        "gpsimd": 1,
        "flops": 2 * TB * TB * N * nblk,
    }


def _gather_rows(b, gidx, i, n0, npw, zero, name):
    """B rows 128*bcol[i] + p, columns n0 .. n0+npw, into a new SBUF tile (rows past K left zero)."""
    K, N = b.shape
    bt = nl.ndarray((TB, npw), dtype=b.dtype, buffer=nl.sbuf, name=name)
    if zero:
        nisa.memset(bt, 0.0)
    nisa.dma_copy(
        dst=bt,
        src=b.ap(pattern=[[N, TB], [1, npw]], offset=n0, vector_offset=gidx[:, i:i + 1], indirect_dim=0),
        oob_mode=nisa.oob_mode.skip,
    )
    return bt


@nki.jit
def bsr_spmm_kernel(blocks_t, bcol, b, row_ptrs=(), M=0, cols=()):
    """``C = A @ b`` for the BSR tiles ``blocks_t`` (transposed) -> C [M, N] fp32."""
    nblk = blocks_t.shape[0]
    K, N = b.shape
    c = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    gidx = nl.ndarray((TB, max(nblk, 1)), dtype=nl.int32, buffer=nl.sbuf, name="gidx")
    if nblk:
        # every partition reads all block column indices (partition step 0)
        cidx = nl.ndarray((TB, nblk), dtype=nl.int32, buffer=nl.sbuf, name="cidx")
        nisa.dma_copy(dst=cidx, src=bcol.ap(pattern=[[0, TB], [1, nblk]], offset=0))
        part = nl.ndarray((TB, 1), dtype=nl.int32, buffer=nl.sbuf, name="part")
        nisa.iota(part, [[0, 1]], offset=0, channel_multiplier=1)
        # B row of partition p for tile i: 128 * bcol[i] + p = (bcol[i] << 7) | p, in exact integer
        # (bitvec) arithmetic; arithmetic ALU ops would go through fp32
        nisa.tensor_scalar(gidx[:, 0:nblk], cidx, nl.left_shift, 7, op1=nl.bitwise_or, operand1=part)
    ragged = K % TB != 0
    mb = cdiv(M, TB)
    # resident B: with the pattern's block columns known (cols), each distinct block column's B rows are
    # gathered once per panel and shared by all its tiles; else one gather per stored tile
    keep = cols and resident(cols, N, b.dtype.itemsize)
    first = distinct_columns(cols) if keep else {}
    for n0, npw, nsub in panels(N):
        slots = {}
        for col, i in first.items():
            slots[col] = _gather_rows(b, gidx, i, n0, npw, ragged and TB * col + TB > K, f"b_rows{col}")
        for r in nl.static_range(mb):
            m0, mm = tile(r, M, TB)
            lo, hi = row_ptrs[r], row_ptrs[r + 1]
            if lo == hi:
                z = nl.ndarray((TB, npw), dtype=nl.float32, buffer=nl.sbuf, name="zero")
                nisa.memset(z, 0.0)
                for t in nl.static_range(nsub):
                    j0, nn = tile(t, npw, TN)
                    nl.store(c[m0:m0 + mm, n0 + j0:n0 + j0 + nn], value=z[0:mm, j0:j0 + nn])
                continue
            accs = [nl.ndarray((TB, tile(t, npw, TN)[1]), dtype=nl.float32, buffer=nl.psum, name=f"acc{t}")
                    for t in range(nsub)]
            for i in nl.static_range(lo, hi):
                at = nl.ndarray((TB, TB), dtype=blocks_t.dtype, buffer=nl.sbuf, name="a_tile")
                nisa.dma_copy(dst=at, src=blocks_t[i])
                bt = slots[cols[i]] if keep else _gather_rows(b, gidx, i, n0, npw, ragged, "b_rows")
                for t in nl.static_range(nsub):
                    j0, nn = tile(t, npw, TN)
                    nisa.nc_matmul(accs[t], at, bt[:, j0:j0 + nn])
            for t in nl.static_range(nsub):
                j0, nn = tile(t, npw, TN)
                res = nl.ndarray((TB, nn), dtype=nl.float32, buffer=nl.sbuf, name="c_tile")
                nisa.tensor_copy(res, accs[t])
                nl.store(c[m0:m0 + mm, n0 + j0:n0 + j0 + nn], value=res[0:mm, :])
    return c
