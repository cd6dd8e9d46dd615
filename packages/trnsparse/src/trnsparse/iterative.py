"""Iterative solvers on BSR matrices: CG, Chebyshev, Richardson, power iteration.

The matrix-vector product is :func:`trnsparse.bsr_spmm` (one tile product
per stored block), so these are the host loops the fixed-iteration device
kernels will replace. Any trnsparse format is accepted and tiled with
``block_size=128`` when it is not BSR already.
"""

from __future__ import annotations

import math

import torch

from trnsci import validate

from .formats import BSRMatrix, as_sparse
from .ops import BSR_SPMM, _dense


def _bsr(A, where) -> BSRMatrix:
    A = as_sparse(A, "A", where)
    if not isinstance(A, BSRMatrix):
        A = A.to_bsr(128)
    return A


def _square(A, where):
    if A.shape[0] != A.shape[1]:
        raise ValueError(f"{where}: A must be square, got shape {A.shape}")


def _mv(A: BSRMatrix):
    """x -> A @ x through the BSR SpMM operation (its kernel where dispatch picks one)."""
    return lambda x: BSR_SPMM(A.blocks, A.block_col_indices, A.block_row_ptrs, A.shape, A.block_size, x, A)


def _rhs(A, b, where):
    b = _dense(b, "b", where, 1, A.dtype, A.device)
    if b.shape[0] != A.shape[0]:
        raise ValueError(f"{where}: b must have {A.shape[0]} entries (A has shape {A.shape}), got {tuple(b.shape)}")
    return b


def _x0(A, x0, b, where):
    if x0 is None:
        return torch.zeros_like(b)
    x0 = _dense(x0, "x0", where, 1, A.dtype, A.device)
    if x0.shape != b.shape:
        raise ValueError(f"{where}: x0 must have shape {tuple(b.shape)}, got {tuple(x0.shape)}")
    return x0.clone()


def bsr_diagonal(A) -> torch.Tensor:
    """The main diagonal of a BSR matrix (length ``min(m, n)``), read from its diagonal tiles.

    Examples
    --------
    >>> import torch, trnsparse
    >>> A = trnsparse.BSRMatrix.from_dense(torch.diag(torch.tensor([1., 2., 3.])), block_size=2)
    >>> trnsparse.bsr_diagonal(A)
    tensor([1., 2., 3.])
    """
    A = _bsr(A, "bsr_diagonal")
    m, n = A.shape
    b = A.block_size
    nd = min(A.n_block_rows, A.n_block_cols)
    out = torch.zeros(max(nd, 0), b, dtype=A.dtype, device=A.device)
    brow = A.block_row_indices
    on = brow == A.block_col_indices
    if bool(on.any()):
        out = out.index_put((brow[on],), torch.diagonal(A.blocks[on], dim1=1, dim2=2))
    return out.reshape(-1)[:min(m, n)]


def jacobi_preconditioner_bsr(A):
    """Jacobi preconditioner of a BSR matrix: ``M(r) = r / diag(A)``.

    Returns a :class:`trnsparse.Preconditioner` (callable, SciPy's ``M ~= inv(A)``).

    Raises
    ------
    ValueError
        A zero diagonal entry.

    Examples
    --------
    >>> import torch, trnsparse
    >>> A = trnsparse.BSRMatrix.from_dense(torch.diag(torch.tensor([2., 4.])), block_size=2)
    >>> trnsparse.jacobi_preconditioner_bsr(A)(torch.ones(2))
    tensor([0.5000, 0.2500])
    """
    from .precond import Preconditioner

    where = "jacobi_preconditioner_bsr"
    A = _bsr(A, where)
    _square(A, where)
    d = bsr_diagonal(A)
    zero = torch.nonzero(d == 0)
    if zero.numel():
        raise ValueError(f"{where}: the diagonal of A is zero in row {int(zero[0])}")
    inv = 1.0 / d
    return Preconditioner("jacobi", A.shape, A.dtype, lambda r: r * inv if r.dim() == 1 else r * inv[:, None],
                          diagonal=d)


def _precond(M, A, where):
    if M is None:
        return None
    if callable(M):
        return M
    if isinstance(M, torch.Tensor):
        M = _dense(M, "M", where, 2, A.dtype, A.device)
        if tuple(M.shape) != A.shape:
            raise ValueError(f"{where}: M must have shape {A.shape}, got {tuple(M.shape)}")
        return lambda r: M @ r
    raise TypeError(f"{where}: M must be a callable, a Preconditioner or a dense tensor, got {type(M).__name__}")


def _tol(tol, where):
    t = validate.scalar(tol, "tol", where, complex_ok=False)
    if not t >= 0:
        raise ValueError(f"{where}: tol must be >= 0, got {tol!r}")
    return float(t)


def cg_bsr(A, b, x0=None, tol: float = 1e-6, max_iter: int = 1000, M=None):
    """Preconditioned conjugate gradients for ``A x = b`` (A Hermitian positive definite).

    Parameters
    ----------
    A : BSRMatrix (n, n) (other formats are tiled)
    b : (n,) tensor
    x0 : (n,) tensor, optional initial guess (default zeros)
    tol : stop when ``||b - A x|| / ||b|| < tol``
    max_iter : iteration cap
    M : callable ``M(r) ~= A^{-1} r`` (e.g. :func:`jacobi`, :func:`ic0`), or a dense matrix

    Returns
    -------
    (x, iterations, relative_residual)

    Examples
    --------
    >>> import torch, trnsparse
    >>> A = trnsparse.BSRMatrix.from_dense(torch.tensor([[4., 1.], [1., 3.]], dtype=torch.float64), block_size=2)
    >>> x, it, res = trnsparse.cg_bsr(A, torch.tensor([1., 2.], dtype=torch.float64), tol=1e-12)
    >>> torch.allclose(x, torch.tensor([1/11, 7/11], dtype=torch.float64)), it
    (True, 2)
    """
    where = "cg_bsr"
    A = _bsr(A, where)
    _square(A, where)
    b = _rhs(A, b, where)
    x = _x0(A, x0, b, where)
    tol = _tol(tol, where)
    max_iter = validate.integer(max_iter, "max_iter", where, minimum=0, maximum=validate.INDEX_MAX)
    pre = _precond(M, A, where)
    mv = _mv(A)
    bn = float(torch.linalg.vector_norm(b))
    if bn == 0:
        return torch.zeros_like(b), 0, 0.0
    r = b - mv(x)
    rel = float(torch.linalg.vector_norm(r)) / bn
    if rel < tol:
        return x, 0, rel
    z = pre(r) if pre else r
    p = z.clone()
    rz = torch.vdot(r, z)
    for k in range(max_iter):
        Ap = mv(p)
        pAp = torch.vdot(p, Ap)
        if pAp == 0:
            return x, k, rel
        a = rz / pAp
        x = x + a * p
        r = r - a * Ap
        rel = float(torch.linalg.vector_norm(r)) / bn
        if rel < tol:
            return x, k + 1, rel
        z = pre(r) if pre else r
        rz_new = torch.vdot(r, z)
        p = z + (rz_new / rz) * p
        rz = rz_new
    return x, max_iter, rel


def chebyshev_coeffs(lam_min: float, lam_max: float, K: int):
    """Step coefficients of K Chebyshev iterations for a spectrum in ``[lam_min, lam_max]``.

    Returns ``(alpha, beta)``, float64 tensors of length K, such that

        x_{k+1} = x_k + alpha[k] * (b - A x_k) + beta[k] * (x_k - x_{k-1})

    makes the error polynomial after K steps the scaled Chebyshev
    polynomial ``T_K((theta - t) / delta) / T_K(theta / delta)`` with
    ``theta = (lam_max + lam_min) / 2``, ``delta = (lam_max - lam_min) / 2``.
    From the three-term recurrence of ``T_k``: ``alpha[0] = 1/theta``,
    ``rho_0 = delta/theta``, ``rho_k = 1 / (2 theta/delta - rho_{k-1})``,
    ``alpha[k] = 2 rho_k / delta``, ``beta[k] = rho_k rho_{k-1}``.

    Examples
    --------
    >>> import trnsparse
    >>> a, b = trnsparse.chebyshev_coeffs(1.0, 3.0, 3)
    >>> [round(x, 6) for x in a.tolist()], [round(x, 6) for x in b.tolist()]
    ([0.5, 0.571429, 0.538462], [0.0, 0.142857, 0.076923])
    """
    return _chebyshev_coeffs(lam_min, lam_max, K, "chebyshev_coeffs")


def _chebyshev_coeffs(lam_min, lam_max, K, where):
    lo = validate.scalar(lam_min, "lam_min", where, complex_ok=False)
    hi = validate.scalar(lam_max, "lam_max", where, complex_ok=False)
    K = validate.integer(K, "K", where, minimum=0, maximum=validate.INDEX_MAX)
    if not (math.isfinite(lo) and math.isfinite(hi) and 0 < lo <= hi):
        raise ValueError(f"{where}: need 0 < lam_min <= lam_max (finite), got lam_min={lam_min!r}, "
                         f"lam_max={lam_max!r}")
    theta, delta = (hi + lo) / 2.0, (hi - lo) / 2.0
    alpha = torch.zeros(K, dtype=torch.float64)
    beta = torch.zeros(K, dtype=torch.float64)
    if K == 0:
        return alpha, beta
    alpha[0] = 1.0 / theta
    if delta == 0:
        alpha[:] = 1.0 / theta
        return alpha, beta
    sigma = theta / delta
    rho_prev = 1.0 / sigma
    for k in range(1, K):
        rho = 1.0 / (2.0 * sigma - rho_prev)
        alpha[k] = 2.0 * rho / delta
        beta[k] = rho * rho_prev
        rho_prev = rho
    return alpha, beta


def chebyshev_bsr(A, b, lam_min: float, lam_max: float, K: int = 50, x0=None):
    """K Chebyshev iterations for ``A x = b`` (A symmetric positive definite, spectrum in the bounds).

    No inner products inside the loop: every coefficient comes from
    :func:`chebyshev_coeffs` up front.

    Returns
    -------
    (x, K, relative_residual)

    Examples
    --------
    >>> import torch, trnsparse
    >>> A = trnsparse.BSRMatrix.from_dense(torch.diag(torch.tensor([1., 2., 3.], dtype=torch.float64)), block_size=2)
    >>> x, K, res = trnsparse.chebyshev_bsr(A, torch.ones(3, dtype=torch.float64), 1.0, 3.0, K=30)
    >>> res < 1e-10
    True
    """
    where = "chebyshev_bsr"
    A = _bsr(A, where)
    _square(A, where)
    b = _rhs(A, b, where)
    x = _x0(A, x0, b, where)
    alpha, beta = _chebyshev_coeffs(lam_min, lam_max, K, where)
    mv = _mv(A)
    x_prev = x
    for k in range(len(alpha)):
        x_new = x + float(alpha[k]) * (b - mv(x))
        if k:
            x_new = x_new + float(beta[k]) * (x - x_prev)
        x_prev, x = x, x_new
    return x, len(alpha), _relres(mv, x, b)


def _relres(mv, x, b):
    bn = float(torch.linalg.vector_norm(b))
    return float(torch.linalg.vector_norm(b - mv(x))) / bn if bn else 0.0


def richardson_bsr(A, b, omega: float, K: int = 100, x0=None):
    """K Richardson steps ``x <- x + omega (b - A x)``; converges for ``0 < omega < 2 / lam_max``.

    Returns
    -------
    (x, K, relative_residual)

    Examples
    --------
    >>> import torch, trnsparse
    >>> A = trnsparse.BSRMatrix.from_dense(torch.eye(2, dtype=torch.float64) * 2, block_size=2)
    >>> trnsparse.richardson_bsr(A, torch.ones(2, dtype=torch.float64), omega=0.5, K=1)[0]
    tensor([0.5000, 0.5000], dtype=torch.float64)
    """
    where = "richardson_bsr"
    A = _bsr(A, where)
    _square(A, where)
    b = _rhs(A, b, where)
    x = _x0(A, x0, b, where)
    w = validate.scalar(omega, "omega", where, complex_ok=False)
    K = validate.integer(K, "K", where, minimum=0, maximum=validate.INDEX_MAX)
    mv = _mv(A)
    for _ in range(K):
        x = x + w * (b - mv(x))
    return x, K, _relres(mv, x, b)


def power_iteration_bsr(A, v0=None, max_iter: int = 100, tol: float = 1e-9):
    """Dominant eigenpair by power iteration (stops when the Rayleigh quotient changes < tol).

    Returns
    -------
    (eigenvalue, eigenvector, iterations); the eigenvector has unit 2-norm.

    Examples
    --------
    >>> import torch, trnsparse
    >>> A = trnsparse.BSRMatrix.from_dense(torch.diag(torch.tensor([1., 5.], dtype=torch.float64)), block_size=2)
    >>> lam, vec, it = trnsparse.power_iteration_bsr(A, torch.ones(2, dtype=torch.float64), tol=1e-12)
    >>> round(lam, 8)
    5.0
    """
    where = "power_iteration_bsr"
    A = _bsr(A, where)
    _square(A, where)
    n = A.shape[0]
    if v0 is None:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(n, generator=g, dtype=torch.float64).to(A.device, A.dtype)
    else:
        x = _dense(v0, "v0", where, 1, A.dtype, A.device)
        if x.shape[0] != n:
            raise ValueError(f"{where}: v0 must have {n} entries, got {tuple(x.shape)}")
    max_iter = validate.integer(max_iter, "max_iter", where, minimum=1, maximum=validate.INDEX_MAX)
    tol = _tol(tol, where)
    nrm = float(torch.linalg.vector_norm(x))
    if nrm == 0:
        raise ValueError(f"{where}: v0 must be nonzero")
    x = x / nrm
    mv = _mv(A)
    lam_prev = None
    lam = 0.0
    for k in range(max_iter):
        y = mv(x)
        lam_t = torch.vdot(x, y)
        lam = lam_t.item() if A.dtype.is_complex else float(lam_t)
        ny = float(torch.linalg.vector_norm(y))
        if ny == 0:
            return 0.0, x, k + 1
        x = y / ny
        if lam_prev is not None and abs(lam - lam_prev) < tol:
            return lam, x, k + 1
        lam_prev = lam
    return lam, x, max_iter
