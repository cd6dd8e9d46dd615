"""trnrand kernels: emulator counters (exact) and modeled times at one full 128 x 512 tile.

Run: ``pytest packages/trnrand/benchmarks/bench_rand_kernels.py --benchmark-enable --benchmark-only``
or ``python packages/trnrand/benchmarks/bench_rand_kernels.py`` for the table. Times are the
emulator's cost model ("modeled", lower bound = busiest engine), never measured on a NeuronCore.
"""

import math

import numpy as np
import pytest

from trnrand.kernels.discrete import discrete_kernel
from trnrand.kernels.gamma import gamma_kernel
from trnrand.kernels.halton import halton_kernel
from trnrand.kernels.lhs import lhs_kernel
from trnrand.kernels.normal import normal_kernel
from trnrand.kernels.philox import philox_kernel
from trnrand.kernels.philox_block import philox_block_kernel
from trnrand.kernels.philox_transform import philox_transform_kernel
from trnrand.kernels.poisson import poisson_kernel
from trnrand.kernels.sobol import sobol_kernel
from trnrand.quasi import _direction_numbers
from trnsci import nki

TILE = 128 * 512  # blocks: one full tile = 262144 stream words


def _cases():
    yield "philox words, 128x512 blocks", philox_kernel, (), {"seed": 1, "subsequence": 0, "block0": 0,
                                                             "nblocks": TILE}
    yield "philox uniform fp32, 128x512 blocks", philox_kernel, (), {"seed": 1, "subsequence": 0, "block0": 0,
                                                                    "nblocks": TILE, "mode": "uniform"}
    yield "box-muller fp32, 128x512 blocks", normal_kernel, (), {"seed": 1, "subsequence": 0, "block0": 0,
                                                                     "nblocks": TILE}
    for name, tr, prm in (("bernoulli p=0.3", "bernoulli", round(0.3 * 2**32)),
                          ("exponential fp32", "exponential", -1.0),
                          ("randint [0, 1000)", "randint", 1000),
                          ("geometric p=0.2 (fp32)", "geometric", 1.0 / math.log1p(-0.2)),
                          ("truncated normal [-2, 2] (fp32)", "truncated_normal",
                           (-2.0, 2.0, 2.0**-53 * 0.9545, 0.02275, 0.02275 + 2.0**-53 * 0.9545, 1.0, 0.0))):
        yield f"{name}, 128x512 blocks", philox_transform_kernel, (), {
            "seed": 1, "subsequence": 0, "block0": 0, "nblocks": TILE, "transform": tr, "param": prm}
    import torch

    from trnrand._nki.distributions import _categorical_thresholds, _poisson_thresholds

    for name, th, keyed in (("categorical 8 categories", _categorical_thresholds(torch.arange(1.0, 9.0).cumsum(0)),
                             False),
                            ("poisson lam=3 (keyed)", _poisson_thresholds(3.0), True)):
        yield f"{name}, 128x512 blocks", discrete_kernel, (), {
            "seed": 1, "subsequence": 0, "block0": 0, "nblocks": TILE, "thresholds": th, "keyed": keyed}
    yield "gamma shape=2 (4 rounds), 128x512 blocks", gamma_kernel, (), {
        "seed": 1, "subsequence": 0, "block0": 0, "nblocks": TILE, "shape": 2.0, "rounds": 4}
    from trnrand.distributions import _ptrs_constants

    a, b, ia, vr = _ptrs_constants(100.0)
    yield "poisson lam=100 PTRS (6 rounds), 128x512 blocks", poisson_kernel, (), {
        "seed": 1, "subsequence": 0, "block0": 0, "nblocks": TILE, "lam": 100.0, "a": a, "b": b, "invalpha": ia,
        "vr": vr, "rounds": 6}
    rng = np.random.default_rng(0)
    ctr = rng.integers(0, 1 << 32, size=(TILE, 4), dtype=np.uint64).astype(np.uint32)
    key = rng.integers(0, 1 << 32, size=(TILE, 2), dtype=np.uint64).astype(np.uint32)
    yield "philox4x32 explicit ctr/key, 65536 rows", philox_block_kernel, (ctr, key), {"rounds": 10}
    import torch

    from trnrand._nki.quasi import _halton_inputs
    from trnrand.quasi import _first_primes

    radix, scale = _halton_inputs(torch.tensor(_first_primes(5)), 0, 100000)
    yield "halton 100000 points x 5 dims (fp32)", halton_kernel, (radix, scale), {"skip": 0, "n": 100000}
    yield "latin hypercube 512 points x 4 dims (fp32)", lhs_kernel, (), {
        "seed": 1, "subsequence": 0, "block0": 0, "n": 512, "d": 4}
    v = _direction_numbers(10).astype(np.uint32)
    yield "sobol 16384 points x 10 dims", sobol_kernel, (v, np.zeros((10, 1), np.uint32)), {"skip": 0, "n": 16384}


CASE_NAMES = ["philox words, 128x512 blocks", "philox uniform fp32, 128x512 blocks",
              "box-muller fp32, 128x512 blocks", "bernoulli p=0.3, 128x512 blocks",
              "exponential fp32, 128x512 blocks", "randint [0, 1000), 128x512 blocks",
              "geometric p=0.2 (fp32), 128x512 blocks", "truncated normal [-2, 2] (fp32), 128x512 blocks",
              "categorical 8 categories, 128x512 blocks", "poisson lam=3 (keyed), 128x512 blocks",
              "gamma shape=2 (4 rounds), 128x512 blocks", "poisson lam=100 PTRS (6 rounds), 128x512 blocks",
              "philox4x32 explicit ctr/key, 65536 rows",
              "halton 100000 points x 5 dims (fp32)", "latin hypercube 512 points x 4 dims (fp32)",
              "sobol 16384 points x 10 dims"]


def table(target="trn1"):
    head = (f"{'case':<48} {'GpSimd':>7} {'Vector':>7} {'Scalar':>7} {'DMA':>4} {'HBM write':>10} "
            f"{'modeled us':>11} {'G outputs/s (modeled)':>22}")
    lines = [head, "-" * len(head)]
    for name, k, args, kw in _cases():
        out, p = nki.profile(k, *args, target=target, **kw)
        outputs = out.size  # words, samples or point coordinates
        lines.append(f"{name:<48} {p.instructions['gpsimd']:>7} {p.instructions['vector']:>7} "
                     f"{p.instructions['scalar']:>7} {p.instructions['dma']:>4} {p.hbm_write_bytes:>10,d} "
                     f"{p.modeled_time_lower_s * 1e6:>11.1f} {outputs / p.modeled_time_lower_s / 1e9:>22.2f}")
    return "\n".join(lines)


@pytest.mark.parametrize("case", CASE_NAMES)
def test_bench_kernel_counters(benchmark, case):
    name, kernel, args, kw = next(c for c in _cases() if c[0] == case)
    _, prof = benchmark.pedantic(nki.profile, args=(kernel, *args), kwargs=kw, rounds=1, iterations=1)
    benchmark.extra_info.update(
        {"instructions": dict(prof.instructions), "hbm_write_bytes": prof.hbm_write_bytes,
         "modeled_time_lower_us": prof.modeled_time_lower_s * 1e6,
         "modeled_time_upper_us": prof.modeled_time_upper_s * 1e6})


if __name__ == "__main__":
    print(table())
