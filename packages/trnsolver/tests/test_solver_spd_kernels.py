"""The Cholesky tile kernel and the SPD routines on it, through the simulator.

References: NumPy/SciPy in float64 (``numpy.linalg.cholesky``, LAPACK
``spotrf``'s ``info``, ``numpy.linalg.solve/inv``, ``scipy.linalg.eigh``).

Tolerances: Cholesky is backward stable, ``|L L^T - A| <= c n eps32 |A|``;
the factor's entries move by at most ~``n eps32 cond(A)^{1/2} |L|``. The test
matrices are ``X X^T + n I`` (cond <= ~5), so the factors are compared at
``2e-6 n max|L|`` and solves/inverses at ``1e-4`` relative to their largest
entry (n eps32 cond with margin).
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
from trnsolver.kernels.potrf_tile import potrf_tile_counts, potrf_tile_kernel

pytestmark = pytest.mark.simulator


def _spd(n, seed=None):
    X = np.random.default_rng(n if seed is None else seed).standard_normal((n, n))
    return (X @ X.T + n * np.eye(n)).astype(np.float32)


def _close(got, ref, rel):
    np.testing.assert_allclose(got, ref, rtol=0, atol=rel * np.abs(ref).max())


@pytest.mark.parametrize("n", [1, 37, 128])
def test_potrf_tile_kernel_vs_numpy_and_counters(n):
    A = _spd(n)
    (lt, d), prof = emulator.profile(potrf_tile_kernel, A, target="trn1")
    want = potrf_tile_counts(n)
    want.pop("kernel")
    assert_counts(prof, want)
    ref = np.linalg.cholesky(A.astype(np.float64))
    _close(np.tril(lt.T), ref, 2e-6 * n)
    assert (d > 0).all()


def test_potrf_tile_kernel_reports_the_first_non_pd_minor_like_spotrf():
    A = _spd(9)
    A[5, 5] = -50.0  # leading minor of order 6 fails
    (_, d), _ = emulator.profile(potrf_tile_kernel, A)
    assert int(np.argmax(~(d[:, 0] > 0))) + 1 == sl.lapack.spotrf(A, lower=1)[1] == 6


@pytest.mark.parametrize("n", [20, 150])  # one tile launch; blocked: 2 tiles + TRSM/SYRK
def test_cholesky_on_the_device_and_plan_equals_run(n):
    A = _spd(n)
    with use_backend("simulator"):
        plan, L, runs = assert_plan_matches_run(trnsolver.cholesky, torch.from_numpy(A))
        U = trnsolver.cholesky(torch.from_numpy(np.triu(A) + 7 * np.tril(A, -1)), upper=True)  # reads upper only
    assert "potrf_tile_kernel" in plan.kernel["kernels"]
    ref = np.linalg.cholesky(A.astype(np.float64))
    _close(L.numpy(), ref, 2e-6 * n)
    _close(U.numpy(), ref.T, 2e-6 * n)


def test_cholesky_not_pd_in_the_second_block_names_the_minor():
    A = _spd(140)
    A[133, 133] = -1e4
    ref = sl.lapack.spotrf(A, lower=1)[1]
    with use_backend("simulator"), pytest.raises(trnsolver.LinAlgError, match=f"order {ref}"):
        trnsolver.cholesky(torch.from_numpy(A))
    with use_backend("simulator"):
        assert int(trnsolver.cholesky(torch.from_numpy(A), check=False)[1]) == ref == 134


def test_spd_solves_and_inverse_vs_numpy_and_plans():
    n = 30
    A = _spd(n, seed=4)
    B = np.random.default_rng(5).standard_normal((n, 3)).astype(np.float32)
    A64, B64 = A.astype(np.float64), B.astype(np.float64)
    At, Bt = torch.from_numpy(A), torch.from_numpy(B)
    with use_backend("simulator"):
        for fn, args in ((trnsolver.solve_spd, (At, Bt)), (trnsolver.inv_spd, (At,)),
                         (trnsolver.cho_solve, ((trnsolver.cholesky(At), True), Bt))):
            plan, _, runs = assert_plan_matches_run(fn, *args)
            assert plan.backend == "simulator" and "trsm_kernel" in plan.kernel["kernels"]
        X = trnsolver.solve_spd(At, Bt).numpy()
        Xl = trnsolver.cho_solve(trnsolver.cho_factor(At, lower=True), Bt).numpy()
        Xu = trnsolver.cho_solve(trnsolver.cho_factor(At), Bt).numpy()
        Ainv = trnsolver.inv_spd(At).numpy()
    ref = np.linalg.solve(A64, B64)
    for got in (X, Xl, Xu):
        _close(got, ref, 1e-4)
    _close(Ainv, np.linalg.inv(A64), 1e-4)


def test_inv_sqrt_spd_runs_jacobi_and_gemm_kernels():
    n = 12
    A = _spd(n, seed=8)
    with kernel_ran() as runs:
        X = trnsolver.inv_sqrt_spd(torch.from_numpy(A)).numpy()
    assert {r.kernel for r in runs} == {"eigh_sweep_kernel", "gemm_kernel"}
    w, V = sl.eigh(A.astype(np.float64))
    _close(X, (V / np.sqrt(w)) @ V.T, 2e-4)  # Jacobi's eigenvectors: ~1e-5 (test_solver_kernels' bound)


def test_what_stays_on_torch_says_why():
    A = torch.from_numpy(_spd(6))
    with use_backend("simulator"):
        assert "float64" in plan_call(trnsolver.solve_spd, A.double(), torch.ones(6, dtype=torch.float64)).reason
        p = plan_call(trnsolver.solve_spd, A, torch.ones(6), iterative_refinement=True)
        assert p.backend == "torch" and "float64" in p.reason
        assert "empty" in plan_call(trnsolver.cholesky, torch.zeros(0, 0)).reason
