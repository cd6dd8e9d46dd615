"""Generic helpers the trnsci core lacks today (to be moved into the core).

* :class:`LinAlgError` -- a ``numpy.linalg.LinAlgError`` (hence also a
  ``ValueError``) raised when a matrix is singular / not positive definite.
* :class:`ConvergenceWarning` / :class:`ConvergenceError` -- an iterative
  method stopped before meeting its tolerance.
* :class:`SolverInfo` -- what an iterative method did (iterations, residual
  history, converged flag).
* :func:`linear_operator` / :func:`preconditioner` -- turn a matrix, a sparse
  matrix, an object with ``matvec``/``solve``/``@``, or a callable into a
  function ``x -> A x`` (``r -> M r``) on torch vectors.
* :func:`square_matrix`, :func:`rhs`, :func:`finite` -- dense-argument checks.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from trnsci import _validate as v

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


class ConvergenceWarning(RuntimeWarning):
    """An iterative method stopped at ``maxiter`` without meeting its tolerance."""


class ConvergenceError(LinAlgError):
    """An iterative method did not converge and ``on_fail="raise"`` was given."""


@dataclass
class SolverInfo:
    """What an iterative method did.

    Attributes
    ----------
    iterations : int
        Iterations run (matrix-vector products for GMRES).
    relres : float
        Final relative residual ``||b - A x|| / ||b||`` (recomputed from ``x``).
    converged : bool
        Whether the tolerance was met.
    residuals : list of float
        Relative residual norm after each iteration (entry 0 is the initial one).
    method : str
        The solver's name.
    """

    iterations: int
    relres: float
    converged: bool
    residuals: list = field(default_factory=list)
    method: str = ""


ON_FAIL = v.Options({"warn": ("warn",), "raise": ("raise",)})


def report(where: str, info: SolverInfo, on_fail: str, tol: float) -> None:
    """Say that ``info`` did not converge: a warning or a :class:`ConvergenceError`."""
    if info.converged:
        return
    msg = (f"{where}: did not converge in {info.iterations} iterations "
           f"(relative residual {info.relres:.3e} > tol {tol:.1e})")
    if on_fail == "raise":
        raise ConvergenceError(msg, info=info.iterations)
    warnings.warn(msg, ConvergenceWarning, stacklevel=3)


# ------------------------------------------------------------------ dense args

def square_matrix(x: Any, name: str, where: str, dtypes=LINALG_DTYPES) -> torch.Tensor:
    """A tensor of shape ``(..., n, n)`` and a LAPACK dtype."""
    t = v.tensor(x, name, where, dtypes)
    if t.dim() < 2:
        raise ValueError(f"{where}: {name} must be a matrix (..., n, n), got shape {tuple(t.shape)}")
    if t.shape[-1] != t.shape[-2]:
        raise ValueError(f"{where}: {name} must be square, got shape {tuple(t.shape)}")
    return t


def matrix(x: Any, name: str, where: str, dtypes=LINALG_DTYPES) -> torch.Tensor:
    """A tensor of shape ``(..., m, n)`` and a LAPACK dtype."""
    t = v.tensor(x, name, where, dtypes)
    if t.dim() < 2:
        raise ValueError(f"{where}: {name} must be a matrix (..., m, n), got shape {tuple(t.shape)}")
    return t


def rhs(A: torch.Tensor, x: Any, name: str, where: str) -> tuple[torch.Tensor, bool]:
    """The right-hand side ``B`` of ``A X = B``: ``(..., n)`` (a vector) or ``(..., n, k)``.

    Returns ``(B as (..., n, k), was_vector)``. A ``B`` with one dimension
    fewer than ``A`` is a (batch of) vector(s), as in ``torch.linalg.solve``.
    """
    B = v.tensor(x, name, where, LINALG_DTYPES)
    v.agree(where, A=A, **{name: B})
    n = A.shape[-2]
    vec = B.dim() == A.dim() - 1
    if B.dim() == 0 or (not vec and B.dim() < 2):
        raise ValueError(f"{where}: {name} must have shape (..., {n}) or (..., {n}, k), got {tuple(B.shape)}")
    Bm = B.unsqueeze(-1) if vec else B
    if Bm.shape[-2] != n:
        raise v.mismatch(where, f"{name} must have {n} rows", A=A, **{name: B})
    try:
        torch.broadcast_shapes(A.shape[:-2], Bm.shape[:-2])
    except RuntimeError:
        raise v.mismatch(where, "batch dimensions do not broadcast", A=A, **{name: B}) from None
    return Bm, vec


def finite(where: str, **named: torch.Tensor) -> None:
    """``ValueError`` if a tensor holds NaN or Inf (SciPy's ``check_finite``)."""
    for k, t in named.items():
        if t is not None and t.numel() and not bool(torch.isfinite(t).all()):
            raise ValueError(f"{where}: {k} contains NaN or Inf")


def flag(x: Any, name: str, where: str) -> bool:
    if not isinstance(x, (bool, np.bool_)):
        raise TypeError(f"{where}: {name} must be True or False, got {type(x).__name__}")
    return bool(x)


def positive(x: Any, name: str, where: str, *, zero_ok: bool = False) -> float:
    s = v.scalar(x, name, where, complex_ok=False)
    if not (s >= 0 if zero_ok else s > 0) or s != s or s == float("inf"):
        raise ValueError(f"{where}: {name} must be a finite number {'>= 0' if zero_ok else '> 0'}, got {x!r}")
    return float(s)


def batch_index(flat: int, shape: tuple) -> tuple:
    return tuple(int(i) for i in np.unravel_index(flat, shape)) if shape else ()


# ------------------------------------------------------------------ operators

def _is_scipy(obj: Any) -> bool:
    mod = type(obj).__module__ or ""
    return mod.split(".")[0] == "scipy" or type(obj).__name__ == "SuperLU"


def _call_foreign(fn: Callable, x: torch.Tensor, scipy_like: bool) -> torch.Tensor:
    if scipy_like:
        y = fn(x.detach().cpu().numpy())
    else:
        try:
            y = fn(x)
        except TypeError:   # a NumPy-only object (e.g. SciPy's SuperLU, a C type)
            y = fn(x.detach().cpu().numpy())
    if isinstance(y, np.ndarray) or not isinstance(y, torch.Tensor):
        y = torch.as_tensor(np.asarray(y))
    return y.reshape(x.shape).to(dtype=x.dtype, device=x.device)


def linear_operator(A: Any, n: int, dtype: torch.dtype, device, name: str, where: str) -> Callable:
    """``x -> A x`` for a dense/sparse tensor or array, a SciPy sparse matrix or
    LinearOperator, any object with ``matvec`` or ``@``, or a callable."""
    if A is None:
        raise TypeError(f"{where}: {name} must be a matrix, an operator with matvec/@, or a callable; got None")
    if isinstance(A, np.ndarray):
        A = v.tensor(A, name, where)
    if isinstance(A, torch.Tensor):
        if A.dim() != 2 or A.shape[0] != A.shape[1]:
            raise ValueError(f"{where}: {name} must be a square matrix, got shape {tuple(A.shape)}")
        if A.shape[0] != n:
            raise ValueError(f"{where}: {name} has shape {tuple(A.shape)} but b has {n} entries")
        if A.dtype not in LINALG_DTYPES:
            raise TypeError(f"{where}: {name} has dtype {str(A.dtype).replace('torch.', '')}; "
                            "expected float32, float64, complex64 or complex128")
        if A.dtype != dtype or A.device != device:
            v.agree(where, **{name: A}, b=torch.empty(0, dtype=dtype, device=device))
        return lambda x: A @ x
    shape = getattr(A, "shape", None)
    if shape is not None and (len(tuple(shape)) != 2 or tuple(shape)[0] != n or tuple(shape)[1] != n):
        raise ValueError(f"{where}: {name} has shape {tuple(shape)} but b has {n} entries")
    scipy_like = _is_scipy(A)
    if hasattr(A, "matvec"):
        return lambda x: _call_foreign(A.matvec, x, scipy_like)
    if hasattr(A, "__matmul__") and not callable(A):
        return lambda x: _call_foreign(lambda y: A @ y, x, scipy_like)
    if callable(A):
        return lambda x: _call_foreign(A, x, scipy_like)
    raise TypeError(f"{where}: {name} must be a matrix, an operator with matvec/@, or a callable; "
                    f"got {type(A).__name__}")


def preconditioner(M: Any, n: int, dtype: torch.dtype, device, where: str) -> Callable | None:
    """``r -> M r ~ A^{-1} r`` (SciPy's convention) for a matrix, a callable, or an
    object with ``solve`` / ``__call__`` / ``matvec`` / ``@`` (trnsparse ilu0/ic0/jacobi,
    SciPy's ``spilu`` result, a ``LinearOperator``)."""
    if M is None:
        return None
    if hasattr(M, "solve") and not isinstance(M, (torch.Tensor, np.ndarray)):
        scipy_like = _is_scipy(M)
        return lambda r: _call_foreign(M.solve, r, scipy_like)
    return linear_operator(M, n, dtype, device, "M", where)
