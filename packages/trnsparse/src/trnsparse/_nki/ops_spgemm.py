"""NKI lowerings of :mod:`trnsparse.ops`'s SpGEMM (BSR and CSR) and sparse add.

Host-side work and why it is there (all of it once per pattern pair, cached
on the left operand by :mod:`trnsparse.symbolic`, keyed on both operands'
index arrays):

* BSR SpGEMM: the symbolic phase (C's block pattern, the tile products of
  each output tile) is the kernel's static schedule. A's tiles are passed
  transposed (cached on A while its ``blocks`` tensor is unchanged).
* CSR SpGEMM: C's structural pattern (SciPy on all-ones values), then one
  of two device routes, or the host, chosen per call from cached data
  (:func:`_csr_route`; the plan states the figures when the host runs):

  - *tiles*: both operands scattered into the 128 x 128 tiles that hold
    their entries (structure cached on the index arrays, values on all
    three), the BSR kernel, C's values gathered from its tiles (nnzC
    entries); estimated ``LAUNCH_S + P * PRODUCT_S`` for P tile products;
  - *row merge* (``csr_spgemm_kernel``): A in row-block ELL, B in ELL with
    a zero row, the per-step gather maps into C's slots; estimated
    ``LAUNCH_S + DMAs * ROW_DMA_S``.

  PRODUCT_S and ROW_DMA_S are the emulator's modeled figures on trn1
  (benchmarks/bench_spgemm_kernels.py); the faster route runs unless it is
  slower than the host merge at ``HOST_PRODUCT_S`` per useful scalar
  product (SciPy, measured on the development machine). A route whose
  device forms exceed :data:`TILE_BLOWUP` times the CSR arrays' bytes (a
  very sparse matrix densifies its tiles; long rows blow up the maps), or
  its SBUF plan, is not considered; the sizes are computed before anything
  is built.
* sparse add: the union pattern and the two gather maps.
"""

from __future__ import annotations

import torch

from trnsci import nki, runtime
from trnsparse import layouts, symbolic
from trnsparse._nki.ops import F32, KERNEL_DTYPES, TB, _grad
from trnsparse.kernels.bsr_spgemm import AMAX, bsr_spgemm_counts, bsr_spgemm_kernel, resident
from trnsparse.kernels.csr_add import csr_add_counts, csr_add_kernel
from trnsparse.kernels.csr_spgemm import csr_spgemm_counts, csr_spgemm_kernel
from trnsparse.ops import BSR_SPGEMM, SPARSE_ADD, SPGEMM

#: Modeled time of one 128^3 fp32 tile product in the BSR SpGEMM kernel (trn1, overlapped timeline;
#: modeled, docs/perf-notes.md#design-spgemm).
PRODUCT_S = 0.18e-6
#: Modeled time per DMA of the row-merge kernel (trn1; its DMAs -- one indirect gather of 128 B rows and
#: one map per step -- set its pace; modeled, docs/perf-notes.md#design-spgemm).
ROW_DMA_S = 0.85e-6
#: A kernel launch, as the other trnsparse thresholds assume it (a placeholder, docs/perf-notes.md#design-spgemm).
LAUNCH_S = 20e-6
#: SciPy's SpGEMM per useful scalar product a_ik b_kj, measured on the development CPU
#: (docs/perf-notes.md#design-spgemm).
HOST_PRODUCT_S = 12e-9
#: Most bytes of a device form (tiles, or the row merge's maps) per byte of the CSR arrays (8 per entry).
TILE_BLOWUP = 64
#: Row-merge kernel limits (its SBUF plan and unrolled steps): entries of A's longest row, of B's and C's.
RM_WA_MAX = 256
RM_W_MAX = 2047


def _csr_route(ac, ap, ash, bc, bp, bsh, owner_a, owner_b):
    """``(route, reason)``: "tiles" or "rowmerge" with None, or None with why the host runs (decided
    from the patterns alone, so cached on A with the rest of the symbolic phase)."""
    return layouts.cached(owner_a, "_spgemm_route", (ac, ap, bc, bp),
                        lambda: _decide(ac, ap, ash, bc, bp, bsh, owner_a, owner_b))


def _decide(ac, ap, ash, bc, bp, bsh, owner_a, owner_b):
    cp = symbolic.c_pattern(owner_a, ac, ap, bc, bp, ash[0], bsh[1])
    ta = symbolic.tile_structure(owner_a, ac, ap, ash)
    tb = symbolic.tile_structure(owner_b, bc, bp, bsh)
    csr = 8 * (ta.nnz + tb.nnz + cp.nnz)
    host = HOST_PRODUCT_S * cp.flops / 2
    opts, why = [], []
    P, nC = symbolic.tile_counts(ta, tb)
    tiles = 4 * 128 * 128 * (ta.nblk + tb.nblk + nC)
    na_max = int((ta.bptr[1:] - ta.bptr[:-1]).max()) if ta.nblk else 0
    if tiles > TILE_BLOWUP * csr:
        why.append(f"the 128x128 tile forms would take {tiles / 2**20:.1f} MiB, {tiles / csr:.0f}x the CSR arrays "
                   f"(more than {TILE_BLOWUP}x: the tiles are too empty)")
    elif na_max > AMAX:
        why.append(f"a block row of A with {na_max} tiles: more than {AMAX} (the tile kernel's SBUF plan)")
    else:
        opts.append((LAUNCH_S + P * PRODUCT_S, "tiles", f"{P} tile products"))
    shapes, wB = symbolic.rowmerge_geometry(ap, bp, cp)
    maps = 4 * sum(pc * wa * wc for pc, wa, wc in shapes)
    dmas = sum(3 + 2 * wa for _, wa, _ in shapes)
    wa_max = max((wa for _, wa, _ in shapes), default=0)
    wc_max = max((wc for *_, wc in shapes), default=0)
    if maps > TILE_BLOWUP * csr:
        why.append(f"the row merge's maps would take {maps / 2**20:.1f} MiB, {maps / csr:.0f}x the CSR arrays")
    elif wa_max > RM_WA_MAX or max(wB, wc_max) > RM_W_MAX:
        why.append(f"row merge: rows of {wa_max} (A) / {wB} (B) / {wc_max} (C) entries exceed its plan "
                   f"({RM_WA_MAX} / {RM_W_MAX} / {RM_W_MAX})")
    else:
        opts.append((LAUNCH_S + dmas * ROW_DMA_S, "rowmerge", f"{dmas} DMAs"))
    if not opts:
        return None, "; ".join(why) + "; the host row merge runs"
    t, route, what = min(opts)
    # resident operands: the host merge would copy both matrices to the host and C back, so the kernel runs
    if t > host and not runtime.resident(ac, ap, bc, bp):
        return None, (f"the estimated kernel time {t * 1e6:.0f} us ({route}: {what}) exceeds the host row "
                      f"merge's {host * 1e6:.0f} us ({cp.flops // 2} scalar products)")
    return route, None


# ----------------------------------------------------------------- BSR SpGEMM

def _schedule(owner, a_bcol, a_bptr, b_bcol, b_bptr):
    return symbolic.bsr_schedule(owner, a_bcol, a_bptr, b_bcol, b_bptr)


def _bsr_common(a_blocks, b_blocks, block_size):
    if block_size != TB:
        return f"block_size {block_size}: the kernel takes 128x128 tiles"
    if b_blocks.dtype != a_blocks.dtype:
        return f"B dtype {b_blocks.dtype} differs from A's {a_blocks.dtype}"
    if _grad(a_blocks, b_blocks):
        return "autograd: the kernel has no backward (the torch path is differentiable)"
    return None


def _bsr_spgemm_supports(a_blocks, a_bcol, a_bptr, a_shape, b_blocks, b_bcol, b_bptr, b_shape, block_size,
                         owner=None):
    if owner is None:
        return "no matrix to cache the symbolic phase on (call through bsr_spgemm/spgemm)"
    why = _bsr_common(a_blocks, b_blocks, block_size)
    if why:
        return why
    sch = _schedule(owner, a_bcol, a_bptr, b_bcol, b_bptr)
    if sch.nc == 0:
        return "no tile product: C has no stored tile"
    return symbolic.bsr_fits(sch)


def _keep_b(sch, nb, itemsize):
    return resident(sch.na_max, nb, itemsize)


def _bsr_spgemm_counts(a_blocks, a_bcol, a_bptr, a_shape, b_blocks, b_bcol, b_bptr, b_shape, block_size,
                       owner=None):
    sch = _schedule(owner, a_bcol, a_bptr, b_bcol, b_bptr)
    s, nb = a_blocks.element_size(), b_blocks.shape[0]
    return {"kernel": "bsr_spgemm_kernel",
            **bsr_spgemm_counts(sch.rows, nb, sch.nc, s, _keep_b(sch, nb, s))}


def _tiles_t(owner, blocks):
    """A's tiles transposed (the contraction index on the partitions), cached on A with its blocks."""
    return layouts.cached(owner, "_bsr_tiles_t", (blocks,), lambda: blocks.detach().transpose(1, 2).contiguous())


def _run_tiles(sch, a_t, b_blocks):
    keep = _keep_b(sch, b_blocks.shape[0], b_blocks.element_size())
    return nki.run(bsr_spgemm_kernel, a_t, b_blocks.detach().contiguous(), rows=sch.rows, nc=sch.nc, keep_b=keep,
                   out_dtype=F32)


@BSR_SPGEMM.lowering("nki", dtypes=KERNEL_DTYPES, supports=_bsr_spgemm_supports, counts=_bsr_spgemm_counts)
def _bsr_spgemm_nki(a_blocks, a_bcol, a_bptr, a_shape, b_blocks, b_bcol, b_bptr, b_shape, block_size, owner=None):
    sch = _schedule(owner, a_bcol, a_bptr, b_bcol, b_bptr)
    C = _run_tiles(sch, _tiles_t(owner, a_blocks), b_blocks)
    dev = a_blocks.device
    return C.to(a_blocks.dtype), sch.c_bcol.to(dev), sch.c_bptr.to(dev)


# ----------------------------------------------------------------- CSR SpGEMM through tiles

def _spgemm_supports(av, ac, ap, ash, bv, bc, bp, bsh, owner_a=None, owner_b=None):
    if owner_a is None or owner_b is None:
        return "no matrices to cache the device forms on (call through spgemm)"
    if bv.dtype != av.dtype:
        return f"B dtype {bv.dtype} differs from A's {av.dtype}"
    if _grad(av, bv):
        return "autograd: the kernel has no backward (the torch path is differentiable)"
    if av.numel() == 0 or bv.numel() == 0:
        return "empty operand: nothing to compute"
    if max(*ash, *bsh, av.numel(), bv.numel()) >= 2**31 - 1:
        return "indices beyond int32"
    if symbolic.c_pattern(owner_a, ac, ap, bc, bp, ash[0], bsh[1]).nnz == 0:
        return "no product: C has no stored entry"
    return _csr_route(ac, ap, ash, bc, bp, bsh, owner_a, owner_b)[1]


def _spgemm_counts(av, ac, ap, ash, bv, bc, bp, bsh, owner_a=None, owner_b=None):
    route, _ = _csr_route(ac, ap, ash, bc, bp, bsh, owner_a, owner_b)
    if route == "tiles":
        plan = symbolic.csr_spgemm_plan(owner_a, owner_b, ac, ap, ash, bc, bp, bsh)
        sch, s = plan.sched, av.element_size()
        nb = symbolic.tile_structure(owner_b, bc, bp, bsh).nblk
        return {"kernel": "bsr_spgemm_kernel", **bsr_spgemm_counts(sch.rows, nb, sch.nc, s, _keep_b(sch, nb, s))}
    plan = symbolic.rowmerge_plan(owner_a, ac, ap, ash, bc, bp, bsh)
    return {"kernel": "csr_spgemm_kernel", **csr_spgemm_counts(plan.blocks, plan.wB)}


def _a_ell(owner_a, av, ac, ap, plan):
    """A's values in the row merge's ELL slots, cached on A's arrays (rebuilt with a new plan)."""
    def fill():
        out = av.new_zeros(sum(b[0] * b[1] for b in plan.blocks))
        out[torch.from_numpy(plan.a_pos)] = av.detach()
        return plan, out

    built_on, vals = layouts.cached(owner_a, "_spgemm_a_ell", (av, ac, ap), fill)
    if built_on is not plan:
        built_on, vals = fill()
        owner_a.__dict__["_spgemm_a_ell"] = (layouts.stamp((av, ac, ap)), (plan, vals))
    return vals


@SPGEMM.lowering("nki", dtypes=KERNEL_DTYPES, supports=_spgemm_supports, counts=_spgemm_counts)
def _spgemm_nki(av, ac, ap, ash, bv, bc, bp, bsh, owner_a=None, owner_b=None):
    route, _ = _csr_route(ac, ap, ash, bc, bp, bsh, owner_a, owner_b)
    dev = av.device
    if route == "tiles":
        plan = symbolic.csr_spgemm_plan(owner_a, owner_b, ac, ap, ash, bc, bp, bsh)
        blk_a = symbolic.tile_values(owner_a, av, ac, ap, ash)
        blk_b = symbolic.tile_values(owner_b, bv, bc, bp, bsh)
        a_t = layouts.cached(owner_a, "_tiles128_t", (blk_a,), lambda: blk_a.transpose(1, 2).contiguous())
        C = _run_tiles(plan.sched, a_t, blk_b)
    else:
        plan = symbolic.rowmerge_plan(owner_a, ac, ap, ash, bc, bp, bsh)
        C = nki.run(csr_spgemm_kernel, _a_ell(owner_a, av, ac, ap, plan), plan.a_rows,
                    symbolic.b_ell(owner_b, bv, bc, bp, plan.wB), plan.inv, blocks=plan.blocks,
                    slots_c=plan.slots_c, out_dtype=F32)
    vals = C.reshape(-1)[plan.pos.to(C.device) if route == "tiles" else plan.c_pos.to(C.device)]
    # (C's tiles / ELL rows -> CSR order: a gather of nnzC entries)
    return vals.to(av.dtype), plan.cols.to(dev), plan.ptrs.to(dev), True


# ----------------------------------------------------------------- sparse add

def _add_plan(ac, ap, bc, bp, shape, owner_a):
    return symbolic.add_plan(owner_a, ac, ap, bc, bp, shape)


def _add_supports(av, ac, ap, bv, bc, bp, shape, alpha, beta, owner_a=None, owner_b=None):
    if owner_a is None:
        return "no matrix to cache the union pattern on (call through sparse_add)"
    if bv.dtype != av.dtype:
        return f"B dtype {bv.dtype} differs from A's {av.dtype}"
    if _grad(av, bv):
        return "autograd: the kernel has no backward (the torch path is differentiable)"
    if max(av.numel(), bv.numel()) >= 2**31:
        return "indices beyond int32"
    plan = _add_plan(ac, ap, bc, bp, shape, owner_a)
    if plan.nnz == 0:
        return "empty union: nothing to compute"
    if plan.duplicates:
        return "an operand stores two entries at one position (not canonical): the host merge sums them"
    return None


def _add_counts(av, ac, ap, bv, bc, bp, shape, alpha, beta, owner_a=None, owner_b=None):
    plan = _add_plan(ac, ap, bc, bp, shape, owner_a)
    return {"kernel": "csr_add_kernel", **csr_add_counts(plan.chunks, plan.nnz)}


def _nonempty(v):
    return v.detach().contiguous() if v.numel() else torch.zeros(1, dtype=v.dtype, device=v.device)


@SPARSE_ADD.lowering("nki", dtypes=KERNEL_DTYPES, supports=_add_supports, counts=_add_counts)
def _sparse_add_nki(av, ac, ap, bv, bc, bp, shape, alpha, beta, owner_a=None, owner_b=None):
    plan = _add_plan(ac, ap, bc, bp, shape, owner_a)
    vals = nki.run(csr_add_kernel, _nonempty(av), _nonempty(bv), torch.from_numpy(plan.start), plan.la, plan.lb,
                   chunks=plan.chunks, nnz_c=plan.nnz, alpha=float(alpha), beta=float(beta), out_dtype=F32)
    dev = av.device
    return vals.to(av.dtype), plan.cols.to(dev), plan.ptrs.to(dev)
