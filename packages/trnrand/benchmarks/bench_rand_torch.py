"""trnrand's torch path against NumPy (default_rng = PCG64, and the Philox bit generator) and torch.rand/randn.

Run: ``pytest packages/trnrand/benchmarks --benchmark-enable --benchmark-only`` (add ``-m "not slow"`` to
skip 10**7 samples; run with ``OMP_NUM_THREADS=1`` for the one-thread numbers of docs/trnrand.md).
Each group is one distribution, size and dtype; samples/s = n / mean time. Draws of 1 and 1000 samples
show the fixed cost per call. Target (issue 12): uniform and normal within ~1.5x of
``numpy.random.Generator(Philox)``. trnrand computes Philox4x32-10 as NumPy uint64 ufuncs on
cache-sized chunks (plus the float map per chunk); NumPy's Philox is Philox4x64-10 in C; torch.rand is
MT19937 vectorized C++ -- the peers show the floor, not the same stream.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.stats.qmc as qmc
import torch

import trnrand

pytest.importorskip("pytest_benchmark")

SIZES = [1, 1000, 10**4, 10**5, 10**6, pytest.param(10**7, marks=pytest.mark.slow)]
DT = {torch.float32: np.float32, torch.float64: np.float64}


def _run(kind, impl, n, dtype):
    if impl == "trnrand":
        g = trnrand.Generator(seed=1)
        f = trnrand.uniform if kind == "uniform" else trnrand.normal
        return lambda: f(n, dtype=dtype, generator=g)
    if impl == "torch":
        g = torch.Generator().manual_seed(1)
        f = torch.rand if kind == "uniform" else torch.randn
        return lambda: f(n, dtype=dtype, generator=g)
    bitgen = np.random.Philox(1) if impl == "numpy-philox" else np.random.PCG64(1)
    r = np.random.Generator(bitgen)
    if kind == "uniform":
        return lambda: r.random(n, dtype=DT[dtype])
    return lambda: r.standard_normal(n, dtype=DT[dtype])


@pytest.mark.parametrize("impl", ["trnrand", "numpy-philox", "numpy-default_rng", "torch"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("kind", ["uniform", "normal"])
def test_samples(benchmark, kind, n, dtype, impl):
    benchmark.group = f"{kind} n={n} {str(dtype)[6:]}"
    benchmark.extra_info["samples"] = n
    out = benchmark(_run(kind, impl, n, dtype))
    assert len(out) == n


QMC = [(1 << 14, 10), (100_000, 5)]


@pytest.mark.parametrize("impl", ["trnrand", "scipy"])
@pytest.mark.parametrize("n,d", QMC)
@pytest.mark.parametrize("kind", ["sobol", "halton"])
def test_qmc(benchmark, kind, n, d, impl):
    benchmark.group = f"{kind} {n}x{d} unscrambled float64"
    if impl == "trnrand":
        f = trnrand.sobol if kind == "sobol" else trnrand.halton
        fn = lambda: f(n, d, scramble=False, dtype=torch.float64)  # noqa: E731
    else:
        cls = qmc.Sobol if kind == "sobol" else qmc.Halton

        def fn():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return cls(d, scramble=False).random(n)

    assert len(benchmark(fn)) == n
