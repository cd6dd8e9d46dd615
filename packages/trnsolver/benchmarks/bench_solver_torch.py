"""trnsolver's torch path against scipy.linalg / torch.linalg / scipy.sparse.linalg, same run.

Run: ``pytest packages/trnsolver/benchmarks --benchmark-enable --benchmark-only``.
Groups put trnsolver next to its peers per op, size and dtype. Size 64 and
Poisson 16^2 run in the test suite (once each, as smoke tests); the cases
marked slow (n = 256..2048, Poisson 256^2, the larger Jacobi runs: ~4 min on
2 cores) run only when timing, i.e. with ``--benchmark-enable``. The Jacobi
reference records sweeps-to-converge in ``extra_info``.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sl
import scipy.sparse.linalg as spl
import torch

import trnsci
import trnsolver
from trnsolver._nki.eigen_jacobi import _block_jacobi_eigh_torch, _jacobi_eigh_torch
from trnsolver.bench import poisson2d

pytest.importorskip("pytest_benchmark")

SIZES = [64] + [pytest.param(n, marks=pytest.mark.slow) for n in (256, 512, 1024, 2048)]
DTYPES = [torch.float32, torch.float64]


@pytest.fixture(autouse=True)
def _torch_backend(request):
    if request.node.get_closest_marker("slow") and not request.config.getoption("benchmark_enable", False):
        pytest.skip("large benchmark case: runs with --benchmark-enable")
    with trnsci.use_backend("torch"):
        yield


def sym(n, dt, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, n, generator=g, dtype=dt)
    return X + X.T


def dname(dt):
    return str(dt).replace("torch.", "")


@pytest.mark.parametrize("impl", ["trnsolver", "torch", "scipy"])
@pytest.mark.parametrize("dtype", DTYPES, ids=dname)
@pytest.mark.parametrize("n", SIZES)
def test_eigh(benchmark, n, dtype, impl):
    benchmark.group = f"eigh n={n} {dname(dtype)}"
    A = sym(n, dtype, n)
    An = A.numpy()
    fn = {"trnsolver": lambda: trnsolver.eigh(A), "torch": lambda: torch.linalg.eigh(A),
          "scipy": lambda: sl.eigh(An)}[impl]
    benchmark(fn)


@pytest.mark.parametrize("impl", ["trnsolver", "torch", "scipy"])
@pytest.mark.parametrize("dtype", DTYPES, ids=dname)
@pytest.mark.parametrize("n", SIZES)
def test_cholesky(benchmark, n, dtype, impl):
    benchmark.group = f"cholesky n={n} {dname(dtype)}"
    A = sym(n, dtype, n)
    S = A @ A.T / n + torch.eye(n, dtype=dtype)
    Sn = S.numpy()
    fn = {"trnsolver": lambda: trnsolver.cholesky(S), "torch": lambda: torch.linalg.cholesky(S),
          "scipy": lambda: sl.cholesky(Sn, lower=True)}[impl]
    benchmark(fn)


@pytest.mark.parametrize("impl", ["trnsolver", "torch", "scipy"])
@pytest.mark.parametrize("dtype", DTYPES, ids=dname)
@pytest.mark.parametrize("n", SIZES)
def test_solve(benchmark, n, dtype, impl):
    benchmark.group = f"solve n={n} {dname(dtype)}"
    A, b = sym(n, dtype, n), torch.ones(n, dtype=dtype)
    An, bn = A.numpy(), b.numpy()
    fn = {"trnsolver": lambda: trnsolver.solve(A, b), "torch": lambda: torch.linalg.solve(A, b),
          "scipy": lambda: sl.solve(An, bn)}[impl]
    benchmark(fn)


@pytest.mark.parametrize("method,precond", [("cg", "none"), ("bicgstab", "none"), ("bicgstab", "ilu"),
                                            ("gmres", "ilu")])
@pytest.mark.parametrize("impl", ["trnsolver", "scipy"])
@pytest.mark.parametrize("m", [16, pytest.param(256, marks=pytest.mark.slow)])
def test_krylov_poisson(benchmark, m, impl, method, precond):
    """2-D Poisson; the ILU-type preconditioner is SciPy's spilu object (not symmetric: no CG)."""
    benchmark.group = f"{method} poisson {m}^2 M={precond}"
    A = poisson2d(m)
    b = np.ones(A.shape[0])
    ilu = spl.spilu(A.tocsc(), drop_tol=1e-2, fill_factor=1.0) if precond == "ilu" else None
    if impl == "trnsolver":
        At = torch.sparse_csr_tensor(torch.from_numpy(A.indptr).long(), torch.from_numpy(A.indices).long(),
                                     torch.from_numpy(A.data), A.shape, check_invariants=True)
        bt = torch.from_numpy(b)
        x, it, rr = benchmark(lambda: getattr(trnsolver, method)(At, bt, tol=1e-6, maxiter=5000, M=ilu))
        benchmark.extra_info["iterations"] = it
        assert rr <= 1e-6
    else:
        M = None if ilu is None else spl.LinearOperator(A.shape, ilu.solve)
        benchmark(lambda: getattr(spl, method)(A, b, rtol=1e-6, maxiter=5000, M=M))


@pytest.mark.parametrize("n", [16, pytest.param(32, marks=pytest.mark.slow), pytest.param(64, marks=pytest.mark.slow),
                               pytest.param(128, marks=pytest.mark.slow)])
def test_jacobi_sweeps(benchmark, n):
    """Brent-Luk parallel Jacobi (reference for the NKI kernel): sweeps to off(A) <= n eps ||A|| (fp32)."""
    benchmark.group = "jacobi reference (sweeps in extra_info)"
    A = sym(n, torch.float32, n)
    w, V, sweeps = benchmark.pedantic(lambda: _jacobi_eigh_torch(A, 4 * n * 1.2e-7, 30), rounds=1, iterations=1)
    benchmark.extra_info["sweeps"] = sweeps
    assert sweeps < 30


@pytest.mark.slow
@pytest.mark.parametrize("n", [256])
def test_block_jacobi_sweeps(benchmark, n):
    benchmark.group = "jacobi reference (sweeps in extra_info)"
    A = sym(n, torch.float32, n)
    w, V, sweeps = benchmark.pedantic(lambda: _block_jacobi_eigh_torch(A, 4 * n * 1.2e-7, 30, block=64),
                                      rounds=1, iterations=1)
    benchmark.extra_info["sweeps"] = sweeps
