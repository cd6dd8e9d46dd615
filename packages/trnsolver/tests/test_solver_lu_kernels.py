"""The device LU (panel kernel + row gather + trnblas TRSM/GEMM) through the simulator.

References are independent: SciPy's LAPACK ``getrf`` (``scipy.linalg.lu_factor``,
``scipy.linalg.lapack.sgetrf`` for ``info``), NumPy's ``solve``/``inv``/``slogdet``
in float64.

Tolerances: the factorization is float32 Gaussian elimination with partial
pivoting, backward error ``|P L U - A| <= gamma_n |L| |U|`` (gamma_n ~ n eps32,
eps32 = 1.2e-7); for these Gaussian matrices ``|L||U|`` stays within ~4 n of
``max|A|``, so entries of LU are compared with SciPy's float64 factors at
``atol = 4e-5 n max|A|`` (observed at n = 257: 2.7e-4 against 4e-2 allowed -- the
pivots are identical, so the factors differ only by rounding). Solves with
cond(A) ~ 1e2-1e3 are compared at ``1e-3`` relative (cond * n * eps32 margin).
Pivots and ``info`` are compared exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sl
import torch

import trnsolver
from trnsci.backend import use_backend
from trnsci.dispatch import plan_call
from trnsci.nki import emulator
from trnsci.testing import assert_counts, assert_plan_matches_run, kernel_ran
from trnsolver.kernels.lu_panel import lu_panel_counts, lu_panel_kernel
from trnsolver.kernels.row_gather import row_gather_counts, row_gather_kernel

pytestmark = pytest.mark.simulator


def _mat(n, seed=None, m=None):
    rng = np.random.default_rng(n if seed is None else seed)
    return rng.standard_normal((m or n, n)).astype(np.float32)


def _strip(d):
    d = dict(d)
    d.pop("kernel", None)
    d.pop("kernels", None)
    return d


@pytest.mark.parametrize("w,b", [(5, 5), (37, 37), (600, 20)])  # 600: two 512-column PSUM chunks
def test_panel_kernel_vs_scipy_and_counters(w, b):
    A = _mat(b, seed=w, m=w)
    (lut, q), prof = emulator.profile(lu_panel_kernel, np.ascontiguousarray(A.T), target="trn1")
    assert_counts(prof, _strip(lu_panel_counts(w, b)))
    ipiv = q[:, 0].astype(np.int64) + np.arange(b)
    A64 = A.astype(np.float64)
    lu_ref, piv_ref = sl.lapack.dgetrf(A64)[:2]
    np.testing.assert_array_equal(ipiv, piv_ref[:b])
    np.testing.assert_allclose(lut.T, lu_ref, rtol=0, atol=4e-5 * w * np.abs(A).max())


def test_panel_kernel_ties_pick_the_first_row_and_zero_column_is_left_alone():
    # column 0: |a| ties at rows 1 and 3 -> row 1 (i?amax's first); column 1 zero below the pivot
    A = np.array([[1.0, 2.0, 0.0], [-3.0, 0.0, 1.0], [0.0, 0.0, 2.0], [3.0, 0.0, 5.0],
                  [0.5, 0.0, 1.0], [1.0, 0.0, 0.0], [2.0, 0.0, 1.0], [0.0, 0.0, 4.0],
                  [1.0, 0.0, 1.0]], np.float32)
    (lut, q), _ = emulator.profile(lu_panel_kernel, np.ascontiguousarray(A.T))
    lu_ref, piv_ref, info = sl.lapack.sgetrf(A)
    np.testing.assert_array_equal(q[:, 0].astype(int) + np.arange(3), piv_ref)
    np.testing.assert_allclose(lut.T, lu_ref, rtol=0, atol=1e-6)


@pytest.mark.parametrize("m,c,r", [(1, 1, 1), (300, 2100, 300), (300, 7, 130)])  # 3 row tiles, 2 col chunks
def test_row_gather_kernel_gathers_the_listed_rows_and_counters(m, c, r):
    a = _mat(c, seed=m, m=m)
    rows = np.random.default_rng(c).permutation(m)[:r].astype(np.int32)[:, None]
    out, prof = emulator.profile(row_gather_kernel, a, rows)
    np.testing.assert_array_equal(out, a[rows[:, 0]])
    assert_counts(prof, _strip(row_gather_counts(r, c)))


@pytest.mark.parametrize("n", [1, 37, 130, 257])
def test_lu_factor_vs_scipy_pivots_and_plan_equals_run(n):
    A = _mat(n)
    with use_backend("simulator"):
        plan, (lu, piv), runs = assert_plan_matches_run(trnsolver.lu_factor, torch.from_numpy(A))
    assert plan.backend == "simulator" and "lu_panel_kernel" in plan.kernel["kernels"]
    lu_ref, piv_ref = sl.lu_factor(A.astype(np.float64))
    np.testing.assert_array_equal(piv.numpy(), piv_ref)
    np.testing.assert_allclose(lu.numpy(), lu_ref, rtol=0, atol=4e-5 * n * np.abs(A).max())
    if n > 128:  # every launch kind of the composition ran
        assert set(plan.kernel["kernels"]) == {"lu_panel_kernel", "row_gather_kernel", "trsm_kernel",
                                                "gemm_kernel"}


def test_singular_matrix_reports_getrf_info_and_solves_raise():
    A = _mat(140)
    A[:, 6] = 0.0           # column 6 zero: the first zero pivot is U[6, 6]
    A[:, 139] = A[:, 3]     # and a dependent last column
    ref_info = sl.lapack.sgetrf(A)[2]
    with use_backend("simulator"):
        lu, piv, info = trnsolver.lu_factor(torch.from_numpy(A), check=False)
        assert int(info) == ref_info == 7
        with pytest.raises(trnsolver.LinAlgError, match="U\\[6, 6\\]"):
            trnsolver.solve(torch.from_numpy(A), torch.ones(140))
        assert float(trnsolver.det(torch.from_numpy(A))) == 0.0


@pytest.mark.parametrize("trans", [0, 1])
def test_lu_solve_vs_numpy(trans):
    n = 130
    A = _mat(n, seed=5) + 4 * np.eye(n, dtype=np.float32)
    B = _mat(3, seed=6, m=n)
    with use_backend("simulator"):
        f = trnsolver.lu_factor(torch.from_numpy(A))
        with kernel_ran() as runs:
            X = trnsolver.lu_solve(f, torch.from_numpy(B), trans=trans).numpy()
    assert sorted(r.kernel for r in runs) == ["row_gather_kernel", "trsm_kernel", "trsm_kernel"]
    M = A.astype(np.float64).T if trans else A.astype(np.float64)
    ref = np.linalg.solve(M, B.astype(np.float64))
    np.testing.assert_allclose(X, ref, rtol=0, atol=1e-3 * np.abs(ref).max())


def test_solve_inv_det_slogdet_vs_numpy_and_plans():
    n = 37
    A = _mat(n, seed=11)
    A64 = A.astype(np.float64)
    b = np.arange(n, dtype=np.float32)
    At = torch.from_numpy(A)
    with use_backend("simulator"):
        for fn, args in ((trnsolver.solve, (At, torch.from_numpy(b))), (trnsolver.inv, (At,)),
                         (trnsolver.slogdet, (At,))):
            plan, _, runs = assert_plan_matches_run(fn, *args)
            assert plan.backend == "simulator" and runs
        x = trnsolver.solve(At, torch.from_numpy(b)).numpy()
        Ainv = trnsolver.inv(At).numpy()
        s, ld = trnsolver.slogdet(At)
        d = trnsolver.det(At)
    ref_x = np.linalg.solve(A64, b)
    np.testing.assert_allclose(x, ref_x, rtol=0, atol=1e-3 * np.abs(ref_x).max())
    ref_inv = np.linalg.inv(A64)
    np.testing.assert_allclose(Ainv, ref_inv, rtol=0, atol=1e-3 * np.abs(ref_inv).max())
    rs, rld = np.linalg.slogdet(A64)
    assert float(s) == rs
    assert abs(float(ld) - rld) <= 1e-4 * n  # log|det| = sum log|u_ii|: n terms, each off by ~eps32 * cond
    np.testing.assert_allclose(float(d), rs * np.exp(rld), rtol=1e-3)


def test_batched_solve_broadcasts_on_the_device():
    A = np.stack([_mat(20, seed=1), _mat(20, seed=2)])
    B = _mat(20, seed=3, m=2)  # a (2, 20) batch of vectors, one per matrix
    with kernel_ran(*(["lu_panel_kernel", "row_gather_kernel", "trsm_kernel", "trsm_kernel"] * 2)):
        X = trnsolver.solve(torch.from_numpy(A), torch.from_numpy(B)).numpy()
    ref = np.linalg.solve(A.astype(np.float64), B.astype(np.float64)[..., None])[..., 0]
    np.testing.assert_allclose(X, ref, rtol=0, atol=1e-3 * np.abs(ref).max())


def test_what_the_kernels_do_not_take_plans_torch_and_says_why():
    with use_backend("simulator"):
        assert "float64" in plan_call(trnsolver.lu_factor, torch.eye(4, dtype=torch.float64)).reason
        assert "square" in plan_call(trnsolver.lu, torch.ones(4, 3)).reason
        assert "complex" in plan_call(trnsolver.solve, torch.eye(3, dtype=torch.complex64),
                                      torch.ones(3, dtype=torch.complex64)).reason
        plan, _, runs = assert_plan_matches_run(trnsolver.lu, torch.ones(4, 3))
        assert plan.backend == "torch" and not runs


def test_batched_lu_unpacked_vs_scipy():
    A = np.random.default_rng(1).standard_normal((2, 9, 9)).astype(np.float32)
    with use_backend("simulator"), kernel_ran() as runs:
        P, L, U = trnsolver.lu(torch.from_numpy(A))
    assert {r.kernel for r in runs} == {"lu_panel_kernel"} and len(runs) == 2
    for i in range(2):
        Pr, Lr, Ur = sl.lu(A[i].astype(np.float64))
        np.testing.assert_array_equal(P[i].numpy(), Pr)
        np.testing.assert_allclose(L[i].numpy(), Lr, rtol=0, atol=4e-5 * 9)
        np.testing.assert_allclose(U[i].numpy(), Ur, rtol=0, atol=4e-5 * 9 * np.abs(A[i]).max())


def test_nan_input_plans_torch_quietly_instead_of_failing_the_kernel():
    import warnings

    A = torch.eye(4)
    A[1, 1] = float("nan")
    with use_backend("simulator"), warnings.catch_warnings():
        warnings.simplefilter("error")  # no kernel-failure fallback warning
        assert "NaN" in plan_call(trnsolver.det, A).reason
        assert bool(torch.isnan(trnsolver.det(A)))
        assert bool(torch.isnan(trnsolver.qr(A)[1]).any())


def test_a_batch_over_128_matrices_plan_equals_run():
    A = np.random.default_rng(9).standard_normal((130, 5, 5)).astype(np.float32)  # one launch per matrix
    with use_backend("simulator"):
        plan, (lu, piv), runs = assert_plan_matches_run(trnsolver.lu_factor, torch.from_numpy(A))
    assert plan.kernel["kernels"] == ["lu_panel_kernel"] * 130
    for i in (0, 77, 129):
        lu_ref, piv_ref = sl.lu_factor(A[i].astype(np.float64))
        np.testing.assert_array_equal(piv[i].numpy(), piv_ref)
        np.testing.assert_allclose(lu[i].numpy(), lu_ref, rtol=0, atol=4e-5 * 5 * np.abs(A[i]).max())
