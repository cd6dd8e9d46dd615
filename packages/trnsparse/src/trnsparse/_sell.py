"""The device layout of a CSR matrix for the SpMV/SpMM kernel: SELL-128-sigma with row splitting.

Built on the host once per matrix, from its index arrays, and cached on the
matrix (:func:`cached`): a cache entry remembers the exact tensors it was
built from and their in-place version counters, so replacing or mutating
``values``, ``col_indices`` or ``row_ptrs`` invalidates it, and it dies with
the matrix.

Layout
------
Rows become *pieces* of at most ``K`` stored entries (a row longer than
``K`` is split into ``ceil(len / K)`` pieces; an empty row is one piece of
length 0, so every output row is written). Rows are ordered by piece length,
longest first (SELL's sigma sort, over the whole matrix: the Trainium
gather cost does not depend on locality, so the window is the matrix),
and packed into *slices* of at most 128 pieces, one piece per partition;
the pieces of a split row never straddle two slices. Slice ``s`` stores its
pieces as a ``[pc_s, w_s]`` row-major block (``w_s`` its longest piece):
values (zero-padded) and column indices (padded with ``n``, an
out-of-bounds row the kernel's gather skips). The padding of a sorted
layout telescopes: at most ``128 * K`` slots over the whole matrix.

``K`` is the larger of ``ceil(max_len / 128)`` (a split row fits one slice)
and the row length exceeded by fewer than one row in 64 (so long rows are
rare outliers, split; the rest pack with little padding), capped by the row
lengths themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

TB = 128
#: Widest piece the kernel takes (slots per partition): values + indices + the gathered
#: operand stay a few KiB per partition.
KMAX = 1024


@dataclass(frozen=True)
class SellStructure:
    """The index part of the layout (depends on ``col_indices`` / ``row_ptrs`` only)."""

    shape: tuple
    nnz: int
    K: int
    #: per slice: (pc, w, R, full, off, ooff, loff); full = the shortest piece (slots j < full
    #: have no padding), off/ooff/loff the offsets into the slot, output-row and local-row arrays
    #: (loff = -1: one piece per row, no combine)
    slices: tuple
    pos: torch.Tensor      # (nnz,) int64: slot of each stored entry
    cols: torch.Tensor     # (slots,) int32: column of each slot (n = padding)
    orow: torch.Tensor     # (m,) int32: output row of each slice's local rows
    rloc: torch.Tensor     # (split pieces,) float32: local row of each partition of split slices

    @property
    def slots(self) -> int:
        return int(self.cols.numel())


def piece_width(lens: np.ndarray) -> int:
    """``K`` as the module docstring defines it."""
    m = lens.size
    if m == 0:
        return 1
    max_len = int(lens.max())
    if max_len == 0:
        return 1
    q = int(np.sort(lens)[::-1][min(m - 1, m // 64)])
    return max(1, min(max_len, max(-(-max_len // TB), q)))


def build_structure(col_indices: torch.Tensor, row_ptrs: torch.Tensor, shape) -> SellStructure:
    """The SELL-128-sigma structure of a canonical CSR pattern (see the module docstring)."""
    m, n = shape
    ptr = row_ptrs.detach().cpu().numpy().astype(np.int64)
    col = col_indices.detach().cpu().numpy().astype(np.int64)
    nnz = int(ptr[-1]) if ptr.size else 0
    lens = np.diff(ptr)
    K = piece_width(lens)
    g = np.maximum(1, -(-lens // K))                       # pieces per row
    key = np.minimum(lens, K)                              # a row's widest piece
    order = np.argsort(-key, kind="stable")                # longest first, then by row
    # greedy packing: a row's pieces in one slice
    slices = []
    s_rows, s_pc = [], 0

    def close():
        nonlocal s_rows, s_pc
        if s_pc:
            slices.append(list(s_rows))
        s_rows, s_pc = [], 0

    for r in order.tolist():
        gr = int(g[r])
        if s_pc + gr > TB:
            close()
        s_rows.append(r)
        s_pc += gr
    close()
    # per slice geometry
    out = []
    off = ooff = loff = 0
    row_slice = np.empty(m, np.int64)
    row_p0 = np.empty(m, np.int64)                         # partition of a row's first piece in its slice
    row_off = np.empty(m, np.int64)
    row_w = np.empty(m, np.int64)
    orow, rloc = [], []
    for s, rows in enumerate(slices):
        rows = np.asarray(rows, np.int64)
        gr = g[rows]
        pc = int(gr.sum())
        R = rows.size
        w = int(key[rows].max())
        # the shortest piece: a split row's last piece may be short
        last = lens[rows] - (gr - 1) * K
        full = int(min(last.min(), key[rows].min())) if R else 0
        split = pc != R
        p0 = np.concatenate([[0], np.cumsum(gr)[:-1]])
        row_slice[rows], row_p0[rows], row_off[rows], row_w[rows] = s, p0, off, w
        orow.append(rows)
        if split:
            rloc.append(np.repeat(np.arange(R), gr))
        out.append((pc, w, R, full, off, ooff, loff if split else -1))
        off += pc * w
        ooff += R
        loff += pc if split else 0
    # slot of every stored entry: row r, k-th entry -> piece k // K (partition p0 + k // K), slot k % K
    rows_e = np.repeat(np.arange(m), lens)
    k = np.arange(nnz) - ptr[rows_e]
    pos = row_off[rows_e] + (row_p0[rows_e] + k // K) * row_w[rows_e] + k % K
    cols = np.full(off, n, np.int64)
    cols[pos] = col
    return SellStructure(
        (m, n), nnz, K, tuple(out), torch.from_numpy(pos),
        torch.from_numpy(cols.astype(np.int32)),
        torch.from_numpy((np.concatenate(orow) if orow else np.zeros(0, np.int64)).astype(np.int32)),
        torch.from_numpy((np.concatenate(rloc) if rloc else np.zeros(0, np.int64)).astype(np.float32)),
    )


def slot_values(st: SellStructure, values: torch.Tensor) -> torch.Tensor:
    """The values in slot order (zero padding), in ``values``' dtype."""
    out = values.new_zeros(st.slots)
    if st.nnz:
        out[st.pos.to(values.device)] = values.detach()
    return out


def _stamp(ts):
    return tuple((t, t._version) for t in ts)


def _fresh(stamp, ts) -> bool:
    return len(stamp) == len(ts) and all(a is b and v == b._version for (a, v), b in zip(stamp, ts))


def cached(owner, key: str, sources: tuple, build):
    """``build()``, cached in ``owner.__dict__[key]`` while ``sources`` are the same tensors, unmodified.

    A cache never outlives what it caches: the entry is rebuilt when any
    source tensor is replaced (identity) or modified in place (torch's
    version counter), and it is dropped with ``owner``.
    """
    d = owner.__dict__
    hit = d.get(key)
    if hit is not None and _fresh(hit[0], sources):
        return hit[1]
    val = build()
    d[key] = (_stamp(sources), val)
    return val


def layout(owner, values: torch.Tensor, col_indices: torch.Tensor, row_ptrs: torch.Tensor, shape):
    """``(structure, slot values)`` of CSR arrays, cached on the matrix ``owner`` that holds them.

    The structure is keyed on the index arrays only (a new ``values`` tensor with the same
    pattern, as in a Newton or time-stepping loop, re-gathers the values but keeps the structure).
    """
    shape = tuple(shape)
    st = cached(owner, "_sell_structure", (col_indices, row_ptrs),
                lambda: build_structure(col_indices, row_ptrs, shape))
    if st.shape != shape:  # the owner's shape changed under the same index tensors
        st = build_structure(col_indices, row_ptrs, shape)
        owner.__dict__["_sell_structure"] = (_stamp((col_indices, row_ptrs)), st)
    built_on, vals = cached(owner, "_sell_values", (values, col_indices, row_ptrs),
                            lambda: (st, slot_values(st, values)))
    if built_on is not st:
        vals = slot_values(st, values)
        owner.__dict__["_sell_values"] = (_stamp((values, col_indices, row_ptrs)), (st, vals))
    return st, vals
