"""Dense factorizations and solves (cuSOLVER ``potrf/getrf/geqrf/gesvd`` and friends).

Every public function validates its arguments into canonical form and calls
one private torch implementation ``_<op>_torch`` that does no validation
(the seam the NKI phase registers as the torch lowering). All accept leading
batch dimensions ``(..., n, n)``, float32/float64/complex64/complex128, torch
tensors on any device (results on that device) or NumPy arrays (results as
NumPy).

Failure is explicit: a matrix that is not positive definite (Cholesky) or
exactly singular (LU, solve, inv) raises :class:`trnsolver.LinAlgError`, a
``numpy.linalg.LinAlgError``, naming the failing minor / pivot and the batch
index; with ``check=False`` the factorizations return cuSOLVER's ``info``
instead.
"""

from __future__ import annotations

import torch

from trnsci import iterative as it_
from trnsci import linalg as la
from trnsci import precision, validate
from trnsci.dispatch import Op, traceable_as
from trnsolver import _host

__all__ = [
    "cholesky", "cho_factor", "cho_solve", "lu", "lu_factor", "lu_solve", "qr", "svd",
    "pinv", "solve", "solve_spd", "lstsq", "inv", "inv_spd", "det", "slogdet",
    "inv_sqrt_spd", "inv_sqrt_spd_ns",
]


def _raise_info(where: str, info: torch.Tensor, what: str) -> None:
    """Raise LinAlgError for the first nonzero ``info`` (1-based position)."""
    if info is _host.ZERO_INFO:  # the LAPACK route's success: no tensor read at all
        return
    if info.dim() == 0:  # one matrix: int() is far cheaper than nonzero() (docs/perf-notes.md#design-fast-paths)
        if not int(info):
            return
    elif info.numel() == 0 or not bool(info.any()):
        return
    flat = info.reshape(-1)
    bad = torch.nonzero(flat).reshape(-1)
    if bad.numel() == 0:
        return
    i = int(bad[0])
    k = int(flat[i])
    bidx = la.batch_index(i, tuple(info.shape))
    at = f" (batch index {bidx})" if bidx else ""
    raise la.LinAlgError(f"{where}: {what.format(k=k, k0=k - 1)}{at}", info=k, batch_index=bidx)


# under torch.compile no host read of info: the graph does not stop to look at it
traceable_as(_raise_info, lambda where, info, what: None)


_NOT_PD = "the leading minor of order {k} is not positive definite"
_SINGULAR = "the matrix is singular: U[{k0}, {k0}] is exactly zero"


def _upper(x, where: str, name: str = "upper") -> bool:
    return validate.flag(x, name, where)


def _check(x, where: str) -> bool:
    return validate.flag(x, "check", where)


# =================================================================== Cholesky

def _batch(A: torch.Tensor) -> int:
    n = A.shape[-1]
    return A.numel() // n // n if n else 0


def _flops(factor: float):
    """Size function ``factor * m * n * min(m, n) * batch`` (first argument ``(..., m, n)``)."""
    def size(A, *rest, **kwargs):
        m, n = A.shape[-2], A.shape[-1]
        return factor * m * n * min(m, n) * (A.numel() // (m * n) if m * n else 0)
    return size


def _cholesky_flops(A, upper):
    return A.shape[-1] ** 3 / 3.0 * _batch(A)


def _square_describe(A, *rest):
    return f"n={A.shape[-1]} batch={tuple(A.shape[:-2])} {str(A.dtype).replace('torch.', '')}"


# ------------------------------------------------ fake implementations: shapes and dtypes, nothing computed

def _real(dtype: torch.dtype) -> torch.dtype:
    return dtype.to_real() if dtype.is_complex else dtype


def _rhs_fake(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """A solve's ``X``: ``B``'s shape with the batch dimensions of ``A`` and ``B`` broadcast."""
    return B.new_empty((*torch.broadcast_shapes(A.shape[:-2], B.shape[:-2]), *B.shape[-2:]))


def _lu_fake(A):
    m, n = A.shape[-2], A.shape[-1]
    k, lead = min(m, n), A.shape[:-2]
    return (A.new_empty((*lead, m, m)), A.new_empty((*lead, m, k)), A.new_empty((*lead, k, n)),
            A.new_empty(lead, dtype=torch.int32))


def _qr_fake(A, mode):
    m, n = A.shape[-2], A.shape[-1]
    k, lead = min(m, n), A.shape[:-2]
    if mode == "r":
        return A.new_empty((0,)), A.new_empty((*lead, k, n))
    if mode == "complete":
        return A.new_empty((*lead, m, m)), A.new_empty((*lead, m, n))
    return A.new_empty((*lead, m, k)), A.new_empty((*lead, k, n))


def _svd_fake(A, full_matrices):
    m, n = A.shape[-2], A.shape[-1]
    k, lead = min(m, n), A.shape[:-2]
    u, v = (m, n) if full_matrices else (k, k)
    return (A.new_empty((*lead, m, u)), A.new_empty((*lead, k), dtype=_real(A.dtype)),
            A.new_empty((*lead, v, n)))


#: Op ``(A, upper) -> (L or U, info)``. Threshold (flops, n^3/3): no Trainium
#: here to calibrate on; the device path is a blocked factorization whose
#: trailing updates are trnblas SYRK/GEMM kernels, which only pays off once
#: the O(n^3) updates dwarf the per-block launches -- 2048^3/3 is a placeholder.
CHOLESKY = Op("trnsolver.cholesky", "flops", 2048 ** 3 / 3.0, size=_cholesky_flops, describe=_square_describe,
              doc="Cholesky factorization (blocked, trailing updates on trnblas SYRK/GEMM kernels)",
              schema="(Tensor A, bool upper) -> (Tensor, Tensor)",
              fake=lambda A, upper: (torch.empty_like(A), A.new_empty(A.shape[:-2], dtype=torch.int32)))


@CHOLESKY.lowering("torch")
def _cholesky_torch(A: torch.Tensor, upper: bool) -> tuple[torch.Tensor, torch.Tensor]:
    n = A.shape[-1]
    if _host.eligible(A) and _host.use("potrf", A, n ** 3 / 3.0, lambda: {
            "lapack": lambda: _host.potrf(A, upper), "torch": lambda: torch.linalg.cholesky_ex(A, upper=upper)}):
        r = _host.potrf(A, upper)  # SciPy's ?potrf, where it measured faster (trnsolver._host)
        if r is not None:
            return r
    # torch reads the triangle it returns, as LAPACK's potrf(uplo) does
    return torch.linalg.cholesky_ex(A, upper=upper)


@precision.computes_in("float32")
@validate.numpy_io
def cholesky(A, upper=False, *, check=True, check_finite=True):
    """Cholesky factorization ``A = L L^H`` (or ``A = U^H U`` with ``upper=True``).

    Parameters
    ----------
    A : tensor, shape (..., n, n)
        Hermitian positive definite; only the triangle named by ``upper``
        is read (the lower one by default, the upper one with
        ``upper=True``), as LAPACK's ``potrf``, cuSOLVER, SciPy and torch
        do -- on every path (one matrix, a batch, the kernel).
    upper : bool
        Read the upper triangle and return the upper factor ``U``
        (``A = U^H U``) instead of ``L``.
    check : bool
        ``True`` (default): raise when ``A`` is not positive definite.
        ``False``: return ``(factor, info)`` as cuSOLVER's ``potrf`` does,
        ``info`` (int32, shape ``(...)``) being 0 or the order of the first
        leading minor that is not positive definite.
    check_finite : bool
        Raise ``ValueError`` on NaN/Inf in ``A`` (as SciPy does).

    Returns
    -------
    L : tensor, shape (..., n, n)
        Lower (or upper) triangular with a real positive diagonal, zeros in
        the other triangle. With ``check=False``: ``(L, info)``.

    Raises
    ------
    LinAlgError
        ``A`` is not positive definite; the message names the leading minor
        (1-based, ``err.info``) and the batch index (``err.batch_index``).
    TypeError, ValueError
        ``A`` is not a square float/complex matrix, or holds NaN/Inf.

    Examples
    --------
    >>> import torch, trnsolver
    >>> A = torch.tensor([[4.0, 2.0], [2.0, 3.0]], dtype=torch.float64)
    >>> L = trnsolver.cholesky(A)
    >>> torch.allclose(L @ L.T, A)
    True
    >>> trnsolver.cholesky(torch.tensor([[1.0, 2.0], [2.0, 1.0]]))
    Traceback (most recent call last):
    ...
    trnsci.linalg.LinAlgError: cholesky: the leading minor of order 2 is not positive definite
    """
    where = "cholesky"
    A = la.square_matrix(A, "A", where)
    upper, check = _upper(upper, where), _check(check, where)
    la.check_finite(check_finite, where, A=A)
    L, info = CHOLESKY(A, upper)
    if not check:
        return L, (info.clone() if info is _host.ZERO_INFO else info)
    _raise_info(where, info, _NOT_PD)
    return L


@precision.computes_in("float32")
@validate.numpy_io
def cho_factor(A, lower=False, *, check_finite=True):
    """Cholesky factor in the form :func:`cho_solve` takes (``scipy.linalg.cho_factor``).

    Parameters
    ----------
    A : tensor, shape (..., n, n)
        Hermitian positive definite; only the ``lower`` (or upper) triangle
        is read, as in SciPy.
    lower : bool
        Factor as ``L L^H`` (True) or ``U^H U`` (False, SciPy's default).

    Returns
    -------
    (c, lower) : (tensor, bool)
        The triangular factor (zeros in the other triangle) and the flag.

    Raises
    ------
    LinAlgError
        ``A`` is not positive definite (names the minor).

    Examples
    --------
    >>> import torch, trnsolver
    >>> A = torch.tensor([[4.0, 2.0], [2.0, 3.0]], dtype=torch.float64)
    >>> cf = trnsolver.cho_factor(A)
    >>> x = trnsolver.cho_solve(cf, torch.tensor([6.0, 5.0], dtype=torch.float64))
    >>> [round(v, 12) for v in x.tolist()]
    [1.0, 1.0]
    """
    where = "cho_factor"
    A = la.square_matrix(A, "A", where)
    lower = validate.flag(lower, "lower", where)
    la.check_finite(check_finite, where, A=A)
    F, info = CHOLESKY(A, not lower)
    _raise_info(where, info, _NOT_PD)
    return F, lower


#: Threshold of the SPD solves/inverses on the device: like CHOLESKY's, a
#: placeholder (no Trainium here to calibrate on).
_SPD_THRESHOLD = 2048 ** 3 / 3.0

CHO_SOLVE = Op("trnsolver.cho_solve", "flops", _SPD_THRESHOLD, size=_flops(2.0), describe=_square_describe,
               doc="solve with a Cholesky factor: two trnblas TRSM kernels",
               schema="(Tensor F, Tensor B, bool lower) -> Tensor", fake=lambda F, B, lower: _rhs_fake(F, B))


@CHO_SOLVE.lowering("torch")
def _cho_solve_torch(F: torch.Tensor, B: torch.Tensor, lower: bool) -> torch.Tensor:
    # ?potrs reads only F's `lower` triangle, torch.cholesky_solve all of F
    if _host.eligible(F, B) and _host.use("potrs", F, 2.0 * F.shape[-1] ** 2 * B.shape[-1], lambda: {
            "lapack": lambda: _host.potrs(F, B, lower), "torch": lambda: _cho_solve_by_torch(F, B, lower)},
            (B.shape[-1] == 1,)):
        return _host.potrs(F, B, lower)
    return _cho_solve_by_torch(F, B, lower)


def _cho_solve_by_torch(F: torch.Tensor, B: torch.Tensor, lower: bool) -> torch.Tensor:
    F = F.tril() if lower else F.triu()
    return torch.cholesky_solve(B, F, upper=not lower)


@precision.computes_in("float32")
@validate.numpy_io
def cho_solve(c_and_lower, b, *, check_finite=True):
    """Solve ``A x = b`` from :func:`cho_factor`'s ``(c, lower)`` (``scipy.linalg.cho_solve``).

    Parameters
    ----------
    c_and_lower : (tensor, bool)
        The factor (only its ``lower``/upper triangle is read) and the flag.
    b : tensor, shape (..., n) or (..., n, k)

    Returns
    -------
    x : tensor, the shape of ``b``

    Examples
    --------
    >>> import torch, trnsolver
    >>> A = torch.tensor([[2.0, 1.0], [1.0, 2.0]], dtype=torch.float64)
    >>> x = trnsolver.cho_solve(trnsolver.cho_factor(A, lower=True), torch.tensor([3.0, 3.0], dtype=torch.float64))
    >>> [round(v, 12) for v in x.tolist()]
    [1.0, 1.0]
    """
    where = "cho_solve"
    if not isinstance(c_and_lower, (tuple, list)) or len(c_and_lower) != 2:
        raise TypeError(f"{where}: c_and_lower must be the (c, lower) pair from cho_factor")
    F, lower = c_and_lower
    F = la.square_matrix(F, "c (c_and_lower[0])", where)
    lower = validate.flag(lower, "lower", where)
    B, vec = la.rhs(F, b, "b", where)
    la.check_finite(check_finite, where, c=F, b=B)
    X = CHO_SOLVE(F, B, lower)
    return X.squeeze(-1) if vec else X


# ======================================================================== LU

#: Threshold of the LU-based ops (flops of the factorization, 2 n^3 / 3): no
#: Trainium here to calibrate on; like Cholesky's, the device path is a blocked
#: factorization (panel kernel, row gather, trnblas TRSM/GEMM per block column)
#: that only pays off once the O(n^3) trailing updates dwarf the per-block
#: launches -- 2048 is a placeholder.
_LU_THRESHOLD = 2 * 2048 ** 3 / 3.0

LU_FACTOR = Op("trnsolver.lu_factor", "flops", _LU_THRESHOLD, size=_flops(2 / 3), describe=_square_describe,
               doc="LU factorization, packed (getrf): panel kernel + row gather + trnblas TRSM/GEMM",
               schema="(Tensor A) -> (Tensor, Tensor, Tensor)",
               fake=lambda A: (torch.empty_like(A), A.new_empty(A.shape[:-1], dtype=torch.int32),
                               A.new_empty(A.shape[:-2], dtype=torch.int32)))


@LU_FACTOR.lowering("torch")
def _lu_factor_torch(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    LU, piv, info = torch.linalg.lu_factor_ex(A)
    return LU, piv, info


LU = Op("trnsolver.lu", "flops", _LU_THRESHOLD, size=_flops(2 / 3), describe=_square_describe,
        doc="LU factorization A = P L U (square: the blocked device LU; rectangular: torch)",
        schema="(Tensor A) -> (Tensor, Tensor, Tensor, Tensor)", fake=lambda A: _lu_fake(A))


@LU.lowering("torch")
def _lu_torch(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    LU, piv, info = torch.linalg.lu_factor_ex(A)
    P, L, U = torch.lu_unpack(LU, piv)
    return P, L, U, info


@precision.computes_in("float32")
@validate.numpy_io
def lu(A, *, check=True, check_finite=True):
    """LU factorization with partial pivoting, ``A = P @ L @ U``.

    Parameters
    ----------
    A : tensor, shape (..., m, n)
        Any matrix: a singular or rank-deficient one factors too (``U`` then
        has an exactly zero pivot), as with ``scipy.linalg.lu``,
        ``torch.linalg.lu`` and ``getrf``; solving with such a factor raises.
    check : bool
        ``True`` (default): return ``(P, L, U)``. ``False``: return
        ``(P, L, U, info)``, ``info`` 0 or the 1-based position of the first
        zero pivot (cuSOLVER's ``getrf``).

    Returns
    -------
    P : tensor, shape (..., m, m)
        Permutation matrix, ``A = P @ L @ U`` (the convention of
        ``scipy.linalg.lu`` and ``torch.linalg.lu``).
    L : tensor, shape (..., m, k), k = min(m, n)
        Unit lower triangular (trapezoidal).
    U : tensor, shape (..., k, n)
        Upper triangular (trapezoidal).

    Examples
    --------
    >>> import torch, trnsolver
    >>> A = torch.tensor([[0.0, 1.0], [2.0, 3.0]], dtype=torch.float64)
    >>> P, L, U = trnsolver.lu(A)
    >>> torch.allclose(P @ L @ U, A)
    True
    """
    where = "lu"
    A = la.matrix(A, "A", where)
    check = _check(check, where)
    la.check_finite(check_finite, where, A=A)
    P, L, U, info = LU(A)
    return (P, L, U) if check else (P, L, U, info)


@precision.computes_in("float32")
@validate.numpy_io
def lu_factor(A, *, check=True, check_finite=True):
    """Packed LU factorization (``scipy.linalg.lu_factor``): ``(lu, piv)``.

    Parameters
    ----------
    A : tensor, shape (..., n, n)
        Singular matrices factor too (an exactly zero pivot in ``U``, as
        ``getrf`` and SciPy give); :func:`lu_solve` with such a factor raises.
    check : bool
        ``True`` (default): return ``(lu, piv)``; ``False``: return
        ``(lu, piv, info)``, ``info`` 0 or the 1-based position of the first
        zero pivot.

    Returns
    -------
    lu : tensor, shape (..., n, n)
        ``L`` (unit diagonal not stored) below the diagonal, ``U`` on and above.
    piv : tensor of int32, shape (..., n)
        0-based LAPACK pivots: row ``i`` was swapped with row ``piv[i]``.

    Examples
    --------
    >>> import torch, trnsolver
    >>> A = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64)
    >>> f = trnsolver.lu_factor(A)
    >>> trnsolver.lu_solve(f, torch.tensor([5.0, 11.0], dtype=torch.float64)).tolist()
    [1.0, 2.0]
    """
    where = "lu_factor"
    A = la.square_matrix(A, "A", where)
    check = _check(check, where)
    la.check_finite(check_finite, where, A=A)
    LU, piv, info = LU_FACTOR(A)
    piv = piv - 1
    return (LU, piv) if check else (LU, piv, info)


def _zero_pivot(LU: torch.Tensor) -> torch.Tensor:
    """getrf's ``info`` read back from a packed factor: 1-based first zero on the diagonal, else 0."""
    z = LU.diagonal(dim1=-2, dim2=-1) == 0
    if z.shape[-1] == 0:  # 0x0: no pivot, nothing singular (argmax has no empty reduction)
        return torch.zeros(z.shape[:-1], dtype=torch.int32, device=LU.device)
    first = torch.where(z.any(-1), z.to(torch.int8).argmax(-1) + 1, 0)
    return first.to(torch.int32)


_TRANS = validate.Options({"N": (0, "N"), "T": (1, "T"), "C": (2, "C")})


LU_SOLVE = Op("trnsolver.lu_solve", "flops", _LU_THRESHOLD, size=_flops(2.0), describe=_square_describe,
              doc="solve with an LU factorization (getrs): row gather + two trnblas TRSM kernels",
              schema="(Tensor LU, Tensor piv, Tensor B, str trans) -> Tensor",
              fake=lambda LU, piv1, B, trans: _rhs_fake(LU, B))


@LU_SOLVE.lowering("torch")
def _lu_solve_torch(LU: torch.Tensor, piv1: torch.Tensor, B: torch.Tensor, trans: str) -> torch.Tensor:
    if trans == "N":
        return torch.linalg.lu_solve(LU, piv1, B)
    if trans == "C" or not LU.is_complex():
        return torch.linalg.lu_solve(LU, piv1, B, adjoint=True)
    # A^T = conj(A)^H, and conj(A) = P conj(L) conj(U) shares the pivots
    return torch.linalg.lu_solve(LU.conj().resolve_conj(), piv1, B, adjoint=True)


@precision.computes_in("float32")
@validate.numpy_io
def lu_solve(lu_and_piv, b, trans=0, *, check_finite=True):
    """Solve ``op(A) x = b`` from :func:`lu_factor`'s ``(lu, piv)``.

    Parameters
    ----------
    lu_and_piv : (tensor, tensor)
    b : tensor, shape (..., n) or (..., n, k)
    trans : {0, 1, 2} or {"N", "T", "C"}
        ``A x = b``, ``A^T x = b`` or ``A^H x = b`` (SciPy's codes).

    Returns
    -------
    x : tensor, the shape of ``b``

    Raises
    ------
    LinAlgError
        The factor has an exactly zero pivot (``A`` is singular); the message
        names it.

    Examples
    --------
    >>> import torch, trnsolver
    >>> A = torch.tensor([[2.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    >>> trnsolver.lu_solve(trnsolver.lu_factor(A), torch.tensor([2.0, 3.0], dtype=torch.float64), trans=1).tolist()
    [-0.5, 3.0]
    """
    where = "lu_solve"
    if not isinstance(lu_and_piv, (tuple, list)) or len(lu_and_piv) not in (2, 3):
        raise TypeError(f"{where}: lu_and_piv must be the (lu, piv) pair from lu_factor")
    LU, piv = lu_and_piv[0], lu_and_piv[1]
    LU = la.square_matrix(LU, "lu (lu_and_piv[0])", where)
    piv = validate.tensor(piv, "piv", where)
    if piv.dtype not in (torch.int32, torch.int64) or tuple(piv.shape) != tuple(LU.shape[:-1]):
        raise ValueError(f"{where}: piv must be an integer tensor of shape {tuple(LU.shape[:-1])}, "
                         f"got {piv.dtype} {tuple(piv.shape)}")
    trans = _TRANS(trans, "trans", where)
    B, vec = la.rhs(LU, b, "b", where)
    la.check_finite(check_finite, where, lu=LU, b=B)
    _raise_info(where, _zero_pivot(LU), _SINGULAR)
    X = LU_SOLVE(LU, (piv + 1).to(torch.int32), B, trans)
    return X.squeeze(-1) if vec else X


# ================================================================= QR, SVD

_QR_MODE = validate.Options({"reduced": ("reduced", "economic"), "complete": ("complete", "full"), "r": ("r",)})


#: Threshold of QR/lstsq on the device: the same n = 2048 placeholder as the
#: LU and Cholesky paths, in this op's size metric (2 m n min(m, n)).
_QR_THRESHOLD = 2.0 * 2048 ** 3

QR = Op("trnsolver.qr", "flops", _QR_THRESHOLD, size=_flops(2.0), describe=_square_describe,
        doc="QR factorization: Householder panel kernel, compact WY updates on GEMM/TRSM kernels",
        schema="(Tensor A, str mode) -> (Tensor, Tensor)", fake=lambda A, mode: _qr_fake(A, mode))


@QR.lowering("torch")
def _qr_torch(A: torch.Tensor, mode: str) -> tuple[torch.Tensor, torch.Tensor]:
    if mode == "reduced" and _host.eligible(A) and _host.use(
            "qr", A, 2.0 * A.shape[0] * A.shape[1] * min(A.shape), lambda: {
                "lapack": lambda: _host.qr_reduced(A), "torch": lambda: torch.linalg.qr(A, mode=mode)},
            (A.shape[0] >= A.shape[1],)):
        return _host.qr_reduced(A)  # SciPy's ?geqrf + ?orgqr, where it measured faster
    return torch.linalg.qr(A, mode=mode)


@precision.computes_in("float32")
@validate.numpy_io
def qr(A, mode="reduced"):
    """QR factorization ``A = Q R``.

    Parameters
    ----------
    A : tensor, shape (..., m, n)
    mode : {"reduced", "complete", "r"}
        ``"reduced"`` (SciPy's ``"economic"``): ``Q`` is ``(m, k)``, ``R``
        ``(k, n)``, ``k = min(m, n)``. ``"complete"``: ``Q`` is ``(m, m)``.
        ``"r"``: only ``R`` (``Q`` is an empty tensor).

    Returns
    -------
    Q : tensor with orthonormal columns
    R : tensor, upper triangular (trapezoidal)

    Examples
    --------
    >>> import torch, trnsolver
    >>> A = torch.tensor([[3.0, 1.0], [4.0, 2.0]], dtype=torch.float64)
    >>> Q, R = trnsolver.qr(A)
    >>> torch.allclose(Q @ R, A)
    True
    """
    where = "qr"
    A = la.matrix(A, "A", where)
    mode = _QR_MODE(mode, "mode", where)
    return QR(A, mode)


SVD = Op("trnsolver.svd", "flops", 2 * _QR_THRESHOLD, size=_flops(4.0), describe=_square_describe,
         doc="singular value decomposition: one-sided Jacobi sweep kernel (min(m, n) <= 128)",
         schema="(Tensor A, bool full_matrices) -> (Tensor, Tensor, Tensor)",
         fake=lambda A, full_matrices: _svd_fake(A, full_matrices))


@SVD.lowering("torch")
def _svd_torch(A: torch.Tensor, full_matrices: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    if _host.eligible(A) and _host.use(
            "svd", A, 4.0 * A.shape[0] * A.shape[1] * min(A.shape), lambda: {
                "lapack": lambda: _host.gesdd(A, full_matrices),
                "torch": lambda: torch.linalg.svd(A, full_matrices=full_matrices)},
            (A.shape[0] >= A.shape[1], bool(full_matrices))):
        r = _host.gesdd(A, full_matrices)  # SciPy's ?gesdd, where it measured faster
        if r is not None:
            return r
    return torch.linalg.svd(A, full_matrices=full_matrices)


@precision.computes_in("float32")
@validate.numpy_io
def svd(A, full_matrices=False, *, check_finite=True):
    """Singular value decomposition ``A = U diag(S) Vh``.

    Parameters
    ----------
    A : tensor, shape (..., m, n)
    full_matrices : bool
        ``False`` (default): ``U`` is ``(m, k)``, ``Vh`` ``(k, n)``, ``k = min(m, n)``.

    Returns
    -------
    U : tensor
    S : tensor, real, shape (..., k), descending
    Vh : tensor

    Examples
    --------
    >>> import torch, trnsolver
    >>> U, S, Vh = trnsolver.svd(torch.tensor([[3.0, 0.0], [0.0, -2.0]]))
    >>> S.tolist()
    [3.0, 2.0]
    """
    where = "svd"
    A = la.matrix(A, "A", where)
    full = validate.flag(full_matrices, "full_matrices", where)
    la.check_finite(check_finite, where, A=A)
    return SVD(A, full)


PINV = Op("trnsolver.pinv", "flops", 2 * _QR_THRESHOLD, size=_flops(4.0), describe=_square_describe,
          doc="pseudo-inverse by the SVD: one-sided Jacobi sweep kernel, then one GEMM kernel",
          schema="(Tensor A, float? rtol) -> Tensor",
          fake=lambda A, rtol: A.new_empty((*A.shape[:-2], A.shape[-1], A.shape[-2])))


@PINV.lowering("torch")
def _pinv_torch(A: torch.Tensor, rtol: float | None) -> torch.Tensor:
    if A.numel() == 0:
        return A.new_zeros(A.shape[:-2] + (A.shape[-1], A.shape[-2]))
    if rtol is None:
        rtol = torch.finfo(A.real.dtype if A.is_complex() else A.dtype).eps * max(A.shape[-2:])
    U, S, Vh = torch.linalg.svd(A, full_matrices=False)
    cut = S[..., :1] * rtol
    Sinv = torch.where(S > cut, 1.0 / torch.where(S > cut, S, torch.ones_like(S)), torch.zeros_like(S))
    return (Vh.mH * Sinv.unsqueeze(-2).to(A.dtype)) @ U.mH


@precision.computes_in("float32")
@validate.numpy_io
def pinv(A, rcond=None, *, check_finite=True):
    """Moore-Penrose pseudo-inverse from the SVD.

    Parameters
    ----------
    A : tensor, shape (..., m, n)
    rcond : float, optional
        Singular values ``<= rcond * max(S)`` count as zero. Default
        ``max(m, n) * eps`` (``scipy.linalg.pinv``'s default ``rtol``).

    Returns
    -------
    A_pinv : tensor, shape (..., n, m)

    Examples
    --------
    >>> import torch, trnsolver
    >>> trnsolver.pinv(torch.tensor([[2.0, 0.0], [0.0, 0.0]])).tolist()
    [[0.5, 0.0], [0.0, 0.0]]
    """
    where = "pinv"
    A = la.matrix(A, "A", where)
    rtol = None if rcond is None else validate.positive(rcond, "rcond", where, zero_ok=True)
    la.check_finite(check_finite, where, A=A)
    return PINV(A, rtol)


# ==================================================================== solves

_NO_INFO = torch.zeros((), dtype=torch.int32)


SOLVE = Op("trnsolver.solve", "flops", _LU_THRESHOLD, size=_flops(2 / 3), describe=_square_describe,
           doc="general solve (gesv): the device LU, then row gather + two TRSM kernels",
           schema="(Tensor A, Tensor B) -> (Tensor, Tensor)",
           fake=lambda A, B: (B.new_empty((*torch.broadcast_shapes(A.shape[:-2], B.shape[:-2]), *B.shape[-2:])),
                              A.new_empty((), dtype=torch.int32)))


@SOLVE.lowering("torch")
def _solve_torch(A: torch.Tensor, B: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if _host.eligible(A, B) and _host.use("gesv", A, 2.0 * A.shape[-1] ** 3 / 3.0, lambda: {
            "lapack": lambda: _host.gesv(A, B), "torch": lambda: torch.linalg.solve(A, B)},
            (B.shape[-1] == 1,)):
        return _host.gesv(A, B)  # SciPy's ?gesv, where it measured faster (trnsolver._host)
    # linalg.solve first (the cheaper call, docs/perf-notes.md#design-solve); solve_ex only to find the
    # zero pivot of a singular matrix
    try:
        return torch.linalg.solve(A, B), _NO_INFO
    except RuntimeError:
        return torch.linalg.solve_ex(A, B)


@precision.computes_in("float32")
@validate.numpy_io
def solve(A, B, *, check_finite=True):
    """Solve ``A X = B`` by LU with partial pivoting.

    Parameters
    ----------
    A : tensor, shape (..., n, n)
    B : tensor, shape (..., n) or (..., n, k)
        One dimension fewer than ``A``: a (batch of) vector(s).

    Returns
    -------
    X : tensor, the shape of ``B`` (batch dimensions broadcast)

    Raises
    ------
    LinAlgError
        ``A`` is exactly singular (names the zero pivot).

    Examples
    --------
    >>> import torch, trnsolver
    >>> A = torch.tensor([[3.0, 1.0], [1.0, 2.0]], dtype=torch.float64)
    >>> trnsolver.solve(A, torch.tensor([9.0, 8.0], dtype=torch.float64)).tolist()
    [2.0, 3.0]
    """
    where = "solve"
    A = la.square_matrix(A, "A", where)
    Bm, vec = la.rhs(A, B, "B", where)
    la.check_finite(check_finite, where, A=A, B=Bm)
    X, info = SOLVE(A, Bm)
    _raise_info(where, info, _SINGULAR)
    return X.squeeze(-1) if vec else X


SOLVE_SPD = Op("trnsolver.solve_spd", "flops", _SPD_THRESHOLD, size=_flops(1 / 3), describe=_square_describe,
               doc="SPD solve (posv): the device Cholesky, then two TRSM kernels",
               schema="(Tensor A, Tensor B, bool refine) -> (Tensor, Tensor)",
               fake=lambda A, B, refine: (_rhs_fake(A, B), A.new_empty(A.shape[:-2], dtype=torch.int32)))


@SOLVE_SPD.lowering("torch")
def _solve_spd_torch(A: torch.Tensor, B: torch.Tensor, refine: bool) -> tuple[torch.Tensor, torch.Tensor]:
    L, info = torch.linalg.cholesky_ex(A)
    X = torch.cholesky_solve(B, L)
    if refine:
        hi = torch.complex128 if A.is_complex() else torch.float64
        # the residual must see the matrix the factor saw: the lower triangle, mirrored
        R = (B.to(hi) - la.symmetric(A.to(hi), "L", hermitian=True) @ X.to(hi)).to(A.dtype)
        X = X + torch.cholesky_solve(R, L)
    return X, info


@precision.computes_in("float32")
@validate.numpy_io
def solve_spd(A, B, iterative_refinement=False, *, check_finite=True):
    """Solve ``A X = B`` for Hermitian positive definite ``A`` by Cholesky.

    Parameters
    ----------
    A : tensor, shape (..., n, n)
        Hermitian positive definite; only its lower triangle is read.
    B : tensor, shape (..., n) or (..., n, k)
    iterative_refinement : bool
        One step of refinement with the residual ``B - A X`` formed in
        float64 (complex128): for float32 data the error drops from
        ``~cond(A) eps32`` toward ``eps32`` while ``cond(A) eps32 < 1``.

    Returns
    -------
    X : tensor, the shape of ``B``

    Raises
    ------
    LinAlgError
        ``A`` is not positive definite (names the leading minor).

    Examples
    --------
    >>> import torch, trnsolver
    >>> A = torch.tensor([[4.0, 1.0], [1.0, 3.0]], dtype=torch.float64)
    >>> trnsolver.solve_spd(A, torch.tensor([5.0, 4.0], dtype=torch.float64)).tolist()
    [1.0, 1.0]
    """
    where = "solve_spd"
    A = la.square_matrix(A, "A", where)
    Bm, vec = la.rhs(A, B, "B", where)
    refine = validate.flag(iterative_refinement, "iterative_refinement", where)
    la.check_finite(check_finite, where, A=A, B=Bm)
    X, info = SOLVE_SPD(A, Bm, refine)
    _raise_info(where, info, _NOT_PD)
    return X.squeeze(-1) if vec else X


_LSTSQ_DRIVER = validate.Options({"gelsd": ("gelsd",), "gelsy": ("gelsy",), "gelss": ("gelss",)})


LSTSQ = Op("trnsolver.lstsq", "flops", 2 * _QR_THRESHOLD, size=_flops(4.0), describe=_square_describe,
           doc="least squares: QR on the device (m >= n, full rank), then GEMM + TRSM kernels",
           # the residues exist only for a full-rank overdetermined system (the rank is computed): the operator
           # returns them flattened, of a size the data decides (0 or the batch times k; an unbacked size)
           schema="(Tensor A, Tensor B, float? rcond, str driver) -> (Tensor X, Tensor residues, Tensor rank, "
                  "Tensor singular_values)",
           fake=lambda A, B, rcond, driver: _lstsq_fake(A, B, driver))


def _lstsq_fake(A, B, driver):
    m, n = A.shape[-2], A.shape[-1]
    real = A.real.dtype
    batch = A.shape[:-2]
    X = A.new_empty((*batch, n, B.shape[-1]))
    res = A.new_empty((torch.library.get_ctx().new_dynamic_size(),), dtype=real)
    empty = A.numel() == 0 or B.numel() == 0
    gels = A.device.type != "cpu" and not empty
    rank = A.new_empty((0,) if gels else batch, dtype=torch.int64)
    sv = A.new_empty((*batch, min(m, n)) if driver in ("gelsd", "gelss") and not gels and not empty else (0,),
                     dtype=real)
    return X, res, rank, sv


LSTSQ.boundary(lambda A, B, rcond, driver: (A, B, rcond, driver), lambda A, B, rcond, driver: (A, B, rcond, driver),
               lambda out, A, B, rcond, driver: (out[0], out[1].reshape(-1), out[2], out[3]))


@LSTSQ.backward(formula="X = A^+ B: the vjp of torch.linalg.pinv(A) B (exact for a full-rank A); residues "
                        "||B - A X||^2 (X optimal): dB = 2 r g_res, dA = -2 r g_res X^H, r = B - A X",
                runs="torch: a pseudo-inverse recomputed with its derivative")
def _lstsq_backward(inputs, output, grad, needs):
    A, B, rcond, driver = inputs
    gX, gres = grad[0], grad[1]
    X = output[0]
    with torch.enable_grad():
        a = A.detach().requires_grad_()
        b = B.detach().requires_grad_()
        Y = torch.linalg.pinv(a, rtol=rcond) @ b if rcond is not None else torch.linalg.pinv(a) @ b
        gX = torch.zeros_like(X) if gX is None else gX
        dA, dB = torch.autograd.grad(Y, (a, b), gX, allow_unused=True)
    dA = torch.zeros_like(A) if dA is None else dA
    dB = torch.zeros_like(B) if dB is None else dB
    if gres is not None:
        # residues are present (size batch * k) or not (size 0): pad to the full size, zeros when absent
        full = B.shape[:-2].numel() * B.shape[-1]
        w = torch.cat([gres, gres.new_zeros(full)])[:full].reshape(*B.shape[:-2], 1, B.shape[-1])
        r2 = (B - A @ X) * (2 * w).to(B.dtype)
        dB = dB + r2
        dA = dA - r2 @ X.mH
    return (dA if needs[0] else None, dB if needs[1] else None, None, None)


@LSTSQ.lowering("torch")
def _lstsq_torch(A: torch.Tensor, B: torch.Tensor, rcond: float | None, driver: str):
    m, n = A.shape[-2], A.shape[-1]
    if A.numel() == 0 or B.numel() == 0:
        X = A.new_zeros(A.shape[:-2] + (n, B.shape[-1]))
        # n = 0 < m: the empty matrix has full column rank 0 and x = 0, so the
        # residual is all of B (SciPy: lstsq(zeros((5, 0)), ones(5)) -> 5.0)
        res = (B.abs() ** 2).sum(-2) if m > n == 0 and B.numel() else A.new_zeros(0).real
        return X, res, torch.zeros(A.shape[:-2], dtype=torch.int64), A.new_zeros(0).real
    if A.device.type != "cpu":
        driver = "gels"
    sol = torch.linalg.lstsq(A, B, rcond=rcond, driver=driver)
    X, rank, sv = sol.solution, sol.rank, sol.singular_values
    if m > n and rank.numel() and bool((rank == n).all()):
        res = ((A @ X - B).abs() ** 2).sum(-2)
    else:
        res = A.new_zeros(0).real
    return X, res, rank, sv


@precision.computes_in("float32")
@validate.numpy_io
def lstsq(A, B, rcond=None, *, driver="gelsd", check_finite=True):
    """Least-squares solution of ``A X ~= B`` (``scipy.linalg.lstsq``).

    Parameters
    ----------
    A : tensor, shape (..., m, n)
        Any rank (rank-deficient ``A`` gives the minimum-norm solution).
    B : tensor, shape (..., m) or (..., m, k)
    rcond : float, optional
        Singular values ``<= rcond * max(S)`` count as zero (default
        ``eps * max(m, n)``).
    driver : {"gelsd", "gelsy", "gelss"}
        LAPACK driver on the CPU; other devices use QR (full rank only).
        The NKI path (float32, ``m >= n``) is QR too: full-rank ``A`` is
        solved on the kernels, ``rcond`` is not consulted, and ``s`` comes
        back empty (as from ``gels``); a rank-deficient ``A`` (an ``R``
        diagonal entry below ``max(m, n) eps32 max|r_ii|``) is answered by
        the torch path's ``driver``.

    Returns
    -------
    x : tensor, shape (..., n) or (..., n, k)
    residues : tensor
        Squared 2-norm of each residual column when ``m > n`` and ``A`` has
        full rank, else an empty tensor.
    rank : tensor of int64
    s : tensor
        Singular values of ``A`` (gelsd/gelss), empty otherwise.

    Examples
    --------
    >>> import torch, trnsolver
    >>> A = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=torch.float64)
    >>> x, res, rank, s = trnsolver.lstsq(A, torch.tensor([1.0, 1.0, 2.0], dtype=torch.float64))
    >>> [round(v, 12) for v in x.tolist()], int(rank)
    ([1.0, 1.0], 2)
    """
    where = "lstsq"
    A = la.matrix(A, "A", where)
    Bt = validate.tensor(B, "B", where, la.LINALG_DTYPES)
    validate.agree(where, A=A, B=Bt)
    vec = Bt.dim() == A.dim() - 1
    Bm = Bt.unsqueeze(-1) if vec else Bt
    if Bm.dim() < 2 or Bm.shape[-2] != A.shape[-2]:
        raise validate.mismatch(where, f"B must have {A.shape[-2]} rows", A=A, B=Bt)
    rcond = None if rcond is None else validate.positive(rcond, "rcond", where, zero_ok=True)
    driver = _LSTSQ_DRIVER(driver, "driver", where)
    la.check_finite(check_finite, where, A=A, B=Bm)
    X, res, rank, sv = LSTSQ(A, Bm, rcond, driver)
    if res.dim() == 1 and res.numel() and not torch.compiler.is_compiling():  # the operator's flat residues
        res = res.reshape(*Bm.shape[:-2], Bm.shape[-1])
    if vec:
        X = X.squeeze(-1)
        res = res.squeeze(-1) if res.numel() else res
    return X, res, rank, sv


# ============================================================= inverses, det

INV = Op("trnsolver.inv", "flops", _LU_THRESHOLD, size=_flops(2.0), describe=_square_describe,
         doc="inverse: the device LU solve with B = I",
         schema="(Tensor A) -> (Tensor, Tensor)",
         fake=lambda A: (torch.empty_like(A), A.new_empty(A.shape[:-2], dtype=torch.int32)))


@INV.lowering("torch")
def _inv_torch(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.linalg.inv_ex(A)


@precision.computes_in("float32")
@validate.numpy_io
def inv(A, *, check_finite=True):
    """Inverse of a square matrix (LU).

    Raises
    ------
    LinAlgError
        ``A`` is exactly singular (names the zero pivot).

    Examples
    --------
    >>> import torch, trnsolver
    >>> trnsolver.inv(torch.tensor([[2.0, 0.0], [0.0, 4.0]])).tolist()
    [[0.5, 0.0], [0.0, 0.25]]
    """
    where = "inv"
    A = la.square_matrix(A, "A", where)
    la.check_finite(check_finite, where, A=A)
    X, info = INV(A)
    _raise_info(where, info, _SINGULAR)
    return X


INV_SPD = Op("trnsolver.inv_spd", "flops", _SPD_THRESHOLD, size=_flops(1.0), describe=_square_describe,
             doc="SPD inverse (potri): the device Cholesky, then two TRSM kernels with B = I",
             schema="(Tensor A) -> (Tensor, Tensor)",
             fake=lambda A: (torch.empty_like(A), A.new_empty(A.shape[:-2], dtype=torch.int32)))


@INV_SPD.lowering("torch")
def _inv_spd_torch(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    L, info = torch.linalg.cholesky_ex(A)
    X = torch.cholesky_inverse(L)
    return X, info


@precision.computes_in("float32")
@validate.numpy_io
def inv_spd(A, *, check_finite=True):
    """Inverse of a Hermitian positive definite matrix via Cholesky (``potri``).

    Raises
    ------
    LinAlgError
        ``A`` is not positive definite (names the leading minor).

    Examples
    --------
    >>> import torch, trnsolver
    >>> X = trnsolver.inv_spd(torch.tensor([[4.0, 0.0], [0.0, 2.0]], dtype=torch.float64))
    >>> [round(v, 12) for v in X.diagonal().tolist()]
    [0.25, 0.5]
    """
    where = "inv_spd"
    A = la.square_matrix(A, "A", where)
    la.check_finite(check_finite, where, A=A)
    if A.shape[-1] == 0:
        return A.clone()
    X, info = INV_SPD(A)
    _raise_info(where, info, _NOT_PD)
    return X


SLOGDET = Op("trnsolver.slogdet", "flops", _LU_THRESHOLD, size=_flops(2 / 3), describe=_square_describe,
             doc="sign and log|det| from the device LU's diagonal and pivots",
             schema="(Tensor A) -> (Tensor, Tensor)",
             fake=lambda A: (A.new_empty(A.shape[:-2]), A.new_empty(A.shape[:-2], dtype=_real(A.dtype))))


@SLOGDET.lowering("torch")
def _slogdet_torch(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return tuple(torch.linalg.slogdet(A))


@precision.computes_in("float32")
@validate.numpy_io
def det(A):
    """Determinant (LU); 0 for a singular matrix, 1 for an empty one.

    Examples
    --------
    >>> import torch, trnsolver
    >>> float(trnsolver.det(torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64)))
    -2.0
    """
    where = "det"
    A = la.square_matrix(A, "A", where)
    sign, logabs = SLOGDET(A)
    return sign * torch.exp(logabs).to(sign.dtype)


@precision.computes_in("float32")
@validate.numpy_io
def slogdet(A):
    """Sign (or phase) and natural log of ``|det(A)|``, without overflow.

    Returns
    -------
    sign : tensor, shape (...)
        ``+-1`` (a unit complex number for complex ``A``), 0 if singular.
    logabsdet : tensor, real, shape (...)
        ``-inf`` if singular.

    Examples
    --------
    >>> import torch, trnsolver
    >>> s, l = trnsolver.slogdet(torch.eye(3, dtype=torch.float64) * 1e200)
    >>> float(s), round(float(l), 3)
    (1.0, 1381.551)
    """
    where = "slogdet"
    A = la.square_matrix(A, "A", where)
    return SLOGDET(A)


# ===================================================== inverse square roots

INV_SQRT_SPD = Op("trnsolver.inv_sqrt_spd", "flops", _SPD_THRESHOLD, size=_flops(9.0), describe=_square_describe,
                  doc="A^{-1/2} by the eigendecomposition: Jacobi kernel, then one GEMM kernel",
                  schema="(Tensor A, float? min_eig) -> (Tensor, Tensor)",
                  fake=lambda A, min_eig: (torch.empty_like(A), A.new_empty(A.shape[:-2], dtype=_real(A.dtype))))


@INV_SQRT_SPD.lowering("torch")
def _inv_sqrt_spd_torch(A: torch.Tensor, min_eig: float | None) -> tuple[torch.Tensor, torch.Tensor]:
    w, V = torch.linalg.eigh(A)
    wmin = w[..., 0] if w.shape[-1] else w.new_zeros(A.shape[:-2])
    if min_eig is not None:
        w = w.clamp(min=min_eig)
    s = torch.where(w > 0, w, torch.ones_like(w)).rsqrt()
    return (V * s.unsqueeze(-2).to(V.dtype)) @ V.mH, wmin


@precision.computes_in("float32")
@validate.numpy_io
def inv_sqrt_spd(A, *, min_eig=None, check_finite=True):
    """``A^{-1/2}`` of a Hermitian positive definite matrix, from its eigendecomposition.

    Parameters
    ----------
    A : tensor, shape (..., n, n)
        Hermitian positive definite (lower triangle read).
    min_eig : float, optional
        Clamp the eigenvalues to ``>= min_eig > 0`` before inverting (an
        explicit regularisation, e.g. for a nearly singular density-fitting
        metric). Without it a non-positive eigenvalue raises.

    Returns
    -------
    X : tensor, shape (..., n, n), Hermitian, ``X A X = I``

    Raises
    ------
    LinAlgError
        ``A`` has an eigenvalue ``<= 0`` and ``min_eig`` was not given.

    Examples
    --------
    >>> import torch, trnsolver
    >>> trnsolver.inv_sqrt_spd(torch.tensor([[4.0, 0.0], [0.0, 16.0]], dtype=torch.float64)).tolist()
    [[0.5, 0.0], [0.0, 0.25]]
    """
    where = "inv_sqrt_spd"
    A = la.square_matrix(A, "A", where)
    min_eig = None if min_eig is None else validate.positive(min_eig, "min_eig", where)
    la.check_finite(check_finite, where, A=A)
    if A.shape[-1] == 0:
        return A.clone()
    X, wmin = INV_SQRT_SPD(A, min_eig)
    if min_eig is None and wmin.numel() and bool((wmin <= 0).any()):
        i = int(torch.nonzero((wmin <= 0).reshape(-1))[0])
        bidx = la.batch_index(i, tuple(wmin.shape))
        at = f" (batch index {bidx})" if bidx else ""
        raise la.LinAlgError(f"{where}: A is not positive definite: smallest eigenvalue "
                             f"{float(wmin.reshape(-1)[i]):.3e}{at}; pass min_eig= to clamp explicitly",
                             batch_index=bidx)
    return X


def _ns_flops(A, max_iters, tol):
    return 6.0 * A.shape[-1] ** 3 * _batch(A)  # one step: three n x n x n GEMMs


#: Op ``(A, max_iters, tol) -> (X, iters, residual)``; metric: flops of one
#: Newton-Schulz step. Threshold: no Trainium here to calibrate on; the
#: device path is three trnblas GEMM kernels a step, so it follows trnblas's
#: GEMM threshold (512^3 multiply-adds, i.e. 6 * 512^3 / 3 flops per GEMM).
INV_SQRT_SPD_NS = Op("trnsolver.inv_sqrt_spd_ns", "flops", 2.0 * 512 ** 3 * 3, size=_ns_flops,
                     describe=_square_describe, doc="Newton-Schulz A^{-1/2} on trnblas GEMM kernels",
                     # the step count and the residual cross as 0-d tensors (the lowering's Python numbers)
                     schema="(Tensor A, int max_iters, float tol) -> (Tensor X, Tensor iterations, Tensor residual)",
                     fake=lambda A, max_iters, tol: (torch.empty_like(A), A.new_empty((), dtype=torch.int64),
                                                     A.new_empty((), dtype=A.real.dtype)))
INV_SQRT_SPD_NS.boundary(lambda A, max_iters, tol: (A, max_iters, tol), lambda A, max_iters, tol: (A, max_iters, tol),
                         lambda out, A, max_iters, tol: (out[0], torch.tensor(int(out[1]), dtype=torch.int64,
                                                                              device=A.device),
                                                         torch.tensor(float(out[2]), dtype=A.real.dtype,
                                                                      device=A.device)))


@INV_SQRT_SPD_NS.backward(
    formula="A = V diag(w) V^H: dA = V ((V^H g V) * K) V^H, K_ij = -1 / (s_i s_j (s_i + s_j)), s = sqrt(w) "
            "(the Daleckii-Krein derivative of A^{-1/2}; exact at convergence)",
    runs="torch: one eigendecomposition of A and four products")
def _inv_sqrt_spd_ns_backward(inputs, output, grad, needs):
    A = inputs[0]
    g = grad[0]
    if g is None or not needs[0]:
        return (None, None, None)
    w, V = torch.linalg.eigh(A)
    sq = w.clamp_min(torch.finfo(w.dtype).tiny).sqrt()
    K = -1.0 / (sq[..., :, None] * sq[..., None, :] * (sq[..., :, None] + sq[..., None, :]))
    Vh = V.mH
    return (V @ ((Vh @ g @ V) * K.to(V.dtype)) @ Vh, None, None)


@INV_SQRT_SPD_NS.lowering("torch")
def _inv_sqrt_spd_ns_torch(A: torch.Tensor, max_iters: int, tol: float) -> tuple[torch.Tensor, int, float]:
    """Coupled Newton-Schulz on GEMMs (the reference for the NKI kernel).

    ``Y0 = A / s``, ``Z0 = I`` with ``s = ||A||_F`` (>= the spectral radius,
    so the spectrum of ``Y0`` lies in (0, 1]); each step
    ``T = (3 I - Z Y) / 2``, ``Y <- Y T``, ``Z <- T Z``; then
    ``Z -> (A/s)^{-1/2}``. Three GEMMs a step (``Z Y``, ``Y T``, ``T Z``),
    all through ``trnblas.gemm``; the residual is ``||I - Z Y||_F / sqrt(n)``
    from the product the next step needs anyway.
    """
    import trnblas

    n = A.shape[-1]
    s = torch.linalg.matrix_norm(A).real.clamp_min(torch.finfo(A.real.dtype).tiny)
    eye = torch.eye(n, dtype=A.dtype, device=A.device)
    Y = A / s[..., None, None].to(A.dtype)
    Z = eye.expand_as(A).clone()
    ZY = Y
    res = float("inf")
    it = 0
    for it in range(max_iters + 1):
        R = eye - ZY
        res = float(torch.linalg.matrix_norm(R).max()) / max(n, 1) ** 0.5
        if res <= tol or it == max_iters:
            break
        T = eye + 0.5 * R
        Y = trnblas.gemm(1.0, Y, T)
        Z = trnblas.gemm(1.0, T, Z)
        ZY = trnblas.gemm(1.0, Z, Y)
    return Z * s.rsqrt()[..., None, None].to(A.dtype), it, res


@precision.computes_in("float32")
@validate.numpy_io
def inv_sqrt_spd_ns(A, *, max_iters=20, tol=1e-7, on_fail="warn", check_finite=True):
    """``A^{-1/2}`` by the coupled Newton-Schulz iteration (GEMMs only).

    Parameters
    ----------
    A : tensor, shape (..., n, n)
        Hermitian positive definite; only its lower triangle is read (as in
        every SPD routine here). Converges for any such ``A``; the
        number of steps grows like ``log2(cond(A))`` plus a few quadratic
        ones, so prefer :func:`inv_sqrt_spd` beyond ``cond ~ 1e6``.
    max_iters : int
    tol : float
        Stop when ``||I - Z Y||_F / sqrt(n) <= tol``.
    on_fail : {"warn", "raise"}
        Not converged after ``max_iters``: a ``ConvergenceWarning`` (default)
        or a ``ConvergenceError``.

    Returns
    -------
    X : tensor, shape (..., n, n)
    iters : int
        Steps taken.
    residual : float
        Final ``||I - Z Y||_F / sqrt(n)`` (largest over the batch).

    Notes
    -----
    Every step is three matrix products through ``trnblas.gemm`` -- the
    workload the Tensor Engine is built for; see the docs for the kernel plan.

    Examples
    --------
    >>> import torch, trnsolver
    >>> A = torch.tensor([[4.0, 0.0], [0.0, 9.0]], dtype=torch.float64)
    >>> X, iters, res = trnsolver.inv_sqrt_spd_ns(A, tol=1e-12)
    >>> [round(v, 8) for v in X.diagonal().tolist()], res <= 1e-12
    ([0.5, 0.33333333], True)
    """
    where = "inv_sqrt_spd_ns"
    A = la.square_matrix(A, "A", where)
    max_iters = validate.integer(max_iters, "max_iters", where, minimum=0, maximum=validate.INDEX_MAX)
    tol = validate.positive(tol, "tol", where)
    on_fail = it_.ON_FAIL(on_fail, "on_fail", where)
    la.check_finite(check_finite, where, A=A)
    if A.shape[-1] == 0:
        return A.clone(), 0, 0.0
    A = la.symmetric(A, "L", hermitian=True)  # the products read both triangles; the caller gave the lower
    X, iters, res = INV_SQRT_SPD_NS(A, max_iters, float(tol))
    if isinstance(iters, torch.Tensor):  # the operator's 0-d tensors: host values, or (compiling) kept
        if torch.compiler.is_compiling():
            return X, iters, res  # no host read of the residual in a graph: no convergence report
        iters, res = int(iters), float(res.detach())
    info = it_.SolverInfo(iters, res, res <= tol, method=where)
    it_.report(where, info, on_fail, tol)
    return X, iters, res



# ================================================================ derivatives
#
# Declared backwards (trnsci.operators): each is built from forward Op calls -- the solves of this
# module and trnblas GEMMs -- so under a kernel backend the backward runs kernels as the forward does.
# Ops without one (LU, QR, SVD, pinv, the eigendecomposition) take the vjp of their torch lowering.


def _mm(a: torch.Tensor, b: torch.Tensor, ta: str = "N", tb: str = "N") -> torch.Tensor:
    """``op(a) @ op(b)`` as one trnblas GEMM (2-D) or batched GEMM (leading dimensions broadcast)."""
    from trnblas.level3 import BATCHED_GEMM, GEMM

    if a.dim() == 2 and b.dim() == 2:
        return GEMM(1.0, a.contiguous(), b.contiguous(), 0.0, None, ta, tb)
    lead = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a3 = a.expand(*lead, *a.shape[-2:]).reshape(-1, *a.shape[-2:]).contiguous()
    b3 = b.expand(*lead, *b.shape[-2:]).reshape(-1, *b.shape[-2:]).contiguous()
    out = BATCHED_GEMM(1.0, a3, b3, 0.0, None, ta, tb)
    return out.reshape(*lead, *out.shape[-2:])


def _h(t: torch.Tensor) -> str:
    return "C" if t.is_complex() else "T"


def _sum_to(g: torch.Tensor, shape) -> torch.Tensor:
    """``g`` summed over the batch dimensions broadcast against an input of ``shape``."""
    if tuple(g.shape) == tuple(shape):
        return g
    extra = g.dim() - len(shape)
    if extra:
        g = g.sum(tuple(range(extra)))
    dims = tuple(i for i, s in enumerate(shape) if s == 1 and g.shape[i] != 1)
    return g.sum(dims, keepdim=True) if dims else g


def _lower_hermitian_grad(G: torch.Tensor) -> torch.Tensor:
    """The gradient on the stored lower triangle of a Hermitian matrix read as ``tril(A) + tril(A, -1)^H``,
    from the gradient ``G`` on the full matrix: ``tril(G, -1) + tril(G^H, -1)`` plus ``G``'s diagonal (its
    real part for complex data: the factorizations read the diagonal's real part)."""
    d = G.diagonal(dim1=-2, dim2=-1)
    if G.is_complex():
        d = d.real.to(G.dtype)
    return G.tril(-1) + G.mH.tril(-1) + torch.diag_embed(d)


def _inv_backward(inputs, output, grad, needs):
    (A,) = inputs
    X = output[0]
    g = grad[0]
    if not needs[0] or g is None:
        return (None,)
    # X = A^{-1}: dA = -X^H g X^H
    return (-_mm(_mm(X, g, _h(X)), X, "N", _h(X)),)


INV.backward(_inv_backward, formula="dA = -X^H g X^H (X = A^{-1})", runs="two trnblas GEMMs")


def _inv_spd_backward(inputs, output, grad, needs):
    (A,) = inputs
    X = output[0]
    g = grad[0]
    if not needs[0] or g is None:
        return (None,)
    return (_lower_hermitian_grad(-_mm(_mm(X, g, _h(X)), X, "N", _h(X))),)


INV_SPD.backward(_inv_spd_backward, formula="dA = -X g X (X = A^{-1} Hermitian) on A's lower triangle "
                 "(mirrored entries added)", runs="two trnblas GEMMs")


def _solve_spd_backward(inputs, output, grad, needs):
    A, B, refine = inputs
    X = output[0]
    g = grad[0]
    if g is None:
        return None, None, None
    dB = SOLVE_SPD(A, g.contiguous(), refine)[0]  # A Hermitian: A^{-H} g = A^{-1} g
    gA = _lower_hermitian_grad(_sum_to(-_mm(dB, X, "N", _h(X)), A.shape)) if needs[0] else None
    return gA, (_sum_to(dB, B.shape) if needs[1] else None), None


SOLVE_SPD.backward(_solve_spd_backward, formula="dB = A^{-1} g; dA = -dB X^H on A's lower triangle "
                   "(mirrored entries added)", runs="one `trnsolver.solve_spd` call and one trnblas GEMM")


def _cho_solve_backward(inputs, output, grad, needs):
    F, B, lower = inputs
    X, g = output, grad
    dB = CHO_SOLVE(F, g.contiguous(), lower)  # A = F F^H (or F^H F) is Hermitian
    gF = None
    if needs[0]:
        gA = _sum_to(-_mm(dB, X, "N", _h(X)), F.shape)
        S = gA + gA.mH
        # A = L L^H: grad L = (gA + gA^H) L on the lower triangle; A = U^H U: grad U = U (gA + gA^H) upper
        gF = _mm(S, F.tril()).tril() if lower else _mm(F.triu(), S).triu()
    return gF, (_sum_to(dB, B.shape) if needs[1] else None), None


CHO_SOLVE.backward(_cho_solve_backward, formula="dB = A^{-1} g; dF = (dA + dA^H) L (lower) or U (dA + dA^H) "
                   "(upper) with dA = -dB X^H", runs="one `trnsolver.cho_solve` call and trnblas GEMMs")


_ADJOINT = {"N": "C", "C": "N"}


def _lu_solve_backward(inputs, output, grad, needs):
    LU_, piv1, B, trans = inputs
    X, g = output, grad.contiguous()
    cplx = LU_.is_complex()
    if trans == "T" and cplx:  # (A^T)^{-H} g = conj(A^{-1} conj(g))
        dB = LU_SOLVE(LU_, piv1, g.conj().resolve_conj(), "N").conj().resolve_conj()
    else:  # op(A)^{-H} g: the adjoint solve
        dB = LU_SOLVE(LU_, piv1, g, _ADJOINT.get(trans, "N"))
    gLU = None
    if needs[0]:
        if trans == "N":
            gA = -_mm(dB, X, "N", _h(X))
        elif trans == "T" and cplx:
            gA = -_mm(X.conj(), dB, "N", "T")
        else:
            gA = -_mm(X, dB, "N", _h(X))
        gA = _sum_to(gA, LU_.shape)
        P, L, U = torch.lu_unpack(LU_, piv1)
        PtG = _mm(P, gA, _h(P))
        # A = P L U: grad L = P^T gA U^H (strictly lower, unit diagonal), grad U = L^H P^T gA (upper)
        gLU = _mm(PtG, U, "N", _h(U)).tril(-1) + _mm(L, PtG, _h(L)).triu()
    return gLU, None, (_sum_to(dB, B.shape) if needs[2] else None), None


LU_SOLVE.backward(_lu_solve_backward, formula="dB = op(A)^{-H} g; d lu = tril(P^T dA U^H, -1) + triu(L^H P^T dA) "
                  "with dA = -dB X^H (A = P L U)", runs="one `trnsolver.lu_solve` call and trnblas GEMMs")


def _slogdet_backward(inputs, output, grad, needs):
    (A,) = inputs
    sign = output[0]
    gsign, glog = grad
    if not needs[0]:
        return (None,)
    # with t = tr(A^{-1} dA): d logabsdet = Re t and (complex) d sign = i Im(t) sign, so
    # grad A = (g_logabsdet + i Im(conj(sign) g_sign)) A^{-H}; a real sign is piecewise constant
    c = glog if glog is not None else torch.zeros(A.shape[:-2], dtype=_real(A.dtype), device=A.device)
    if A.is_complex():
        c = c.to(A.dtype)
        if gsign is not None:
            c = c + 1j * (sign.conj() * gsign).imag
    X = INV(A)[0]
    return (c[..., None, None] * X.mH,)


SLOGDET.backward(_slogdet_backward, formula="dA = (g_logabsdet + i Im(conj(sign) g_sign)) A^{-H} (real: the sign is "
                 "piecewise constant)", runs="one `trnsolver.inv` call")


def _solve_backward(inputs, output, grad, needs):
    A, B = inputs
    X = output[0]
    g = grad[0]
    if g is None:
        return None, None
    dB = SOLVE(A.mH.contiguous(), g.contiguous())[0]  # A^{-H} g: the solve with A^H
    gA = _sum_to(-_mm(dB, X, "N", _h(X)), A.shape) if needs[0] else None
    return gA, (_sum_to(dB, B.shape) if needs[1] else None)


SOLVE.backward(_solve_backward, formula="dB = A^{-H} g; dA = -dB X^H", runs="one `trnsolver.solve` call (with A^H) "
               "and one trnblas GEMM")
