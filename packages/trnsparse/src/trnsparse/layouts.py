"""The device layouts of a CSR matrix for the SpMV/SpMM kernels: SELL-128-sigma with row splitting (and ELL).

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

import weakref
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
    return max(1, min(max_len, max(-(-max_len // TB), min(q, KMAX))))


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


def stamp(ts):
    # weak references: a stale entry does not keep replaced arrays alive
    return tuple((weakref.ref(t), t._version) for t in ts)


def _fresh(stamp, ts) -> bool:
    return len(stamp) == len(ts) and all(a() is b and v == b._version for (a, v), b in zip(stamp, ts))


def cached(owner, key: str, sources: tuple, build):
    """``build()``, cached in ``owner.__dict__[key]`` while ``sources`` are the same tensors, unmodified.

    A cache never outlives what it caches: the entry is rebuilt when any
    source tensor is replaced (identity) or modified in place (torch's
    version counter), and it is dropped with ``owner``. Without an owner (a
    matrix's arrays crossing a torch operator) the value is built for the call.
    """
    if owner is None:
        return build()
    d = owner.__dict__
    hit = d.get(key)
    if hit is not None and _fresh(hit[0], sources):
        return hit[1]
    val = build()
    d[key] = (stamp(sources), val)
    return val


def structure(owner, col_indices: torch.Tensor, row_ptrs: torch.Tensor, shape) -> SellStructure:
    """The :class:`SellStructure` of CSR index arrays, cached on ``owner`` (see :func:`cached`)."""
    shape = tuple(shape)
    st = cached(owner, "_sell_structure", (col_indices, row_ptrs),
                lambda: build_structure(col_indices, row_ptrs, shape))
    if st.shape != shape:  # the owner's shape changed under the same index tensors
        st = build_structure(col_indices, row_ptrs, shape)
        owner.__dict__["_sell_structure"] = (stamp((col_indices, row_ptrs)), st)
    return st


def partition_rows(st: SellStructure) -> torch.Tensor:
    """(sum pc,) int32: the matrix row of every partition of every slice, slice after slice."""
    parts = []
    for pc, _w, R, _full, _off, ooff, loff in st.slices:
        local = st.rloc[loff:loff + pc].to(torch.int64) if loff >= 0 else torch.arange(pc)
        parts.append(st.orow[ooff:ooff + R][local])
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.int32)


def layout(owner, values: torch.Tensor, col_indices: torch.Tensor, row_ptrs: torch.Tensor, shape):
    """``(structure, slot values)`` of CSR arrays, cached on the matrix ``owner`` that holds them.

    The structure is keyed on the index arrays only (a new ``values`` tensor with the same
    pattern, as in a Newton or time-stepping loop, re-gathers the values but keeps the structure).
    """
    st = structure(owner, col_indices, row_ptrs, shape)
    built_on, vals = cached(owner, "_sell_values", (values, col_indices, row_ptrs),
                            lambda: (st, slot_values(st, values)))
    if built_on is not st:
        vals = slot_values(st, values)
        owner.__dict__["_sell_values"] = (stamp((values, col_indices, row_ptrs)), (st, vals))
    return st, vals


# --------------------------------------------------------------- SpMV layout: x resident on chip

#: Columns of x resident per pass (fp32: 64 KiB per partition, replicated on all 128 partitions).
XMAX = 16384
#: Slots per partition of one ELL group tile (8 KiB of fp32 values).
GMAX = 2048
#: Output slices x columns held on chip (y as a [128, S, N] tile: 32 KiB per partition).
SMAX = 8192
#: Columns of x per panel of the x-resident kernel (each column's x block is replicated on chip; with more
#: than one column the blocks are 4x narrower so that RES_NMAX of them fit SBUF at once).
RES_NMAX = 4


def xmax_for(ncols: int) -> int:
    """The column-block width of the x-resident layout for ``ncols`` columns of x."""
    return XMAX if ncols == 1 else XMAX // RES_NMAX


@dataclass(frozen=True)
class EllStructure:
    """Column-blocked ELL-128 of a CSR pattern for :mod:`trnsparse.kernels.csr_spmv`.

    Rows stay in their natural order (slice s = rows 128 s .. 128 s + 127, so y
    leaves the chip in one contiguous store); rows longer than ``K`` are
    taken out of the ELL part and cut into pieces of at most ``K`` entries
    (packed 128 per *long slice*, recombined into y by a one-hot matmul).
    Columns are cut into blocks of at most ``XMAX``; per block, consecutive
    slices of (nearly) equal width form *groups* loaded by one DMA.
    """

    shape: tuple
    nnz: int
    K: int
    #: per column block: (c0, xc, groups, longs); a group is (s0, pc, G, w, off): slices s0 .. s0+G-1,
    #: pc partitions, width w, stored [pc, G, w] at slot offset off; a long slice is (pc, w, off, toff,
    #: chunks): pieces [pc, w] at off, targets at toff, chunks the (s0, sc) spans of y slices it touches
    blocks: tuple
    pos: torch.Tensor      # (nnz,) int64: slot of each stored entry
    cols: np.ndarray       # (slots,) uint32: column within the block (xc = padding: a zero on chip)
    target: torch.Tensor   # (long pieces, 2) float32: (row % 128, row // 128) of each long piece

    @property
    def slots(self) -> int:
        return int(self.cols.size)


def _ell_widths(cnt, ok, m):
    """Per 128-row slice: the widest count among rows with ``ok`` (0 if none)."""
    S = -(-m // TB)
    c = np.where(ok, cnt, 0)
    c = np.concatenate([c, np.zeros(S * TB - m, c.dtype)])
    return c.reshape(S, TB).max(axis=1)


def _choose_k(lens, cnts, m):
    """The long-row cut ``K``: fewest slots (ELL padding + long pieces), preferring fewer long rows."""
    if m == 0 or lens.max() == 0:
        return max(1, int(lens.max()) if m else 1)
    pc = np.full(-(-m // TB), TB)
    pc[-1] = m - TB * (pc.size - 1)
    cands = sorted({int(np.percentile(lens, q, method="higher")) for q in (50, 75, 90, 95, 99, 99.9)}
                   | {int(lens.max())})
    cands = sorted({min(k, GMAX) for k in cands if k > 0})  # an ELL tile row or a piece fits one group tile
    cost = {}
    for k in cands:
        ok = lens <= k
        ell = sum(int((pc * _ell_widths(c, ok, m)).sum()) for c in cnts)
        lng = sum(int((-(-c[~ok] // k)).sum()) * k for c in cnts)
        cost[k] = ell + lng
    best = min(cost.values())
    return max(k for k in cands if cost[k] <= 1.1 * best)


def build_ell(col_indices: torch.Tensor, row_ptrs: torch.Tensor, shape, xmax=None) -> EllStructure:
    """The :class:`EllStructure` of a canonical CSR pattern (columns sorted inside rows); column blocks of
    at most ``xmax`` (default :data:`XMAX`)."""
    m, n = shape
    xmax = XMAX if xmax is None else xmax
    ptr = row_ptrs.detach().cpu().numpy().astype(np.int64)
    col = col_indices.detach().cpu().numpy().astype(np.int64)
    nnz = int(ptr[-1]) if ptr.size else 0
    lens = np.diff(ptr)
    XC = max(1, min(n, xmax))
    nb = max(1, -(-n // XC))
    rows_e = np.repeat(np.arange(m), lens)
    bc = col // XC
    cnts = [np.bincount(rows_e[bc == c], minlength=m) for c in range(nb)]
    K = _choose_k(lens, cnts, m)
    long_row = lens > K
    S = -(-m // TB)
    # rank of each entry inside its (row, block) run (columns are sorted inside rows)
    key = rows_e * nb + bc
    start = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]])) if nnz else np.zeros(0, np.int64)
    run_id = np.cumsum(np.concatenate([[False], key[1:] != key[:-1]])) if nnz else np.zeros(0, np.int64)
    k_in = np.arange(nnz) - start[run_id] if nnz else np.zeros(0, np.int64)
    pos = np.empty(nnz, np.int64)
    cols_out, targets, blocks = [], [], []
    off = toff = 0
    for c in range(nb):
        c0, xc = c * XC, min(XC, n - c * XC)
        w_s = _ell_widths(cnts[c], ~long_row, m)
        # groups of consecutive full slices of nearly equal width
        groups, s = [], 0
        while s < S:
            if w_s[s] == 0:
                s += 1
                continue
            pc = min(TB, m - TB * s)
            G, lo, hi = 1, w_s[s], w_s[s]
            while pc == TB and s + G < S and m - TB * (s + G) >= TB and w_s[s + G] > 0:
                nlo, nhi = min(lo, w_s[s + G]), max(hi, w_s[s + G])
                if nhi * (G + 1) > GMAX or nhi - nlo > max(1, nhi // 8):
                    break
                lo, hi, G = nlo, nhi, G + 1
            groups.append((s, pc, G, int(hi), off))
            off += pc * G * int(hi)
            s += G
        # slots of the ELL entries of this block
        sel = (bc == c) & ~long_row[rows_e]
        r, k = rows_e[sel], k_in[sel]
        sl = r // TB
        # per slice: where its sub-block starts and the partition stride (G * w) of its group
        s_off, s_stride = np.zeros(S, np.int64), np.zeros(S, np.int64)
        for s0, _pc, G, w, goff in groups:
            s_off[s0:s0 + G] = goff + np.arange(G) * w
            s_stride[s0:s0 + G] = G * w
        pos[sel] = s_off[sl] + (r % TB) * s_stride[sl] + k
        blk = np.full(off - (groups[0][4] if groups else off), xc, np.int64)
        base = groups[0][4] if groups else off
        blk[pos[sel] - base] = col[sel] - c0
        cols_out.append(blk)
        # long pieces of this block: row-major, K entries each, 128 per long slice
        lr = np.flatnonzero(long_row & (cnts[c] > 0))
        npieces = -(-cnts[c][lr] // K)
        pstart = np.concatenate([[0], np.cumsum(npieces)])
        longs = []
        if lr.size:
            total = int(pstart[-1])
            prow = np.repeat(lr, npieces)
            plen = np.minimum(K, cnts[c][prow] - (np.arange(total) - pstart[np.repeat(np.arange(lr.size), npieces)])
                              * K)
            lbase = off
            for q0 in range(0, total, TB):
                pcl = min(TB, total - q0)
                wl = int(plen[q0:q0 + pcl].max())
                rr = prow[q0:q0 + pcl]
                sl_touch = np.unique(rr // TB)
                chunks = tuple((int(ch * 512), int(min(512, S - ch * 512))) for ch in np.unique(sl_touch // 512))
                longs.append((pcl, wl, off, toff, chunks))
                targets.append(np.stack([rr % TB, rr // TB], axis=1))
                off += pcl * wl
                toff += pcl
            # slots of the long entries
            sel = (bc == c) & long_row[rows_e]
            r, k = rows_e[sel], k_in[sel]
            li = np.searchsorted(lr, r)
            piece = pstart[li] + k // K
            ls = piece // TB
            lw = np.asarray([x[1] for x in longs], np.int64)
            lo_ = np.asarray([x[2] for x in longs], np.int64)
            pos[sel] = lo_[ls] + (piece % TB) * lw[ls] + k % K
            lblk = np.full(off - lbase, xc, np.int64)
            lblk[pos[sel] - lbase] = col[sel] - c0
            cols_out.append(lblk)
        blocks.append((c0, xc, tuple(groups), tuple(longs)))
    cols_all = np.concatenate(cols_out) if cols_out else np.zeros(0, np.int64)
    tg = np.concatenate(targets).astype(np.float32) if targets else np.zeros((0, 2), np.float32)
    return EllStructure((m, n), nnz, K, tuple(blocks), torch.from_numpy(pos), cols_all.astype(np.uint32),
                        torch.from_numpy(tg))


def ell_layout(owner, values, col_indices, row_ptrs, shape, ncols=1):
    """``(EllStructure, slot values)`` for ``ncols`` columns of x, cached on ``owner`` like :func:`layout`."""
    shape = tuple(shape)
    xmax = xmax_for(ncols)
    sfx = "" if xmax == XMAX else f"_{xmax}"
    skey, vkey = f"_ell_structure{sfx}", f"_ell_values{sfx}"
    st = cached(owner, skey, (col_indices, row_ptrs), lambda: build_ell(col_indices, row_ptrs, shape, xmax))
    if st.shape != shape:
        st = build_ell(col_indices, row_ptrs, shape, xmax)
        owner.__dict__[skey] = (stamp((col_indices, row_ptrs)), st)
    built_on, vals = cached(owner, vkey, (values, col_indices, row_ptrs), lambda: (st, slot_values(st, values)))
    if built_on is not st:
        vals = slot_values(st, values)
        owner.__dict__[vkey] = (stamp((values, col_indices, row_ptrs)), (st, vals))
    return st, vals
