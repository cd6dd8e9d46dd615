"""Symbolic phases of SpGEMM and sparse add, on the host, once per pattern pair.

What the device kernels (:mod:`trnsparse.kernels.bsr_spgemm`,
:mod:`trnsparse.kernels.csr_add`) take as their static schedule is decided
here from the index arrays alone and cached on the left operand with
:func:`trnsparse.layouts.cached`, keyed on both operands' index arrays (their
identity and version counters): a new pair of patterns, or an index array
modified in place, rebuilds it; new values on the same patterns reuse it.
One entry per left operand (the last pattern pair used with it).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch

from .kernels.bsr_spgemm import AMAX, groups_of
from .kernels.csr_add import FC, TB
from .layouts import cached, stamp

T2 = TB * TB


def _np(t):
    return t.detach().cpu().numpy().astype(np.int64)


# --------------------------------------------------------------- BSR SpGEMM

@dataclass(frozen=True)
class BsrSchedule:
    """C's block pattern and the tile products that build it (products sorted by output tile, then by
    A tile)."""

    c_bcol: torch.Tensor   # (nC,) int64
    c_bptr: torch.Tensor   # (mb + 1,) int64
    a_bptr: np.ndarray     # (mb + 1,) A's block row pointers
    ia: np.ndarray         # (P,) A tile of every product
    ib: np.ndarray         # (P,) B tile
    ic: np.ndarray         # (P,) output tile
    na_max: int            # most A tiles in one block row that produces output

    @property
    def nc(self) -> int:
        return int(self.c_bcol.numel())

    @property
    def products(self) -> int:
        return int(self.ia.size)

    @cached_property
    def rows(self) -> tuple:
        """The kernel's static schedule (see ``bsr_spgemm_kernel``), built on first use (the torch path
        needs only ``ia``/``ib``/``ic``)."""
        cptr = _np(self.c_bptr)
        out = []
        starts = np.searchsorted(self.ic, np.arange(self.nc + 1))
        for r in range(cptr.size - 1):
            c0, c1 = int(cptr[r]), int(cptr[r + 1])
            if c0 == c1:
                continue
            lo, hi = int(self.a_bptr[r]), int(self.a_bptr[r + 1])
            pairs = [tuple((int(x) - lo, int(y)) for x, y in zip(self.ia[starts[c]:starts[c + 1]],
                                                                  self.ib[starts[c]:starts[c + 1]]))
                     for c in range(c0, c1)]
            out.append((lo, hi - lo, groups_of(pairs, c0)))
        return tuple(out)


def bsr_symbolic(a_bcol, a_bptr, b_bcol, b_bptr) -> BsrSchedule:
    """Block pattern of ``A @ B`` and every product ``(A tile, B tile, output tile)``, vectorized."""
    ac, ap, bc, bp = _np(a_bcol), _np(a_bptr), _np(b_bcol), _np(b_bptr)
    mb = ap.size - 1
    ar = np.repeat(np.arange(mb), np.diff(ap))            # block row of every A tile
    cnt = np.diff(bp)[ac] if ac.size else np.zeros(0, np.int64)
    P = int(cnt.sum())
    ia = np.repeat(np.arange(ac.size), cnt)
    ib = bp[ac[ia]] + (np.arange(P) - np.repeat(np.cumsum(cnt) - cnt, cnt))
    nbc = int(bc.max()) + 1 if bc.size else 1
    key = ar[ia] * nbc + bc[ib]
    order = np.lexsort((ia, key))                          # by output tile, then A tile
    ia, ib, key = ia[order], ib[order], key[order]
    uk, ic = np.unique(key, return_inverse=True)
    crow = uk // nbc
    cptr = np.searchsorted(crow, np.arange(mb + 1))
    out_rows = np.unique(crow)
    na_max = int(np.diff(ap)[out_rows].max()) if out_rows.size else 0
    return BsrSchedule(torch.from_numpy(uk % nbc), torch.from_numpy(cptr.astype(np.int64)), ap, ia, ib,
                       ic.astype(np.int64).reshape(-1), na_max)


def bsr_schedule(owner, a_bcol, a_bptr, b_bcol, b_bptr) -> BsrSchedule:
    """:func:`bsr_symbolic`, cached on ``owner`` (A) while all four index arrays are unchanged."""
    return cached(owner, "_spgemm_bsr_schedule", (a_bcol, a_bptr, b_bcol, b_bptr),
                  lambda: bsr_symbolic(a_bcol, a_bptr, b_bcol, b_bptr))


def bsr_fits(sch: BsrSchedule):
    """None, or why the kernel's SBUF plan cannot take the schedule."""
    if sch.na_max > AMAX:
        return f"a block row of A with {sch.na_max} tiles: more than {AMAX} (the kernel's SBUF plan)"
    return None


# --------------------------------------------------------------- CSR -> 128 x 128 tiles

@dataclass(frozen=True)
class CsrTiles:
    """The 128 x 128 tiles holding a CSR pattern's entries (explicit zeros too)."""

    bcol: torch.Tensor   # (nblk,) int64
    bptr: torch.Tensor   # (mb + 1,) int64
    pos: torch.Tensor    # (nnz,) int64: flat offset of every entry in the (nblk, 128, 128) tile array
    nnz: int

    @property
    def nblk(self) -> int:
        return int(self.bcol.numel())


def csr_tiles(cols, ptrs, shape) -> CsrTiles:
    m, n = shape
    c, p = _np(cols), _np(ptrs)
    rows = np.repeat(np.arange(m), np.diff(p))
    nbc = max(1, -(-n // TB))
    key = (rows // TB) * nbc + c // TB
    uk, inv = np.unique(key, return_inverse=True)
    bptr = np.searchsorted(uk // nbc, np.arange(-(-m // TB) + 1), side="left")
    pos = inv * T2 + (rows % TB) * TB + c % TB
    return CsrTiles(torch.from_numpy(uk % nbc), torch.from_numpy(bptr.astype(np.int64)), torch.from_numpy(pos),
                    int(c.size))


def tile_structure(owner, cols, ptrs, shape) -> CsrTiles:
    """:func:`csr_tiles`, cached on ``owner`` while its index arrays are unchanged."""
    return cached(owner, "_tiles128_structure", (cols, ptrs), lambda: csr_tiles(cols, ptrs, shape))


def tile_values(owner, values, cols, ptrs, shape) -> torch.Tensor:
    """The values scattered into the ``(nblk, 128, 128)`` tiles of :func:`tile_structure` (cached on all
    three arrays), in ``values``' dtype."""
    st = tile_structure(owner, cols, ptrs, shape)

    def fill():
        blk = values.new_zeros(st.nblk * T2)
        if st.nnz:
            blk[st.pos.to(blk.device)] = values.detach()  # canonical patterns: one entry per position
        return st, blk.reshape(st.nblk, TB, TB)

    built_on, blocks = cached(owner, "_tiles128_values", (values, cols, ptrs), fill)
    if built_on is not st:  # the structure was rebuilt under the same values tensor
        built_on, blocks = fill()
        owner.__dict__["_tiles128_values"] = (stamp((values, cols, ptrs)), (st, blocks))
    return blocks


@dataclass(frozen=True)
class CPattern:
    """C = A @ B's structural pattern (all-ones values cannot cancel), columns sorted."""

    cols: np.ndarray     # (nnzC,) int64
    ptrs: np.ndarray     # (m + 1,) int64
    flops: int           # useful flops: 2 * (scalar products of the row merge)

    @property
    def nnz(self) -> int:
        return int(self.cols.size)


def _c_pattern(a_cols, a_ptrs, b_cols, b_ptrs, m, n) -> CPattern:
    import scipy.sparse as sp

    ac, ap, bc, bp = _np(a_cols), _np(a_ptrs), _np(b_cols), _np(b_ptrs)
    k = bp.size - 1
    SA = sp.csr_array((np.ones(ac.size), ac, ap), shape=(m, k))
    SB = sp.csr_array((np.ones(bc.size), bc, bp), shape=(k, n))
    S = (SA @ SB).tocsr()
    S.sort_indices()
    flops = 2 * int(np.diff(bp)[ac].sum()) if ac.size else 0
    return CPattern(S.indices.astype(np.int64), S.indptr.astype(np.int64), flops)


def c_pattern(owner_a, a_cols, a_ptrs, b_cols, b_ptrs, m, n) -> CPattern:
    """:class:`CPattern`, cached on A keyed on both operands' index arrays."""
    return cached(owner_a, "_spgemm_c_pattern", (a_cols, a_ptrs, b_cols, b_ptrs),
                  lambda: _c_pattern(a_cols, a_ptrs, b_cols, b_ptrs, m, n))


def tile_counts(ta: CsrTiles, tb: CsrTiles):
    """``(P, nC)``: tile products and output tiles of the tile forms, without building the schedule."""
    import scipy.sparse as sp

    ka, kb = ta.bptr.numel() - 1, tb.bptr.numel() - 1
    nbb = int(tb.bcol.max()) + 1 if tb.nblk else 1
    SA = sp.csr_array((np.ones(ta.nblk), _np(ta.bcol), _np(ta.bptr)), shape=(ka, kb))
    SB = sp.csr_array((np.ones(tb.nblk), _np(tb.bcol), _np(tb.bptr)), shape=(kb, nbb))
    S = SA @ SB
    return int(S.sum()), int(S.nnz)


@dataclass(frozen=True)
class CsrSpgemmPlan:
    """C = A @ B through tiles: the schedule and where each C entry sits in C's tiles."""

    sched: BsrSchedule
    cols: torch.Tensor   # (nnzC,) int64, sorted inside rows
    ptrs: torch.Tensor   # (m + 1,) int64
    pos: torch.Tensor    # (nnzC,) int64 flat offset in C's tile array


def csr_spgemm_symbolic(ta: CsrTiles, tb: CsrTiles, cp: CPattern, m, n) -> CsrSpgemmPlan:
    sch = bsr_symbolic(ta.bcol, ta.bptr, tb.bcol, tb.bptr)
    rows = np.repeat(np.arange(m), np.diff(cp.ptrs))
    cc = cp.cols
    nbc = max(1, -(-n // TB))
    ckey = _np(sch.c_bcol) + nbc * np.repeat(np.arange(-(-m // TB)), np.diff(_np(sch.c_bptr)))
    t = np.searchsorted(ckey, (rows // TB) * nbc + cc // TB)
    pos = t * T2 + (rows % TB) * TB + cc % TB
    return CsrSpgemmPlan(sch, torch.from_numpy(cc), torch.from_numpy(cp.ptrs), torch.from_numpy(pos))


def csr_spgemm_plan(owner_a, owner_b, a_cols, a_ptrs, a_shape, b_cols, b_ptrs, b_shape) -> CsrSpgemmPlan:
    """The tile route's plan of a CSR product, cached on A keyed on both index pairs."""
    ta = tile_structure(owner_a, a_cols, a_ptrs, a_shape)
    tb = tile_structure(owner_b, b_cols, b_ptrs, b_shape)
    cp = c_pattern(owner_a, a_cols, a_ptrs, b_cols, b_ptrs, a_shape[0], b_shape[1])
    return cached(owner_a, "_spgemm_csr_plan", (a_cols, a_ptrs, b_cols, b_ptrs),
                  lambda: csr_spgemm_symbolic(ta, tb, cp, a_shape[0], b_shape[1]))


# --------------------------------------------------------------- sparse add

@dataclass(frozen=True)
class AddPlan:
    """The union pattern of two CSR patterns and the kernel's gather maps."""

    cols: torch.Tensor   # (nnzC,) int64 canonical
    ptrs: torch.Tensor   # (m + 1,) int64
    chunks: tuple        # (u0, F, WA, WB, n) per chunk
    start: np.ndarray    # (128, 2Q) int32
    la: np.ndarray       # (sum 128 F,) uint32
    lb: np.ndarray
    duplicates: bool     # an operand holds two entries at one position (not canonical)

    @property
    def nnz(self) -> int:
        return int(self.cols.numel())


def _maps(slot_of, nnz_op, chunks):
    """Per chunk: the run start of each partition and every slot's offset inside the run."""
    starts, maps, widths = [], [], []
    nn = max(nnz_op, 1)
    for u0, F, n in chunks:
        arr = np.full(TB * F, -1, np.int64)
        arr[:n] = slot_of[u0:u0 + n]
        a = arr.reshape(TB, F)
        has = a >= 0
        lo = np.where(has, a, np.iinfo(np.int64).max).min(axis=1)
        hi = np.where(has, a, -1).max(axis=1)
        any_ = has.any(axis=1)
        W = int(max(1, (hi - lo + 1)[any_].max())) if any_.any() else 1
        s = np.where(any_, np.minimum(lo, nn - W), 0)
        s = np.maximum(s, 0)
        local = np.where(has, a - s[:, None], W)
        starts.append(s)
        maps.append(local.reshape(-1))
        widths.append(W)
    return starts, maps, widths


def add_symbolic(a_cols, a_ptrs, b_cols, b_ptrs, shape) -> AddPlan:
    m, n = shape
    ac, ap, bc, bp = _np(a_cols), _np(a_ptrs), _np(b_cols), _np(b_ptrs)
    ka = np.repeat(np.arange(m), np.diff(ap)) * max(n, 1) + ac
    kb = np.repeat(np.arange(m), np.diff(bp)) * max(n, 1) + bc
    u = np.union1d(ka, kb)
    nnz = u.size
    sa, sb = np.searchsorted(u, ka), np.searchsorted(u, kb)
    dup = np.unique(sa).size < sa.size or np.unique(sb).size < sb.size
    map_a = np.full(nnz, -1, np.int64)
    map_a[sa] = np.arange(sa.size)
    map_b = np.full(nnz, -1, np.int64)
    map_b[sb] = np.arange(sb.size)
    geo = []
    for u0 in range(0, nnz, TB * FC):
        cnt = min(TB * FC, nnz - u0)
        geo.append((u0, -(-cnt // TB), cnt))
    st_a, la, wa = _maps(map_a, ka.size, geo)
    st_b, lb, wb = _maps(map_b, kb.size, geo)
    chunks = tuple((u0, F, wa[q], wb[q], cnt) for q, (u0, F, cnt) in enumerate(geo))
    start = np.stack([x for q in range(len(geo)) for x in (st_a[q], st_b[q])], axis=1) if geo \
        else np.zeros((TB, 0), np.int64)
    rows = u // max(n, 1)
    ptrs = np.searchsorted(rows, np.arange(m + 1), side="left")
    return AddPlan(torch.from_numpy(u % max(n, 1)), torch.from_numpy(ptrs.astype(np.int64)), chunks,
                   np.ascontiguousarray(start.astype(np.int32)), _u32(la), _u32(lb), bool(dup))


def _u32(xs):
    return np.concatenate(xs).astype(np.uint32) if xs else np.zeros(0, np.uint32)


def add_plan(owner, a_cols, a_ptrs, b_cols, b_ptrs, shape) -> AddPlan:
    """:func:`add_symbolic`, cached on ``owner`` (A) while all four index arrays are unchanged."""
    return cached(owner, "_sparse_add_plan", (a_cols, a_ptrs, b_cols, b_ptrs),
                  lambda: add_symbolic(a_cols, a_ptrs, b_cols, b_ptrs, shape))


# --------------------------------------------------------------- CSR SpGEMM by row merge

@dataclass(frozen=True)
class RowMergePlan:
    """C's structural pattern and the row-merge kernel's layouts (see kernels/csr_spgemm.py)."""

    cols: torch.Tensor     # (nnzC,) int64 sorted inside rows
    ptrs: torch.Tensor     # (m + 1,) int64
    blocks: tuple          # (pc, wA, wC, offA, offM, offC) per row block
    a_pos: np.ndarray      # (nnzA,) slot of every A entry in the ELL arrays
    a_rows: np.ndarray     # (slotsA,) int32 B row per slot (kB on padding)
    inv: np.ndarray        # uint32 maps
    c_pos: torch.Tensor    # (nnzC,) int64 ELL slot of every C entry
    slots_c: int
    wB: int
    b_pos: np.ndarray      # (nnzB,) flat offset of every B entry in b_ell [kB + 1, wB + 1]


def rowmerge_geometry(a_ptrs, b_ptrs, cp: CPattern):
    """``(shapes, wB)``: the row blocks' ``(pc, wA, wC)`` (blocks without work left out) and B's widest
    row -- cheap, for deciding before any map is built."""
    la, lb, lc = np.diff(_np(a_ptrs)), np.diff(_np(b_ptrs)), np.diff(cp.ptrs)
    m = la.size
    shapes = []
    for r0 in range(0, m, TB):
        pc = min(TB, m - r0)
        wA, wC = int(la[r0:r0 + pc].max()), int(lc[r0:r0 + pc].max())
        if wA and wC:
            shapes.append((pc, wA, wC))
    return shapes, (int(lb.max()) if lb.size else 0)


def rowmerge_symbolic(a_cols, a_ptrs, b_cols, b_ptrs, cp: CPattern, m, n) -> RowMergePlan:
    ac, ap, bc, bp = _np(a_cols), _np(a_ptrs), _np(b_cols), _np(b_ptrs)
    k = bp.size - 1
    cptr, ccol = cp.ptrs, cp.cols
    la, lb, lc = np.diff(ap), np.diff(bp), np.diff(cptr)
    wB = int(lb.max()) if lb.size else 0
    # B's ELL: row k, entry t at k * (wB + 1) + t
    rb = np.repeat(np.arange(k), lb)
    b_pos = rb * (wB + 1) + (np.arange(bc.size) - bp[rb])
    blocks, a_pos, a_rows, c_pos = [], np.empty(ac.size, np.int64), [], np.empty(ccol.size, np.int64)
    offA = offM = offC = 0
    inv_parts = []
    ra = np.repeat(np.arange(m), la)
    ja = np.arange(ac.size) - ap[ra]
    rc = np.repeat(np.arange(m), lc)
    jc = np.arange(ccol.size) - cptr[rc]
    nn = max(n, 1)
    ckeys = rc * nn + ccol
    for r0 in range(0, m, TB):
        pc = min(TB, m - r0)
        wA = int(la[r0:r0 + pc].max()) if pc else 0
        wC = int(lc[r0:r0 + pc].max()) if pc else 0
        if wA == 0 or wC == 0:
            continue
        sel = (ra >= r0) & (ra < r0 + pc)
        a_pos[sel] = offA + (ra[sel] - r0) * wA + ja[sel]
        rows_blk = np.full(pc * wA, k, np.int64)
        rows_blk[(ra[sel] - r0) * wA + ja[sel]] = ac[sel]
        a_rows.append(rows_blk)
        selc = (rc >= r0) & (rc < r0 + pc)
        c_pos[selc] = offC + (rc[selc] - r0) * wC + jc[selc]
        inv = np.full((pc, wA, wC), wB, np.int64)
        # every product (A entry e = (r, j) with column kk, B entry t of row kk) -> its C slot
        e = np.flatnonzero(sel)
        cnt = lb[ac[e]]
        tot = int(cnt.sum())
        if tot:
            ee = np.repeat(e, cnt)
            t = np.arange(tot) - np.repeat(np.cumsum(cnt) - cnt, cnt)
            bidx = bp[ac[ee]] + t
            g = np.searchsorted(ckeys, ra[ee] * nn + bc[bidx])
            inv[ra[ee] - r0, ja[ee], jc[g]] = t
        inv_parts.append(inv.reshape(-1))
        blocks.append((pc, wA, wC, offA, offM, offC))
        offA += pc * wA
        offM += pc * wA * wC
        offC += pc * wC
    return RowMergePlan(torch.from_numpy(ccol), torch.from_numpy(cptr), tuple(blocks), a_pos,
                        (np.concatenate(a_rows) if a_rows else np.zeros(0, np.int64)).astype(np.int32),
                        _u32(inv_parts), torch.from_numpy(c_pos), offC, wB, b_pos)


def rowmerge_plan(owner_a, a_cols, a_ptrs, a_shape, b_cols, b_ptrs, b_shape) -> RowMergePlan:
    """:func:`rowmerge_symbolic`, cached on A keyed on both operands' index arrays."""
    m, n = a_shape[0], b_shape[1]
    cp = c_pattern(owner_a, a_cols, a_ptrs, b_cols, b_ptrs, m, n)
    return cached(owner_a, "_spgemm_rowmerge_plan", (a_cols, a_ptrs, b_cols, b_ptrs),
                  lambda: rowmerge_symbolic(a_cols, a_ptrs, b_cols, b_ptrs, cp, m, n))


def b_ell(owner_b, values, cols, ptrs, wB) -> torch.Tensor:
    """B's rows padded to ``wB`` entries plus a zero column, and a zero row: ``[kB + 1, wB + 1]`` (cached on
    B's three arrays)."""
    def build():
        bp = _np(ptrs)
        k = bp.size - 1
        lb = np.diff(bp)
        rb = np.repeat(np.arange(k), lb)
        pos = torch.from_numpy(rb * (wB + 1) + (np.arange(rb.size) - bp[rb]))
        out = values.new_zeros((k + 1) * (wB + 1))
        out[pos] = values.detach()
        return wB, out.reshape(k + 1, wB + 1)

    w, out = cached(owner_b, "_spgemm_b_ell", (values, cols, ptrs), build)
    if w != wB:
        w, out = build()
        owner_b.__dict__["_spgemm_b_ell"] = (stamp((values, cols, ptrs)), (w, out))
    return out
