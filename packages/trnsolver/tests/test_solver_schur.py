"""trnsolver.schur against scipy.linalg.schur (LAPACK ?gees): A = Z T Z^H, the form of T, the
eigenvalues, SciPy's sort semantics and sdim; the device path (QR/GEMM kernels) under "simulator".

Tolerances: the backward error ||Z T Z^H - A|| of a Householder/QR-iteration Schur form is a
modest multiple of n eps ||A|| (Golub & Van Loan 7.5.6); 50 n eps ||A||_F leaves room for the
reorderings. Eigenvalues are compared with LAPACK's (numpy.linalg.eigvals) after pairing each with
its nearest; for well-separated eigenvalues of random matrices the difference is ~n eps ||A|| times
their condition numbers, bounded here by 1e-8 (float64) / 1e-3 (float32, device).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sl
import torch

import trnsci
import trnsolver
from trnsci.testing import kernel_ran


def _blocks(T):
    n, out, i = T.shape[0], [], 0
    while i < n:
        s = 2 if i + 1 < n and T[i + 1, i] != 0 else 1
        out.append((i, s))
        i += s
    return out


def _eigs(T):
    """Eigenvalues of a quasi-triangular T, block by block (numpy.linalg.eigvals of each block)."""
    return np.concatenate([np.linalg.eigvals(T[i:i + s, i:i + s]) for i, s in _blocks(T)])


def _match(a, b):
    b = list(b)
    err = 0.0
    for x in a:
        j = int(np.argmin([abs(x - y) for y in b]))
        err = max(err, abs(x - b.pop(j)))
    return err


def _check_form(A, T, Z, real, tol_eps):
    n = A.shape[0]
    eps = np.finfo(T.dtype).eps
    nrm = max(np.linalg.norm(A), 1.0)
    assert np.linalg.norm(Z @ T @ Z.conj().T - A) <= tol_eps * n * eps * nrm
    assert np.linalg.norm(Z.conj().T @ Z - np.eye(n)) <= tol_eps * n * eps
    assert np.all(np.tril(T, -2) == 0)
    if real:
        for i, s in _blocks(T):
            if s == 2:  # a complex pair in standard form: equal diagonal, off-diagonals of opposite sign
                assert T[i, i] == pytest.approx(T[i + 1, i + 1], abs=10 * eps * nrm)
                assert T[i, i + 1] * T[i + 1, i] < 0
        assert all(i + s >= n or T[i + s, i + s - 1] == 0 for i, s in _blocks(T))
    else:
        assert np.all(np.tril(T, -1) == 0)


@pytest.mark.parametrize("n", [1, 2, 3, 6, 17, 40])
@pytest.mark.parametrize("output", ["real", "complex"])
def test_schur_matches_scipy_random_real(n, output):
    rng = np.random.default_rng(n)
    A = rng.standard_normal((n, n))
    T, Z = trnsolver.schur(A, output=output)
    Ts, Zs = sl.schur(A, output=output)
    assert isinstance(T, np.ndarray) and T.dtype == Ts.dtype and Z.dtype == Zs.dtype
    _check_form(A, T, Z, output == "real", 50)
    w = _eigs(T)
    assert _match(w, np.linalg.eigvals(A)) <= 1e-8 * max(1, np.abs(w).max())
    assert _match(w, _eigs(Ts)) <= 1e-8 * max(1, np.abs(w).max())


@pytest.mark.parametrize("n", [4, 15])
def test_schur_complex_input_and_float32(n):
    rng = np.random.default_rng(10 + n)
    A = rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))
    T, Z = trnsolver.schur(torch.from_numpy(A), output="real")  # complex input: complex T either way
    assert T.dtype == torch.complex128
    _check_form(A, T.numpy(), Z.numpy(), False, 50)
    assert _match(np.diag(T.numpy()), np.linalg.eigvals(A)) <= 1e-8 * np.abs(A).sum()
    A32 = rng.standard_normal((n, n)).astype(np.float32)
    T, Z = trnsolver.schur(A32)
    assert T.dtype == np.float32 == sl.schur(A32)[0].dtype
    _check_form(A32.astype(np.float64), T.astype(np.float64), Z.astype(np.float64), True, 50 * 2.0**29)
    assert _match(_eigs(T), np.linalg.eigvals(A32.astype(np.float64))) <= 1e-3
    T, Z = trnsolver.schur(np.arange(9).reshape(3, 3))  # integers: float64, as SciPy
    assert T.dtype == np.float64 and np.allclose(Z @ T @ Z.T, np.arange(9).reshape(3, 3))


@pytest.mark.parametrize("sort", ["lhp", "rhp", "iuc", "ouc"])
@pytest.mark.parametrize("output", ["real", "complex"])
def test_schur_sort_names_as_scipy(sort, output):
    rng = np.random.default_rng(20)
    A = rng.standard_normal((12, 12)) * 0.6
    T, Z, sdim = trnsolver.schur(A, output=output, sort=sort)
    Ts, Zs, sdim_s = sl.schur(A, output=output, sort=sort)
    assert sdim == sdim_s
    _check_form(A, T, Z, output == "real", 200)
    pred = {"lhp": lambda w: w.real < 0, "rhp": lambda w: w.real >= 0, "iuc": lambda w: abs(w) <= 1,
            "ouc": lambda w: abs(w) > 1}[sort]
    w = _eigs(T)
    assert all(pred(x) for x in w[:sdim]) and not any(pred(x) for x in w[sdim:])
    # the leading sdim columns of Z span the same invariant subspace as SciPy's
    if 0 < sdim < 12:
        P = Z[:, :sdim] @ Z[:, :sdim].conj().T
        Ps = Zs[:, :sdim] @ Zs[:, :sdim].conj().T
        assert np.linalg.norm(P - Ps) <= 1e-8


def test_schur_sort_callables_as_scipy():
    rng = np.random.default_rng(21)
    A = rng.standard_normal((10, 10))
    f2 = lambda re, im: re > 0.3  # noqa: E731 -- real output: (real, imaginary)
    T, Z, sdim = trnsolver.schur(A, sort=f2)
    assert sdim == sl.schur(A, sort=f2)[2]
    w = _eigs(T)
    assert all(x.real > 0.3 for x in w[:sdim]) and all(x.real <= 0.3 for x in w[sdim:])
    # a pair counts 2 when either eigenvalue is chosen
    f_up = lambda re, im: im > 0  # noqa: E731
    T, Z, sdim = trnsolver.schur(A, sort=f_up)
    assert sdim == sl.schur(A, sort=f_up)[2] == np.sum(np.abs(np.linalg.eigvals(A).imag) > 0)
    C = A + 1j * rng.standard_normal((10, 10))
    f1 = lambda z: z.imag > 0  # noqa: E731 -- complex: one complex argument
    T, Z, sdim = trnsolver.schur(C, sort=f1)
    assert sdim == sl.schur(C, sort=f1)[2]
    _check_form(C, T, Z, False, 200)
    assert all(x.imag > 0 for x in np.diag(T)[:sdim]) and not any(x.imag > 0 for x in np.diag(T)[sdim:])


def test_schur_known_forms():
    # a rotation-scaling block: eigenvalues 1 +- 2i; a defective Jordan block; a triangular input
    A = np.array([[1.0, 2.0], [-2.0, 1.0]])
    T, Z = trnsolver.schur(A)
    assert np.allclose(sorted(_eigs(T), key=lambda z: z.imag), [1 - 2j, 1 + 2j])
    J = np.array([[2.0, 1.0, 0.0], [0.0, 2.0, 1.0], [0.0, 0.0, 2.0]])
    T, Z = trnsolver.schur(J)
    assert np.allclose(Z @ T @ Z.T, J) and np.allclose(np.diag(T), 2.0, atol=1e-5)
    U = np.triu(np.arange(1.0, 17.0).reshape(4, 4))
    T, Z, sdim = trnsolver.schur(U, sort=lambda re, im: re > 10)
    assert sdim == 2 and sorted(np.diag(T)[:2]) == pytest.approx([11.0, 16.0])


@pytest.mark.parametrize("call,exc,pattern", [
    (lambda: trnsolver.schur(np.ones((2, 3))), ValueError, "square"),
    (lambda: trnsolver.schur(np.ones((2, 2, 2))), ValueError, "one \\(n, n\\) matrix"),
    (lambda: trnsolver.schur(np.ones((2, 2)), output="imag"), ValueError, "output"),
    (lambda: trnsolver.schur(np.ones((2, 2)), sort="up"), ValueError, "sort"),
    (lambda: trnsolver.schur(np.ones((2, 2)), sort=3), TypeError, "sort"),
    (lambda: trnsolver.schur(np.array([[1.0, np.nan], [0.0, 1.0]])), ValueError, "finite|NaN|Inf"),
    (lambda: trnsolver.schur(np.array([[1.0, np.inf], [0.0, 1.0]]), check_finite=False), ValueError,
     "finite|NaN|Inf"),
    (lambda: trnsolver.schur(np.ones((2, 2), bool)), TypeError, "bool"),
    (lambda: trnsolver.schur("A"), TypeError, "a"),
])
def test_schur_bad_input(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


@pytest.mark.simulator
@pytest.mark.parametrize("n", [5, 13])
def test_schur_device_path_runs_qr_and_gemm_kernels(n):
    rng = np.random.default_rng(30 + n)
    A = torch.from_numpy(rng.standard_normal((n, n)).astype(np.float32))
    with trnsci.use_backend("simulator"):
        plan = trnsci.dispatch.plan_call(trnsolver.schur, A)
        with kernel_ran() as runs:
            T, Z = trnsolver.schur(A)
    assert plan.backend == "simulator"
    assert {"qr_panel_kernel", "gemm_kernel"} <= {r.kernel for r in runs}
    T64, Z64, A64 = (x.double().numpy() for x in (T, Z, A))
    _check_form(A64, T64, Z64, True, 50 * 2.0**29)  # float32 kernels: eps32 instead of eps64
    assert _match(_eigs(T64), np.linalg.eigvals(A64)) <= 1e-3 * max(1, np.abs(A64).sum() / n)
    # sort= and output="complex" take the host path and say why
    with trnsci.use_backend("simulator"):
        p = trnsci.dispatch.plan_call(trnsolver.schur, A, sort="lhp")
        assert p.backend == "torch" and "sort" in p.reason
        T2, Z2, sdim = trnsolver.schur(A, sort="lhp")
    assert sdim == sl.schur(A.numpy(), sort="lhp")[2]
