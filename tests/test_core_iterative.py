"""Core pieces moved from trnsolver (issue 11): LinAlgError and dense checks
(trnsci.linalg), flag/positive (trnsci.validate), Krylov plumbing
(trnsci.iterative). References are NumPy/SciPy behaviour, not the code itself."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spl
import torch

from trnsci import iterative as it_
from trnsci import linalg as la
from trnsci import validate

CPU = torch.device("cpu")


def test_linalg_error_is_numpy_linalg_error_and_value_error():
    e = la.LinAlgError("potrf: minor 3", info=3, batch_index=(1,))
    assert isinstance(e, np.linalg.LinAlgError) and isinstance(e, ValueError)
    assert (e.info, e.batch_index) == (3, (1,))
    assert issubclass(it_.ConvergenceError, np.linalg.LinAlgError)
    assert issubclass(it_.ConvergenceWarning, RuntimeWarning)


def test_square_matrix_matrix_rhs_finite_batch_index():
    A = torch.eye(3)
    assert la.square_matrix(np.eye(3), "A", "f").shape == (3, 3)
    with pytest.raises(ValueError, match="f: A must be square"):
        la.square_matrix(torch.ones(2, 3), "A", "f")
    with pytest.raises(ValueError, match="A must be a matrix"):
        la.matrix(torch.ones(3), "A", "f")
    with pytest.raises(TypeError, match="A"):
        la.square_matrix(torch.ones(2, 2, dtype=torch.int64), "A", "f")
    B, vec = la.rhs(A, torch.ones(3), "b", "f")
    assert vec and B.shape == (3, 1)
    B, vec = la.rhs(A, torch.ones(3, 2), "b", "f")
    assert not vec and B.shape == (3, 2)
    with pytest.raises(ValueError, match="b must have 3 rows"):
        la.rhs(A, torch.ones(4, 2), "b", "f")
    with pytest.raises(ValueError, match="f: x contains NaN or Inf"):
        la.finite("f", x=torch.tensor([1.0, float("nan")]))
    la.finite("f", x=torch.ones(0), y=None)
    assert la.batch_index(5, (2, 3)) == tuple(np.unravel_index(5, (2, 3))) == (1, 2)
    assert la.batch_index(0, ()) == ()


def test_flag_and_positive():
    assert validate.flag(np.bool_(True), "check", "f") is True
    with pytest.raises(TypeError, match="f: check must be True or False"):
        validate.flag(1, "check", "f")
    assert validate.positive(1e-6, "tol", "f") == 1e-6
    assert validate.positive(0, "tol", "f", zero_ok=True) == 0.0
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="f: tol must be a finite number"):
            validate.positive(bad, "tol", "f")
    with pytest.raises(TypeError, match="tol"):
        validate.positive("1e-6", "tol", "f")


def test_report_warns_or_raises_only_when_not_converged():
    ok = it_.SolverInfo(3, 1e-9, True, [1.0, 1e-9], "cg")
    bad = it_.SolverInfo(7, 1e-2, False, [], "cg")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        it_.report("cg", ok, "warn", 1e-6)
    with pytest.warns(it_.ConvergenceWarning, match="cg: did not converge in 7 iterations"):
        it_.report("cg", bad, "warn", 1e-6)
    with pytest.raises(it_.ConvergenceError, match="relative residual 1.000e-02"):
        it_.report("cg", bad, "raise", 1e-6)
    assert it_.ON_FAIL("WARN", "on_fail", "cg") == "warn"
    with pytest.raises(ValueError, match="on_fail"):
        it_.ON_FAIL("ignore", "on_fail", "cg")


class _Pre:
    """A trnsparse-style preconditioner: M(r) == M.solve(r) == M.matvec(r)."""

    def __init__(self, d):
        self.d = d

    def solve(self, r):
        return r / self.d

    matvec = __call__ = solve


def test_linear_operator_kinds_agree_with_scipy():
    A = sp.random(6, 6, density=0.5, random_state=0, format="csr") + sp.eye(6) * 4
    x = np.arange(6.0)
    want = A @ x
    tx = torch.from_numpy(x)
    for op in (A, spl.aslinearoperator(A), A.toarray(), torch.from_numpy(A.toarray()),
               torch.from_numpy(A.toarray()).to_sparse_csr(), lambda y: torch.from_numpy(A.toarray()) @ y):
        f = it_.linear_operator(op, 6, torch.float64, CPU, "A", "cg")
        np.testing.assert_allclose(f(tx).numpy(), want, rtol=1e-12)
    with pytest.raises(ValueError, match="cg: A has shape"):
        it_.linear_operator(torch.eye(5, dtype=torch.float64), 6, torch.float64, CPU, "A", "cg")
    with pytest.raises(TypeError, match="cg: A must be a matrix"):
        it_.linear_operator(None, 6, torch.float64, CPU, "A", "cg")
    with pytest.raises(TypeError, match="cg: A must be a matrix"):
        it_.linear_operator(3, 6, torch.float64, CPU, "A", "cg")


def test_preconditioner_kinds():
    d = torch.arange(1.0, 5.0, dtype=torch.float64)
    r = torch.ones(4, dtype=torch.float64)
    assert it_.preconditioner(None, 4, torch.float64, CPU, "cg") is None
    np.testing.assert_allclose(it_.preconditioner(_Pre(d), 4, torch.float64, CPU, "cg")(r), 1 / d.numpy())
    lu = spl.splu(sp.diags(d.numpy()).tocsc())
    np.testing.assert_allclose(it_.preconditioner(lu, 4, torch.float64, CPU, "cg")(r), 1 / d.numpy())
    np.testing.assert_allclose(it_.preconditioner(torch.diag(1 / d), 4, torch.float64, CPU, "cg")(r), 1 / d.numpy())
