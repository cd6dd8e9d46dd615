"""Krylov solvers (CG, GMRES, BiCGSTAB, MINRES) and simple preconditioners.

``A`` may be a dense or sparse torch tensor, a NumPy array, a SciPy sparse
matrix or ``LinearOperator``, a trnsparse matrix, any object with ``matvec``
or ``@``, or a callable ``x -> A x``. The preconditioner ``M`` follows
SciPy's convention, ``M r ~ A^{-1} r``: a matrix, a callable, or an object
with ``solve`` / ``__call__`` / ``matvec`` (trnsparse's ilu0/ic0/jacobi
objects, SciPy's ``spilu`` result).

Published return ``(x, iters, relres)``; ``return_info=True`` returns
``(x, info)`` with a :class:`SolverInfo` (iterations, residual history,
converged flag). SciPy's keywords are accepted too: ``rtol=`` (an alias of
the published ``tol=``), ``atol=``, ``callback=`` (called with the iterate
after every iteration).

Stopping rule (CG and BiCGSTAB, as SciPy and the published package): stop
when the *recursively updated* residual satisfies ``||r|| < max(tol ||b||,
atol)``, so the iteration counts are SciPy's on the same system. That
recursion can fall below what the dtype resolves (float32 with ``tol=1e-8``)
while the true residual ``b - A x`` cannot follow it; the true residual is
therefore computed once at the end and, when it misses the tolerance that
the recursion claimed to meet, a ``ConvergenceWarning`` says so and the
result does not count as converged (``SolverInfo.converged`` is the true
residual's verdict, for every solver; SciPy's ``info`` would be 0 here, and
``on_fail="raise"`` raises ``ConvergenceError``). GMRES and MINRES confirm their
estimates with the true residual before stopping. A solver that stops at
``maxiter`` without meeting ``tol`` warns (``ConvergenceWarning``) or raises
(``on_fail="raise"``); the reported ``relres`` is always recomputed from the
returned ``x``. NaN/Inf in ``b``, ``x0`` or a matrix ``A``/``M`` is a
``ValueError`` before the first iteration; an operator (callable) that
returns NaN/Inf is one as soon as it does.
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np
import torch

from trnsci import iterative as it_
from trnsci import linalg as la
from trnsci import precision, runtime, validate
from trnsci.dispatch import Op

__all__ = ["cg", "gmres", "bicgstab", "minres",
           "jacobi_preconditioner", "block_jacobi_preconditioner", "ssor_preconditioner"]

_KRYLOV_DTYPES = la.LINALG_DTYPES


def threshold(b, tol: float, atol: float) -> tuple[float, float, float]:
    """``(||b||, stop, scale)``: the stopping threshold ``max(tol ||b||, atol)`` of every Krylov solver
    (SciPy's rule) and the scale its residual history is recorded in (``||b||``, or 1 for ``b = 0``)."""
    bnorm = float(torch.linalg.vector_norm(b.detach()))
    return bnorm, max(tol * bnorm, atol), (bnorm if bnorm > 0 else 1.0)

def _rows(matvec, b, *rest, **kwargs):
    return float(b.shape[0])


def _describe_rows(matvec, b, *rest, **kwargs):
    return f"n={b.shape[0]} {str(b.dtype).replace('torch.', '')}"


def _numpy_callback(fn):
    """Outside :func:`numpy_io`: a ``callback`` sees NumPy iterates when ``b`` is a NumPy array."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        cb = kwargs.get("callback")
        b = args[1] if len(args) > 1 else kwargs.get("b")
        if cb is not None and callable(cb) and isinstance(b, np.ndarray):
            kwargs["callback"] = lambda xk: cb(xk.detach().cpu().resolve_conj().numpy())
        return fn(*args, **kwargs)
    return wrapper


class DenseMatvec:
    """``x -> A x`` for a dense matrix ``A``, keeping ``A`` (``.matrix``) so an NKI
    lowering can stream it through its own matvec instead of calling back."""

    __slots__ = ("matrix", "_fn")

    def __init__(self, matrix: torch.Tensor, fn):
        self.matrix = matrix
        self._fn = fn

    def __call__(self, x):
        return self._fn(x)


class SparseMatvec:
    """``x -> A x`` for a matrix that offers a device SpMV through the ``__trnsci_spmv__``
    seam (trnsparse's CSR matrices): ``A.__trnsci_spmv__()`` returns an object with
    ``run(p)`` (``[n, 1]`` float32 in and out, one SpMV kernel launch), ``counts()``
    (that launch's closed form) and ``kernel`` (its name), or a string saying why the
    matrix has none. trnsolver never imports the matrix's library: the seam is the method.
    ``device()`` asks once per solve (the matrix caches its own device layout)."""

    __slots__ = ("matrix", "_fn", "_dev")

    def __init__(self, matrix, fn):
        self.matrix = matrix
        self._fn = fn
        self._dev = None

    def __call__(self, x):
        return self._fn(x)

    def device(self):
        if self._dev is None:
            self._dev = type(self.matrix).__trnsci_spmv__(self.matrix)
        return self._dev


class BlockJacobiPrecond:
    """``r -> blockdiag(A)^{-1} r`` from :func:`block_jacobi_preconditioner`, keeping its Cholesky
    factors (``.source``) so the call crosses a torch operator's boundary as tensors."""

    __slots__ = ("source", "_fn")

    def __init__(self, source, fn):
        self.source = source
        self._fn = fn

    def __call__(self, r):
        return self._fn(r)


class DiagonalPrecond:
    """``r -> r / diag(A)`` from :func:`jacobi_preconditioner`, keeping ``1 / diag(A)``
    (``.inv_d``) for an NKI lowering that applies it on the device."""

    __slots__ = ("inv_d", "_fn")

    def __init__(self, inv_d: torch.Tensor, fn):
        self.inv_d = inv_d
        self._fn = fn

    def __call__(self, r):
        return self._fn(r)


def _setup(where, A, b, x0, tol, atol, maxiter, M, on_fail, return_info, rtol=None, callback=None):
    b = validate.tensor(b, "b", where, _KRYLOV_DTYPES)
    if b.dim() != 1:
        raise ValueError(f"{where}: b must be a vector (n,), got shape {tuple(b.shape)}")
    n = b.shape[0]
    matvec = it_.linear_operator(A, n, b.dtype, b.device, "A", where)
    if isinstance(A, torch.Tensor) and A.layout == torch.strided:
        matvec = DenseMatvec(A, matvec)
    elif callable(getattr(type(A), "__trnsci_spmv__", None)):
        matvec = SparseMatvec(A, matvec)
    if x0 is not None:
        x0 = validate.tensor(x0, "x0", where, _KRYLOV_DTYPES)
        if tuple(x0.shape) != (n,):
            raise validate.mismatch(where, "x0 must match b", b=b, x0=x0)
        validate.agree(where, b=b, x0=x0)
    tol_name = "tol" if rtol is None else "rtol"
    tol = validate.alias(where, "tol", tol, "rtol", rtol, 1e-6)
    tol = validate.positive(tol, tol_name, where, zero_ok=True)
    atol = validate.positive(atol, "atol", where, zero_ok=True)
    if callback is not None and not callable(callback):
        raise TypeError(f"{where}: callback must be callable (it is called with each iterate), "
                        f"got {type(callback).__name__}")
    maxiter = validate.integer(maxiter, "maxiter", where, minimum=0, maximum=validate.INDEX_MAX)
    precond = it_.preconditioner(M, n, b.dtype, b.device, where)
    if isinstance(M, _Diagonal):
        precond = DiagonalPrecond(M.inv_d, precond)
    elif isinstance(M, _BlockJacobi):
        precond = BlockJacobiPrecond(M, precond)
    on_fail = it_.ON_FAIL(on_fail, "on_fail", where)
    return_info = validate.flag(return_info, "return_info", where)
    la.finite(where, b=b, x0=x0)
    return matvec, b, x0, tol, atol, maxiter, precond, on_fail, return_info


def _finish(where, matvec, b, x, it, hist, tol, atol, on_fail, return_info, method):
    """The true residual, once; the result; the warnings (see the module docstring)."""
    bnorm, stop, scale = threshold(b, tol, atol)
    with torch.no_grad():  # a host number: no graph to record (x may require grad)
        rnorm = float(torch.linalg.vector_norm(b - matvec(x))) if b.numel() else 0.0
    relres = rnorm / bnorm if bnorm > 0 else rnorm
    claimed = bool(hist) and (hist[-1] * scale < stop or hist[-1] == 0.0)  # what the solver's test saw
    true_ok = rnorm <= stop or rnorm == 0.0
    # ``converged`` is the true residual's verdict: a recursion that met the tolerance while
    # b - A x did not is reported as not converged, with the one warning (or error) that says why
    info = it_.SolverInfo(it, relres, bool(true_ok), hist, method)
    if claimed and not true_ok:
        msg = (f"{where}: stopped after {it} iterations when the recursively updated residual met the "
               f"tolerance ({hist[-1]:.3e} relative, SciPy's rule), but the true residual ||b - A x|| / ||b|| "
               f"is {relres:.3e} > tol {tol:.1e}, so info.converged is False: the recursion went below what "
               f"{str(b.dtype).replace('torch.', '')} resolves for this system (or A is indefinite or "
               "ill-conditioned); solve in float64 or ask for a tol the dtype can reach")
        if on_fail == "raise":
            raise it_.ConvergenceError(msg, info=it)
        warnings.warn(msg, it_.ConvergenceWarning, stacklevel=6)  # _finish, _krylov, cg, numpy_io, _numpy_callback
    else:
        it_.report(where, info, on_fail, tol)
    return (x, info) if return_info else (x, it, relres)


def _krylov(where, op, A, b, x0, tol, atol, maxiter, M, on_fail, return_info, rtol, callback):
    """Validate, run ``op(matvec, b, x0, tol, atol, maxiter, precond, callback)``, report
    (CG, BiCGSTAB, MINRES)."""
    matvec, b, x0, tol, atol, maxiter, precond, on_fail, ri = _setup(
        where, A, b, x0, tol, atol, maxiter, M, on_fail, return_info, rtol, callback)
    x, it, hist = _host_values(op(matvec, b, x0, tol, atol, maxiter, precond, callback))
    if isinstance(it, torch.Tensor):
        return _finish_traced(matvec, b, x, it, hist, tol, atol, ri, where)
    return _finish(where, matvec, b, x, it, hist, tol, atol, on_fail, ri, where)


# ------------------------------------------------ the torch operator boundary
#
# A solve crosses ``torch.ops.trnsolver.<cg|gmres|bicgstab|minres>`` as tensors and constants when A
# is a dense tensor or a CSR matrix (its three arrays) and M is None or trnsolver's own Jacobi /
# block-Jacobi preconditioner; a callable A, another preconditioner or a callback keeps the plain
# Op (they cross no schema). The operator returns x, the iteration count (0-d int64) and the
# residual history padded with -1 to its longest possible length (a fixed shape; residuals are >= 0).

_KRYLOV_ARGS = ("Tensor A, Tensor? col_indices, Tensor? row_ptrs, Tensor b, Tensor? x0, float tol, float atol, "
                "int maxiter, str precond, Tensor? P1, Tensor? P2")
_KRYLOV_OUT = " -> (Tensor x, Tensor iterations, Tensor history)"


class CSRArrays:
    """``x -> A x`` for a CSR matrix given as its arrays (values, column indices, row pointers): the
    matvec a Krylov operator's implementation rebuilds from what crossed its boundary."""

    __slots__ = ("values", "cols", "rows", "n", "kind", "to_host")

    def __init__(self, values, col_indices, row_ptrs, n):
        self.values = values
        self.cols = col_indices.long()
        self.rows = _csr_rows(row_ptrs, values.shape[0])
        self.n = n
        self.kind, self.to_host = "csr_arrays", None

    def __call__(self, x):
        y = torch.zeros(self.n, dtype=x.dtype, device=x.device)
        return y.index_add(0, self.rows, self.values * x[self.cols])


def _csr_rows(row_ptrs, nnz):
    """The row index of every stored entry of a CSR pattern (static length ``nnz``)."""
    n = row_ptrs.shape[0] - 1
    counts = (row_ptrs[1:] - row_ptrs[:-1]).long()
    return torch.repeat_interleave(torch.arange(n, device=row_ptrs.device), counts, output_size=nnz)


def _csr_adjoint(values, col_indices, row_ptrs, n):
    """The arrays of ``A^H`` (rows sorted by column index) from ``A``'s, with static shapes."""
    rows = _csr_rows(row_ptrs, values.shape[0])
    cols = col_indices.long()
    perm = torch.argsort(cols * n + rows, stable=True)
    counts = torch.zeros(n, dtype=torch.int64, device=values.device).index_add(0, cols, torch.ones_like(cols))
    ptrs = torch.cat([counts.new_zeros(1), counts.cumsum(0)]).to(row_ptrs.dtype)
    return values[perm].conj().resolve_conj(), rows[perm].to(col_indices.dtype), ptrs


def _history_length(b, maxiter, restart=None):
    """The longest residual history a solve can record: one entry per iteration (GMRES: per matvec) and
    the initial one."""
    if restart is None:
        return maxiter + 1
    return maxiter * max(1, min(restart, b.shape[0])) + 1


def _to_operator(matvec, b, x0, tol, atol, maxiter, precond, callback=None, *rest):
    """The operator's arguments from the lowering's, or None when the call crosses no schema."""
    if callback is not None or not isinstance(b, torch.Tensor):
        return None
    n = b.shape[0]
    if isinstance(matvec, DenseMatvec):
        A, cols, ptrs = matvec.matrix, None, None
        if A.layout != torch.strided:
            return None
    elif isinstance(matvec, SparseMatvec):
        M = matvec.matrix
        A, cols, ptrs = (getattr(M, k, None) for k in ("values", "col_indices", "row_ptrs"))
        if (not all(isinstance(t, torch.Tensor) for t in (A, cols, ptrs))
                or tuple(getattr(M, "shape", ())) != (n, n) or tuple(ptrs.shape) != (n + 1,)):
            return None
    else:
        return None
    if A.dtype != b.dtype or A.device != b.device:
        return None
    if precond is None:
        kind, P1, P2 = "none", None, None
    elif isinstance(precond, DiagonalPrecond):
        kind, P1, P2 = "jacobi", precond.inv_d, None
    elif isinstance(precond, BlockJacobiPrecond):
        kind, P1, P2 = "block_jacobi", precond.source.Lb, precond.source.L_tail
    else:
        return None
    if any(P is not None and (P.dtype != b.dtype or P.device != b.device) for P in (P1, P2)):
        return None
    return (A, cols, ptrs, b, x0, float(tol), float(atol), maxiter, kind, P1, P2, *rest)


def _gmres_to_operator(matvec, b, x0, tol, atol, restart, maxiter, precond, callback=None):
    return _to_operator(matvec, b, x0, tol, atol, maxiter, precond, callback, restart)


def _from_operator(A, cols, ptrs, b, x0, tol, atol, maxiter, kind, P1, P2, *rest):
    """The lowering's arguments (a matvec and a preconditioner object) from the operator's."""
    n = b.shape[0]
    if cols is None:
        matvec = DenseMatvec(A, it_.linear_operator(A, n, b.dtype, b.device, "A", "trnsolver"))
    else:
        matvec = CSRArrays(A, cols, ptrs, n)
    if kind == "none":
        precond = None
    elif kind == "jacobi":
        precond = DiagonalPrecond(P1, lambda r: r * P1)
    elif kind == "block_jacobi":
        M = _BlockJacobi(P1, P2, P1.shape[0], P1.shape[-1])
        precond = BlockJacobiPrecond(M, M)
    else:
        raise ValueError(f"trnsolver: precond must be 'none', 'jacobi' or 'block_jacobi', got {kind!r}")
    if rest:  # GMRES: restart comes before maxiter in the lowering
        return (matvec, b, x0, tol, atol, rest[0], maxiter, precond, None)
    return (matvec, b, x0, tol, atol, maxiter, precond, None)


def _real(dtype):
    return torch.empty(0, dtype=dtype).real.dtype


def _result(out, A, cols, ptrs, b, x0, tol, atol, maxiter, kind, P1, P2, *rest):
    """The operator's outputs from the lowering's ``(x, iterations, history)``."""
    x, it, hist = out
    L = _history_length(b, maxiter, *rest)
    h = torch.full((L,), -1.0, dtype=_real(b.dtype), device=b.device)
    if hist:
        vals = torch.as_tensor([float(v) for v in hist[:L]], dtype=h.dtype)
        h[: vals.shape[0]] = vals.to(b.device)
    return x, torch.tensor(int(it), dtype=torch.int64, device=b.device), h


def _fake(A, cols, ptrs, b, x0, tol, atol, maxiter, kind, P1, P2, *rest):
    L = _history_length(b, maxiter, *rest)
    return (torch.empty_like(b), b.new_empty((), dtype=torch.int64),
            b.new_empty((L,), dtype=_real(b.dtype)))


def _host_values(out):
    """A Krylov Op's result as the public functions use it: ``(x, iterations, history list)``. An
    operator's tensors (the iteration count, the history padded with -1) become host values, except while
    torch.compile traces, where they stay tensors (the graph does not stop to read them)."""
    x, it, hist = out
    if isinstance(it, torch.Tensor):
        if torch.compiler.is_compiling():
            return x, it, hist
        it = int(it)
        hist = [v for v in hist.tolist() if v >= 0]
    return x, it, hist


def _finish_traced(matvec, b, x, it, hist, tol, atol, return_info, method):
    """:func:`_finish` as torch.compile sees it: the true residual as a tensor, no host read, no warning
    (the graph does not stop to look at values); ``iters`` and ``relres`` are 0-d tensors."""
    bnorm = torch.linalg.vector_norm(b)
    rnorm = torch.linalg.vector_norm(b - matvec(x))
    relres = torch.where(bnorm > 0, rnorm / torch.where(bnorm > 0, bnorm, torch.ones_like(bnorm)), rnorm)
    if not return_info:
        return x, it, relres
    stop = torch.clamp(tol * bnorm, min=atol)
    return x, it_.SolverInfo(it, relres, (rnorm <= stop) | (rnorm == 0), hist, method)


def _not_finite(where, what, it):
    return ValueError(f"{where}: {what} is not finite at iteration {it}: A (or M) produced NaN/Inf")


def _end_block(where, what, flags, history, got, dtype, device, first=0, drop_nan=False):
    """The host's one read at the end of a device loop's block of iterations (:func:`trnsci.iterative.read_block`).

    ``flags`` are 0-d device tensors ``(running, iterations, non-finite, ...)`` and ``history`` the block's
    residual norms, appended to ``got`` (masked-out iterations are NaN; ``drop_nan`` leaves them out).
    Raises the loop's non-finite error, at iteration ``first`` + the count; returns ``(running, iterations
    (an int), *the other flags)``.
    """
    (running, count, nonfinite, *rest), block = it_.read_block(flags, history, dtype, device)
    got.extend([v for v in block if v == v] if drop_nan else block)
    count = int(count)
    if nonfinite:
        raise _not_finite(where, what, first + count)
    return (running, count, *rest)


def _dot(x, y):
    return torch.vdot(x, y)


# ===================================================================== CG

def _start(matvec, b, x0, tol, atol, ops=it_.TorchVectors):
    """Common Krylov start: ``(x, r, ||r||, stop, scale, history)`` with
    ``stop = max(tol ||b||, atol)`` and residuals recorded relative to ``||b||``
    (``ops``: the vector operations of ``b``'s kind, torch or NumPy)."""
    x = ops.zeros_like(b) if x0 is None else ops.copy(x0)
    bnorm = ops.norm(b)
    stop, scale = max(tol * bnorm, atol), (bnorm if bnorm > 0 else 1.0)
    r = b - matvec(x) if x0 is not None else ops.copy(b)
    rn = ops.norm(r)
    return x, r, rn, stop, scale, [rn / scale]


#: Threshold (rows): no Trainium here to calibrate on. The device path is one
#: cg_step_kernel launch per iteration (a memory-bound matvec streaming A),
#: which pays off once a matvec outweighs a launch's fixed cost; 4096 rows
#: (a 64 MiB float32 A) is a placeholder.
CG = Op("trnsolver.cg", "rows", 4096, size=_rows, describe=_describe_rows,
        schema="(" + _KRYLOV_ARGS + ")" + _KRYLOV_OUT, fake=_fake,
        doc="conjugate gradients (dense float32 A, no M: one cg_step_kernel launch per iteration; "
            "trnsparse CSR float32 A, no M: csr_spmv_kernel + cg_update_kernel per iteration)")


@CG.lowering("torch")
def _cg_torch(matvec, b, x0, tol, atol, maxiter, precond, callback=None):
    """Preconditioned CG on the host: :func:`_cg_loop` on torch tensors or NumPy views of them,
    whichever was measured faster (:func:`trnsci.iterative.krylov_loop`); on a device,
    :func:`_cg_device_loop`."""
    if not b.is_cpu and b.device.type != "meta":
        return _cg_device_loop(matvec, b, x0, tol, atol, maxiter, precond, callback)
    return it_.krylov_loop("cg", _cg_loop, matvec, b, x0, tol, atol, maxiter, precond, callback)


#: Iterations between two convergence reads of the device CG loop (:func:`_cg_device_loop`).
CHECK_EVERY = 8


def _cg_device_loop(matvec, b, x0, tol, atol, maxiter, precond, callback, check_every=CHECK_EVERY):
    """:func:`_cg_loop` with every scalar kept on the device: the host reads one small tensor (stopped?,
    iterations, a non-finite ``p^H A p``) every ``check_every`` iterations, and the residual history
    once at the end. Each iteration is the same sequence of operations on device tensors, so a lazy
    device (torch-xla) traces one graph per block of ``check_every`` iterations and reuses it; after the
    stopping test holds, the remaining iterations of a block are masked out (``alpha = 0``), so the
    iterates, the iteration count and the history equal the host loop's up to rounding. The history
    of a block comes with its read; ``maxiter == 0`` reads nothing."""
    real = b.real.dtype if b.is_complex() else b.dtype

    def dot(u, w):
        d = (u.conj() * w).sum()
        return d.real if d.is_complex() else d

    x = torch.zeros_like(b) if x0 is None else x0.clone()
    bnorm = torch.linalg.vector_norm(b)
    stop = torch.clamp(tol * bnorm, min=atol)
    scale = torch.where(bnorm > 0, bnorm, torch.ones_like(bnorm))
    r = b - matvec(x) if x0 is not None else b.clone()
    rn = torch.linalg.vector_norm(r)
    hist = [rn / scale]
    active = ~((rn < stop) | (rn == 0))
    runtime.sync(b.device)  # the start in a graph of its own: every block then traces the same graph
    its = torch.zeros((), dtype=torch.int64, device=b.device)
    bad = torch.zeros((), dtype=torch.bool, device=b.device)
    p = torch.zeros_like(b)
    rz = torch.ones((), dtype=real, device=b.device)
    it = iters = 0
    got: list = []  # history values read so far
    while it < maxiter:
        for _ in range(min(check_every, maxiter - it)):
            it += 1
            was = active
            z = precond(r) if precond is not None else r
            rz_new = dot(r, z)
            p = z + (rz_new / rz) * p  # the first iteration: p = 0, so p = z (one graph for every iteration)
            rz = rz_new
            Ap = matvec(p)
            pAp = dot(p, Ap)
            bad = bad | (active & ~torch.isfinite(pAp))
            active = active & torch.isfinite(pAp) & (pAp != 0)
            alpha = torch.where(active, rz / torch.where(pAp != 0, pAp, torch.ones_like(pAp)),
                                torch.zeros_like(pAp))
            x = x + alpha * p
            r = r - alpha * Ap
            rn_next = torch.linalg.vector_norm(r)
            rn = torch.where(active, rn_next, rn)
            hist.append(torch.where(active, rn / scale, torch.full_like(rn, math.nan)))
            its = its + was.to(torch.int64)
            if callback is not None:
                callback(x)
            active = active & ~((rn < stop) | (rn == 0))
        runtime.sync(b.device)  # a lazy device: this block's graph ends here (the same graph every block)
        running, iters = _end_block("cg", "p^H A p", (active, its, bad), hist[len(got):], got, real, b.device)
        if not running:
            break
    h = [v for v in got if v == v]  # masked-out iterations: NaN, dropped
    return x, iters, h[: iters + 1]


def _cg_loop(ops, matvec, b, x0, tol, atol, maxiter, precond, callback):
    """Preconditioned CG, stopping as SciPy does: when the recursively updated residual
    ``r`` has ``||r|| < max(tol ||b||, atol)``. Returns ``(x, iterations, relative residual history)``."""
    x, r, rn, stop, scale, hist = _start(matvec, b, x0, tol, atol, ops)
    if rn < stop or rn == 0.0:
        return x, 0, hist
    cplx = issubclass(ops.scalar_type(b), np.complexfloating)
    p = None
    rz = 1.0
    it = 0
    for it in range(1, maxiter + 1):  # noqa: B007 (it is returned)
        z = precond(r) if precond is not None else r
        rz_new = float(ops.dot(r, z).real)
        if p is None:
            p = ops.copy(z)
        else:
            beta = rz_new / rz
            p = z + beta * p if cplx else ops.xpby_(p, beta, z)
        rz = rz_new
        Ap = matvec(p)
        pAp = float(ops.dot(p, Ap).real)
        if not math.isfinite(pAp):
            raise _not_finite("cg", "p^H A p", it)
        if pAp == 0.0:
            break
        alpha = rz / pAp
        ops.axpy_(x, alpha, p)
        ops.axpy_(r, -alpha, Ap)
        rn = ops.norm(r)
        hist.append(rn / scale)
        if callback is not None:
            callback(x)
        if rn < stop or rn == 0.0:
            break
    return x, it, hist


@precision.computes_in("float32")
@_numpy_callback
@validate.numpy_io
def cg(A, b, x0=None, tol=None, maxiter=1000, M=None, *, rtol=None, atol=0.0, callback=None, on_fail="warn",
       return_info=False):
    """Conjugate gradients for Hermitian positive definite ``A x = b``.

    Parameters
    ----------
    A : matrix, sparse matrix, operator or callable, (n, n)
        Hermitian positive definite.
    b : tensor, shape (n,)
    x0 : tensor, shape (n,), optional
        Starting guess (default zeros); never modified.
    tol, rtol, atol : float
        Stop when the recursively updated residual has ``||r|| < max(tol
        ||b||, atol)`` (SciPy's rule; ``tol`` defaults to 1e-6, ``rtol`` is
        SciPy's name for it -- give one of them). The true residual is then
        checked once: when it misses the tolerance the recursion met (e.g.
        float32 with ``tol=1e-8``), the solve counts as not converged
        (``info.converged`` is the true residual's verdict) and a
        ``ConvergenceWarning`` says so.
    maxiter : int
    M : matrix, callable or object with solve/__call__/matvec, optional
        Hermitian positive definite preconditioner applying ``~A^{-1}``.
    callback : callable, optional
        ``callback(xk)`` after every iteration with the current iterate (a
        NumPy array when ``b`` is one; do not modify it), as in SciPy.
    on_fail : {"warn", "raise"}
        Not converged: ``ConvergenceWarning`` or ``ConvergenceError``.
    return_info : bool
        Return ``(x, SolverInfo)`` instead of ``(x, iters, relres)``.

    Returns
    -------
    x : tensor, shape (n,)
    iters : int
        Iterations run (SciPy's count: the callback's number of calls).
    relres : float
        ``||b - A x|| / ||b||``, recomputed from ``x``.

    Raises
    ------
    ValueError
        NaN/Inf in ``A``, ``b``, ``x0`` or ``M`` (before iterating), or an
        operator that produces them.

    Examples
    --------
    >>> import torch, trnsolver
    >>> A = torch.tensor([[4.0, 1.0], [1.0, 3.0]], dtype=torch.float64)
    >>> x, iters, relres = trnsolver.cg(A, torch.tensor([1.0, 2.0], dtype=torch.float64), tol=1e-12)
    >>> [round(v, 6) for v in x.tolist()], iters
    ([0.090909, 0.636364], 2)
    """
    return _krylov("cg", CG, A, b, x0, tol, atol, maxiter, M, on_fail, return_info, rtol, callback)


# ================================================================== GMRES

#: Threshold (rows): the same placeholder as CG's (one launch per inner iteration).
GMRES = Op("trnsolver.gmres", "rows", 4096, size=_rows, describe=_describe_rows,
           schema="(" + _KRYLOV_ARGS + ", int restart)" + _KRYLOV_OUT, fake=_fake,
           doc="restarted GMRES (dense float32 A, no M: one gmres_arnoldi_kernel launch per inner iteration)")


@GMRES.lowering("torch")
def _gmres_torch(matvec, b, x0, tol, atol, restart, maxiter, precond, callback=None):
    """Restarted right-preconditioned GMRES (Givens QR of the Hessenberg
    matrix, classical Gram-Schmidt with one re-orthogonalisation, as GEMVs).
    ``maxiter`` counts restart cycles; returns ``(x, matvecs, history)``. On a device,
    :func:`_gmres_device_loop`."""
    if not b.is_cpu and b.device.type != "meta":
        return _gmres_device_loop(matvec, b, x0, tol, atol, restart, maxiter, precond, callback)
    x = torch.zeros_like(b) if x0 is None else x0.clone()
    n = b.shape[0]
    bnorm, stop, scale = threshold(b, tol, atol)
    m = max(1, min(restart, n))
    hdt = torch.empty(0, dtype=b.dtype).numpy().dtype
    cplx = b.is_complex()
    total = 0
    hist = []
    for _cycle in range(maxiter):
        r = b - matvec(x)
        beta = float(torch.linalg.vector_norm(r))
        if not hist:
            hist.append(beta / scale)
        if beta < stop or beta == 0.0:
            return x, total, hist
        V = torch.zeros(m + 1, n, dtype=b.dtype, device=b.device)
        # the small (m+1) x m least-squares problem lives on the host in NumPy arrays of b's dtype: each
        # scalar operation below rounds as the same operation on a 0-d torch tensor of that dtype does,
        # at a fraction of its cost (the Givens updates are O(j) scalar operations per inner iteration;
        # docs/perf-notes.md#design-fast-paths)
        H = np.zeros((m + 1, m), dtype=hdt)
        cs = np.zeros(m, dtype=hdt)
        sn = np.zeros(m, dtype=hdt)
        g = np.zeros(m + 1, dtype=hdt)
        g[0] = beta
        V[0] = r / beta
        k = 0
        for j in range(m):
            w = matvec(precond(V[j]) if precond is not None else V[j])
            total += 1
            h = V[: j + 1].conj() @ w
            w = w - h @ V[: j + 1]
            h2 = V[: j + 1].conj() @ w          # re-orthogonalise (CGS2)
            w = w - h2 @ V[: j + 1]
            h = (h + h2).cpu().resolve_conj().numpy()
            hn = float(torch.linalg.vector_norm(w))
            if not math.isfinite(hn):
                raise _not_finite("gmres", "A v", total)
            col = np.zeros(m + 1, dtype=hdt)
            col[: j + 1] = h
            col[j + 1] = hn
            for i in range(j):  # apply previous Givens rotations
                t = cs[i] * col[i] + sn[i] * col[i + 1]
                col[i + 1] = -sn[i].conj() * col[i] + cs[i] * col[i + 1]
                col[i] = t
            a, bb = col[j], col[j + 1]
            den = math.sqrt(abs(complex(a)) ** 2 + abs(complex(bb)) ** 2)
            if den == 0:
                cs[j], sn[j] = 1.0, 0.0
            else:
                if abs(complex(a)) == 0:
                    cs[j], sn[j] = 0.0, 1.0
                else:
                    ph = a / abs(complex(a))
                    cs[j] = abs(complex(a)) / den
                    sn[j] = ph * (bb.conj() if cplx else bb) / den
            col[j] = cs[j] * a + sn[j] * bb
            col[j + 1] = 0
            g[j + 1] = -sn[j].conj() * g[j]
            g[j] = cs[j] * g[j]
            H[:, j] = col
            k = j + 1
            res = abs(complex(g[j + 1]))
            hist.append(res / scale)
            if hn > 0:
                V[j + 1] = w / hn
            if res <= stop or hn == 0:
                break
        y = torch.linalg.solve_triangular(torch.from_numpy(H[:k, :k]), torch.from_numpy(g[:k]).unsqueeze(-1),
                                          upper=True).squeeze(-1)
        dx = y.to(b.device) @ V[:k]
        x = x + (precond(dx) if precond is not None else dx)
        if callback is not None:
            callback(x)
    return x, total, hist


def _gmres_device_loop(matvec, b, x0, tol, atol, restart, maxiter, precond, callback, check_every=CHECK_EVERY):
    """:func:`_gmres_torch` with the Hessenberg column, its Givens rotations and the residual estimate
    on the device: the host reads one small tensor (stopped?, inner iterations, non-finite) every
    ``check_every`` inner iterations and at the end of a cycle. An inner iteration after the stopping
    test held is masked out (it leaves the first ``k`` columns, ``g[:k]`` and the basis used by the
    update alone), so the iterates, the product count and the history equal the host loop's up to
    rounding. The restart residual ``||b - A x||`` is tested on the device (its first block is masked
    out when it meets the tolerance) after a cycle that ran all ``restart`` iterations, and read on the
    host after a cycle that stopped early (the usual last cycle: one read instead of a masked block)."""
    real = b.real.dtype if b.is_complex() else b.dtype
    dev = b.device
    x = torch.zeros_like(b) if x0 is None else x0.clone()
    n = b.shape[0]
    bnorm = torch.linalg.vector_norm(b)
    stop = torch.clamp(tol * bnorm, min=atol)
    scale = torch.where(bnorm > 0, bnorm, torch.ones_like(bnorm))
    m = max(1, min(restart, n))
    one = torch.ones((), dtype=b.dtype, device=dev)
    nan = torch.full((), math.nan, dtype=real, device=dev)
    bad = torch.zeros((), dtype=torch.bool, device=dev)
    total = 0
    got: list = []
    hist: list = []  # device values not read yet
    early = False  # the previous cycle stopped before m iterations
    for _cycle in range(maxiter):
        r = b - matvec(x)
        beta = torch.linalg.vector_norm(r)
        if not got and not hist:
            hist.append(beta / scale)
        if early:  # most likely the last cycle: read its residual instead of masking a block
            if torch.stack([(beta < stop) | (beta == 0)]).tolist()[0]:
                return x, total, got
        active = ~((beta < stop) | (beta == 0))
        V = torch.zeros(m + 1, n, dtype=b.dtype, device=dev)
        H = torch.zeros(m + 1, m, dtype=b.dtype, device=dev)
        cs = torch.zeros(m, dtype=b.dtype, device=dev)
        sn = torch.zeros(m, dtype=b.dtype, device=dev)
        g = torch.zeros(m + 1, dtype=b.dtype, device=dev)
        g[0] = beta.to(b.dtype)
        V[0] = r / torch.where(beta != 0, beta, torch.ones_like(beta))
        kk = torch.zeros((), dtype=torch.int64, device=dev)
        k = j = 0
        while j < m:
            for j in range(j, min(j + check_every, m)):  # noqa: B020 (j carries over to the next block)
                w = matvec(precond(V[j]) if precond is not None else V[j])
                h = torch.conj_physical(V[: j + 1]) @ w
                w = w - h @ V[: j + 1]
                h2 = torch.conj_physical(V[: j + 1]) @ w  # re-orthogonalise (CGS2)
                w = w - h2 @ V[: j + 1]
                hn = torch.linalg.vector_norm(w)
                bad = bad | (active & ~torch.isfinite(hn))
                active = active & torch.isfinite(hn)
                col = torch.cat([h + h2, hn.to(b.dtype).reshape(1),
                                 torch.zeros(m - j - 1, dtype=b.dtype, device=dev)])
                for i in range(j):  # apply the previous Givens rotations
                    t = cs[i] * col[i] + sn[i] * col[i + 1]
                    col[i + 1] = -torch.conj_physical(sn[i]) * col[i] + cs[i] * col[i + 1]
                    col[i] = t
                a, bb = col[j].clone(), col[j + 1].clone()
                aa = a.abs()
                den = torch.sqrt(aa * aa + bb.abs() ** 2)
                dz, az = den == 0, aa == 0
                c = torch.where(dz, 1.0, torch.where(az, 0.0, aa / torch.where(dz, 1.0, den)))
                ph = a / torch.where(az, 1.0, aa)
                s = torch.where(dz, 0.0, torch.where(az, one, ph * torch.conj_physical(bb) / torch.where(dz, 1.0, den)))
                c = c.to(b.dtype)
                cs[j], sn[j] = c, s
                col[j] = c * a + s * bb
                col[j + 1] = 0
                g[j + 1] = -torch.conj_physical(s) * g[j]
                g[j] = c * g[j]
                H[:, j] = col
                res = g[j + 1].abs()
                hist.append(torch.where(active, res / scale, nan))
                kk = kk + active.to(torch.int64)
                V[j + 1] = w / torch.where(hn > 0, hn, torch.ones_like(hn))
                active = active & ~((res <= stop) | (hn == 0))
            j += 1
            runtime.sync(dev)  # a lazy device: this block's graph ends here
            running, k = _end_block("gmres", "A v", (active, kk, bad), hist, got, real, dev, total + 1, drop_nan=True)
            hist = []
            if not running:
                break
        if k == 0:  # the restart residual met the tolerance
            return x, total, got
        total += k
        early = not running
        y = torch.linalg.solve_triangular(H[:k, :k], g[:k].unsqueeze(-1), upper=True).squeeze(-1)
        dx = y @ V[:k]
        x = x + (precond(dx) if precond is not None else dx)
        if callback is not None:
            callback(x)
    return x, total, got


@precision.computes_in("float32")
@_numpy_callback
@validate.numpy_io
def gmres(A, b, x0=None, tol=None, maxiter=100, restart=30, M=None, *, rtol=None, atol=0.0, callback=None,
          on_fail="warn", return_info=False):
    """Restarted GMRES for a general (non-symmetric) ``A x = b``.

    Parameters
    ----------
    A, b, x0, tol, rtol, atol, M, on_fail, return_info
        As in :func:`cg`; ``M`` is applied on the right (``A M y = b``,
        ``x = M y``), so the residual tested is the true one.
    callback : callable, optional
        ``callback(xk)`` after every restart cycle (SciPy's
        ``callback_type="x"``).
    maxiter : int
        Restart cycles (as in SciPy); at most ``maxiter * restart`` products.
    restart : int
        Krylov subspace dimension per cycle.

    Returns
    -------
    x : tensor, shape (n,)
    iters : int
        Matrix-vector products with ``A``.
    relres : float

    Examples
    --------
    >>> import torch, trnsolver
    >>> A = torch.tensor([[2.0, 1.0], [0.0, 3.0]], dtype=torch.float64)
    >>> x, iters, relres = trnsolver.gmres(A, torch.tensor([3.0, 3.0], dtype=torch.float64), tol=1e-12)
    >>> [round(v, 10) for v in x.tolist()]
    [1.0, 1.0]
    """
    where = "gmres"
    matvec, b, x0, tol, atol, maxiter, precond, on_fail, ri = _setup(
        where, A, b, x0, tol, atol, maxiter, M, on_fail, return_info, rtol, callback)
    restart = validate.integer(restart, "restart", where, minimum=1, maximum=validate.INDEX_MAX)
    x, it, hist = _host_values(GMRES(matvec, b, x0, tol, atol, restart, maxiter, precond, callback))
    if isinstance(it, torch.Tensor):
        return _finish_traced(matvec, b, x, it, hist, tol, atol, ri, where)
    return _finish(where, matvec, b, x, it, hist, tol, atol, on_fail, ri, where)


# =============================================================== BiCGSTAB

#: Threshold (rows): the same placeholder as CG's (one launch per iteration, two matvecs).
BICGSTAB = Op("trnsolver.bicgstab", "rows", 4096, size=_rows, describe=_describe_rows,
              schema="(" + _KRYLOV_ARGS + ")" + _KRYLOV_OUT, fake=_fake,
              doc="BiCGSTAB (dense float32 A, no M: one bicgstab_step_kernel launch per iteration)")


@BICGSTAB.lowering("torch")
def _bicgstab_torch(matvec, b, x0, tol, atol, maxiter, precond, callback=None):
    """BiCGSTAB on the host: :func:`_bicgstab_loop` on torch tensors or NumPy views of them,
    whichever was measured faster (:func:`trnsci.iterative.krylov_loop`); on a device,
    :func:`_bicgstab_device_loop`."""
    if not b.is_cpu and b.device.type != "meta":
        return _bicgstab_device_loop(matvec, b, x0, tol, atol, maxiter, precond, callback)
    return it_.krylov_loop("bicgstab", _bicgstab_loop, matvec, b, x0, tol, atol, maxiter, precond, callback)


def _bicgstab_device_loop(matvec, b, x0, tol, atol, maxiter, precond, callback, check_every=CHECK_EVERY):
    """:func:`_bicgstab_iterations` with every scalar kept on the device, as :func:`_cg_device_loop`:
    each exit of the host loop (``rho = 0``, ``rhat^H v = 0``, ``||s||`` or ``||r||`` below the
    threshold, ``omega = 0``) freezes the state on the device (the ``||s||`` exit takes
    ``x + alpha p``), and the host reads one small tensor every ``check_every`` iterations. Every
    iteration is the same sequence of operations (the first one starts from ``rho = alpha = omega = 1``
    and ``p = v = 0``, so ``p = r``); the last one also forms ``t = A s``, whose result is discarded."""
    real = b.real.dtype if b.is_complex() else b.dtype
    dev = b.device
    x = torch.zeros_like(b) if x0 is None else x0.clone()
    bnorm = torch.linalg.vector_norm(b)
    stop = torch.clamp(tol * bnorm, min=atol)
    scale = torch.where(bnorm > 0, bnorm, torch.ones_like(bnorm))
    r = b - matvec(x) if x0 is not None else b.clone()
    rn = torch.linalg.vector_norm(r)
    hist = [rn / scale]
    active = ~((rn < stop) | (rn == 0))
    runtime.sync(dev)
    rhat = r.clone()
    one = torch.ones((), dtype=b.dtype, device=dev)
    zero = torch.zeros((), dtype=b.dtype, device=dev)
    rho = alpha = omega = one
    p = torch.zeros_like(b)
    v = torch.zeros_like(b)
    its = torch.zeros((), dtype=torch.int64, device=dev)
    bad = torch.zeros((), dtype=torch.bool, device=dev)
    nan = torch.full((), math.nan, dtype=real, device=dev)
    it = iters = 0
    got: list = []
    while it < maxiter:
        for _ in range(min(check_every, maxiter - it)):
            it += 1
            its = its + active.to(torch.int64)
            rho_new = torch.vdot(rhat, r)
            go = active & (rho_new != 0)
            pn = r + ((rho_new / rho) * (alpha / omega)) * (p - omega * v)
            ph = precond(pn) if precond is not None else pn
            vn = matvec(ph)
            den = torch.vdot(rhat, vn)
            bad = bad | (go & ~torch.isfinite(den))
            go = go & torch.isfinite(den) & (den != 0)
            alpha_n = rho_new / torch.where(den != 0, den, one)
            s = r - alpha_n * vn
            sn = torch.linalg.vector_norm(s)
            half = go & ((sn < stop) | (sn == 0))
            full = go & ~half
            sh = precond(s) if precond is not None else s
            t = matvec(sh)
            tt = torch.vdot(t, t)
            omega_n = torch.where(tt != 0, torch.vdot(t, s) / torch.where(tt != 0, tt, one), zero)
            x_half = x + alpha_n * ph
            x = torch.where(half, x_half, torch.where(full, x_half + omega_n * sh, x))
            r = torch.where(full, s - omega_n * t, r)
            p, v = torch.where(full, pn, p), torch.where(full, vn, v)
            rho, alpha, omega = (torch.where(full, new, old) for new, old in
                                 ((rho_new, rho), (alpha_n, alpha), (omega_n, omega)))
            rn = torch.linalg.vector_norm(r)
            hist.append(torch.where(half, sn / scale, torch.where(full, rn / scale, nan)))
            if callback is not None:
                callback(x)
            active = full & ~((rn < stop) | (rn == 0) | (omega_n == 0))
        runtime.sync(dev)  # a lazy device: this block's graph ends here
        running, iters = _end_block("bicgstab", "rhat^H A p", (active, its, bad), hist[len(got):], got, real, dev)
        if not running:
            break
    return x, iters, [h for h in got if h == h]


def _bicgstab_loop(ops, matvec, b, x0, tol, atol, maxiter, precond, callback):
    """Right-preconditioned BiCGSTAB (van der Vorst), stopping as SciPy does (recursive
    residuals ``s`` and ``r`` below ``max(tol ||b||, atol)``). Returns ``(x, iters, history)``."""
    x, r, rn, stop, scale, hist = _start(matvec, b, x0, tol, atol, ops)
    if rn < stop or rn == 0.0:
        return x, 0, hist
    with np.errstate(all="ignore"):  # scalars overflow to Inf/NaN silently, as 0-d tensors do
        return _bicgstab_iterations(ops, matvec, b, x, r, stop, scale, hist, maxiter, precond, callback)


def _bicgstab_iterations(ops, matvec, b, x, r, stop, scale, hist, maxiter, precond, callback):
    # the scalars (rho, alpha, omega, beta) are NumPy scalars of b's dtype: each operation rounds as
    # the same operation on a 0-d torch tensor of that dtype does, at a fraction of its cost, and
    # they reach the vector updates as exact Python numbers (so the iterates are unchanged)
    sc = ops.scalar_type(b)
    py = complex if issubclass(sc, np.complexfloating) else float
    rhat = ops.copy(r)
    rho = alpha = omega = sc(1.0)
    v = ops.zeros_like(b)
    p = ops.zeros_like(b)
    it = 0
    for it in range(1, maxiter + 1):
        rho_new = sc(ops.dot(rhat, r))
        if abs(rho_new) == 0.0:
            break
        if it > 1:
            beta = (rho_new / rho) * (alpha / omega)
            p = r + py(beta) * (p - py(omega) * v)
        else:
            p = ops.copy(r)
        ph = precond(p) if precond is not None else p
        v = matvec(ph)
        den = sc(ops.dot(rhat, v))
        if not math.isfinite(abs(den)):
            raise _not_finite("bicgstab", "rhat^H A p", it)
        if abs(den) == 0.0:
            break
        alpha = rho_new / den
        s = r - py(alpha) * v
        sn = ops.norm(s)
        if sn < stop or sn == 0.0:
            x = x + py(alpha) * ph
            hist.append(sn / scale)
            if callback is not None:
                callback(x)
            break
        sh = precond(s) if precond is not None else s
        t = matvec(sh)
        tt = sc(ops.dot(t, t))
        omega = sc(ops.dot(t, s)) / tt if abs(tt) > 0 else sc(0.0)
        x = x + py(alpha) * ph + py(omega) * sh
        r = s - py(omega) * t
        rho = rho_new
        rn = ops.norm(r)
        hist.append(rn / scale)
        if callback is not None:
            callback(x)
        if rn < stop or rn == 0.0 or abs(omega) == 0.0:
            break
    return x, it, hist


@precision.computes_in("float32")
@_numpy_callback
@validate.numpy_io
def bicgstab(A, b, x0=None, tol=None, maxiter=1000, M=None, *, rtol=None, atol=0.0, callback=None,
             on_fail="warn", return_info=False):
    """BiCGSTAB for a general ``A x = b`` (right preconditioning, as SciPy).

    Parameters, returns and errors as in :func:`cg` (``A`` need not be
    symmetric), SciPy's stopping rule included: the recursive residuals
    ``s`` and ``r`` are tested, the true one checked once at the end.

    Examples
    --------
    >>> import torch, trnsolver
    >>> A = torch.tensor([[3.0, 1.0], [-1.0, 2.0]], dtype=torch.float64)
    >>> x, iters, relres = trnsolver.bicgstab(A, torch.tensor([4.0, 1.0], dtype=torch.float64), tol=1e-12)
    >>> [round(v, 10) for v in x.tolist()]
    [1.0, 1.0]
    """
    return _krylov("bicgstab", BICGSTAB, A, b, x0, tol, atol, maxiter, M, on_fail, return_info, rtol, callback)


# ================================================================= MINRES

#: Threshold (rows): the same placeholder as CG's (one launch per iteration).
MINRES = Op("trnsolver.minres", "rows", 4096, size=_rows, describe=_describe_rows,
            schema="(" + _KRYLOV_ARGS + ")" + _KRYLOV_OUT, fake=_fake,
            doc="MINRES (dense float32 A, no M: one minres_step_kernel launch per iteration)")


@MINRES.lowering("torch")
def _minres_torch(matvec, b, x0, tol, atol, maxiter, precond, callback=None, shift=0.0):
    """Preconditioned MINRES (Paige-Saunders) for Hermitian ``A``.

    The recurrence's residual estimate (in the ``M``-norm) triggers a check
    of the true residual, so convergence is never claimed from the estimate
    alone. Returns ``(x, iters, history)``. On a device, :func:`_minres_device_loop`."""
    if not b.is_cpu and b.device.type != "meta":
        return _minres_device_loop(matvec, b, x0, tol, atol, maxiter, precond, callback)
    x, r1, rn, stop, scale, hist = _start(matvec, b, x0, tol, atol)
    if rn < stop or rn == 0.0:
        return x, 0, hist
    y = precond(r1) if precond is not None else r1
    beta1 = math.sqrt(max(float(_dot(r1, y).real), 0.0))
    if beta1 == 0.0:
        return x, 0, hist
    oldb, beta, dbar, epsln, phibar = 0.0, beta1, 0.0, 0.0, beta1
    cs, sn = -1.0, 0.0
    w = torch.zeros_like(b)
    w2 = torch.zeros_like(b)
    r2 = r1
    eps = torch.finfo(b.real.dtype if b.is_complex() else b.dtype).eps
    it = 0
    for it in range(1, maxiter + 1):
        v = y / beta
        y = matvec(v)
        if it >= 2:
            y = y - (beta / oldb) * r1
        alfa = float(_dot(v, y).real)
        if not math.isfinite(alfa):
            raise _not_finite("minres", "v^H A v", it)
        y = y - (alfa / beta) * r2
        r1, r2 = r2, y
        y = precond(r2) if precond is not None else r2
        oldb = beta
        beta = math.sqrt(max(float(_dot(r2, y).real), 0.0))
        oldeps = epsln
        delta = cs * dbar + sn * alfa
        gbar = sn * dbar - cs * alfa
        epsln = sn * beta
        dbar = -cs * beta
        gamma = max(math.hypot(gbar, beta), eps)
        cs, sn = gbar / gamma, beta / gamma
        phi = cs * phibar
        phibar = sn * phibar
        w1, w2 = w2, w
        w = (v - oldeps * w1 - delta * w2) / gamma
        x = x + phi * w
        est = phibar / beta1 * scale
        hist.append(phibar / beta1 * (rn / scale))
        if callback is not None:
            callback(x)
        if est < stop or beta == 0.0:
            true = float(torch.linalg.vector_norm(b - matvec(x)))
            hist[-1] = true / scale
            if true < stop or true == 0.0 or beta == 0.0:
                break
    return x, it, hist


def _minres_device_loop(matvec, b, x0, tol, atol, maxiter, precond, callback, check_every=CHECK_EVERY):
    """:func:`_minres_torch` with every scalar kept on the device, as :func:`_cg_device_loop`: an
    estimate below the threshold (or ``beta = 0``) freezes the state on the device, and the host reads
    one small tensor every ``check_every`` iterations. A frozen state is then confirmed with the true
    residual ``b - A x`` (one more read, the host loop's rule); an unconfirmed one resumes, so the
    iterates, the iteration count and the history equal the host loop's up to rounding. Each slot of a
    block is the same sequence of operations (the first iteration has ``oldb = 0``)."""
    real = b.real.dtype if b.is_complex() else b.dtype
    dev = b.device

    def rdot(u, w):
        d = torch.vdot(u, w)
        return d.real if d.is_complex() else d

    def safe(t):
        return torch.where(t != 0, t, torch.ones_like(t))

    x = torch.zeros_like(b) if x0 is None else x0.clone()
    bnorm = torch.linalg.vector_norm(b)
    stop = torch.clamp(tol * bnorm, min=atol)
    scale = torch.where(bnorm > 0, bnorm, torch.ones_like(bnorm))
    r1 = b - matvec(x) if x0 is not None else b.clone()
    rn = torch.linalg.vector_norm(r1)
    hist = [rn / scale]
    y = precond(r1) if precond is not None else r1
    beta1 = torch.sqrt(torch.clamp(rdot(r1, y), min=0.0))
    active = ~((rn < stop) | (rn == 0) | (beta1 == 0))
    runtime.sync(dev)
    zero = torch.zeros((), dtype=real, device=dev)
    nan = torch.full((), math.nan, dtype=real, device=dev)
    oldb, beta, dbar, epsln, phibar = zero, beta1, zero, zero, beta1
    cs, sn = -torch.ones((), dtype=real, device=dev), zero
    w = torch.zeros_like(b)
    w2 = torch.zeros_like(b)
    r2 = r1
    eps = torch.finfo(real).eps
    its = torch.zeros((), dtype=torch.int64, device=dev)
    bad = torch.zeros((), dtype=torch.bool, device=dev)
    held = torch.zeros((), dtype=torch.bool, device=dev)  # frozen by the estimate (or beta = 0), to confirm
    iters = 0
    got: list = []
    while iters < maxiter:
        for _ in range(min(check_every, maxiter - iters)):
            was = active
            v = y / safe(beta)
            yn = matvec(v)
            yn = yn - torch.where(oldb != 0, beta / safe(oldb), zero) * r1  # the first iteration: oldb = 0
            alfa = rdot(v, yn)
            bad = bad | (active & ~torch.isfinite(alfa))
            ok = active & torch.isfinite(alfa)
            yn = yn - (alfa / safe(beta)) * r2
            nr1, nr2 = r2, yn
            ny = precond(nr2) if precond is not None else nr2
            nbeta = torch.sqrt(torch.clamp(rdot(nr2, ny), min=0.0))
            delta = cs * dbar + sn * alfa
            gbar = sn * dbar - cs * alfa
            nepsln = sn * nbeta
            ndbar = -cs * nbeta
            gamma = torch.clamp(torch.hypot(gbar, nbeta), min=eps)
            ncs, nsn = gbar / gamma, nbeta / gamma
            phi = ncs * phibar
            nphibar = nsn * phibar
            nw = (v - epsln * w2 - delta * w) / gamma
            nx = x + phi * nw
            x, r1, r2, y, w2, w = (torch.where(ok, a, o) for a, o in
                                   ((nx, x), (nr1, r1), (nr2, r2), (ny, y), (w, w2), (nw, w)))
            oldb, beta, dbar, epsln, phibar, cs, sn = (
                torch.where(ok, a, o) for a, o in ((beta, oldb), (nbeta, beta), (ndbar, dbar), (nepsln, epsln),
                                                   (nphibar, phibar), (ncs, cs), (nsn, sn)))
            hist.append(torch.where(ok, phibar / safe(beta1) * (rn / scale), nan))
            its = its + was.to(torch.int64)
            if callback is not None:
                callback(x)
            hit = ok & ((phibar / safe(beta1) * scale < stop) | (beta == 0))
            held = held | hit
            active = ok & ~hit
        runtime.sync(dev)  # a lazy device: this block's graph ends here
        running, iters, frozen = _end_block("minres", "v^H A v", (active, its, bad, held), hist[len(got):], got,
                                            real, dev)
        if frozen:  # the host loop's confirmation: the true residual (one more read)
            true = torch.linalg.vector_norm(b - matvec(x)).to(real)
            rel, met = torch.stack([true / scale, ((true < stop) | (true == 0) | (beta == 0)).to(real)]).tolist()
            got[max(i for i, h in enumerate(got) if h == h)] = rel
            if met:
                break
            active = torch.ones((), dtype=torch.bool, device=dev)
            held = torch.zeros((), dtype=torch.bool, device=dev)
        elif not running:
            break
    return x, iters, [h for h in got if h == h]


@precision.computes_in("float32")
@_numpy_callback
@validate.numpy_io
def minres(A, b, x0=None, tol=None, maxiter=1000, M=None, *, rtol=None, atol=0.0, callback=None,
           on_fail="warn", return_info=False):
    """MINRES for Hermitian (possibly indefinite) ``A x = b``.

    Parameters, returns and errors as in :func:`cg`; ``M`` must be
    Hermitian positive definite. The recurrence's residual estimate
    triggers a check of the true residual, which must meet the tolerance
    too before MINRES stops.

    Examples
    --------
    >>> import torch, trnsolver
    >>> A = torch.tensor([[1.0, 2.0], [2.0, -1.0]], dtype=torch.float64)   # indefinite
    >>> x, iters, relres = trnsolver.minres(A, torch.tensor([3.0, 1.0], dtype=torch.float64), tol=1e-12)
    >>> [round(v, 10) for v in x.tolist()]
    [1.0, 1.0]
    """
    return _krylov("minres", MINRES, A, b, x0, tol, atol, maxiter, M, on_fail, return_info, rtol, callback)


# ========================================================= preconditioners

def _diag_of(A, where):
    A = validate.tensor(A, "A", where, _KRYLOV_DTYPES)
    if A.layout != torch.strided:
        A = A.to_dense()
    if A.dim() != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"{where}: A must be a square matrix, got shape {tuple(A.shape)}")
    return A


class _Diagonal:
    """``r -> r / d`` (callable; ``solve``/``matvec`` aliases)."""

    def __init__(self, inv_d):
        self.inv_d = inv_d

    def __call__(self, r):
        return r * self.inv_d

    solve = matvec = __call__


@precision.computes_in("float32")
@validate.numpy_io
def jacobi_preconditioner(A):
    """Jacobi (diagonal) preconditioner ``M r = r / diag(A)``.

    Returns
    -------
    M : callable ``r -> r / diag(A)`` (also has ``solve``/``matvec``)

    Raises
    ------
    ValueError
        A zero (or non-finite) diagonal entry, named by index.

    Examples
    --------
    >>> import torch, trnsolver
    >>> M = trnsolver.jacobi_preconditioner(torch.diag(torch.tensor([2.0, 4.0])))
    >>> M(torch.tensor([2.0, 2.0])).tolist()
    [1.0, 0.5]
    """
    where = "jacobi_preconditioner"
    A = _diag_of(A, where)
    d = A.diagonal().clone()
    bad = (d == 0) | ~torch.isfinite(d)
    if bool(bad.any()):
        raise ValueError(f"{where}: A[{int(torch.nonzero(bad)[0])}, {int(torch.nonzero(bad)[0])}] "
                         "is zero or not finite")
    return _Diagonal(1.0 / d)


class _BlockJacobi:
    def __init__(self, Lb, L_tail, nb, bs):
        self.Lb, self.L_tail, self.nb, self.bs = Lb, L_tail, nb, bs

    def __call__(self, r):
        k = self.nb * self.bs
        head = torch.cholesky_solve(r[:k].reshape(self.nb, self.bs, 1), self.Lb).reshape(k)
        if self.L_tail is None:
            return head
        tail = torch.cholesky_solve(r[k:].unsqueeze(-1), self.L_tail).squeeze(-1)
        return torch.cat([head, tail])

    solve = matvec = __call__


@precision.computes_in("float32")
@validate.numpy_io
def block_jacobi_preconditioner(A, block_size=16):
    """Block-Jacobi preconditioner: exact solves with the diagonal blocks of ``A``.

    Parameters
    ----------
    A : tensor, (n, n), Hermitian positive definite
    block_size : int
        Diagonal block size (the last block may be smaller). All full blocks
        are factored and solved as one batch.

    Returns
    -------
    M : callable ``r -> blockdiag(A)^{-1} r``

    Raises
    ------
    LinAlgError
        A diagonal block is not positive definite (named by its rows).

    Examples
    --------
    >>> import torch, trnsolver
    >>> A = torch.tensor([[4.0, 1.0, 0.0], [1.0, 3.0, 0.0], [0.0, 0.0, 2.0]], dtype=torch.float64)
    >>> M = trnsolver.block_jacobi_preconditioner(A, block_size=2)
    >>> [round(v, 10) for v in M(A @ torch.ones(3, dtype=torch.float64)).tolist()]
    [1.0, 1.0, 1.0]
    """
    where = "block_jacobi_preconditioner"
    A = _diag_of(A, where)
    bs = validate.integer(block_size, "block_size", where, minimum=1)
    n = A.shape[0]
    bs = min(bs, max(n, 1))
    nb = n // bs
    k = nb * bs
    blocks = A[:k, :k].reshape(nb, bs, nb, bs).diagonal(dim1=0, dim2=2).permute(2, 0, 1)
    Lb, info = torch.linalg.cholesky_ex(blocks)
    if bool((info != 0).any()):
        i = int(torch.nonzero(info)[0])
        raise la.LinAlgError(f"{where}: diagonal block rows [{i * bs}:{(i + 1) * bs}] is not positive definite",
                             info=int(info[i]))
    L_tail = None
    if k < n:
        L_tail, info = torch.linalg.cholesky_ex(A[k:, k:])
        if int(info):
            raise la.LinAlgError(f"{where}: diagonal block rows [{k}:{n}] is not positive definite", info=int(info))
    return _BlockJacobi(Lb, L_tail, nb, bs)


class _SSOR:
    def __init__(self, lower, upper, d, omega):
        self.lower, self.upper, self.d, self.omega = lower, upper, d, omega

    def __call__(self, r):
        w = self.omega
        y = torch.linalg.solve_triangular(self.lower, r.unsqueeze(-1), upper=False)
        y = y * (self.d / w).unsqueeze(-1) * (2 - w)
        return torch.linalg.solve_triangular(self.upper, y, upper=True).squeeze(-1)

    solve = matvec = __call__


@precision.computes_in("float32")
@validate.numpy_io
def ssor_preconditioner(A, omega=1.0):
    """SSOR preconditioner: ``M = (D/w + L) (w / (2 - w)) D^{-1} (D/w + U)``, applied as ``M^{-1} r``.

    Parameters
    ----------
    A : tensor (n, n), with ``A = L + D + U`` (strict lower, diagonal, strict upper)
    omega : float in (0, 2)
        Relaxation; ``omega = 1`` is symmetric Gauss-Seidel. Symmetric
        positive definite when ``A`` is, so it suits CG and MINRES.

    Returns
    -------
    M : callable ``r -> M^{-1} r`` (two triangular solves)

    Examples
    --------
    >>> import torch, trnsolver
    >>> M = trnsolver.ssor_preconditioner(torch.diag(torch.tensor([2.0, 4.0], dtype=torch.float64)))
    >>> M(torch.tensor([2.0, 2.0], dtype=torch.float64)).tolist()
    [1.0, 0.5]
    """
    where = "ssor_preconditioner"
    A = _diag_of(A, where)
    w = validate.scalar(omega, "omega", where, complex_ok=False)
    if not 0 < w < 2:
        raise ValueError(f"{where}: omega must be in (0, 2), got {omega!r}")
    d = A.diagonal().clone()
    if bool(((d == 0) | ~torch.isfinite(d)).any()):
        raise ValueError(f"{where}: A has a zero or non-finite diagonal entry")
    lower = A.tril(-1) + torch.diag(d / w)
    upper = A.triu(1) + torch.diag(d / w)
    return _SSOR(lower, upper, d, float(w))


# ------------------------------------------------ operator boundaries and backwards

def _implicit_backward(op, hermitian: bool):
    """The derivative of the solution ``x = A^{-1} b`` (implicit differentiation at convergence):
    ``db = A^{-H} g``, solved by the same solver as calls of its operator (so under a kernel backend the
    backward runs kernels too), and ``dA = -db x^H`` (on A's pattern for a CSR matrix)."""
    def backward(inputs, output, grad, needs):
        A, cols, ptrs, b, x0, tol, atol, maxiter, kind, P1, P2, *rest = inputs
        g = grad[0]
        out = [None] * len(inputs)
        if g is None or not (needs[0] or needs[3]):
            return tuple(out)
        x = output[0]
        if hermitian:
            AH, colsH, ptrsH, P1H = A, cols, ptrs, P1
        else:
            if cols is None:
                AH, colsH, ptrsH = A.mH.resolve_conj().contiguous(), None, None
            else:
                AH, colsH, ptrsH = _csr_adjoint(A, cols, ptrs, b.shape[0])
            P1H = P1.conj().resolve_conj() if kind == "jacobi" else P1
        g = g.contiguous()
        gb = op.operator(AH, colsH, ptrsH, g, None, tol, atol, maxiter, kind, P1H, P2, *rest)[0]
        # once more from that solution: a Krylov breakdown on a structured g (a unit vector) stops a solve
        # early, and a restart from where it stopped gets past it; a converged solve returns at once
        gb = op.operator(AH, colsH, ptrsH, g, gb, tol, atol, maxiter, kind, P1H, P2, *rest)[0]
        if needs[3]:
            out[3] = gb
        if needs[0]:
            if cols is None:
                out[0] = -torch.outer(gb, x.conj())
            else:
                rows = _csr_rows(ptrs, A.shape[0])
                out[0] = -(gb[rows] * x[cols.long()].conj())
        return tuple(out)
    return backward


for _op, _herm in ((CG, True), (MINRES, True), (BICGSTAB, False), (GMRES, False)):
    _op.boundary(_gmres_to_operator if _op is GMRES else _to_operator, _from_operator, _result)
    _op.backward(_implicit_backward(_op, _herm),
                 formula=("db = A^{-1} g (A Hermitian); dA = -db x^H, on A's pattern for a CSR matrix (implicit "
                          "differentiation of A x = b: exact at convergence)" if _herm else
                          "db = A^{-H} g (A^H as a dense transpose or CSR arrays); dA = -db x^H, on A's pattern for "
                          "a CSR matrix (implicit differentiation of A x = b: exact at convergence)"),
                 runs=f"two `trnsolver.{_op.name.split('.')[1]}` calls on the adjoint system (the second restarts from "
                      "the first's solution)")
del _op, _herm
