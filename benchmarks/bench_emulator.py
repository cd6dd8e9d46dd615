"""How fast the NKI emulator runs the reference tiled GEMM (wall time of the
emulation on this machine, not a modeled device time).

Run: pytest benchmarks/bench_emulator.py --benchmark-enable --benchmark-only
"""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "tests", "emulator"))

from ref_gemm import expected_counts, gemm_kernel  # noqa: E402

from trnsci.nki.emulator import profile  # noqa: E402


@pytest.mark.parametrize("size", [1024, 2048])
def test_bench_emulated_gemm(benchmark, size):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size)).astype(np.float32)
    b = rng.standard_normal((size, size)).astype(np.float32)
    at = np.ascontiguousarray(a.T)
    c, prof = benchmark.pedantic(profile, args=(gemm_kernel, at, b), rounds=1, iterations=1, warmup_rounds=0)
    exp = expected_counts(size, size, size)
    assert prof.hbm_read_bytes == exp["hbm_read_bytes"]
    assert prof.instructions["tensor"] == exp["tensor"]
    benchmark.extra_info.update(
        size=size,
        tensor_instructions=prof.instructions["tensor"],
        hbm_read_bytes=prof.hbm_read_bytes,
        modeled_time_lower_us=round(prof.modeled_time_lower_s * 1e6, 2),
        modeled_te_utilization=round(prof.tensor_engine_utilization(), 3),
    )
    if size == 2048 and benchmark.stats is not None:  # None under --benchmark-disable
        assert benchmark.stats.stats.max < 10.0, "issue budget: 2048^3 fp32 emulates in under 10 s"
