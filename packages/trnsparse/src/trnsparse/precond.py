"""Preconditioners: ILU(0), IC(0) and Jacobi.

Each returns a :class:`Preconditioner`: a linear operator ``M`` with
``M ~= inv(A)`` (SciPy's ``M`` convention), ``.shape``, ``.dtype`` and
``M(r) == M.solve(r) == M.matvec(r) == M @ r`` for 1-D ``r`` and 2-D ``R``
(columns). trnsolver's Krylov solvers and trnsparse's ``cg_bsr`` accept it.
"""

from __future__ import annotations

import cmath
from collections.abc import Callable

import numpy as np
import torch

from trnsci import validate

from . import arrays
from .formats import CSRMatrix, as_sparse
from .ops import SPSV


class Preconditioner:
    """A linear operator approximating ``inv(A)``.

    Attributes
    ----------
    shape : (n, n)
    dtype : torch dtype of the factors
    kind : "ilu0", "ic0" or "jacobi"
    L, U : CSRMatrix factors (ILU(0): unit-lower L and upper U with
        ``L @ U ~= A``; IC(0): lower L with ``L @ L^H ~= A``, ``U = L^H``);
        ``None`` for Jacobi.
    diagonal : the diagonal used by Jacobi (``None`` otherwise)
    """

    def __init__(self, kind: str, shape, dtype, apply: Callable, L=None, U=None, diagonal=None):
        if not isinstance(shape, (tuple, list, torch.Size)) or len(shape) != 2:
            raise TypeError(f"Preconditioner: shape must be a pair (n, n), got {shape!r}")
        self.kind, self.shape, self.dtype = kind, tuple(shape), dtype
        self._apply, self.L, self.U, self.diagonal = apply, L, U, diagonal

    def __repr__(self) -> str:
        return f"Preconditioner(kind={self.kind!r}, shape={self.shape}, dtype={str(self.dtype).replace('torch.', '')})"

    def __call__(self, r):
        """``z = M r ~= A^{-1} r`` for (n,) or (n, k) ``r`` (NumPy in -> NumPy out)."""
        where = f"{self.kind} preconditioner"
        is_np = isinstance(r, np.ndarray)
        t = validate.tensor(r, "r", where)
        if t.dtype != self.dtype:
            raise TypeError(f"{where}: r has dtype {str(t.dtype).replace('torch.', '')} but the preconditioner "
                            f"has {str(self.dtype).replace('torch.', '')}")
        validate.ndim(t, "r", (1, 2), where)
        if t.shape[0] != self.shape[0]:
            raise ValueError(f"{where}: r must have {self.shape[0]} rows, got shape {tuple(t.shape)}")
        z = self._apply(t)
        return z.detach().cpu().numpy() if is_np else z

    solve = __call__
    matvec = __call__
    __matmul__ = __call__


def _prepare(A, where):
    A = as_sparse(A, "A", where).to_csr().sorted_indices()
    m, n = A.shape
    if m != n:
        raise ValueError(f"{where}: A must be square, got shape {A.shape}")
    return A


def _diag_positions(ptr, cols, n, where):
    pos = [-1] * n
    for i in range(n):
        for p in range(ptr[i], ptr[i + 1]):
            if cols[p] == i:
                pos[i] = p
                break
        if pos[i] < 0:
            raise ValueError(f"{where}: A has no stored diagonal entry in row {i}")
    return pos


def ilu0(A) -> Preconditioner:
    """Incomplete LU factorization with zero fill-in: ``L U ~= A`` on A's pattern.

    Parameters
    ----------
    A : square sparse matrix with every diagonal entry stored (no pivoting)

    Returns
    -------
    Preconditioner with ``M(r) = U^{-1} L^{-1} r``; ``M.L`` (unit lower,
    stored without its diagonal) and ``M.U`` (upper with diagonal) as CSR.

    Raises
    ------
    ValueError
        A not square, a missing diagonal entry, or a zero pivot.

    Notes
    -----
    Where A's pattern is closed under elimination (no fill-in would occur,
    e.g. tridiagonal matrices) ILU(0) is the exact LU factorization, and
    equals SciPy's ``spilu(A, fill_factor=1, drop_tol=0)`` without
    pivoting. The factorization loops over the stored entries in Python
    (run once per matrix); applying it is two sparse triangular solves
    through :func:`spsv`'s op (``csr_spsv_kernel`` under a kernel backend).

    Examples
    --------
    >>> import torch, trnsparse
    >>> A = trnsparse.from_dense(torch.tensor([[4., 1.], [1., 3.]], dtype=torch.float64))
    >>> M = trnsparse.ilu0(A)
    >>> M(torch.tensor([5., 4.], dtype=torch.float64))
    tensor([1., 1.], dtype=torch.float64)
    """
    where = "ilu0"
    A = _prepare(A, where)
    n = A.shape[0]
    ptr = A.row_ptrs.tolist()
    cols = A.col_indices.tolist()
    vals = A.values.detach().cpu().tolist()
    dpos = _diag_positions(ptr, cols, n, where)
    for i in range(n):
        s, e = ptr[i], ptr[i + 1]
        where_col = {cols[p]: p for p in range(s, e)}
        for p in range(s, dpos[i]):
            k = cols[p]
            piv = vals[dpos[k]]
            if piv == 0:
                raise ValueError(f"{where}: zero pivot at row {k}")
            aik = vals[p] / piv
            vals[p] = aik
            for q in range(dpos[k] + 1, ptr[k + 1]):
                pp = where_col.get(cols[q])
                if pp is not None:
                    vals[pp] -= aik * vals[q]
        if vals[dpos[i]] == 0:
            raise ValueError(f"{where}: zero pivot at row {i}")
    F = torch.tensor(vals, dtype=A.dtype, device=A.device)
    rows = A.row_indices
    lo, up = A.col_indices < rows, A.col_indices >= rows
    L = CSRMatrix._make(F[lo], A.col_indices[lo], arrays.ptrs_from_sorted(rows[lo], n), (n, n))
    U = CSRMatrix._make(F[up], A.col_indices[up], arrays.ptrs_from_sorted(rows[up], n), (n, n))

    def apply(r):
        # two triangular solves through spsv's op (csr_spsv_kernel under a kernel backend; L, U cache its layout)
        y = SPSV(L.values, L.col_indices, L.row_ptrs, n, r, True, True, False, L)
        return SPSV(U.values, U.col_indices, U.row_ptrs, n, y, False, False, False, U)

    return Preconditioner("ilu0", (n, n), A.dtype, apply, L=L, U=U)


def ic0(A) -> Preconditioner:
    """Incomplete Cholesky with zero fill-in: ``L L^H ~= A`` on the lower triangle of A's pattern.

    Parameters
    ----------
    A : Hermitian positive definite sparse matrix (its lower triangle is read)

    Returns
    -------
    Preconditioner with ``M(r) = L^{-H} L^{-1} r``; ``M.L`` lower CSR.

    Raises
    ------
    ValueError
        Not square, missing diagonal, or a non-positive pivot (the
        incomplete factorization broke down).

    Notes
    -----
    Without fill-in (e.g. tridiagonal A) IC(0) is the exact Cholesky factor.

    Examples
    --------
    >>> import torch, trnsparse
    >>> A = trnsparse.from_dense(torch.tensor([[4., 2.], [2., 5.]], dtype=torch.float64))
    >>> trnsparse.ic0(A).L.to_dense()
    tensor([[2., 0.],
            [1., 2.]], dtype=torch.float64)
    """
    where = "ic0"
    A = _prepare(A, where)
    n = A.shape[0]
    rows_t = A.row_indices
    lo = A.col_indices <= rows_t
    Lc = CSRMatrix._make(A.values[lo], A.col_indices[lo], arrays.ptrs_from_sorted(rows_t[lo], n), (n, n))
    ptr = Lc.row_ptrs.tolist()
    cols = Lc.col_indices.tolist()
    vals = Lc.values.detach().cpu().tolist()
    cplx = A.dtype.is_complex
    rowd: list[dict] = []
    for i in range(n):
        s, e = ptr[i], ptr[i + 1]
        if e == s or cols[e - 1] != i:
            raise ValueError(f"{where}: A has no stored diagonal entry in row {i}")
        d: dict = {}
        for p in range(s, e - 1):
            j = cols[p]
            rj = rowd[j]
            acc = vals[p]
            small, big = (d, rj) if len(d) < len(rj) else (rj, d)
            for kk in small:
                if kk < j and kk in big:
                    acc -= d[kk] * (rj[kk].conjugate() if cplx else rj[kk])
            vals[p] = acc / rj[j]
            d[j] = vals[p]
        piv = vals[e - 1] - sum((abs(x) ** 2 for x in d.values()), 0.0)
        piv_r = piv.real if cplx else piv
        if not piv_r > 0:
            raise ValueError(f"{where}: A is not positive definite enough for IC(0): pivot {piv_r!r} at row {i}")
        vals[e - 1] = cmath.sqrt(piv_r) if cplx else piv_r ** 0.5
        d[i] = vals[e - 1]
        rowd.append(d)
    F = torch.tensor(vals, dtype=A.dtype, device=A.device)
    L = CSRMatrix._make(F, Lc.col_indices, Lc.row_ptrs, (n, n))
    Lh = CSRMatrix._make(*arrays.csr_transpose(F.conj() if cplx else F, Lc.col_indices, Lc.row_ptrs, (n, n)), (n, n))

    def apply(r):
        y = SPSV(L.values, L.col_indices, L.row_ptrs, n, r, True, False, False, L)
        return SPSV(Lh.values, Lh.col_indices, Lh.row_ptrs, n, y, False, False, False, Lh)

    return Preconditioner("ic0", (n, n), A.dtype, apply, L=L, U=Lh)


def jacobi(A) -> Preconditioner:
    """Jacobi (diagonal) preconditioner ``M = diag(A)^{-1}``.

    Raises
    ------
    ValueError
        Not square, or a zero (or unstored) diagonal entry.

    Examples
    --------
    >>> import torch, trnsparse
    >>> M = trnsparse.jacobi(trnsparse.from_dense(torch.tensor([[2., 1.], [0., 4.]])))
    >>> M(torch.tensor([2., 2.]))
    tensor([1.0000, 0.5000])
    """
    where = "jacobi"
    A = _prepare(A, where)
    n = A.shape[0]
    rows = A.row_indices
    dm = rows == A.col_indices
    d = torch.zeros(n, dtype=A.dtype, device=A.device).index_add(0, rows[dm], A.values[dm].detach())
    zero = torch.nonzero(d == 0)
    if zero.numel():
        raise ValueError(f"{where}: the diagonal of A is zero (or not stored) in row {int(zero[0])}")
    inv = 1.0 / d
    return Preconditioner("jacobi", (n, n), A.dtype, lambda r: r * inv if r.dim() == 1 else r * inv[:, None],
                          diagonal=d)
