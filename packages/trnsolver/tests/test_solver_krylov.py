"""Krylov solvers vs scipy.sparse.linalg on small 2-D Poisson and random systems.

Every solve is checked by its true residual ||b - A x|| / ||b|| <= tol (the
solver recomputes it from x), and against SciPy's solution with a bound
cond(A) * tol (Poisson 12x12: cond ~ 60, so 1e-10 tol -> ~1e-8 forward error).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spl
import torch

import trnsolver

SOLVERS = {"cg": (trnsolver.cg, spl.cg), "gmres": (trnsolver.gmres, spl.gmres),
           "bicgstab": (trnsolver.bicgstab, spl.bicgstab), "minres": (trnsolver.minres, spl.minres)}


def poisson(m):
    T = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(m, m))
    return (sp.kron(sp.eye(m), T) + sp.kron(T, sp.eye(m))).tocsr()


def rhs(n, seed=0):
    return np.random.default_rng(seed).standard_normal(n)


@pytest.mark.parametrize("name", list(SOLVERS))
def test_vs_scipy_poisson(name):
    ours, theirs = SOLVERS[name]
    A = poisson(12)
    b = rhs(A.shape[0])
    x, it, rr = ours(torch.from_numpy(A.toarray()), torch.from_numpy(b), tol=1e-10, maxiter=2000)
    xs, _ = theirs(A, b, rtol=1e-12, maxiter=2000)
    assert rr <= 1e-10 and it > 0
    np.testing.assert_allclose(x.numpy(), xs, atol=100 * 1e-10 * np.abs(xs).max())


@pytest.mark.parametrize("name", list(SOLVERS))
@pytest.mark.parametrize("kind", ["scipy_sparse", "torch_sparse", "callable", "matvec_object", "numpy"])
def test_operator_kinds(name, kind):
    ours, _ = SOLVERS[name]
    A = poisson(6)
    b = rhs(A.shape[0], 1)
    Ad = torch.from_numpy(A.toarray())
    op = {"scipy_sparse": A, "torch_sparse": Ad.to_sparse_csr(), "callable": lambda v: Ad @ v,
          "matvec_object": type("Op", (), {"shape": (36, 36), "matvec": lambda self, v: Ad @ v})(),
          "numpy": A.toarray()}[kind]
    bb = b if kind == "numpy" else torch.from_numpy(b)
    x, it, rr = ours(op, bb, tol=1e-10)
    assert isinstance(x, np.ndarray) == (kind == "numpy")
    np.testing.assert_allclose(np.asarray(x), np.linalg.solve(A.toarray(), b), atol=1e-7)


class _ProtocolPrecond:
    """A trnsparse-style preconditioner object: ``solve(r) ~ A^{-1} r``."""

    def __init__(self, d):
        self.d = d
        self.calls = 0

    def solve(self, r):
        self.calls += 1
        return r / self.d


@pytest.mark.parametrize("name", list(SOLVERS))
def test_preconditioners_reduce_iterations(name):
    ours, theirs = SOLVERS[name]
    m = 12
    A = poisson(m) + sp.diags(np.linspace(1, 50, m * m))   # varying diagonal: Jacobi helps
    A = A.tocsr()
    Ad = torch.from_numpy(A.toarray())
    b = torch.from_numpy(rhs(A.shape[0], 2))
    _, it0, _ = ours(Ad, b, tol=1e-10, maxiter=500)
    # SciPy's ILU as the preconditioner object; natural ordering and no pivoting keep it
    # symmetric for this symmetric A (CG needs a symmetric M; COLAMD ordering breaks that)
    ilu = spl.spilu(A.tocsc(), drop_tol=1e-4, permc_spec="NATURAL", diag_pivot_thresh=0.0)
    pc = _ProtocolPrecond(Ad.diagonal())
    for M in (ilu, pc, trnsolver.jacobi_preconditioner(Ad), trnsolver.ssor_preconditioner(Ad, 1.0),
              trnsolver.block_jacobi_preconditioner(Ad, 12), torch.diag(1 / Ad.diagonal()),
              spl.LinearOperator(A.shape, matvec=lambda r: r / A.diagonal())):
        if name == "minres" and M is ilu:
            continue   # MINRES needs a symmetric M; ILU of a symmetric A is not symmetric in general
        x, it, rr = ours(Ad, b, tol=1e-10, maxiter=500, M=M)
        assert rr <= 1e-10
        assert it <= it0, (type(M).__name__, it, it0)
    assert pc.calls > 0
    xs, _ = theirs(A, b.numpy(), rtol=1e-12, M=spl.LinearOperator(A.shape, ilu.solve) if name != "minres" else None)
    np.testing.assert_allclose(x.numpy(), xs, atol=1e-7)


@pytest.mark.parametrize("name", list(SOLVERS))
def test_nonconvergence_is_reported(name):
    ours, _ = SOLVERS[name]
    A = torch.from_numpy(poisson(10).toarray())
    b = torch.ones(100, dtype=torch.float64)
    if name == "gmres":   # maxiter counts restart cycles there
        ours = lambda *a, **k: trnsolver.gmres(*a, restart=2, **k)  # noqa: E731
    with pytest.warns(trnsolver.ConvergenceWarning, match=f"{name}: did not converge"):
        x, it, rr = ours(A, b, tol=1e-12, maxiter=2)
    assert rr > 1e-12
    with pytest.raises(trnsolver.ConvergenceError):
        ours(A, b, tol=1e-12, maxiter=2, on_fail="raise")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x, info = ours(A, b, tol=1e-12, maxiter=2, return_info=True)
    assert not info.converged and info.relres > 1e-12 and len(info.residuals) >= 2


@pytest.mark.parametrize("name", list(SOLVERS))
def test_info_history_and_x0(name):
    ours, _ = SOLVERS[name]
    A = torch.from_numpy(poisson(5).toarray())
    b = torch.from_numpy(rhs(25, 3))
    xr = torch.linalg.solve(A, b)
    x0 = xr + 1e-3
    x0c = x0.clone()
    x, info = ours(A, b, x0=x0, tol=1e-10, return_info=True)
    assert torch.equal(x0, x0c)          # x0 is not modified
    assert info.converged and info.relres <= 1e-10 and info.residuals[0] < 1e-2
    assert info.iterations == len(info.residuals) - 1 or name in ("gmres", "minres")
    x, it, rr = ours(A, torch.zeros(25, dtype=torch.float64))
    assert it == 0 and rr == 0 and float(x.abs().max()) == 0


@pytest.mark.parametrize("name", ["cg", "gmres", "bicgstab", "minres"])
def test_complex_hermitian(name):
    ours, _ = SOLVERS[name]
    g = torch.Generator().manual_seed(0)
    X = torch.randn(20, 20, dtype=torch.complex128, generator=g)
    A = X @ X.mH + 20 * torch.eye(20, dtype=torch.complex128)
    b = torch.randn(20, dtype=torch.complex128, generator=g)
    x, it, rr = ours(A, b, tol=1e-10)
    assert rr <= 1e-10
    np.testing.assert_allclose(x.numpy(), np.linalg.solve(A.numpy(), b.numpy()), atol=1e-9)


def test_minres_indefinite_vs_scipy():
    rng = np.random.default_rng(6)
    Q, _ = np.linalg.qr(rng.standard_normal((30, 30)))
    A = (Q * np.concatenate([np.linspace(-5, -1, 15), np.linspace(1, 5, 15)])) @ Q.T
    b = rng.standard_normal(30)
    x, it, rr = trnsolver.minres(torch.from_numpy(A), torch.from_numpy(b), tol=1e-10)
    xs, _ = spl.minres(A, b, rtol=1e-12)
    assert rr <= 1e-10
    np.testing.assert_allclose(x.numpy(), xs, atol=1e-8)


def test_gmres_nonsymmetric_vs_scipy_and_restart():
    rng = np.random.default_rng(7)
    A = np.eye(40) * 4 + rng.standard_normal((40, 40)) * 0.3
    b = rng.standard_normal(40)
    for restart in (5, 40):
        x, it, rr = trnsolver.gmres(torch.from_numpy(A), torch.from_numpy(b), tol=1e-10, restart=restart, maxiter=200)
        assert rr <= 1e-10
        np.testing.assert_allclose(x.numpy(), np.linalg.solve(A, b), atol=1e-8)
    xb, it, rr = trnsolver.bicgstab(torch.from_numpy(A), torch.from_numpy(b), tol=1e-10)
    np.testing.assert_allclose(xb.numpy(), spl.bicgstab(A, b, rtol=1e-12)[0], atol=1e-8)


def test_fp32_solves():
    A = torch.from_numpy(poisson(8).toarray()).float()
    b = torch.ones(64)
    for f in (trnsolver.cg, trnsolver.gmres, trnsolver.bicgstab, trnsolver.minres):
        x, it, rr = f(A, b, tol=1e-5)   # fp32: 1e-5 is ~100 eps32, reachable for cond ~ 30
        assert x.dtype == torch.float32 and rr <= 1e-5


def test_preconditioner_errors():
    with pytest.raises(ValueError, match=r"A\[1, 1\] is zero"):
        trnsolver.jacobi_preconditioner(torch.diag(torch.tensor([1.0, 0.0])))
    with pytest.raises(np.linalg.LinAlgError, match=r"rows \[2:4\]"):
        trnsolver.block_jacobi_preconditioner(torch.diag(torch.tensor([1.0, 1.0, -1.0, 1.0])), 2)
    with pytest.raises(ValueError, match="omega"):
        trnsolver.ssor_preconditioner(torch.eye(3), omega=2.0)
    with pytest.raises(ValueError, match="A has shape"):
        trnsolver.cg(torch.eye(3), torch.ones(4))
    with pytest.raises(TypeError, match="A must be"):
        trnsolver.cg(None, torch.ones(4))


# ---- issues 19 and 25: SciPy's keywords, SciPy's stopping rule, NaN caught up front

def _spd32(n=200):
    """float32 SPD (shifted 1-D Laplacian, cond ~ 21): float32 cannot resolve a 1e-8 residual."""
    A = sp.diags([-np.ones(n - 1), 2.2 * np.ones(n), -np.ones(n - 1)], [-1, 0, 1]).toarray()
    return A.astype(np.float32), np.random.default_rng(0).standard_normal(n).astype(np.float32)


def test_cg_stops_after_scipys_number_of_iterations_and_warns_about_the_true_residual():
    A, b = _spd32()
    calls = []
    xs, info = spl.cg(A, b, rtol=1e-8, maxiter=500, callback=lambda xk: calls.append(1))
    assert info == 0  # SciPy (and the published package) converge by the recursive residual
    seen = []
    with pytest.warns(trnsolver.ConvergenceWarning, match="true residual .* > tol 1.0e-08"):
        x, it, relres = trnsolver.cg(A, b, tol=1e-8, maxiter=500, callback=lambda xk: seen.append(xk.copy()))
    assert it == len(calls) < 500  # the same count as SciPy on the same float32 system (43 here)
    assert len(seen) == it and isinstance(seen[0], np.ndarray)  # every iterate, as NumPy for NumPy input
    np.testing.assert_array_equal(seen[-1], x)
    # relres is the true residual of x, formed in float32 (its own rounding ~ n eps32 ||A|| ||x|| / ||b||
    # ~ 1e-8 here, so 5% of ~8e-7); float32 itself resolves ~ cond * eps32 ~ 1e-6
    true = np.linalg.norm(b.astype(np.float64) - A.astype(np.float64) @ x.astype(np.float64)) / np.linalg.norm(b)
    assert relres == pytest.approx(true, rel=0.05) and relres < 1e-5
    np.testing.assert_allclose(x, xs, rtol=0, atol=1e-4 * np.abs(xs).max())
    # float64: the same count and no warning
    calls.clear()
    spl.cg(A.astype(np.float64), b.astype(np.float64), rtol=1e-8, maxiter=500, callback=lambda xk: calls.append(1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, it64, rel64 = trnsolver.cg(A.astype(np.float64), b.astype(np.float64), rtol=1e-8, maxiter=500)
    assert it64 == len(calls) and rel64 < 1e-8


@pytest.mark.parametrize("name", ["cg", "bicgstab"])
def test_converged_is_the_true_residuals_verdict(name):
    """Issue 32: the recursion meets tol=1e-8 in float32 while b - A x cannot (SciPy says info == 0 on
    the same system); ``converged`` follows the true residual, measured here in float64 by NumPy,
    and the one ConvergenceWarning agrees with it (``on_fail="raise"`` raises instead)."""
    ours, theirs = SOLVERS[name]
    A, b = _spd32()
    _, sinfo = theirs(A, b, rtol=1e-8, maxiter=500)
    assert sinfo == 0  # the recursion did meet the tolerance
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        x, info = ours(A, b, tol=1e-8, maxiter=500, return_info=True)
    true = np.linalg.norm(b.astype(np.float64) - A.astype(np.float64) @ x.astype(np.float64)) / np.linalg.norm(b)
    assert true > 1e-8 and info.converged is False  # float32 resolves ~ cond * eps32 ~ 1e-6, not 1e-8
    conv = [w for w in caught if issubclass(w.category, trnsolver.ConvergenceWarning)]
    assert len(conv) == 1 and "converged is False" in str(conv[0].message)
    with pytest.raises(trnsolver.ConvergenceError, match="true residual"):
        ours(A, b, tol=1e-8, maxiter=500, on_fail="raise")
    # a tolerance float32 reaches: converged by both residuals, no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x, info = ours(A, b, tol=1e-4, maxiter=500, return_info=True)
    true = np.linalg.norm(b.astype(np.float64) - A.astype(np.float64) @ x.astype(np.float64)) / np.linalg.norm(b)
    assert info.converged is True and true <= 1e-4


@pytest.mark.parametrize("name", list(SOLVERS))
def test_scipy_keywords_rtol_atol_callback(name):
    ours, _ = SOLVERS[name]
    A = poisson(6).toarray()
    b = rhs(A.shape[0])
    xs = []
    x, it, rr = ours(A, b, rtol=1e-10, atol=0.0, maxiter=500, callback=lambda xk: xs.append(xk.copy()))
    assert rr <= 1e-10 and xs and np.array_equal(xs[-1], x)
    np.testing.assert_allclose(x, np.linalg.solve(A, b), rtol=0, atol=1e-8)  # cond ~ 25: 25 * 1e-10 * |x|
    _, _, rr = ours(A, b, rtol=0.0, atol=1e-3 * np.linalg.norm(b), maxiter=500)  # atol alone sets the bar
    assert 1e-6 < rr <= 1e-3
    with pytest.raises(TypeError, match=f"{name}: give tol or rtol, not both"):
        ours(A, b, tol=1e-6, rtol=1e-6)
    with pytest.raises(TypeError, match=f"{name}: callback must be callable"):
        ours(A, b, callback="print")
    with pytest.raises(ValueError, match="rtol must be a finite number >= 0"):
        ours(A, b, rtol=-1.0)


@pytest.mark.parametrize("name", list(SOLVERS))
def test_nan_in_the_matrix_is_refused_before_iterating(name):
    ours, _ = SOLVERS[name]
    A = poisson(5)
    b = rhs(A.shape[0])
    bad = A.copy()
    bad.data[3] = np.nan
    for Abad in (bad, bad.toarray(), torch.from_numpy(bad.toarray()).to_sparse_csr()):
        with pytest.raises(ValueError, match=f"{name}: A holds NaN or Inf"):
            ours(Abad, b, maxiter=10**6)
    with pytest.raises(ValueError, match=f"{name}: M holds NaN or Inf"):
        ours(A, b, M=np.full(A.shape, np.inf))
    with pytest.raises(ValueError, match="not finite at iteration 1"):  # an operator: at its first product
        ours(lambda v: v * np.nan, b, maxiter=10**6)
