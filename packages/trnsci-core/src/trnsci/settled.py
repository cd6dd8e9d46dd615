"""Settled routes for public functions: the per-call cost of argument checks paid once per call signature.

A public function of any library validates its arguments, normalises them
and then calls an :class:`~trnsci.dispatch.Op`. On a machine where every
call runs the Op's torch lowering (:meth:`Op.on_torch <trnsci.dispatch.Op>`)
the checks give the same answer for every call with the same *signature*:
the same kinds, dtypes, shapes, layouts and devices of the tensors and the
same decisive scalar facts (``alpha == 0`` ...). :func:`public` wraps such a
function so that

* the first call of a signature runs the function in full (NumPy in/out,
  every check); when the function ends in ``return call(OP, *args)`` on
  exactly the caller's tensors, the lowering call is remembered as the
  signature's route;
* later calls with that signature compute the key, find the route and run
  the torch lowering on the caller's arguments -- no checks, no NumPy scan.

What makes this safe:

* the key is built by the library's ``signature`` function from everything
  the function's checks and branches read (:func:`tensor_key`,
  :func:`scalar_key`); it returns ``None`` (no settling) for anything else
  -- NumPy arrays, tensor subclasses, converted scalars;
* a route is recorded only when the function's result *is* the lowering's
  result (so no post-processing, ``out=`` copy or NumPy conversion is
  skipped), every tensor the lowering got is one of the caller's positional
  arguments (no derived tensor: a ``.contiguous()`` copy or a conjugate
  disables settling), and every other lowering argument is the caller's own
  positional argument, a default of a parameter the caller left out, or a
  ``None``/``bool``/``str`` flag (derived from the key by the checks);
* the routes live in :attr:`Op.settled <trnsci.dispatch.Op>` (one table per
  public function), which the Op empties when a lowering changes (a
  generated wrapper keeps a reference to its own table: ``clear()`` empties
  the table itself, so the reference sees it empty);
  each table is bounded; a route is used only while :meth:`Op.on_torch`
  holds (backend ``"torch"``, or ``"auto"`` without a NeuronCore, nothing
  required, no :func:`~trnsci.dispatch.plan_call` collecting), checked on
  every call -- a generated wrapper inlines the probe's test of the usual
  state (which implies it) and calls the probe whenever that test fails.

The fast form is a spec string of the parameters' kinds (:data:`KINDS`):
the core then generates one wrapper per public function holding the key's
checks inline, and a lowering may declare, with :func:`settles`, the single
torch call it reduces to for a key, which the route then calls directly.

trnfft's public layer settles its own way (:meth:`trnsci.dispatch.Op.settle`)
because its keys include normalised options; the mechanism here is the one
the other libraries use.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
from collections.abc import Callable
from typing import Any

import torch

from trnsci import validate
from trnsci.dispatch import _hook_dynamo, traceable_as

__all__ = ["public", "call", "settles", "compile_signature", "tensor_key", "scalar_key", "KINDS", "LIMIT"]

#: Routes kept per public function and arity before its table is emptied.
LIMIT = 256

_INT64 = 2 ** 63
_FLAGS = (type(None), bool, str)
_pending: contextvars.ContextVar = contextvars.ContextVar("trnsci_settling", default=None)
_hook_dynamo()


class _Record:
    __slots__ = ("op", "args", "params", "route", "result", "compiled")

    def __init__(self, op, args, params, compiled=False):
        self.op, self.args, self.params, self.compiled = op, args, params, compiled
        self.route = self.result = None


def tensor_key(t: Any):
    """The part of a call signature one tensor argument contributes: dtype, shape, layout and device.

    ``None`` gives ``None``. Anything but a plain ``torch.Tensor`` (a NumPy
    array, a subclass, a number) raises ``TypeError`` so the caller's
    ``signature`` gives up and the call runs in full.
    """
    if type(t) is torch.Tensor:
        return t.dtype, t.shape, t.layout, t.is_cpu or t.device
    if t is None:
        return None
    raise TypeError("not a plain tensor")


def scalar_key(a: Any):
    """The part of a call signature a scalar argument contributes.

    A ``float`` gives its type and whether it is 0 or 1 (the values BLAS
    branches on); an ``int`` in int64 range gives its value (small ints are
    shared objects, so identity says nothing about them). Any other type
    raises ``TypeError`` (the checks would convert it: no settling).
    """
    t = type(a)
    if t is float:
        return 0, a == 0, a == 1
    if t is int and -_INT64 <= a < _INT64:
        return 1, a
    raise TypeError("not a plain float or int")


#: The argument kinds of a :func:`public` signature spec and what each contributes to the key.
KINDS = {
    "tensor": "a plain torch.Tensor: its dtype, shape, layout and device",
    "tensor?": "a plain torch.Tensor or None",
    "scalar": "a float (its type and whether it is 0 or 1) or an int in int64 range (its value)",
    "flag": "a bool or str option: its type and value",
}

_MISSING = object()  # a parameter the caller left out (its default), as it appears in a compiled key


def _kind_code(name: str, kind: str) -> tuple[list[str], str]:
    """Statements that check one argument (``return None`` when the key cannot describe it) and its key part."""
    if kind == "tensor":
        return ([f"if type({name}) is not _T: return None"],
                f"{name}.dtype, {name}.shape, {name}.layout, {name}.is_cpu or {name}.device")
    if kind == "tensor?":
        return ([f"if {name} is None: k_{name} = None",
                 f"elif type({name}) is _T: k_{name} = ({name}.dtype, {name}.shape, {name}.layout, "
                 f"{name}.is_cpu or {name}.device)",
                 "else: return None"], f"k_{name}")
    if kind == "scalar":
        return ([f"t_{name} = type({name})",
                 f"if t_{name} is float: a_{name} = {name} == 0; b_{name} = {name} == 1",
                 f"elif t_{name} is int and -_I64 <= {name} < _I64: a_{name} = {name}; b_{name} = None",
                 "else: return None"], f"t_{name}, a_{name}, b_{name}")
    if kind == "flag":
        return ([f"t_{name} = type({name})",
                 f"if t_{name} is not bool and t_{name} is not str: return None"], f"t_{name}, {name}")
    raise ValueError(f"settled signature: unknown kind {kind!r} for {name!r}; one of {sorted(KINDS)}")


def _positional(fn: Callable, spec: str) -> tuple[list, list[str]]:
    """``fn``'s positional parameters and the spec's kinds, checked to pair up."""
    params = [p for p in inspect.signature(fn).parameters.values()
              if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    kinds = spec.split()
    if len(kinds) != len(params):
        raise ValueError(f"settled signature of {fn.__qualname__}: {len(kinds)} kinds for {len(params)} "
                         f"positional parameters ({', '.join(p.name for p in params)})")
    return params, kinds


def _key_code(params: list, kinds: list[str], give_up: str) -> tuple[list[str], list[str], str]:
    """``(head, body, key)``: the parameter list (``_M`` for a left-out optional one), the checks
    (running ``give_up`` for an argument the key cannot describe) and the key's tuple expression."""
    head, body, parts = [], [], []
    for p, kind in zip(params, kinds):
        checks, part = _kind_code(p.name, kind)
        checks = [c.replace("return None", give_up) for c in checks]
        if p.default is inspect.Parameter.empty:
            head.append(p.name)
            body += checks
            parts.append(part)
        else:
            head.append(f"{p.name}=_M")
            body += [f"if {p.name} is _M: k_{p.name} = _M", "else:", *("    " + c for c in checks),
                     f"    k_{p.name} = ({part},)"]
            parts.append(f"k_{p.name}")
    return head, body, f"({', '.join(parts)},)"


def _generate(src: str, where: str, name: str, extra: dict | None = None):
    # __name__: generated frames belong to this module (warnings skip them to reach the user's line)
    scope = {**(extra or {}), "__name__": __name__, "_T": torch.Tensor, "_M": _MISSING, "_I64": _INT64}
    exec(compile(src, f"<settled {where}>", "exec"), scope)  # noqa: S102 -- text generated here
    return scope[name]


def compile_signature(fn: Callable, spec: str) -> Callable[..., Any]:
    """The key function of a :func:`public` spec.

    ``spec`` names the kind of each positional parameter of ``fn`` in order
    (:data:`KINDS`), e.g. ``"scalar tensor tensor scalar tensor? flag"`` for
    ``gemv(alpha, A, x, beta=0.0, y=None, trans=False)``. The key is one flat
    tuple of the parts; a parameter the caller left out contributes a
    sentinel, so the number of arguments given is part of the key. Any
    argument of another kind makes the function return ``None`` (the call
    runs in full and its checks report it). :func:`public` inlines the same
    code into its wrapper.
    """
    params, kinds = _positional(fn, spec)
    head, body, key = _key_code(params, kinds, "return None")
    src = "\n".join([f"def key({', '.join(head)}):", *("    " + line for line in body), f"    return {key}", ""])
    fn_key = _generate(src, f"signature of {fn.__qualname__}", "key")
    fn_key.source = src
    return fn_key


def _compiled_public(op, fn: Callable, slow: Callable, spec: str) -> Callable:
    """The :func:`public` wrapper of a spec: one generated function holding the key's checks.

    The wrapper takes ``fn``'s positional parameters by name (a parameter
    left out is the sentinel ``_M``) and its keyword-only ones (``out=``)
    likewise, so a call pays no ``*args`` packing, no ``**kwargs``
    dictionary, no separate key function and no arity test; a keyword-only
    argument given sends the call through in full. The usual backend state
    is recognised inline (:func:`trnsci.dispatch.torch_probe`'s ``inline``
    expression, the probe itself called only when that fails), and the
    wrapper holds its own table of routes (registered in
    :attr:`Op.settled <trnsci.dispatch.Op>` under the wrapper, which empties
    it in place). Routes are called with every positional parameter,
    sentinels included.
    """
    params, kinds = _positional(fn, spec)
    fill = tuple(p.default for p in params)  # what slow() gets for a parameter left out
    defaults = tuple(d for d in fill if d is not inspect.Parameter.empty)
    every = ", ".join(p.name for p in params)
    rest = [p for p in inspect.signature(fn).parameters.values() if p.kind not in
            (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    kwonly = [p.name for p in rest if p.kind is inspect.Parameter.KEYWORD_ONLY]
    varkw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in rest)
    head, body, key = _key_code(params, kinds, f"return _s_full(({every},), None)")
    if kwonly:
        head += ["*", *(f"{n}=_M" for n in kwonly)]
    if varkw:
        head.append("**_s_kw")
    given = [f"{n} is not _M" for n in kwonly] + (["_s_kw"] if varkw else [])
    passed = ", ".join([f"{n}={n}" for n in kwonly] + (["**_s_kw"] if varkw else []))
    inline, scope = getattr(op.on_torch, "inline", None) or ("False", {})
    name = fn.__name__ if fn.__name__.isidentifier() and not fn.__name__.startswith("_s_") else "wrapper"
    src = "\n".join([
        "def factory(_s_on_torch, _s_routes, _s_full, _s_settle):",
        f"    def {name}({', '.join(head)}):",
        *([f"        if {' or '.join(given)}:",
           f"            return _s_full(({every},), _s_given({passed}))"] if given else []),
        f"        if not {inline} and not _s_on_torch():",
        f"            return _s_full(({every},), None)",
        *("        " + line for line in body),
        f"        _s_key = {key}",
        "        _s_go = _s_routes.get(_s_key)",
        "        if _s_go is not None:",
        f"            return _s_go({every})",
        f"        return _s_settle(({every},), _s_key)",
        f"    return {name}",
        ""])
    factory = _generate(src, f"public {fn.__qualname__}", "factory", {**scope, "_s_given": _given_keywords})

    def positional(args):
        """The positional arguments for ``slow``: trailing omissions dropped, inner ones given their default."""
        n = len(args)
        while n and args[n - 1] is _MISSING:
            n -= 1
        return [fill[i] if a is _MISSING else a for i, a in enumerate(args[:n])]

    def full(args, kw):
        return slow(*positional(args), **(kw or {}))

    def settle(args, key):
        return _run_and_record(op, wrapper, key, _Record(op, args, defaults, compiled=True), slow,
                               positional(args), table)

    table: dict = {}
    wrapper = factory(op.on_torch, table, full, settle)
    functools.update_wrapper(wrapper, fn)
    traceable_as(wrapper, slow)  # torch.compile traces the full function, never the generated one
    wrapper.settled_signature = compile_signature(fn, spec)
    wrapper.settled_source = src
    return wrapper


def _given_keywords(**kw):
    """The keyword arguments the caller gave (those not the sentinel ``_M``)."""
    return {k: v for k, v in kw.items() if v is not _MISSING}


def _run_and_record(op, wrapper: Callable, key, rec: _Record, slow: Callable, args, table=None) -> Any:
    """The call in full, remembering the route :func:`call` recorded (if any) as ``key``'s.

    ``table``: the wrapper's own table (a generated wrapper holds it), put back
    into ``op.settled`` in case the Op emptied it since.
    """
    token = _pending.set(rec)
    try:
        result = slow(*args)
    finally:
        _pending.reset(token)
    if rec.route is not None and result is rec.result:
        if table is None:
            table = op.settled.setdefault(wrapper, {})
        elif op.settled.get(wrapper) is not table:
            op.settled[wrapper] = table
        if len(table) >= LIMIT:
            table.clear()
        table[key] = rec.route
    return result


def public(op, signature: Callable[..., Any] | str) -> Callable[[Callable], Callable]:
    """Decorator: :func:`~trnsci.validate.numpy_io` plus settled routes keyed by ``signature``.

    ``signature`` is a spec of the positional parameters' kinds
    (:func:`compile_signature`, the fast form), or a function:
    ``signature(*args)`` takes the public function's positional arguments
    and returns a hashable key (use :func:`tensor_key` / :func:`scalar_key`)
    or raises/returns ``None`` to run the call in full. Calls with keyword
    arguments always run in full.
    """

    def decorate(fn: Callable) -> Callable:
        slow = validate.numpy_io(fn)
        if isinstance(signature, str):
            return _compiled_public(op, fn, slow, signature)
        params = inspect.signature(fn).parameters
        defaults = tuple(p.default for p in params.values()
                         if p.default is not inspect.Parameter.empty)
        sig = signature
        # optional positional parameters: the number of arguments given joins the key
        varies = any(p.default is not inspect.Parameter.empty
                     and p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params.values())
        settled = op.settled
        on_torch = op.on_torch

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if kwargs or not on_torch():
                return slow(*args, **kwargs)
            try:
                key = sig(*args)
            except Exception:  # any argument the key cannot describe: run in full (the checks report it)
                key = None
            if key is None:
                return slow(*args)
            if varies:
                key = (len(args), key)
            table = settled.get(wrapper)  # gone when the Op emptied its settled routes
            if table is not None:
                go = table.get(key)
                if go is not None:
                    return go(*args)
            return _run_and_record(op, wrapper, key, _Record(op, args, defaults), slow, args)

        wrapper.settled_signature = sig
        traceable_as(wrapper, slow)
        return wrapper

    return decorate


def call(op, *args):
    """``op(*args)``, recording the torch route for the :func:`public` call being settled.

    A public function wrapped by :func:`public` ends in ``return call(OP,
    ...)``; with anything in between (a copy into ``out``, a conversion)
    nothing is recorded, because the result is no longer the lowering's.
    """
    if not op.on_torch():
        return op(*args)
    low = op.lowering_for("torch")
    if low is None:
        return op(*args)
    result = low.fn(*args)
    rec = _pending.get()
    if rec is not None and rec.op is op and rec.route is None:
        if rec.compiled:
            route = _compiled_route(low.fn, args, rec.args, rec.params)
        else:
            route = _route(low.fn, args, rec.args, rec.params)
        if route is not None:
            rec.route, rec.result = route, result
    return result


def _call_traced(op, *args):
    return op(*args)


traceable_as(call, _call_traced)


def settles(lowering: Callable) -> Callable[[Callable], Callable]:
    """Decorator: ``lowering``'s reduction to one torch call, used by compiled settled routes.

    The decorated function takes the lowering's arguments and returns
    ``(target, positions)`` when, for *every* call with the same settled
    key, ``lowering(*args)`` is ``target(*[args[i] for i in positions])``
    (an entry ``(name, i)`` passes ``args[i]`` as keyword ``name``), else
    ``None``. It may read only what the key fixes: dtypes, shapes, whether
    a scalar is 0 or 1, which optional tensors are ``None``, flags. The
    settled route then calls ``target`` directly, one Python frame fewer.
    """

    def attach(fn: Callable) -> Callable:
        lowering.settles = fn
        return fn

    return attach


def _plan(largs: tuple, pargs: tuple, defaults: tuple, flags_first: bool) -> list | None:
    """Where each lowering argument comes from: a public position (int) or a constant (``(value,)``).

    None when the route could not rebuild an argument. ``flags_first``: a
    None/bool/str lowering argument is a constant even when the caller passed
    the same object (the compiled key fixes every such value by its kinds).
    """
    plan = []
    for a in largs:
        if flags_first and type(a) in _FLAGS:
            plan.append((a,))
            continue
        src = [i for i, p in enumerate(pargs) if p is a]
        if len(src) > 1:
            return None  # the caller passed one object twice: which position feeds the lowering is ambiguous
        if src:
            plan.append(src[0])
        elif isinstance(a, torch.Tensor):
            return None  # a tensor the function derived: the route could not rebuild it
        elif type(a) in _FLAGS or any(a is d for d in defaults):
            plan.append((a,))
        else:
            return None  # a number the function computed: not provably fixed by the key
    return plan


def _compiled_route(fn: Callable, largs: tuple, pargs: tuple, defaults: tuple) -> Callable | None:
    """A generated function of all the public positional parameters (``_M`` for those left out) that
    calls ``fn`` (or the torch call it reduces to, :func:`settles`) on the caller's arguments."""
    plan = _plan(largs, pargs, defaults, flags_first=True)
    if plan is None:
        return None
    target, positions = fn, tuple(range(len(largs)))
    reduce = getattr(fn, "settles", None)
    if reduce is not None:
        got = reduce(*largs)
        if got is not None:
            target, positions = got
    if (len(positions) == len(pargs) and all(type(j) is int for j in positions)
            and [plan[j] for j in positions] == list(range(len(pargs)))):
        return target  # the caller's arguments in order: the target itself is the route, no frame between
    scope = {"__name__": __name__, "target": target}
    given = []
    for j in positions:
        name, j = j if type(j) is tuple else (None, j)
        s = plan[j]
        if type(s) is int:
            expr = f"p{s}"
        else:
            expr = f"c{j}"
            scope[expr] = s[0]
        given.append(expr if name is None else f"{name}={expr}")
    src = (f"def route({', '.join(f'p{i}' for i in range(len(pargs)))}):\n"
           f"    return target({', '.join(given)})\n")
    exec(compile(src, "<settled route>", "exec"), scope)  # noqa: S102 -- text generated here
    return scope["route"]


def _route(fn: Callable, largs: tuple, pargs: tuple, defaults: tuple) -> Callable | None:
    """A function of the public call's positional arguments that calls ``fn`` with ``largs``, or None."""
    plan = _plan(largs, pargs, defaults, flags_first=False)
    if plan is None:
        return None
    if all(type(s) is int for s in plan) and plan == list(range(len(pargs))):
        return fn  # the lowering takes exactly the public arguments
    j = len(pargs)
    if all(type(s) is int for s in plan[:j]) and plan[:j] == list(range(j)) and all(type(s) is tuple for s in plan[j:]):
        tail = tuple(s[0] for s in plan[j:])  # the public arguments in order, then fixed flags/defaults

        def route(*pub):
            return fn(*pub, *tail)

        return route
    plan = tuple(plan)

    def route(*pub):
        return fn(*[pub[s] if type(s) is int else s[0] for s in plan])

    return route
