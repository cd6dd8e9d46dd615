"""trnsolver's NKI paths through the simulator, against SciPy/NumPy and the torch path.

Tolerances: the kernels compute in float32 (Tensor Engine fp32 matmuls,
fp32 PSUM). Jacobi's eigenvalue error is backward-stable: ~ c * n * eps32 *
||A||_2 with eps32 = 1.2e-7; for n <= 40 and ||A||_2 <= ~20 we allow
2e-4 * ||A||_2 (c*n ~ 40 with a 40x margin for the ~10 sweeps). Vectors are
checked by the residual ||A V - V diag(w)|| and orthogonality ||V^T V - I||
(same bound), and within degenerate eigenspaces by comparing projectors.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sl
import torch

import trnsolver
from trnsci.nki import emulator
from trnsci.testing import assert_counts, kernel_ran
from trnsolver._nki import eigen as nki_eigen
from trnsolver._nki import factor as nki_factor
from trnsolver.kernels.eigh_sweep import eigh_sweep_counts, eigh_sweep_kernel, partner_table, schedule

pytestmark = pytest.mark.simulator


def _sym(n, seed=0, dtype=np.float32):
    X = np.random.default_rng(seed).standard_normal((n, n))
    return ((X + X.T) / 2).astype(dtype)


def _check_eig(A, w, V, k=1.0):
    A64 = A.astype(np.float64)
    ref = sl.eigh(A64, eigvals_only=True)
    scale = np.abs(ref).max()
    tol = 2e-4 * scale * k
    np.testing.assert_allclose(w, ref, atol=tol, rtol=0)
    V = V.astype(np.float64)
    assert np.abs(A64 @ V - V * w).max() <= tol
    assert np.abs(V.T @ V - np.eye(V.shape[1])).max() <= 2e-4 * k


def test_schedule_pairs_every_index_once_per_round_and_every_pair_once_per_sweep():
    n = 8
    S = schedule(n).reshape(n, n - 1, n).transpose(1, 0, 2)
    seen = set()
    for r in range(n - 1):
        P = S[r]
        np.testing.assert_array_equal(P, -P.T)                     # S[p,q] = 1, S[q,p] = -1
        np.testing.assert_array_equal(np.abs(P).sum(1), np.ones(n))  # a perfect matching
        seen |= {tuple(sorted(map(int, e))) for e in zip(*np.nonzero(P))}
    assert len(seen) == n * (n - 1) // 2


@pytest.mark.parametrize("n", [8, 20])
def test_sweep_counters_equal_closed_forms(n):
    A = _sym(n)
    eye = np.eye(n, dtype=np.float32)
    _, prof = emulator.profile(eigh_sweep_kernel, A, eye, eye, partner_table(n), target="trn1")
    want = eigh_sweep_counts(n)
    want.pop("kernel")
    assert_counts(prof, want)


@pytest.mark.parametrize("n", [2, 9, 19])
def test_eigh_kernel_vs_scipy_and_torch(n):
    A = _sym(n, seed=n)
    with kernel_ran() as runs:
        w, V = trnsolver.eigh(torch.from_numpy(A))
    assert {r.kernel for r in runs} == {"eigh_sweep_kernel"}
    _check_eig(A, w.numpy(), V.numpy())
    wt = trnsolver.eigh(torch.from_numpy(A))[0]  # torch path (LAPACK)
    np.testing.assert_allclose(w.numpy(), wt.numpy(), atol=2e-4 * np.abs(wt.numpy()).max())


def test_eigh_kernel_repeated_eigenvalues_projectors():
    # eigenvalues {1 x3, 2, 5 x2, -1, 0 x3}: vectors only up to a rotation inside each cluster
    lam = np.array([1, 1, 1, 2, 5, 5, -1, 0, 0, 0, 3], np.float64)
    Q = sl.qr(np.random.default_rng(3).standard_normal((11, 11)))[0]
    A = (Q * lam) @ Q.T
    A = ((A + A.T) / 2).astype(np.float32)
    with kernel_ran():
        w, V = trnsolver.eigh(A)
    _check_eig(A, w, V)
    for value in (0.0, 1.0, 5.0):
        sel = np.abs(w - value) < 1e-3
        ref = np.abs(np.sort(lam) - value) < 1e-3
        assert sel.sum() == ref.sum()
        Qs = Q[:, np.abs(lam - value) < 1e-3]
        np.testing.assert_allclose(V[:, sel] @ V[:, sel].T, Qs @ Qs.T, atol=2e-4)


def test_eigh_kernel_subset_batch_eigvalsh_and_upper_triangle():
    A = np.stack([_sym(7, seed=1), _sym(7, seed=2)])
    Au = np.triu(A) + 100 * np.tril(np.ones((7, 7), np.float32), -1)  # garbage below: uplo="U" must ignore it
    with kernel_ran():
        w, V = trnsolver.eigh(Au, subset_by_index=(2, 4), uplo="U")
        wv = trnsolver.eigvalsh(A)
    for b in range(2):
        ref = sl.eigh(A[b].astype(np.float64), eigvals_only=True)
        np.testing.assert_allclose(w[b], ref[2:5], atol=2e-4 * np.abs(ref).max())
        np.testing.assert_allclose(wv[b], ref, atol=2e-4 * np.abs(ref).max())
        assert np.abs(A[b] @ V[b] - V[b] * w[b]).max() <= 2e-4 * np.abs(ref).max()
    assert V.shape == (2, 7, 3)


def test_eigh_block_jacobi_beyond_one_tile(monkeypatch):
    # BLOCK shrunk so that n = 21 > 2 * BLOCK takes the block path the device uses beyond 128
    monkeypatch.setattr(nki_eigen, "BLOCK", 6)
    A = _sym(21, seed=5)
    with kernel_ran() as runs:
        w, V = trnsolver.eigh(A)
    assert {r.kernel for r in runs} == {"eigh_sweep_kernel", "gemm_kernel"}
    _check_eig(A, w, V, k=2)


def test_eigh_kernel_input_not_modified():
    A = _sym(6)
    A0 = A.copy()
    with kernel_ran():
        trnsolver.eigh(A)
    np.testing.assert_array_equal(A, A0)


def test_cholesky_blocked_on_trnblas_kernels(monkeypatch):
    monkeypatch.setattr(nki_factor, "CHOL_BLOCK", 16)
    n = 37  # ragged: panels of 16, 16, 5
    X = np.random.default_rng(7).standard_normal((n, n))
    A = (X @ X.T + n * np.eye(n)).astype(np.float32)
    with kernel_ran() as runs:
        L = trnsolver.cholesky(A)
        U = trnsolver.cholesky(A, upper=True)
    assert {"trsm_kernel", "syrk_kernel", "gemm_kernel"} <= {r.kernel for r in runs}
    ref = sl.cholesky(A.astype(np.float64), lower=True)
    # fp32 Cholesky: backward error ~ n eps32 ||A||; cond(A) ~ 10 here
    np.testing.assert_allclose(L, ref, atol=1e-4 * np.abs(ref).max())
    np.testing.assert_allclose(U, ref.T, atol=1e-4 * np.abs(ref).max())


def test_cholesky_kernel_path_reports_the_failing_minor(monkeypatch):
    monkeypatch.setattr(nki_factor, "CHOL_BLOCK", 8)
    n = 20
    A = np.eye(n, dtype=np.float32)
    A[12, 12] = -1.0  # leading minor of order 13 is the first that is not PD
    with kernel_ran():
        with pytest.raises(trnsolver.LinAlgError, match="order 13"):
            trnsolver.cholesky(A)
        L, info = trnsolver.cholesky(A, check=False)
    assert int(info) == 13


def test_inv_sqrt_spd_ns_on_the_gemm_kernel():
    n = 24
    X = np.random.default_rng(9).standard_normal((n, n))
    A = (X @ X.T / n + np.eye(n)).astype(np.float32)
    with kernel_ran() as runs:
        Z, iters, res = trnsolver.inv_sqrt_spd_ns(A, tol=1e-5)
    assert {r.kernel for r in runs} == {"gemm_kernel"}
    assert len(runs) == 3 * iters
    ref = sl.fractional_matrix_power(A.astype(np.float64), -0.5).real
    # fp32 GEMMs, cond(A) ~ 5: the NS fixed point is reached to ~1e-5 relative
    np.testing.assert_allclose(Z, ref, atol=5e-5 * np.abs(ref).max())
    assert res <= 1e-5


def test_eigh_kernel_nan_with_check_finite_false_stops_and_warns():
    A = _sym(4)
    A[1, 2] = A[2, 1] = np.nan
    with kernel_ran() as runs, pytest.warns(trnsolver.ConvergenceWarning, match="did not reach tol"):
        w, _ = trnsolver.eigh(A, check_finite=False)
    assert len(runs) == 1 and np.isnan(w).any()


def test_cholesky_kernel_path_reads_the_named_triangle(monkeypatch):
    """issue 19: upper=True reads the upper triangle on the kernel path too (garbage in the other)."""
    monkeypatch.setattr(nki_factor, "CHOL_BLOCK", 8)
    n = 19  # ragged: panels of 8, 8, 3
    X = np.random.default_rng(3).standard_normal((n, n))
    S = X @ X.T + n * np.eye(n)
    G = 50 * np.random.default_rng(4).standard_normal((n, n))
    up = (np.triu(S) + np.tril(G, -1)).astype(np.float32)
    lo = (np.tril(S) + np.triu(G, 1)).astype(np.float32)
    with kernel_ran():
        U = trnsolver.cholesky(up, upper=True)
        L = trnsolver.cholesky(lo)
    ref = sl.cholesky(S, lower=True)
    # fp32 Cholesky, cond(S) ~ 10: backward error ~ n eps32 ||S||
    np.testing.assert_allclose(U, ref.T, atol=1e-4 * np.abs(ref).max())
    np.testing.assert_allclose(L, ref, atol=1e-4 * np.abs(ref).max())
