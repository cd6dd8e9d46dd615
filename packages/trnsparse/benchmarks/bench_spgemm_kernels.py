"""trnsparse SpGEMM and sparse-add kernels: HBM bytes vs the floor, modeled time, host time.

Run: ``pytest packages/trnsparse/benchmarks/bench_spgemm_kernels.py --benchmark-enable --benchmark-only``
or ``python packages/trnsparse/benchmarks/bench_spgemm_kernels.py`` for the table.

Modeled times come from the emulator's cost model (trn1 / trn2): they are "modeled", not measured
on a NeuronCore, and cover the kernel only (not the host symbolic phase, which is cached per pattern
pair). The "host ms" column is SciPy's SpGEMM / sum measured on this machine's CPU (one core), the
path the plan takes when the kernel does not pay. Floors: BSR SpGEMM ``s 128^2 (nA + nB) + 4 128^2
nC`` (every stored tile read once, C written once); CSR SpGEMM through tiles the same on the tile
forms; sparse add ``4 (nnzA + nnzB + nnzC)``. "waste" is the tile-product flops over the useful
flops of the row merge: the lowering takes the tile path only at <= 64x.
"""

import time

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from trnsci import nki
from trnsparse import symbolic as _spgemm
from trnsparse._nki.ops_spgemm import _csr_route
from trnsparse.kernels.bsr_spgemm import bsr_spgemm_kernel, resident
from trnsparse.kernels.csr_add import csr_add_kernel
from trnsparse.kernels.csr_spgemm import csr_spgemm_kernel

N_BSR = 1024
T2 = 128 * 128


def _host_ms(fn, reps=3):
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best * 1e3


def _bsr_case(density, seed=0):
    import trnsparse

    rng = np.random.default_rng(seed)
    nb = N_BSR // 128
    mats = []
    for _ in range(2):
        keep = rng.random((nb, nb)) < density
        np.fill_diagonal(keep, True)
        D = (rng.standard_normal((N_BSR, N_BSR)) * np.kron(keep, np.ones((128, 128)))).astype(np.float32)
        mats.append(trnsparse.BSRMatrix.from_dense(torch.from_numpy(D)))
    A, B = mats
    sch = _spgemm.bsr_symbolic(A.block_col_indices, A.block_row_ptrs, B.block_col_indices, B.block_row_ptrs)
    keep_b = resident(sch.na_max, B.n_blocks, 4)
    args = (A.blocks.transpose(1, 2).contiguous().numpy(), B.blocks.numpy())
    kw = {"rows": sch.rows, "nc": sch.nc, "keep_b": keep_b}
    floor = 4 * T2 * (A.n_blocks + B.n_blocks) + 4 * T2 * sch.nc
    SA, SB = A.to_scipy(), B.to_scipy()
    return bsr_spgemm_kernel, args, kw, floor, (lambda: SA @ SB), f"P={sch.products}"


def _csr_case(n, da, db, kernel, seed=1):
    """A CSR product through ``kernel`` ("tiles" or "rowmerge"); the note says what the plan picks."""
    import trnsparse

    SA = sp.random(n, n, da, format="csr", random_state=seed, dtype=np.float32)
    SB = sp.random(n, n, db, format="csr", random_state=seed + 1, dtype=np.float32)
    A, B = trnsparse.from_scipy(SA), trnsparse.from_scipy(SB)
    ix = (A.col_indices, A.row_ptrs, A.shape, B.col_indices, B.row_ptrs, B.shape)
    route, why = _csr_route(*ix, A, B)
    note = f"plan: {route}" if route else "plan: host (" + why.split(" (")[0] + ")"
    if kernel == "tiles":
        plan = _spgemm.csr_spgemm_plan(A, B, *ix)
        blk_a = _spgemm.tile_values(A, A.values, A.col_indices, A.row_ptrs, A.shape)
        blk_b = _spgemm.tile_values(B, B.values, B.col_indices, B.row_ptrs, B.shape)
        sch = plan.sched
        args = (blk_a.transpose(1, 2).contiguous().numpy(), blk_b.numpy())
        kw = {"rows": sch.rows, "nc": sch.nc, "keep_b": resident(sch.na_max, blk_b.shape[0], 4)}
        floor = 4 * T2 * (blk_a.shape[0] + blk_b.shape[0]) + 4 * T2 * sch.nc
        return bsr_spgemm_kernel, args, kw, floor, (lambda: SA @ SB), note
    plan = _spgemm.rowmerge_plan(A, *ix)
    a_ell = np.zeros(sum(b[0] * b[1] for b in plan.blocks), np.float32)
    a_ell[plan.a_pos] = SA.data
    args = (a_ell, plan.a_rows, _spgemm.b_ell(B, B.values, B.col_indices, B.row_ptrs, plan.wB).numpy(), plan.inv)
    kw = {"blocks": plan.blocks, "slots_c": plan.slots_c}
    # the row merge's floor: A and its column indices, each B row an A entry selects, C written
    floor = 8 * SA.nnz + 8 * int(np.diff(SB.indptr)[SA.indices].sum()) + 4 * int(plan.cols.numel())
    return csr_spgemm_kernel, args, kw, floor, (lambda: SA @ SB), note


def _poisson2d(k):
    T = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(k, k))
    return (sp.kron(sp.eye(k), T) + sp.kron(T, sp.eye(k))).tocsr().astype(np.float32)


def _add_case(which):
    if which == "poisson":
        SA = _poisson2d(256)
        # a second pattern: the 9-point stencil's diagonal neighbours only
        k = 256
        D = sp.diags([1.0, 1.0], [-1, 1], shape=(k, k))
        SB = sp.kron(D, D).tocsr().astype(np.float32)
    else:
        n = 16384 if which == "random" else 4096
        SA = sp.random(n, n, 0.01, format="csr", random_state=3, dtype=np.float32)
        SB = sp.random(n, n, 0.01, format="csr", random_state=4, dtype=np.float32)
    pl = _spgemm.add_symbolic(torch.from_numpy(SA.indices.astype(np.int64)), torch.from_numpy(SA.indptr),
                              torch.from_numpy(SB.indices.astype(np.int64)), torch.from_numpy(SB.indptr), SA.shape)
    args = (SA.data, SB.data, pl.start, pl.la, pl.lb)
    kw = {"chunks": pl.chunks, "nnz_c": pl.nnz, "alpha": 2.0, "beta": -1.0}
    floor = 4 * (SA.nnz + SB.nnz + pl.nnz)
    return csr_add_kernel, args, kw, floor, (lambda: 2.0 * SA - SB), f"nnzC={pl.nnz}"


CASES = {
    "bsr_spgemm 1024^2 @ 1024^2 p=0.125": lambda: _bsr_case(0.125),
    "bsr_spgemm 1024^2 @ 1024^2 p=0.5": lambda: _bsr_case(0.5),
    "bsr_spgemm 1024^2 @ 1024^2 p=1.0": lambda: _bsr_case(1.0),
    "csr spgemm 1024^2 30% (tiles)": lambda: _csr_case(1024, 0.3, 0.3, "tiles"),
    "csr spgemm 1024^2 5% (tiles)": lambda: _csr_case(1024, 0.05, 0.05, "tiles"),
    "csr spgemm 2048^2 1% (tiles)": lambda: _csr_case(2048, 0.01, 0.01, "tiles"),
    "csr spgemm 2048^2 0.1% (tiles)": lambda: _csr_case(2048, 0.001, 0.001, "tiles"),
    "csr spgemm 2048^2 0.1% (row merge)": lambda: _csr_case(2048, 0.001, 0.001, "rowmerge"),
    "csr spgemm 4096^2 0.1% @ 0.5% (row merge)": lambda: _csr_case(4096, 0.001, 0.005, "rowmerge"),
    "sparse_add poisson 256^2 + diag-stencil": lambda: _add_case("poisson"),
    "sparse_add 4096^2 1% + 1%": lambda: _add_case("random4k"),
    "sparse_add 16384^2 1% + 1%": lambda: _add_case("random"),
}


def table(targets=("trn1", "trn2")):
    rows = []
    for label, build in CASES.items():
        kernel, args, kw, floor, host, note = build()
        hms = _host_ms(host)
        for t in targets:
            _, p = nki.profile(kernel, *args, target=t, **kw)
            hbm = p.hbm_read_bytes + p.hbm_write_bytes
            rows.append((label, t, hbm, floor, hbm / floor, p.modeled_time_lower_s * 1e6,
                         p.modeled_time_upper_s * 1e6, hms, note))
    return rows


def format_table(rows):
    head = (f"{'case':<40} {'target':<6} {'HBM bytes':>13} {'floor':>13} {'ratio':>6} "
            f"{'modeled us (overlap..serial)':>29} {'host ms':>8}  note")
    lines = [head, "-" * len(head)]
    for label, t, hbm, floor, r, lo, hi, hms, note in rows:
        lines.append(f"{label:<40} {t:<6} {hbm:>13,d} {floor:>13,d} {r:>6.3f} {lo:>13.1f} .. {hi:<13.1f} "
                     f"{hms:>8.2f}  {note}")
    return "\n".join(lines)


def benchmark_only(name, params):
    """Plain test runs keep one case (a smoke test); see conftest.py."""
    return params.get("case") != "bsr_spgemm 1024^2 @ 1024^2 p=0.125"


@pytest.mark.parametrize("case", list(CASES))
def test_bench_spgemm_kernels(benchmark, case):
    kernel, args, kw, floor, _, _ = CASES[case]()
    _, prof = benchmark.pedantic(nki.profile, args=(kernel, *args), kwargs=kw, rounds=1, iterations=1)
    hbm = prof.hbm_read_bytes + prof.hbm_write_bytes
    assert hbm >= floor  # no kernel reads less than each operand once
    benchmark.extra_info.update(
        tensor=prof.instructions["tensor"], vector=prof.instructions["vector"], dma=prof.instructions["dma"],
        hbm_bytes=hbm, floor_bytes=floor, modeled_time_lower_us=round(prof.modeled_time_lower_s * 1e6, 2),
    )


if __name__ == "__main__":
    print(format_table(table()))
