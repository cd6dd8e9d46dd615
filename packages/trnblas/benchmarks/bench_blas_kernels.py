"""trnblas kernels: emulator counters (exact) and modeled times, plus the DF-MP2 torch path
against a straightforward einsum implementation (wall time on this machine).

Run: ``pytest packages/trnblas/benchmarks/bench_blas_kernels.py --benchmark-enable --benchmark-only``
or ``python packages/trnblas/benchmarks/bench_blas_kernels.py`` for the counters table.
Modeled times come from the emulator's cost model (see NKI.md): they are
"modeled", not measured on a NeuronCore.
"""

import ml_dtypes
import numpy as np
import pytest
import torch

import trnsci
from trnblas.chem import mp2_energy
from trnblas.kernels.axpby import axpby_kernel
from trnblas.kernels.batched_gemm import batched_gemm_kernel
from trnblas.kernels.caxpby import caxpby_kernel
from trnblas.kernels.dgmm import dgmm_kernel
from trnblas.kernels.gemm import gemm_kernel
from trnblas.kernels.gemv import gemv_kernel
from trnblas.kernels.ger import ger_kernel
from trnblas.kernels.mp2_energy import mp2_energy_kernel
from trnblas.kernels.syr2k import syr2k_kernel
from trnblas.kernels.syrk import syrk_kernel
from trnblas.kernels.trsm import trsm_kernel
from trnblas.kernels.vreduce import vreduce_kernel
from trnsci import nki


@pytest.fixture(autouse=True)
def _exact_bf16_products():
    """Counters, bytes and modeled times do not depend on how bf16 x bf16 products round; modeling the
    rounding costs seconds per large bf16 kernel, so these runs take the emulator's exact-product mode."""
    from trnsci.nki.emulator import numerics

    with numerics.bf16_products("exact"):
        yield


BF16 = ml_dtypes.bfloat16


def _cases():
    rng = np.random.default_rng(0)

    def r(*shape, dtype=np.float32):
        return rng.standard_normal(shape).astype(dtype)

    n = 2048
    yield "gemm 2048^3 bf16", gemm_kernel, (r(n, n, dtype=BF16), r(n, n, dtype=BF16)), {}
    yield "gemm 2048^3 fp32", gemm_kernel, (r(n, n), r(n, n)), {}
    yield "gemm 200x300x700 fp32", gemm_kernel, (r(700, 200), r(700, 300)), {}
    yield "batched_gemm 16 x 256^3 bf16", batched_gemm_kernel, (r(16, 256, 256, dtype=BF16),
                                                                 r(16, 256, 256, dtype=BF16)), {}
    yield "syrk n=2048 k=2048 bf16 (lower)", syrk_kernel, (r(n, n, dtype=BF16),), {"upper": False}
    w = np.triu(r(1024, 1024) * 0.01) + np.eye(1024, dtype=np.float32)
    yield "trsm n=1024 nrhs=512 fp32", trsm_kernel, (w, r(1024, 512)), {}
    nocc, nvir, naux = 16, 250, 600
    L = r(naux, nocc * nvir) * 0.1
    eo = (-1 - rng.random((1, nocc))).astype(np.float32)
    ev = (0.5 + rng.random((1, nvir))).astype(np.float32)
    yield f"mp2 nocc={nocc} nvir={nvir} naux={naux} fp32", mp2_energy_kernel, (L, eo, ev), {"nocc": nocc}
    yield f"mp2 nocc={nocc} nvir={nvir} naux={naux} bf16", mp2_energy_kernel, (L.astype(BF16), eo, ev), \
        {"nocc": nocc}


def counters_table(target="trn1"):
    """Rows of (case, KernelProfile) for every kernel at a representative size."""
    return [(name, nki.profile(k, *args, target=target, **kw)[1]) for name, k, args, kw in _cases()]


def format_table(rows):
    head = (f"{'case':<40} {'TE':>6} {'Vec':>6} {'Act':>5} {'DMA':>5} {'HBM read':>13} {'HBM write':>11} "
            f"{'modeled us':>11} {'TE util':>8}")
    lines = [head, "-" * len(head)]
    for name, p in rows:
        lines.append(
            f"{name:<40} {p.instructions['tensor']:>6} {p.instructions['vector']:>6} {p.instructions['scalar']:>5} "
            f"{p.instructions['dma']:>5} {p.hbm_read_bytes:>13,d} {p.hbm_write_bytes:>11,d} "
            f"{p.modeled_time_s * 1e6:>11.1f} {p.tensor_engine_utilization():>8.1%}"
        )
    return "\n".join(lines)


CASE_NAMES = [
    "gemm 2048^3 bf16", "gemm 2048^3 fp32", "gemm 200x300x700 fp32", "batched_gemm 16 x 256^3 bf16",
    "syrk n=2048 k=2048 bf16 (lower)", "trsm n=1024 nrhs=512 fp32",
    "mp2 nocc=16 nvir=250 naux=600 fp32", "mp2 nocc=16 nvir=250 naux=600 bf16",
]  # the names _cases() yields, listed so that collection builds no arrays


@pytest.mark.parametrize("case", CASE_NAMES)
def test_bench_kernel_counters(benchmark, case):
    name, kernel, args, kw = next(c for c in _cases() if c[0] == case)
    _, prof = benchmark.pedantic(nki.profile, args=(kernel, *args), kwargs=kw, rounds=1, iterations=1)
    benchmark.extra_info.update(
        tensor=prof.instructions["tensor"], vector=prof.instructions["vector"],
        scalar=prof.instructions["scalar"], dma=prof.instructions["dma"],
        hbm_read_bytes=prof.hbm_read_bytes, hbm_write_bytes=prof.hbm_write_bytes,
        modeled_time_us=round(prof.modeled_time_s * 1e6, 2),
        modeled_time_lower_us=round(prof.modeled_time_lower_s * 1e6, 2),
        modeled_te_utilization=round(prof.tensor_engine_utilization(), 4),
    )


# ----------------------------------------------------------------- memory-bound kernels (levels 1-2, geam, dgmm)
#
# Each case: (name, kernel, args, constants, analytic minimum HBM bytes). The minimum is every input
# read once plus every output written once at its dtype (reductions: one fp32 scalar; the kernels
# write 4 * 128 * k per piece partials instead). syr2k is Tensor-bound: its minimum is A, B once and
# one triangle of C in fp32.

VECTOR_SIZES = (100_003, 1_000_003, 16_000_003)  # ragged: not multiples of 128
MATRIX_SIZES = ((1000, 1001), (2000, 3001), (4096, 4097))


def memory_bound_cases():
    rng = np.random.default_rng(1)

    def r(*shape, dtype=np.float32):
        return rng.standard_normal(shape).astype(dtype)

    for n in VECTOR_SIZES:
        x, y = r(n), r(n)
        axpy_c = np.array([[2.0, 1.0, 0.0, 0.0]], np.float32)
        rot_c = np.array([[0.6, 0.8, -0.8, 0.6]], np.float32)
        yield f"axpy n={n:,} fp32", axpby_kernel, (x, y, axpy_c), {"form": (2, 1, 0, 0)}, 12 * n
        yield f"rot n={n:,} fp32", axpby_kernel, (x, y, rot_c), {"form": (2, 2, 2, 2), "pair": True}, 16 * n
        yield f"dot n={n:,} fp32", vreduce_kernel, (x, y), {"op": "dot"}, 8 * n + 4
        yield f"nrm2 n={n:,} fp32", vreduce_kernel, (x, None), {"op": "nrm2"}, 4 * n + 4
        yield f"iamax n={n:,} fp32", vreduce_kernel, (x, None), {"op": "amax"}, 4 * n + 4
        xc = r(2 * (n // 2))  # interleaved parts of n // 2 complex64 elements
        caxpy_c = np.array([[0.6, -0.8, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]], np.float32)
        yield f"caxpy n={n // 2:,} c64", caxpby_kernel, (xc, xc, caxpy_c), {"form": (1, 0)}, 24 * (n // 2)
    for m, n in MATRIX_SIZES:
        A = r(m, n)
        yield f"gemv N {m}x{n} fp32", gemv_kernel, (A, r(n)), {"trans": False}, 4 * (m * n + n + m)
        yield f"gemv T {m}x{n} fp32", gemv_kernel, (A, r(m)), {"trans": True}, 4 * (m * n + m + n)
        yield f"gemv N {m}x{n} bf16", gemv_kernel, (A.astype(BF16), r(n, dtype=BF16)), {"trans": False}, \
            2 * (m * n + n + m)
        yield f"ger {m}x{n} fp32", ger_kernel, (A, r(1, m), r(1, n)), {}, 4 * (2 * m * n + m + n)
        yield f"dgmm L {m}x{n} fp32", dgmm_kernel, (A, r(m)), {"left": True}, 4 * (2 * m * n + m)
    for n, k in ((512, 256), (1024, 512), (2048, 1024)):
        x, z = r(k, n, dtype=BF16), r(k, n, dtype=BF16)
        yield f"syr2k n={n} k={k} bf16 (lower)", syr2k_kernel, (x, z), {"upper": False}, \
            2 * 2 * n * k + 4 * n * (n + 1) // 2


def memory_bound_table():
    """Rows: (case, HBM bytes counted, analytic minimum, modeled trn1 us, modeled trn2 us)."""
    rows = []
    for name, kernel, args, kw, minimum in memory_bound_cases():
        _, p1 = nki.profile(kernel, *args, target="trn1", **kw)
        _, p2 = nki.profile(kernel, *args, target="trn2", **kw)
        rows.append((name, p1.hbm_bytes, minimum, p1.modeled_time_lower_s * 1e6, p2.modeled_time_lower_s * 1e6))
    return rows


def format_memory_bound(rows):
    head = f"{'case':<34} {'HBM bytes':>14} {'minimum':>14} {'ratio':>6} {'trn1 us':>9} {'trn2 us':>9}"
    lines = [head, "-" * len(head)]
    for name, got, minimum, t1, t2 in rows:
        lines.append(f"{name:<34} {got:>14,d} {minimum:>14,d} {got / minimum:>6.3f} {t1:>9.1f} {t2:>9.1f}")
    return "\n".join(lines)


MEMORY_BOUND_NAMES = [
    *(f"{op} n={n:,} fp32" for n in VECTOR_SIZES for op in ("axpy", "rot", "dot", "nrm2", "iamax")),
    *(f"caxpy n={n // 2:,} c64" for n in VECTOR_SIZES),
    *(f"{c} {m}x{n} {d}" for m, n in MATRIX_SIZES for c, d in
      (("gemv N", "fp32"), ("gemv T", "fp32"), ("gemv N", "bf16"), ("ger", "fp32"), ("dgmm L", "fp32"))),
    *(f"syr2k n={n} k={k} bf16 (lower)" for n, k in ((512, 256), (1024, 512), (2048, 1024))),
]  # the names memory_bound_cases() yields, listed so that collection builds no arrays


@pytest.mark.parametrize("case", MEMORY_BOUND_NAMES)
def test_bench_memory_bound_kernels(benchmark, case):
    name, kernel, args, kw, minimum = next(c for c in memory_bound_cases() if c[0] == case)
    _, prof = benchmark.pedantic(nki.profile, args=(kernel, *args), kwargs=kw, rounds=1, iterations=1)
    _, prof2 = nki.profile(kernel, *args, target="trn2", **kw)
    benchmark.extra_info.update(
        hbm_bytes=prof.hbm_bytes, analytic_min_bytes=minimum, ratio=round(prof.hbm_bytes / minimum, 4),
        modeled_trn1_us=round(prof.modeled_time_lower_s * 1e6, 2),
        modeled_trn2_us=round(prof2.modeled_time_lower_s * 1e6, 2),
    )


# ----------------------------------------------------------------- DF-MP2 torch path vs einsum

def mp2_einsum(B, eo, ev):
    """The straightforward implementation: all of (ia|jb) at once, one einsum."""
    T = torch.einsum("iaQ,jbQ->ijab", B, B)
    D = eo[:, None, None, None] + eo[None, :, None, None] - ev[None, None, :, None] - ev[None, None, None, :]
    return (T * (2 * T - T.transpose(2, 3)) / D).sum()


MP2_SIZES = [(10, 100, 300), (24, 200, 600)]


def _mp2_inputs(nocc, nvir, naux):
    g = torch.Generator().manual_seed(0)
    B = torch.randn(nocc, nvir, naux, generator=g, dtype=torch.float64) * 0.05
    eo = -1 - torch.rand(nocc, generator=g, dtype=torch.float64)
    ev = 0.5 + torch.rand(nvir, generator=g, dtype=torch.float64)
    return B, eo, ev


@pytest.mark.parametrize("size", MP2_SIZES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("impl", ["trnblas", "einsum"])
def test_bench_mp2_torch_vs_einsum(benchmark, size, impl):
    B, eo, ev = _mp2_inputs(*size)
    if impl == "einsum":
        e = benchmark(mp2_einsum, B, eo, ev)
    else:
        with trnsci.use_backend("torch"):
            e = benchmark(mp2_energy, B, eo, ev)
    assert float(e) == pytest.approx(float(mp2_einsum(B, eo, ev)), rel=1e-10)


if __name__ == "__main__":  # pragma: no cover
    import time

    print(format_table(counters_table()))
    print()
    print(format_memory_bound(memory_bound_table()))
    print()
    for size in MP2_SIZES:
        B, eo, ev = _mp2_inputs(*size)
        times = {}
        # float64 input: the torch path under every backend
        for name, fn in (("trnblas", mp2_energy), ("einsum", mp2_einsum)):
            fn(B, eo, ev)
            t = time.perf_counter()
            for _ in range(5):
                fn(B, eo, ev)
            times[name] = (time.perf_counter() - t) / 5
        print(f"mp2 {size}: trnblas torch path {times['trnblas'] * 1e3:.1f} ms, einsum {times['einsum'] * 1e3:.1f} ms, "
              f"ratio {times['trnblas'] / times['einsum']:.2f}")
