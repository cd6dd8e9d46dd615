"""bfloat16 / float16 inputs for every trnsolver routine: computed in float32, returned in the input dtype.

Factorizations and solves lose accuracy in 8-bit (bf16) or 11-bit (fp16)
significands faster than the inputs already do -- pivots, Householder
norms and Jacobi rotations would be rounded to ~3 decimal digits at every
step -- so :func:`half_io` upcasts every bf16/fp16 tensor argument to
float32 before validation, runs the routine unchanged (torch path, or the
float32 kernels on the NKI path), and rounds each floating result once to the
input dtype. Integer results (pivots, ``info``, ranks) keep their dtype.

Error bound: the float32 result carries the float32 algorithm's error
(``~c n eps32 cond(A)``, ``eps32 = 2^-23``), and the final rounding adds a
relative ``2^-8`` (bf16) or ``2^-11`` (fp16) per entry. The inputs themselves
were rounded at that precision, so against the exact-arithmetic answer for
the matrix the caller *meant*, expect ``~cond(A) 2^-8`` (bf16) or
``~cond(A) 2^-11`` (fp16) relative error.

A half-precision argument next to a float32/float64 one is a ``TypeError``
(one dtype per call, as for the other dtypes); integer and bool inputs stay
``TypeError`` s from the validators.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

HALF = (torch.bfloat16, torch.float16)
_NOTE = """
    Low precision
    -------------
    bfloat16/float16 inputs are computed in float32 and the floating results
    rounded once to the input dtype (integer results keep theirs): error
    ~``c n 2^-23 cond(A)`` from the float32 algorithm plus a relative
    ``2^-8`` (bf16) / ``2^-11`` (fp16) per entry, so ~``cond(A) 2^-8`` /
    ``cond(A) 2^-11`` overall. See :mod:`trnsolver._lowp`.
"""


def _scan(x, found):
    if isinstance(x, torch.Tensor):
        found.append(x.dtype)
    elif isinstance(x, np.ndarray):
        found.append(torch.float16 if x.dtype == np.float16 else None)
    elif isinstance(x, (tuple, list)):
        for y in x:
            _scan(y, found)


def _up(x):
    if isinstance(x, torch.Tensor):
        return x.float() if x.dtype in HALF else x
    if isinstance(x, np.ndarray) and x.dtype == np.float16:
        return torch.from_numpy(x.astype(np.float32))
    if isinstance(x, tuple):
        return tuple(_up(y) for y in x)
    if isinstance(x, list):
        return [_up(y) for y in x]
    return x


def _down(x, dtype, to_numpy):
    if isinstance(x, torch.Tensor):
        if x.dtype == torch.float32:
            x = x.to(dtype)
        if to_numpy:
            return x.detach().cpu().numpy() if x.dtype != torch.bfloat16 else x.float().detach().cpu().numpy()
        return x
    if isinstance(x, tuple):
        vals = [_down(y, dtype, to_numpy) for y in x]
        return type(x)(*vals) if hasattr(x, "_fields") else tuple(vals)
    if isinstance(x, list):
        return [_down(y, dtype, to_numpy) for y in x]
    return x


def half_io(fn):
    """Wrap a public routine so bf16/fp16 tensors (and float16 NumPy arrays) work; see the module docstring."""
    name = fn.__name__

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        found: list = []
        for a in args:
            _scan(a, found)
        for a in kwargs.values():
            _scan(a, found)
        half = [d for d in found if d in HALF]
        if not half:
            return fn(*args, **kwargs)
        other = [d for d in found if d is not None and d not in HALF and (d.is_floating_point or d.is_complex)]
        dtype = half[0]
        if other or any(d != dtype for d in half):
            mixed = sorted({str(d).replace("torch.", "") for d in half + other})
            raise TypeError(f"{name}: arguments mix dtypes {', '.join(mixed)}; give every matrix/vector the "
                            "same dtype (bfloat16/float16 inputs are computed in float32 and returned in theirs)")
        to_numpy = any(isinstance(a, np.ndarray) for a in list(args) + list(kwargs.values()))
        out = fn(*(_up(a) for a in args), **{k: _up(v) for k, v in kwargs.items()})
        return _down(out, dtype, to_numpy)

    doc = wrapper.__doc__ or ""
    at = doc.find("\n    Examples\n")
    wrapper.__doc__ = (doc[:at] + _NOTE + doc[at:]) if at >= 0 else doc + _NOTE
    return wrapper
