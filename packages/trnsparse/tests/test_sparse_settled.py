"""The plain product ``A @ x`` settled on a CSR matrix after one full call (trnsci.settled, kind "owner": the
route kept on the matrix): results vs
scipy.sparse on every later call, and every state the full path depends on -- values modified in
place, arrays replaced, another x signature, autograd, the route choice, the backend -- sends the
call back through the full path.

Tolerances: sums of ~8 products of values in [0, 1): 1e-12 (float64) / 1e-5 (float32) of the
largest reference entry."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import trnsparse
from trnsci import routes
from trnsci.settled import _OWNED
from trnsci.testing import kernel_ran
from trnsparse import _host


def _case(dtype=torch.float64, m=300, n=257, seed=4):
    S = sp.random(m, n, density=0.03, format="csr", random_state=seed, dtype=np.float64)
    A = trnsparse.from_scipy(S).to(dtype)
    return S.astype(np.float32 if dtype == torch.float32 else np.float64), A


def _close(got, ref, dtype):
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    got = got.detach().numpy() if isinstance(got, torch.Tensor) else got
    assert np.abs(got - ref).max() <= tol * np.abs(ref).max()


@pytest.fixture
def full_calls(monkeypatch):
    """How many products ran the full path: through the Op's torch lowering, or building the runner that a
    settling call runs (and remembers)."""
    calls = []
    real, runner = _host.spmv, _host.spmv_runner
    monkeypatch.setattr(_host, "spmv", lambda *a: calls.append(1) or real(*a))
    monkeypatch.setattr(_host, "spmv_runner", lambda *a: calls.append(1) or runner(*a))
    return calls


@pytest.mark.parametrize("route", ["torch_csr", "sparsetools"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_later_calls_run_the_settled_route(route, dtype, full_calls):
    S, A = _case(dtype)
    x, X = torch.rand(257, dtype=dtype), torch.rand(257, 5, dtype=dtype)
    with routes.force(route):
        for _ in range(3):
            _close(trnsparse.spmv(A, x), S @ x.numpy(), dtype)
            _close(trnsparse.spmm(A, X), S @ X.numpy(), dtype)
            _close(A @ x, S @ x.numpy(), dtype)  # the operator reaches the same function
        assert len(full_calls) == 2  # one full call per signature (x 1-D, X 2-D)
        assert len(A.__dict__[_OWNED]) == 2
        # NumPy in -> NumPy out: the full call (a NumPy argument is never part of a settled key)
        y = trnsparse.spmv(A, x.numpy())
        assert isinstance(y, np.ndarray)
        _close(y, S @ x.numpy(), dtype)
        assert len(full_calls) == 3
    # leaving the force block may change the route: the settled runners are not used again
    _close(trnsparse.spmv(A, x), S @ x.numpy(), dtype)
    assert len(full_calls) == 4


def test_values_modified_in_place_or_replaced(full_calls):
    S, A = _case()
    x = torch.rand(257, dtype=torch.float64)
    trnsparse.spmv(A, x)
    trnsparse.spmv(A, x)
    assert len(full_calls) == 1
    with torch.no_grad():
        A.values.mul_(-3.0)  # in place: the version counter moves, the settled runner is not trusted
    _close(trnsparse.spmv(A, x), -3.0 * (S @ x.numpy()), torch.float64)
    assert len(full_calls) == 2
    _close(trnsparse.spmv(A, x), -3.0 * (S @ x.numpy()), torch.float64)  # settled again, on the new values
    A.values = torch.ones_like(A.values)  # replaced: the matrix is rebuilt, nothing settled survives
    assert _OWNED not in A.__dict__
    ones = sp.csr_array((np.ones(S.nnz), S.indices, S.indptr), shape=S.shape)
    _close(trnsparse.spmv(A, x), ones @ x.numpy(), torch.float64)
    A.col_indices = (A.col_indices + 1) % 257  # another pattern, same nnz
    Sp = sp.csr_array((A.values.numpy(), A.col_indices.numpy(), A.row_ptrs.numpy()), shape=S.shape)
    _close(trnsparse.spmv(A, x), Sp @ x.numpy(), torch.float64)


def test_other_signatures_and_arguments_take_the_full_path(full_calls):
    S, A = _case()
    x = torch.rand(257, dtype=torch.float64)
    y0 = torch.rand(300, dtype=torch.float64)
    trnsparse.spmv(A, x)
    n = len(full_calls)
    _close(trnsparse.spmv(A, x, alpha=2.0), 2.0 * (S @ x.numpy()), torch.float64)
    _close(trnsparse.spmv(A, x, y=y0, beta=0.5), S @ x.numpy() + 0.5 * y0.numpy(), torch.float64)
    _close(trnsparse.spmm(A, x[:, None].expand(257, 3)), S @ np.repeat(x.numpy()[:, None], 3, 1), torch.float64)
    assert len(full_calls) == n + 3
    # bad input after settling still gets the full checks
    with pytest.raises(TypeError, match="x has dtype float32"):
        trnsparse.spmv(A, x.float())
    with pytest.raises(ValueError, match="x must have 257 entries"):
        trnsparse.spmv(A, torch.rand(256, dtype=torch.float64))
    with pytest.raises(TypeError):
        trnsparse.spmv(A, x, alpha=torch.ones(2))


def test_autograd_is_never_settled():
    S, A = _case()
    x = torch.rand(257, dtype=torch.float64)
    trnsparse.spmv(A, x)  # settles the plain signature
    xg = x.clone().requires_grad_()
    trnsparse.spmv(A, xg).sum().backward()
    _close(xg.grad, S.T @ np.ones(300), torch.float64)  # d(sum A x)/dx = A^T 1
    vals = A.values.clone().requires_grad_()
    Ag = trnsparse.CSRMatrix(vals, A.col_indices, A.row_ptrs, A.shape)
    trnsparse.spmv(Ag, x)  # no grad needed by x, but values record a graph: torch path, not settled
    out = trnsparse.spmv(Ag, x)
    assert out.requires_grad
    out.sum().backward()
    rows = np.repeat(np.arange(300), np.diff(S.indptr))
    _close(vals.grad, x.numpy()[S.indices] * np.ones(300)[rows], torch.float64)


@pytest.mark.simulator
def test_a_device_backend_is_not_bypassed():
    S, A = _case(torch.float32)
    x = torch.rand(257, dtype=torch.float32)
    trnsparse.spmv(A, x)
    trnsparse.spmv(A, x)  # settled on the torch path
    with kernel_ran("csr_spmv_kernel"):
        y = trnsparse.spmv(A, x)
    _close(y, S @ x.numpy(), torch.float32)


def _move_one_column(A):
    """Move the last entry of the first non-empty row to a column the row lacks, in place in the public
    ``col_indices`` tensor; returns the SciPy matrix now held."""
    cols, ptrs = A.col_indices, A.row_ptrs.numpy()
    r0 = int(np.flatnonzero(np.diff(ptrs) > 0)[0])
    p0 = int(ptrs[r0 + 1]) - 1
    row = set(cols[ptrs[r0]:ptrs[r0 + 1]].tolist())
    newc = max(set(range(A.shape[1])) - row)
    cols[p0] = newc
    return sp.csr_array((A.values.numpy().copy(), cols.numpy().copy(), ptrs.copy()), shape=A.shape)


@pytest.mark.parametrize("origin", ["constructor", "spgemm"])
def test_indices_modified_in_place(origin):
    """The int32 host copy of the indices and the settled runner both follow an in-place change of
    col_indices -- also for a SciPy-kernel result whose indices are int32 until first read."""
    S, A = _case()
    if origin == "spgemm":
        E = trnsparse.eye_sparse(257, dtype=torch.float64)
        A = trnsparse.spgemm(A, E)  # int32 indices from SciPy's kernel (col_indices widened when read)
        assert A.__dict__["_cols"] is None
    x = torch.rand(257, dtype=torch.float64)
    X = torch.rand(257, 3, dtype=torch.float64)
    for _ in range(2):
        _close(trnsparse.spmv(A, x), S @ x.numpy(), torch.float64)
        _close(trnsparse.spmm(A, X), S @ X.numpy(), torch.float64)
    S2 = _move_one_column(A)
    for _ in range(2):
        _close(trnsparse.spmv(A, x), S2 @ x.numpy(), torch.float64)
        _close(trnsparse.spmm(A, X), S2 @ X.numpy(), torch.float64)


def test_measure_mode_times_both_routes_and_settles_the_choice(monkeypatch):
    """Measure mode: the first call of a shape class times sparsetools and torch's CSR product (as a
    settled call runs them), remembers and persists the choice; the result matches SciPy either way."""
    monkeypatch.setenv("TRNSCI_ROUTES", "measure")
    routes.forget()
    S, A = _case(m=700, n=650)  # nnz ~13650, x 8 columns: above SPMV_MEASURE_MIN_WORK
    X = torch.rand(650, 8, dtype=torch.float64)
    assert S.nnz * 8 >= _host.SPMV_MEASURE_MIN_WORK
    for _ in range(2):
        _close(trnsparse.spmm(A, X), S @ X.numpy(), torch.float64)
    (choice,) = [c for k, c in routes.remembered().items() if k.startswith("trnsparse.spmm|spmm")]
    assert choice.origin == "measured" and set(choice.times) == {"sparsetools", "torch_csr"}
    assert routes.load()[choice.key].route == choice.route  # persisted in the calibration file
    routes.forget()
