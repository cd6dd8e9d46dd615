"""Low precision, handled once: bfloat16/float16 arguments of operations that compute in float32.

An operation declares how it takes half-precision data; the core applies
the declaration, so no lowering and no public function of a library tests
for bfloat16/float16 itself:

* **On the Op** -- ``Op(..., half="float32")`` (:class:`trnsci.dispatch.Op`):
  when the call's dtype (the Op's ``dtype=``, default the first tensor
  argument) is bfloat16 or float16, the core runs the torch lowering on the
  arguments with every bf16/fp16 tensor upcast to float32 (:func:`upcast`)
  and rounds each float32 result once to the input dtype
  (:func:`round_once`); integer, bool and complex results are returned as
  the lowering gave them. A float32/float64 call runs the lowering as
  written (the settled route of its signature is the lowering itself). An
  NKI lowering whose ``dtypes`` list the half dtype takes the data natively
  (no upcast); one whose ``dtypes`` do not leaves the call to the torch
  lowering, as for any dtype a kernel does not take.
* **On a public function that composes several Ops** (a factorization
  followed by solves, a Krylov loop) -- :func:`computes_in`: the function
  runs on float32 copies of its bf16/fp16 arguments (NumPy ``float16``
  arrays included) from validation on, so every step, kernel or torch,
  sees float32, and its floating results are rounded once at the end.
  ``args=`` limits the declaration to the named data parameters.

Two promises, one per spelling of the declaration (both accepted by
``Op(half=...)`` and :func:`computes_in`):

* ``"float32"`` -- **round back**: the results come back in the input's
  dtype (BLAS, solvers, sparse: cuBLAS's ``*Ex`` with a half output type).
* ``promote("float32")`` (:func:`promote`) -- **promote**: the results stay
  in float32 (complex64 for complex results), as NumPy's and SciPy's FFTs
  give a transform of float16 data (``numpy.fft.fft`` of float16 is
  complex64): trnfft's transforms (``fft`` of bfloat16 is complex64) and
  trnsolver's ``schur``. Arguments mixing a half dtype with another
  floating dtype are then allowed (each half argument is upcast, the
  others pass as given), as type promotion allows them.

Objects other than tensors take part through a small protocol: a
``dtype`` attribute (the torch dtype of their data), a method
``__trnsci_upcast__(dtype)`` returning the object with its data in
``dtype`` (the core calls it only on bf16/fp16 objects; it may return a
copy it keeps, as the sparse formats keep their float32 copy while their
arrays are unchanged), and ``to(dtype)`` (as ``torch.Tensor.to``), which
rounds a result of the compute dtype back once. The sparse matrices of
trnsparse and trnfft's ``ComplexTensor`` implement it.

Error bound of round back: the float32 algorithm's error plus one rounding
of each result, a relative ``2^-8`` (bfloat16) or ``2^-11`` (float16) per
entry; of promote: the float32 algorithm's error on the (exact) float32
values of the half data, no final rounding. Under round back, arguments
mixing a half dtype with another floating dtype are a ``TypeError`` from
:func:`computes_in` (one dtype per call); an Op's public function checks
its operands agree before the Op is called.

Examples
--------
>>> import torch
>>> from trnsci import precision
>>> precision.upcast((torch.ones(2, dtype=torch.bfloat16), 3))[0].dtype
torch.float32
>>> precision.round_once((torch.ones(2), torch.arange(2)), torch.bfloat16)[0].dtype
torch.bfloat16
>>> @precision.computes_in(precision.promote("float32"), note=False)
... def total(x):
...     return x.sum()
>>> total(torch.ones(3, dtype=torch.float16)).dtype
torch.float32
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

__all__ = ["HALF", "COMPUTE", "Promote", "promote", "compute_dtype", "rounds", "upcast", "round_once", "around",
           "computes_in", "NOTE", "NOTE_PROMOTE"]

#: The half-precision dtypes the mechanism upcasts.
HALF = (torch.bfloat16, torch.float16)

#: What ``half=`` / :func:`computes_in` may name: the dtype a half-precision call computes in.
COMPUTE = {"float32": torch.float32}


class Promote:
    """The declaration "compute half data in ``to`` and keep the results there" (made by :func:`promote`)."""

    __slots__ = ("to",)

    def __init__(self, to: str):
        self.to = to

    def __repr__(self) -> str:
        return f"promote({self.to!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Promote) and other.to == self.to

    def __hash__(self) -> int:
        return hash(("promote", self.to))


def promote(half: str = "float32") -> Promote:
    """``half=`` declaration of an operation whose bf16/fp16 data is computed in ``half`` and whose results stay
    there (no rounding back): type promotion, as ``numpy.fft`` gives float16 data (trnfft's transforms).
    ``ValueError`` for an unknown dtype."""
    compute_dtype(half, "promote")
    return Promote(half)


def rounds(half: Any) -> bool:
    """Whether a ``half=`` declaration rounds its results back to the input dtype (``"float32"``) or keeps
    them in the compute dtype (:func:`promote`)."""
    return not isinstance(half, Promote)


#: The "Low precision" docstring section of a function wrapped by :func:`computes_in` (placed before
#: "Examples").
NOTE = """
    Low precision
    -------------
    bfloat16/float16 inputs are computed in float32 and the floating results
    rounded once to the input dtype (integer results keep theirs): error
    ~``c n 2^-23 cond(A)`` from the float32 algorithm plus a relative
    ``2^-8`` (bf16) / ``2^-11`` (fp16) per entry, so ~``cond(A) 2^-8`` /
    ``cond(A) 2^-11`` overall. See :mod:`trnsci.precision`.
"""

#: The "Low precision" section of a function wrapped by ``computes_in(promote(...))``.
NOTE_PROMOTE = """
    Low precision
    -------------
    bfloat16/float16 inputs are computed in float32 and the results
    returned in float32 (complex64 for complex results), as type promotion
    gives them: the float32 algorithm's error on the exact float32 values of
    the inputs, no final rounding. See :mod:`trnsci.precision`.
"""


def compute_dtype(half: Any, where: str = "half") -> torch.dtype:
    """The torch dtype a ``half=`` declaration names (``"float32"`` or ``promote("float32")``); ``ValueError``
    otherwise."""
    if isinstance(half, Promote):
        half = half.to
    dt = COMPUTE.get(half) if isinstance(half, str) else None
    if dt is None:
        raise ValueError(f"{where}: the compute dtype of half-precision data must be one of "
                         f"{', '.join(repr(k) for k in COMPUTE)}, got {half!r}")
    return dt


def upcast(x: Any, to: torch.dtype = torch.float32) -> Any:
    """``x`` with every bfloat16/float16 tensor (and NumPy ``float16`` array, as a tensor) converted to ``to``,
    inside tuples and lists too, and every bf16/fp16 object of the protocol (``__trnsci_upcast__``, see the
    module docstring) as it gives itself in ``to``; everything else unchanged (the same object)."""
    if isinstance(x, torch.Tensor):
        if x.dtype not in HALF:
            return x
        return x.float() if to is torch.float32 else x.to(to)  # the same conversion; .float() parses less
    if isinstance(x, np.ndarray) and x.dtype == np.float16:
        return torch.from_numpy(x.astype(np.float32)).to(to)
    if isinstance(x, tuple):
        vals = [upcast(y, to) for y in x]
        return type(x)(*vals) if hasattr(x, "_fields") else tuple(vals)
    if isinstance(x, list):
        return [upcast(y, to) for y in x]
    up = getattr(type(x), "__trnsci_upcast__", None)
    if up is not None and x.dtype in HALF:
        return up(x, to)
    return x


def round_once(x: Any, dtype: torch.dtype, frm: torch.dtype = torch.float32) -> Any:
    """``x`` with every tensor of dtype ``frm`` rounded to ``dtype`` (inside tuples, named tuples and lists);
    integer, bool, complex and other results unchanged. An object of the protocol whose ``dtype`` is ``frm`` is
    rounded by its own ``to(dtype)``."""
    if isinstance(x, torch.Tensor):
        return x.to(dtype) if x.dtype == frm else x
    if isinstance(x, tuple):
        vals = [round_once(y, dtype, frm) for y in x]
        return type(x)(*vals) if hasattr(x, "_fields") else tuple(vals)
    if isinstance(x, list):
        return [round_once(y, dtype, frm) for y in x]
    if getattr(type(x), "__trnsci_upcast__", None) is not None and x.dtype == frm:
        return x.to(dtype)
    return x


def around(fn: Callable, half: str | Promote, dtype_of: Callable[..., Any]) -> Callable:
    """An Op's lowering ``fn`` under ``half=``: calls whose dtype (``dtype_of(*args, **kwargs)``) is
    bfloat16/float16 run ``fn`` on upcast arguments and get its results rounded once (``"float32"``) or as
    computed (``promote("float32")``); other calls run ``fn`` unchanged. The returned function keeps ``fn``
    as ``__wrapped__``."""
    to = compute_dtype(half)
    back = rounds(half)

    @functools.wraps(fn)
    def in_compute_dtype(*args, **kwargs):
        dt = dtype_of(*args, **kwargs)
        if dt is not torch.bfloat16 and dt is not torch.float16:
            return fn(*args, **kwargs)
        out = fn(*upcast(args, to), **{k: upcast(v, to) for k, v in kwargs.items()})
        return round_once(out, dt, to) if back else out

    in_compute_dtype.__dict__.pop("settles", None)  # a settles reduction describes fn's own arguments
    return in_compute_dtype


_T = torch.Tensor
_PLAIN = frozenset((int, float, bool, complex, str, type(None)))  # arguments that never carry data


def _has_half(x: Any) -> bool:
    """Whether ``x`` is or holds half-precision data (a tensor, NumPy float16 array, protocol object)."""
    if getattr(type(x), "__trnsci_upcast__", None) is not None:
        return x.dtype in HALF
    if isinstance(x, torch.Tensor):
        return x.dtype in HALF
    if isinstance(x, np.ndarray):
        return x.dtype == np.float16
    if isinstance(x, (tuple, list)):
        return any(_has_half(y) for y in x)
    return False


def _scan(x: Any, found: list) -> None:
    if isinstance(x, torch.Tensor):
        found.append(x.dtype)
    elif isinstance(x, np.ndarray):
        found.append(torch.float16 if x.dtype == np.float16 else None)
    elif isinstance(x, (tuple, list)):
        for y in x:
            _scan(y, found)
    elif getattr(type(x), "__trnsci_upcast__", None) is not None:
        found.append(x.dtype)


def _numpy_out(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        x = x.detach().resolve_conj().resolve_neg()
        return (x.float() if x.dtype == torch.bfloat16 else x).cpu().numpy()  # NumPy has no bfloat16
    if isinstance(x, tuple):
        vals = [_numpy_out(y) for y in x]
        return type(x)(*vals) if hasattr(x, "_fields") else tuple(vals)
    if isinstance(x, list):
        return [_numpy_out(y) for y in x]
    return x


def _promote_one(fn: Callable, name: str, at: int | None, to: torch.dtype) -> Callable:
    """The :func:`computes_in` wrapper of a :func:`promote` declaration on one parameter (a transform's input),
    written out: the same answers as the general wrapper, fewer steps on the way (a small transform takes a
    few microseconds)."""
    f32 = to is torch.float32

    def wrapper(*a, **kw):
        pos = at is not None and at < len(a)
        v = a[at] if pos else kw.get(name)
        t = type(v)
        numpy_in = False
        if t is _T:
            if v.dtype not in HALF:
                return fn(*a, **kw)
            v = v.float() if f32 else v.to(to)
        elif t in _PLAIN or not _has_half(v):
            return fn(*a, **kw)
        else:
            numpy_in = isinstance(v, np.ndarray)
            v = upcast(v, to)
        if pos:
            a = a[:at] + (v,) + a[at + 1:]
        else:
            kw = {**kw, name: v}
        out = fn(*a, **kw)
        return _numpy_out(out) if numpy_in else out

    return wrapper


def computes_in(half: str | Promote = "float32", *, args: tuple[str, ...] | None = None,
                note: bool = True) -> Callable[[Callable], Callable]:
    """Decorator: the public function computes bfloat16/float16 (and NumPy ``float16``) arguments in ``half``.

    The wrapper finds the dtypes of the tensor, array and protocol-object
    arguments (inside tuples and lists too; ``args``: only of the named
    parameters, the others pass as given). Without a half dtype among them
    it calls the function as it is. With one, every half argument is upcast
    (:func:`upcast`) before the function validates anything, the function
    runs, and -- ``half="float32"`` -- its results of the compute dtype are
    rounded once to the input dtype (:func:`round_once`), or --
    ``half=promote("float32")`` -- returned as computed. NumPy input gives
    NumPy output (bfloat16, which NumPy lacks, as float32). Under
    ``"float32"`` a half argument next to a different half dtype or a
    float32/float64/complex one is a ``TypeError`` naming the dtypes (one
    dtype to round back to); under :func:`promote` mixing is allowed.
    ``note``: add :data:`NOTE` (:data:`NOTE_PROMOTE`) to the docstring,
    before its "Examples" section.
    """
    to = compute_dtype(half, "computes_in")
    back = rounds(half)

    def decorate(fn: Callable) -> Callable:
        name = fn.__name__
        cover = None
        if args is not None:
            params = inspect.signature(fn).parameters
            unknown = [a for a in args if a not in params]
            if unknown:
                raise ValueError(f"computes_in: {name} has no parameter {', '.join(map(repr, unknown))}")
            order = [n for n, p in params.items()
                     if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
            # (name, position or None for keyword-only) of each covered parameter
            cover = tuple((a, order.index(a) if a in order else None) for a in args)

        def covered(a: tuple, kw: dict):
            if cover is None:
                return a + tuple(kw.values()) if kw else a
            return tuple(a[i] if i is not None and i < len(a) else kw.get(n) for n, i in cover)

        if cover is not None and len(cover) == 1:  # one data parameter (a transform's input): no loop
            (n1, i1), = cover
            if i1 is None:
                def covered(a: tuple, kw: dict):
                    return (kw.get(n1),)
            else:
                def covered(a: tuple, kw: dict):
                    return (a[i1],) if i1 < len(a) else (kw.get(n1),)

        def up(a: tuple, kw: dict) -> tuple[tuple, dict]:
            if cover is None:
                return upcast(a, to), ({k: upcast(v, to) for k, v in kw.items()} if kw else kw)
            for n, i in cover:
                if i is not None and i < len(a):
                    a = a[:i] + (upcast(a[i], to),) + a[i + 1:]
                elif n in kw:
                    kw = {**kw, n: upcast(kw[n], to)}
            return a, kw

        @functools.wraps(fn)
        def wrapper(*a, **kw):
            vals = covered(a, kw)
            # the common call, no half argument, straight through: plain tensors and scalars are read without
            # building anything; any other argument (arrays, sequences, protocol objects) is looked into
            for v in vals:
                t = type(v)
                if t is _T:
                    if v.dtype in HALF:
                        break
                elif t not in _PLAIN and _has_half(v):
                    break
            else:
                return fn(*a, **kw)
            if back:  # one dtype to round back to: the arguments must agree
                found: list = []
                for v in vals:
                    _scan(v, found)
                lowp = [d for d in found if d in HALF]
                dtype = lowp[0]
                other = [d for d in found if d is not None and d not in HALF and (d.is_floating_point or d.is_complex)]
                if other or any(d != dtype for d in lowp):
                    mixed = sorted({str(d).replace("torch.", "") for d in lowp + other})
                    raise TypeError(f"{name}: arguments mix dtypes {', '.join(mixed)}; give every matrix/vector the "
                                    "same dtype (bfloat16/float16 inputs are computed in float32 and returned in "
                                    "theirs)")
            to_numpy = False
            for v in vals:
                if isinstance(v, np.ndarray):
                    to_numpy = True
                    break
            a, kw = up(a, kw)
            out = fn(*a, **kw)
            if back:
                out = round_once(out, dtype, to)
            return _numpy_out(out) if to_numpy else out

        if not back and cover is not None and len(cover) == 1:
            wrapper = functools.wraps(fn)(_promote_one(fn, *cover[0], to))
        if note:
            text = NOTE if back else NOTE_PROMOTE
            doc = wrapper.__doc__ or ""
            at = doc.find("\n    Examples\n")
            wrapper.__doc__ = (doc[:at] + text + doc[at:]) if at >= 0 else doc + text
        return wrapper

    return decorate
