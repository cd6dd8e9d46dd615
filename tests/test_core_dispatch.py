"""trnsci.dispatch: thresholds, decisions, calibration, fallback and REQUIRE_NKI."""

from __future__ import annotations

import contextlib
import inspect
import json
import math
import warnings

import pytest

import trnsci
from trnsci import dispatch
from trnsci import nki as tnki
from trnsci.testing import scratch_ops

OP = "trntensor.test_dispatch_op"  # a private op; the library prefix picks the scope
dispatch.register(OP, "flops", 1000.0, "test op")


@pytest.fixture(autouse=True)
def _forget_test_ops():
    """Ops a test builds under a library's prefix must not outlive it: each
    library's plans test lists that library's kernel ops and would see them."""
    with scratch_ops():
        yield


@pytest.fixture
def device(monkeypatch):
    """Pretend a NeuronCore with the real toolchain is present."""
    monkeypatch.setattr(tnki, "HAS_NKI", True)
    monkeypatch.setattr(tnki, "has_neuron_device", lambda: True)


@pytest.fixture
def calfile(tmp_path, monkeypatch):
    path = tmp_path / "cal" / "calibration.json"
    monkeypatch.setenv("TRNSCI_CALIBRATION_FILE", str(path))
    return path


def test_auto_without_device_is_torch():
    d = trnsci.decide(OP, 1e12)
    assert d.backend == "torch"
    assert "no NeuronCore" in d.reason
    assert d.requested.name == "auto"


def test_auto_with_device_uses_threshold(device):
    assert trnsci.decide(OP, 999).backend == "torch"
    d = trnsci.decide(OP, 1000)
    assert d.backend == "nki" and d.threshold == 1000.0
    assert "threshold 1000" in d.reason and "default" in d.reason
    assert "below threshold" in trnsci.decide(OP, 10).reason


def test_env_override_threshold(device, monkeypatch):
    var = dispatch.env_var(OP)
    assert var == "TRNSCI_MIN_NKI_TRNTENSOR_TEST_DISPATCH_OP"
    monkeypatch.setenv(var, "50")
    assert dispatch.threshold(OP) == (50.0, f"env:{var}")
    assert trnsci.decide(OP, 60).backend == "nki"
    monkeypatch.setenv(var, "lots")
    with pytest.raises(ValueError, match=var):
        trnsci.decide(OP, 60)


def test_calibration_round_trip(device, calfile):
    assert dispatch.calibration_path() == calfile
    assert dispatch.load_calibration() == {}
    dispatch.write_calibration({OP: 5e3}, measured_at="now")
    raw = json.loads(calfile.read_text())
    assert raw == {"thresholds": {OP: 5000.0}, "measured_at": "now"}
    assert dispatch.threshold(OP) == (5000.0, f"calibration:{calfile}")
    assert trnsci.decide(OP, 4000).backend == "torch"
    assert trnsci.decide(OP, 6000).backend == "nki"


def test_calibration_env_beats_file(calfile, monkeypatch):
    dispatch.write_calibration({OP: 5e3})
    monkeypatch.setenv(dispatch.env_var(OP), "7")
    assert dispatch.threshold(OP)[0] == 7.0


def test_calibration_rejects_unknown_and_malformed(calfile):
    with pytest.raises(ValueError, match="unregistered"):
        dispatch.write_calibration({"trnblas.no_such_op": 1})
    calfile.parent.mkdir(parents=True)
    calfile.write_text("{not json")
    with pytest.raises(ValueError, match="malformed"):
        dispatch.threshold(OP)


def test_xdg_default_location(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert dispatch.calibration_path() == tmp_path / "trnsci" / "calibration.json"


def test_explicit_backends():
    with trnsci.use_backend("torch"):
        assert trnsci.decide(OP, 1e12).backend == "torch"
    with trnsci.use_backend("simulator"):
        d = trnsci.decide(OP, 1)  # size never matters for the simulator
        assert d.backend == "simulator" and "from with" in d.reason


def test_nki_without_device_is_a_clear_error():
    with trnsci.use_backend("nki"):
        with pytest.raises(RuntimeError, match="no NeuronCore"):
            trnsci.decide(OP, 1e12)


def test_unsupported_call_routes_to_torch_with_reason():
    with trnsci.use_backend("simulator"):
        d = trnsci.decide(OP, 1e12, supported=False, why_not="float64 has no Tensor Engine path")
    assert d.backend == "torch" and "float64" in d.reason


def test_require_nki_turns_every_fallback_into_an_error(monkeypatch):
    monkeypatch.setenv("TRNSCI_REQUIRE_NKI", "1")
    with pytest.raises(trnsci.NkiRequiredError, match="no NeuronCore"):
        trnsci.decide(OP, 1e12)
    with trnsci.use_backend("simulator"):
        with pytest.raises(trnsci.NkiRequiredError, match="float64"):
            trnsci.decide(OP, 1, supported=False, why_not="float64")
    with pytest.raises(trnsci.NkiRequiredError, match="kernel failed"):
        dispatch.fallback(OP, RuntimeError("bad tile"))


def test_unknown_op():
    with pytest.raises(ValueError, match="unknown operation"):
        trnsci.decide("trnblas.nonexistent", 1)


def test_register_conflict():
    with pytest.raises(ValueError, match="already registered"):
        dispatch.register(OP, "bytes", 1.0)
    with pytest.raises(ValueError, match="library"):
        dispatch.register("nodot", "flops", 1.0)


# ------------------------------------------------------------------ Op

def _make_op(name, kernel_impl, **nki_decl):
    """An op whose size is its argument; the torch lowering tags its result."""
    op = dispatch.Op(name, "n", 10, size=lambda x: x)

    @op.lowering("torch")
    def _(x):
        return ("torch", x)

    if kernel_impl is not None:
        op.lowering("nki", **nki_decl)(kernel_impl)
    return op


def test_op_runs_chosen_lowering():
    op = _make_op("trntensor.test_op_a", lambda x: ("kernel", x), supports=lambda x: "odd" if x % 2 else None)
    assert op(100) == ("torch", 100)  # auto, no device
    with trnsci.use_backend("simulator"):
        assert op(2) == ("kernel", 2)
        assert op(3) == ("torch", 3)  # the kernel cannot take it: supports() said why
        assert op.plan(2).backend == "simulator"
        p = op.plan(3)
        assert p.backend == "torch" and "kernel unsupported: odd" in p.reason and p.n == 3 == p.size


def test_op_reserves_no_keyword():
    """A library keyword such as trnrand's ``size=`` reaches the lowerings untouched."""
    op = dispatch.Op("trnrand.test_op_size_kw", "samples", 1e6, size=lambda *, size, seed: math.prod(size))
    op.lowering("torch")(lambda *, size, seed: ("torch", size, seed))
    op.lowering("nki")(lambda *, size, seed: ("kernel", size, seed))
    assert op(size=(2, 3), seed=1) == ("torch", (2, 3), 1)
    with trnsci.use_backend("simulator"):
        assert op(size=(2, 3), seed=1) == ("kernel", (2, 3), 1)
        assert op.plan(size=(2, 3), seed=1).samples == 6


def test_second_lowering_for_a_backend_is_an_error():
    op = _make_op("trntensor.test_op_dup", lambda x: ("kernel", x))
    with pytest.raises(ValueError, match="already registered"):
        op.lowering("nki")(lambda x: x)
    with pytest.raises(ValueError, match="already registered"):
        op.lowering("torch")(lambda x: x)
    with pytest.raises(ValueError, match="NKI lowering"):
        dispatch.Op("trntensor.test_op_dup2", "n", 1).lowering("torch", dtypes=())


def test_override_swaps_and_restores_a_lowering():
    op = _make_op("trntensor.test_op_override", lambda x: ("kernel", x))
    with trnsci.use_backend("simulator"):
        with op.override("nki", lambda x: ("spy", x)):
            assert op(1) == ("spy", 1)
        with op.override("nki", None):
            assert not op.has_kernel and op(1) == ("torch", 1)
        assert op(1) == ("kernel", 1)


def test_dtypes_declared_on_the_lowering_route_other_dtypes_to_torch():
    import torch

    op = dispatch.Op("trntensor.test_op_dtypes", "n", 1, size=lambda t: t.numel())
    op.lowering("torch")(lambda t: "torch")
    op.lowering("nki", dtypes=(torch.float32,))(lambda t: "kernel")
    with trnsci.use_backend("simulator"):
        assert op(torch.ones(2)) == "kernel"
        assert op(torch.ones(2, dtype=torch.float64)) == "torch"
        p = op.plan(torch.ones(2, dtype=torch.float64))
    assert "dtype float64" in p.reason and "float32" in p.reason and "no float64" in p.reason


def test_op_without_kernel_says_so():
    op = _make_op("trntensor.test_op_b", None)
    with trnsci.use_backend("simulator"):
        d = op.decide(5)
    assert d.backend == "torch" and "no NKI kernel" in d.reason


def test_kernel_failure_falls_back_with_one_warning_per_cause():
    calls = []

    def broken(x):
        calls.append(x)
        raise RuntimeError(f"tile overflow {x % 2}")

    op = _make_op("trntensor.test_op_c", broken)
    with trnsci.use_backend("simulator"):
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            results = [op(i) for i in range(4)]
    assert results == [("torch", i) for i in range(4)]  # the right answer every time
    assert len(calls) == 4  # the kernel was tried each time
    fallbacks = [w for w in rec if issubclass(w.category, trnsci.NkiFallbackWarning)]
    assert len(fallbacks) == 2  # two distinct causes: "... 0" and "... 1"
    assert "tile overflow" in str(fallbacks[0].message)


def test_fallback_warning_points_at_the_users_line():
    import torch

    import trnblas
    from trnblas.level3 import GEMM

    def broken(*args):
        raise RuntimeError("test_core_dispatch: deliberately broken kernel for the stacklevel check")

    A = torch.ones(3, 3)
    with trnsci.use_backend("simulator"), GEMM.override("nki", broken):
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            line = inspect.currentframe().f_lineno + 1
            trnblas.gemm(1.0, A.numpy(), A.numpy())  # through numpy_io, gemm, _run_gemm, Op.__call__, execute
    (w,) = [w for w in rec if issubclass(w.category, trnsci.NkiFallbackWarning)]
    assert (w.filename, w.lineno) == (__file__, line)


def test_kernel_failure_raises_under_require_nki(monkeypatch):
    monkeypatch.setenv("TRNSCI_REQUIRE_NKI", "true")

    def broken(x):
        raise RuntimeError("nope")

    op = _make_op("trntensor.test_op_d", broken)
    with trnsci.use_backend("simulator"):
        with pytest.raises(trnsci.NkiRequiredError, match="nope"):
            op(1)


def test_op_sets_kernel_target():
    seen = []
    op = _make_op("trntensor.test_op_e", lambda x: seen.append(tnki._target.get()))
    with trnsci.use_backend("simulator"):
        op(1)
    assert seen == ["simulator"]
    assert tnki._target.get() is None


def test_lowering_supports_predicate_routes_to_torch_up_front():
    calls = []

    def supports(x):
        calls.append(x)
        return None if x < 10 else f"x={x} exceeds SBUF"

    op = dispatch.Op("trntensor.test_op_f", "n", 1)
    op.lowering("torch")(lambda x: ("torch", x))
    op.lowering("nki", supports=supports)(lambda x: ("kernel", x))
    with trnsci.use_backend("simulator"):
        assert op(3) == ("kernel", 3)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no fallback warning: it never tried the kernel
            assert op(12) == ("torch", 12)
    calls.clear()
    with trnsci.use_backend("torch"):
        assert op(12) == ("torch", 12)
    assert calls == []  # the predicate is not consulted off the kernel path


def _counting_op(name):
    """An op with a kernel whose size/dtype/supports/describe record every call."""
    seen = []

    def note(what, value):
        def fn(*args, **kwargs):
            seen.append(what)
            return value
        return fn

    op = dispatch.Op(name, "n", 10, size=note("size", 5), dtype=note("dtype", None),
                     describe=note("describe", ""))
    op.lowering("torch")(lambda x: ("torch", x))
    op.lowering("nki", supports=note("supports", None))(lambda x: ("kernel", x))
    return op, seen


@pytest.mark.parametrize("has_device", [False, True])
@pytest.mark.parametrize("require", ["", "1"])
@pytest.mark.parametrize("setting", ["torch", "auto", "simulator", "nki"])
def test_call_short_cut_agrees_with_the_rule(monkeypatch, setting, require, has_device):
    """Op.__call__ skips the size/dtype/supports work only where the full rule would say torch."""
    monkeypatch.setattr(tnki, "HAS_NKI", has_device)
    monkeypatch.setattr(tnki, "has_neuron_device", lambda: has_device)
    if require:
        monkeypatch.setenv("TRNSCI_REQUIRE_NKI", require)
    op, seen = _counting_op("trntensor.test_op_shortcut")
    with trnsci.use_backend(setting):
        settled = dispatch._settled_on_torch(trnsci.backend.resolve("trntensor").name)
        try:
            rule = op.decide(3).backend
        except RuntimeError:  # nki without a device, or REQUIRE_NKI with no kernel run
            rule = "error"
        assert settled == (setting == "torch" or (setting == "auto" and not has_device and not require))
        assert op.on_torch() == settled  # the per-call probe gives the rule's answer
        if settled:
            assert rule == "torch"
            seen.clear()
            assert op(3) == ("torch", 3)
            assert seen == []  # nothing about the arguments was worked out
            assert op.plan(3).size == 5  # ... but a plan still reports the size
        elif rule == "error":
            with pytest.raises(RuntimeError):
                op(3)
        else:  # the full rule ran in the call, too (auto with a device: size 5 below threshold 10)
            seen.clear()
            assert op(3) == ("torch" if rule == "torch" else "kernel", 3)
            assert (setting, rule) != ("auto", "nki") and ("size" in seen) == (setting == "auto")


def test_call_reads_the_environment_afresh(monkeypatch):
    """Caching on the per-call path must not hide a change of environment from the next call."""
    op, _ = _counting_op("trntensor.test_op_env")
    assert op(1) == ("torch", 1)  # auto, no NeuronCore
    monkeypatch.setenv("TRNSCI_REQUIRE_NKI", " Yes ")
    with pytest.raises(trnsci.NkiRequiredError):
        op(1)
    monkeypatch.setenv("TRNSCI_REQUIRE_NKI", "0")
    assert op(1) == ("torch", 1)
    monkeypatch.setenv("TRNTENSOR_BACKEND", "simulator")
    assert op(1) == ("kernel", 1)
    monkeypatch.setenv("TRNTENSOR_BACKEND", "   ")  # blank: ignored, the suite variable applies
    monkeypatch.setenv("TRNSCI_BACKEND", "simulator")
    assert op(1) == ("kernel", 1)
    monkeypatch.setenv("TRNSCI_BACKEND", "pytorch")
    assert op(1) == ("torch", 1)
    assert trnsci.backend.resolve("trntensor").origin == "env:TRNSCI_BACKEND"


# ------------------------------------------------------------------ plans

def test_plan_reports_size_threshold_and_closed_form_counts(device):
    op = dispatch.Op("trntensor.test_op_plan", "points", 100, size=lambda x: x, describe=lambda x: f"{x} points")
    op.lowering("torch")(lambda x: x)
    op.lowering("nki", counts=lambda x: {"kernel": "k", "hbm_read_bytes": 8 * x, "hbm_write_bytes": 4, "tensor": 2})(
        lambda x: x)
    small, big = op.plan(50), op.plan(1000)  # auto, with a (pretend) NeuronCore
    assert (small.backend, small.points, small.threshold, small.kernel) == ("torch", 50, 100, None)
    assert big.backend == "nki" and big.kernel == {"name": "k", "hbm_read_bytes": 8000, "hbm_write_bytes": 4,
                                                    "tensor": 2}
    text = str(big)
    for piece in ("operation: trntensor.test_op_plan", "shapes: 1000 points", "points: 1,000", "threshold: 100",
                  "backend: nki", "HBM read 8,000 B", "tensor 2", "closed form"):
        assert piece in text, (piece, text)
    with pytest.raises(AttributeError):
        big.flops  # noqa: B018 -- only the op's own metric is an attribute


def test_plan_call_plans_the_first_op_and_reports_calls_that_dispatch_none():
    op = _make_op("trntensor.test_op_g", lambda x: ("kernel", x))

    def public(x):
        if x == 0:
            return ("quick", 0)
        return op(x * 2)

    with trnsci.use_backend("simulator"):
        p = dispatch.plan_call(public, 4)
        assert (p.op, p.backend, p.size) == ("trntensor.test_op_g", "simulator", 8)
        q = dispatch.plan_call(public, 0)
    assert q.op is None and q.backend == "torch" and "dispatches no operation" in q.reason
    assert public(4) == ("torch", 8)  # planning left no state behind


# ------------------------------------------------------------------ trnsci.testing

def test_testing_helpers_fail_when_they_should():
    import numpy as np
    import torch

    from trnsci import testing

    with pytest.raises(AssertionError, match="no NKI kernel ran"):
        with testing.kernel_ran():
            pass  # nothing ran
    prof = type("P", (), {"hbm_read_bytes": 8, "hbm_write_bytes": 4, "flops": 0, "instructions": {"tensor": 1}})()
    testing.assert_counts(prof, {"hbm_read_bytes": 8, "tensor": 1})
    with pytest.raises(AssertionError, match="no counter for"):
        testing.assert_counts(prof, {"hbm_read_bytes": 8, "gpsimd": 0})  # a missing key is not skipped
    with pytest.raises(AssertionError, match="tensor: 1 != 2"):
        testing.assert_counts(prof, {"tensor": 2})
    x = testing.random(5, torch.float32)
    testing.assert_close(x, x.astype(np.float64), dtype=torch.float32)
    with pytest.raises(AssertionError):
        testing.assert_close(x + 1e-3, x, dtype=torch.float32)  # 1e-3 >> 32 eps(fp32) = 3.8e-6
    assert testing.tolerance(torch.complex128, k=3) == 64 * 2.0**-52
    with pytest.raises(AssertionError, match="shape"):
        testing.assert_close(x[:2], x)


def test_validate_sparse_opt_in():
    import torch

    from trnsci import validate

    S = torch.eye(2).to_sparse()
    with pytest.raises(TypeError, match="S is a sparse tensor"):
        validate.tensor(S, "S", "op")
    assert validate.tensor(S, "S", "op", sparse=True) is S


def _fake_library(tmp_path, monkeypatch, name, nki_source):
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "_nki.py").write_text(nki_source)
    monkeypatch.syspath_prepend(str(tmp_path))


def test_load_lowerings_imports_the_library_nki_module(tmp_path, monkeypatch):
    _fake_library(tmp_path, monkeypatch, "fakelib_ok", "LOADED = True\n")
    assert dispatch.load_lowerings("fakelib_ok") is True
    import fakelib_ok._nki as mod

    assert mod.LOADED


def test_load_lowerings_failure_warns_once_and_keeps_torch(tmp_path, monkeypatch):
    _fake_library(tmp_path, monkeypatch, "fakelib_bad", "raise ImportError('no kernels here')\n")
    monkeypatch.delenv("TRNSCI_REQUIRE_NKI", raising=False)
    expected = r"fakelib_bad: NKI lowerings not registered \(ImportError: no kernels here\)"
    with pytest.warns(RuntimeWarning, match=expected):
        assert dispatch.load_lowerings("fakelib_bad") is False


def test_load_lowerings_failure_raises_under_require_nki(tmp_path, monkeypatch):
    _fake_library(tmp_path, monkeypatch, "fakelib_bad2", "raise ImportError('no kernels here')\n")
    monkeypatch.setenv("TRNSCI_REQUIRE_NKI", "1")
    with pytest.raises(dispatch.NkiRequiredError, match="fakelib_bad2: NKI lowerings failed to import"):
        dispatch.load_lowerings("fakelib_bad2")


def test_check_plan_case_fails_on_the_wrong_op_and_passes_on_the_right_one():
    import torch

    import trnblas
    from trnsci.testing import check_plan_case, plan_cases

    case = (trnblas.gemm, lambda: (1.0, torch.ones(3, 2), torch.ones(2, 4)))
    [(name, c)] = plan_cases({"trnblas.gemm": [case]})
    plan, runs = check_plan_case("torch", name, c)
    assert plan.op == "trnblas.gemm" and runs == []
    with pytest.raises(AssertionError, match="expected 'trnblas.syrk'"):
        check_plan_case("torch", "trnblas.syrk", c)


@pytest.mark.parametrize("how", ["env-library", "env-suite", "env-require", "api-library", "api-suite",
                                 "block-library", "block-suite"])
def test_on_torch_probe_sees_every_setting(monkeypatch, how):
    """Each of the seven things the fast probe checks, set alone, sends the call through the full rule."""
    op, _ = _counting_op("trntensor.test_op_probe")
    assert op.on_torch() and op(1) == ("torch", 1)
    kind, scope = how.split("-")
    library = "trntensor" if scope == "library" else None
    with contextlib.ExitStack() as stack:
        if kind == "env":
            monkeypatch.setenv({"library": "TRNTENSOR_BACKEND", "suite": "TRNSCI_BACKEND",
                                "require": "TRNSCI_REQUIRE_NKI"}[scope], "1" if scope == "require" else "simulator")
        elif kind == "api":
            trnsci.set_backend("simulator", library)
            stack.callback(trnsci.backend.reset_backend, library)
        else:
            stack.enter_context(trnsci.use_backend("simulator", library))
        assert not op.on_torch()
        if scope == "require":
            with pytest.raises(trnsci.NkiRequiredError):
                op(1)
        else:
            assert op(1) == ("kernel", 1)
    monkeypatch.undo()
    assert op.on_torch()
    # a plan_call in progress is never "settled": the call must be planned, not run
    assert dispatch.plan_call(lambda: op(1)).backend == "torch"


def test_on_torch_probe_in_a_fresh_context():
    """A new thread starts with no backend ever set (the probe's one-variable case), and a
    setting made there is seen at once; the main thread is unaffected."""
    import threading

    op, _ = _counting_op("trntensor.test_op_fresh")
    seen = []

    def body():
        seen.append(trnsci.backend.touched().get())
        seen.append(op.on_torch())
        trnsci.set_backend("simulator", "trntensor")
        seen.append(op.on_torch())
        seen.append(op(1))
        trnsci.backend.reset_backend("trntensor")
        seen.append(op.on_torch())

    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert seen == [None, True, False, ("kernel", 1), True]
    assert op.on_torch() and op(1) == ("torch", 1)


# ------------------------------------------------------------ a documented environment setting keeps the fast path

@pytest.mark.parametrize("env", [
    {"TRNSCI_BACKEND": "torch"}, {"TRNSCI_BACKEND": "auto"}, {"TRNSCI_BACKEND": ""}, {"TRNBLAS_BACKEND": ""},
    {"TRNBLAS_BACKEND": " Torch "}, {"TRNBLAS_BACKEND": "pytorch", "TRNSCI_BACKEND": "auto"},
    {"TRNSCI_REQUIRE_NKI": "0"}, {"TRNSCI_REQUIRE_NKI": ""},
])
def test_backend_variables_naming_torch_or_auto_keep_the_fast_path(monkeypatch, env):
    import torch

    import trnblas
    from trnblas.level1 import DOT
    from trnsci import backend, nki

    if nki.HAS_NKI:
        pytest.skip("the fast path is for machines without the Neuron SDK")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    x = torch.arange(64.0)
    expected = float(x @ x)
    trnblas.dot(x, x)  # settles the route of this signature

    def no_resolution(*a, **k):
        raise AssertionError("the full backend resolution ran: the fast path was skipped")

    # the fast path: the probe answers without resolving the backend, and the settled route runs
    # without the Op's decision
    monkeypatch.setattr(backend, "resolve", no_resolution)
    monkeypatch.setattr(dispatch.Op, "_decide", no_resolution)
    assert DOT.on_torch() is True
    assert float(trnblas.dot(x, x)) == expected


@pytest.mark.parametrize("env,answer", [
    ({"TRNSCI_BACKEND": "simulator"}, False), ({"TRNBLAS_BACKEND": "simulator", "TRNSCI_BACKEND": "torch"}, False),
    ({"TRNSCI_REQUIRE_NKI": "1"}, None), ({"TRNBLAS_BACKEND": "bogus"}, ValueError),
])
def test_other_backend_variables_take_the_full_resolution(monkeypatch, env, answer):
    from trnblas.level1 import DOT

    for k, v in env.items():
        monkeypatch.setenv(k, v)
    if answer is ValueError:
        with pytest.raises(ValueError, match="TRNBLAS_BACKEND"):
            DOT.on_torch()
    elif answer is None:  # REQUIRE_NKI: the rule raises or runs a kernel, never the silent torch answer
        assert DOT.on_torch() is False
    else:
        assert DOT.on_torch() is answer


@pytest.mark.parametrize("value", ["torch", "auto", ""])
def test_backend_variable_keeps_the_fast_path_in_a_fresh_process(value):
    # a fresh interpreter: nothing else has loaded the kernel layer the probe consults
    import os
    import subprocess
    import sys

    code = ("import torch, trnblas\n"
            "from trnsci import backend, nki\n"
            "x = torch.arange(64.0)\n"
            "trnblas.dot(x, x); trnblas.dot(x, x)\n"
            "def no(*a, **k): raise AssertionError('full resolution on the per-call path')\n"
            "backend.resolve = no\n"
            "print('skip' if nki.HAS_NKI else float(trnblas.dot(x, x)))\n")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_BACKEND") and k != "TRNSCI_REQUIRE_NKI"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env={**env, "TRNSCI_BACKEND": value})
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() in ("skip", str(float(sum(i * i for i in range(64)))))


def test_kernels_possible_is_the_rule_every_op_applies(monkeypatch):
    """One rule for "could a kernel run": a library that composes another's public functions (trntensor's
    einsum steps through trnblas) asks dispatch.kernels_possible, which agrees with the Op decision --
    also on a machine that shows a NeuronCore without the Neuron toolchain (there trntensor once
    assumed kernels while trnblas's own decision ran torch)."""
    import torch

    import trnblas
    from trnsci import nki
    from trntensor import plan as P

    assert dispatch.kernels_possible("trnblas", "simulator") and dispatch.kernels_possible("trnblas", "nki")
    assert not dispatch.kernels_possible("trnblas", "torch")
    monkeypatch.setattr(nki, "HAS_NKI", False)
    monkeypatch.setattr(nki, "has_neuron_device", lambda: True)
    with trnblas.use_backend("auto"):
        assert not dispatch.kernels_possible("trnblas")
        A = torch.ones(256, 256)
        assert dispatch.plan_call(trnblas.gemm, 1.0, A, A).backend == "torch"
        assert not P.via_trnblas(1e15, torch.float32, False)
    with trnblas.use_backend("simulator"):
        assert dispatch.kernels_possible("trnblas") and P.via_trnblas(2.0, torch.float32, False)
