"""``trnblas.gemm(..., precision="fp64")``: float64 accuracy from the float32 GEMM kernel (Ozaki slices).

Reference: NumPy's float64 ``matmul``, itself within ``k 2^-53 sum_l |a_il b_lj|`` of the exact product
(the usual recursive-summation bound); a result passes when it is within the documented bound
(:func:`trnblas._nki.level3_ozaki.error_bound`) plus that reference error. The bound is checked to be tight
enough to fail the plain float32 kernel GEMM on the same inputs.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import trnblas
import trnsci
from trnblas._nki import level3_ozaki as _ozaki
from trnsci.testing import assert_plan_matches_run, kernel_ran

pytestmark = pytest.mark.simulator


def _operands(m, k, n, seed, ill=False):
    g = np.random.default_rng(seed)
    A, B = g.standard_normal((m, k)), g.standard_normal((k, n))
    if ill:  # rows/columns hundreds of binades apart, entries within a row 2^-40 apart, an all-zero line
        A *= 2.0 ** g.integers(-300, 300, size=(m, 1))
        B *= 2.0 ** g.integers(-300, 300, size=(1, n))
        A[:, : k // 2] *= 2.0 ** -40
        A[-1] = 0.0
    return A, B


def _check(R, A, B, alpha=1.0, beta=0.0, C0=None):
    """``R`` within the fp64 mode's bound (plus NumPy's own error) of NumPy's float64 result."""
    ref = alpha * (A @ B) + (0.0 if C0 is None else beta * C0)
    k = A.shape[1]
    bound = _ozaki.error_bound(alpha, torch.from_numpy(A), torch.from_numpy(B), beta,
                               None if C0 is None else torch.from_numpy(C0)).numpy()
    c0 = 0.0 if C0 is None else np.abs(C0)
    numpy_err = (k + 2) * 2.0 ** -53 * (abs(alpha) * (np.abs(A) @ np.abs(B)) + abs(beta) * c0)
    err = np.abs(np.asarray(R, dtype=np.float64) - ref)
    assert np.all(err <= bound + numpy_err), float(np.max(err / (bound + numpy_err + 1e-300)))
    return ref, bound + numpy_err


SHAPES = [(1, 1, 1), (17, 24, 5), (130, 84, 95), (3, 300, 2), (129, 7, 131)]  # ragged on every tile edge


@pytest.mark.parametrize("ill", [False, True], ids=["random", "ill-scaled"])
@pytest.mark.parametrize("m,k,n", SHAPES)
def test_fp64_mode_on_the_kernel_meets_its_bound(m, k, n, ill):
    A, B = _operands(m, k, n, seed=m + k + n, ill=ill)
    with kernel_ran() as runs:
        R = trnblas.gemm(1.0, A, B, precision="fp64")  # NumPy in -> NumPy out
    assert isinstance(R, np.ndarray) and R.dtype == np.float64
    p = _ozaki.plan(k)
    assert [r.kernel for r in runs] == ["gemm_kernel"] * p["launches"]
    _check(R, A, B)


def test_bound_separates_fp64_from_the_float32_kernel():
    """The test above can fail: the plain float32 kernel GEMM violates the bound on the same inputs."""
    A, B = _operands(130, 84, 95, seed=1)
    with kernel_ran():
        R32 = trnblas.gemm(1.0, A.astype(np.float32), B.astype(np.float32))
    ref = A @ B
    bound = _ozaki.error_bound(1.0, torch.from_numpy(A), torch.from_numpy(B)).numpy()
    assert np.max(np.abs(R32 - ref) / bound) > 1e3
    assert _ozaki.eps(84) < 2.0 ** -44


def test_transposes_alpha_beta_c_and_float32_inputs():
    g = np.random.default_rng(3)
    A = torch.from_numpy(g.standard_normal((40, 33)))  # op(A) = A^T: 33 x 40
    B = torch.from_numpy(g.standard_normal((21, 40)))  # op(B) = B^T: 40 x 21
    C = torch.from_numpy(g.standard_normal((33, 21)))
    with kernel_ran():
        R = trnblas.gemm(-0.75, A, B, 0.5, C, transA="T", transB="T", precision="fp64")
    assert R.dtype == torch.float64
    _check(R.numpy(), A.numpy().T, B.numpy().T, -0.75, 0.5, C.numpy())
    # float32 operands: computed as float64, rounded once to float32
    with kernel_ran():
        R32 = trnblas.gemm(1.0, A.float(), B.float(), transA="T", transB="T", precision="fp64")
    a, b = A.float().double().T, B.float().double().T
    exact = a @ b  # the float64 result on the float32 inputs: R32 is it rounded once (one fp32 ulp)
    slack = _ozaki.error_bound(1.0, a, b) + 40 * 2.0 ** -53 * (a.abs() @ b.abs())
    assert R32.dtype == torch.float32
    assert torch.all((R32.double() - exact).abs() <= 2.0 ** -24 * exact.abs() + slack)


def test_batched_operands_run_one_fp64_gemm_per_matrix():
    g = np.random.default_rng(4)
    A, B = g.standard_normal((3, 9, 10)), g.standard_normal((10, 6))
    with kernel_ran() as runs:
        R = trnblas.gemm(1.0, A, B, precision="fp64")
    assert R.shape == (3, 9, 6) and len(runs) == 3 * _ozaki.plan(10)["launches"]
    for i in range(3):
        _check(R[i], A[i], B)


def test_k_split_on_the_host_stays_exact():
    """k = 4000 > one fp32 SBUF panel (3840): each launch runs as two kernel runs added in fp32, still exact
    because the slice width is set by the whole k (k 2^(2 s) <= 2^24)."""
    A, B = _operands(2, 4000, 3, seed=5)
    p = _ozaki.plan(4000)
    assert p["slice_bits"] == 6 and 4000 * 2 ** 12 <= 2 ** 24
    with kernel_ran() as runs:
        R = trnblas.gemm(1.0, A, B, precision="fp64")
    assert len(runs) == 2 * p["launches"]
    _check(R, A, B)


def test_plan_lists_the_launches_and_matches_the_run():
    A, B = _operands(37, 50, 29, seed=6)
    p = _ozaki.plan(50)
    with trnsci.use_backend("simulator"):
        plan, R, runs = assert_plan_matches_run(trnblas.gemm, 1.0, A, B, precision="fp64")
        assert trnblas.plan_gemm(A, B, precision="fp64").kernel == plan.kernel
    assert plan.op == "trnblas.gemm_fp64" and plan.backend == "simulator"
    assert plan.kernel["kernels"] == ["gemm_kernel"] * p["slices"]
    assert f"{p['slices']} slices of {p['slice_bits']} bits" in plan.kernel["name"]
    # closed form: launch t is 37 x (S + 1 - t) 29 x 50 -> sum of 2 m n k over the launches
    S = p["slices"]
    assert plan.kernel["flops"] == sum(2 * 37 * (S + 1 - t) * 29 * 50 for t in range(1, S + 1))
    assert "slices" in str(plan)


def test_slicing_closed_forms():
    for k in (1, 24, 64, 84, 300, 1024, 4000, 2 ** 18):
        p = _ozaki.plan(k)
        s, S = p["slice_bits"], p["slices"]
        assert k * 2 ** (2 * s) <= 2 ** 24 < k * 2 ** (2 * s + 2)  # widest exact slices
        assert S * s >= 53 + math.ceil(math.log2(8 * S + 16)) > (S - 1) * s  # fewest slices
        assert p["products"] == S * (S + 1) // 2 and p["launches"] == S
    assert _ozaki.plan(64)["slices"] == 7 and _ozaki.plan(84)["slices"] == 8


def test_torch_path_is_the_float64_gemm():
    A, B = _operands(20, 30, 10, seed=7)
    with trnsci.use_backend("torch"):
        R = trnblas.gemm(1.0, torch.from_numpy(A), torch.from_numpy(B), precision="fp64")
        assert trnblas.plan_gemm(A, B, precision="fp64").backend == "torch"
    _check(R.numpy(), A, B)


def test_non_finite_operands_propagate():
    A, B = _operands(5, 6, 4, seed=8)
    A[1, 2] = np.nan
    B[0, 3] = np.inf
    with trnsci.use_backend("simulator"):
        R = trnblas.gemm(1.0, A, B, precision="fp64")
    ref = A @ B
    assert np.array_equal(np.isnan(R), np.isnan(ref)) and np.array_equal(np.isinf(R), np.isinf(ref))


def test_bad_precision_is_named():
    A = torch.ones(2, 2, dtype=torch.float64)
    with pytest.raises(TypeError, match="precision"):
        trnblas.gemm(1.0, A, A, precision=64)
    with pytest.raises(ValueError, match="precision"):
        trnblas.gemm(1.0, A, A, precision="fp32")
    with pytest.raises(TypeError, match="precision='fp64' takes real"):
        trnblas.gemm(1.0, A.to(torch.complex128), A.to(torch.complex128), precision="fp64")
    assert torch.equal(trnblas.gemm(1.0, A, A, precision="default"), trnblas.gemm(1.0, A, A))


def test_gradients_are_the_gemm_formulas():
    """The op's backward (two trnblas.gemm_fp64 calls) against torch's finite differences."""
    g = torch.Generator().manual_seed(9)
    A = torch.randn(5, 4, dtype=torch.float64, generator=g, requires_grad=True)
    B = torch.randn(6, 4, dtype=torch.float64, generator=g, requires_grad=True)
    with trnsci.use_backend("torch"):
        assert torch.autograd.gradcheck(lambda a, b: trnblas.gemm(0.5, a, b, transB="T", precision="fp64"), (A, B))
