"""The device layout of a sparse triangular solve (``spsv``/``spsm``): block triangular, 128-row blocks.

Built once per (matrix, ``lower``, ``unit_diagonal``, ``trans``) on the host and
cached on the matrix (see :func:`trnsparse.layouts.cached`). Every solve is
turned into a *lower* one: ``trans`` transposes the pattern, an upper
triangle is reversed (row and column ``i`` become ``n - 1 - i``; the caller
flips the right-hand side and the solution). Then, per block ``t`` of 128
rows:

* the diagonal tile ``L_tt`` (dense, 128 x 128; unit diagonal, or ones on
  padding rows) is inverted on the host in float64 and stored transposed in
  float32 (``linv_t[t] = inv(L_tt)^T``, the stationary operand of
  ``X_t = inv(L_tt) @ rhs_t``);
* the entries left of the diagonal tile form an ELL block ``[pc, w_t]``
  (values, and columns padded with ``n``: a row the kernel's gather skips),
  row ``128 t + p`` on partition ``p``.

Error bound: the diagonal blocks are applied through their explicit inverse,
so the forward error of a block grows like ``cond(L_tt) * u`` (u = 2^-24) on
top of substitution's -- the usual price of block-inverse triangular solves;
well-conditioned triangles (e.g. ILU/IC factors of diagonally dominant
matrices) lose nothing visible.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from trnsparse import arrays

TB = 128
#: Widest off-diagonal row the kernel takes (values + columns: 16 KiB per partition).
WMAX = 2048


@dataclass(frozen=True)
class TriStructure:
    n: int
    upper: bool            # the caller reverses rows/columns (and flips B / X)
    nnz_off: int           # entries left of the diagonal tiles
    blocks: tuple          # per block: (pc, w, full, off)
    linv_t: torch.Tensor   # (nbk, 128, 128) float32: inv(L_tt)^T
    vals: torch.Tensor     # (slots,) float32: off-diagonal values, ELL order (0 = padding)
    cols: torch.Tensor     # (slots,) int32: their columns (n = padding)


def build(values, col_indices, row_ptrs, n, lower, unit, trans) -> TriStructure:
    """The :class:`TriStructure` of ``op(T)``, T the ``lower`` / upper triangle of the CSR arrays."""
    if trans:
        values, col_indices, row_ptrs = arrays.csr_transpose(values, col_indices, row_ptrs, (n, n))
        lower = not lower
    rows = arrays.row_indices(row_ptrs, values.numel()).cpu().numpy()
    cols = col_indices.cpu().numpy().astype(np.int64)
    vals = values.detach().cpu().double().numpy()
    keep = cols <= rows if lower else cols >= rows
    if unit:
        keep &= cols != rows
    rows, cols, vals = rows[keep], cols[keep], vals[keep]
    if not lower:
        rows, cols = n - 1 - rows, n - 1 - cols
    nbk = -(-n // TB)
    blk = rows // TB
    inb = cols // TB == blk
    tiles = np.zeros((nbk, TB, TB))
    np.add.at(tiles, (blk[inb], rows[inb] % TB, cols[inb] % TB), vals[inb])
    ar = np.arange(TB)
    pad = np.arange(nbk * TB).reshape(nbk, TB) >= n
    d = tiles[:, ar, ar]
    tiles[:, ar, ar] = np.where(pad | unit, 1.0, d)
    eye = np.broadcast_to(np.eye(TB), tiles.shape)
    inv = torch.linalg.solve_triangular(torch.from_numpy(tiles), torch.from_numpy(eye.copy()), upper=False)
    linv_t = inv.transpose(1, 2).to(torch.float32).contiguous()
    # off-diagonal entries, sorted by row (then column), as ELL blocks
    o = ~inb
    r, c, v = rows[o], cols[o], vals[o]
    order = np.lexsort((c, r))
    r, c, v = r[order], c[order], v[order]
    cnt = np.bincount(r, minlength=n)
    first = np.concatenate([[0], np.cumsum(cnt)])
    k = np.arange(r.size) - first[r]
    blocks, off = [], 0
    slot = np.empty(r.size, np.int64)
    for t in range(nbk):
        pc = min(TB, n - TB * t)
        cb = cnt[TB * t:TB * t + pc]
        w = int(cb.max()) if pc else 0
        full = int(cb.min()) if pc else 0
        sel = (r // TB) == t
        slot[sel] = off + (r[sel] % TB) * w + k[sel]
        blocks.append((pc, w, full, off))
        off += pc * w
    ev = np.zeros(off, np.float32)
    ec = np.full(off, n, np.int64)
    ev[slot] = v
    ec[slot] = c
    return TriStructure(n, not lower, int(r.size), tuple(blocks), linv_t, torch.from_numpy(ev),
                        torch.from_numpy(ec.astype(np.int32)))
