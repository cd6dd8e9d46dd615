"""Iterative (Krylov) solver plumbing shared by trnsolver and trnsparse.

* :class:`ConvergenceWarning` / :class:`ConvergenceError` -- an iterative
  method stopped before meeting its tolerance (the error is a
  :class:`trnsci._linalg.LinAlgError`).
* :class:`SolverInfo` -- what a method did (iterations, residual history,
  converged flag); :func:`report` warns or raises when it did not converge
  (``on_fail="warn" | "raise"``, parsed by :data:`ON_FAIL`).
* :func:`linear_operator` / :func:`preconditioner` -- a dense or sparse
  tensor/array, a SciPy sparse matrix or ``LinearOperator``, an object with
  ``matvec``/``solve``/``@`` (trnsparse's ilu0/ic0/jacobi preconditioners:
  ``M(r) == M.solve(r) == M.matvec(r)``) or a callable, as a function on
  torch vectors (``x -> A x``, ``r -> M r ~ A^{-1} r``).

Examples
--------
>>> import torch
>>> from trnsci import _iterative as it
>>> f = it.linear_operator(torch.eye(2) * 3, 2, torch.float32, torch.device("cpu"), "A", "cg")
>>> f(torch.ones(2)).tolist()
[3.0, 3.0]
>>> it.ON_FAIL("Raise", "on_fail", "cg")
'raise'
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from trnsci import _validate as v
from trnsci import hostblas
from trnsci._linalg import LINALG_DTYPES, LinAlgError

__all__ = ["ConvergenceWarning", "ConvergenceError", "SolverInfo", "ON_FAIL", "report",
           "linear_operator", "preconditioner"]


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


# ------------------------------------------------------------------ operators

def _is_scipy(obj: Any) -> bool:
    mod = type(obj).__module__ or ""
    return mod.split(".")[0] == "scipy" or type(obj).__name__ == "SuperLU"


def _call_foreign(fn: Callable, x: torch.Tensor, scipy_like: bool) -> torch.Tensor:
    if scipy_like:  # SciPy's BLAS/LAPACK (SuperLU, LinearOperator, ...) held at one thread beside torch's
        y = hostblas.call(fn, x.detach().cpu().numpy())
    else:
        try:
            y = fn(x)
        except TypeError:   # a NumPy-only object (e.g. SciPy's SuperLU, a C type)
            y = hostblas.call(fn, x.detach().cpu().numpy())
    if isinstance(y, np.ndarray) or not isinstance(y, torch.Tensor):
        y = torch.as_tensor(np.asarray(y))
    if y.shape == x.shape and y.dtype == x.dtype and y.device == x.device:
        return y  # the common case, without reshape/to (~1.5 us per application)
    return y.reshape(x.shape).to(dtype=x.dtype, device=x.device)


def _stored_values(A: Any) -> Any:
    """The stored entries of a matrix-like ``A`` (dense or sparse tensor, SciPy sparse, trnsparse), or None."""
    if isinstance(A, torch.Tensor):
        if A.layout is torch.strided:
            return A
        if A.layout is torch.sparse_coo:
            return A._values()
        return A.values()
    data = getattr(A, "data", None)  # SciPy sparse arrays and matrices
    if isinstance(data, np.ndarray) and hasattr(A, "nnz"):
        return data
    vals = getattr(A, "_values_tensor", None)  # trnsparse formats
    if callable(vals):
        return vals()
    return None


def _finite_entries(A: Any, name: str, where: str) -> None:
    """NaN/Inf stored in a matrix-like operator: ``ValueError`` before the first iteration."""
    vals = _stored_values(A)
    if vals is None:
        return
    ok = bool(torch.isfinite(vals).all()) if isinstance(vals, torch.Tensor) else bool(
        np.isfinite(vals).all()) if vals.dtype.kind in "fc" else True
    if not ok:
        raise ValueError(f"{where}: {name} holds NaN or Inf")


# --------------------------------------------------------- CSR products on the host

_csr_routes: dict = {}


def _forget_csr_routes() -> None:
    _csr_routes.clear()


def _host_csr_ok(A: torch.Tensor) -> bool:
    """A plain CPU CSR tensor of float32/float64 without autograd: SciPy can run its product on NumPy views."""
    return (type(A) is torch.Tensor and A.device.type == "cpu" and A.dtype in (torch.float32, torch.float64)
            and not A.requires_grad and A.dim() == 2)


def _csr_matvec(A: torch.Tensor) -> Callable:
    """``x -> A x`` for a CPU CSR tensor by torch's CSR product or SciPy's (the sparsetools loop behind
    ``csr_matrix @``, single-threaded C++, no BLAS) on NumPy views of the same arrays, whichever
    :func:`trnsci.routes.choose` measured faster for this dtype, size class (rows and stored entries to
    the next power of two) and thread count (torch, the obvious call, when not timed:
    ``TRNSCI_ROUTES=estimate``). The two sum each row in their own order: results may differ in the
    last units in the last place between the routes."""
    from trnsci import routes

    n, nnz = A.shape[0], A._nnz()
    threads = torch.get_num_threads()
    key = (A.dtype, n, nnz, threads)
    use = _csr_routes.get(key)
    S = None
    if use is not False:
        try:
            import scipy.sparse as sp
        except ImportError:  # pragma: no cover - SciPy is in every dev environment
            return lambda x: A @ x
        S = sp.csr_matrix((A.values().numpy(), A.col_indices().numpy(), A.crow_indices().numpy()),
                          shape=tuple(A.shape))
        try:  # the loop behind ``S @ x`` itself, without ~4 us of SciPy's operator dispatch per product
            from scipy.sparse import _sparsetools

            kernel = _sparsetools.csr_matvec
        except (ImportError, AttributeError):  # pragma: no cover - another SciPy layout: its public product
            kernel = None
        m, ncols = S.shape

        def host(x: torch.Tensor) -> torch.Tensor:
            xn = x.numpy()
            if kernel is None or xn.dtype != S.dtype:
                return torch.from_numpy(hostblas.call(S.__matmul__, xn))
            y = np.zeros(m, dtype=S.dtype)
            kernel(m, ncols, S.indptr, S.indices, S.data, xn, y)
            return torch.from_numpy(y)

    if use is None:
        x = torch.ones(A.shape[1], dtype=A.dtype)
        c = routes.choose("trnsci.csr_matvec", (str(A.dtype).replace("torch.", ""), 1 << max(0, n - 1).bit_length(),
                                                1 << max(0, nnz - 1).bit_length()),
                          {"torch": lambda: A @ x, "scipy": lambda: host(x)}, default="torch", robust=threads > 1)
        use = c.route == "scipy"
        if len(_csr_routes) >= 256:
            _csr_routes.clear()
        _csr_routes[key] = use
    if use:
        return host
    return lambda x: A @ x


def _register_forget() -> None:
    from trnsci import routes

    routes.on_change(_forget_csr_routes)


_register_forget()


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
        _finite_entries(A, name, where)
        if A.layout is torch.sparse_csr and _host_csr_ok(A):
            return _csr_matvec(A)
        return lambda x: A @ x
    shape = getattr(A, "shape", None)
    if shape is not None and (len(tuple(shape)) != 2 or tuple(shape)[0] != n or tuple(shape)[1] != n):
        raise ValueError(f"{where}: {name} has shape {tuple(shape)} but b has {n} entries")
    _finite_entries(A, name, where)
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
