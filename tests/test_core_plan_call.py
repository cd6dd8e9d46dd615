"""The plan is the call: for every public function of the six libraries, :func:`trnsci.plan_call`
says the backend and the kernels that running the call then launches (issue 29 item 4, issue 31).

The functions are enumerated as the bad-input sweep does (``tests/test_bad_input_generated.py``:
each library's ``__all__``), and called with that sweep's small valid arguments, made float32 (the
kernels' dtype) so that under backend ``"simulator"`` the kernels run in the emulator. For each
function and each backend (``"simulator"``, ``"torch"``), the plan is compared with what
:func:`trnsci.nki.capture` records while the call runs:

- the plan's ``backend`` is the backend of every recorded launch (``"torch"`` when none ran);
- ``plan.kernels`` are exactly the kernels that ran, each named once, in the order of its first
  launch (how many times each runs may depend on the data: sweeps, iterations);
- a call that reaches no operation (constructors, configuration, host-side helpers) plans as
  ``op=None`` on ``"torch"`` and says why, and runs no kernel.

The reference is the emulator's own record of the launches, independent of the declarations the
plan is built from (``Lowering.kernels``, closed forms, ``Op(steps=)``).
"""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path

import pytest
import torch

import trnblas
import trnfft
import trnrand
import trnsci
import trnsolver
import trnsparse
import trntensor
from trnsci import nki
from trnsci.dispatch import plan_call

_spec = importlib.util.spec_from_file_location("bad_input_sweep",
                                               Path(__file__).with_name("test_bad_input_generated.py"))
sweep = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sweep)

LIBRARIES = (trnblas, trnfft, trnsparse, trnsolver, trnrand, trntensor)
#: public functions no small call can exercise here: their inputs are a converged PySCF mean field
NO_CALL = {"trnblas.df_factors": "needs a PySCF mean-field object", "trnblas.dfmp2": "needs a PySCF mean-field object"}


def _f32(v):
    """The sweep's float64 candidate as float32 (tensors, sparse matrices, tuples and lists of them)."""
    if isinstance(v, torch.Tensor) and v.dtype == torch.float64:
        return v.float()
    if isinstance(v, (tuple, list)):
        return type(v)(_f32(x) for x in v)
    if isinstance(v, trnsparse.SparseMatrix) and v.dtype == torch.float64:
        return v.to(dtype=torch.float32)
    return v


def _candidates():
    base = sweep._candidates()
    c = {k: [_f32(x) for x in vs] + [x for x in vs if _f32(x) is not x] for k, vs in base.items()}
    # eigh_generalized(A, A) reduces to the identity, which needs no Jacobi sweep at all: a B unlike A
    c["B"] = [torch.eye(sweep.N) + 0.1 * torch.ones(sweep.N, sweep.N)] + c["B"]
    c["counter"] = [torch.zeros(1, 4, dtype=torch.int64), [0, 0, 0, 0]]
    c["key"] = c["key"] + [[0, 0, 0, 0]]
    c["tensor"] = [torch.linspace(-1, 1, 24).reshape(2, 3, 4)] + c["tensor"]
    # each library's plan(op_name, *args): a function of that library and its arguments
    c["op_name"] = c["op_name"] + ["solve", "spmv", "normal"]
    c["args"] = c["args"] + [(c["A"][1], c["x"][0]), (4,)]
    # an FFTPlan built directly (create_plan's arguments, canonical)
    c.update(dims=[(0,)], lengths=[(8,)], input_lengths=[(8,)], norm=["backward"], precision=["fast"])
    return c


#: keywords that keep a call small where a default would iterate long in the emulator
SMALL = {"trntensor.cp_decompose": {"max_iter": 2}, "trntensor.tucker_decompose": {"max_iter": 2}}


def _functions():
    for qual, fn in sweep._public():
        if qual.split(".", 1)[0] in {m.__name__ for m in LIBRARIES}:
            yield qual, fn


FUNCTIONS = dict(_functions())


def small_calls() -> dict:
    """``qual -> (args, kwargs)``: the first combination of candidates the call accepts (found on torch).

    Also the calls of tests/test_core_findable.py, which loads this file."""
    cands = _candidates()
    out = {}
    with sweep._restored_settings(), trnsci.use_backend("torch"):
        for qual, fn in FUNCTIONS.items():
            if qual in NO_CALL:
                continue
            base = sweep._base(fn, cands)
            if base is not None:
                pos, var, kw = sweep._layout(inspect.signature(fn))
                args, star, kwargs = sweep._split(pos, var, kw, base)
                out[qual] = ((*args, *star), {**kwargs, **SMALL.get(qual, {})})
    return out


@pytest.fixture(scope="module")
def calls():
    return small_calls()


def test_every_public_function_is_walked(calls):
    assert len(FUNCTIONS) > 150  # the six libraries' public functions, not a hand-picked subset
    missing = sorted(set(FUNCTIONS) - set(calls) - set(NO_CALL))
    assert not missing, f"no valid small call found for {missing}"


@pytest.mark.parametrize("backend", ["simulator", "torch"])
@pytest.mark.parametrize("qual", sorted(FUNCTIONS))
def test_plan_names_the_backend_and_kernels_the_call_runs(calls, qual, backend):
    if qual in NO_CALL:
        pytest.skip(NO_CALL[qual])
    fn = FUNCTIONS[qual]
    args, kwargs = calls[qual]
    with sweep._restored_settings(), trnsci.use_backend(backend), torch.no_grad():
        plan = plan_call(fn, *args, **kwargs)
        with nki.capture() as runs:
            result = fn(*args, **kwargs)
            if inspect.isgenerator(result):
                result.close()
    ran_on = {r.backend for r in runs}
    assert len(ran_on) <= 1, f"{qual}: launches on several backends {ran_on}"
    ran = tuple(dict.fromkeys(r.kernel for r in runs))
    where = runs[0].backend if runs else "torch"
    assert plan.backend == where, (f"{qual}: the plan said {plan.backend!r} ({plan.reason}); the call ran "
                                   f"{ran or 'no kernel'} on {where!r}")
    assert plan.kernels == ran, f"{qual}: the plan named kernels {plan.kernels}; the call launched {ran}"
    if backend == "torch":
        assert not runs
    if plan.op is None:  # host-only: the plan says so
        assert plan.backend == "torch" and "dispatches no operation" in plan.reason


def test_a_kernel_backend_plan_without_kernels_says_why(calls):
    """Under "simulator", a function that dispatches an op but runs no kernel has the reason in its plan."""
    quiet = []
    with sweep._restored_settings(), trnsci.use_backend("simulator"), torch.no_grad():
        for qual, (args, kwargs) in calls.items():
            plan = plan_call(FUNCTIONS[qual], *args, **kwargs)
            if plan.op is not None and not plan.kernels:
                assert plan.backend == "torch" and plan.reason, qual
                quiet.append(qual)
    # the walk reaches the kernels: most functions that dispatch an op run one here
    assert len(quiet) < 0.25 * len(calls), quiet


@pytest.mark.parametrize("lib, name, make", [
    (trnblas, "axpy", lambda: (2.0, torch.ones(5), torch.ones(5))),
    (trnsolver, "solve", lambda: (sweep._spd().float(), torch.ones(4))),
    (trnsparse, "spmv", lambda: (trnsparse.from_dense(sweep._spd().float()), torch.ones(4))),
    (trnrand, "normal", lambda: (16,)),
])
def test_each_library_plan_is_plan_call_of_its_function(lib, name, make):
    """``<lib>.plan(name, *args)`` is ``plan_call(<lib>.name, *args)`` (the prefixed name too), and
    under "simulator" names a kernel that the call then launches."""
    args = make()
    with trnsci.use_backend("simulator"):
        p = lib.plan(name, *args)
        q = plan_call(getattr(lib, name), *args)
        r = lib.plan(f"{lib.__name__}.{name}", *args)
        with nki.capture() as runs:
            getattr(lib, name)(*args)
    assert (p.op, p.backend, p.kernels) == (q.op, q.backend, q.kernels) == (r.op, r.backend, r.kernels)
    assert p.backend == "simulator" and p.kernels == tuple(dict.fromkeys(k.kernel for k in runs))


@pytest.mark.parametrize("lib", [trnsolver, trnsparse, trnrand])
def test_library_plan_refuses_settings_and_unknown_names(lib):
    before = lib.get_backend()
    for bad in ("set_backend", "use_backend", "no_such_function", "plan"):
        with pytest.raises(ValueError, match=r"^plan: op_name must name a public"):
            lib.plan(bad, "simulator")
    with pytest.raises(TypeError, match=r"^plan: op_name"):
        lib.plan(3)
    assert lib.get_backend() == before  # nothing was set while refusing
