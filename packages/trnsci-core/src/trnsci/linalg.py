"""BLAS/LAPACK conventions shared by trnblas, trnsolver and trnsparse.

Option keywords (``trans``, ``uplo``, ``side``, ``diag``, ``fill``) are parsed
into one-letter codes, case-insensitively, with a ``ValueError`` that lists
the valid spellings; ``op(A)`` and the triangle helpers work on those codes.

==========  ====================================  ==========================
keyword     spellings                             code
==========  ====================================  ==========================
``trans``   ``False``/``"N"``, ``True``/``"T"``,   ``"N"``, ``"T"``, ``"C"``
            ``"C"``
``uplo``    ``"upper"``/``"U"``, ``"lower"``/``"L"``  ``"U"``, ``"L"``
``side``    ``"left"``/``"L"``, ``"right"``/``"R"``   ``"L"``, ``"R"``
``diag``    ``"nonunit"``/``"N"``, ``"unit"``/``"U"``  ``"N"``, ``"U"``
==========  ====================================  ==========================

Examples
--------
>>> import torch
>>> from trnsci import linalg as la
>>> la.uplo("Lower", "uplo", "potrf"), la.trans(True, "trans", "gemv")
('L', 'T')
>>> la.triangle(torch.ones(2, 2), "U").tolist()
[[1.0, 1.0], [0.0, 1.0]]
"""

from __future__ import annotations

import cmath
import math
from typing import Any

import numpy as np
import torch

from trnsci import dispatch, validate

__all__ = [
    "TRANS_OPTIONS", "UPLO_OPTIONS", "SIDE_OPTIONS", "DIAG_OPTIONS",
    "trans", "uplo", "side", "diag", "fill", "real_trans", "op", "op_shape",
    "triangle_mask", "triangle", "symmetric", "merge_triangle", "real_diagonal",
    "LINALG_DTYPES", "LinAlgError", "square_matrix", "matrix", "rhs", "finite", "batch_index",
]

# Canonical code -> accepted spellings (strings compared case-insensitively).
TRANS_OPTIONS = {"N": ("N", False), "T": ("T", True), "C": ("C",)}
UPLO_OPTIONS = {"U": ("upper", "U"), "L": ("lower", "L")}
SIDE_OPTIONS = {"L": ("left", "L"), "R": ("right", "R")}
DIAG_OPTIONS = {"N": ("nonunit", "N"), "U": ("unit", "U")}

#: ``trans(value, name, where) -> "N" | "T" | "C"``
trans = validate.Options(TRANS_OPTIONS)
#: ``uplo(value, name, where) -> "U" | "L"``
uplo = validate.Options(UPLO_OPTIONS)
#: ``side(value, name, where) -> "L" | "R"``
side = validate.Options(SIDE_OPTIONS)
#: ``diag(value, name, where) -> "N" | "U"``
diag = validate.Options(DIAG_OPTIONS)


def fill(value: Any, where: str, given: bool = True) -> bool:
    """Whether a symmetric update returns the whole matrix (True) or one triangle (False).

    ``given`` says whether the caller passed the matrix being updated.
    ``fill=None`` follows the caller: BLAS semantics (one triangle, the
    other left as the given matrix's) when it was passed; the whole
    symmetric matrix when it was not, since there is nothing to preserve
    (what the published trnblas returned). ``"full"`` and ``"triangle"``
    force one or the other.
    """
    if value is None:
        return not given
    if isinstance(value, str) and value.lower() in ("full", "triangle"):
        return value.lower() == "full"
    raise ValueError(f"{where}: fill must be None, 'full' or 'triangle'; got {value!r}")


def real_trans(code: str, dtype: torch.dtype) -> str:
    """For real data a conjugate transpose is a transpose: ``"C"`` -> ``"T"``."""
    if code == "C" and not dtype.is_complex:
        return "T"
    return code


def op(t: torch.Tensor, code: str) -> torch.Tensor:
    """``op(t)`` as a view: ``t``, its transpose, or its conjugate transpose."""
    if code == "N":
        return t
    if code == "T":
        return t.mT
    return t.mH


def op_shape(t: torch.Tensor, code: str) -> tuple[int, int]:
    """The (rows, cols) of ``op(t)``'s last two dimensions."""
    r, c = t.shape[-2], t.shape[-1]
    return (r, c) if code == "N" else (c, r)


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
    if full:  # one pass (selecting, not adding: half the time of triu + triu(1) + add)
        return torch.where(triangle_mask(n, code, R.device), R, R.mH if hermitian else R.mT)
    if C is None:
        return R.triu_() if code == "U" else R.tril_()
    return torch.where(triangle_mask(n, code, R.device), R, C)


def real_diagonal(R: torch.Tensor) -> torch.Tensor:
    """Zero the imaginary part of ``R``'s diagonal in place (Hermitian results)."""
    if R.is_complex():
        R.diagonal(dim1=-2, dim2=-1).imag.zero_()
    return R


# =====================================================================
# LAPACK-style errors and dense arguments.
# ``LinAlgError`` is a ``numpy.linalg.LinAlgError`` (hence a ``ValueError``)
# carrying LAPACK's ``info``; the checks take ``(..., m, n)`` batches.

#: The dtypes LAPACK (and torch.linalg) factorizations take.
LINALG_DTYPES = (torch.float32, torch.float64, torch.complex64, torch.complex128)


class LinAlgError(np.linalg.LinAlgError):
    """A matrix is singular or not positive definite.

    Subclasses ``numpy.linalg.LinAlgError`` (itself a ``ValueError``), so
    ``except numpy.linalg.LinAlgError`` and ``except ValueError`` both catch
    it. ``info`` is the 1-based LAPACK/cuSOLVER ``info`` (order of the
    failing minor, or position of the zero pivot); ``batch_index`` the index
    of the failing matrix in the leading dimensions (``()`` when unbatched).
    """

    def __init__(self, message: str, info: int = 0, batch_index: tuple = ()):
        super().__init__(message)
        self.info = info
        self.batch_index = batch_index


def square_matrix(x: Any, name: str, where: str, dtypes=LINALG_DTYPES) -> torch.Tensor:
    """A tensor of shape ``(..., n, n)`` and a LAPACK dtype."""
    t = validate.tensor(x, name, where, dtypes)
    if t.dim() < 2:
        raise ValueError(f"{where}: {name} must be a matrix (..., n, n), got shape {tuple(t.shape)}")
    if t.shape[-1] != t.shape[-2]:
        raise ValueError(f"{where}: {name} must be square, got shape {tuple(t.shape)}")
    return t


def matrix(x: Any, name: str, where: str, dtypes=LINALG_DTYPES) -> torch.Tensor:
    """A tensor of shape ``(..., m, n)`` and a LAPACK dtype."""
    t = validate.tensor(x, name, where, dtypes)
    if t.dim() < 2:
        raise ValueError(f"{where}: {name} must be a matrix (..., m, n), got shape {tuple(t.shape)}")
    return t


def rhs(A: torch.Tensor, x: Any, name: str, where: str) -> tuple[torch.Tensor, bool]:
    """The right-hand side ``B`` of ``A X = B``: ``(..., n)`` (a vector) or ``(..., n, k)``.

    Returns ``(B as (..., n, k), was_vector)``. A ``B`` with one dimension
    fewer than ``A`` is a (batch of) vector(s), as in ``torch.linalg.solve``.
    """
    B = validate.tensor(x, name, where, LINALG_DTYPES)
    validate.agree(where, A=A, **{name: B})
    n = A.shape[-2]
    vec = B.dim() == A.dim() - 1
    if B.dim() == 0 or (not vec and B.dim() < 2):
        raise ValueError(f"{where}: {name} must have shape (..., {n}) or (..., {n}, k), got {tuple(B.shape)}")
    Bm = B.unsqueeze(-1) if vec else B
    if Bm.shape[-2] != n:
        raise validate.mismatch(where, f"{name} must have {n} rows", A=A, **{name: B})
    # the common case, without broadcast_shapes (docs/perf-notes.md#design-fast-paths)
    if A.shape[:-2] == Bm.shape[:-2]:
        return Bm, vec
    try:
        torch.broadcast_shapes(A.shape[:-2], Bm.shape[:-2])
    except RuntimeError:
        raise validate.mismatch(where, "batch dimensions do not broadcast", A=A, **{name: B}) from None
    return Bm, vec


def check_finite(flag, where: str, **named: torch.Tensor) -> None:
    """SciPy's ``check_finite=`` keyword: validate the flag, and when it is true run :func:`finite`."""
    if validate.flag(flag, "check_finite", where):
        finite(where, **named)


#: The largest tensor :func:`finite` scans in the calling thread when torch runs more than one thread (a
#: bound on that scan's time; larger tensors are worth torch's parallel reduction:
#: docs/perf-notes.md#design-finite-scan).
_HOST_SCAN_MAX = 1 << 20
_HOST_SCAN_DTYPES = (torch.float32, torch.float64, torch.complex64, torch.complex128, torch.float16)


def finite(where: str, **named: torch.Tensor) -> None:
    """``ValueError`` if a tensor holds NaN or Inf (SciPy's ``check_finite``).

    A finite sum proves every entry finite (one NaN or Inf makes the sum NaN
    or Inf), and one reduction costs far less than ``isfinite(t).all()``
    (docs/perf-notes.md#design-finite-scan); only a
    non-finite sum (bad data, or an overflow) is checked entry by entry.
    """
    threads = torch.get_num_threads()
    on_device = []
    for k, t in named.items():
        if t is None or not t.numel():
            continue
        if not t.is_cpu and t.device.type != "meta":
            on_device.append((k, t))
            continue
        if (threads > 1 and t.is_cpu and t.numel() <= _HOST_SCAN_MAX and t.dtype in _HOST_SCAN_DTYPES
                and not t.requires_grad and type(t) is torch.Tensor):
            # beside torch's other threads, a CPU scan of this size runs in the calling thread (NumPy), so
            # it never waits at an OpenMP barrier for a busy core (docs/perf-notes.md#design-finite-scan)
            if np.isfinite(t.resolve_conj().resolve_neg().numpy()).all():
                continue
            raise ValueError(f"{where}: {k} contains NaN or Inf")
        s = t.sum().item()
        if (cmath.isfinite(s) if isinstance(s, complex) else math.isfinite(s)):
            continue
        if not bool(torch.isfinite(t).all()):
            raise ValueError(f"{where}: {k} contains NaN or Inf")
    if on_device:
        _finite_on_device(where, on_device)


def _finite_on_device(where: str, named: list) -> None:
    """:func:`finite` for tensors on a device: every sum reduced there, one value read on the host.

    Only a non-finite sum (bad data, or an overflow of finite entries) costs
    a second read, to tell which.
    """
    sums = [torch.isfinite(t.sum()).reshape(1) for _, t in named]
    if bool((sums[0] if len(sums) == 1 else torch.cat(sums)).all()):
        return
    for k, t in named:
        if not bool(torch.isfinite(t).all()):
            raise ValueError(f"{where}: {k} contains NaN or Inf")


def batch_index(flat: int, shape: tuple) -> tuple:
    """The multi-index in ``shape`` of flat position ``flat`` (``()`` when unbatched)."""
    return tuple(int(i) for i in np.unravel_index(flat, shape)) if shape else ()


def _not_traced(where: str, **named: torch.Tensor) -> None:
    """:func:`finite` as torch.compile sees it: a host read of the data has no place in a graph."""


dispatch.traceable_as(finite, _not_traced)
