"""Argument handling shared by the three BLAS levels.

The public functions in ``level1``/``level2``/``level3`` all read the same
way: check the arguments with these helpers, put them in canonical form
(one-letter option codes, Python scalars, tensors), then run. The helpers
keep the common case cheap -- a dict lookup for an option string, an
identity check for a dtype -- and fall back to :mod:`trnsci._validate` for
the error message when something is wrong, so every library words its
errors the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from trnsci import _validate as v

BLAS_DTYPES = v.BLAS_DTYPES
ALL_FLOAT_DTYPES = v.ALL_FLOAT_DTYPES
KERNEL_DTYPES = (torch.float32, torch.bfloat16)

# ----------------------------------------------------------------- options
# Canonical code -> accepted spellings (strings compared case-insensitively).
# Each is a callable ``(value, name, where) -> code``; see trnsci._validate.Options.
TRANS_OPTIONS = {"N": ("N", False), "T": ("T", True), "C": ("C",)}
UPLO_OPTIONS = {"U": ("upper", "U"), "L": ("lower", "L")}
SIDE_OPTIONS = {"L": ("left", "L"), "R": ("right", "R")}
DIAG_OPTIONS = {"N": ("nonunit", "N"), "U": ("unit", "U")}

trans = v.Options(TRANS_OPTIONS)  # False/"N" -> "N", True/"T" -> "T", "C" -> "C"
uplo = v.Options(UPLO_OPTIONS)
side = v.Options(SIDE_OPTIONS)
diag = v.Options(DIAG_OPTIONS)


def fill(value: Any, where: str) -> bool:
    """``fill=None`` (BLAS: one triangle) -> False, ``fill="full"`` -> True."""
    if value is None:
        return False
    if isinstance(value, str) and value.lower() == "full":
        return True
    raise ValueError(f"{where}: fill must be None or 'full'; got {value!r}")


def real_trans(code: str, dtype: torch.dtype) -> str:
    """For real data a conjugate transpose is a transpose: ``"C"`` -> ``"T"``."""
    if code == "C" and not dtype.is_complex:
        return "T"
    return code


# ----------------------------------------------------------------- tensors

def tensor(x: Any, name: str, where: str, dtypes: Sequence[torch.dtype] = BLAS_DTYPES) -> torch.Tensor:
    """``x`` as a tensor of one of ``dtypes`` (``TypeError`` otherwise)."""
    t = x if isinstance(x, torch.Tensor) else v.tensor(x, name, where)
    if t.dtype not in dtypes:
        v.dtype(t, name, dtypes, where)
    return t


def matrix(x: Any, name: str, where: str, dtypes: Sequence[torch.dtype] = BLAS_DTYPES) -> torch.Tensor:
    t = tensor(x, name, where, dtypes)
    if t.dim() != 2:
        v.ndim(t, name, 2, where)
    return t


def vector(x: Any, name: str, where: str, dtypes: Sequence[torch.dtype] = BLAS_DTYPES) -> torch.Tensor:
    t = tensor(x, name, where, dtypes)
    if t.dim() != 1:
        v.ndim(t, name, 1, where)
    return t


def square(t: torch.Tensor, name: str, where: str) -> int:
    if t.shape[-1] != t.shape[-2]:
        raise ValueError(f"{where}: {name} must be square, got shape {tuple(t.shape)}")
    return t.shape[-1]


def agree(where: str, **named: torch.Tensor | None) -> None:
    """All named tensors share dtype (``TypeError``) and device (``ValueError``)."""
    first = None
    for t in named.values():
        if t is None:
            continue
        if first is None:
            first = t
        elif t.dtype is not first.dtype or t.device != first.device:
            v.same_dtype(where, **named)
            v.same_device(where, **named)


def agree_abc(where: str, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor | None) -> None:
    """:func:`agree` for the common ``A, B, C`` triple without building a dict."""
    dt, dev = A.dtype, A.device
    if B.dtype is not dt or B.device != dev or (C is not None and (C.dtype is not dt or C.device != dev)):
        agree(where, A=A, B=B, C=C)


def same_device(where: str, **named: torch.Tensor | None) -> None:
    devs = {t.device for t in named.values() if t is not None}
    if len(devs) > 1:
        v.same_device(where, **named)


def mismatch(where: str, what: str, **named: torch.Tensor) -> ValueError:
    """A ``ValueError`` naming every tensor involved and its shape."""
    parts = ", ".join(f"{k} has shape {tuple(t.shape)}" for k, t in named.items())
    return ValueError(f"{where}: {what}: {parts}")


def scalar(x: Any, name: str, where: str, dtype: torch.dtype, *, real: bool = False) -> complex | float | int:
    """A Python scalar for ``alpha``/``beta``; complex only for complex data.

    ``real=True`` insists on a real value even for complex data (the real
    ``alpha``/``beta`` of ``herk``, the real ``c`` of ``rot``).
    """
    if type(x) is float or type(x) is int:
        return x
    s = v.scalar(x, name, where, complex_ok=dtype.is_complex and not real)
    return s


def op(t: torch.Tensor, code: str) -> torch.Tensor:
    """``op(t)`` as a view: ``t``, its transpose, or its conjugate transpose."""
    if code == "N":
        return t
    if code == "T":
        return t.mT
    return t.mH


def op_shape(t: torch.Tensor, code: str) -> tuple[int, int]:
    r, c = t.shape[-2], t.shape[-1]
    return (r, c) if code == "N" else (c, r)


# ----------------------------------------------------------------- triangles

def triangle_mask(n: int, code: str, device: torch.device) -> torch.Tensor:
    """Boolean ``(n, n)`` mask of the ``code`` ("U"/"L") triangle, diagonal included."""
    ones = torch.ones(n, n, dtype=torch.bool, device=device)
    return ones.triu_() if code == "U" else ones.tril_()


def triangle(A: torch.Tensor, code: str, unit: bool = False) -> torch.Tensor:
    """The ``code`` triangle of ``A`` with zeros elsewhere; unit diagonal if asked.

    The other triangle of ``A`` is never read (``triu``/``tril`` select, they
    do not multiply), nor is the diagonal when ``unit`` is true.
    """
    if unit:
        T = A.triu(1) if code == "U" else A.tril(-1)
        T.diagonal(dim1=-2, dim2=-1).fill_(1)
        return T
    return A.triu() if code == "U" else A.tril()


def symmetric(A: torch.Tensor, code: str, hermitian: bool = False) -> torch.Tensor:
    """The full symmetric (or Hermitian) matrix stored in ``A``'s ``code`` triangle.

    Hermitian: the imaginary part of the diagonal is ignored, as in BLAS.
    """
    strict = A.triu(1) if code == "U" else A.tril(-1)
    d = A.diagonal(dim1=-2, dim2=-1)
    if hermitian and A.is_complex():
        full = strict + strict.mH
        d = d.real.to(A.dtype)
    else:
        full = strict + strict.mT
    full.diagonal(dim1=-2, dim2=-1).add_(d)
    return full


def merge_triangle(R: torch.Tensor, C: torch.Tensor | None, code: str, full: bool, hermitian: bool) -> torch.Tensor:
    """Keep ``R``'s ``code`` triangle; take the other one from ``C`` (zeros if None).

    ``full=True`` instead mirrors the computed triangle into the other one
    (conjugated when ``hermitian``), giving the whole symmetric/Hermitian
    matrix.
    """
    n = R.shape[-1]
    if full:
        keep = R.triu() if code == "U" else R.tril()
        strict = keep.triu(1) if code == "U" else keep.tril(-1)
        return keep + (strict.mH if hermitian else strict.mT)
    if C is None:
        return R.triu_() if code == "U" else R.tril_()
    return torch.where(triangle_mask(n, code, R.device), R, C)


def real_diagonal(R: torch.Tensor) -> torch.Tensor:
    """Zero the imaginary part of ``R``'s diagonal in place (Hermitian results)."""
    if R.is_complex():
        R.diagonal(dim1=-2, dim2=-1).imag.zero_()
    return R


def finish(result: torch.Tensor, out: Any, where: str) -> torch.Tensor:
    """Return ``result``, or copy it into ``out`` and return ``out``."""
    if out is None:
        return result
    return v.write_out(result, out, where)
