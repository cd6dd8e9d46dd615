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
  public function), which the Op empties when a lowering changes;
  each table is bounded; a route is used only while :meth:`Op.on_torch`
  holds (backend ``"torch"``, or ``"auto"`` without a NeuronCore, nothing
  required, no :func:`~trnsci.dispatch.plan_call` collecting), checked on
  every call.

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

from trnsci._validate import numpy_io

__all__ = ["public", "call", "tensor_key", "scalar_key", "LIMIT"]

#: Routes kept per public function and arity before its table is emptied.
LIMIT = 256

_INT64 = 2 ** 63
_FLAGS = (type(None), bool, str)
_pending: contextvars.ContextVar = contextvars.ContextVar("trnsci_settling", default=None)


class _Record:
    __slots__ = ("op", "args", "params", "route", "result")

    def __init__(self, op, args, params):
        self.op, self.args, self.params = op, args, params
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


def public(op, signature: Callable[..., Any]) -> Callable[[Callable], Callable]:
    """Decorator: :func:`~trnsci._validate.numpy_io` plus settled routes keyed by ``signature``.

    ``signature(*args)`` takes the public function's positional arguments
    and returns a hashable key (use :func:`tensor_key` / :func:`scalar_key`)
    or raises/returns ``None`` to run the call in full. Calls with keyword
    arguments always run in full.
    """

    def decorate(fn: Callable) -> Callable:
        slow = numpy_io(fn)
        params = inspect.signature(fn).parameters
        defaults = tuple(p.default for p in params.values()
                         if p.default is not inspect.Parameter.empty)
        # optional positional parameters: the number of arguments given joins the key
        varies = any(p.default is not inspect.Parameter.empty and p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
                     for p in params.values())
        settled = op.settled
        on_torch = op.on_torch

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if kwargs or not on_torch():
                return slow(*args, **kwargs)
            try:
                key = signature(*args)
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
            rec = _Record(op, args, defaults)
            token = _pending.set(rec)
            try:
                result = slow(*args)
            finally:
                _pending.reset(token)
            if rec.route is not None and result is rec.result:
                table = settled.setdefault(wrapper, {})
                if len(table) >= LIMIT:
                    table.clear()
                table[key] = rec.route
            return result

        wrapper.settled_signature = signature
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
        route = _route(low.fn, args, rec.args, rec.params)
        if route is not None:
            rec.route, rec.result = route, result
    return result


def _route(fn: Callable, largs: tuple, pargs: tuple, defaults: tuple) -> Callable | None:
    """A function of the public call's positional arguments that calls ``fn`` with ``largs``, or None."""
    plan = []
    for a in largs:
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
