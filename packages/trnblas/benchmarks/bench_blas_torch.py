"""trnblas's torch path against torch itself and reference BLAS (scipy.linalg.blas).

Run: ``pytest packages/trnblas/benchmarks --benchmark-enable --benchmark-only``. Results are
grouped per operation, size and dtype, so each group shows trnblas next to
``torch.matmul`` (the floor: trnblas's torch lowering plus its validation and
dispatch overhead) and next to SciPy's BLAS (the CPU reference library).
Sizes: 64 (overhead-dominated), 256, 1024; 2048 is marked slow.

All runs use backend ``"torch"`` so the numbers measure the torch path
whatever hardware is present.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg.blas as sb
import torch

import trnblas
import trnsci

pytest.importorskip("pytest_benchmark")

SIZES = [64, 256, 1024, pytest.param(2048, marks=pytest.mark.slow)]
DTYPES = [torch.float32, torch.float64]
NP = {torch.float32: np.float32, torch.float64: np.float64}
IMPLS = ["trnblas", "torch", "scipy"]


@pytest.fixture(autouse=True)
def _torch_backend():
    with trnsci.use_backend("torch"):
        yield


def operands(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dtype)


def name(dtype):
    return str(dtype).replace("torch.", "")


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("dtype", DTYPES, ids=name)
@pytest.mark.parametrize("n", SIZES)
def test_gemm(benchmark, n, dtype, impl):
    benchmark.group = f"gemm n={n} {name(dtype)}"
    A, B = operands((n, n), dtype, 1), operands((n, n), dtype, 2)
    if impl == "trnblas":
        benchmark(trnblas.gemm, 1.0, A, B)
    elif impl == "torch":
        benchmark(torch.matmul, A, B)
    else:
        f = sb.get_blas_funcs("gemm", dtype=NP[dtype])
        a, b = np.asfortranarray(A.numpy()), np.asfortranarray(B.numpy())
        benchmark(f, 1.0, a, b)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("dtype", DTYPES, ids=name)
@pytest.mark.parametrize("n", SIZES)
def test_gemm_beta(benchmark, n, dtype, impl):
    """``alpha A B + beta C``: trnblas's addmm path against torch.addmm."""
    benchmark.group = f"gemm+beta n={n} {name(dtype)}"
    A, B, C = operands((n, n), dtype, 1), operands((n, n), dtype, 2), operands((n, n), dtype, 3)
    if impl == "trnblas":
        benchmark(trnblas.gemm, 0.5, A, B, 2.0, C)
    elif impl == "torch":
        benchmark(torch.addmm, C, A, B, beta=2.0, alpha=0.5)
    else:
        f = sb.get_blas_funcs("gemm", dtype=NP[dtype])
        a, b, c = (np.asfortranarray(x.numpy()) for x in (A, B, C))
        benchmark(f, 0.5, a, b, 2.0, c)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("dtype", DTYPES, ids=name)
@pytest.mark.parametrize("n", SIZES)
def test_syrk(benchmark, n, dtype, impl):
    benchmark.group = f"syrk n={n} {name(dtype)}"
    A = operands((n, n), dtype, 1)
    if impl == "trnblas":
        benchmark(trnblas.syrk, 1.0, A)
    elif impl == "torch":
        benchmark(lambda: torch.matmul(A, A.mT).triu_())
    else:
        f = sb.get_blas_funcs("syrk", dtype=NP[dtype])
        a = np.asfortranarray(A.numpy())
        benchmark(f, 1.0, a)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("dtype", DTYPES, ids=name)
@pytest.mark.parametrize("n", SIZES)
def test_trsm(benchmark, n, dtype, impl):
    benchmark.group = f"trsm n={n} {name(dtype)}"
    A = operands((n, n), dtype, 1).triu_() * (0.1 / n**0.5)
    A.diagonal().add_(1.0)  # well conditioned
    B = operands((n, n), dtype, 2)
    if impl == "trnblas":
        benchmark(trnblas.trsm, 1.0, A, B)
    elif impl == "torch":
        benchmark(torch.linalg.solve_triangular, A, B, upper=True)
    else:
        f = sb.get_blas_funcs("trsm", dtype=NP[dtype])
        a, b = np.asfortranarray(A.numpy()), np.asfortranarray(B.numpy())
        benchmark(f, 1.0, a, b)


BATCH_SIZES = [(64, 64), (256, 16), (1024, 2)]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("dtype", DTYPES, ids=name)
@pytest.mark.parametrize("n,batch", BATCH_SIZES)
def test_batched_gemm(benchmark, n, batch, dtype, impl):
    benchmark.group = f"batched_gemm n={n} batch={batch} {name(dtype)}"
    A, B = operands((batch, n, n), dtype, 1), operands((batch, n, n), dtype, 2)
    if impl == "trnblas":
        benchmark(trnblas.batched_gemm, 1.0, A, B)
    elif impl == "torch":
        benchmark(torch.bmm, A, B)
    else:
        f = sb.get_blas_funcs("gemm", dtype=NP[dtype])
        a = [np.asfortranarray(x) for x in A.numpy()]
        b = [np.asfortranarray(x) for x in B.numpy()]
        benchmark(lambda: [f(1.0, x, y) for x, y in zip(a, b)])


# ---------------------------------------------------------------- per-call overhead
# Small problems, where trnblas's validation and dispatch are most of the
# cost: trnblas next to the bare torch call it lowers to. "auto" is what a
# user on a machine without a NeuronCore gets (the fixture above sets
# "torch"; these cases re-enter "auto" to time the decision path too).

OVERHEAD_N = [64]


@pytest.mark.parametrize("backend", ["torch", "auto"])
@pytest.mark.parametrize("impl", ["trnblas", "torch"])
@pytest.mark.parametrize("n", OVERHEAD_N)
def test_gemm_overhead(benchmark, n, impl, backend):
    benchmark.group = f"gemm overhead n={n} float32 backend={backend}"
    A, B = operands((n, n), torch.float32, 1), operands((n, n), torch.float32, 2)
    with trnsci.use_backend(backend):
        if impl == "trnblas":
            benchmark(trnblas.gemm, 1.0, A, B)
        else:
            benchmark(torch.mm, A, B)


@pytest.mark.parametrize("impl", ["trnblas", "torch"])
@pytest.mark.parametrize("n", OVERHEAD_N)
def test_gemv(benchmark, n, impl):
    benchmark.group = f"gemv n={n} float32"
    A, x = operands((n, n), torch.float32, 1), operands((n,), torch.float32, 2)
    if impl == "trnblas":
        benchmark(trnblas.gemv, 1.0, A, x)
    else:
        benchmark(torch.mv, A, x)


@pytest.mark.parametrize("impl", ["trnblas", "torch"])
@pytest.mark.parametrize("n", OVERHEAD_N)
def test_axpy(benchmark, n, impl):
    benchmark.group = f"axpy n={n} float32"
    x, y = operands((n,), torch.float32, 1), operands((n,), torch.float32, 2)
    if impl == "trnblas":
        benchmark(trnblas.axpy, 2.0, x, y)
    else:
        benchmark(torch.add, y, x, alpha=2.0)


@pytest.mark.parametrize("impl", ["trnblas", "torch"])
@pytest.mark.parametrize("n", OVERHEAD_N)
def test_dot(benchmark, n, impl):
    benchmark.group = f"dot n={n} float32"
    x, y = operands((n,), torch.float32, 1), operands((n,), torch.float32, 2)
    if impl == "trnblas":
        benchmark(trnblas.dot, x, y)
    else:
        benchmark(torch.dot, x, y)
