"""BSR SpGEMM kernel, numeric phase: ``C = A @ B`` with A, B and C block-sparse (128 x 128 tiles).

The symbolic phase -- C's block pattern and, per output tile, the list of
matching ``(A tile, B tile)`` pairs -- runs on the host once per pattern
pair (:func:`trnsparse.symbolic.bsr_symbolic`, cached on A). It is the
kernel's static schedule: nothing about the patterns is decided on chip.

Dimensions
----------
``a_t`` : ``[nA, 128, 128]`` -- A's stored tiles, each transposed
          (``a_t[i] = A_tile_i^T``): the contraction index on the partition dim
          of the stationary operand. Tiles of one block row are consecutive.
``b``   : ``[nB, 128, 128]`` -- B's stored tiles as stored (contraction index =
          tile row = partition dim of the moving operand).
fp32 (or bf16/fp16: Tensor Engine operands, fp32 PSUM). Output ``c`` :
``[nC, 128, 128]`` float32, C's tiles in block-row-major order.
Compile-time: ``rows`` -- per block row of A that produces output:
``(a0, na, groups)``, its tiles ``a_t[a0 : a0 + na]``; a group is
``(c0, ((ka, kb), ...) per output tile)``: up to 4 consecutive output tiles
``c0 ..`` and the (row-local A tile, B tile) pairs summed into each.
``keep_b``: B's tiles all resident in SBUF (loaded by one DMA).

Pseudocode
----------
::

    if keep_b: Bs[128, nB, 128] = b                      # one DMA
    for (a0, na, groups) in rows:
        As[128, na, 128] = a_t[a0 : a0 + na]             # one DMA: A's block row, read once
        for (c0, outs) in groups:                        # <= 4 output tiles = one PSUM bank
            acc[128, 128 g] in PSUM
            for j, pairs in enumerate(outs):
                for (ka, kb) in pairs:
                    Bt = Bs[:, kb] if keep_b else b[kb]   # (else one DMA per product)
                    acc[:, 128 j : 128 j + 128] += As[:, ka]^T @ Bt   # nc_matmul, fp32 PSUM
            c[c0 : c0 + g] = copy(acc)                   # one Vector copy, one DMA

Closed forms (s = bytes per element; nA, nB stored tiles of A and B; nC output
tiles; P = number of tile products = sum over output tiles of their pairs;
R = block rows of A with output; Gr = groups = sum over those rows of
ceil(output tiles of the row / 4); nA' = tiles of those R rows)
---------------------------------------------------------------------------
    HBM bytes read    = s*128*128*(nA' + (nB if keep_b else P))
    HBM bytes written = 4*128*128*nC
    DMA transfers     = R + Gr + (1 if keep_b else P)
    Tensor Engine instructions (nc_matmul) = P
    Vector instructions (PSUM -> SBUF copies) = Gr
    matmul flops      = 2*128^3*P

The floor for this data layout is reading each stored tile once and writing
C once: ``s*128^2*(nA + nB) + 4*128^2*nC``; with ``keep_b`` the kernel is
at the floor (up to A's block rows that produce nothing, which it skips).
Without it every product re-reads its B tile.
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import sbuf_budget, tiles

TB = 128
GROUP = 4  # output tiles per PSUM bank (4 x 128 fp32 = 2 KiB)
SBUF_BUDGET = sbuf_budget(reserve=12 * 1024)
#: Most tiles of one block row of A held at once (the kernel's SBUF plan; 32 KiB per partition at fp32).
AMAX = 64


def per_partition(na_max, nb, itemsize, keep_b):
    """SBUF bytes per partition: A's widest block row, B (resident or one tile), the output copy."""
    return itemsize * TB * (na_max + (nb if keep_b else 1)) + 4 * TB * GROUP


def resident(na_max, nb, itemsize):
    """Whether all of B's tiles fit SBUF next to the widest block row of A."""
    return per_partition(na_max, nb, itemsize, True) <= SBUF_BUDGET


def bsr_spgemm_counts(rows, nb, nc, itemsize, keep_b):
    """The closed forms above as a dict (``rows`` as the kernel takes them)."""
    P = sum(len(pairs) for _, _, groups in rows for _, outs in groups for pairs in outs)
    R = len(rows)
    Gr = sum(len(groups) for _, _, groups in rows)
    na = sum(n for _, n, _ in rows)
    t = TB * TB
    return {
        "hbm_read_bytes": itemsize * t * (na + (nb if keep_b else P)),
        "hbm_write_bytes": 4 * t * nc,
        "dma": R + Gr + (1 if keep_b else P),
        "tensor": P,
        "vector": Gr,
        "flops": 2 * TB * t * P,
    }


@nki.jit
def bsr_spgemm_kernel(a_t, b, rows=(), nc=0, keep_b=False):
    """C's tiles ``[nc, 128, 128]`` fp32 for the static schedule ``rows`` (module docstring)."""
    nb = b.shape[0]
    c = nl.ndarray((nc, TB, TB), dtype=nl.float32, buffer=nl.shared_hbm)
    t = TB * TB
    if keep_b:
        Bs = nl.ndarray((TB, nb, TB), dtype=b.dtype, buffer=nl.sbuf, name="b_tiles")
        nisa.dma_copy(dst=Bs, src=b.ap(pattern=[[TB, TB], [t, nb], [1, TB]], offset=0))
    for ri in nl.static_range(len(rows)):
        a0, na, groups = rows[ri]
        As = nl.ndarray((TB, na, TB), dtype=a_t.dtype, buffer=nl.sbuf, name="a_row")
        nisa.dma_copy(dst=As, src=a_t.ap(pattern=[[TB, TB], [t, na], [1, TB]], offset=a0 * t))
        for gi in nl.static_range(len(groups)):
            c0, outs = groups[gi]
            g = len(outs)
            acc = nl.ndarray((TB, g * TB), dtype=nl.float32, buffer=nl.psum, name="acc")
            for j in nl.static_range(g):
                for ka, kb in outs[j]:
                    if keep_b:
                        bt = Bs[:, kb, :]
                    else:
                        bt = nl.ndarray((TB, TB), dtype=b.dtype, buffer=nl.sbuf, name="b_tile")
                        nisa.dma_copy(dst=bt, src=b[kb])
                    nisa.nc_matmul(acc[:, j * TB:(j + 1) * TB], As[:, ka, :], bt)
            res = nl.ndarray((TB, g, TB), dtype=nl.float32, buffer=nl.sbuf, name="c_tiles")
            nisa.tensor_copy(res, acc)
            nisa.dma_copy(dst=c.ap(pattern=[[TB, TB], [t, g], [1, TB]], offset=c0 * t), src=res)
        del As
    return c


def groups_of(outs, c0):
    """Output tiles ``c0, c0+1, ..`` of one block row cut into PSUM-bank groups (host helper)."""
    return tuple((c0 + i, tuple(outs[i:i + g])) for i, g in tiles(len(outs), GROUP))

