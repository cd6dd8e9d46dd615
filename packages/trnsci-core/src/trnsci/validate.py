"""Shared argument checks, so that errors read the same in every library.

Every public function takes torch tensors or NumPy arrays. :func:`numpy_io`
turns NumPy inputs into tensors (sharing memory, no copy) and the results
back into NumPy arrays; the checks below raise ``TypeError`` for a wrong
kind of value and ``ValueError`` for a wrong shape or value, always naming
the argument (``"gemm: A must be ..."``).
"""

from __future__ import annotations

import functools
import numbers
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import torch

from trnsci import dispatch as _dispatch

FLOAT_DTYPES = (torch.float32, torch.float64)
COMPLEX_DTYPES = (torch.complex64, torch.complex128)
REAL_DTYPES = (torch.bfloat16, torch.float16, torch.float32, torch.float64)
BLAS_DTYPES = FLOAT_DTYPES + COMPLEX_DTYPES
ALL_FLOAT_DTYPES = REAL_DTYPES + COMPLEX_DTYPES


def _dtype_names(dtypes: Iterable[torch.dtype]) -> str:
    return ", ".join(str(d).replace("torch.", "") for d in dtypes)


def tensor(x: Any, name: str, where: str = "", dtypes: Sequence[torch.dtype] | None = None, *,
           sparse: bool = False) -> torch.Tensor:
    """``x`` as a torch tensor (NumPy arrays share memory when they can), else ``TypeError``.

    ``dtypes``, if given, are the allowed dtypes (``TypeError`` naming them
    otherwise). Sparse tensors (COO, CSR, ...) are a ``TypeError`` (pass
    ``x.to_dense()``) unless ``sparse=True``; NumPy arrays with negative
    strides are copied.
    """
    if type(x) is torch.Tensor or isinstance(x, torch.Tensor):
        t = x
        if t.layout is not torch.strided and not sparse:
            raise TypeError(f"{_p(where)}{name} is a sparse tensor (layout {t.layout}); "
                            f"pass a dense tensor ({name}.to_dense())")
    elif isinstance(x, np.ndarray):
        if x.dtype.kind in "OUSV":  # object, strings, void
            raise TypeError(f"{_p(where)}{name} must hold numbers, got a NumPy array of dtype {x.dtype}")
        t = _from_numpy(x)
    else:
        raise TypeError(f"{_p(where)}{name} must be a torch.Tensor or numpy.ndarray, got {type(x).__name__}")
    if dtypes is not None and t.dtype not in dtypes:
        dtype(t, name, dtypes, where)
    return t


def _from_numpy(a: np.ndarray) -> torch.Tensor:
    """Share memory when torch can (writeable, native byte order, non-negative strides), else copy.

    Non-native byte order (``'>f8'`` on a little-endian machine) is converted
    to native in the copy, as NumPy's own ufuncs accept it.
    """
    if not a.flags.writeable or (a.ndim and min(a.strides) < 0) or not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="), copy=True)
    return torch.from_numpy(a)


def matrix(x: Any, name: str, where: str = "", dtypes: Sequence[torch.dtype] | None = None) -> torch.Tensor:
    """:func:`tensor` that must be 2-D."""
    t = tensor(x, name, where, dtypes)
    if t.dim() != 2:
        ndim(t, name, 2, where)
    return t


def vector(x: Any, name: str, where: str = "", dtypes: Sequence[torch.dtype] | None = None) -> torch.Tensor:
    """:func:`tensor` that must be 1-D."""
    t = tensor(x, name, where, dtypes)
    if t.dim() != 1:
        ndim(t, name, 1, where)
    return t


def square(t: torch.Tensor, name: str, where: str = "") -> int:
    """The order of a square matrix (last two dims equal), else ``ValueError``."""
    if t.shape[-1] != t.shape[-2]:
        raise ValueError(f"{_p(where)}{name} must be square, got shape {tuple(t.shape)}")
    return t.shape[-1]


def agree(where: str = "", **named: torch.Tensor | None) -> None:
    """All named tensors (None skipped) share dtype (``TypeError``) and device (``ValueError``)."""
    first = None
    for t in named.values():
        if t is None:
            continue
        if first is None:
            first = t
        elif t.dtype is not first.dtype or t.device != first.device:
            same_dtype(where, **named)
            same_device(where, **named)


def agree3(where: str, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor | None,
           names: tuple[str, str, str] = ("A", "B", "C")) -> None:
    """:func:`agree` for a fixed triple without building a dict on the common path."""
    dt, dev = A.dtype, A.device
    if B.dtype is not dt or B.device != dev or (C is not None and (C.dtype is not dt or C.device != dev)):
        agree(where, **dict(zip(names, (A, B, C))))


def mismatch(where: str, what: str, **named: torch.Tensor) -> ValueError:
    """A ``ValueError`` (to raise) naming every tensor involved and its shape."""
    parts = ", ".join(f"{k} has shape {tuple(t.shape)}" for k, t in named.items())
    return ValueError(f"{_p(where)}{what}: {parts}")


def _p(where: str) -> str:
    return f"{where}: " if where else ""


def dtype(t: torch.Tensor, name: str, allowed: Sequence[torch.dtype], where: str = "") -> torch.dtype:
    """Check that ``t.dtype`` is one of ``allowed`` (``TypeError`` otherwise)."""
    if t.dtype not in allowed:
        raise TypeError(
            f"{_p(where)}{name} has dtype {str(t.dtype).replace('torch.', '')}; expected one of {_dtype_names(allowed)}"
        )
    return t.dtype


def ndim(t: torch.Tensor, name: str, dims: int | Sequence[int], where: str = "") -> int:
    """Check the number of dimensions (``ValueError`` otherwise)."""
    ok = (dims,) if isinstance(dims, int) else tuple(dims)
    if t.dim() not in ok:
        want = " or ".join(str(d) for d in ok)
        raise ValueError(f"{_p(where)}{name} must be {want}-D, got shape {tuple(t.shape)}")
    return t.dim()


def shape(t: torch.Tensor, name: str, expected: Sequence[int | None], where: str = "") -> None:
    """Check ``t.shape`` against ``expected`` (``None`` matches any extent)."""
    got = tuple(t.shape)
    if len(got) != len(expected) or any(e is not None and g != e for g, e in zip(got, expected)):
        want = "(" + ", ".join("*" if e is None else str(e) for e in expected) + ")"
        raise ValueError(f"{_p(where)}{name} must have shape {want}, got {got}")


def same_dtype(where: str = "", **named: torch.Tensor) -> torch.dtype:
    """All named tensors share one dtype (``TypeError`` otherwise)."""
    items = [(k, v) for k, v in named.items() if v is not None]
    first_name, first = items[0]
    for k, v in items[1:]:
        if v.dtype != first.dtype:
            raise TypeError(
                f"{_p(where)}{k} has dtype {str(v.dtype).replace('torch.', '')} but {first_name} has "
                f"{str(first.dtype).replace('torch.', '')}; cast them to one dtype"
            )
    return first.dtype


def same_device(where: str = "", **named: torch.Tensor) -> torch.device:
    """All named tensors live on one device (``ValueError`` otherwise)."""
    items = [(k, v) for k, v in named.items() if v is not None]
    first_name, first = items[0]
    for k, v in items[1:]:
        if v.device != first.device:
            raise ValueError(f"{_p(where)}{k} is on {v.device} but {first_name} is on {first.device}")
    return first.device


_INT64 = 2**63


def scalar(x: Any, name: str, where: str = "", *, complex_ok: bool = True) -> complex | float | int:
    """A Python number (or 0-d tensor/array) as a Python scalar.

    Booleans and non-numbers are a ``TypeError``, as is a complex value when
    ``complex_ok`` is false. Integers beyond int64 become floats (torch
    cannot take them as scalars); beyond float range, ``ValueError``.
    """
    t = type(x)
    if t is float or (t is int and -_INT64 <= x < _INT64):
        return x
    if isinstance(x, (torch.Tensor, np.ndarray)) and x.ndim == 0:
        x = x.item()
    if isinstance(x, bool) or isinstance(x, np.bool_) or not isinstance(x, numbers.Number):
        raise TypeError(f"{_p(where)}{name} must be a number, got {type(x).__name__}")
    if isinstance(x, numbers.Complex) and not isinstance(x, numbers.Real):
        if not complex_ok:
            raise TypeError(f"{_p(where)}{name} must be real, got {x!r}")
        return complex(x)
    if isinstance(x, numbers.Integral):
        x = int(x)
        if -_INT64 <= x < _INT64:
            return x
        try:
            return float(x)
        except OverflowError:
            raise ValueError(f"{_p(where)}{name} (an integer of {len(str(abs(x)))} digits) is too large "
                             "for floating point") from None
    return float(x)


def finish(result: torch.Tensor, out: Any, where: str = "") -> torch.Tensor:
    """Return ``result``, or copy it into ``out`` (see :func:`write_out`) and return ``out``."""
    if out is None:
        return result
    return write_out(result, out, where)


def choice(value: Any, name: str, options: dict[str, Sequence[Any]], where: str = "") -> str:
    """Map ``value`` onto a canonical option; ``options`` maps canon -> spellings.

    Strings compare case-insensitively. ``ValueError`` lists the valid spellings.
    """
    for canon, spellings in options.items():
        for s in spellings:
            if value is s or (isinstance(value, str) and isinstance(s, str) and value.lower() == s.lower()):
                return canon
            if isinstance(value, bool) and isinstance(s, bool) and value == s:
                return canon
    valid = ", ".join(repr(s) for v in options.values() for s in v)
    raise ValueError(f"{_p(where)}{name} must be one of {valid}; got {value!r}")


class Options:
    """A keyword with a fixed set of spellings, each mapped to a canonical code.

    ``Options({"U": ("upper", "U"), "L": ("lower", "L")})`` accepts
    ``"upper"``, ``"UPPER"``, ``"u"``, ... and returns ``"U"``. Strings match
    case-insensitively through one dict lookup (this runs on every call of
    a public op); other spellings (``True``/``False``) match by identity.
    Anything else is a ``ValueError`` listing the valid spellings.
    """

    def __init__(self, options: dict[str, Sequence[Any]]):
        self.options = options
        self._strings = {s.lower(): canon for canon, sp in options.items() for s in sp if isinstance(s, str)}
        self._objects = tuple((s, canon) for canon, sp in options.items() for s in sp if not isinstance(s, str))

    def __call__(self, value: Any, name: str, where: str = "") -> str:
        if type(value) is str:
            code = self._strings.get(value.lower())
            if code is not None:
                return code
        else:
            for spelling, canon in self._objects:
                if value is spelling:
                    return canon
        return choice(value, name, self.options, where)


def integer(x: Any, name: str, where: str = "", *, minimum: int | None = None,
            maximum: int | None = None) -> int:
    """A Python int (bools rejected; NumPy integers and 0-d integer arrays/tensors accepted),
    optionally bounded below and above (:data:`INDEX_MAX` for a tensor size or count,
    :data:`SEED_MAX` for a torch seed)."""
    if isinstance(x, bool) or not isinstance(x, numbers.Integral):
        if int_0d(x):
            return integer(x.item(), name, where, minimum=minimum, maximum=maximum)
        raise TypeError(f"{_p(where)}{name} must be an int, got {type(x).__name__}")
    x = int(x)
    if minimum is not None and x < minimum:
        raise ValueError(f"{_p(where)}{name} must be >= {minimum}, got {x}")
    if maximum is not None and x > maximum:
        raise ValueError(f"{_p(where)}{name} must be at most {_power_of_two(maximum)}, got {x}")
    return x


#: The largest tensor size or count (int64), and the largest seed torch takes (uint64).
INDEX_MAX = 2**63 - 1
SEED_MAX = 2**64 - 1


def _power_of_two(m: int) -> str:
    """``2**63 - 1`` style for bounds one off a power of two, else the number."""
    for k in range(32, 130):
        if m == 2**k - 1:
            return f"2**{k} - 1"
        if m == 2**k:
            return f"2**{k}"
    return str(m)


def device(dev: Any, where: str, name: str = "device") -> torch.device | None:
    """A ``device=`` argument as a ``torch.device`` (None stays None); ``TypeError`` for a non-device,
    ``ValueError`` for a device string or index torch does not know or cannot use here."""
    if dev is None or type(dev) is torch.device:
        return dev
    if isinstance(dev, bool) or not isinstance(dev, (str, int)):
        raise TypeError(f"{_p(where)}{name} must be a str or torch.device, got {type(dev).__name__}")
    try:
        d = torch.device(dev)
        torch.empty(0, device=d)  # an unavailable backend (e.g. "cuda" without a GPU) fails here
    except (RuntimeError, ValueError, TypeError, AssertionError) as e:
        raise ValueError(f"{_p(where)}{name} {dev!r} is not a usable device here "
                         f"({str(e).splitlines()[0][:80]})") from None
    return d


def numpy_io(fn: Callable) -> Callable:
    """Let ``fn`` take NumPy arrays: inputs become tensors, results NumPy arrays.

    If any positional or keyword argument is a NumPy array, every tensor in
    the result (a tensor, or a tuple/list of them) is returned as NumPy. An
    ``out=`` NumPy array is written in place (through shared memory).
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        for a in args:  # a plain loop: this runs on every call of every public op
            if isinstance(a, np.ndarray):
                break
        else:
            for a in kwargs.values():
                if isinstance(a, np.ndarray):
                    break
            else:
                return fn(*args, **kwargs)
        return _numpy_call(fn, args, kwargs)

    def traced(*args, **kwargs):
        """What torch.compile traces for ``wrapper`` (the same steps; argument errors escape a fullgraph
        compilation as themselves: :func:`trnsci.dispatch.argument_errors`)."""
        if any(isinstance(a, np.ndarray) for a in (*args, *kwargs.values())):
            return _numpy_call(fn, args, kwargs)
        return fn(*args, **kwargs)

    _dispatch.traceable_as(wrapper, _dispatch.argument_errors(traced))
    return wrapper


def _numpy_call(fn: Callable, args: tuple, kwargs: dict):
    """:func:`numpy_io`'s call with NumPy arguments (its traced form)."""
    out = kwargs.get("out")
    if isinstance(out, np.ndarray) and (not out.flags.writeable or any(st < 0 for st in out.strides)
                                        or not out.dtype.isnative):
        raise ValueError(f"{fn.__name__}: out must be a writeable NumPy array with non-negative strides "
                         "in native byte order (the result is written through shared memory)")
    args = tuple(_np_to_torch(a) for a in args)
    kwargs = {k: _np_to_torch(v) for k, v in kwargs.items()}
    return to_numpy(fn(*args, **kwargs))


def _np_to_torch(a: Any) -> Any:
    if isinstance(a, np.ndarray) and a.dtype != object and a.dtype.kind not in "USV":
        return _from_numpy(a)
    return a


def to_numpy(r: Any) -> Any:
    """``r`` with every tensor in it as a NumPy array (tuples and lists element-wise, named tuples as they are):
    what :func:`numpy_io` returns to a NumPy caller. Gradients are detached, conjugate/negative views
    materialized, bfloat16 widened to float32 (NumPy has none), device tensors copied to the host."""
    if type(r) is torch.Tensor and not r.requires_grad and r.is_cpu and r.dtype is not torch.bfloat16:
        try:
            return r.numpy()  # the common case, without the detach/cpu calls below
        except RuntimeError:  # a lazy conjugate/negative view (e.g. from ifft): materialize it below
            pass
    if isinstance(r, torch.Tensor):
        r = r.detach().resolve_conj().resolve_neg()
        if r.dtype == torch.bfloat16:
            r = r.float()
        return r.cpu().numpy()
    if isinstance(r, tuple) and not hasattr(r, "_fields"):
        return tuple(to_numpy(x) for x in r)
    if isinstance(r, list):
        return [to_numpy(x) for x in r]
    return r


def write_out(result: torch.Tensor, out: Any, where: str = "", name: str = "out") -> torch.Tensor:
    """Copy ``result`` into the caller's ``out`` tensor and return ``out``.

    ``out`` must have the result's shape, dtype and device: trnsci never
    casts silently into a caller's buffer.
    """
    if out is None:
        return result
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"{_p(where)}{name} must be a torch.Tensor or numpy.ndarray, got {type(out).__name__}")
    if tuple(out.shape) != tuple(result.shape):
        raise ValueError(f"{_p(where)}{name} must have shape {tuple(result.shape)}, got {tuple(out.shape)}")
    if out.dtype != result.dtype:
        raise TypeError(f"{_p(where)}{name} has dtype {out.dtype}; the result is {result.dtype}")
    if out.device != result.device:
        raise ValueError(f"{_p(where)}{name} is on {out.device}; the result is on {result.device}")
    if out.layout is not torch.strided:
        raise TypeError(f"{_p(where)}{name} is a sparse tensor (layout {out.layout}); pass a dense tensor")
    if out.requires_grad:
        raise ValueError(f"{_p(where)}{name} requires grad; trnsci cannot write into it in place "
                         f"(pass {name}.detach() or leave {name} out)")
    if any(st == 0 and n > 1 for st, n in zip(out.stride(), out.shape)):
        raise ValueError(f"{_p(where)}{name} has overlapping memory (a stride of 0, e.g. from expand); "
                         "pass a tensor with its own storage for every element")
    out.copy_(result)
    return out


# ===================================================================== axes, aliases, positive ints
# (from trnfft; generic argument helpers for NumPy-style keywords. Each keeps
# the common case -- a plain int -- to one type check, since they run on
# every call.)

def alias(where: str, primary_name: str, primary: Any, alias_name: str, alias_value: Any,
          default: Any = None) -> Any:
    """Resolve a keyword and its alias (``dim``/``axis``); giving both is a ``TypeError``.

    >>> alias("fft", "dim", None, "axis", 0, -1), alias("fft", "dim", None, "axis", None, -1)
    (0, -1)
    """
    if alias_value is None:
        return default if primary is None else primary
    if primary is not None:
        raise TypeError(f"{_p(where)}give {primary_name} or {alias_name}, not both")
    return alias_value


def axis(d: Any, ndim: int, name: str, where: str = "") -> int:
    """One axis index in ``[-ndim, ndim)`` as a non-negative int (``TypeError`` for non-ints, bools).

    >>> axis(-1, 3, "dim")
    2
    """
    if type(d) is not int:
        d = integer(d, name, where)
    if not -ndim <= d < ndim:
        raise ValueError(f"{_p(where)}{name}={d} is out of range for an input with {ndim} dimension(s)")
    return d + ndim if d < 0 else d


def int_0d(x: Any) -> bool:
    """A 0-d NumPy integer array or 0-d integer (not bool) tensor."""
    if isinstance(x, np.ndarray):
        return x.ndim == 0 and x.dtype.kind in "iu"
    if isinstance(x, torch.Tensor):
        return x.dim() == 0 and not (x.dtype.is_floating_point or x.dtype.is_complex or x.dtype is torch.bool)
    return False


def int_sequence(s: Any, name: str, where: str) -> Sequence:
    """``s`` as a sequence of ints: any sequence, or a 1-D NumPy integer array / integer tensor
    (as NumPy and SciPy accept); a single integer (NumPy scalars and 0-d arrays included) as
    a 1-tuple."""
    if isinstance(s, (np.ndarray, torch.Tensor)):
        kind_ok = (s.dtype.kind in "iu") if isinstance(s, np.ndarray) else not (
            s.dtype.is_floating_point or s.dtype.is_complex or s.dtype is torch.bool)
        if not kind_ok or s.ndim > 1:
            raise TypeError(f"{_p(where)}{name} must be a sequence of ints, got a {s.ndim}-D "
                            f"{type(s).__name__} of dtype {s.dtype}")
        return (s.item(),) if s.ndim == 0 else s.tolist()
    if isinstance(s, numbers.Integral) and not isinstance(s, bool):
        return (s,)
    if isinstance(s, (str, bytes)) or not isinstance(s, Sequence):
        raise TypeError(f"{_p(where)}{name} must be a sequence of ints, got {type(s).__name__}")
    return s


def axes(ds: Any, ndim: int, name: str, where: str = "") -> tuple[int, ...]:
    """A sequence of distinct axes (or one int), normalized to non-negative ints.

    Any integer sequence is accepted, NumPy integer arrays and scalars included.

    >>> axes((0, -1), 3, "dim")
    (0, 2)
    """
    if type(ds) is not tuple:
        ds = int_sequence(ds, name, where)
    out = tuple(axis(d, ndim, name, where) for d in ds)
    if len(set(out)) != len(out):
        raise ValueError(f"{_p(where)}{name} must not repeat an axis, got {tuple(ds)}")
    return out


def positive_int(n: Any, name: str, where: str = "") -> int:
    """A positive Python int (``TypeError`` for non-ints and bools, ``ValueError`` for <= 0).

    >>> positive_int(8, "n")
    8
    """
    if type(n) is not int:
        n = integer(n, name, where)
    if n <= 0:
        raise ValueError(f"{_p(where)}{name} must be positive, got {n}")
    if n > _INDEX_MAX:
        raise ValueError(f"{_p(where)}{name} must be at most 2**63 - 1 (a tensor length), got {n}")
    return n


_INDEX_MAX = 2**63 - 1


def positive_ints(s: Any, name: str, where: str = "") -> tuple[int, ...]:
    """A sequence of positive ints as a tuple.

    >>> positive_ints([4, 5], "s")
    (4, 5)
    """
    if type(s) is not tuple and type(s) is not list:
        if isinstance(s, numbers.Integral) and not isinstance(s, bool):
            raise TypeError(f"{_p(where)}{name} must be a sequence of ints, got {type(s).__name__}")
        s = int_sequence(s, name, where)
    return tuple(positive_int(v, f"{name} entries", where) for v in s)


# =====================================================================
# Flags and positive tolerances: ``check_finite=``,
# ``tol=``-style arguments, with the argument named in the error.

def flag(x: Any, name: str, where: str) -> bool:
    """``x`` if it is a bool (Python or NumPy), else ``TypeError``."""
    if not isinstance(x, (bool, np.bool_)):
        raise TypeError(f"{where}: {name} must be True or False, got {type(x).__name__}")
    return bool(x)


def positive(x: Any, name: str, where: str, *, zero_ok: bool = False) -> float:
    """A finite real ``> 0`` (``>= 0`` with ``zero_ok``) as a float, else ``TypeError``/``ValueError``."""
    s = scalar(x, name, where, complex_ok=False)
    if not (s >= 0 if zero_ok else s > 0) or s != s or s == float("inf"):
        raise ValueError(f"{where}: {name} must be a finite number {'>= 0' if zero_ok else '> 0'}, got {x!r}")
    return float(s)
