"""One-sided Jacobi SVD (sweep kernel) and pinv through the simulator.

References: ``scipy.linalg.svdvals`` / ``numpy.linalg.pinv`` in float64.

Tolerances: one-sided Jacobi is backward stable column by column: each
singular value is accurate to ~``c n eps32 sigma_max`` (and better, relative
to itself, for well-conditioned column scalings); with ``n <= 37`` and ``c``
a few sweeps we allow ``2e-6 max(m, n) sigma_max`` (observed 1.4e-5 on
sigma_max ~ 10 at 37 x 20, against 7e-4 allowed). Vectors: ``|U^T U - I|``,
``|U S V^T - A|`` at ``1e-5 max(m, n)`` (times ``max|A|``).
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
from trnsolver.kernels.eigh_sweep import partner_table
from trnsolver.kernels.svd_sweep import svd_sweep_counts, svd_sweep_kernel

pytestmark = pytest.mark.simulator


def _mat(m, n, seed=None):
    return np.random.default_rng(m * 100 + n if seed is None else seed).standard_normal((m, n)).astype(np.float32)


def test_partner_table_is_a_round_robin():
    n = 8
    T = partner_table(n)
    seen = set()
    for r in range(n - 1):
        part, sign = T[:, 2 * r].astype(int), T[:, 2 * r + 1]
        np.testing.assert_array_equal(part[part], np.arange(n))      # a perfect matching
        assert (part != np.arange(n)).all()
        np.testing.assert_array_equal(sign[part], -sign)             # one top, one bottom per pair
        seen |= {tuple(sorted((i, int(part[i])))) for i in range(n)}
    assert len(seen) == n * (n - 1) // 2                              # every pair once per sweep


@pytest.mark.parametrize("m,n", [(6, 4), (600, 8)])  # 600: two 512-column chunks
def test_sweep_counters_equal_closed_forms_and_the_gram_is_rotated_not_changed(m, n):
    A = _mat(m, n)
    eye = np.eye(n, dtype=np.float32)
    (ut, vt, conv, norms), prof = emulator.profile(svd_sweep_kernel, np.ascontiguousarray(A.T), eye, eye,
                                                   partner_table(n), target="trn1")
    want = svd_sweep_counts(n, m)
    want.pop("kernel")
    assert_counts(prof, want)
    # U = A V with V orthogonal after any number of rotations; norms are U's column norms^2
    A64 = A.astype(np.float64)
    np.testing.assert_allclose(ut.T, A64 @ vt.T, rtol=0, atol=1e-5 * m * np.abs(A).max())
    assert np.abs(vt @ vt.T - np.eye(n)).max() <= 1e-5 * n
    np.testing.assert_allclose(norms[:, 0], (ut.astype(np.float64) ** 2).sum(1), rtol=1e-5)


@pytest.mark.parametrize("m,n", [(1, 1), (37, 20), (20, 37), (9, 9)])
def test_svd_vs_scipy_svdvals_and_plan(m, n):
    A = _mat(m, n)
    with use_backend("simulator"):
        plan, (U, S, Vh), runs = assert_plan_matches_run(trnsolver.svd, torch.from_numpy(A))
    assert plan.backend == "simulator" and {r.kernel for r in runs} == {"svd_sweep_kernel"}
    ref = sl.svdvals(A.astype(np.float64))
    big = max(m, n)
    np.testing.assert_allclose(S.numpy(), ref, rtol=0, atol=2e-6 * big * ref[0])
    Un, Vn = U.numpy().astype(np.float64), Vh.numpy().astype(np.float64)
    k = min(m, n)
    assert Un.shape == (m, k) and Vn.shape == (k, n)
    assert np.abs(Un.T @ Un - np.eye(k)).max() <= 1e-5 * big
    assert np.abs(Vn @ Vn.T - np.eye(k)).max() <= 1e-5 * big
    assert np.abs((Un * S.numpy()) @ Vn - A).max() <= 1e-5 * big * np.abs(A).max()


def test_rank_deficient_svd_and_pinv_vs_numpy():
    A = np.random.default_rng(0).integers(-3, 4, (12, 6)).astype(np.float32)
    A[:, 5] = A[:, 0] - A[:, 2]  # exactly rank 5
    with kernel_ran() as runs:
        U, S, Vh = trnsolver.svd(torch.from_numpy(A))
        P = trnsolver.pinv(torch.from_numpy(A))
    assert {r.kernel for r in runs} == {"svd_sweep_kernel", "gemm_kernel"}
    ref = sl.svdvals(A.astype(np.float64))
    np.testing.assert_allclose(S.numpy(), ref, rtol=0, atol=2e-6 * 12 * ref[0])
    assert np.abs(U.numpy().T @ U.numpy() - np.eye(6)).max() <= 1e-5 * 12  # the null vector completed
    Pr = np.linalg.pinv(A.astype(np.float64))
    np.testing.assert_allclose(P.numpy(), Pr, rtol=0, atol=1e-4 * np.abs(Pr).max())


def test_what_the_jacobi_path_does_not_take_says_why():
    with use_backend("simulator"):
        assert "full_matrices" in plan_call(trnsolver.svd, torch.ones(5, 3), full_matrices=True).reason
        assert "> 128" in plan_call(trnsolver.svd, torch.ones(130, 130)).reason
        assert "float64" in plan_call(trnsolver.pinv, torch.ones(3, 3, dtype=torch.float64)).reason
