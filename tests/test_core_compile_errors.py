"""Bad input inside torch.compile: the eager TypeError/ValueError, never a Dynamo error (issue 29).

Every public function of the six libraries is called inside ``torch.compile(fullgraph=True,
backend="eager")`` with one bad argument, built by ``tests/test_bad_input_generated.py``'s
enumeration (its base calls and bad values): the first parameter whose bad value the eager call
refuses with a ``TypeError``/``ValueError``. The compiled call must raise an instance of the eager
exception's class whose message starts with the eager message (Dynamo appends the user-code lines) --
never ``InternalTorchDynamoError``, ``Unsupported`` ("Observed exception") or another torch
internal error. Without ``fullgraph`` the error is a graph break and the frame runs eagerly: the
eager exception itself.

A few callables are host-side by design and are listed with the reason (they do not compile at
all); for them the compiled call without ``fullgraph`` still raises the eager error exactly.
"""

from __future__ import annotations

import inspect
import warnings

import pytest
import test_bad_input_generated as gen
import torch

import trnsparse
import trntensor

torch._dynamo = pytest.importorskip("torch._dynamo")

LIBRARIES = ("trnblas", "trnfft", "trnsparse", "trnsolver", "trnrand", "trntensor")
BAD = [b for b in gen.BAD if b[0] in ("str", "neg", "object")]  # a wrong type, a wrong value, an object

# Host-side by design: planning objects built under a context variable (plan_call), and the
# constructors of the libraries' objects (Dynamo inlines a class's __init__ itself, so an error in it
# is a graph break; these objects are built outside compiled code and passed in).
HOST_ONLY = {
    "trnblas.plan_gemm": "a plan object: plan_call collects decisions under a context variable",
    "trnblas.plan_batched_gemm": "a plan object: plan_call collects decisions under a context variable",
    "trnblas.plan_syrk": "a plan object: plan_call collects decisions under a context variable",
    "trnblas.plan_trsm": "a plan object: plan_call collects decisions under a context variable",
    "trnfft.ComplexTensor": "a constructor (built outside compiled code)",
    "trnsparse.COOMatrix": "a constructor (built outside compiled code)",
    "trnsparse.CSRMatrix": "a constructor (built outside compiled code)",
    "trnsparse.CSCMatrix": "a constructor (built outside compiled code)",
    "trnsparse.BSRMatrix": "a constructor (built outside compiled code)",
    "trnsparse.Preconditioner": "a constructor (built outside compiled code)",
}


def _eager(fn, call):
    try:
        gen._call(fn, *call)
    except (TypeError, ValueError) as e:
        return e
    except Exception:  # noqa: BLE001 (another kind: test_bad_input_generated's business)
        return None
    return None


def _cases():
    """(name, function, (args, star, kwargs), eager exception): one bad call per public function."""
    cands = gen._candidates()
    out = []
    with gen._restored_settings(), torch.no_grad():
        for qual, fn in gen._public():
            if qual.split(".")[0] not in LIBRARIES:
                continue
            pos, var, kwonly = gen._layout(inspect.signature(fn))
            base = gen._base(fn, cands)
            if base is None:
                continue
            found = None
            for p in pos + kwonly:
                if p.name not in base:
                    continue
                for _, bad in BAD:
                    values = dict(base)
                    values[p.name] = bad
                    call = gen._split(pos, var, kwonly, values)
                    e = _eager(fn, call)
                    if e is not None and gen._names(str(e), p.name):
                        found = (qual, fn, call, e)
                        break
                if found:
                    break
            if found:
                out.append(found)
    return out


CASES = _cases()


def _compiled(fn, call, fullgraph):
    args, star, kw = call

    def f():
        return fn(*args, *star, **kw)

    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.compile(f, fullgraph=fullgraph, backend="eager")()


def test_the_walk_covers_the_libraries():
    names = {q for q, *_ in CASES}
    assert len(CASES) > 150, len(CASES)
    for lib in LIBRARIES:
        assert any(n.startswith(lib + ".") for n in names), lib
    assert "trntensor.einsum" in names and "trnrand.categorical" in names


def test_bad_input_inside_fullgraph_compile_raises_the_eager_error():
    wrong = []
    with gen._restored_settings(), torch.no_grad():
        for qual, fn, call, eager in CASES:
            fullgraph = qual not in HOST_ONLY
            try:
                _compiled(fn, call, fullgraph)
                wrong.append(f"{qual}: no error (eager: {eager!r})")
            except Exception as e:  # noqa: BLE001 (the point of the test)
                ok = isinstance(e, type(eager)) and str(e).startswith(str(eager))
                if fullgraph:
                    ok = ok and isinstance(e, (TypeError, ValueError))
                else:  # a graph break: the frame ran eagerly
                    ok = ok and type(e) is type(eager) and str(e) == str(eager)
                if not ok:
                    wrong.append(f"{qual}: {type(e).__name__}: {str(e).splitlines()[0][:160]} "
                                 f"(eager: {type(eager).__name__}: {str(eager)[:100]})")
    torch._dynamo.reset()
    assert not wrong, f"{len(wrong)} of {len(CASES)} compiled calls:\n" + "\n".join(wrong)


def test_host_only_list_is_current():
    names = {q for q, *_ in CASES}
    assert set(HOST_ONLY) <= names  # every listed callable exists and was walked


@pytest.mark.parametrize("fullgraph", [True, False])
def test_einsum_bad_subscripts_under_compile_is_the_eager_value_error(fullgraph):
    A = torch.ones(3, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match="einsum: subscripts 'ij,jk' name 2 operand") as eager:
        trntensor.einsum("ij,jk", A)

    def f(A):
        return trntensor.einsum("ij,jk", A) * 2

    torch._dynamo.reset()
    with pytest.raises(ValueError) as got:
        torch.compile(f, fullgraph=fullgraph, backend="eager")(A)
    assert not isinstance(got.value, torch._dynamo.exc.InternalTorchDynamoError)
    assert str(got.value).startswith(str(eager.value))
    # and good input still compiles to the operator, the plan a constant of the graph
    torch._dynamo.reset()

    def g(A, B):
        return trntensor.einsum("ij,jk->ik", A, B)

    B = torch.arange(12, dtype=torch.float64).reshape(3, 4)
    got = torch.compile(g, fullgraph=True, backend="eager")(A, B)
    assert torch.equal(got, torch.from_numpy(A.numpy() @ B.numpy()))


def test_an_error_caught_by_the_caller_is_still_caught_without_fullgraph():
    A = torch.ones(3, 3, dtype=torch.float64)

    def f(A):
        try:
            return trnsparse.spmv("not a matrix", A[0])
        except TypeError:
            return A[0] * 3

    torch._dynamo.reset()
    assert torch.equal(torch.compile(f, backend="eager")(A), A[0] * 3)
