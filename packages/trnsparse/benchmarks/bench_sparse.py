"""trnsparse's torch path against scipy.sparse and torch.sparse, in one run.

Run: ``pytest packages/trnsparse/benchmarks --benchmark-enable --benchmark-only``.
Groups: CSR SpMV / SpMM (k=32) / SpGEMM at n = 4096 (5%), 16384 (1%),
65536 (0.1%); from_dense of 4096^2 at 1%; BSR SpMM vs dense GEMM by block
density; block-sparse vs dense masked attention by window. With
benchmarks disabled (the normal test run) only the smallest case of each
group runs, once, as a smoke test.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import trnsci
import trnsparse
from trnsparse._benchdata import attention_case, bsr_case, csr_pair, dense_attention

pytest.importorskip("pytest_benchmark")

GRID = [(4096, 0.05), (16384, 0.01), (65536, 0.001)]


@pytest.fixture(autouse=True)
def _torch_backend():
    with trnsci.use_backend("torch"):
        yield


def benchmark_only(name: str, params: dict) -> bool:
    """Cases that run only with ``--benchmark-enable``: the peers and all but the smallest size.

    ``conftest.py`` deselects them (at collection, not as skips) in plain test runs, where
    the smallest trnsparse case of each group runs once as a smoke test.
    """
    impl = params.get("impl")
    if name == "test_csr":
        return params["n"] > 4096 or impl != "trnsparse"
    if name == "test_from_dense":
        return impl != "trnsparse"
    if name == "test_bsr_spmm_vs_dense":
        return params["block_density"] > 0.05 or impl != "bsr_spmm"
    if name == "test_attention_vs_dense":
        return params["window"] > 1 or impl != "block_sparse"
    return False


@pytest.mark.parametrize("impl", ["trnsparse", "scipy", "torch"])
@pytest.mark.parametrize("op,n,density", [(op, n, d) for op in ("spmv", "spmm", "spgemm") for n, d in GRID
                                          if not (op == "spgemm" and n > 16384)])  # n=65536 SpGEMM: too big here
def test_csr(benchmark, impl, op, n, density):
    benchmark.group = f"{op} n={n} density={density}"
    A, S, T = csr_pair(n, density)
    if op == "spgemm":
        B, SB, TB = csr_pair(n, density / 4, seed=1)
        fn = {"trnsparse": lambda: trnsparse.spgemm(A, B), "scipy": lambda: S @ SB, "torch": lambda: T @ TB}[impl]
    else:
        x = torch.rand(n, dtype=torch.float64) if op == "spmv" else torch.rand(n, 32, dtype=torch.float64)
        xn = x.numpy()
        fn = {"trnsparse": lambda: trnsparse.spmv(A, x) if op == "spmv" else trnsparse.spmm(A, x),
              "scipy": lambda: S @ xn, "torch": lambda: T @ x}[impl]
    benchmark(fn)


@pytest.mark.parametrize("impl", ["trnsparse", "scipy", "torch"])
def test_from_dense(benchmark, impl):
    benchmark.group = "from_dense 4096^2 1%"
    g = torch.Generator().manual_seed(0)
    D = torch.rand(4096, 4096, generator=g, dtype=torch.float64)
    D = D * (torch.rand(4096, 4096, generator=g, dtype=torch.float64) < 0.01)
    Dn = D.numpy()
    fn = {"trnsparse": lambda: trnsparse.from_dense(D), "scipy": lambda: sp.csr_array(Dn),
          "torch": lambda: D.to_sparse_csr()}[impl]
    benchmark(fn)


@pytest.mark.parametrize("impl", ["bsr_spmm", "dense_mm"])
@pytest.mark.parametrize("block_density", [0.05, 0.1, 0.25, 0.5, 1.0])
def test_bsr_spmm_vs_dense(benchmark, impl, block_density):
    benchmark.group = f"bsr_spmm 2048 block_density={block_density}"
    Bm, Bd = bsr_case(2048, block_density)
    R = torch.randn(2048, 256)
    benchmark(lambda: trnsparse.bsr_spmm(Bm, R) if impl == "bsr_spmm" else Bd @ R)


@pytest.mark.parametrize("impl", ["block_sparse", "dense_sdpa"])
@pytest.mark.parametrize("window", [1, 2, 4, 8])
def test_attention_vs_dense(benchmark, impl, window):
    benchmark.group = f"attention seq=4096 window={window} blocks"
    Q, K, V, M, dm = attention_case(4096, window)
    benchmark(lambda: trnsparse.block_sparse_attention(Q, K, V, M) if impl == "block_sparse"
              else dense_attention(Q, K, V, dm))
    _ = np
