"""Hermitian eigensolvers (cuSOLVER ``syevd``/``sygvd``, ``scipy.linalg.eigh``).

The torch path calls LAPACK: ``dsyevd`` through ``scipy.linalg.lapack`` for a
single float64 CPU matrix without autograd (faster than ``torch.linalg`` on
this machine's measurements, see the docs and ``trnsolver._lapack``),
``torch.linalg.eigh`` for everything else; the device path will be the
parallel Jacobi method whose torch reference is ``trnsolver._jacobi``.
"""

from __future__ import annotations

import torch

from trnsci import _linalg as la
from trnsci import _validate as v
from trnsci._validate import numpy_io
from trnsci.dispatch import Op
from trnsolver import _lapack
from trnsolver.factor import _NOT_PD, _raise_info

__all__ = ["eigh", "eigvalsh", "eigh_generalized"]

_UPLO = v.Options({"L": ("L", "lower"), "U": ("U", "upper")})


def _subset(subset_by_index, n: int, where: str) -> tuple[int, int] | None:
    if subset_by_index is None:
        return None
    if not isinstance(subset_by_index, (tuple, list)) or len(subset_by_index) != 2:
        raise TypeError(f"{where}: subset_by_index must be a pair (lo, hi) of ints")
    lo = v.integer(subset_by_index[0], "subset_by_index[0]", where, minimum=0)
    hi = v.integer(subset_by_index[1], "subset_by_index[1]", where, minimum=0)
    if not lo <= hi < n:
        raise ValueError(f"{where}: subset_by_index must satisfy 0 <= lo <= hi < n = {n}, got ({lo}, {hi})")
    return lo, hi


def _eigh_flops(A, uplo, lo, hi, vectors, tol=1e-10, max_sweeps=100):
    n = A.shape[-1]
    return 9.0 * n ** 3 * (A.numel() // n // n if n else 0)


def _eigh_describe(A, uplo, lo, hi, vectors, tol=1e-10, max_sweeps=100):
    return f"eigh n={A.shape[-1]} batch={tuple(A.shape[:-2])} {str(A.dtype).replace('torch.', '')}"


#: Op ``(A, uplo, lo, hi, vectors, tol, max_sweeps)``: eigenpairs lo..hi of a
#: Hermitian matrix. Threshold: no Trainium here to calibrate on; a Jacobi
#: sweep costs ~6 n^3 flops and takes 5-10 sweeps against LAPACK's ~9 n^3, so
#: the kernel is only worth a launch for large tiles -- 9 * 512^3 is a
#: placeholder until `trnsci calibrate` runs on hardware.
def _eigh_fake(A, uplo, lo, hi, vectors, tol=1e-10, max_sweeps=100):
    k = hi - lo + 1
    w = A.new_empty((*A.shape[:-1][:-1], k), dtype=A.real.dtype if A.is_complex() else A.dtype)
    return w, (A.new_empty((*A.shape[:-1], k)) if vectors else None)


EIGH = Op("trnsolver.eigh", "flops", 9.0 * 512 ** 3, size=_eigh_flops, describe=_eigh_describe,
          doc="symmetric/Hermitian eigensolver (parallel Jacobi kernel on the device)",
          schema="(Tensor A, str uplo, int lo, int hi, bool vectors, float tol=1e-10, int max_sweeps=100)"
                 " -> (Tensor, Tensor?)", fake=_eigh_fake)


@EIGH.lowering("torch")
def _eigh_torch(A: torch.Tensor, uplo: str, lo: int, hi: int, vectors: bool, tol: float = 1e-10,
                max_sweeps: int = 100):
    """Eigenpairs ``lo..hi`` (inclusive, ascending) of the Hermitian matrix in
    ``A``'s ``uplo`` triangle; ``V`` is None when ``vectors`` is False
    (``tol``/``max_sweeps`` are the Jacobi kernel's; LAPACK ignores them)."""
    n = A.shape[-1]
    if _lapack.eligible(A) and _eigh_route(A, uplo, vectors) == "lapack":
        # LAPACK's ?syevd through SciPy, only where it measured clearly faster than torch.linalg.eigh (MKL's
        # syevd) on this machine for this dtype and size class (trnsci.routes via trnsolver._lapack.use;
        # estimate mode runs torch, the obvious call)
        r = _lapack.syevd(A, uplo == "L", vectors)
        if r is not None:
            w, V = r
            if lo != 0 or hi != n - 1:
                w, V = w[lo:hi + 1], (V[:, lo:hi + 1] if vectors else None)
            return w, V
    if vectors:
        w, V = torch.linalg.eigh(A, UPLO=uplo)
        if lo != 0 or hi != n - 1:
            w, V = w[..., lo:hi + 1], V[..., lo:hi + 1]
        return w, V
    w = torch.linalg.eigvalsh(A, UPLO=uplo)
    if lo != 0 or hi != n - 1:
        w = w[..., lo:hi + 1]
    return w, None


def _eigh_route(A: torch.Tensor, uplo: str, vectors: bool) -> str:
    """``"lapack"`` (SciPy's ?syevd) or ``"torch"`` for a float32/float64 CPU matrix: chosen by timing both
    on ``A`` once per dtype, size class (the next power of two of n), vectors or not, and thread count."""
    n = A.shape[-1]
    lower = uplo == "L"

    def cands():
        return {"lapack": lambda: _lapack.syevd(A, lower, vectors),
                "torch": (lambda: torch.linalg.eigh(A, UPLO=uplo)) if vectors else
                         (lambda: torch.linalg.eigvalsh(A, UPLO=uplo))}
    return "lapack" if _lapack.use("eigh", A, 9.0 * n ** 3, cands, (bool(vectors),)) else "torch"


def _eigh_args(where, A, tol, max_sweeps, subset_by_index, uplo, check_finite):
    A = la.square_matrix(A, "A", where)
    v.positive(tol, "tol", where, zero_ok=True)
    v.integer(max_sweeps, "max_sweeps", where, minimum=1, maximum=v.INDEX_MAX)
    uplo = _UPLO(uplo, "uplo", where)
    n = A.shape[-1]
    sub = _subset(subset_by_index, n, where)
    lo, hi = sub if sub is not None else (0, n - 1)
    la.check_finite(check_finite, where, A=A)
    return A, uplo, lo, hi


@numpy_io
def eigh(A, max_sweeps=100, tol=1e-10, *, subset_by_index=None, uplo="L", check_finite=True):
    """Eigenvalues and eigenvectors of a real symmetric / complex Hermitian matrix.

    Parameters
    ----------
    A : tensor, shape (..., n, n)
        float32, float64, complex64 or complex128; only the ``uplo``
        triangle is read (the imaginary part of the diagonal is ignored).
    max_sweeps, tol : int, float
        Sweep limit and off-diagonal tolerance ``off(A) <= tol ||A||_F`` of the
        Jacobi eigensolver the NKI path uses; validated, not needed by the
        torch path (LAPACK).
    subset_by_index : (lo, hi), optional
        Only eigenpairs ``lo..hi`` (0-based, inclusive, ascending order), as
        in ``scipy.linalg.eigh``.
    uplo : {"L", "U"}
        Which triangle holds ``A``.

    Returns
    -------
    w : tensor, real, shape (..., k)
        Eigenvalues in ascending order (``k = n`` or ``hi - lo + 1``).
    V : tensor, shape (..., n, k)
        Orthonormal eigenvectors, ``A V = V diag(w)``; columns are unique
        only up to sign (phase) and rotation within repeated eigenvalues.

    Raises
    ------
    TypeError, ValueError
        Not a square float/complex matrix; NaN/Inf; a bad subset.

    Examples
    --------
    >>> import torch, trnsolver
    >>> w, V = trnsolver.eigh(torch.tensor([[2.0, 1.0], [1.0, 2.0]], dtype=torch.float64))
    >>> w.tolist()
    [1.0, 3.0]
    >>> trnsolver.eigh(torch.diag(torch.tensor([3.0, 1.0, 2.0])), subset_by_index=(1, 2))[0].tolist()
    [2.0, 3.0]
    """
    A, uplo, lo, hi = _eigh_args("eigh", A, tol, max_sweeps, subset_by_index, uplo, check_finite)
    return EIGH(A, uplo, lo, hi, True, float(tol), int(max_sweeps))


@numpy_io
def eigvalsh(A, *, subset_by_index=None, uplo="L", check_finite=True):
    """Eigenvalues only of a real symmetric / complex Hermitian matrix (ascending).

    Parameters and errors as in :func:`eigh`.

    Returns
    -------
    w : tensor, real, shape (..., k)

    Examples
    --------
    >>> import torch, trnsolver
    >>> trnsolver.eigvalsh(torch.tensor([[0.0, 1.0], [1.0, 0.0]])).tolist()
    [-1.0, 1.0]
    """
    A, uplo, lo, hi = _eigh_args("eigvalsh", A, 0.0, 1, subset_by_index, uplo, check_finite)
    return EIGH(A, uplo, lo, hi, False)[0]


def _eigh_generalized_torch(A: torch.Tensor, B: torch.Tensor, lo: int, hi: int):
    """``A x = w B x`` via ``B = L L^H``, ``C = L^-1 A L^-H``, ``x = L^-H y``.
    Returns ``(w, X, info)``; ``info`` is potrf's for ``B``."""
    L, info = torch.linalg.cholesky_ex(B)
    if bool((info != 0).any()):
        return None, None, info
    Y = torch.linalg.solve_triangular(L, A, upper=False)
    C = torch.linalg.solve_triangular(L, Y.mH, upper=False)   # L^-1 A^H L^-H = L^-1 A L^-H
    w, Z = EIGH(C, "L", lo, hi, True)
    X = torch.linalg.solve_triangular(L.mH, Z, upper=True)
    return w, X, info


@numpy_io
def eigh_generalized(A, B, max_sweeps=100, tol=1e-10, *, subset_by_index=None, check_finite=True):
    """Generalized Hermitian-definite eigenproblem ``A x = w B x`` (``sygvd``, type 1).

    Parameters
    ----------
    A : tensor, shape (..., n, n)
        Hermitian (lower triangle read).
    B : tensor, shape (..., n, n)
        Hermitian positive definite (lower triangle read).
    max_sweeps, tol, subset_by_index
        As in :func:`eigh`.

    Returns
    -------
    w : tensor, real, shape (..., k), ascending
    X : tensor, shape (..., n, k)
        ``B``-orthonormal eigenvectors: ``X^H B X = I``, ``A X = B X diag(w)``
        (the normalisation of ``scipy.linalg.eigh(A, B)``).

    Raises
    ------
    LinAlgError
        ``B`` is not positive definite (names the leading minor).

    Examples
    --------
    >>> import torch, trnsolver
    >>> A = torch.tensor([[2.0, 0.0], [0.0, 8.0]], dtype=torch.float64)
    >>> B = torch.tensor([[1.0, 0.0], [0.0, 2.0]], dtype=torch.float64)
    >>> [round(v, 12) for v in trnsolver.eigh_generalized(A, B)[0].tolist()]
    [2.0, 4.0]
    """
    where = "eigh_generalized"
    A, _, lo, hi = _eigh_args(where, A, tol, max_sweeps, subset_by_index, "L", check_finite)
    B = la.square_matrix(B, "B", where)
    v.agree(where, A=A, B=B)
    if B.shape[-1] != A.shape[-1]:
        raise v.mismatch(where, "A and B must be the same size", A=A, B=B)
    try:
        torch.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    except RuntimeError:
        raise v.mismatch(where, "batch dimensions do not broadcast", A=A, B=B) from None
    if check_finite:
        la.finite(where, B=B)
    A = la.symmetric(A, "L", hermitian=True)
    w, X, info = _eigh_generalized_torch(A, B, lo, hi)
    _raise_info(where, info, "B is not positive definite: " + _NOT_PD)
    return w, X
