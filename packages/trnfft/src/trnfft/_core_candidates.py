"""Generic argument helpers trnfft needs and the core (:mod:`trnsci._validate`) lacks yet.

Candidates for the core: nothing here is FFT-specific. Each keeps the
common case to a few isinstance checks, since it runs on every call.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

_MISSING = object()


def alias(where: str, primary_name: str, primary: Any, alias_name: str, alias_value: Any, default: Any = None) -> Any:
    """Resolve a keyword and its alias (``dim``/``axis``); giving both is a ``TypeError``."""
    if alias_value is None:
        return default if primary is None else primary
    if primary is not None:
        raise TypeError(f"{where}: give {primary_name} or {alias_name}, not both")
    return alias_value


def axis(d: Any, ndim: int, name: str, where: str) -> int:
    """One axis index in ``[-ndim, ndim)`` as a non-negative int."""
    if type(d) is not int:
        if isinstance(d, bool) or not isinstance(d, numbers.Integral):
            raise TypeError(f"{where}: {name} must be an int, got {type(d).__name__}")
        d = int(d)
    if not -ndim <= d < ndim:
        raise ValueError(f"{where}: {name}={d} is out of range for an input with {ndim} dimension(s)")
    return d + ndim if d < 0 else d


def axes(ds: Any, ndim: int, name: str, where: str) -> tuple[int, ...]:
    """A sequence of distinct axes, normalized to non-negative ints."""
    if isinstance(ds, (str, bytes)) or not isinstance(ds, Sequence):
        if isinstance(ds, numbers.Integral) and not isinstance(ds, bool):
            ds = (ds,)
        else:
            raise TypeError(f"{where}: {name} must be a sequence of ints, got {type(ds).__name__}")
    out = tuple(axis(d, ndim, name, where) for d in ds)
    if len(set(out)) != len(out):
        raise ValueError(f"{where}: {name} must not repeat an axis, got {tuple(ds)}")
    return out


def positive_ints(s: Any, name: str, where: str) -> tuple[int, ...]:
    """A sequence of positive ints (``TypeError`` for non-ints, ``ValueError`` for <= 0)."""
    if isinstance(s, (str, bytes)) or not isinstance(s, Sequence):
        raise TypeError(f"{where}: {name} must be a sequence of ints, got {type(s).__name__}")
    out = []
    for v in s:
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise TypeError(f"{where}: {name} must hold ints, got {type(v).__name__}")
        if v <= 0:
            raise ValueError(f"{where}: {name} entries must be positive, got {tuple(s)}")
        out.append(int(v))
    return tuple(out)


def positive_int(n: Any, name: str, where: str) -> int:
    if type(n) is not int:
        if isinstance(n, bool) or not isinstance(n, numbers.Integral):
            raise TypeError(f"{where}: {name} must be an int, got {type(n).__name__}")
        n = int(n)
    if n <= 0:
        raise ValueError(f"{where}: {name} must be positive, got {n}")
    return n
