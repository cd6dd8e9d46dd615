"""CG and BiCGSTAB on CPU tensors: the loop runs on torch tensors or on NumPy views of the same memory,
a measured ``trnsci.routes`` choice (family ``trnsolver.krylov_loop``, #23). Both routes must follow SciPy:

* iteration counts: SciPy's (the callback's number of calls; BiCGSTAB may add the half-step callback
  SciPy skips, see test_solver_krylov_routes.py), on SPD Poisson (CG, BiCGSTAB) and a nonsymmetric
  convection-diffusion system (BiCGSTAB), without and with a preconditioner (Jacobi, ILU), in float64
  and float32, for a torch CSR, SciPy CSR, dense tensor and callable ``A``;
* iterates: every callback iterate within ``cond(A) * tol * max|x|`` of SciPy's (float64, tol 1e-10:
  the two sum dots and products in their own order, rounding-level differences amplified at most by
  the condition number, 60 for Poisson 10x10 and ~40 for the convection system) and within
  ``cond(A) * 1e-4 * max|x|`` in float32 (tol 1e-5: float32 dots accumulate ~1e-6 relative error
  per iteration);
* everything else as today: the callback gets torch tensors for torch ``b`` and NumPy arrays for NumPy
  ``b``, ``x0`` is not modified, ``maxiter`` warns, the float32 true-residual warning, NaN from an
  operator is a ValueError.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spl
import torch

import trnsolver
from trnsci import iterative as it_
from trnsci import routes

ROUTES = ["torch", "numpy"]
COND = 60.0


def _poisson(m):
    T = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(m, m))
    return (sp.kron(sp.eye(m), T) + sp.kron(T, sp.eye(m))).tocsr()


def _convection(m, c=0.4):
    T = sp.diags([-1.0 - c, 2.0, -1.0 + c], [-1, 0, 1], shape=(m, m))
    return (sp.kron(sp.eye(m), T) + sp.kron(T, sp.eye(m)) + 0.1 * sp.eye(m * m)).tocsr()


def _csr(A, dtype):
    return torch.sparse_csr_tensor(torch.from_numpy(A.indptr).long(), torch.from_numpy(A.indices).long(),
                                   torch.from_numpy(A.data).to(dtype), A.shape)


def _operator(kind, A, dtype):
    if kind == "torch_csr":
        return _csr(A, dtype)
    if kind == "scipy_csr":
        return A.astype(torch.empty(0, dtype=dtype).numpy().dtype)
    Ad = torch.from_numpy(A.toarray()).to(dtype)
    if kind == "dense":
        return Ad
    return lambda v: Ad @ v  # a callable on torch vectors


def _precond(kind, A, name):
    if kind is None:
        return None, None
    if kind == "jacobi":  # trnsolver's object for us, the same diagonal as a SciPy matrix for SciPy
        return trnsolver.jacobi_preconditioner(torch.from_numpy(A.toarray())), sp.diags(1.0 / A.diagonal()).tocsr()
    ilu = spl.spilu(A.tocsc(), drop_tol=1e-2, fill_factor=1.0)
    return ilu, spl.LinearOperator(A.shape, ilu.solve)


SOLVERS = {"cg": (trnsolver.cg, spl.cg), "bicgstab": (trnsolver.bicgstab, spl.bicgstab)}
CASES = [  # (solver, system, preconditioner)
    ("cg", "poisson", None), ("cg", "poisson", "jacobi"),
    ("bicgstab", "poisson", None), ("bicgstab", "convection", None),
    ("bicgstab", "convection", "ilu"), ("bicgstab", "convection", "jacobi"),
]


@pytest.mark.parametrize("akind", ["torch_csr", "scipy_csr", "dense", "callable"])
@pytest.mark.parametrize("name,system,pkind", CASES)
def test_both_routes_follow_scipy_float64(name, system, pkind, akind):
    ours, theirs = SOLVERS[name]
    A = _poisson(10) if system == "poisson" else _convection(10)
    b = np.random.default_rng(3).standard_normal(A.shape[0])
    M, Mref = _precond(pkind, A, name)
    ref = []
    xs, info = theirs(A, b, rtol=1e-10, maxiter=500, M=Mref, callback=lambda xk: ref.append(xk.copy()))
    assert info == 0
    for route in ROUTES:
        seen = []
        with routes.force(route):
            x, it, rr = ours(_operator(akind, A, torch.float64), torch.from_numpy(b), tol=1e-10, maxiter=500,
                             M=M, callback=lambda xk, seen=seen: seen.append(xk.clone()))
        assert all(type(s) is torch.Tensor and s.dtype == torch.float64 for s in seen), route
        assert len(seen) == it and it in (len(ref), len(ref) + 1), (route, it, len(ref))
        for mine, theirs_k in zip([s.numpy() for s in seen] + [x.numpy()], ref + [xs]):
            np.testing.assert_allclose(mine, theirs_k, rtol=0, atol=COND * 1e-10 * max(1.0, np.abs(theirs_k).max()),
                                       err_msg=route)
        assert rr <= 1e-10 and x.dtype == torch.float64


@pytest.mark.parametrize("name,system,pkind", CASES)
def test_both_routes_follow_scipy_float32(name, system, pkind):
    ours, theirs = SOLVERS[name]
    A = _poisson(10) if system == "poisson" else _convection(10)
    A32 = A.astype(np.float32)
    b = np.random.default_rng(4).standard_normal(A.shape[0]).astype(np.float32)
    M, Mref = _precond(pkind, A, name)
    if pkind == "jacobi":
        M = trnsolver.jacobi_preconditioner(torch.from_numpy(A.toarray()).float())
        Mref = Mref.astype(np.float32)
    ref = []
    xs, info = theirs(A32, b, rtol=1e-5, maxiter=500, M=Mref, callback=lambda xk: ref.append(xk.copy()))
    assert info == 0
    for route in ROUTES:
        seen = []
        with routes.force(route):
            x, it, rr = ours(_csr(A, torch.float32), torch.from_numpy(b), tol=1e-5, maxiter=500, M=M,
                             callback=lambda xk, seen=seen: seen.append(xk.clone()))
        assert x.dtype == torch.float32 and all(s.dtype == torch.float32 for s in seen)
        assert len(seen) == it and it in (len(ref), len(ref) + 1), (route, it, len(ref))
        for mine, theirs_k in zip([s.numpy() for s in seen] + [x.numpy()], ref + [xs]):
            np.testing.assert_allclose(mine, theirs_k, rtol=0, atol=COND * 1e-4 * max(1.0, np.abs(theirs_k).max()),
                                       err_msg=route)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", list(SOLVERS))
def test_numpy_b_callback_x0_and_maxiter(route, name):
    ours, theirs = SOLVERS[name]
    A = _poisson(8)
    b = np.random.default_rng(5).standard_normal(A.shape[0])
    x0 = np.full(A.shape[0], 0.5)
    x0_before = x0.copy()
    ref = []
    xs, _ = theirs(A, b, x0=x0, rtol=1e-9, maxiter=500, callback=lambda xk: ref.append(xk.copy()))
    seen = []
    with routes.force(route):
        x, it, rr = ours(A, b, x0=x0, tol=1e-9, callback=lambda xk: seen.append(xk.copy()))
    assert isinstance(x, np.ndarray) and all(type(s) is np.ndarray for s in seen)
    np.testing.assert_array_equal(x0, x0_before)
    assert len(seen) == it and it in (len(ref), len(ref) + 1)
    np.testing.assert_allclose(x, xs, rtol=0, atol=COND * 1e-9 * np.abs(xs).max())
    # maxiter: SciPy stops at the same place (info = maxiter); ours warns, returns that iterate
    xs3, info = theirs(A, b, x0=x0, rtol=1e-12, maxiter=3)
    assert info == 3
    with routes.force(route), pytest.warns(it_.ConvergenceWarning, match="did not converge in 3"):
        x3, info3 = ours(A, b, x0=x0, tol=1e-12, maxiter=3, return_info=True)
    assert not info3.converged and info3.iterations == 3 and len(info3.residuals) == 4
    np.testing.assert_allclose(x3, xs3, rtol=0, atol=1e-12 * COND * np.abs(xs3).max())
    with routes.force(route), pytest.raises(it_.ConvergenceError):
        ours(A, b, tol=1e-12, maxiter=2, on_fail="raise")


@pytest.mark.parametrize("route", ROUTES)
def test_atol_and_the_true_residual_warning(route):
    A = _poisson(8)
    b = np.random.default_rng(6).standard_normal(A.shape[0])
    with routes.force(route):
        x, it, rr = trnsolver.cg(_csr(A, torch.float64), torch.from_numpy(b), tol=0.0, atol=1e-3)
    _, info = spl.cg(A, b, rtol=0.0, atol=1e-3, callback=lambda xk: None)
    cnt = []
    spl.cg(A, b, rtol=0.0, atol=1e-3, callback=lambda xk: cnt.append(1))
    assert it == len(cnt) and np.linalg.norm(b - A @ x.numpy()) <= 1e-3
    # float32 with a tolerance the recursion meets and the true residual cannot: not converged, with a warning
    with routes.force(route), pytest.warns(it_.ConvergenceWarning, match="true residual"):
        x, info = trnsolver.cg(_csr(_poisson(16), torch.float32), torch.ones(256), tol=1e-9, return_info=True)
    assert not info.converged and x.dtype == torch.float32


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", list(SOLVERS))
def test_nan_from_an_operator_is_named(route, name):
    ours = SOLVERS[name][0]
    calls = [0]
    d = torch.arange(1.0, 9.0, dtype=torch.float64)

    def A(v):  # diag(1..8), until its third application returns NaN
        calls[0] += 1
        return v * float("nan") if calls[0] > 2 else d * v

    with routes.force(route), pytest.raises(ValueError, match="not finite"):
        ours(A, torch.ones(8, dtype=torch.float64), tol=1e-12)


def test_measured_choice_follows_the_times(monkeypatch):
    """A fake clock makes the NumPy loop 3x faster (deterministic: no real timing compared); the choice
    is keyed by method, dtype, size class and operator kinds, made once, and robust above one thread."""
    seen = []
    real_choose = routes.choose

    def fake_choose(family, cls, cands, *, default, robust, **kw):
        if family != "trnsolver.krylov_loop":
            return real_choose(family, cls, cands, default=default, robust=robust, **kw)
        state = {"t": 0.0}
        cost = {"torch": 3e-3, "numpy": 1e-3}

        def wrap(name, fn):
            def run():
                fn()
                state["t"] += cost[name]
            return run

        seen.append((cls, robust))
        return real_choose(family, cls, {k: wrap(k, f) for k, f in cands.items()}, default=default,
                           robust=robust, clock=lambda: state["t"], persist=False)

    hosted = []
    real_on_host = it_._on_host
    monkeypatch.setattr(it_, "_on_host", lambda *a: hosted.append(1) or real_on_host(*a))
    monkeypatch.setattr(routes, "choose", fake_choose)
    monkeypatch.delenv("TRNSCI_ROUTES", raising=False)
    A = _poisson(6)
    threads = torch.get_num_threads()
    try:
        for t in (1, 2):
            torch.set_num_threads(t)
            routes.forget()
            seen.clear()
            x, it, rr = trnsolver.cg(_csr(A, torch.float64), torch.ones(36, dtype=torch.float64), tol=1e-10)
            assert seen == [(("cg", "float64", 64, "csr", "none"), t > 1)]
            timed = len(hosted)
            assert timed > 1  # the measurement ran the NumPy loop, then the solve took it
            trnsolver.cg(_csr(A, torch.float64), torch.ones(36, dtype=torch.float64), tol=1e-10)
            assert len(seen) == 1 and len(hosted) == timed + 1  # decided: no timing again, NumPy again
            np.testing.assert_allclose(x.numpy(), spl.spsolve(A.tocsc(), np.ones(36)), rtol=0, atol=1e-8)
        ilu = spl.spilu(A.tocsc())
        trnsolver.bicgstab(A.astype(np.float32), torch.ones(36), M=ilu)
        assert seen[-1] == (("bicgstab", "float32", 64, "scipy", "scipy"), True)
    finally:
        torch.set_num_threads(threads)
        routes.forget()


def test_estimate_mode_takes_torch_untimed(monkeypatch):
    monkeypatch.setenv("TRNSCI_ROUTES", "estimate")
    routes.forget()
    hosted = []
    real_on_host = it_._on_host
    monkeypatch.setattr(it_, "_on_host", lambda *a: hosted.append(1) or real_on_host(*a))
    trnsolver.cg(_csr(_poisson(6), torch.float64), torch.ones(36, dtype=torch.float64))
    assert hosted == []
    routes.forget()


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", list(SOLVERS))
def test_complex_csr_matches_scipy(route, name):
    """A complex torch CSR ``A`` (its NaN/Inf check used to fail inside torch.isfinite): SciPy's count and
    solution (complex Hermitian positive definite for CG, a complex shift of it for BiCGSTAB)."""
    ours, theirs = SOLVERS[name]
    P = _poisson(8).astype(np.complex128)
    n = P.shape[0]
    K = sp.diags(np.full(n - 1, 0.3j), 1, shape=(n, n))
    A = (P + K + K.conj().T).tocsr() if name == "cg" else (P + 0.5j * sp.eye(n)).tocsr()
    rng = np.random.default_rng(7)
    b = rng.standard_normal(n) + 1j * rng.standard_normal(n)
    ref = []
    xs, info = theirs(A, b, rtol=1e-10, callback=lambda xk: ref.append(1))
    assert info == 0
    At = torch.sparse_csr_tensor(torch.from_numpy(A.indptr).long(), torch.from_numpy(A.indices).long(),
                                 torch.from_numpy(A.data), A.shape)
    with routes.force(route):
        x, it, rr = ours(At, torch.from_numpy(b), tol=1e-10)
    assert it in (len(ref), len(ref) + 1) and rr <= 1e-10 and x.dtype == torch.complex128
    np.testing.assert_allclose(x.numpy(), xs, rtol=0, atol=COND * 1e-10 * np.abs(xs).max())
    bad = At.clone()
    with torch.no_grad():
        bad.values()[0] = complex("nan+0j")
    with warnings.catch_warnings(), pytest.raises(ValueError, match="A holds NaN or Inf"):
        ours(bad, torch.from_numpy(b))


@pytest.mark.parametrize("wrap", ["callable", "linear_operator"])
def test_measure_mode_never_applies_the_callers_operator_to_time_a_route(wrap, monkeypatch):
    # the caller's own code (a function, a LinearOperator) is applied exactly as often as the solve needs:
    # the same count as the torch route, forced, makes -- route timing would add dozens of applications
    monkeypatch.setenv("TRNSCI_ROUTES", "measure")
    A = _poisson(6).toarray()
    b = np.ones(36)
    counts = []

    def run():
        calls = []

        def matvec(x):
            calls.append(1)
            return A @ np.asarray(x)

        op = matvec if wrap == "callable" else spl.LinearOperator(A.shape, matvec=matvec, dtype=np.float64)
        x, it, _ = trnsolver.cg(op, b, tol=1e-10)
        np.testing.assert_allclose(x, np.linalg.solve(A, b), rtol=0, atol=1e-8)
        counts.append(len(calls))

    routes.forget()
    try:
        run()
        with routes.force("torch"):
            run()
    finally:
        routes.forget()
    assert counts[0] == counts[1]
    assert not [k for k in routes.remembered() if k.startswith("trnsolver.krylov_loop|")]
