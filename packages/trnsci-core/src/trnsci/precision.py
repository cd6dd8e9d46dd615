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

Error bound of both: the float32 algorithm's error plus one rounding of
each result, a relative ``2^-8`` (bfloat16) or ``2^-11`` (float16) per
entry. Arguments mixing a half dtype with another floating dtype are a
``TypeError`` from :func:`computes_in` (one dtype per call); an Op's
public function checks its operands agree before the Op is called.

Examples
--------
>>> import torch
>>> from trnsci import precision
>>> precision.upcast((torch.ones(2, dtype=torch.bfloat16), 3))[0].dtype
torch.float32
>>> precision.round_once((torch.ones(2), torch.arange(2)), torch.bfloat16)[0].dtype
torch.bfloat16
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

__all__ = ["HALF", "COMPUTE", "compute_dtype", "upcast", "round_once", "around", "computes_in", "NOTE"]

#: The half-precision dtypes the mechanism upcasts.
HALF = (torch.bfloat16, torch.float16)

#: What ``half=`` / :func:`computes_in` may name: the dtype a half-precision call computes in.
COMPUTE = {"float32": torch.float32}

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


def compute_dtype(half: Any, where: str = "half") -> torch.dtype:
    """The torch dtype a ``half=`` declaration names (``"float32"``); ``ValueError`` otherwise."""
    dt = COMPUTE.get(half) if isinstance(half, str) else None
    if dt is None:
        raise ValueError(f"{where}: the compute dtype of half-precision data must be one of "
                         f"{', '.join(repr(k) for k in COMPUTE)}, got {half!r}")
    return dt


def upcast(x: Any, to: torch.dtype = torch.float32) -> Any:
    """``x`` with every bfloat16/float16 tensor (and NumPy ``float16`` array, as a tensor) converted to ``to``,
    inside tuples and lists too; everything else unchanged (the same object)."""
    if isinstance(x, torch.Tensor):
        return x.to(to) if x.dtype in HALF else x
    if isinstance(x, np.ndarray) and x.dtype == np.float16:
        return torch.from_numpy(x.astype(np.float32)).to(to)
    if isinstance(x, tuple):
        vals = [upcast(y, to) for y in x]
        return type(x)(*vals) if hasattr(x, "_fields") else tuple(vals)
    if isinstance(x, list):
        return [upcast(y, to) for y in x]
    return x


def round_once(x: Any, dtype: torch.dtype, frm: torch.dtype = torch.float32) -> Any:
    """``x`` with every tensor of dtype ``frm`` rounded to ``dtype`` (inside tuples, named tuples and lists);
    integer, bool, complex and other results unchanged."""
    if isinstance(x, torch.Tensor):
        return x.to(dtype) if x.dtype == frm else x
    if isinstance(x, tuple):
        vals = [round_once(y, dtype, frm) for y in x]
        return type(x)(*vals) if hasattr(x, "_fields") else tuple(vals)
    if isinstance(x, list):
        return [round_once(y, dtype, frm) for y in x]
    return x


def around(fn: Callable, half: str, dtype_of: Callable[..., Any]) -> Callable:
    """An Op's lowering ``fn`` under ``half=``: calls whose dtype (``dtype_of(*args, **kwargs)``) is
    bfloat16/float16 run ``fn`` on upcast arguments and get its results rounded once; other calls run
    ``fn`` unchanged. The returned function keeps ``fn`` as ``__wrapped__``."""
    to = compute_dtype(half)

    @functools.wraps(fn)
    def in_compute_dtype(*args, **kwargs):
        dt = dtype_of(*args, **kwargs)
        if dt is not torch.bfloat16 and dt is not torch.float16:
            return fn(*args, **kwargs)
        return round_once(fn(*upcast(args, to), **{k: upcast(v, to) for k, v in kwargs.items()}), dt, to)

    in_compute_dtype.__dict__.pop("settles", None)  # a settles reduction describes fn's own arguments
    return in_compute_dtype


def _scan(x: Any, found: list) -> None:
    if isinstance(x, torch.Tensor):
        found.append(x.dtype)
    elif isinstance(x, np.ndarray):
        found.append(torch.float16 if x.dtype == np.float16 else None)
    elif isinstance(x, (tuple, list)):
        for y in x:
            _scan(y, found)


def _numpy_out(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return (x.float() if x.dtype == torch.bfloat16 else x).detach().cpu().numpy()
    if isinstance(x, tuple):
        vals = [_numpy_out(y) for y in x]
        return type(x)(*vals) if hasattr(x, "_fields") else tuple(vals)
    if isinstance(x, list):
        return [_numpy_out(y) for y in x]
    return x


def computes_in(half: str = "float32", *, note: bool = True) -> Callable[[Callable], Callable]:
    """Decorator: the public function computes bfloat16/float16 (and NumPy ``float16``) arguments in ``half``.

    The wrapper finds the dtypes of the tensor and array arguments (inside
    tuples and lists too). Without a half dtype among them it calls the
    function as it is. With one, every half argument is upcast
    (:func:`upcast`) before the function validates anything, the function
    runs, and its results of the compute dtype are rounded once to the
    input dtype (:func:`round_once`); NumPy input gives NumPy output
    (bfloat16, which NumPy lacks, as float32). A half argument next to a
    different half dtype or a float32/float64/complex one is a
    ``TypeError`` naming the dtypes. ``note``: add :data:`NOTE` to the
    docstring, before its "Examples" section.
    """
    to = compute_dtype(half, "computes_in")

    def decorate(fn: Callable) -> Callable:
        name = fn.__name__

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            found: list = []
            for a in args:
                _scan(a, found)
            for a in kwargs.values():
                _scan(a, found)
            lowp = [d for d in found if d in HALF]
            if not lowp:
                return fn(*args, **kwargs)
            other = [d for d in found if d is not None and d not in HALF and (d.is_floating_point or d.is_complex)]
            dtype = lowp[0]
            if other or any(d != dtype for d in lowp):
                mixed = sorted({str(d).replace("torch.", "") for d in lowp + other})
                raise TypeError(f"{name}: arguments mix dtypes {', '.join(mixed)}; give every matrix/vector the "
                                "same dtype (bfloat16/float16 inputs are computed in float32 and returned in theirs)")
            to_numpy = any(isinstance(a, np.ndarray) for a in list(args) + list(kwargs.values()))
            out = round_once(fn(*upcast(args, to), **{k: upcast(v, to) for k, v in kwargs.items()}), dtype, to)
            return _numpy_out(out) if to_numpy else out

        if note:
            doc = wrapper.__doc__ or ""
            at = doc.find("\n    Examples\n")
            wrapper.__doc__ = (doc[:at] + NOTE + doc[at:]) if at >= 0 else doc + NOTE
        return wrapper

    return decorate
