"""The one eager fast path of every library: the per-call cost of argument checks paid once per call signature.

A public function of any library validates its arguments, normalises them
and then calls an :class:`~trnsci.dispatch.Op`. On a machine where every
call runs the Op's torch lowering (:meth:`Op.on_torch <trnsci.dispatch.Op>`)
the checks give the same answer for every call with the same *signature*:
the same kinds, dtypes, shapes, layouts and devices of the tensors and the
same decisive scalar facts (``alpha == 0`` ...). :func:`public` wraps such a
function so that

* the first call of a signature runs the function in full (NumPy in/out,
  every check); when the function ends in ``return call(OP, *args)`` on
  exactly the caller's tensors (or ``call(OP, ..., via=...)``, naming the
  work the call reduces to), that call is remembered as the signature's
  route;
* later calls with that signature compute the key, find the route and run
  it on the caller's arguments -- no checks, no NumPy scan.

What makes this safe:

* the key is built from everything the function's checks and branches read:
  each positional argument by its declared kind (:data:`KINDS`), a keyword
  given for a positional parameter bound to its place (the same key as the
  positional call); anything else -- NumPy arrays, tensor subclasses,
  scalars the checks would convert, a keyword-only argument (``out=``) --
  runs the call in full;
* a route is recorded only when the function's result *is* the recorded
  call's result (so no post-processing, ``out=`` copy or NumPy conversion is
  skipped), and every argument of the recorded call is one of the caller's
  positional arguments (no derived tensor: a ``.contiguous()`` copy or a
  conjugate disables settling), a default of a parameter the caller left
  out, or a ``None``/``bool``/``str`` flag (derived from the key by the
  checks);
* the routes live in :attr:`Op.settled <trnsci.dispatch.Op>` (one table per
  public function), which the Op empties when a lowering changes (a wrapper
  keeps a reference to its own table: ``clear()`` empties the table itself,
  so the reference sees it empty); each table is bounded (:data:`LIMIT`);
  a route is used only while :meth:`Op.on_torch` holds (backend ``"torch"``,
  or ``"auto"`` without a NeuronCore, nothing required, no
  :func:`~trnsci.dispatch.plan_call` collecting), checked on every call --
  the wrapper tests the probe's usual state itself (which implies it) and
  calls the probe whenever that test fails;
* a route holds only the Op's functions and the caller's own values of the
  settling call's constants (flags, defaults): nothing that outlives the
  arguments it is called with.

Nothing here generates code: the wrappers, key functions and routes are the
closures below, written once for every public function of every library.
The most common shapes of public function get a *named* wrapper: one of
those closures with its parameters renamed to the public function's own
(``CodeType.replace``: the same bytecode, file and lines), so a call --
positional or by keyword -- binds as it would to the function, with no
``*args``/``**kwargs`` packing; its options given by exact value (``None``,
a bool, a str, an int) find the route of the same call made positionally,
kept in the same table.
A lowering may declare, with :func:`settles`, the single torch call (or the
branch-free function) it reduces to for a key, which the route then calls.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import types
from collections.abc import Callable
from typing import Any

import torch

from trnsci import dispatch as _dispatch
from trnsci import validate
from trnsci.dispatch import _hook_dynamo, argument_errors, traceable_as

__all__ = ["public", "call", "settles", "compile_signature", "tensor_key", "scalar_key", "KINDS",
           "LIMIT"]

#: Routes kept per public function before its table is emptied.
LIMIT = 256

_INT64 = 2 ** 63
_FLAGS = (type(None), bool, str)
_HALF = (torch.bfloat16, torch.float16)
_T = torch.Tensor
_EMPTY = inspect.Parameter.empty
_M = object()  # a positional parameter the caller left out (the written wrappers' default)
_pending: contextvars.ContextVar = contextvars.ContextVar("trnsci_settling", default=None)
_hook_dynamo()


class _Record:
    __slots__ = ("op", "args", "params", "route", "result", "flags_first")

    def __init__(self, op, args, params, flags_first):
        self.op, self.args, self.params, self.flags_first = op, args, params, flags_first
        self.route = self.result = None


def tensor_key(t: Any):
    """The part of a call signature one tensor argument contributes: dtype, shape, layout and device.

    ``None`` gives ``None``. Anything but a plain ``torch.Tensor`` (a NumPy
    array, a subclass, a number) raises ``TypeError`` so the caller's
    ``signature`` gives up and the call runs in full.
    """
    if type(t) is _T:
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


def _tensor_opt_key(t: Any):
    if t is None:
        return None
    if type(t) is _T:
        return t.dtype, t.shape, t.layout, t.is_cpu or t.device
    raise TypeError("not a plain tensor or None")


def _flag_key(a: Any):
    t = type(a)
    if t is bool or t is str:
        return t, a
    raise TypeError("not a bool or str")


def _option_key(a: Any):
    t = type(a)
    if a is None or t is bool or t is str or (t is int and -_INT64 <= a < _INT64):
        return t, a
    raise TypeError("not None, a bool, a str or an int")


def _plain_key(t: Any):
    if type(t) is _T and not t.requires_grad:
        return t.dtype, t.shape, t.layout, t.is_cpu or t.device
    raise TypeError("not a plain tensor that does not require grad")


def _owner_key(a: Any):
    state = getattr(type(a), "_settled_key", None)
    if state is None:
        raise TypeError("not an object that keeps settled routes")
    return state(a)


def _ints_key(a: Any):
    t = type(a)
    if t is tuple or t is list:
        for v in a:
            if type(v) is not int:
                raise TypeError("not a sequence of ints")
        return t, tuple(a)
    return _option_key(a)


def _tensor_or_option_key(a: Any):
    if type(a) is _T:
        return a.dtype, a.shape, a.layout, a.is_cpu or a.device
    return _option_key(a)


#: The argument kinds of a :func:`public` signature spec and what each contributes to the key.
KINDS = {
    "tensor": "a plain torch.Tensor: its dtype, shape, layout and device",
    "tensor?": "a plain torch.Tensor or None",
    "scalar": "a float (its type and whether it is 0 or 1) or an int in int64 range (its value)",
    "flag": "a bool or str option: its type and value",
    "option": "None, a bool, a str or an int in int64 range: its type and value",
    "ints": "an option, or a tuple or list of ints: its type and values",
    "tensor|option": "a plain torch.Tensor (as 'tensor') or an option",
    "plain": "a plain torch.Tensor that does not require grad (for routes that are not differentiable)",
    "owner": "an object whose class defines _settled_key(self) -> its part of the key (everything the "
             "checks read of it and the route uses); first parameter only: the routes of calls on it are "
             "kept on the object (they go when it goes)",
}
_PART = {"tensor": tensor_key, "tensor?": _tensor_opt_key, "scalar": scalar_key, "flag": _flag_key,
         "option": _option_key, "ints": _ints_key, "tensor|option": _tensor_or_option_key, "plain": _plain_key,
         "owner": _owner_key}

#: Routes kept on one owner object (all its public functions together) before its table is emptied.
OWNER_LIMIT = 16
_OWNED = "_trnsci_settled_routes"


def _owned_get(owner, wrapper, key, op):
    """The route of ``wrapper``'s call ``key`` kept on ``owner``, if it was settled since ``op`` last
    emptied its routes (:attr:`Op.settled`'s ``epoch``)."""
    t = owner.__dict__.get(_OWNED)
    if t is None:
        return None
    hit = t.get((wrapper, key))
    if hit is None or hit[0] != op.settled.epoch:
        return None
    return hit[1]


def _owned_put(owner, wrapper, key, op, go) -> None:
    d = owner.__dict__
    t = d.get(_OWNED)
    if t is None or len(t) >= OWNER_LIMIT:
        t = d[_OWNED] = {}
    t[(wrapper, key)] = (op.settled.epoch, go)


# ------------------------------------------------------------------ key functions
# One key function per number of arguments given. The common kind patterns of public functions are
# written out (no call per argument); any other pattern calls one part function per argument. Each
# raises TypeError (or returns a key that no route can match) for an argument its kinds refuse.

def _k_t(a):
    if type(a) is not _T:
        raise TypeError
    return a.dtype, a.shape, a.layout, a.is_cpu or a.device


def _k_tt(a, b):
    if type(a) is not _T or type(b) is not _T:
        raise TypeError
    return (a.dtype, a.shape, a.layout, a.is_cpu or a.device, b.dtype, b.shape, b.layout, b.is_cpu or b.device)


def _k_stt(s, a, b):
    if type(a) is not _T or type(b) is not _T:
        raise TypeError
    t = type(s)
    if t is float:
        p, q = s == 0, s == 1
    elif t is int and -_INT64 <= s < _INT64:
        p, q = s, None
    else:
        raise TypeError
    return (t, p, q, a.dtype, a.shape, a.layout, a.is_cpu or a.device,
            b.dtype, b.shape, b.layout, b.is_cpu or b.device)


def _k_op(a, b):
    if type(b) is not _T or b.requires_grad:
        raise TypeError
    return _owner_key(a), (b.dtype, b.shape, b.layout, b.is_cpu or b.device)


_WRITTEN = {("tensor",): _k_t, ("tensor", "tensor"): _k_tt, ("scalar", "tensor", "tensor"): _k_stt,
            ("owner", "plain"): _k_op}
_WRAPPERS = (("tensor",), ("tensor", "tensor"), ("scalar", "tensor", "tensor"))  # written out below


def _key_function(kinds: tuple) -> Callable:
    """The key of a call giving these kinds' arguments (positionally, in order)."""
    written = _WRITTEN.get(kinds)
    if written is not None:
        return written
    parts = tuple(_PART[k] for k in kinds)
    if kinds[:3] == ("scalar", "tensor", "tensor") and 4 <= len(kinds) <= 7:
        # the written key of the first three, then one part per further argument (no loop, no list)
        more = parts[3:]
        if len(more) == 1:
            g3, = more
            return lambda s, a, b, c: (_k_stt(s, a, b), g3(c))
        if len(more) == 2:
            g3, g4 = more
            return lambda s, a, b, c, e: (_k_stt(s, a, b), g3(c), g4(e))
        if len(more) == 3:
            g3, g4, g5 = more
            return lambda s, a, b, c, e, f: (_k_stt(s, a, b), g3(c), g4(e), g5(f))
        g3, g4, g5, g6 = more
        return lambda s, a, b, c, e, f, g: (_k_stt(s, a, b), g3(c), g4(e), g5(f), g6(g))
    if len(parts) == 1:
        return parts[0]
    if len(parts) == 2:
        f0, f1 = parts
        return lambda a, b: (f0(a), f1(b))
    if len(parts) == 3:
        f0, f1, f2 = parts
        return lambda a, b, c: (f0(a), f1(b), f2(c))

    def key(*args):
        out = []
        for f, a in zip(parts, args):  # a loop, not a comprehension: no frame per call
            out.append(f(a))
        return tuple(out)

    return key


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _positional(fn: Callable, spec: str) -> tuple[list, list[str]]:
    """``fn``'s positional parameters, then the keyword-only ones the spec names after ``*``, and the
    spec's kinds, checked to pair up."""
    sig = inspect.signature(fn).parameters.values()
    params = [p for p in sig if p.kind in _POSITIONAL]
    head, star, tail = spec.partition("*")
    kinds = head.split()
    if len(kinds) != len(params):
        raise ValueError(f"settled signature of {fn.__qualname__}: {len(kinds)} kinds for {len(params)} "
                         f"positional parameters ({', '.join(p.name for p in params)})")
    if star:
        kwonly = [p for p in sig if p.kind is inspect.Parameter.KEYWORD_ONLY]
        more = tail.split()
        if len(more) != len(kwonly):
            raise ValueError(f"settled signature of {fn.__qualname__}: {len(more)} kinds after '*' for "
                             f"{len(kwonly)} keyword-only parameters ({', '.join(p.name for p in kwonly)})")
        params, kinds = params + kwonly, kinds + more
    for i, (p, kind) in enumerate(zip(params, kinds)):
        if kind == "owner" and i:
            raise ValueError(f"settled signature of {fn.__qualname__}: 'owner' is for the first parameter only")
        if kind not in KINDS:
            raise ValueError(f"settled signature: unknown kind {kind!r} for {p.name!r}; one of {sorted(KINDS)}")
    return params, kinds


def compile_signature(fn: Callable, spec: str) -> Callable[..., Any]:
    """The key function of a :func:`public` spec: ``key(*args)``, None for arguments the kinds refuse.

    ``spec`` names the kind of each positional parameter of ``fn`` in order
    (:data:`KINDS`), e.g. ``"scalar tensor tensor scalar tensor? flag"`` for
    ``gemv(alpha, A, x, beta=0.0, y=None, trans=False)``. The key is one
    value per argument given, so the number of arguments given is part of
    it. Any argument of another kind gives ``None`` (the call runs in full
    and its checks report it).
    """
    params, kinds = _positional(fn, spec)
    required = sum(p.default is _EMPTY for p in params)
    keys = {n: _key_function(tuple(kinds[:n])) for n in range(required, len(params) + 1)}

    def key(*args):
        k = keys.get(len(args))
        if k is None:
            return None
        try:
            return k(*args)
        except TypeError:
            return None

    return key


# ------------------------------------------------------------------ the wrapper

def public(op, signature: Callable[..., Any] | str, *, numpy: bool = True) -> Callable[[Callable], Callable]:
    """Decorator: :func:`~trnsci.validate.numpy_io` plus settled routes keyed by ``signature``.

    ``signature`` is a spec of the parameters' kinds (:func:`compile_signature`,
    the usual form: one kind per positional parameter, then optionally ``*``
    and one kind per keyword-only parameter, which then join the key when
    given), or a function: ``signature(*args)`` takes the public function's
    positional arguments and returns a hashable key (use :func:`tensor_key` /
    :func:`scalar_key`) or raises/returns ``None`` to run the call in full;
    with a function, calls with keyword arguments always run in full.
    ``numpy=False``: the function takes NumPy arrays itself (no
    :func:`~trnsci.validate.numpy_io`).
    """

    def decorate(fn: Callable) -> Callable:
        slow = validate.numpy_io(fn) if numpy else fn
        npos = sum(p.kind in _POSITIONAL for p in inspect.signature(fn).parameters.values())
        if isinstance(signature, str):
            params, kinds = _positional(fn, signature)
            required = sum(p.default is _EMPTY for p in params[:npos])
            # keys[n]: the key function of a call giving n arguments in order (None: never settled)
            keys = [None] * required + [_key_function(tuple(kinds[:n])) for n in range(required, len(params) + 1)]
            spec_form = True
        else:
            params = [p for p in inspect.signature(fn).parameters.values() if p.kind in _POSITIONAL]
            sig = signature
            varies = any(p.default is not _EMPTY for p in params)  # the number given joins the key

            def sig_key(*args):
                k = sig(*args)
                return k if k is None or not varies else (len(args), k)

            spec_form = False
        defaults = tuple(p.default for p in params if p.default is not _EMPTY)
        names = {p.name: i for i, p in enumerate(params) if p.kind is not inspect.Parameter.POSITIONAL_ONLY}
        kwnames = tuple(p.name for p in params[npos:])
        fill = tuple(p.default for p in params)
        on_torch = op.on_torch
        usual = getattr(on_torch, "usual_parts", None)
        table: dict = {}
        owned = spec_form and kinds[0] == "owner"  # routes kept on the first argument

        def run(args):
            """The full call of ``args`` in key order (keyword-only parameters passed by name)."""
            if len(args) <= npos:
                return slow(*args)
            return slow(*args[:npos], **dict(zip(kwnames, args[npos:])))

        def settle(args, key):
            rec = _Record(op, args, defaults, spec_form)
            token = _pending.set(rec)
            try:
                result = run(args)
            finally:
                _pending.reset(token)
            if rec.route is not None and result is rec.result and owned:
                _owned_put(args[0], wrapper, key, op, rec.route)
            elif rec.route is not None and result is rec.result:
                settled = op.settled
                if settled.get(wrapper) is not table:  # the Op emptied its routes since: register again
                    settled[wrapper] = table
                if len(table) >= LIMIT:
                    table.clear()
                table[key] = rec.route
            return result

        def by_keyword(args, kw):
            """A call naming parameters by keyword: in key order, the defaults in between filled in, it has
            the key and route of the same call made positionally; a keyword the spec does not cover runs in
            full (and an unknown one fails there, as the function's own signature says)."""
            at = []
            for k in kw:
                i = names.get(k)
                if i is None or i < len(args):
                    return slow(*args, **kw)
                at.append(i)
            full = list(args) + list(fill[len(args):max(at) + 1])
            for k, i in zip(kw, at):
                full[i] = kw[k]
            for i in range(len(args), len(full)):
                if full[i] is _EMPTY:  # a required parameter left out: the full call reports it
                    return slow(*args, **kw)
            if not on_torch():
                return slow(*args, **kw)
            try:
                key = keys[len(full)](*full)
            except TypeError:  # an argument the key cannot describe: run in full
                return slow(*args, **kw)
            go = table.get(key) if not owned else _owned_get(full[0], wrapper, key, op)
            if go is not None:
                return go(*full)
            return settle(full, key)

        if spec_form and usual is not None:
            untouched, k0, k1, k2, environ = usual
            d = _dispatch

            def wrapper(*args, **kw):
                if kw:
                    return by_keyword(args, kw)
                # the probe's usual state (torch_probe's ``usual``, written out: it implies the probe);
                # the probe itself when it fails
                if not (untouched() is None and k0 not in environ and k1 not in environ and k2 not in environ
                        and (nk := d._nki_module) is not None and not nk.HAS_NKI
                        and not nk.standin_active) and not on_torch():
                    return slow(*args)
                try:
                    key = keys[len(args)](*args)
                except (TypeError, IndexError):  # an argument the key cannot describe: run in full
                    return slow(*args)
                go = table.get(key) if not owned else _owned_get(args[0], wrapper, key, op)
                if go is not None:
                    return go(*args)
                return settle(args, key)
        elif spec_form:
            def wrapper(*args, **kw):
                if kw:
                    return by_keyword(args, kw)
                if not on_torch():
                    return slow(*args)
                try:
                    key = keys[len(args)](*args)
                except (TypeError, IndexError):
                    return slow(*args)
                go = table.get(key) if not owned else _owned_get(args[0], wrapper, key, op)
                if go is not None:
                    return go(*args)
                return settle(args, key)
        else:
            def wrapper(*args, **kw):
                if kw or not on_torch():
                    return slow(*args, **kw)
                try:
                    key = sig_key(*args)
                except Exception:  # any argument the key cannot describe: run in full (the checks report it)
                    key = None
                if key is None:
                    return slow(*args)
                go = table.get(key)
                if go is not None:
                    return go(*args)
                return settle(args, key)

        if spec_form and usual is not None and not owned:
            general = wrapper
            wrapper = (_named_wrapper(fn, kinds, required, table, general, usual, on_torch)
                       or _written_wrapper(kinds, required, table, general, usual, on_torch) or general)
        elif spec_form and usual is not None:
            general = wrapper
            wrapper = _named_wrapper(fn, kinds, required, table, general, usual, on_torch, op) or general
        functools.update_wrapper(wrapper, fn)
        wrapper.settled_signature = compile_signature(fn, signature) if spec_form else signature
        traceable_as(wrapper, argument_errors(slow))  # torch.compile traces the full function, never the shortcut
        return wrapper

    return decorate


def _written_wrapper(kinds: list, required: int, table: dict, general: Callable, usual: tuple,
                     on_torch: Callable[[], bool]) -> Callable | None:
    """The wrapper of a public function whose shortest call has a common kind pattern (one tensor; two
    tensors; a scalar and two tensors): that call's whole fast path written out -- the usual state (else the
    probe), the key
    (the very tuple of :func:`_k_t` / :func:`_k_tt` / :func:`_k_stt`), the lookup -- with no call between
    the caller and the route; every other call, and a miss, goes to ``general``. None for other patterns."""
    untouched, k0, k1, k2, environ = usual
    d = _dispatch
    n = next((n for n in range(max(required, 1), len(kinds) + 1) if tuple(kinds[:n]) in _WRAPPERS), None)
    if n is None:
        return None
    pattern = tuple(kinds[:n])
    # positional-only parameters with a sentinel default: the call's arguments arrive as they were passed
    # (no tuple to unpack); a keyword, another count or a miss goes to ``general`` with the same arguments
    if pattern == ("tensor",):
        def wrapper(a=_M, /, *more, **kw):
            if (type(a) is _T and not more and not kw
                    and ((untouched() is None and k0 not in environ and k1 not in environ and k2 not in environ
                          and (nk := d._nki_module) is not None and not nk.HAS_NKI and not nk.standin_active)
                         or on_torch())):
                go = table.get((a.dtype, a.shape, a.layout, a.is_cpu or a.device))
                if go is not None:
                    return go(a)
            return general(*more, **kw) if a is _M else general(a, *more, **kw)
    elif pattern == ("tensor", "tensor"):
        def wrapper(a=_M, b=_M, /, *more, **kw):
            if (type(a) is _T and type(b) is _T and not more and not kw
                    and ((untouched() is None and k0 not in environ and k1 not in environ and k2 not in environ
                          and (nk := d._nki_module) is not None and not nk.HAS_NKI and not nk.standin_active)
                         or on_torch())):
                go = table.get((a.dtype, a.shape, a.layout, a.is_cpu or a.device,
                                b.dtype, b.shape, b.layout, b.is_cpu or b.device))
                if go is not None:
                    return go(a, b)
            if b is _M:
                return general(**kw) if a is _M else general(a, **kw)
            return general(a, b, *more, **kw)
    else:  # ("scalar", "tensor", "tensor")
        def wrapper(s=_M, a=_M, b=_M, /, *more, **kw):
            t = type(s)
            if (type(a) is _T and type(b) is _T and not more and not kw
                    and (t is float or t is int and -_INT64 <= s < _INT64)
                    and ((untouched() is None and k0 not in environ and k1 not in environ and k2 not in environ
                          and (nk := d._nki_module) is not None and not nk.HAS_NKI and not nk.standin_active)
                         or on_torch())):
                go = table.get((t, s == 0, s == 1, a.dtype, a.shape, a.layout, a.is_cpu or a.device,
                                b.dtype, b.shape, b.layout, b.is_cpu or b.device) if t is float else
                               (t, s, None, a.dtype, a.shape, a.layout, a.is_cpu or a.device,
                                b.dtype, b.shape, b.layout, b.is_cpu or b.device))
                if go is not None:
                    return go(s, a, b)
            if b is _M:
                return general(*[v for v in (s, a) if v is not _M], **kw)
            return general(s, a, b, *more, **kw)
    return wrapper


# ------------------------------------------------------------------ named wrappers
# A function taking ``*more, **kw`` pays for a fresh dict (and the tuple) on every call. For the public
# functions whose positional parameters are a common pattern followed by a few optional ones (and a few
# keyword-only ones), the wrapper below is one of these closures with its parameters renamed to the public
# function's own (``CodeType.replace``: the same bytecode, lines and file, only the names that keyword
# arguments bind to): a call passes its arguments as it would to the public function, CPython binds them
# (and reports a missing, surplus or unknown argument as it would for the public function), and the fast
# path tests that every optional parameter is still the sentinel ``_M``. Any other call goes to ``rest``
# with every parameter: the positional ones (a left-out one given its default) to the general wrapper,
# keyword-only ones given by name. The closures read only parameters, so renaming cannot shadow anything.

#: Types of optional arguments a named wrapper may key by exact value (with the type): each value of these
#: types fixes every kind's key part (:data:`KINDS`) -- None, a flag, an option, an int -- and the sentinel.
_EXACT = frozenset((type(None), bool, str, int, type(_M)))


def _named_t_0_0(table, rest, usual, on_torch):
    untouched, k0, k1, k2, environ = usual
    d = _dispatch

    def wrapper(a):
        if (type(a) is _T and ((untouched() is None and k0 not in environ and k1 not in environ
                                and k2 not in environ and (_nk := d._nki_module) is not None
                                and not _nk.HAS_NKI and not _nk.standin_active) or on_torch())):
            _go = table.get((a.dtype, a.shape, a.layout, a.is_cpu or a.device))
            if _go is not None:
                return _go(a)
        return rest((a,), ())
    return wrapper


def _named_t_3_2(table, rest, usual, on_torch):
    untouched, k0, k1, k2, environ = usual
    d = _dispatch

    def wrapper(a, p1=_M, p2=_M, p3=_M, *, q0=_M, q1=_M):
        if (type(a) is _T and q0 is _M and q1 is _M
                and ((untouched() is None and k0 not in environ and k1 not in environ
                      and k2 not in environ and (_nk := d._nki_module) is not None
                      and not _nk.HAS_NKI and not _nk.standin_active) or on_torch())):
            _k = (a.dtype, a.shape, a.layout, a.is_cpu or a.device)
            if p1 is _M and p2 is _M and p3 is _M:
                _go = table.get(_k)
                if _go is not None:
                    return _go(a)
            else:  # options given (by keyword, usually): the route kept for their exact values
                _x = (p1, p2, p3)
                _ty = tuple(map(type, _x))
                if _EXACT.issuperset(_ty):
                    _go = table.get((_M, _k, _ty, _x))
                    if _go is not None:
                        return _go(a)
        return rest((a, p1, p2, p3), (q0, q1))
    return wrapper


def _named_tt_0_0(table, rest, usual, on_torch):
    untouched, k0, k1, k2, environ = usual
    d = _dispatch

    def wrapper(a, b):
        if (type(a) is _T and type(b) is _T
                and ((untouched() is None and k0 not in environ and k1 not in environ
                      and k2 not in environ and (_nk := d._nki_module) is not None
                      and not _nk.HAS_NKI and not _nk.standin_active) or on_torch())):
            _go = table.get((a.dtype, a.shape, a.layout, a.is_cpu or a.device,
                             b.dtype, b.shape, b.layout, b.is_cpu or b.device))
            if _go is not None:
                return _go(a, b)
        return rest((a, b), ())
    return wrapper


def _named_stt_0_1(table, rest, usual, on_torch):
    untouched, k0, k1, k2, environ = usual
    d = _dispatch

    def wrapper(s, a, b, *, q0=_M):
        _t = type(s)
        if (q0 is _M and type(a) is _T and type(b) is _T and (_t is float or _t is int and -_INT64 <= s < _INT64)
                and ((untouched() is None and k0 not in environ and k1 not in environ
                      and k2 not in environ and (_nk := d._nki_module) is not None
                      and not _nk.HAS_NKI and not _nk.standin_active) or on_torch())):
            _go = table.get((_t, s == 0, s == 1, a.dtype, a.shape, a.layout, a.is_cpu or a.device,
                             b.dtype, b.shape, b.layout, b.is_cpu or b.device) if _t is float else
                            (_t, s, None, a.dtype, a.shape, a.layout, a.is_cpu or a.device,
                             b.dtype, b.shape, b.layout, b.is_cpu or b.device))
            if _go is not None:
                return _go(s, a, b)
        return rest((s, a, b), (q0,))
    return wrapper


def _named_stt_1_2(table, rest, usual, on_torch):
    untouched, k0, k1, k2, environ = usual
    d = _dispatch

    def wrapper(s, a, b, p3=_M, *, q0=_M, q1=_M):
        _t = type(s)
        if (q0 is _M and q1 is _M and type(a) is _T and type(b) is _T
                and (_t is float or _t is int and -_INT64 <= s < _INT64)
                and ((untouched() is None and k0 not in environ and k1 not in environ
                      and k2 not in environ and (_nk := d._nki_module) is not None
                      and not _nk.HAS_NKI and not _nk.standin_active) or on_torch())):
            _k = ((_t, s == 0, s == 1, a.dtype, a.shape, a.layout, a.is_cpu or a.device,
                   b.dtype, b.shape, b.layout, b.is_cpu or b.device) if _t is float else
                  (_t, s, None, a.dtype, a.shape, a.layout, a.is_cpu or a.device,
                   b.dtype, b.shape, b.layout, b.is_cpu or b.device))
            if p3 is _M:
                _go = table.get(_k)
                if _go is not None:
                    return _go(s, a, b)
            else:  # options given (by keyword, usually): the route kept for their exact values
                _x = (p3,)
                _ty = tuple(map(type, _x))
                if _EXACT.issuperset(_ty):
                    _go = table.get((_M, _k, _ty, _x))
                    if _go is not None:
                        return _go(s, a, b)
        return rest((s, a, b, p3), (q0, q1))
    return wrapper


def _named_stt_3_1(table, rest, usual, on_torch):
    untouched, k0, k1, k2, environ = usual
    d = _dispatch

    def wrapper(s, a, b, p3=_M, p4=_M, p5=_M, *, q0=_M):
        _t = type(s)
        if (q0 is _M and type(a) is _T and type(b) is _T
                and (_t is float or _t is int and -_INT64 <= s < _INT64)
                and ((untouched() is None and k0 not in environ and k1 not in environ
                      and k2 not in environ and (_nk := d._nki_module) is not None
                      and not _nk.HAS_NKI and not _nk.standin_active) or on_torch())):
            _k = ((_t, s == 0, s == 1, a.dtype, a.shape, a.layout, a.is_cpu or a.device,
                   b.dtype, b.shape, b.layout, b.is_cpu or b.device) if _t is float else
                  (_t, s, None, a.dtype, a.shape, a.layout, a.is_cpu or a.device,
                   b.dtype, b.shape, b.layout, b.is_cpu or b.device))
            if p3 is _M and p4 is _M and p5 is _M:
                _go = table.get(_k)
                if _go is not None:
                    return _go(s, a, b)
            else:  # options given (by keyword, usually): the route kept for their exact values
                _x = (p3, p4, p5)
                _ty = tuple(map(type, _x))
                if _EXACT.issuperset(_ty):
                    _go = table.get((_M, _k, _ty, _x))
                    if _go is not None:
                        return _go(s, a, b)
        return rest((s, a, b, p3, p4, p5), (q0,))
    return wrapper


def _named_stt_4_2(table, rest, usual, on_torch):
    untouched, k0, k1, k2, environ = usual
    d = _dispatch

    def wrapper(s, a, b, p3=_M, p4=_M, p5=_M, p6=_M, *, q0=_M, q1=_M):
        _t = type(s)
        if (q0 is _M and q1 is _M and type(a) is _T and type(b) is _T
                and (_t is float or _t is int and -_INT64 <= s < _INT64)
                and ((untouched() is None and k0 not in environ and k1 not in environ
                      and k2 not in environ and (_nk := d._nki_module) is not None
                      and not _nk.HAS_NKI and not _nk.standin_active) or on_torch())):
            _k = ((_t, s == 0, s == 1, a.dtype, a.shape, a.layout, a.is_cpu or a.device,
                   b.dtype, b.shape, b.layout, b.is_cpu or b.device) if _t is float else
                  (_t, s, None, a.dtype, a.shape, a.layout, a.is_cpu or a.device,
                   b.dtype, b.shape, b.layout, b.is_cpu or b.device))
            if p3 is _M and p4 is _M and p5 is _M and p6 is _M:
                _go = table.get(_k)
                if _go is not None:
                    return _go(s, a, b)
            else:  # options given (by keyword, usually): the route kept for their exact values
                _x = (p3, p4, p5, p6)
                _ty = tuple(map(type, _x))
                if _EXACT.issuperset(_ty):
                    _go = table.get((_M, _k, _ty, _x))
                    if _go is not None:
                        return _go(s, a, b)
        return rest((s, a, b, p3, p4, p5, p6), (q0, q1))
    return wrapper


def _named_op_3_0(table, rest, usual, on_torch, me, op):
    untouched, k0, k1, k2, environ = usual
    d = _dispatch

    def wrapper(a, b, p2=_M, p3=_M, p4=_M):
        if (p2 is _M and p3 is _M and p4 is _M and type(b) is _T and not b.requires_grad
                and ((untouched() is None and k0 not in environ and k1 not in environ
                      and k2 not in environ and (_nk := d._nki_module) is not None
                      and not _nk.HAS_NKI and not _nk.standin_active) or on_torch())):
            # _owned_get of _k_op's key, written out
            _sk = getattr(type(a), "_settled_key", None)
            _t = a.__dict__.get(_OWNED) if _sk is not None else None
            if _t is not None:
                try:
                    _k = _sk(a)
                except TypeError:
                    _k = None
                if _k is not None:
                    _go = _t.get((me[0], (_k, (b.dtype, b.shape, b.layout, b.is_cpu or b.device))))
                    if _go is not None and _go[0] == op.settled.epoch:
                        return _go[1](a, b)
        return rest((a, b, p2, p3, p4), ())
    return wrapper


def _bound_tail(go: Callable, tail: tuple, hot: int) -> Callable:
    """``go`` as a function of the first ``hot`` arguments, the rest fixed to ``tail``."""
    if hot == 1:
        return lambda a: go(a, *tail)
    return lambda s, a, b: go(s, a, b, *tail)


#: (hot kinds, optional positional parameters after them, keyword-only parameters) -> named wrapper factory
_NAMED = {(("tensor",), 0, 0): _named_t_0_0, (("tensor",), 3, 2): _named_t_3_2,
          (("tensor", "tensor"), 0, 0): _named_tt_0_0, (("scalar", "tensor", "tensor"), 0, 1): _named_stt_0_1,
          (("scalar", "tensor", "tensor"), 1, 2): _named_stt_1_2,
          (("scalar", "tensor", "tensor"), 3, 1): _named_stt_3_1,
          (("scalar", "tensor", "tensor"), 4, 2): _named_stt_4_2, (("owner", "plain"), 3, 0): _named_op_3_0}


def _named_wrapper(fn: Callable, kinds: list, required: int, table: dict, general: Callable, usual: tuple,
                   on_torch: Callable[[], bool], op=None) -> Callable | None:
    """``fn``'s wrapper as a :data:`_NAMED` closure with ``fn``'s parameter names, or None (no closure for
    its shape: the caller uses :func:`_written_wrapper`)."""
    ps = list(inspect.signature(fn).parameters.values())
    if any(p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD) for p in ps):
        return None
    pos = [p for p in ps if p.kind in _POSITIONAL]
    kwonly = [p for p in ps if p.kind is inspect.Parameter.KEYWORD_ONLY]
    if any(p.kind is inspect.Parameter.POSITIONAL_ONLY for p in pos):
        return None
    owned = kinds[0] == "owner"
    hot = 2 if owned and tuple(kinds[:2]) == ("owner", "plain") else next(
        (n for n in range(max(required, 1), len(kinds) + 1) if tuple(kinds[:n]) in _WRAPPERS and not owned), None)
    if hot is None or hot != required or required > len(pos):
        return None  # the closures' required parameters are exactly the hot ones
    factory = _NAMED.get((tuple(kinds[:hot]), len(pos) - hot, len(kwonly)))
    if factory is None:
        return None
    fill = tuple(p.default for p in pos)
    kwnames = tuple(p.name for p in kwonly)
    hot_key = _WRITTEN[tuple(kinds[:hot])]
    keys_of = [None] * hot + [_key_function(tuple(kinds[:n])) for n in range(hot, len(kinds) + 1)]

    def rest(given, named):
        """The call as made: positional parameters up to the last one given (a left-out one before it gets
        its default, as binding by name gives it), keyword-only ones by name, to the general wrapper."""
        n = len(given)
        while n and given[n - 1] is _M:
            n -= 1
        args = list(given[:n])
        for i in range(hot, n):
            if args[i] is _M:
                args[i] = fill[i]
        kw = {}
        for name, v in zip(kwnames, named):
            if v is not _M:
                kw[name] = v
        if kw:
            return general(*args, **kw)
        result = general(*args)
        x = given[hot:]
        ty = tuple(map(type, x))
        if n > hot and _EXACT.issuperset(ty) and on_torch():
            # the optional arguments by exact value: when the call made positionally settled a route, keep it
            # under the call as given, as a function of the hot arguments with the others (constants) bound
            try:
                full, hk = keys_of[n](*args), hot_key(*given[:hot])
            except TypeError:
                return result
            go = table.get(full)
            if go is not None:
                if len(table) >= LIMIT:
                    table.clear()
                table[(_M, hk, ty, x)] = _bound_tail(go, tuple(args[hot:]), hot)
        return result

    me = [None]  # the wrapper itself: the owner's routes are kept under it (as the general wrapper keeps them)
    template = factory(table, rest, usual, on_torch, me, op) if owned else factory(table, rest, usual, on_torch)
    code = template.__code__
    nparams = code.co_argcount + code.co_kwonlyargcount
    names = tuple(p.name for p in pos) + kwnames
    if len(names) != nparams or set(names) & set(code.co_varnames[nparams:]) or len(set(names)) != nparams:
        return None
    code = code.replace(co_varnames=names + code.co_varnames[nparams:], co_name=fn.__name__)
    if hasattr(code, "co_qualname"):  # Python 3.11+: the name CPython's argument errors print
        code = code.replace(co_qualname=fn.__qualname__)
    w = types.FunctionType(code, template.__globals__, fn.__name__, (_M,) * (len(pos) - hot),
                           template.__closure__)
    if kwnames:
        w.__kwdefaults__ = dict.fromkeys(kwnames, _M)
    me[0] = w
    return w


def call(op, *args, via: Callable | None = None):
    """``op(*args)``, recording the torch lowering call as the route of the :func:`public` call being settled.

    A public function wrapped by :func:`public` ends in ``return call(OP,
    ...)``; with anything in between (a copy into ``out``, a conversion)
    nothing is recorded, because the result is no longer the lowering's.
    This is the one place a public function learns whether its call runs
    on torch: ``op(*args)`` otherwise (the Op's rule: kernels, plans).

    ``via(lowering) -> (fn, fargs)``: on the torch path, what the torch
    lowering ``lowering`` computes for these arguments, as a function of
    the caller's own arguments ``fargs`` with the per-key work done (a
    measured route, a window built from its name; fixed by the key), run
    instead of the lowering and recorded as the route.
    """
    if not op.on_torch():
        return op(*args)
    low = op.lowering_for("torch")
    if low is None:
        return op(*args)
    lowered = low.fn
    if op.half is not None and op._dtype(*args) in _HALF:  # the key fixes the dtype: a half key's route
        lowered = op._torch                                # is the lowering with the core's upcast around it
    if via is not None:
        fn, fargs = via(lowered)
        result = fn(*fargs)
        largs, reduce = fargs, False
    else:
        fn = lowered
        result = fn(*args)
        largs, reduce = args, True
    rec = _pending.get()
    if rec is not None and rec.op is op and rec.route is None:
        go = _make_route(fn, largs, rec, reduce=reduce)
        if go is not None:
            rec.route, rec.result = go, result
    return result


def _call_traced(op, *args, via=None):
    return op(*args)


traceable_as(call, _call_traced)


def settles(lowering: Callable) -> Callable[[Callable], Callable]:
    """Decorator: ``lowering``'s reduction for a settled key, used by the routes :func:`call` records.

    The decorated function takes the lowering's arguments and returns, when
    for *every* call with the same settled key ``lowering(*args)`` can be
    replaced by something simpler:

    * a function taking the lowering's arguments (the lowering's branch for
      this key, written out without its tests), or
    * ``(target, positions)``: ``lowering(*args)`` is
      ``target(*[args[i] for i in positions])`` (an entry ``(name, i)``
      passes ``args[i]`` as keyword ``name``),

    else ``None``. It may read only what the key fixes: dtypes, shapes,
    whether a scalar is 0 or 1, which optional tensors are ``None``, flags.
    """

    def attach(fn: Callable) -> Callable:
        lowering.settles = fn
        return fn

    return attach


def _plan(largs: tuple, pargs: tuple, defaults: tuple, flags_first: bool) -> list | None:
    """Where each recorded argument comes from: a public position (int) or a constant (``(value,)``).

    None when the route could not rebuild an argument. ``flags_first``: a
    None/bool/str argument is a constant even when the caller passed the
    same object (a spec's key fixes every such value by its kinds).
    """
    plan = []
    for a in largs:
        if flags_first and type(a) in _FLAGS:
            plan.append((a,))
            continue
        src = [i for i, p in enumerate(pargs) if p is a]
        if len(src) > 1:
            return None  # the caller passed one object twice: which position feeds the call is ambiguous
        if src:
            plan.append(src[0])
        elif isinstance(a, torch.Tensor):
            return None  # a tensor the function derived: the route could not rebuild it
        elif type(a) in _FLAGS or any(a is d for d in defaults):
            plan.append((a,))
        else:
            return None  # a number the function computed: not provably fixed by the key
    return plan


def _make_route(fn: Callable, largs: tuple, rec: _Record, reduce: bool) -> Callable | None:
    """A function of the public call's positional arguments that calls ``fn`` (or, ``reduce``, what it
    reduces to: :func:`settles`) on the caller's arguments, or None."""
    pargs = tuple(rec.args)
    plan = _plan(largs, pargs, rec.params, rec.flags_first)
    if plan is None:
        return None
    target, positions = fn, tuple(range(len(largs)))
    how = getattr(fn, "settles", None) if reduce else None
    if how is not None:
        got = how(*largs)
        if callable(got):
            target = got
        elif got is not None:
            target, positions = got
    pos, kw = [], []
    for j in positions:
        if type(j) is tuple:
            kw.append((j[0], plan[j[1]]))
        else:
            pos.append(plan[j])
    return _bind(target, pos, kw, len(pargs))


def _bind(target: Callable, pos: list, kw: list, given: int) -> Callable:
    """``route(*p)``: ``target`` called with ``p[s]`` for each int ``s`` of ``pos``/``kw`` and the
    constant ``s[0]`` for each 1-tuple, the common shapes written out."""
    if not kw and all(type(s) is int for s in pos):
        if pos == list(range(given)):
            return target  # the caller's arguments in order: the target itself is the route
        if len(pos) == 1:
            i, = pos

            def route1(*p):
                return target(p[i])
            return route1
        if len(pos) == 2:
            i, j = pos

            def route2(*p):
                return target(p[i], p[j])
            return route2
        if len(pos) == 3:
            i, j, k = pos

            def route3(*p):
                return target(p[i], p[j], p[k])
            return route3
    n = len(pos)
    if (not kw and n > given and pos[:given] == list(range(given))
            and all(type(s) is tuple for s in pos[given:])):
        tail = tuple(s[0] for s in pos[given:])  # the caller's arguments in order, then fixed flags/defaults
        if given == 3 and len(tail) == 1:
            t0, = tail

            def route_3_1(a, b, c):
                return target(a, b, c, t0)
            return route_3_1
        if given == 3 and len(tail) == 2:
            t0, t1 = tail

            def route_3_2(a, b, c):
                return target(a, b, c, t0, t1)
            return route_3_2

        def route_tail(*p):
            return target(*p, *tail)
        return route_tail
    head = next((m for m in range(n) if type(pos[m]) is not int), n)
    if (not kw and pos[:head] == list(range(head)) and head < n <= given
            and all(type(s) is tuple for s in pos[head:])):
        # the caller's first arguments in order, then fixed flags/defaults where the caller gave the rest
        tail = tuple(s[0] for s in pos[head:])

        def route_head(*p):
            return target(*p[:head], *tail)
        return route_head
    if not kw:  # the caller's arguments and the key's constants, in any order
        template = [s[0] if type(s) is tuple else None for s in pos]
        slots = tuple((j, s) for j, s in enumerate(pos) if type(s) is int)

        def route_mixed(*p):
            a = template.copy()
            for j, s in slots:
                a[j] = p[s]
            return target(*a)
        return route_mixed
    pos_t, kw_t = tuple(pos), tuple(kw)

    def route_any(*p):
        return target(*[p[s] if type(s) is int else s[0] for s in pos_t],
                      **{name: p[s] if type(s) is int else s[0] for name, s in kw_t})
    return route_any
