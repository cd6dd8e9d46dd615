"""trnfft kernels: emulator counters (exact: they equal the kernels' closed forms) and modeled
times for DFT-as-GEMM and Stockham at n = 256 and 4096, batch 128 (the issue's comparison),
plus Bluestein and the half-length real kernel at representative sizes.

``--crossover`` prints the routing data behind ``trnfft._nki.basic.GEMM_MAX_N`` / ``GEMM_MAX_N_ANY``:
modeled DFT-GEMM vs Stockham (powers of two 64 .. 2048) and DFT-GEMM vs Bluestein (other n),
batches 1, 16, 128, trn1 and trn2.

Run: ``python packages/trnfft/benchmarks/bench_fft_kernels.py [--crossover]`` for the table, or
``pytest packages/trnfft/benchmarks/bench_fft_kernels.py --benchmark-enable --benchmark-only``
(the counters land in each benchmark's ``extra_info``; the timed part is the emulator, not a
NeuronCore). Modeled times come from the emulator's cost model (docs/emulator.md): they are
"modeled", never measured. "flop/pt" is the nominal 5 n log2 n per transform divided by the
modeled lower-bound time, i.e. a modeled rate comparable across algorithms.
"""

import math

import ml_dtypes
import numpy as np
import pytest

from trnfft import algorithms as A
from trnfft.kernels import dft_gemm as KG
from trnfft.kernels import fft_any_length as KB
from trnfft.kernels import fft_pow2 as KS
from trnfft.kernels import irfft as KI
from trnfft.kernels import overlap_add as KO
from trnfft.kernels import rfft as KR
from trnsci import nki

BF16 = ml_dtypes.bfloat16
B = 128


def _gemm_args(n, dtype):
    rng = np.random.default_rng(n)
    C, S = A.dft_tables(n)
    w = np.ascontiguousarray(np.block([[C, S], [-S, C]]).astype(dtype))
    return np.ascontiguousarray(rng.standard_normal((2 * n, B)).astype(dtype)), w


def _planes(n):
    return np.random.default_rng(n).standard_normal((2, B, n)).astype(np.float32)


def _bluestein_args(n):
    chirp, filt = KB.tables(n)
    return _planes(n), chirp, filt, KS.twiddle_table(KB.length(n))


def _rfft_args(n):
    x = np.random.default_rng(0).standard_normal((B, n)).astype(np.float32)
    return x, KR.half_table(n), KS.twiddle_table(n // 2)


def _irfft_args(n):
    X = np.random.default_rng(0).standard_normal((2, B, n // 2 + 1)).astype(np.float32)
    return X, KI.ihalf_table(n), KS.twiddle_table(n // 2)


def _ola_args(nb, F, n, hop):
    rng = np.random.default_rng(F)
    R, Rh, S, _ = KO.plan(F, n, hop)
    w = np.zeros((1, Rh), np.float32)
    w[0, :n] = np.hanning(n + 1)[:n]
    return (rng.standard_normal((nb, F, n)).astype(np.float32), w,
            rng.uniform(0.5, 2.0, (S, hop)).astype(np.float32))


def _cases():
    """(name, n, kernel, args thunk, constants): the arrays are built only for the case that runs."""
    for n in (256, 4096):
        yield f"dft_gemm n={n} B={B} fp32", n, KG.dft_gemm_kernel, lambda n=n: _gemm_args(n, np.float32), {}
        yield f"dft_gemm n={n} B={B} bf16", n, KG.dft_gemm_kernel, lambda n=n: _gemm_args(n, BF16), {}
        yield f"stockham n={n} B={B} fp32", n, KS.fft_pow2_kernel, lambda n=n: (_planes(n), KS.twiddle_table(n)), {}
    yield f"bluestein n=1000 B={B} fp32", 1000, KB.fft_any_length_kernel, lambda: _bluestein_args(1000), {}
    yield f"rfft_half n=4096 B={B} fp32", 4096, KR.rfft_kernel, lambda: _rfft_args(4096), {}
    yield f"irfft_half n=4096 B={B} fp32", 4096, KI.irfft_kernel, lambda: _irfft_args(4096), {}
    # istft's second launch: 4 signals of 16000 samples, n_fft 512, hop 128 (126 frames each)
    yield "overlap_add n=512 hop=128 4x126", 512, KO.overlap_add_kernel, lambda: _ola_args(4, 126, 512, 128), {}


CASE_NAMES = ["dft_gemm n=256 B=128 fp32", "dft_gemm n=256 B=128 bf16", "stockham n=256 B=128 fp32",
              "dft_gemm n=4096 B=128 fp32", "dft_gemm n=4096 B=128 bf16", "stockham n=4096 B=128 fp32",
              "bluestein n=1000 B=128 fp32", "rfft_half n=4096 B=128 fp32", "irfft_half n=4096 B=128 fp32",
              "overlap_add n=512 hop=128 4x126"]


def counters_table(target="trn1"):
    """Rows of (case, n, KernelProfile)."""
    return [(name, n, nki.profile(k, *args(), target=target, **kw)[1]) for name, n, k, args, kw in _cases()]


def format_table(rows):
    head = (f"{'case':<30} {'TE':>5} {'Vec':>5} {'DMA':>5} {'HBM read':>12} {'HBM write':>11} "
            f"{'modeled us (lo-hi)':>28} {'Gflop/s modeled':>16}")
    lines = [head, "-" * len(head)]
    for name, n, p in rows:
        nominal = B * 5 * n * math.log2(n)
        rate = "-" if name.startswith("overlap_add") else f"{nominal / p.modeled_time_s / 1e9:.1f}"
        lines.append(
            f"{name:<30} {p.instructions['tensor']:>5} {p.instructions['vector']:>5} {p.instructions['dma']:>5} "
            f"{p.hbm_read_bytes:>12,d} {p.hbm_write_bytes:>11,d} "
            f"{p.modeled_time_s * 1e6:>9.1f} ({p.modeled_time_lower_s * 1e6:.1f}-{p.modeled_time_upper_s * 1e6:.1f})"
            f"{rate:>16}")
    return "\n".join(lines)


def _modeled(kernel, args, target):
    _, p = nki.profile(kernel, *args, target=target)
    return p.modeled_time_lower_s, p.modeled_time_upper_s, p.modeled_time_s


def crossover_rows(targets=("trn1", "trn2"), batches=(1, 16, 128),
                   pow2=(64, 128, 256, 512, 1024, 2048), other=(100, 500, 1000, 1500, 2047)):
    """Rows ``(target, batch, n, rival, (gemm lo, hi, timeline), (rival lo, hi, timeline))`` of modeled seconds."""
    rows = []
    for t in targets:
        for b in batches:
            rng = np.random.default_rng(b)
            for n in (*pow2, *other):
                C, S = A.dft_tables(n)
                w = np.ascontiguousarray(np.block([[C, S], [-S, C]]).astype(np.float32))
                xt = rng.standard_normal((2 * n, b)).astype(np.float32)
                g = _modeled(KG.dft_gemm_kernel, (xt, w), t)
                x = rng.standard_normal((2, b, n)).astype(np.float32)
                if n & (n - 1) == 0:
                    rival, r = "stockham", _modeled(KS.fft_pow2_kernel, (x, KS.twiddle_table(n)), t)
                else:
                    chirp, filt = KB.tables(n)
                    rival, r = "bluestein", _modeled(KB.fft_any_length_kernel,
                                                     (x, chirp, filt, KS.twiddle_table(KB.length(n))), t)
                rows.append((t, b, n, rival, g, r))
    return rows


def format_crossover(rows):
    head = (f"{'target':<6} {'B':>4} {'n':>5} {'dft_gemm us':>10} {'(lo-hi)':<19} {'rival':<10} "
            f"{'rival us':>9} {'(lo-hi)':<19} faster (timeline / lo / hi)")
    lines = [head, "-" * len(head)]
    for t, b, n, rival, g, r in rows:
        win = "/".join("gemm" if g[i] < r[i] else rival for i in (2, 0, 1))
        lines.append(f"{t:<6} {b:>4} {n:>5} {g[2] * 1e6:>10.1f} {g[0] * 1e6:>8.1f}-{g[1] * 1e6:<10.1f} "
                     f"{rival:<10} {r[2] * 1e6:>9.1f} {r[0] * 1e6:>8.1f}-{r[1] * 1e6:<10.1f} {win}")
    return "\n".join(lines)


@pytest.mark.parametrize("case", CASE_NAMES)
def test_bench_kernel_counters(benchmark, case):
    if benchmark.disabled and case.startswith("dft_gemm n=4096"):
        pytest.skip("a 128 x 8192 x 8192 emulated GEMM: run with --benchmark-enable")
    name, n, kernel, args, kw = next(c for c in _cases() if c[0] == case)
    _, prof = benchmark.pedantic(nki.profile, args=(kernel, *args()), kwargs=kw, rounds=1, iterations=1)
    benchmark.extra_info.update(
        tensor=prof.instructions["tensor"], vector=prof.instructions["vector"], dma=prof.instructions["dma"],
        hbm_read_bytes=prof.hbm_read_bytes, hbm_write_bytes=prof.hbm_write_bytes,
        modeled_time_us=round(prof.modeled_time_s * 1e6, 2),
        modeled_time_lower_us=round(prof.modeled_time_lower_s * 1e6, 2),
        modeled_time_upper_us=round(prof.modeled_time_upper_s * 1e6, 2),
    )


if __name__ == "__main__":  # pragma: no cover
    import sys

    print(format_crossover(crossover_rows()) if "--crossover" in sys.argv else format_table(counters_table()))
