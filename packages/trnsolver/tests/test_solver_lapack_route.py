"""The torch path's two routes -- SciPy's LAPACK wrappers (plain 2-D CPU float
tensors without autograd, ``trnsolver._host``) and ``torch.linalg`` (batches,
autograd, ...) -- both checked against scipy.linalg, with the same errors.

Tolerances: ``trnsci.testing.tolerance(dtype, k)`` with ``k ~ n`` for
backward-stable factorizations of well-conditioned (SPD with eigenvalues
>= 1, or Gaussian) matrices of order n <= 130.
"""

import numpy as np
import pytest
import scipy.linalg as sl
import torch

import trnsolver
from trnsci import routes
from trnsci.testing import assert_close, choice_at_cost, random
from trnsolver import _host


def _spd(n, dtype):
    X = torch.as_tensor(random((n, n), dtype, seed=n))
    return X @ X.T / n + torch.eye(n, dtype=dtype)


@pytest.fixture(params=["lapack", "torch"])
def route(request):
    # each family's measured choice (trnsolver._host.use) forced to one candidate
    with routes.force(request.param):
        yield request.param


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_routes_agree_with_scipy(route, dtype):
    n = 130  # > 128: the svd route's cut-off; ragged
    S = _spd(n, dtype)
    A = torch.as_tensor(random((n, n), dtype, seed=1))
    b = torch.as_tensor(random((n,), dtype, seed=2))
    Sn, An, bn = S.numpy(), A.numpy(), b.numpy()
    k = 4 * n
    L = trnsolver.cholesky(S)
    assert_close(L, sl.cholesky(Sn, lower=True), dtype=dtype, k=k)
    U = trnsolver.cholesky(S, upper=True)
    assert_close(U, sl.cholesky(Sn, lower=False), dtype=dtype, k=k)
    assert_close(trnsolver.cho_solve(trnsolver.cho_factor(S, lower=True), b),
                 sl.cho_solve(sl.cho_factor(Sn, lower=True), bn), dtype=dtype, k=k)
    assert_close(trnsolver.solve(S, b), sl.solve(Sn, bn), dtype=dtype, k=k)
    w, V = trnsolver.eigh(S)
    assert_close(w, sl.eigvalsh(Sn), dtype=dtype, k=k)
    assert_close(V @ torch.diag(w) @ V.T, Sn, dtype=dtype, k=k)
    assert_close(trnsolver.eigh(S, subset_by_index=(3, 5))[0], sl.eigvalsh(Sn)[3:6], dtype=dtype, k=k)
    assert_close(trnsolver.eigvalsh(S), sl.eigvalsh(Sn), dtype=dtype, k=k)
    Uu, s, Vh = trnsolver.svd(A)
    assert_close(s, sl.svdvals(An), dtype=dtype, k=k)
    assert_close((Uu * s) @ Vh, An, dtype=dtype, k=k)
    Uf, _, _ = trnsolver.svd(A[:, :120], full_matrices=True)
    assert Uf.shape == (n, n)
    assert_close(Uf.T @ Uf, np.eye(n), dtype=dtype, k=k)


def test_routes_raise_the_same(route):
    S = _spd(6, torch.float64)
    S[3, 3] = -1.0
    with pytest.raises(np.linalg.LinAlgError, match="leading minor of order 4"):
        trnsolver.cholesky(S)
    L, info = trnsolver.cholesky(S, check=False)
    assert int(info) == 4
    ok, info0 = trnsolver.cholesky(_spd(6, torch.float64), check=False)
    assert int(info0) == 0
    info0 += 1  # the caller's info is its own: the next call still reports 0
    assert int(trnsolver.cholesky(_spd(6, torch.float64), check=False)[1]) == 0
    A = torch.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=torch.float64)
    with pytest.raises(np.linalg.LinAlgError, match=r"U\[1, 1\] is exactly zero"):
        trnsolver.solve(A, torch.ones(2, dtype=torch.float64))


def test_inputs_not_modified_and_grad_keeps_torch():
    S = _spd(9, torch.float64)
    keep = S.clone()
    trnsolver.cholesky(S), trnsolver.eigh(S), trnsolver.solve(S, keep[:, 0]), trnsolver.svd(S)
    assert torch.equal(S, keep)
    Sg = S.clone().requires_grad_(True)
    assert not _host.eligible(Sg)
    trnsolver.eigh(Sg)[0].sum().backward()  # autograd through torch.linalg.eigh: d(trace)/dA = I
    assert_close(Sg.grad, torch.eye(9, dtype=torch.float64), dtype=torch.float64, k=9)


@pytest.mark.parametrize("shape", [(520, 512), (512, 530)])
def test_qr_routes(route, shape):
    # float64, min(m, n) >= 512: the LAPACK route's range; Q R = A and
    # Q^T Q = I to ~n eps (Householder QR is backward stable)
    A = torch.as_tensor(random(shape, torch.float64, seed=3))
    Q, R = trnsolver.qr(A)
    k = min(shape)
    assert Q.shape == (shape[0], k) and R.shape == (k, shape[1])
    assert torch.equal(R, R.triu())
    assert_close(Q @ R, A, dtype=torch.float64, k=4 * k)
    assert_close(Q.T @ Q, np.eye(k), dtype=torch.float64, k=4 * k)
    assert_close(R.abs(), np.abs(sl.qr(A.numpy(), mode="economic")[1]), dtype=torch.float64, k=40 * k)


def test_nan_without_check_finite_same_on_both_routes(route):
    # check_finite=False lets NaN reach LAPACK: torch's potrf (MKL) names the
    # minor where the NaN pivot appears; the SciPy route must say the same
    S = _spd(6, torch.float64)
    S[2, 1] = S[1, 2] = float("nan")
    with pytest.raises(np.linalg.LinAlgError, match="leading minor of order 3"):
        trnsolver.cholesky(S, check_finite=False)
    with pytest.raises(ValueError, match="NaN"):
        trnsolver.cholesky(S)


@pytest.mark.parametrize("faster", ["lapack", "torch"])
def test_measured_choice_follows_the_times(monkeypatch, faster):
    """cholesky's SciPy-or-torch choice is trnsci.routes' measurement (#23): a fake clock makes one
    candidate 3x faster (deterministic: no real timing compared), and the call then runs that one;
    the class is (dtype, n to the next power of two), the choice robust beside torch's threads."""
    seen = {}

    def fake_choose(family, cls, cands, *, default, robust, **kw):
        seen.update(family=family, cls=cls, robust=robust)
        return choice_at_cost(family, cls, cands, default, {faster: 1, ({"lapack", "torch"} - {faster}).pop(): 3})

    calls = []
    real = _host.potrf
    monkeypatch.setattr(_host.routes, "choose", fake_choose)
    monkeypatch.setattr(_host, "potrf", lambda *a: calls.append(1) or real(*a))
    _host.clear()
    S = _spd(45, torch.float64)
    L = trnsolver.cholesky(S)
    assert (seen["family"], seen["cls"]) == ("trnsolver.potrf", ("float64", 64))
    assert seen["robust"] == (torch.get_num_threads() > 1)
    assert len(calls) >= 4  # timed: the warm-up and three rounds of the lapack candidate
    before = len(calls)
    trnsolver.cholesky(S)  # decided: no new timing, only the chosen route runs
    assert len(calls) - before == (1 if faster == "lapack" else 0)
    assert_close(L, sl.cholesky(S.numpy(), lower=True), dtype=torch.float64, k=4 * 45)
    _host.clear()


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64, torch.float16])
def test_check_finite_at_any_thread_count(threads, dtype):
    """check_finite's scan (torch's sum at one thread, NumPy's isfinite in the calling thread beside
    torch's other threads) refuses what np.isfinite refuses, in views too."""
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        from trnsci import linalg as la
        for bad in (float("nan"), float("inf"), -float("inf")):
            X = torch.ones(200, 300, dtype=dtype)
            X[17, 250] = bad
            assert not np.isfinite(X.to(torch.complex128).numpy()).all()
            for view in (X, X.T, X[1::2]) + ((X.conj(),) if dtype.is_complex else ()):
                with pytest.raises(ValueError, match="A contains NaN or Inf"):
                    la.finite("cholesky", A=view)
        la.finite("cholesky", A=torch.ones(200, 300, dtype=dtype).T)
        S = _spd(40, torch.float64)
        S[3, 30] = float("nan")  # the triangle potrf does not read: SciPy's check_finite refuses it too
        with pytest.raises(ValueError, match="NaN"):
            trnsolver.cholesky(S)
    finally:
        torch.set_num_threads(old)
