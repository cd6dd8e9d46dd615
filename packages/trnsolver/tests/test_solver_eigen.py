"""eigh / eigvalsh / eigh_generalized vs scipy.linalg.eigh.

Bounds (backward-stable Hermitian eigensolvers): |w - w_ref| <= c n eps ||A||,
||A V - V diag(w)|| <= c n eps ||A||, ||V^H V - I|| <= c n eps, c = 50.
Eigenvectors are compared through these residuals, not entrywise: they are
unique only up to sign/phase and rotation inside repeated eigenvalues.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sl
import torch

import trnsolver

DTYPES = [torch.float32, torch.float64, torch.complex64, torch.complex128]


def eps(dt):
    return torch.finfo(dt.to_real() if dt.is_complex else dt).eps


def herm(n, dt, seed=0, batch=()):
    g = torch.Generator().manual_seed(seed)
    r = dt.to_real() if dt.is_complex else dt
    X = torch.randn(batch + (n, n), generator=g, dtype=r)
    if dt.is_complex:
        X = torch.complex(X, torch.randn(batch + (n, n), generator=g, dtype=r))
    return X + X.mH


def check_pairs(A, w, V, dt):
    n = A.shape[-1]
    nA = float(torch.linalg.matrix_norm(A, 2).max()) if n else 1.0
    bound = 50 * max(n, 1) * eps(dt) * max(nA, 1e-30)
    assert float((A @ V - V * w.unsqueeze(-2).to(dt)).abs().max()) <= bound
    k = V.shape[-1]
    assert float((V.mH @ V - torch.eye(k, dtype=dt)).abs().max()) <= 50 * max(n, 1) * eps(dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_eigh_vs_scipy(dt):
    A = herm(20, dt)
    w, V = trnsolver.eigh(A)
    ws = sl.eigh(A.numpy(), eigvals_only=True)
    np.testing.assert_allclose(w.numpy(), ws, atol=50 * 20 * eps(dt) * np.abs(ws).max())
    check_pairs(A, w, V, dt)
    np.testing.assert_allclose(trnsolver.eigvalsh(A).numpy(), ws, atol=50 * 20 * eps(dt) * np.abs(ws).max())


def test_eigh_reads_only_one_triangle():
    A = herm(6, torch.float64)
    Al = A.tril() + (A + 100.0).triu(1)
    w, _ = trnsolver.eigh(Al)   # uplo="L" by default: the strict upper part is garbage
    np.testing.assert_allclose(w.numpy(), sl.eigh(A.numpy(), eigvals_only=True), atol=1e-12)
    wu = trnsolver.eigvalsh(A.triu(), uplo="U")
    np.testing.assert_allclose(wu.numpy(), sl.eigh(A.numpy(), eigvals_only=True), atol=1e-12)


@pytest.mark.parametrize("dt", [torch.float32, torch.complex128])
def test_eigh_batched(dt):
    A = herm(5, dt, 1, batch=(2, 3))
    w, V = trnsolver.eigh(A)
    assert w.shape == (2, 3, 5) and V.shape == (2, 3, 5, 5)
    np.testing.assert_allclose(w[1, 2].numpy(), sl.eigh(A[1, 2].numpy(), eigvals_only=True),
                               atol=50 * 5 * eps(dt) * 10)
    check_pairs(A, w, V, dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_eigh_subset_by_index(dt):
    A = herm(15, dt, 2)
    w, V = trnsolver.eigh(A, subset_by_index=(3, 7))
    ws, Vs = sl.eigh(A.numpy(), subset_by_index=(3, 7))
    assert V.shape == (15, 5)
    np.testing.assert_allclose(w.numpy(), ws, atol=50 * 15 * eps(dt) * np.abs(ws).max())
    check_pairs(A, w, V, dt)
    # same invariant subspace as SciPy's (spectrum here is well separated)
    P, Ps = V @ V.mH, torch.from_numpy(Vs @ Vs.conj().T)
    assert float((P - Ps).abs().max()) < 1e3 * eps(dt)


def test_eigh_repeated_and_clustered():
    n = 12
    Q, _ = np.linalg.qr(np.random.default_rng(4).standard_normal((n, n)))
    lam = np.array([1.0] * 4 + [2.0, 2.0 + 1e-12, 2.0 + 2e-12] + [5.0] * 5)
    A = torch.from_numpy((Q * lam) @ Q.T)
    w, V = trnsolver.eigh(A)
    np.testing.assert_allclose(w.numpy(), sl.eigh(A.numpy(), eigvals_only=True), atol=1e-13)
    check_pairs(A, w, V, torch.float64)
    # the projector on a repeated eigenvalue is unique even though V is not
    P = V[:, :4] @ V[:, :4].T
    np.testing.assert_allclose(P.numpy(), Q[:, :4] @ Q[:, :4].T, atol=1e-12)


def test_eigh_ill_conditioned_fp64():
    n = 25
    Q, _ = np.linalg.qr(np.random.default_rng(5).standard_normal((n, n)))
    A = torch.from_numpy((Q * np.logspace(0, -8, n)) @ Q.T)
    w, V = trnsolver.eigh(A)
    np.testing.assert_allclose(w.numpy(), sl.eigh(A.numpy(), eigvals_only=True), atol=50 * n * 2.2e-16)
    check_pairs(A, w, V, torch.float64)


def test_eigh_1x1_and_empty():
    w, V = trnsolver.eigh(torch.tensor([[3.0]]))
    assert w.tolist() == [3.0] and V.tolist() == [[1.0]]
    w, V = trnsolver.eigh(torch.zeros(0, 0))
    assert w.shape == (0,) and V.shape == (0, 0)
    w, V = trnsolver.eigh(np.eye(2))
    assert isinstance(w, np.ndarray)


@pytest.mark.parametrize("dt", DTYPES)
def test_eigh_generalized_vs_scipy(dt):
    A = herm(10, dt, 6)
    Bh = herm(10, dt, 7)
    B = Bh @ Bh.mH + 10 * torch.eye(10, dtype=dt)
    w, X = trnsolver.eigh_generalized(A, B)
    ws = sl.eigh(A.numpy(), B.numpy(), eigvals_only=True)
    np.testing.assert_allclose(w.numpy(), ws, atol=1e3 * eps(dt) * np.abs(ws).max())
    k = 1e3 * eps(dt) * float(B.abs().max())
    assert float((X.mH @ B @ X - torch.eye(10, dtype=dt)).abs().max()) < k   # SciPy's normalisation
    R = A @ X - B @ X * w.to(dt)
    assert float(R.abs().max()) < 1e3 * eps(dt) * float(A.abs().max() + B.abs().max()) * float(X.abs().max())
    ws2 = sl.eigh(A.numpy(), B.numpy(), eigvals_only=True, subset_by_index=(2, 4))
    w2, X2 = trnsolver.eigh_generalized(A, B, subset_by_index=(2, 4))
    np.testing.assert_allclose(w2.numpy(), ws2, atol=1e3 * eps(dt) * np.abs(ws).max())
    assert X2.shape == (10, 3)


def test_eigh_generalized_B_not_pd():
    A = torch.eye(3, dtype=torch.float64)
    B = torch.diag(torch.tensor([1.0, -1.0, 1.0], dtype=torch.float64))
    with pytest.raises(np.linalg.LinAlgError, match="B is not positive definite.*order 2"):
        trnsolver.eigh_generalized(A, B)


@pytest.mark.parametrize("bad,exc", [((5, 1), ValueError), ((0, 9), ValueError), ((1,), TypeError),
                                     ((1.0, 2), TypeError)])
def test_subset_errors(bad, exc):
    with pytest.raises(exc, match="subset_by_index"):
        trnsolver.eigh(torch.eye(4), subset_by_index=bad)
