"""Krylov solvers on a CPU ``torch.sparse_csr`` matrix: the product ``A x`` is a measured
``trnsci.routes`` choice between torch's CSR product and SciPy's (#23). Both routes follow SciPy's
iterations: on the same float64 Poisson system they stop after SciPy's number of iterations (the
callback's count), and every iterate agrees with SciPy's to a few units of the residual tolerance
(the two products sum a row in their own order: rounding-level differences, amplified at most by
cond(A) ~ 60 for Poisson 12x12, so 1e-10 * cond on iterates of size O(1)).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spl
import torch

import trnsolver
from trnsci import iterative as it_
from trnsci import routes
from trnsci.testing import choice_at_cost


def _poisson(m):
    T = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(m, m))
    return (sp.kron(sp.eye(m), T) + sp.kron(T, sp.eye(m))).tocsr()


def _csr(A, dtype=torch.float64):
    return torch.sparse_csr_tensor(torch.from_numpy(A.indptr).long(), torch.from_numpy(A.indices).long(),
                                   torch.from_numpy(A.data).to(dtype), A.shape)


SOLVERS = {"cg": (trnsolver.cg, spl.cg), "bicgstab": (trnsolver.bicgstab, spl.bicgstab)}


@pytest.mark.parametrize("route", ["torch", "scipy"])
@pytest.mark.parametrize("name", list(SOLVERS))
@pytest.mark.parametrize("precond", [False, True])
def test_iterates_and_counts_are_scipys(route, name, precond):
    ours, theirs = SOLVERS[name]
    A = _poisson(12)
    b = np.random.default_rng(3).standard_normal(A.shape[0])
    kw = {}
    if precond:
        if name == "cg":
            d = A.diagonal()
            kw = {"M": sp.diags(1.0 / d).tocsr()}
        else:
            ilu = spl.spilu(A.tocsc(), drop_tol=1e-2, fill_factor=1.0)
            kw = {"M": spl.LinearOperator(A.shape, ilu.solve)}
    ref = []
    xs, info = theirs(A, b, rtol=1e-10, maxiter=500, callback=lambda xk: ref.append(xk.copy()), **kw)
    assert info == 0
    seen = []
    with routes.force(route):
        x, it, rr = ours(_csr(A), torch.from_numpy(b), tol=1e-10, maxiter=500,
                         callback=lambda xk: seen.append(xk.clone().numpy()), **kw)
    # SciPy's BiCGSTAB returns from the half step (||s|| small) without calling the callback; ours
    # calls it there too (every iteration, documented), so its count may be SciPy's plus that one
    assert len(seen) == it and it in (len(ref), len(ref) + 1)
    for mine, theirs_k in zip(seen + [x.numpy()], ref + [xs]):
        np.testing.assert_allclose(mine, theirs_k, rtol=0, atol=60 * 1e-10 * max(1.0, np.abs(theirs_k).max()))
    assert rr <= 1e-10


def test_scipy_route_is_scipys_product():
    A = _poisson(5)
    At = _csr(A)
    x = torch.from_numpy(np.random.default_rng(0).standard_normal(25))
    with routes.force("scipy"):
        mv = it_.linear_operator(At, 25, torch.float64, torch.device("cpu"), "A", "cg")
        y = mv(x)
    np.testing.assert_array_equal(y.numpy(), A @ x.numpy())  # the same sparsetools loop: bit for bit


@pytest.mark.parametrize("faster", ["torch", "scipy"])
def test_measured_choice_follows_the_times(monkeypatch, faster):
    """A fake clock makes one product 3x faster (deterministic: no real timing compared)."""
    seen = {}
    real_choose = routes.choose

    def fake_choose(family, cls, cands, *, default, robust, **kw):
        if family != "trnsci.csr_matvec":  # the loop's own route (torch when not timed)
            return real_choose(family, cls, cands, default=default, robust=robust, **kw)
        seen.update(family=family, cls=cls, robust=robust)
        return choice_at_cost(family, cls, cands, default, {faster: 1, ({"torch", "scipy"} - {faster}).pop(): 3})

    monkeypatch.setattr(routes, "choose", fake_choose)
    it_._forget_csr_routes()
    A = _poisson(6)
    At = _csr(A)
    calls = []
    from scipy.sparse import _sparsetools  # SciPy's product loop, which the host route calls

    real = _sparsetools.csr_matvec
    monkeypatch.setattr(_sparsetools, "csr_matvec", lambda *a: calls.append(1) or real(*a))
    x, it, rr = trnsolver.cg(At, torch.ones(36, dtype=torch.float64), tol=1e-10)
    assert seen["family"] == "trnsci.csr_matvec" and seen["cls"] == ("float64", 64, 256)
    assert seen["robust"] == (torch.get_num_threads() > 1)
    timed = len(calls)
    trnsolver.cg(At, torch.ones(36, dtype=torch.float64), tol=1e-10)  # decided: no timing again
    assert (len(calls) > timed) == (faster == "scipy")
    np.testing.assert_allclose(x.numpy(), spl.spsolve(A.tocsc(), np.ones(36)), rtol=0, atol=1e-8)
    it_._forget_csr_routes()
