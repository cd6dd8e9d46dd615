"""Iterative (Krylov) solver plumbing shared by trnsolver and trnsparse.

* :class:`ConvergenceWarning` / :class:`ConvergenceError` -- an iterative
  method stopped before meeting its tolerance (the error is a
  :class:`trnsci.linalg.LinAlgError`).
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
>>> from trnsci import iterative as it_
>>> f = it_.linear_operator(torch.eye(2) * 3, 2, torch.float32, torch.device("cpu"), "A", "cg")
>>> f(torch.ones(2)).tolist()
[3.0, 3.0]
>>> it_.ON_FAIL("Raise", "on_fail", "cg")
'raise'
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from trnsci import dispatch, hostblas, validate
from trnsci import linalg as la
from trnsci.routes import Memo

__all__ = ["ConvergenceWarning", "ConvergenceError", "SolverInfo", "ON_FAIL", "report",
           "linear_operator", "preconditioner", "read_block"]


class ConvergenceWarning(RuntimeWarning):
    """An iterative method stopped at ``maxiter`` without meeting its tolerance."""


class ConvergenceError(la.LinAlgError):
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
        Whether the *true* residual of the returned ``x`` met the tolerance,
        ``||b - A x|| <= max(tol ||b||, atol)`` (not the recursively updated
        residual CG/BiCGSTAB stop on: when only that one met it, ``converged``
        is False and a ``ConvergenceWarning`` says so).
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


ON_FAIL = validate.Options({"warn": ("warn",), "raise": ("raise",)})


def read_block(flags, history, dtype: torch.dtype, device) -> tuple[list[float], list[float]]:
    """The one host read of a block of Krylov iterations run on a device.

    ``flags`` are 0-d device tensors (running, iteration count, non-finite,
    ...), ``history`` the block's residual norms (0-d tensors or numbers);
    both are stacked in ``dtype`` on ``device`` and read in a single
    transfer. Returns ``(flags, history)`` as Python floats.
    """
    vals = torch.stack([*(f.to(dtype) for f in flags),
                        *(torch.as_tensor(h, dtype=dtype, device=device) for h in history)]).tolist()
    return vals[:len(flags)], vals[len(flags):]


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
        return y  # the common case, without reshape/to (docs/perf-notes.md#design-fast-paths)
    return y.reshape(x.shape).to(dtype=x.dtype, device=x.device)


def _foreign(fn: Callable, obj: Any) -> Callable:
    """``x -> fn(x)`` on torch vectors for an object that is not a tensor; a SciPy object (sparse
    matrix, ``LinearOperator``, ``SuperLU``) is called on NumPy arrays, which is also its NumPy form."""
    if _is_scipy(obj):
        # a LinearOperator runs the caller's own code (kind "linear_operator", as a plain callable): route
        # timing never applies it (see krylov_loop); sparse matrices and SuperLU are SciPy's own arithmetic
        kind = "linear_operator" if _is_linear_operator(obj) else "scipy"
        return _tag(lambda x: _call_foreign(fn, x, True), kind, lambda: lambda xn: _host_out(fn(xn), xn))
    return _tag(lambda x: _call_foreign(fn, x, False), "callable")


def _is_linear_operator(obj: Any) -> bool:
    from scipy.sparse.linalg import LinearOperator

    return isinstance(obj, LinearOperator)


#: Operator kinds that run the caller's code: a route is never timed on them, since timing would apply
#: them extra times (an expensive or counting operator would notice); such solves take the default route.
USER_CODE_KINDS = frozenset({"callable", "linear_operator"})


def _tag(fn: Callable, kind: str, to_host: Callable[[], Callable] | None = None) -> Callable:
    """Mark an operator ``x -> A x`` on torch vectors with its kind (a route key part) and, where one
    exists, a factory of the same operator on NumPy vectors (see :func:`host_form`)."""
    fn.kind = kind
    fn.to_host = to_host
    return fn


def _host_out(y: Any, like: np.ndarray) -> np.ndarray:
    if isinstance(y, torch.Tensor):
        y = y.detach().resolve_conj().cpu().numpy()
    y = np.asarray(y)
    if y.shape == like.shape and y.dtype == like.dtype:
        return y
    return y.reshape(like.shape).astype(like.dtype, copy=False)


def _inner(f: Callable) -> Callable:
    return getattr(f, "_fn", f)  # trnsolver's DenseMatvec/SparseMatvec/DiagonalPrecond keep the function


def operator_kind(f: Callable | None) -> str:
    """The kind of an operator from :func:`linear_operator` / :func:`preconditioner` ("dense", "csr",
    "scipy", "callable", ...; "none" for no preconditioner)."""
    if f is None:
        return "none"
    return getattr(_inner(f), "kind", "callable")


def host_form(f: Callable) -> Callable:
    """The operator ``f`` (on torch vectors) as a function on NumPy vectors of the same dtype: its own
    NumPy form where it has one (SciPy objects, dense CPU tensors, the host CSR route), otherwise ``f``
    on a torch view of the NumPy vector, its result viewed back (no copies on the CPU)."""
    make = getattr(_inner(f), "to_host", None)
    if make is not None:
        return make()
    return lambda xn: _host_out(f(torch.from_numpy(xn)), xn)


def _stored_values(A: Any) -> Any:
    """The stored entries of a matrix-like ``A`` (dense or sparse tensor, SciPy sparse, trnsparse), or None."""
    if isinstance(A, torch.Tensor):
        if A.layout is torch.strided:
            return A
        if A.layout is torch.sparse_coo:
            return A._values()
        vals = A.values()
        # a complex CSR/CSC/BSR's values() is a view torch's complex isfinite cannot read ("Sparse CSR
        # tensors do not have strides"): a copy of the stored entries (nnz of them) can
        return vals.clone() if vals.is_complex() else vals
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


def _finite_entries_traced(A: Any, name: str, where: str) -> None:
    """:func:`_finite_entries` as torch.compile sees it: a host read of the data has no place in a graph."""


dispatch.traceable_as(_finite_entries, _finite_entries_traced)


# --------------------------------------------------------- CSR products on the host

_csr_routes = Memo()  # (dtype, n, nnz, threads) -> whether SciPy's product serves A @ x


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
        try:  # the loop behind ``S @ x`` itself, without SciPy's operator dispatch per product
            from scipy.sparse import _sparsetools

            kernel = _sparsetools.csr_matvec
        except (ImportError, AttributeError):  # pragma: no cover - another SciPy layout: its public product
            kernel = None
        m, ncols = S.shape

        def host_np(xn: np.ndarray) -> np.ndarray:
            if kernel is None or xn.dtype != S.dtype:
                return hostblas.call(S.__matmul__, xn)
            y = np.zeros(m, dtype=S.dtype)
            kernel(m, ncols, S.indptr, S.indices, S.data, xn, y)
            return y

        def host(x: torch.Tensor) -> torch.Tensor:
            return torch.from_numpy(host_np(x.numpy()))

    if use is None:
        x = torch.ones(A.shape[1], dtype=A.dtype)
        c = routes.choose("trnsci.csr_matvec", (str(A.dtype).replace("torch.", ""), 1 << max(0, n - 1).bit_length(),
                                                1 << max(0, nnz - 1).bit_length()),
                          {"torch": lambda: A @ x, "scipy": lambda: host(x)}, default="torch", robust=threads > 1)
        use = _csr_routes.remember(key, c.route == "scipy")
    if use:
        return _tag(host, "csr", lambda: host_np)
    return _tag(lambda x: A @ x, "csr")


# ------------------------------------------------ Krylov loops on torch or NumPy vectors

_NP_SCALAR = {torch.float32: np.float32, torch.float64: np.float64, torch.complex64: np.complex64,
              torch.complex128: np.complex128, torch.float16: np.float16}


class TorchVectors:
    """The vector operations a Krylov loop needs beyond ``+ - *`` (which torch tensors and NumPy
    arrays share), on torch tensors."""

    @staticmethod
    def dot(a: torch.Tensor, b: torch.Tensor) -> Any:
        """``a^H b`` as a Python number."""
        return torch.vdot(a, b).item()

    @staticmethod
    def norm(a: torch.Tensor) -> float:
        return float(torch.linalg.vector_norm(a))

    @staticmethod
    def copy(a: torch.Tensor) -> torch.Tensor:
        return a.clone()

    @staticmethod
    def scalar_type(a: torch.Tensor) -> type:
        """The NumPy scalar type of ``a``'s dtype."""
        return _NP_SCALAR[a.dtype]

    @staticmethod
    def zeros_like(a: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(a)

    @staticmethod
    def axpy_(y: torch.Tensor, alpha: Any, x: torch.Tensor) -> torch.Tensor:
        """``y += alpha x`` in place."""
        return y.add_(x, alpha=alpha)

    @staticmethod
    def xpby_(p: torch.Tensor, beta: Any, z: torch.Tensor) -> torch.Tensor:
        """``p = z + beta p`` in place."""
        return p.mul_(beta).add_(z)


class NumpyVectors:
    """:class:`TorchVectors` on NumPy arrays (dots and norms by NumPy's BLAS, in the dtype of the
    vectors; a norm is the square root of the real part of ``a^H a``)."""

    @staticmethod
    def dot(a: np.ndarray, b: np.ndarray) -> Any:
        return np.vdot(a, b) if a.dtype.kind == "c" else a.dot(b)

    @staticmethod
    def norm(a: np.ndarray) -> float:
        return math.sqrt(float((np.vdot(a, a) if a.dtype.kind == "c" else a.dot(a)).real))

    @staticmethod
    def copy(a: np.ndarray) -> np.ndarray:
        return a.copy()

    @staticmethod
    def scalar_type(a: np.ndarray) -> type:
        return a.dtype.type

    @staticmethod
    def zeros_like(a: np.ndarray) -> np.ndarray:
        return np.zeros_like(a)

    @staticmethod
    def axpy_(y: np.ndarray, alpha: Any, x: np.ndarray) -> np.ndarray:
        y += alpha * x
        return y

    @staticmethod
    def xpby_(p: np.ndarray, beta: Any, z: np.ndarray) -> np.ndarray:
        p *= beta
        p += z
        return p


#: A Krylov loop: ``loop(ops, matvec, b, x0, tol, atol, maxiter, precond, callback) -> (x, iters, history)``
#: with ``ops`` one of the vector namespaces above and every vector of one kind (torch or NumPy).
KrylovLoop = Callable[..., tuple]

_loop_routes = Memo()  # (class, threads) -> "torch" or "numpy"


def _host_loop_ok(b: torch.Tensor, x0: torch.Tensor | None, matvec: Callable, precond: Callable | None) -> bool:
    """CPU vectors without autograd, operators that do not record it: the loop can run on NumPy views."""
    return (b.device.type == "cpu" and type(b) is torch.Tensor and not b.requires_grad
            and (x0 is None or not x0.requires_grad)
            and "autograd" not in (operator_kind(matvec), operator_kind(precond)))


def _on_host(loop: KrylovLoop, matvec, b, x0, tol, atol, maxiter, precond, callback) -> tuple:
    """``loop`` on NumPy views of ``b`` and ``x0`` with the operators' NumPy forms, the callback given a
    torch view of each iterate, the iterate returned as a torch tensor (a view of the NumPy result)."""
    mv = host_form(matvec)
    pc = host_form(precond) if precond is not None else None
    cb = None if callback is None else (lambda xn: callback(torch.from_numpy(xn)))
    bn = b.resolve_conj().resolve_neg().numpy()
    xn0 = None if x0 is None else x0.resolve_conj().resolve_neg().numpy()
    with np.errstate(all="ignore"):  # overflow to Inf/NaN silently, as torch does (the loops test for it)
        x, it, hist = hostblas.call(loop, NumpyVectors, mv, bn, xn0, tol, atol, maxiter, pc, cb)
    return torch.from_numpy(x), it, hist


def krylov_loop(method: str, loop: KrylovLoop, matvec: Callable, b: torch.Tensor, x0: torch.Tensor | None,
                tol: float, atol: float, maxiter: int, precond: Callable | None, callback: Callable | None) -> tuple:
    """Run a Krylov ``loop`` on torch tensors or on NumPy views of the same CPU memory, whichever
    :func:`trnsci.routes.choose` measured faster (family ``trnsolver.krylov_loop``, keyed by ``method``,
    dtype, ``n`` to the next power of two and the kinds of ``A`` and ``M``; torch, the obvious route,
    when not timed). On small vectors a torch operation's dispatch costs more than NumPy's
    (docs/perf-notes.md#design-fast-paths); the NumPy route applies the operators through their NumPy
    forms (:func:`host_form`).
    Both routes run the same loop: the iterates differ only by the order of summation in dots and
    products (last bits). Timing runs ``loop`` for a few iterations on the actual operators (no
    callback, up to 16 iterations): the first solve of a key applies ``A`` and ``M`` extra times -- never
    for operators that run the caller's code (:data:`USER_CODE_KINDS`), which take torch untimed."""
    if not _host_loop_ok(b, x0, matvec, precond):
        return loop(TorchVectors, matvec, b, x0, tol, atol, maxiter, precond, callback)
    from trnsci import routes

    n = b.shape[0]
    threads = torch.get_num_threads()
    cls = (method, str(b.dtype).replace("torch.", ""), 1 << max(0, n - 1).bit_length(),
           operator_kind(matvec), operator_kind(precond))
    use = _loop_routes.get((cls, threads))
    if use is None:
        k = min(maxiter, 16)  # enough iterations that the per-iteration cost, not the setup, decides
        c = routes.choose(
            "trnsolver.krylov_loop", cls,
            {"torch": lambda: loop(TorchVectors, matvec, b, x0, tol, atol, k, precond, None),
             "numpy": lambda: _on_host(loop, matvec, b, x0, tol, atol, k, precond, None)},
            default="torch", robust=threads > 1,
            worth_timing=k > 0 and not USER_CODE_KINDS & {cls[3], cls[4]})
        use = _loop_routes.remember((cls, threads), c.route)
    if use == "numpy":
        return _on_host(loop, matvec, b, x0, tol, atol, maxiter, precond, callback)
    return loop(TorchVectors, matvec, b, x0, tol, atol, maxiter, precond, callback)


def linear_operator(A: Any, n: int, dtype: torch.dtype, device, name: str, where: str) -> Callable:
    """``x -> A x`` for a dense/sparse tensor or array, a SciPy sparse matrix or
    LinearOperator, any object with ``matvec`` or ``@``, or a callable."""
    if A is None:
        raise TypeError(f"{where}: {name} must be a matrix, an operator with matvec/@, or a callable; got None")
    if isinstance(A, np.ndarray):
        A = validate.tensor(A, name, where)
    if isinstance(A, torch.Tensor):
        if A.dim() != 2 or A.shape[0] != A.shape[1]:
            raise ValueError(f"{where}: {name} must be a square matrix, got shape {tuple(A.shape)}")
        if A.shape[0] != n:
            raise ValueError(f"{where}: {name} has shape {tuple(A.shape)} but b has {n} entries")
        if A.dtype not in la.LINALG_DTYPES:
            raise TypeError(f"{where}: {name} has dtype {str(A.dtype).replace('torch.', '')}; "
                            "expected float32, float64, complex64 or complex128")
        if A.dtype != dtype or A.device != device:
            validate.agree(where, **{name: A}, b=torch.empty(0, dtype=dtype, device=device))
        _finite_entries(A, name, where)
        if A.requires_grad:
            return _tag(lambda x: A @ x, "autograd")
        if A.layout is torch.sparse_csr and _host_csr_ok(A):
            return _csr_matvec(A)
        if A.layout is torch.strided and A.device.type == "cpu":
            return _tag(lambda x: A @ x, "dense", lambda: A.resolve_conj().resolve_neg().numpy().__matmul__)
        return _tag(lambda x: A @ x, str(A.layout).replace("torch.", ""))
    shape = getattr(A, "shape", None)
    if shape is not None and (len(tuple(shape)) != 2 or tuple(shape)[0] != n or tuple(shape)[1] != n):
        raise ValueError(f"{where}: {name} has shape {tuple(shape)} but b has {n} entries")
    _finite_entries(A, name, where)
    if hasattr(A, "matvec"):
        return _foreign(A.matvec, A)
    if hasattr(A, "__matmul__") and not callable(A):
        return _foreign(lambda y: A @ y, A)
    if callable(A):
        return _foreign(A, A)
    raise TypeError(f"{where}: {name} must be a matrix, an operator with matvec/@, or a callable; "
                    f"got {type(A).__name__}")


def preconditioner(M: Any, n: int, dtype: torch.dtype, device, where: str) -> Callable | None:
    """``r -> M r ~ A^{-1} r`` (SciPy's convention) for a matrix, a callable, or an
    object with ``solve`` / ``__call__`` / ``matvec`` / ``@`` (trnsparse ilu0/ic0/jacobi,
    SciPy's ``spilu`` result, a ``LinearOperator``)."""
    if M is None:
        return None
    if hasattr(M, "solve") and not isinstance(M, (torch.Tensor, np.ndarray)):
        return _foreign(M.solve, M)
    return linear_operator(M, n, dtype, device, "M", where)
