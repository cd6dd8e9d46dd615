"""Dense factorizations and solves vs scipy.linalg / numpy.linalg.

Tolerances: backward-stable LAPACK-class algorithms give residuals
||A x - b|| <= c n eps ||A|| ||x|| and orthogonality ||Q^H Q - I|| <= c n eps;
we use c = 50 (generous for n <= 40; a wrong algorithm misses by orders of
magnitude). Forward errors are compared to SciPy only where the condition
number is bounded (well-conditioned random matrices, cond ~ 1e2..1e3).
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


def rand(shape, dt, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dt.is_complex:
        r = dt.to_real()
        return torch.complex(torch.randn(shape, generator=g, dtype=r), torch.randn(shape, generator=g, dtype=r))
    return torch.randn(shape, generator=g, dtype=dt)


def spd(n, dt, seed=0, batch=()):
    X = rand(batch + (n, n), dt, seed)
    return X @ X.mH + n * torch.eye(n, dtype=dt)


def rel_res(A, X, B):
    num = torch.linalg.matrix_norm(A @ X - B).max()
    den = torch.linalg.matrix_norm(A).max() * torch.linalg.matrix_norm(X).max() + 1e-300
    return float(num / den)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_vs_scipy(dt, upper):
    A = spd(12, dt)
    F = trnsolver.cholesky(A, upper=upper)
    ref = sl.cholesky(A.numpy(), lower=not upper)
    # cond(A) ~ 10 here, so the factor agrees with LAPACK to ~ n eps
    np.testing.assert_allclose(F.numpy(), ref, atol=50 * 12 * eps(dt) * float(F.abs().max()))
    R = F.mH @ F if upper else F @ F.mH
    assert rel_res(torch.eye(12, dtype=dt), R, A) < 50 * 12 * eps(dt)


def test_cholesky_batch_and_numpy():
    A = spd(5, torch.float64, batch=(3, 2))
    L = trnsolver.cholesky(A)
    assert L.shape == (3, 2, 5, 5)
    np.testing.assert_allclose(L[1, 1].numpy(), sl.cholesky(A[1, 1].numpy(), lower=True), atol=1e-13)
    Ln = trnsolver.cholesky(A.numpy())
    assert isinstance(Ln, np.ndarray)


def test_cholesky_not_pd_names_minor_and_batch():
    A = torch.eye(4, dtype=torch.float64).repeat(2, 1, 1)
    A[1, 2, 2] = -1.0
    with pytest.raises(np.linalg.LinAlgError, match=r"order 3.*batch index \(1,\)") as e:
        trnsolver.cholesky(A)
    assert e.value.info == 3 and e.value.batch_index == (1,)
    L, info = trnsolver.cholesky(A, check=False)
    assert info.tolist() == [0, 3]
    with pytest.raises(ValueError):  # LinAlgError is a ValueError too
        trnsolver.cholesky(A)


def test_cholesky_nan_raises():
    A = torch.eye(3)
    A[0, 1] = float("nan")
    with pytest.raises(ValueError, match="A contains NaN"):
        trnsolver.cholesky(A)


def test_cholesky_ill_conditioned_fp64():
    # cond 1e8: Cholesky is backward stable whatever the condition number
    n = 30
    Q, _ = np.linalg.qr(np.random.default_rng(1).standard_normal((n, n)))
    A = torch.from_numpy((Q * np.logspace(0, -8, n)) @ Q.T)
    L = trnsolver.cholesky(A)
    assert rel_res(torch.eye(n, dtype=A.dtype), L @ L.T, A) < 50 * n * 2.2e-16


@pytest.mark.parametrize("dt", DTYPES)
def test_cho_factor_solve_vs_scipy(dt):
    A, b = spd(9, dt, 2), rand((9, 3), dt, 3)
    for lower in (False, True):
        x = trnsolver.cho_solve(trnsolver.cho_factor(A, lower=lower), b)
        ref = sl.cho_solve(sl.cho_factor(A.numpy(), lower=lower), b.numpy())
        np.testing.assert_allclose(x.numpy(), ref, rtol=0, atol=1e3 * eps(dt) * np.abs(ref).max())
    xv = trnsolver.cho_solve(trnsolver.cho_factor(A), b[:, 0])
    assert xv.shape == (9,)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", [(7, 7), (7, 4), (4, 7)])
def test_lu_convention_vs_scipy(dt, shape):
    A = rand(shape, dt, 4)
    P, L, U = trnsolver.lu(A)
    Ps, Ls, Us = sl.lu(A.numpy())
    # A = P @ L @ U, SciPy's convention: partial pivoting chooses the same rows
    np.testing.assert_allclose(P.numpy(), Ps, atol=0)
    np.testing.assert_allclose((P @ L @ U).numpy(), A.numpy(), atol=50 * max(shape) * eps(dt) * float(A.abs().max()))
    assert torch.equal(L.diagonal(dim1=-2, dim2=-1), torch.ones(min(shape), dtype=dt))
    np.testing.assert_allclose(U.numpy(), Us, atol=1e3 * eps(dt) * float(A.abs().max()))


def test_lu_factors_singular_and_rank_deficient_matrices_like_scipy_and_solves_raise():
    """issue 19: the factorization exists for every matrix (getrf reports the zero pivot in info)."""
    for A in (np.array([[1.0, 2.0], [2.0, 4.0]]), np.outer(np.ones(3), np.arange(1.0, 9.0)),
              np.zeros((3, 3)), np.outer(np.arange(1.0, 5.0), np.ones(4))):
        P, L, U = trnsolver.lu(A)
        Ps, Ls, Us = sl.lu(A)
        # exact data, same pivots: the factors match SciPy's to rounding
        np.testing.assert_allclose(P, Ps, atol=0)
        np.testing.assert_allclose(L, Ls, atol=1e-15)
        np.testing.assert_allclose(U, Us, atol=1e-14)
        np.testing.assert_allclose(P @ L @ U, A, atol=1e-14)
    A = torch.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=torch.float64)
    P, L, U, info = trnsolver.lu(A, check=False)
    assert int(info) == 2
    lu_, piv = trnsolver.lu_factor(A)
    lus, pivs = sl.lu_factor(A.numpy(), check_finite=False)
    np.testing.assert_allclose(lu_.numpy(), lus)
    assert piv.tolist() == pivs.tolist()
    assert int(trnsolver.lu_factor(A, check=False)[2]) == 2
    with pytest.raises(np.linalg.LinAlgError, match=r"lu_solve: .*U\[1, 1\] is exactly zero"):
        trnsolver.lu_solve((lu_, piv), torch.ones(2, dtype=torch.float64))
    with pytest.raises(np.linalg.LinAlgError, match=r"U\[1, 1\] is exactly zero"):
        trnsolver.inv(A)
    with pytest.raises(np.linalg.LinAlgError, match=r"batch index \(1,\)"):  # the singular one of a batch
        trnsolver.lu_solve(trnsolver.lu_factor(torch.stack([torch.eye(2, dtype=torch.float64), A])),
                           torch.ones(2, 2, dtype=torch.float64))


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("trans", [0, 1, 2])
def test_lu_factor_solve_vs_scipy(dt, trans):
    A, b = rand((8, 8), dt, 5) + 4 * torch.eye(8, dtype=dt), rand((8, 2), dt, 6)
    lu_, piv = trnsolver.lu_factor(A)
    lus, pivs = sl.lu_factor(A.numpy())
    np.testing.assert_array_equal(piv.numpy(), pivs)
    x = trnsolver.lu_solve((lu_, piv), b, trans=trans)
    ref = sl.lu_solve((lus, pivs), b.numpy(), trans=trans)
    np.testing.assert_allclose(x.numpy(), ref, rtol=0, atol=1e3 * eps(dt) * np.abs(ref).max())


@pytest.mark.parametrize("trans", [0, 1, 2])
@pytest.mark.parametrize("bshape", [(0,), (0, 3)])
def test_lu_solve_of_an_empty_system_is_scipys_empty_answer(trans, bshape):
    """Issue 32: a 0x0 A factors and solves; SciPy returns an empty array of b's shape (numpy in, numpy out)."""
    A, b = np.zeros((0, 0)), np.zeros(bshape)
    ref = sl.lu_solve(sl.lu_factor(A), b, trans=trans)
    x = trnsolver.lu_solve(trnsolver.lu_factor(A), b, trans=trans)
    assert isinstance(x, np.ndarray) and x.shape == ref.shape == bshape
    xt = trnsolver.lu_solve(trnsolver.lu_factor(torch.zeros(0, 0)), torch.zeros(bshape), trans=trans)
    assert xt.shape == bshape and xt.dtype == torch.float32
    lu_, piv, info = trnsolver.lu_factor(torch.zeros(2, 0, 0), check=False)  # a batch of empty systems
    assert trnsolver.lu_solve((lu_, piv), torch.zeros(2, 0)).shape == (2, 0)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", [(9, 5), (5, 9), (6, 6)])
def test_qr_vs_scipy(dt, shape):
    A = rand(shape, dt, 7)
    Q, R = trnsolver.qr(A)
    k = min(shape)
    assert Q.shape == (shape[0], k) and R.shape == (k, shape[1])
    assert float((Q.mH @ Q - torch.eye(k, dtype=dt)).abs().max()) < 50 * max(shape) * eps(dt)
    assert rel_res(Q, R, A) < 50 * max(shape) * eps(dt)
    Rs = sl.qr(A.numpy(), mode="economic")[1]
    # R is unique up to the signs (phases) of its rows
    np.testing.assert_allclose(np.abs(R.numpy()), np.abs(Rs), atol=1e3 * eps(dt) * float(A.abs().max()))
    Qc, Rc = trnsolver.qr(A, mode="complete")
    assert Qc.shape == (shape[0], shape[0])


@pytest.mark.parametrize("dt", DTYPES)
def test_svd_vs_scipy_incl_rank_deficient(dt):
    A = rand((10, 4), dt, 8) @ rand((4, 7), dt, 9)  # rank 4
    U, S, Vh = trnsolver.svd(A)
    assert U.shape == (10, 7) and S.shape == (7,) and Vh.shape == (7, 7)
    Ss = sl.svd(A.numpy(), compute_uv=False)
    np.testing.assert_allclose(S.numpy(), Ss, atol=100 * eps(dt) * Ss[0])
    assert float(S[4:].max()) < 100 * eps(dt) * float(S[0])
    assert rel_res(U * S.to(dt), Vh, A) < 50 * 10 * eps(dt)
    Uf, _, _ = trnsolver.svd(A, full_matrices=True)
    assert Uf.shape == (10, 10)


@pytest.mark.parametrize("dt", [torch.float64, torch.complex128])
def test_pinv_vs_scipy(dt):
    A = rand((6, 3), dt, 10) @ rand((3, 5), dt, 11)
    np.testing.assert_allclose(trnsolver.pinv(A).numpy(), sl.pinv(A.numpy()), atol=1e-10)


@pytest.mark.parametrize("dt", DTYPES)
def test_solve_vs_scipy_batched(dt):
    A = rand((3, 6, 6), dt, 12) + 3 * torch.eye(6, dtype=dt)
    B = rand((3, 6, 2), dt, 13)
    X = trnsolver.solve(A, B)
    for i in range(3):
        ref = sl.solve(A[i].numpy(), B[i].numpy())
        np.testing.assert_allclose(X[i].numpy(), ref, rtol=0, atol=1e3 * eps(dt) * np.abs(ref).max())
    assert trnsolver.solve(A, B[..., 0]).shape == (3, 6)


def test_solve_ill_conditioned_fp64_backward_error():
    n = 30
    rng = np.random.default_rng(2)
    U, _ = np.linalg.qr(rng.standard_normal((n, n)))
    V, _ = np.linalg.qr(rng.standard_normal((n, n)))
    A = torch.from_numpy((U * np.logspace(0, -8, n)) @ V.T)   # cond 1e8
    b = torch.from_numpy(rng.standard_normal(n))
    x = trnsolver.solve(A, b)
    # backward error stays ~ n eps; the forward error may be cond * eps ~ 1e-8
    assert rel_res(A, x[:, None], b[:, None]) < 50 * n * 2.2e-16
    np.testing.assert_allclose(x.numpy(), sl.solve(A.numpy(), b.numpy()), rtol=1e-5)


def test_solve_singular_raises():
    with pytest.raises(np.linalg.LinAlgError, match="singular"):
        trnsolver.solve(torch.zeros(3, 3), torch.ones(3))


@pytest.mark.parametrize("refine", [False, True])
def test_solve_spd(refine):
    A, b = spd(10, torch.float32, 14), rand((10,), torch.float32, 15)
    x = trnsolver.solve_spd(A, b, iterative_refinement=refine)
    ref = np.linalg.solve(A.double().numpy(), b.double().numpy())
    np.testing.assert_allclose(x.numpy(), ref, rtol=1e-4, atol=1e-5)
    with pytest.raises(np.linalg.LinAlgError, match="order 1"):
        trnsolver.solve_spd(-A, b)


def test_solve_spd_refinement_improves_fp32():
    n = 40
    Q, _ = np.linalg.qr(np.random.default_rng(3).standard_normal((n, n)))
    A64 = (Q * np.logspace(0, -4, n)) @ Q.T    # cond 1e4: fp32 solve loses ~4 digits
    A = torch.from_numpy(A64).float()
    b = torch.ones(n)
    ref = np.linalg.solve(A.double().numpy(), b.double().numpy())
    e0 = np.abs(trnsolver.solve_spd(A, b).double().numpy() - ref).max()
    e1 = np.abs(trnsolver.solve_spd(A, b, iterative_refinement=True).double().numpy() - ref).max()
    assert e1 < e0


@pytest.mark.parametrize("dt", [torch.float64, torch.complex128])
def test_lstsq_vs_scipy(dt):
    A, b = rand((12, 5), dt, 16), rand((12, 2), dt, 17)
    x, res, rank, s = trnsolver.lstsq(A, b)
    xs, ress, ranks, ss = sl.lstsq(A.numpy(), b.numpy())
    np.testing.assert_allclose(x.numpy(), xs, atol=1e-12)
    np.testing.assert_allclose(res.numpy(), ress, rtol=1e-10)
    assert int(rank) == ranks
    np.testing.assert_allclose(s.numpy(), ss, rtol=1e-12)


def test_lstsq_rank_deficient_minimum_norm():
    A = rand((8, 3), torch.float64, 18) @ rand((3, 6), torch.float64, 19)   # rank 3
    b = rand((8,), torch.float64, 20)
    x, res, rank, s = trnsolver.lstsq(A, b)
    xs, _, ranks, _ = sl.lstsq(A.numpy(), b.numpy())
    np.testing.assert_allclose(x.numpy(), xs, atol=1e-10)
    assert int(rank) == ranks == 3 and res.numel() == 0


@pytest.mark.parametrize("dt", DTYPES)
def test_inv_det_slogdet_vs_numpy(dt):
    A = rand((2, 5, 5), dt, 21) + 2 * torch.eye(5, dtype=dt)
    np.testing.assert_allclose(trnsolver.inv(A).numpy(), np.linalg.inv(A.numpy()),
                               rtol=1e3 * eps(dt), atol=1e3 * eps(dt))
    np.testing.assert_allclose(trnsolver.det(A).numpy(), np.linalg.det(A.numpy()), rtol=1e3 * eps(dt))
    s, l = trnsolver.slogdet(A)
    sn, ln = np.linalg.slogdet(A.numpy())
    np.testing.assert_allclose(s.numpy(), sn, rtol=1e3 * eps(dt))
    np.testing.assert_allclose(l.numpy(), ln, rtol=1e3 * eps(dt))
    S = spd(5, dt, 22)
    np.testing.assert_allclose(trnsolver.inv_spd(S).numpy(), np.linalg.inv(S.numpy()), atol=1e2 * eps(dt))
    assert float(trnsolver.det(torch.zeros(3, 3))) == 0.0


@pytest.mark.parametrize("dt", DTYPES)
def test_inv_sqrt_spd_vs_scipy(dt):
    A = spd(8, dt, 23)
    X = trnsolver.inv_sqrt_spd(A)
    ref = np.linalg.inv(sl.sqrtm(A.numpy()))
    np.testing.assert_allclose(X.numpy(), ref, atol=1e3 * eps(dt) * np.abs(ref).max())


def test_inv_sqrt_spd_not_pd_raises_unless_min_eig():
    A = torch.diag(torch.tensor([4.0, -1.0], dtype=torch.float64))
    with pytest.raises(np.linalg.LinAlgError, match="min_eig"):
        trnsolver.inv_sqrt_spd(A)
    X = trnsolver.inv_sqrt_spd(A, min_eig=0.25)
    np.testing.assert_allclose(X.diagonal().numpy(), [0.5, 2.0])


@pytest.mark.parametrize("dt", [torch.float32, torch.float64])
def test_inv_sqrt_spd_ns_vs_scipy(dt):
    A = spd(16, dt, 24)
    tol = 10 * eps(dt) ** 0.5 if dt == torch.float32 else 1e-12
    X, iters, res = trnsolver.inv_sqrt_spd_ns(A, max_iters=60, tol=float(tol))
    ref = np.linalg.inv(sl.sqrtm(A.double().numpy()))
    assert res <= tol and 0 < iters <= 60
    np.testing.assert_allclose(X.double().numpy(), ref, atol=20 * float(tol) * np.abs(ref).max())
    with pytest.warns(trnsolver.ConvergenceWarning):
        trnsolver.inv_sqrt_spd_ns(A, max_iters=2)
    with pytest.raises(trnsolver.ConvergenceError):
        trnsolver.inv_sqrt_spd_ns(A, max_iters=2, on_fail="raise")


@pytest.mark.parametrize("f", [trnsolver.cholesky, trnsolver.inv, trnsolver.inv_spd, trnsolver.det,
                               trnsolver.inv_sqrt_spd, lambda A: trnsolver.lu(A)[2], lambda A: trnsolver.qr(A)[1],
                               lambda A: trnsolver.svd(A)[1], trnsolver.pinv])
def test_one_by_one_and_empty(f):
    one = torch.tensor([[4.0]], dtype=torch.float64)
    r = f(one)
    assert r.numel() == 1
    empty = torch.zeros(0, 0, dtype=torch.float64)
    assert f(empty).numel() in (0, 1)   # det of an empty matrix is 1


def test_inputs_not_modified():
    A = spd(6, torch.float64, 25)
    B = rand((6, 2), torch.float64, 26)
    A0, B0 = A.clone(), B.clone()
    for f in (lambda: trnsolver.solve(A, B), lambda: trnsolver.solve_spd(A, B, True), lambda: trnsolver.cholesky(A),
              lambda: trnsolver.lu(A), lambda: trnsolver.lstsq(A, B), lambda: trnsolver.inv_sqrt_spd_ns(A)):
        f()
    assert torch.equal(A, A0) and torch.equal(B, B0)


# ---- issue 19: one triangle convention, the same on every path (reference: SciPy on the
# symmetric matrix; the triangle that must not be read holds garbage ~50x the matrix's entries)

def _garbage_triangles(n=6, seed=0):
    rng = np.random.default_rng(seed)
    M = rng.standard_normal((n, n))
    S = M @ M.T + n * np.eye(n)
    G = 50 * rng.standard_normal((n, n))
    return S, np.tril(S) + np.triu(G, 1), np.triu(S) + np.tril(G, -1)


@pytest.mark.parametrize("batch", [False, True])
def test_only_the_named_triangle_is_read(batch):
    S, lo, up = _garbage_triangles()
    f = (lambda X: np.stack([X, X])) if batch else (lambda X: X)
    g = (lambda r: np.asarray(r)[-1]) if batch else np.asarray
    L = sl.cholesky(S, lower=True)
    tol = dict(rtol=0, atol=1e-12 * np.abs(S).max())  # float64, cond(S) ~ 10: ~n eps ||S||
    np.testing.assert_allclose(g(trnsolver.cholesky(f(lo))), L, **tol)
    np.testing.assert_allclose(g(trnsolver.cholesky(f(up), upper=True)), L.T, **tol)
    np.testing.assert_allclose(g(trnsolver.cho_factor(f(lo), lower=True)[0]), L, **tol)
    np.testing.assert_allclose(g(trnsolver.cho_factor(f(up))[0]), L.T, **tol)
    b = np.arange(1.0, 7.0)
    bb = np.stack([b, b]) if batch else b
    x = np.linalg.solve(S, b)
    for refine in (False, True):  # the refinement residual must use the lower triangle too
        np.testing.assert_allclose(g(trnsolver.solve_spd(f(lo), bb, iterative_refinement=refine)), x, rtol=1e-12)
    np.testing.assert_allclose(g(trnsolver.inv_spd(f(lo))), np.linalg.inv(S), rtol=0, atol=1e-13)
    w, V = np.linalg.eigh(S)
    R = (V / np.sqrt(w)) @ V.T
    np.testing.assert_allclose(g(trnsolver.inv_sqrt_spd(f(lo))), R, rtol=0, atol=1e-13)
    np.testing.assert_allclose(g(trnsolver.inv_sqrt_spd_ns(f(lo), tol=1e-13)[0]), R, rtol=0, atol=1e-12)
    for uplo, src in (("L", lo), ("U", up)):
        np.testing.assert_allclose(g(trnsolver.eigvalsh(f(src), uplo=uplo)), w, rtol=1e-13)


def test_lstsq_residues_of_an_empty_system_match_scipy():
    """issue 19: n = 0 < m is full (zero) rank: x = 0 and the residue is all of ||b||^2."""
    for A, b in ((np.zeros((5, 0)), np.ones(5)), (np.zeros((5, 0)), np.arange(10.0).reshape(5, 2)),
                 (np.zeros((0, 3)), np.ones(0))):
        x, res, rank, s = trnsolver.lstsq(A, b)
        xs, ress, ranks, ss = sl.lstsq(A, b)
        np.testing.assert_array_equal(x, xs)
        np.testing.assert_allclose(res, ress, rtol=1e-15)
        assert np.shape(res) == np.shape(ress) and int(rank) == ranks
