"""Row gather ``out = a[rows]`` by indirect DMA (LAPACK's ``laswp``, all swaps at once).

The blocked LU applies each panel's row interchanges to the columns outside
the panel, and ``lu_solve`` applies ``P^T`` (or ``P``) to the right-hand
side. Swapping rows one pair at a time would cost four dependent DMAs per
pivot; instead the host folds a panel's ``b`` pivots into one permutation
(``b`` integer swaps) and this kernel gathers the rows that move -- for a
panel at most ``2 b`` (its top ``b`` rows and the rows they displaced), for
a right-hand side all ``m`` -- 128 rows per transfer, one row per
partition, addressed through the documented
``.ap(..., vector_offset=idx, indirect_dim=0)`` form.

Dimensions
----------
``a``    : ``[m, c]`` float32 in HBM, ``m, c >= 1``.
``rows`` : ``[r, 1]`` int32 in HBM, row indices into ``a`` (``0 <= rows[i] < m``).
Output ``out`` : ``[r, c]``, ``out[i, :] = a[rows[i], :]``.

Pseudocode
----------
    for each tile t of 128 indices:   idx = rows[t]                     (DMA)
        for each column chunk (<= CW):  x = a[idx, chunk] (indirect DMA); out[t, chunk] = x

Closed forms (rt = ceil(r / 128), ct = ceil(c / CW))
---------------------------------------------------
    HBM read  = 4 r c + 4 r        HBM write = 4 r c
    DMA       = rt (1 + 2 ct)      no compute instructions
"""

from __future__ import annotations

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX, cdiv, ntiles, tile

#: Columns per transfer (8 KiB of float32 per partition).
CW = 2048


def row_gather_counts(m: int, c: int) -> dict:
    """The closed forms above for ``m`` gathered rows (``r`` in the docstring) of ``c`` columns."""
    mt, ct = cdiv(m, PMAX), cdiv(c, CW)
    return {
        "kernel": "row_gather_kernel",
        "hbm_read_bytes": 4 * m * c + 4 * m,
        "hbm_write_bytes": 4 * m * c,
        "dma": mt * (1 + 2 * ct),
        "tensor": 0,
        "vector": 0,
    }


@nki.jit
def row_gather_kernel(a, perm):
    """``a[perm]`` for ``a`` [m, c] float32 and row indices ``perm`` [r, 1] int32: ``out`` [r, c]."""
    c = a.shape[1]
    m = perm.shape[0]
    out = nl.ndarray((m, c), dtype=a.dtype, buffer=nl.shared_hbm)
    for t in nl.static_range(ntiles(m, PMAX)):
        r0, rows = tile(t, m, PMAX)
        idx = nl.ndarray((rows, 1), dtype=nl.int32, buffer=nl.sbuf, name="rows")
        nisa.dma_copy(dst=idx, src=perm[r0:r0 + rows, 0:1])
        for k in nl.static_range(ntiles(c, CW)):
            c0, cw = tile(k, c, CW)
            x = nl.ndarray((rows, cw), dtype=a.dtype, buffer=nl.sbuf, name="gathered")
            nisa.dma_copy(dst=x, src=a.ap(pattern=[[c, rows], [1, cw]], offset=c0, vector_offset=idx,
                                          indirect_dim=0))
            nisa.dma_copy(dst=out[r0:r0 + rows, c0:c0 + cw], src=x)
    return out
