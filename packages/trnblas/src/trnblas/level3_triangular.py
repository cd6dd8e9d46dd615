"""BLAS level 3, triangular: ``trmm`` (through ``GEMM``) and ``trsm``.

Op ``TRSM`` ``(alpha, A, B, side, uplo, trans, diag) -> X``; torch lowering
here, NKI lowering in :mod:`trnblas._nki.level3`.
"""

from __future__ import annotations

import torch

from trnblas.level3_gemm import _cplx, _run_gemm
from trnsci import linalg as la
from trnsci import validate
from trnsci.dispatch import Op

__all__ = ["trmm", "trsm", "TRSM"]


def _trsm_flops(alpha, A, B, side, uplo, trans, diag):
    m, n = B.shape
    return (m * m * n if side == "L" else m * n * n) * _cplx(A)


def _trsm_describe(alpha, A, B, side, uplo, trans, diag):
    m, n = B.shape
    return f"solve op(A) X = B, B {m}x{n}   (side={side!r}, uplo={uplo!r}, trans={trans!r}, diag={diag!r})"


TRSM = Op(
    "trnblas.trsm", "flops", 512**3, size=_trsm_flops, describe=_trsm_describe,
    doc="X with op(A) X = alpha B or X op(A) = alpha B, A triangular; flops = m^2 n (left)",
    schema="(Scalar alpha, Tensor A, Tensor B, str side, str uplo, str trans, str diag) -> Tensor",
    fake=lambda alpha, A, B, side, uplo, trans, diag: torch.empty_like(B),
    half="float32",  # the torch lowering: bf16/fp16 solved in float32, rounded once, by the core
)


@TRSM.lowering("torch")
def _trsm_torch(alpha, A, B, side, uplo, trans, diag):
    upper = uplo == "U"
    a = la.op(A, trans)
    if trans != "N":
        upper = not upper
    X = torch.linalg.solve_triangular(a, B, upper=upper, left=side == "L", unitriangular=diag == "U")
    if alpha != 1:  # in place, unless autograd records the solve (its backward reads X)
        X = X * alpha if X.requires_grad else X.mul_(alpha)
    return X


def _trsm_backward(inputs, output, g, needs):
    """X = alpha op(T)^-1 B (left) or alpha B op(T)^-1 (right). W = op(T)^-H g (left; g op(T)^-H right) is
    one more solve; grad B = conj(alpha) W; grad op(T) = -W X^H (left; -X^H W right), one GEMM, put back
    through op and kept on T's triangle (strict for a unit diagonal)."""
    from trnblas.level2 import _adjoint, _back_through
    from trnblas.level3_gemm import GEMM

    alpha, A, B, side, uplo, trans, diag = inputs
    Ah, th = _adjoint(A, trans)
    W = TRSM(1.0, Ah, g, side, uplo, th, diag)
    gA = gB = None
    if needs[2]:
        gB = W * (alpha.conjugate() if isinstance(alpha, complex) else alpha) if alpha != 1 else W
    if needs[1]:
        h = "C" if A.is_complex() else "T"
        G = (GEMM(-1.0, W, output, 0.0, None, "N", h) if side == "L"
             else GEMM(-1.0, output, W, 0.0, None, h, "N"))
        G = _back_through(G, trans)
        gA = G.triu(1 if diag == "U" else 0) if uplo == "U" else G.tril(-1 if diag == "U" else 0)
    return None, gA, gB, None, None, None, None


TRSM.backward(_trsm_backward, formula="dB = conj(alpha) W with W = op(A)^-H g (left; g op(A)^-H right); "
              "dA = -W X^H (left; -X^H W right) put back through op, on A's triangle",
              runs="one `trnblas.trsm` and one `trnblas.gemm` call")


# ===================================================================== triangular

def _tri_operands(where, alpha, A, B, side, uplo, trans, diag):
    A = validate.matrix(A, "A", where, validate.ALL_FLOAT_DTYPES)
    B = validate.matrix(B, "B", where, validate.ALL_FLOAT_DTYPES)
    validate.agree(where, A=A, B=B)
    s = la.side(side, "side", where)
    u = la.uplo(uplo, "uplo", where)
    t = la.real_trans(la.trans(trans, "trans", where), A.dtype)
    d = la.diag(diag, "diag", where)
    alpha = validate.scalar(alpha, "alpha", where, complex_ok=A.dtype.is_complex)
    na = validate.square(A, "A", where)
    m, n = B.shape
    if na != (m if s == "L" else n):
        which = "rows" if s == "L" else "columns"
        raise validate.mismatch(where, f"side={s!r} needs A to be {which}(B) x {which}(B)", A=A, B=B)
    return alpha, A, B, s, u, t, d, m, n


@validate.numpy_io
def trmm(alpha, A, B, side="left", uplo="upper", trans=False, diag="nonunit", *, out=None):
    """Triangular matrix multiply: ``alpha op(A) B`` (left) or ``alpha B op(A)`` (right).

    Parameters
    ----------
    alpha : number
        ``alpha == 0`` returns zeros without reading ``A`` or ``B``.
    A : tensor, square
        Triangular: only its ``uplo`` triangle is read; with ``diag="unit"``
        its diagonal is not read either (taken as ones).
    B : tensor, shape (m, n)
    side : {"left", "right", "L", "R"}
    uplo : {"upper", "lower", "U", "L"}
    trans : bool or {"N", "T", "C"}
    diag : {"nonunit", "unit", "N", "U"}
    out : tensor, optional

    Returns
    -------
    tensor, shape (m, n)
        A new tensor (cuBLAS's out-of-place ``trmm``); ``B`` is not modified.

    Raises
    ------
    TypeError, ValueError
        dtypes, shapes, devices, option strings.

    Notes
    -----
    The triangle is extracted (O(n^2)) and multiplied as a :func:`gemm`.

    Examples
    --------
    >>> import torch, trnblas
    >>> A = torch.tensor([[2.0, 1.0], [9.0, 3.0]])
    >>> trnblas.trmm(1.0, A, torch.eye(2), uplo="upper").tolist()
    [[2.0, 1.0], [0.0, 3.0]]
    """
    where = "trmm"
    alpha, A, B, s, u, t, d, m, n = _tri_operands(where, alpha, A, B, side, uplo, trans, diag)
    if alpha == 0 or m == 0 or n == 0:
        return validate.finish(torch.zeros(m, n, dtype=A.dtype, device=A.device), out, where)
    T = la.triangle(A, u, d == "U")
    if s == "L":
        R = _run_gemm(where, alpha, T, B, 0, None, t, "N", m, n, m)
    else:
        R = _run_gemm(where, alpha, B, T, 0, None, "N", t, m, n, n)
    return validate.finish(R, out, where)


@validate.numpy_io
def trsm(alpha, A, B, side="left", uplo="upper", trans=False, diag="nonunit", *, out=None):
    """Triangular solve with many right-hand sides.

    Returns ``X`` with ``op(A) X = alpha B`` (side="left") or
    ``X op(A) = alpha B`` (side="right").

    Parameters
    ----------
    alpha : number
        ``alpha == 0`` returns zeros without reading ``A`` or ``B``.
    A : tensor, square
        Triangular: only its ``uplo`` triangle is read, and with
        ``diag="unit"`` not its diagonal (taken as ones). A zero on a
        non-unit diagonal gives Inf/NaN, as BLAS (no check).
    B : tensor, shape (m, n)
    side : {"left", "right", "L", "R"}
    uplo : {"upper", "lower", "U", "L"}
    trans : bool or {"N", "T", "C"}
    diag : {"nonunit", "unit", "N", "U"}
    out : tensor, optional

    Returns
    -------
    tensor, shape (m, n)
        A new tensor; ``B`` is not overwritten (unlike BLAS).

    Raises
    ------
    TypeError, ValueError
        dtypes, shapes, devices, option strings.

    Notes
    -----
    Runs the ``trnblas.trsm`` operation (NKI kernel for float32); the torch
    lowering is :func:`torch.linalg.solve_triangular`.

    Examples
    --------
    >>> import torch, trnblas
    >>> A = torch.tensor([[2.0, 0.0], [0.0, 4.0]])
    >>> trnblas.trsm(1.0, A, torch.ones(2, 1)).tolist()
    [[0.5], [0.25]]
    """
    where = "trsm"
    alpha, A, B, s, u, t, d, m, n = _tri_operands(where, alpha, A, B, side, uplo, trans, diag)
    if alpha == 0 or m == 0 or n == 0:
        return validate.finish(torch.zeros(m, n, dtype=A.dtype, device=A.device), out, where)
    X = TRSM(alpha, A, B, s, u, t, d)
    return validate.finish(X, out, where)


