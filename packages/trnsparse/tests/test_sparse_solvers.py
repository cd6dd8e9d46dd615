"""Preconditioners (ILU(0), IC(0), Jacobi) and the BSR iterative solvers vs SciPy / NumPy."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as spla
import torch

import trnsparse


def _tridiag(n, dtype=np.float64, seed=0):
    """SPD, diagonally dominant tridiagonal: ILU(0)/IC(0) have no fill-in, so they are exact."""
    rng = np.random.default_rng(seed)
    off = -rng.random(n - 1) - 0.5
    if np.dtype(dtype).kind == "c":
        off = off + 0.3j * rng.random(n - 1)
    diag = 2.5 + rng.random(n)
    return (np.diag(diag) + np.diag(off, -1) + np.diag(np.conj(off), 1)).astype(dtype)


def _poisson2d(k):
    T = sp.diags_array([-1.0, 4.0, -1.0], offsets=[-1, 0, 1], shape=(k, k))
    S = (sp.kron(sp.eye(k), T) + sp.kron(sp.diags_array([-1.0, -1.0], offsets=[-1, 1], shape=(k, k)), sp.eye(k)))
    S = sp.csr_array(S)
    S.eliminate_zeros()  # kron stores explicit zeros; ILU(0)/IC(0) work on the stored pattern
    return S


@pytest.mark.parametrize("n,fill_factor", [(10, 1), (40, 10)])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_ilu0_equals_scipy_spilu_where_they_coincide(dtype, n, fill_factor):
    D = _tridiag(n, dtype)
    S = sp.csc_array(D)
    ref = spla.spilu(S, fill_factor=fill_factor, drop_tol=0, permc_spec="NATURAL", diag_pivot_thresh=0.0)
    assert (ref.perm_r == np.arange(n)).all() and (ref.perm_c == np.arange(n)).all()
    # SuperLU's fill_factor budget drops entries on longer tridiagonals (n >= 12 with fill_factor=1);
    # we compare where its factors are the exact, unpivoted ILU(0) == LU of a tridiagonal matrix:
    np.testing.assert_allclose(ref.L.toarray() @ ref.U.toarray(), D, atol=1e-13)
    M = trnsparse.ilu0(trnsparse.from_dense(torch.from_numpy(D)))
    L = M.L.to_dense().numpy() + np.eye(n)
    U = M.U.to_dense().numpy()
    np.testing.assert_array_equal(L != 0, ref.L.toarray() != 0)
    np.testing.assert_array_equal(U != 0, ref.U.toarray() != 0)
    np.testing.assert_allclose(L, ref.L.toarray(), atol=1e-13)
    np.testing.assert_allclose(U, ref.U.toarray(), atol=1e-13)
    r = np.random.default_rng(1).standard_normal((n, 2)).astype(dtype)
    np.testing.assert_allclose(M(r), ref.solve(r), rtol=1e-10)
    np.testing.assert_allclose(M(torch.from_numpy(r[:, 0])).numpy(), np.linalg.solve(D, r[:, 0]), rtol=1e-10)


@pytest.mark.simulator
@pytest.mark.parametrize("kind", ["ilu0", "ic0"])
def test_ilu0_ic0_apply_on_the_triangular_solve_kernel(kind):
    """Issue 32: applying ILU(0)/IC(0) is two sparse triangular solves on csr_spsv_kernel under a kernel
    backend. On a tridiagonal SPD matrix both are exact factorizations, so M(r) = A^{-1} r: reference
    NumPy's float64 solve; float32 tolerance 1e-5 relative (cond(A) < 10, two fp32 solves of n = 131)."""
    from trnsci.testing import kernel_ran

    D = _tridiag(131, np.float32, seed=3)
    M = getattr(trnsparse, kind)(trnsparse.from_dense(torch.from_numpy(D)))
    r = np.random.default_rng(4).standard_normal((131, 3)).astype(np.float32)
    ref = np.linalg.solve(D.astype(np.float64), r.astype(np.float64))
    with kernel_ran("csr_spsv_kernel", "csr_spsv_kernel"):
        z = M(torch.from_numpy(r))
    np.testing.assert_allclose(z.numpy(), ref, rtol=0, atol=1e-5 * np.abs(ref).max())
    np.testing.assert_allclose(M(r), ref, rtol=0, atol=1e-5 * np.abs(ref).max())  # torch path, same answer


def test_ilu0_keeps_the_pattern_on_a_matrix_with_fill():
    """On the 2-D Laplacian ILU(0) drops fill: L+U has exactly A's pattern and (L U)_ij == a_ij there."""
    S = _poisson2d(6)
    M = trnsparse.ilu0(trnsparse.from_scipy(S))
    L = M.L.to_dense().numpy() + np.eye(36)
    U = M.U.to_dense().numpy()
    A = S.toarray()
    np.testing.assert_array_equal((np.tril(L, -1) + U) != 0, A != 0)
    np.testing.assert_allclose(np.where(A != 0, L @ U, 0), A, atol=1e-12)  # the defining ILU(0) property


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_ic0_is_cholesky_without_fill(dtype):
    D = _tridiag(30, dtype, seed=2)
    M = trnsparse.ic0(trnsparse.from_dense(torch.from_numpy(D)))
    np.testing.assert_allclose(M.L.to_dense().numpy(), np.linalg.cholesky(D), atol=1e-12)
    b = np.random.default_rng(3).standard_normal(30).astype(dtype)
    np.testing.assert_allclose(M(b), sla.cho_solve((np.linalg.cholesky(D), True), b), rtol=1e-10)
    S = _poisson2d(5)
    L = trnsparse.ic0(trnsparse.from_scipy(S)).L.to_dense().numpy()
    A = S.toarray()
    lo = np.tril(A) != 0
    np.testing.assert_array_equal(L != 0, lo)
    np.testing.assert_allclose(np.where(lo, L @ L.T, 0), np.tril(A), atol=1e-12)


def test_preconditioner_protocol_and_jacobi():
    D = _tridiag(12)
    A = trnsparse.from_dense(torch.from_numpy(D))
    for M in (trnsparse.ilu0(A), trnsparse.ic0(A), trnsparse.jacobi(A), trnsparse.jacobi_preconditioner_bsr(A)):
        assert M.shape == (12, 12) and M.dtype == torch.float64
        r = torch.randn(12, dtype=torch.float64)
        R = torch.randn(12, 3, dtype=torch.float64)
        z = M(r)
        assert torch.equal(z, M.solve(r)) and torch.equal(z, M.matvec(r)) and torch.equal(z, M @ r)
        assert M(R).shape == (12, 3)
        torch.testing.assert_close(M(R)[:, 1], M(R[:, 1].contiguous()))
    Mj = trnsparse.jacobi(A)
    np.testing.assert_allclose(Mj(np.ones(12)), 1 / np.diag(D))
    with pytest.raises(ValueError, match="diagonal of A is zero"):
        trnsparse.jacobi(trnsparse.from_dense(torch.tensor([[0.0, 1.0], [1.0, 1.0]])))
    with pytest.raises(ValueError, match="no stored diagonal entry in row 0"):
        trnsparse.ilu0(trnsparse.from_dense(torch.tensor([[0.0, 1.0], [1.0, 1.0]])))
    with pytest.raises(ValueError, match="not positive definite"):
        trnsparse.ic0(trnsparse.from_dense(torch.tensor([[1.0, 2.0], [2.0, 1.0]], dtype=torch.float64)))
    with pytest.raises(ValueError, match="r must have 12 rows"):
        Mj(torch.ones(3, dtype=torch.float64))


def test_bsr_solvers_against_numpy():
    S = _poisson2d(12)  # n = 144: two ragged 128-tiles per side with block_size 128
    A = trnsparse.BSRMatrix.from_csr(trnsparse.from_scipy(S), block_size=128)
    D = S.toarray()
    b = np.random.default_rng(0).standard_normal(144)
    bt = torch.from_numpy(b)
    ref = np.linalg.solve(D, b)
    np.testing.assert_allclose(trnsparse.bsr_diagonal(A).numpy(), np.diag(D))
    x, it, res = trnsparse.cg_bsr(A, bt, tol=1e-10, max_iter=500)
    assert res < 1e-10 and it < 144
    np.testing.assert_allclose(x.numpy(), ref, rtol=1e-8, atol=1e-9)  # cond(D) ~ 60: 1e-10 residual -> 1e-8
    xp, itp, _ = trnsparse.cg_bsr(A, bt, tol=1e-10, M=trnsparse.ic0(A))
    assert itp < it
    np.testing.assert_allclose(xp.numpy(), ref, rtol=1e-8, atol=1e-9)
    ev = np.linalg.eigvalsh(D)
    lam, vec, _ = trnsparse.power_iteration_bsr(A, max_iter=2000, tol=1e-12)
    assert abs(lam - ev[-1]) < 1e-4 * ev[-1]  # gap is small for the Laplacian: converges slowly
    xc, K, resc = trnsparse.chebyshev_bsr(A, bt, ev[0], ev[-1], K=120)
    # Chebyshev error bound: 2 ((sqrt(k)-1)/(sqrt(k)+1))^K with k = cond ~ 60 -> ~1e-13 at K=120
    assert K == 120 and resc < 1e-9
    np.testing.assert_allclose(xc.numpy(), ref, rtol=1e-8, atol=1e-9)
    xr, _, resr = trnsparse.richardson_bsr(A, bt, omega=2 / (ev[0] + ev[-1]), K=50)
    rate = (ev[-1] - ev[0]) / (ev[-1] + ev[0])
    # Richardson error contracts by exactly `rate` per step in the A-eigenbasis
    assert np.linalg.norm(xr.numpy() - ref) <= 1.0001 * rate ** 50 * np.linalg.norm(ref)


def test_chebyshev_coeffs_reproduce_the_chebyshev_polynomial():
    """After K steps on a diagonal A the error factor at eigenvalue t is T_K((theta-t)/delta)/T_K(theta/delta)."""
    lo, hi, K = 0.5, 4.0, 9
    alpha, beta = trnsparse.chebyshev_coeffs(lo, hi, K)
    t = np.linspace(lo, hi, 7)
    e_prev = e = np.ones_like(t)
    for k in range(K):
        e_new = e - alpha[k].item() * t * e + (beta[k].item() * (e - e_prev) if k else 0)
        e_prev, e = e, e_new
    theta, delta = (hi + lo) / 2, (hi - lo) / 2
    Tk = np.polynomial.chebyshev.Chebyshev.basis(K)
    np.testing.assert_allclose(e, Tk((theta - t) / delta) / Tk(theta / delta), atol=1e-12)
