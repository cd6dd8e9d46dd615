"""trntensor.einsum against torch.einsum, numpy.einsum(optimize=True) and opt_einsum (torch backend).

Run: ``pytest packages/trntensor/benchmarks --benchmark-enable --benchmark-only``.
Groups are per contraction and dtype (float64, float32), so each group shows
trntensor next to its three peers on the same data (target: <= 1.1x of the
best peer; trntensor's plan autotunes its CPU GEMM steps during the
calibration calls, see ``trntensor.set_autotune``). Also timed: the cached
planning cost of one call (target < 20 us), and -- as a printed table
(``-s``) -- path quality against opt_einsum's ``dp`` on a fixed random set.
``peer_table.py`` prints the ratio table of docs/trntensor.md (1 and 2
threads, interleaved best-of-N in one process); ``gemm_routes.py`` times the
two routes (torch, numpy.matmul) of every GEMM step of the set.
"""

from __future__ import annotations

import opt_einsum as oe
import opt_einsum.testing as oet
import pytest
import torch

import trnsci
import trntensor
from trntensor import plan as P
from trntensor.bench import contractions, operands, peers

pytest.importorskip("pytest_benchmark")

CASES = contractions(quick=True)
IMPLS = ["trntensor", "torch.einsum", "numpy.einsum", "opt_einsum"]


@pytest.fixture(autouse=True)
def _torch_backend():
    with trnsci.use_backend("torch"):
        yield


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("name,eq,shapes", CASES, ids=[c[0] for c in CASES])
def test_einsum(benchmark, name, eq, shapes, impl, dtype):
    benchmark.group = f"einsum {name} {str(dtype)[6:]}"
    ts = operands(shapes, dtype=dtype)
    fn = (lambda: trntensor.einsum(eq, *ts)) if impl == "trntensor" else peers(eq, ts)[impl]
    benchmark(fn)


@pytest.mark.parametrize("name,eq,shapes", CASES, ids=[c[0] for c in CASES])
def test_cached_planning(benchmark, name, eq, shapes):
    """The plan lookup einsum pays per call once a signature has been seen."""
    benchmark.group = "planning (cached)"
    ts = operands(shapes)
    trntensor.einsum(eq, *ts)
    key_shapes = tuple(tuple(t.shape) for t in ts)
    benchmark(lambda: P._plan(eq, key_shapes, torch.float64, ts[0].device, "fast", "auto", None, "einsum"))


def test_path_quality_table():
    """Our path's cost (costed by opt_einsum) over opt_einsum's dp optimum, 3..8 operands."""
    print("\n n  seeds  auto/dp(max)  auto/dp(mean)  greedy/dp(mean)  opt_einsum-greedy/dp(mean)")
    for n in range(3, 9):
        ra, rg, ro = [], [], []
        for seed in range(10):
            eq, shapes = oet.rand_equation(n, 3, n_out=2, seed=1000 * n + seed)
            dp = int(oe.contract_path(eq, *shapes, shapes=True, optimize="dp")[1].opt_cost)

            def cost(path, eq=eq, shapes=shapes):
                return int(oe.contract_path(eq, *shapes, shapes=True, optimize=path)[1].opt_cost)

            ra.append(cost(trntensor.contract_path(eq, *shapes, optimize="auto")[0]) / dp)
            rg.append(cost(trntensor.contract_path(eq, *shapes, optimize="greedy")[0]) / dp)
            ro.append(int(oe.contract_path(eq, *shapes, shapes=True, optimize="greedy")[1].opt_cost) / dp)
        print(f"{n:>2}  {len(ra):>5}  {max(ra):12.3f}  {sum(ra) / len(ra):13.3f}  {sum(rg) / len(rg):15.3f}  "
              f"{sum(ro) / len(ro):26.3f}")
        assert max(ra) <= 1.1
