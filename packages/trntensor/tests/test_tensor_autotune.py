"""The numpy.matmul route of CPU GEMM steps (trnsci.routes family "trntensor.gemm"): results against
numpy.einsum, what it routes and what it leaves on torch, and that the plan names the route each
execution takes.

Timing is made deterministic: the routes' clock (trntensor._host._clock) is replaced by a counter that
the (spied) GEMM functions advance by a fixed cost per candidate, so the faster candidate is chosen
here, not measured. The suite runs with TRNSCI_ROUTES=estimate; these tests measure explicitly.
"""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest
import torch

import trnsci
import trntensor
from trnsci import routes
from trntensor import _host

E = sys.modules["trntensor.einsum"]  # the module (the package attribute is the function)


class Spy:
    """Counts GEMMs per route and plays the clock: each numpy/torch GEMM advances it by ``cost``."""

    def __init__(self, monkeypatch, numpy_cost=1.0, torch_cost=2.0):
        self.t = 0.0
        self.calls = []
        self.cost = {"numpy": numpy_cost, "torch": torch_cost}
        real_np, real_mm, real_bmm = E._np_gemm, E._mm, E._bmm
        monkeypatch.setattr(_host, "_clock", lambda cpu: self.t)
        monkeypatch.setattr(E, "_np_gemm", lambda a, b: self._call("numpy", real_np, a, b))
        monkeypatch.setattr(E, "_mm", lambda a, b, blas: self._call("torch", real_mm, a, b, blas))
        monkeypatch.setattr(E, "_bmm", lambda a, b, blas: self._call("torch", real_bmm, a, b, blas))

    def _call(self, route, fn, a, b, *rest):
        c = self.cost[route]
        self.t += c(a, b) if callable(c) else c
        self.calls.append(route)
        return fn(a, b, *rest)

    def take(self):
        calls, self.calls = self.calls, []
        return calls


#: one step's choice with one round (set_autotune(1)): a warm-up call of each candidate, then one round
TIMING = ["torch", "numpy", "torch", "numpy"]


@pytest.fixture
def measure(monkeypatch, tmp_path):
    monkeypatch.setenv("TRNSCI_CALIBRATION_FILE", str(tmp_path / "cal.json"))
    trntensor.clear_plan_cache()
    routes.forget()
    with routes.mode("measure"):
        yield
    trntensor.clear_plan_cache()
    routes.forget()


@pytest.fixture
def spy(monkeypatch, measure):
    prev = trntensor.set_autotune(1)  # one measured round per candidate
    yield Spy(monkeypatch)
    trntensor.set_autotune(prev)


@pytest.fixture
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _rand(shape, seed, dtype=np.float64):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _gemm_steps(plan):
    return [s for s in plan.steps if s.strategy in ("gemm", "batched_gemm")]


def _check(ref, got, dtype):
    # float64: order-of-summation differences only (<= ~1e3 terms of O(1)), ~1e-13 relative;
    # float32: u = 6e-8 times <= ~100 summed terms, so 1e-5 relative to the largest entry.
    tol = 1e-10 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), ref, rtol=tol, atol=tol * max(1.0, np.abs(ref).max()))


# every layout a GEMM step meets: transposed operands, batched, permuted, several steps, a diagonal,
# size-1 broadcasting, GEMM then reduction, a vector side (gemv)
ROUTED = [
    ("ij,jk->ik", [(5, 7), (7, 3)]),
    ("ij,jk->ki", [(5, 7), (7, 3)]),
    ("ji,jk->ik", [(7, 5), (7, 3)]),
    ("ij,kj->ik", [(5, 7), (3, 7)]),
    ("bij,bjk->bik", [(4, 5, 6), (4, 6, 3)]),
    ("bij,bkj->bik", [(4, 5, 6), (4, 3, 6)]),
    ("ibj,bjk->bik", [(5, 4, 6), (4, 6, 3)]),
    ("iaP,jbP->iajb", [(3, 4, 6), (3, 4, 6)]),
    ("mi,mnP,na->iaP", [(6, 2), (6, 6, 5), (6, 3)]),
    ("ij,jk,kl,lm->im", [(2, 3), (3, 4), (4, 5), (5, 2)]),
    ("iij,jk->ik", [(4, 4, 5), (5, 3)]),
    ("...ij,...jk->...ik", [(1, 3, 4), (2, 4, 5)]),
    ("ij,jk->i", [(5, 6), (6, 7)]),
    ("ij,j->i", [(5, 6), (6,)]),
    ("abcd,cdef->abef", [(2, 3, 4, 5), (4, 5, 3, 2)]),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("eq,shapes", ROUTED, ids=[c[0] for c in ROUTED])
def test_numpy_route_matches_numpy_einsum(spy, eq, shapes, dtype):
    arrays = [_rand(s, k, dtype) for k, s in enumerate(shapes)]
    ref = np.einsum(eq, *[a.astype(np.float64) for a in arrays], optimize=False)
    ts = [torch.from_numpy(a) for a in arrays]
    n_gemm = len(_gemm_steps(trntensor.plan_contraction(eq, *ts)))
    assert n_gemm >= 1
    ran = []
    for _ in range(3):  # the first execution chooses (numpy is "faster" on this clock), the others run it
        _check(ref, trntensor.einsum(eq, *ts), dtype)
        ran.append(spy.take())
    assert ran[0][:len(TIMING)] == TIMING and ran[0][-1] == "numpy"
    assert ran[1:] == [["numpy"] * n_gemm] * 2
    plan = trntensor.plan_contraction(eq, *ts)
    assert all(s.backend == "numpy" and s.reason.startswith("numpy.matmul") for s in _gemm_steps(plan))
    assert "route trntensor.gemm at" in _gemm_steps(plan)[0].reason


def test_noncontiguous_and_strided_operands(spy):
    # transposed views, a stepped slice (no unit stride: copied before numpy.matmul), broadcasts
    # (stride 0) and an as_strided diagonal, on the numpy route, against numpy.einsum on the same views
    def t(shape, seed):
        return torch.from_numpy(_rand(shape, seed))

    base = t((12, 10), 0)
    cases = [
        ("ij,jk->ik", [base.T[:6], t((12, 4), 1)]),
        ("ij,jk->ik", [base[::2, ::3], t((4, 5), 2)]),
        ("ij,jk->ik", [t((1, 6), 3).expand(5, 6), t((6, 4), 4)]),
        ("bij,bjk->bik", [t((1, 3, 4), 5).expand(6, 3, 4), t((6, 4, 2), 6)]),
        ("ij,jk->ik", [t((5, 6), 7), t((4, 6), 8).T]),
        ("bij,bjk->bik", [t((3, 6, 4), 9).transpose(1, 2), t((3, 2, 6), 10).transpose(1, 2)]),
        ("ij,jk->ik", [t((6, 6), 11).as_strided((6, 6), (7, 0)), t((6, 3), 12)]),
    ]
    for eq, ts in cases:
        trntensor.clear_plan_cache()  # some cases share a signature: tune each afresh
        copies = [x.clone() for x in ts]
        ref = np.einsum(eq, *[x.numpy() for x in ts], optimize=False)
        for _ in range(3):
            _check(ref, trntensor.einsum(eq, *ts), np.float64)
        assert spy.take()[-1] == "numpy", eq
        assert all(torch.equal(x, c) for x, c in zip(ts, copies))  # inputs untouched
    # NumPy hands a matrix to BLAS only with one unit stride: a transposed view goes as it is,
    # a stepped slice or a zero stride is copied first (else NumPy's unblocked loop would run)
    assert np.shares_memory(E._blas_view(base.T), base.numpy())
    assert not np.shares_memory(E._blas_view(base[::2, ::3]), base.numpy())
    assert E._blas_view(t((1, 6), 3).expand(5, 6)).strides == (48, 8)


def test_out_alpha_beta_and_kahan_on_the_numpy_route(spy):
    a, b = _rand((6, 5), 0), _rand((5, 4), 1)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    for _ in range(3):
        out = torch.full((6, 4), float("nan"), dtype=torch.float64)
        r = trntensor.einsum("ij,jk->ik", ta, tb, alpha=2.0, out=out)
        assert r is out
        _check(2 * a @ b, out, np.float64)
        c = torch.ones(6, 4, dtype=torch.float64)
        trntensor.einsum("ij,jk->ik", ta, tb, alpha=-1, beta=3, out=c)
        _check(3 - a @ b, c, np.float64)
    # the first execution chooses numpy (one choice for the GEMM class), every later one runs it
    assert spy.take() == TIMING + ["numpy"] * 6
    # kahan: float32 operands, float64 steps (eligible), float32 result rounded once
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    for _ in range(3):
        r = trntensor.einsum("ij,jk->ik", torch.from_numpy(a32), torch.from_numpy(b32), precision="kahan")
        assert r.dtype == torch.float32
        ref = (a32.astype(np.float64) @ b32.astype(np.float64)).astype(np.float32)
        np.testing.assert_allclose(r.numpy(), ref, rtol=1e-6, atol=1e-6)  # one float32 rounding
    assert spy.take()[-1] == "numpy"


def test_numpy_arrays_in_numpy_out(spy):
    a, b = _rand((4, 3, 5), 0), _rand((4, 5, 2), 1)
    for _ in range(3):
        r = trntensor.einsum("bij,bjk->bik", a, b)
        assert isinstance(r, np.ndarray)
        _check(np.einsum("bij,bjk->bik", a, b), r, np.float64)
    assert spy.take()[-1] == "numpy"
    assert trntensor.plan_contraction("bij,bjk->bik", a, b).steps[0].backend == "numpy"


def test_torch_kept_when_it_is_faster(monkeypatch, measure):
    prev = trntensor.set_autotune(1)
    try:
        spy = Spy(monkeypatch, numpy_cost=2.0, torch_cost=1.0)
        a, b = torch.randn(5, 6, dtype=torch.float64), torch.randn(6, 4, dtype=torch.float64)
        for _ in range(3):
            trntensor.einsum("ij,jk->ik", a, b)
        assert spy.take() == TIMING + ["torch"] * 3
        s = trntensor.plan_contraction("ij,jk->ik", a, b).steps[0]
        assert s.backend == "torch" and s.reason.startswith("torch.mm") and "route trntensor.gemm" in s.reason
        assert "torch 1,000,000.0 us, numpy 2,000,000.0 us" in s.reason  # the times that chose it (clock: s)
        # a 5% gain is not enough to leave torch (trnsci.routes' margin: 10%)
        trntensor.clear_plan_cache()
        routes.forget()
        spy.cost = {"numpy": 0.95, "torch": 1.0}
        for _ in range(3):
            trntensor.einsum("ij,jk->ik", a, b)
        assert spy.take()[-1] == "torch"
    finally:
        trntensor.set_autotune(prev)


def test_one_choice_per_class_and_thread_count(spy, monkeypatch, tmp_path):
    # a second plan holding a GEMM of the same class takes the remembered choice untimed; forgetting the
    # routes (trnsci.routes.forget) drops every plan's settled routes: the next call asks trnsci.routes
    # again (here with no calibration file to read: it measures again)
    a, b = torch.randn(5, 6, dtype=torch.float64), torch.randn(6, 4, dtype=torch.float64)
    trntensor.einsum("ij,jk->ik", a, b)
    assert spy.take() == TIMING + ["numpy"]
    trntensor.einsum("pq,qr->pr", a, b)  # another plan, the same GEMM class
    assert spy.take() == ["numpy"]
    spy.cost = {"numpy": 1.0, "torch": 0.5}
    trntensor.einsum("ij,jk->ik", a, b)
    assert spy.take() == ["numpy"]  # chosen once: not re-timed
    monkeypatch.setenv("TRNSCI_CALIBRATION_FILE", str(tmp_path / "other.json"))
    routes.forget()
    trntensor.einsum("ij,jk->ik", a, b)
    assert spy.take() == TIMING + ["torch"]
    s = trntensor.plan_contraction("ij,jk->ik", a, b).steps[0]
    assert s.backend == "torch" and "torch 500,000.0 us, numpy 1,000,000.0 us" in s.reason
    _check(a.numpy() @ b.numpy(), trntensor.einsum("ij,jk->ik", a, b), np.float64)


def test_estimate_mode_times_nothing(monkeypatch):
    spy = Spy(monkeypatch)
    trntensor.clear_plan_cache()
    a, b = torch.randn(5, 6, dtype=torch.float64), torch.randn(6, 4, dtype=torch.float64)
    with routes.mode("estimate"):
        for _ in range(3):
            trntensor.einsum("ij,jk->ik", a, b)
        assert spy.take() == ["torch"] * 3
        s = trntensor.plan_contraction("ij,jk->ik", a, b).steps[0]
        assert s.backend == "torch" and "TRNSCI_ROUTES=estimate" in s.reason
    trntensor.clear_plan_cache()


def test_autograd_stays_on_torch(spy):
    a = torch.randn(5, 6, dtype=torch.float64, requires_grad=True)
    b = torch.randn(6, 4, dtype=torch.float64)
    for _ in range(4):
        r = trntensor.einsum("ij,jk->ik", a, b)
    assert spy.take() == ["torch"] * 4
    r.sum().backward()
    ref = torch.ones(5, 4, dtype=torch.float64) @ b.T  # d/da sum(a @ b)
    torch.testing.assert_close(a.grad, ref, rtol=1e-12, atol=1e-12)
    s = trntensor.plan_contraction("ij,jk->ik", a, b).steps[0]
    assert s.backend == "torch" and "autograd stays on torch" in s.reason
    with torch.no_grad():  # a leaf that requires grad cannot be viewed by NumPy: still torch
        trntensor.einsum("ij,jk->ik", a, b)
    assert spy.take() == ["torch"]


def test_autotune_off(spy):
    a, b = torch.randn(5, 6, dtype=torch.float64), torch.randn(6, 4, dtype=torch.float64)
    for _ in range(3):
        trntensor.einsum("ij,jk->ik", a, b, autotune=False)
    assert spy.take() == ["torch"] * 3
    s = trntensor.plan_contraction("ij,jk->ik", a, b, autotune=False).steps[0]
    assert s.backend == "torch" and "route" not in s.reason
    prev = trntensor.set_autotune(False)
    try:
        assert trntensor.get_autotune() == 0
        for _ in range(3):
            trntensor.einsum("ij,jk->ik", a, b)
        assert spy.take() == ["torch"] * 3
        # autotune=True on one call while the setting is off: the default rounds (5 per candidate)
        for _ in range(2):
            trntensor.einsum("ij,jk->ik", a, b, autotune=True)
        rounds = [["torch", "numpy"] if r % 2 == 0 else ["numpy", "torch"] for r in range(_host._AUTOTUNE_DEFAULT)]
        assert spy.take() == ["torch", "numpy"] + sum(rounds, []) + ["numpy"] * 2
    finally:
        trntensor.set_autotune(prev)


def test_autotune_settings_are_validated(monkeypatch):
    a = torch.randn(2, 3)
    with pytest.raises(TypeError, match="autotune"):
        trntensor.einsum("ij->i", a, autotune="yes")
    with pytest.raises(TypeError, match="autotune"):
        trntensor.plan_contraction("ij->i", a, autotune=1)
    with pytest.raises(ValueError, match="set_autotune: mode must be >= 0"):  # names its own parameter
        trntensor.set_autotune(-1)
    with pytest.raises(TypeError, match="set_autotune: mode"):
        trntensor.set_autotune(2.5)
    d = _host._AUTOTUNE_DEFAULT
    assert [_host._autotune_count(v, "env") for v in ("off", "0", "ON", "incremental", "5", "")] == [0, 0, d, d, 5, d]
    with pytest.raises(ValueError, match="'maybe'"):
        _host._autotune_count("maybe", "env")
    monkeypatch.setenv("TRNTENSOR_AUTOTUNE", "maybe")
    with pytest.warns(UserWarning, match="autotuning stays on"):
        assert _host._autotune_from_env() == d
    monkeypatch.setenv("TRNTENSOR_AUTOTUNE", "off")
    assert _host._autotune_from_env() == 0


def test_large_steps_beside_torch_threads_stay_on_torch(spy):
    # M*N*K = 80*100*80 = 640000 >= 2^19: OpenBLAS would thread it, so with two torch threads it is not tried
    a, b = torch.randn(80, 80, dtype=torch.float64), torch.randn(80, 100, dtype=torch.float64)
    n = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        for _ in range(3):
            trntensor.einsum("ij,jk->ik", a, b)
        assert spy.take() == ["torch"] * 3
        s = trntensor.plan_contraction("ij,jk->ik", a, b).steps[0]
        assert s.backend == "torch" and "not a route at 2 threads" in s.reason
        torch.set_num_threads(1)  # decided per thread count: measured afresh at one thread
        s = trntensor.plan_contraction("ij,jk->ik", a, b).steps[0]
        assert "route trntensor.gemm at 1 thread: not measured yet" in s.reason
        for _ in range(3):
            trntensor.einsum("ij,jk->ik", a, b)
        assert spy.take() == TIMING + ["numpy"] * 3
        assert trntensor.plan_contraction("ij,jk->ik", a, b).steps[0].backend == "numpy"
    finally:
        torch.set_num_threads(n)


def test_not_routed_dd_kernels_and_other_devices(spy):
    a, b = torch.randn(5, 6, dtype=torch.float64), torch.randn(6, 4, dtype=torch.float64)
    for _ in range(3):
        trntensor.einsum("ij,jk->ik", a, b, precision="dd")
    assert "numpy" not in spy.take()
    assert trntensor.plan_contraction("ij,jk->ik", a, b, precision="dd").steps[0].backend == "torch"
    with trnsci.use_backend("simulator"):  # trnblas's kernels take the GEMM steps: no tuning
        f32 = a.float(), b.float()
        for _ in range(3):
            trntensor.einsum("ij,jk->ik", *f32)
        assert trntensor.plan_contraction("ij,jk->ik", *f32).steps[0].backend == "simulator"
    assert "numpy" not in spy.take()
    m = [torch.empty(5, 6, device="meta"), torch.empty(6, 4, device="meta")]
    for _ in range(3):
        assert trntensor.einsum("ij,jk->ik", *m).device.type == "meta"
    assert trntensor.plan_contraction("ij,jk->ik", *m).steps[0].backend == "torch"
    assert "numpy" not in spy.take()
    i = [torch.ones(5, 6, dtype=torch.int64), torch.ones(6, 4, dtype=torch.int64)]
    for _ in range(3):
        assert int(trntensor.einsum("ij,jk->ik", *i)[0, 0]) == 6
    assert "numpy" not in spy.take()


def test_concurrent_tuning_is_correct(measure):
    # real clock; several threads drive one plan through its first (choosing) execution at once
    prev = trntensor.set_autotune(2)
    a, b = _rand((3, 20, 30), 0), _rand((3, 30, 10), 1)
    ref = np.einsum("bij,bjk->bik", a, b)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    errors = []

    def work():
        for _ in range(10):
            r = trntensor.einsum("bij,bjk->bik", ta, tb).numpy()
            if not np.allclose(r, ref, rtol=1e-12, atol=1e-12):
                errors.append(r)

    try:
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        s = trntensor.plan_contraction("bij,bjk->bik", ta, tb).steps[0]
        assert s.backend in ("torch", "numpy") and "(measured: " in s.reason
    finally:
        trntensor.set_autotune(prev)


def test_decisions_are_shared_through_trnsci_routes(spy, monkeypatch, tmp_path):
    """A choice is stored with the calibration file (trnsci.routes); a new process -- here: a cleared plan
    cache and forgotten routes -- starts decided, with nothing timed."""
    a, b = torch.from_numpy(_rand((5, 7), 0)), torch.from_numpy(_rand((7, 3), 1))
    for _ in range(3):
        trntensor.einsum("ij,jk->ik", a, b)
    assert spy.take() == TIMING + ["numpy"] * 3
    stored = [c for k, c in routes.load().items() if k.startswith("trntensor.gemm|")]
    assert [c.route for c in stored] == ["numpy"] and stored[0].times == {"torch": 2.0, "numpy": 1.0}
    trntensor.clear_plan_cache()
    routes.forget()
    trntensor.einsum("ij,jk->ik", a, b)
    assert spy.take() == ["numpy"]  # decided from the file: nothing timed
    assert "calibration:" in trntensor.plan_contraction("ij,jk->ik", a, b).steps[0].reason


def test_choice_is_robust_where_a_candidate_threads(monkeypatch, measure, one_thread):
    """At one torch thread a step of >= 2^19 multiply-adds is threaded by OpenBLAS: timed by wall time and
    chosen robustly -- numpy.matmul, faster in median and best round but with one stalled round, is not
    taken; a small step (on the calling thread, CPU time) with the same times takes it."""
    from trnsci import hostblas

    if hostblas.OPENBLAS_ONE:
        pytest.skip("OpenBLAS held at one thread by the environment: every step is timed on the caller")

    def stalling(candidates, **kw):
        for f in candidates.values():
            f()
        med = {"torch": 1e-3, "numpy": 0.5e-3}
        best = {"torch": 1e-3, "numpy": 0.4e-3}
        spread = {"torch": 0.0, "numpy": 4.0}  # numpy's slowest round: 2.4 ms
        return med, spread, best

    monkeypatch.setattr(routes, "measure", stalling)
    big = [torch.from_numpy(_rand((80, 80), 0)), torch.from_numpy(_rand((80, 100), 1))]
    small = [torch.from_numpy(_rand((5, 6), 2)), torch.from_numpy(_rand((6, 4), 3))]
    for ts, backend in ((big, "torch"), (small, "numpy")):
        _check(ts[0].numpy() @ ts[1].numpy(), trntensor.einsum("ij,jk->ik", *ts), np.float64)
        assert trntensor.plan_contraction("ij,jk->ik", *ts).steps[0].backend == backend
