"""trnsolver.eigh's float64 route between SciPy's dsyevd and torch.linalg.eigh is a measured
trnsci.routes choice (#23): both routes give scipy.linalg.eigh's eigenvalues, the measurement picks by
its (injected) times, and estimate mode runs torch (the obvious call) without timing.

Tolerance: eigenvalues of a symmetric matrix with entries O(1) and n = 37 agree with the reference to
n * eps * ||A||_2 (backward-stable solvers, Weyl's bound), taken as 1e-12 * max|w|.
"""

import numpy as np
import scipy.linalg as sl
import torch

import trnsolver
from trnsci import routes
from trnsolver import _host


def _sym(n=37):
    X = torch.randn(n, n, generator=torch.Generator().manual_seed(n), dtype=torch.float64)
    return (X + X.T) / 2


def _count(monkeypatch):
    calls = []
    real = _host.syevd
    monkeypatch.setattr(_host, "syevd", lambda *a: calls.append(1) or real(*a))
    return calls


def test_both_routes_match_scipy(monkeypatch):
    A = _sym()
    ref = sl.eigh(A.numpy(), eigvals_only=True)
    calls = _count(monkeypatch)
    for name, used in (("lapack", 1), ("torch", 0)):
        calls.clear()
        with routes.force(name):
            w, V = trnsolver.eigh(A)
            wv = trnsolver.eigvalsh(A)
        assert len(calls) == 2 * used
        np.testing.assert_allclose(w.numpy(), ref, rtol=0, atol=1e-12 * np.abs(ref).max())
        np.testing.assert_allclose(wv.numpy(), ref, rtol=0, atol=1e-12 * np.abs(ref).max())
        np.testing.assert_allclose((A @ V).numpy(), (V * w).numpy(), rtol=0, atol=1e-11)


def test_estimate_mode_runs_torch_untimed(monkeypatch):
    calls = _count(monkeypatch)
    with routes.mode("estimate"):
        trnsolver.eigvalsh(_sym(40))
    assert calls == []  # nothing timed, and the call ran torch


def test_measured_choice_follows_the_times(monkeypatch):
    """A fake clock makes dsyevd look 3x faster (deterministic: no real timing compared)."""
    A = _sym(45)
    seen = {}

    def fake_choose(family, cls, cands, *, default, worth_timing, **kw):
        slow = {"lapack": 1, "torch": 3}
        state = {"t": 0.0}

        def clock():
            return state["t"]

        def wrap(name, fn):
            def run():
                fn()
                state["t"] += slow[name] * 1e-3
            return run

        seen["family"], seen["class"] = family, cls
        times = routes.measure({k: wrap(k, f) for k, f in cands.items()}, rounds=3, clock=clock)[0]
        seen["timed"] = len(calls)
        return routes.Choice(routes.route_key(family, cls), routes.pick(times, default), "measured", default=default)

    monkeypatch.setattr(_host.routes, "choose", fake_choose)
    calls = _count(monkeypatch)
    w = trnsolver.eigvalsh(A)
    assert (seen["family"], seen["class"]) == ("trnsolver.eigh", ("float64", 64, False))
    assert seen["timed"] >= 4 and len(calls) == seen["timed"] + 1  # timed, then the call itself ran dsyevd
    ref = sl.eigh(A.numpy(), eigvals_only=True)
    np.testing.assert_allclose(w.numpy(), ref, rtol=0, atol=1e-12 * np.abs(ref).max())
