"""BLAS level 2: matrix-vector operations (``cublas<t>gemv``, ``symv``, ``ger``, ``trsv``, ...).

Conventions as in level 3: option strings are case-insensitive
(``uplo`` "upper"/"lower"/"U"/"L", ``trans`` bool or "N"/"T"/"C", ``diag``
"nonunit"/"unit"/"N"/"U"); ``beta == 0`` never reads ``y``; ``alpha == 0``
never reads the matrix or vectors it multiplies; results are new tensors and
``out=`` receives them in place.

Level-2 work is one pass over a matrix: memory-bound. ``gemv``, ``symv``
(and ``hemv`` on real data), ``trmv``, ``trsv``, ``ger``/``geru``/``gerc``,
``syr``/``her`` and ``syr2``/``her2`` call :class:`~trnsci.dispatch.Op` objects
(``trnblas.gemv``, ...; size metric ``elements`` of the matrix) whose NKI
lowerings (:mod:`trnblas._nki.level2`) run the GEMV kernel
(:mod:`trnblas.kernels.gemv`), the rank-1/2 update kernel
(:mod:`trnblas.kernels.ger`) or, for ``trsv``, the TRSM kernel; each
reads the matrix once. Under ``"auto"`` matrices below 2^22 elements
(uncalibrated) stay on torch.

bfloat16/float16 data are accepted: the torch path computes in float32
and rounds the result once to the input dtype (the kernels accumulate in
fp32 PSUM / on the Vector Engine in fp32), so each result entry is within
``n * 2^-24 * sum |a_ij x_j|`` plus one final rounding (2^-8 relative for
bf16, 2^-11 for fp16) of the exact value on the rounded inputs.
"""

from __future__ import annotations

import torch

from trnsci import linalg as la
from trnsci import validate
from trnsci.dispatch import Op
from trnsci.settled import call, public, settles

__all__ = ["gemv", "symv", "hemv", "ger", "geru", "gerc", "syr", "syr2", "her", "her2", "trmv", "trsv"]


#: What level 2 accepts: the BLAS dtypes plus bfloat16/float16 (computed in float32).
DTYPES = validate.ALL_FLOAT_DTYPES


def _shape(*args):
    """(rows, cols) of the call's matrix (for a rank update without A: len(x) x len(y or x))."""
    ts = [a for a in args if isinstance(a, torch.Tensor)]
    mats = [t for t in ts if t.dim() == 2]
    if mats:
        return tuple(mats[0].shape)
    return ts[0].shape[0], ts[-1].shape[0]


#: Elements below which "auto" keeps a level-2 call on torch.
_THRESHOLD = 2 ** 22


def _first_tensor_dtype(*args):
    return next(t.dtype for t in args if isinstance(t, torch.Tensor))


#: The keyword arguments every level-2 Op shares: its size (the matrix's m n), dtype (the first tensor's),
#: description, and bf16/fp16 computed in float32 and rounded once, by the core (trnsci.precision).
_MAT = dict(size=lambda *a: _shape(*a)[0] * _shape(*a)[1], dtype=_first_tensor_dtype,
            describe=lambda *a: "A {}x{}".format(*_shape(*a)), half="float32")


def _outer_fake(x, y):
    return x.new_empty((x.shape[0], y.shape[0]))


# the fake implementations: the result's shape, dtype and device from the inputs' (nothing computed)
GEMV = Op("trnblas.gemv", "elements", _THRESHOLD, doc="alpha op(A) x + beta y; elements = m n",
          schema="(Scalar alpha, Tensor A, Tensor x, Scalar beta, Tensor? y, str t) -> Tensor",
          fake=lambda alpha, A, x, beta, y, t: A.new_empty((A.shape[0] if t == "N" else A.shape[1],)), **_MAT)
SYMV = Op("trnblas.symv", "elements", _THRESHOLD,
          doc="alpha A x + beta y, A symmetric/Hermitian from one triangle; elements = n^2",
          schema="(Scalar alpha, Tensor A, Tensor x, Scalar beta, Tensor? y, str u, bool hermitian) -> Tensor",
          fake=lambda alpha, A, x, beta, y, u, hermitian: A.new_empty((A.shape[0],)), **_MAT)
TRMV = Op("trnblas.trmv", "elements", _THRESHOLD, doc="op(A) x, A triangular; elements = n^2",
          schema="(Tensor A, Tensor x, str u, str t, str d) -> Tensor",
          fake=lambda A, x, u, t, d: A.new_empty((A.shape[0],)), **_MAT)
TRSV = Op("trnblas.trsv", "elements", _THRESHOLD, doc="solve op(A) z = x, A triangular; elements = n^2",
          schema="(Tensor A, Tensor x, str u, str t, str d) -> Tensor", fake=lambda A, x, u, t, d: torch.empty_like(x),
          **_MAT)
GER = Op("trnblas.ger", "elements", _THRESHOLD, doc="A + alpha x y^T (or y^H); elements = m n",
         schema="(Scalar alpha, Tensor x, Tensor y, Tensor? A, bool conj) -> Tensor",
         fake=lambda alpha, x, y, A, conj: _outer_fake(x, y), **_MAT)
SYR = Op("trnblas.syr", "elements", _THRESHOLD,
         doc="A + alpha x x^T (x^H), full matrix before the triangle merge; elements = n^2",
         schema="(Scalar alpha, Tensor x, Tensor? A, bool herm) -> Tensor",
         fake=lambda alpha, x, A, herm: _outer_fake(x, x), **_MAT)
SYR2 = Op("trnblas.syr2", "elements", _THRESHOLD,
          doc="A + alpha x y^T + alpha y x^T (Hermitian: conj), full; elements = n^2",
          schema="(Scalar alpha, Tensor x, Tensor y, Tensor? A, bool herm) -> Tensor",
          fake=lambda alpha, x, y, A, herm: _outer_fake(x, x), **_MAT)


@GEMV.lowering("torch")
def _gemv_torch(alpha, A, x, beta, y, t):
    if y is None and t == "N" and alpha == 1:  # the plain product: no branch below
        return torch.mv(A, x)
    return _mv("gemv", alpha, A if t == "N" else la.op(A, t), x, beta, y)


@settles(_gemv_torch)
def _(alpha, A, x, beta, y, t):
    if t != "N" or A.shape[0] == 0 or A.shape[1] == 0 or alpha == 0:
        return None  # what _mv branches on, all of it fixed by the settled key
    if y is None or beta == 0:
        return (torch.mv, (1, 2)) if alpha == 1 else None
    return _addmv


def _addmv(alpha, A, x, beta, y, t):
    return torch.addmv(y, A, x, beta=beta, alpha=alpha)


@SYMV.lowering("torch")
def _symv_torch(alpha, A, x, beta, y, u, hermitian):
    return _mv("symv", alpha, la.symmetric(A, u, hermitian), x, beta, y)


@TRMV.lowering("torch")
def _trmv_torch(A, x, u, t, d):
    return _mv("trmv", 1.0, la.op(la.triangle(A, u, d == "U"), t), x, 0.0, None)


@TRSV.lowering("torch")
def _trsv_torch(A, x, u, t, d):
    upper = (u == "U") != (t != "N")
    z = torch.linalg.solve_triangular(la.op(A, t), x.unsqueeze(1), upper=upper, unitriangular=d == "U")
    return z.squeeze(1)


@GER.lowering("torch")
def _ger_torch(alpha, x, y, A, conj):
    yy = y.conj() if conj and y.is_complex() else y
    if A is None:
        R = torch.outer(x, yy)
        if alpha != 1:
            R.mul_(alpha)
        return R
    # alpha == 1 without the keyword: torch.addr parses and applies a given alpha
    # (docs/perf-notes.md#design-fast-paths)
    return torch.addr(A, x, yy) if alpha == 1 else torch.addr(A, x, yy, alpha=alpha)


@settles(_ger_torch)
def _(alpha, x, y, A, conj):
    if conj and y.is_complex():
        return None
    if A is None:
        return (torch.outer, (1, 2)) if alpha == 1 else None
    return (torch.addr, (3, 1, 2)) if alpha == 1 else _addr


def _addr(alpha, x, y, A, conj):
    return torch.addr(A, x, y, alpha=alpha)


@SYR.lowering("torch")
def _syr_torch(alpha, x, A, herm):
    R = torch.outer(x, x.conj() if herm else x)
    if alpha != 1:
        R.mul_(alpha)
    if A is not None:
        R.add_(A)
    return R


@SYR2.lowering("torch")
def _syr2_torch(alpha, x, y, A, herm):
    P = torch.outer(x, y.conj() if herm else y)
    if alpha != 1:
        P.mul_(alpha)
    R = P + (P.mH if herm else P.mT)
    if A is not None:
        R.add_(A)
    return R


def _mv(where, alpha, a, x, beta, y):
    """``alpha a x + beta y`` for an (already transposed) matrix view ``a``."""
    m, n = a.shape
    if alpha == 0 or n == 0 or m == 0:
        if y is None or beta == 0:
            return torch.zeros(m, dtype=a.dtype, device=a.device)
        return y.clone() if beta == 1 else torch.mul(y, beta)
    if y is None or beta == 0:
        R = torch.mv(a, x)
        if alpha != 1:
            R.mul_(alpha)
        return R
    return torch.addmv(y, a, x, beta=beta, alpha=alpha)


def _check_mv(where, rows, cols, A, x, y, what):
    """Lengths of ``x`` and ``y`` against op(A); ``what`` is the message tail, or a function making it."""
    if x.shape[0] != cols:
        raise validate.mismatch(where, f"x must have {cols} entries ({what() if callable(what) else what})", A=A, x=x)
    if y is not None and y.shape[0] != rows:
        raise validate.mismatch(where, f"y must have {rows} entries ({what() if callable(what) else what})", A=A, y=y)


@public(GEMV, "scalar tensor tensor scalar tensor? flag")
def gemv(alpha, A, x, beta=0.0, y=None, trans=False, *, out=None):
    """General matrix-vector product: ``alpha op(A) x + beta y`` (``cublas<t>gemv``).

    Parameters
    ----------
    alpha, beta : number
        Complex only for complex data. ``beta == 0`` never reads ``y``;
        ``alpha == 0`` returns ``beta y`` without reading ``A`` or ``x``.
    A : tensor, shape (m, n)
    x : tensor, shape (n,), or (m,) when transposed
    y : tensor, shape (m,), or (n,) when transposed; optional
    trans : bool or {"N", "T", "C"}
    out : tensor, optional

    Returns
    -------
    tensor, shape (rows of op(A),)

    Raises
    ------
    TypeError
        Non-BLAS dtypes (float32/64, complex64/128), mixed dtypes, complex
        scalars for real data.
    ValueError
        Shapes (naming both arguments), devices, option strings.

    Examples
    --------
    >>> import torch, trnblas
    >>> trnblas.gemv(1.0, torch.ones(2, 3), torch.ones(3)).tolist()
    [3.0, 3.0]
    """
    where = "gemv"
    A = validate.matrix(A, "A", where, DTYPES)
    x = validate.vector(x, "x", where, DTYPES)
    if y is not None:
        y = validate.vector(y, "y", where, DTYPES)
    validate.agree3(where, A, x, y, ("A", "x", "y"))
    t = "N" if trans is False else la.real_trans(la.trans(trans, "trans", where), A.dtype)
    cplx = A.dtype.is_complex
    alpha = validate.scalar(alpha, "alpha", where, complex_ok=cplx)
    beta = validate.scalar(beta, "beta", where, complex_ok=cplx)
    rows, cols = A.shape if t == "N" else (A.shape[1], A.shape[0])
    _check_mv(where, rows, cols, A, x, y, lambda: f"op(A) is {rows}x{cols}, trans={t!r}")
    if alpha == 0 or rows == 0 or cols == 0:
        return validate.finish(_mv(where, 0, A if t == "N" else la.op(A, t), x, beta, y), out, where)
    y = y if beta != 0 else None
    if out is None:
        return call(GEMV, alpha, A, x, beta, y, t)
    return validate.finish(GEMV(alpha, A, x, beta, y, t), out, where)


def _symv_like(where, alpha, A, x, beta, y, uplo, hermitian, out):
    A = validate.matrix(A, "A", where, DTYPES)
    x = validate.vector(x, "x", where, DTYPES)
    if y is not None:
        y = validate.vector(y, "y", where, DTYPES)
    validate.agree(where, A=A, x=x, y=y)
    u = la.uplo(uplo, "uplo", where)
    alpha = validate.scalar(alpha, "alpha", where, complex_ok=A.dtype.is_complex)
    beta = validate.scalar(beta, "beta", where, complex_ok=A.dtype.is_complex)
    n = validate.square(A, "A", where)
    _check_mv(where, n, n, A, x, y, f"A is {n}x{n}")
    if alpha == 0 or n == 0:
        return validate.finish(_mv(where, 0, A, x, beta, y), out, where)
    y = y if beta != 0 else None
    R = SYMV(alpha, A, x, beta, y, u, hermitian)
    return validate.finish(R, out, where)


@validate.numpy_io
def symv(alpha, A, x, beta=0.0, y=None, uplo="upper", *, out=None):
    """Symmetric matrix-vector product: ``alpha A x + beta y`` (``cublas<t>symv``).

    Parameters
    ----------
    alpha, beta : number
    A : tensor, shape (n, n)
        Symmetric; only its ``uplo`` triangle (diagonal included) is read.
        For complex data ``A == A.T`` (``csymv``); see :func:`hemv`.
    x : tensor, shape (n,)
    y : tensor, shape (n,), optional
    uplo : {"upper", "lower", "U", "L"}
    out : tensor, optional

    Returns
    -------
    tensor, shape (n,)

    Raises
    ------
    TypeError, ValueError
        As :func:`gemv`; ``A`` not square.

    Examples
    --------
    >>> import torch, trnblas
    >>> A = torch.tensor([[1.0, 2.0], [float("nan"), 1.0]])
    >>> trnblas.symv(1.0, A, torch.ones(2)).tolist()
    [3.0, 3.0]
    """
    return _symv_like("symv", alpha, A, x, beta, y, uplo, False, out)


@validate.numpy_io
def hemv(alpha, A, x, beta=0.0, y=None, uplo="upper", *, out=None):
    """Hermitian matrix-vector product: ``alpha A x + beta y`` (``cublas<t>hemv``).

    Parameters
    ----------
    alpha, beta : number
    A : tensor, shape (n, n)
        Hermitian; only its ``uplo`` triangle is read, and the imaginary
        part of its diagonal is ignored, as in BLAS.
    x, y, uplo, out
        As in :func:`symv`.

    Returns
    -------
    tensor, shape (n,)

    Raises
    ------
    TypeError, ValueError
        As :func:`symv`.

    Examples
    --------
    >>> import torch, trnblas
    >>> A = torch.tensor([[1 + 5j, 1j], [0, 1]], dtype=torch.complex64)
    >>> trnblas.hemv(1, A, torch.ones(2, dtype=torch.complex64))
    tensor([1.+1.j, 1.-1.j])
    """
    return _symv_like("hemv", alpha, A, x, beta, y, uplo, True, out)


def _outer_operands(where, x, y, A, alpha, real_alpha=False):
    x = validate.vector(x, "x", where, DTYPES)
    if y is not None:
        y = validate.vector(y, "y", where, DTYPES)
    if A is not None:
        A = validate.matrix(A, "A", where, DTYPES)
    validate.agree(where, x=x, y=y, A=A)
    alpha = validate.scalar(alpha, "alpha", where, complex_ok=x.dtype.is_complex and not real_alpha)
    return x, y, A, alpha


@public(GER, "scalar tensor tensor tensor?")
def ger(alpha, x, y, A=None, *, conj=False, out=None):
    """Rank-1 update: ``A + alpha x y^T`` (``geru``), or ``A + alpha x y^H`` with ``conj=True`` (``gerc``).

    Parameters
    ----------
    alpha : number
        ``alpha == 0`` returns a copy of ``A`` without reading ``x``/``y``.
    x : tensor, shape (m,)
    y : tensor, shape (n,)
    A : tensor, shape (m, n), optional
        Zeros when omitted; not modified.
    conj : bool
        Conjugate ``y`` (complex data only; no effect on real data).
    out : tensor, optional

    Returns
    -------
    tensor, shape (m, n)

    Raises
    ------
    TypeError, ValueError
        dtypes, shapes (naming the arguments), devices.

    Examples
    --------
    >>> import torch, trnblas
    >>> trnblas.ger(2.0, torch.ones(2), torch.ones(3)).tolist()
    [[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]]
    """
    return _ger("ger", alpha, x, y, A, conj, out)


def _ger(where, alpha, x, y, A, conj, out):
    if type(conj) is not bool:
        raise TypeError(f"{where}: conj must be True or False, got {conj!r}")
    y = validate.vector(y, "y", where, DTYPES)  # required: only A may be omitted
    x, y, A, alpha = _outer_operands(where, x, y, A, alpha)
    m, n = x.shape[0], y.shape[0]
    if A is not None and tuple(A.shape) != (m, n):
        raise validate.mismatch(where, f"A must be ({m}, {n}) = (len(x), len(y))", x=x, y=y, A=A)
    if alpha == 0 or m == 0 or n == 0:
        R = A.clone() if A is not None else torch.zeros(m, n, dtype=x.dtype, device=x.device)
    else:
        if out is None:
            return call(GER, alpha, x, y, A, conj)
        R = GER(alpha, x, y, A, conj)
    return validate.finish(R, out, where)


@validate.numpy_io
def geru(alpha, x, y, A=None, *, out=None):
    """``A + alpha x y^T`` (``cublas<t>geru``); the same as :func:`ger`."""
    return _ger("geru", alpha, x, y, A, False, out)


@validate.numpy_io
def gerc(alpha, x, y, A=None, *, out=None):
    """``A + alpha x y^H`` (``cublas<t>gerc``); :func:`ger` with ``conj=True``."""
    return _ger("gerc", alpha, x, y, A, True, out)


def _sym_update(where, alpha, x, y, A, uplo, fill, hermitian, out):
    """``A + P (+ P^T or P^H)`` in one triangle; ``P = alpha x y^T`` (or ``x y^H``)."""
    full = la.fill(fill, where, given=A is not None)
    x, y, A, alpha = _outer_operands(where, x, y, A, alpha, real_alpha=hermitian and y is None)
    u = la.uplo(uplo, "uplo", where)
    n = x.shape[0]
    if y is not None and y.shape[0] != n:
        raise validate.mismatch(where, "x and y must have one length", x=x, y=y)
    if A is not None and tuple(A.shape) != (n, n):
        raise validate.mismatch(where, f"A must be ({n}, {n}) = (len(x), len(x))", x=x, A=A)
    herm = hermitian and x.is_complex()
    if alpha == 0 or n == 0:
        if A is not None and not full:
            return validate.finish(A.clone(), out, where)  # BLAS quick return: A untouched
        R = A.clone() if A is not None else torch.zeros(n, n, dtype=x.dtype, device=x.device)
        return validate.finish(la.merge_triangle(R, None, u, full, herm), out, where)
    if y is None:  # syr / her: A + alpha x x^T  or  A + alpha x x^H
        R = SYR(alpha, x, A, herm)
    else:  # syr2 / her2: A + P + P^T  or  A + P + P^H
        R = SYR2(alpha, x, y, A, herm)
    if herm:
        la.real_diagonal(R)
    return validate.finish(la.merge_triangle(R, A, u, full, herm), out, where)


@validate.numpy_io
def syr(alpha, x, A=None, uplo="upper", fill=None, *, out=None):
    """Symmetric rank-1 update of one triangle: ``A + alpha x x^T`` (``cublas<t>syr``).

    Parameters
    ----------
    alpha : number
        ``alpha == 0`` returns ``A`` unchanged (a copy).
    x : tensor, shape (n,)
    A : tensor, shape (n, n), optional
        Only its ``uplo`` triangle is updated; the other triangle of the
        result is ``A``'s, untouched.
    uplo : {"upper", "lower", "U", "L"}
    fill : {None, "full", "triangle"}
        ``None``: one triangle when ``A`` is given (BLAS), the whole
        symmetric matrix when it is omitted (nothing to preserve; the same
        rule as :func:`syrk`). ``"full"`` mirrors the updated triangle into
        the other one; ``"triangle"`` leaves the other one ``A``'s (zeros).
    out : tensor, optional

    Returns
    -------
    tensor, shape (n, n)

    Raises
    ------
    TypeError, ValueError
        dtypes, shapes, devices, option strings.

    Examples
    --------
    >>> import torch, trnblas
    >>> trnblas.syr(1.0, torch.tensor([1.0, 2.0])).tolist()
    [[1.0, 2.0], [2.0, 4.0]]
    >>> trnblas.syr(1.0, torch.tensor([1.0, 2.0]), fill="triangle").tolist()
    [[1.0, 2.0], [0.0, 4.0]]
    """
    return _sym_update("syr", alpha, x, None, A, uplo, fill, False, out)


@validate.numpy_io
def syr2(alpha, x, y, A=None, uplo="upper", fill=None, *, out=None):
    """Symmetric rank-2 update of one triangle: ``A + alpha (x y^T + y x^T)`` (``cublas<t>syr2``).

    Parameters
    ----------
    alpha : number
    x, y : tensor, shape (n,)
    A, uplo, fill, out
        As in :func:`syr`.

    Returns
    -------
    tensor, shape (n, n)

    Raises
    ------
    TypeError, ValueError
        As :func:`syr`.

    Examples
    --------
    >>> import torch, trnblas
    >>> trnblas.syr2(1.0, torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0]), fill="full").tolist()
    [[0.0, 1.0], [1.0, 0.0]]
    """
    y_ = validate.vector(y, "y", "syr2", DTYPES)
    return _sym_update("syr2", alpha, x, y_, A, uplo, fill, False, out)


@validate.numpy_io
def her(alpha, x, A=None, uplo="upper", fill=None, *, out=None):
    """Hermitian rank-1 update of one triangle: ``A + alpha x x^H`` (``cublas<t>her``).

    Parameters
    ----------
    alpha : real number
    x : tensor, shape (n,)
    A : tensor, shape (n, n), optional
        Hermitian; the imaginary part of its diagonal is discarded (except
        in BLAS's quick return, ``alpha == 0``, where ``A`` comes back as is).
    uplo, fill, out
        As in :func:`syr` (``fill="full"`` mirrors with conjugation).

    Returns
    -------
    tensor, shape (n, n)

    Raises
    ------
    TypeError
        Complex ``alpha``, plus :func:`syr`'s.
    ValueError
        As :func:`syr`.

    Examples
    --------
    >>> import torch, trnblas
    >>> trnblas.her(1.0, torch.tensor([1j], dtype=torch.complex64))
    tensor([[1.+0.j]])
    """
    return _sym_update("her", alpha, x, None, A, uplo, fill, True, out)


@validate.numpy_io
def her2(alpha, x, y, A=None, uplo="upper", fill=None, *, out=None):
    """Hermitian rank-2 update: ``A + alpha x y^H + conj(alpha) y x^H`` (``cublas<t>her2``).

    Parameters
    ----------
    alpha : number
        May be complex.
    x, y : tensor, shape (n,)
    A, uplo, fill, out
        As in :func:`her`.

    Returns
    -------
    tensor, shape (n, n)

    Raises
    ------
    TypeError, ValueError
        As :func:`syr`.

    Examples
    --------
    >>> import torch, trnblas
    >>> x = torch.tensor([1j], dtype=torch.complex64)
    >>> trnblas.her2(1.0, x, x)
    tensor([[2.+0.j]])
    """
    y_ = validate.vector(y, "y", "her2", DTYPES)
    return _sym_update("her2", alpha, x, y_, A, uplo, fill, True, out)


def _tri_mv_operands(where, A, x, uplo, trans, diag):
    A = validate.matrix(A, "A", where, DTYPES)
    x = validate.vector(x, "x", where, DTYPES)
    validate.agree(where, A=A, x=x)
    u = la.uplo(uplo, "uplo", where)
    t = la.real_trans(la.trans(trans, "trans", where), A.dtype)
    d = la.diag(diag, "diag", where)
    n = validate.square(A, "A", where)
    if x.shape[0] != n:
        raise validate.mismatch(where, f"x must have {n} entries (A is {n}x{n})", A=A, x=x)
    return A, x, u, t, d, n


@validate.numpy_io
def trmv(A, x, uplo="upper", trans=False, diag="nonunit", *, out=None):
    """Triangular matrix-vector product ``op(A) x`` (``cublas<t>trmv``).

    Parameters
    ----------
    A : tensor, shape (n, n)
        Triangular: only its ``uplo`` triangle is read; with ``diag="unit"``
        not its diagonal (taken as ones).
    x : tensor, shape (n,)
    uplo : {"upper", "lower", "U", "L"}
    trans : bool or {"N", "T", "C"}
    diag : {"nonunit", "unit", "N", "U"}
    out : tensor, optional
        Receives the result (``out=x`` gives BLAS's in-place update).

    Returns
    -------
    tensor, shape (n,)

    Raises
    ------
    TypeError, ValueError
        dtypes, shapes, devices, option strings.

    Examples
    --------
    >>> import torch, trnblas
    >>> A = torch.tensor([[1.0, 2.0], [9.0, 3.0]])
    >>> trnblas.trmv(A, torch.ones(2)).tolist()
    [3.0, 3.0]
    """
    where = "trmv"
    A, x, u, t, d, n = _tri_mv_operands(where, A, x, uplo, trans, diag)
    if n == 0:
        return validate.finish(x.clone(), out, where)
    return validate.finish(TRMV(A, x, u, t, d), out, where)


@validate.numpy_io
def trsv(A, x, uplo="upper", trans=False, diag="nonunit", *, out=None):
    """Triangular solve: ``z`` with ``op(A) z = x`` (``cublas<t>trsv``).

    Parameters
    ----------
    A : tensor, shape (n, n)
        Triangular: only its ``uplo`` triangle is read; with ``diag="unit"``
        not its diagonal. A zero on a non-unit diagonal gives Inf/NaN, as
        BLAS (no singularity check).
    x : tensor, shape (n,)
        The right-hand side.
    uplo, trans, diag, out
        As in :func:`trmv`.

    Returns
    -------
    tensor, shape (n,)

    Raises
    ------
    TypeError, ValueError
        As :func:`trmv`.

    Examples
    --------
    >>> import torch, trnblas
    >>> trnblas.trsv(torch.tensor([[2.0, 0.0], [0.0, 4.0]]), torch.ones(2)).tolist()
    [0.5, 0.25]
    """
    where = "trsv"
    A, x, u, t, d, n = _tri_mv_operands(where, A, x, uplo, trans, diag)
    if n == 0:
        return validate.finish(x.clone(), out, where)
    return validate.finish(TRSV(A, x, u, t, d), out, where)


# ------------------------------------------------------------------ derivatives (torch.ops.trnblas.*)
# gemv, ger and trsv: their backwards are level-2 operations again (kernels under a kernel backend, as
# in the forward); symv, trmv, syr and syr2 take the vjp of their torch lowering.

def _conj(a):
    return a.conjugate() if isinstance(a, complex) else a


def _adjoint(A, t):
    """``(A, code)`` with ``op_code(A) = op_t(A)^H`` (a conjugate view resolved for complex "T")."""
    if not A.is_complex():
        return A, ("T" if t == "N" else "N")
    if t == "N":
        return A, "C"
    if t == "C":
        return A, "N"
    return A.conj().resolve_conj(), "N"  # op = A^T: its adjoint is conj(A)


def _back_through(ga, t):
    """The gradient of ``A`` from that of ``a = op_t(A)``."""
    return ga if t == "N" else (ga.mT if t == "T" else ga.mH)


def _gemv_backward(inputs, output, g, needs):
    alpha, A, x, beta, y, t = inputs
    ca = _conj(alpha)
    gA = gx = gy = None
    if needs[1]:  # grad op(A) = conj(alpha) g x^H: a rank-1 update
        gA = _back_through(GER(ca, g, x, None, True), t)
    if needs[2]:  # grad x = conj(alpha) op(A)^H g
        Ah, th = _adjoint(A, t)
        gx = GEMV(ca, Ah, g, 0.0, None, th)
    if y is not None and needs[4]:
        gy = g * _conj(beta)
    return None, gA, gx, None, gy, None


def _ger_backward(inputs, output, g, needs):
    # R = A + alpha x w^T with w = conj(y) (conj) or y
    alpha, x, y, A, conj = inputs
    ca = _conj(alpha)
    cplx = x.is_complex()
    gx = gy = gA = None
    if needs[1]:  # grad x = conj(alpha) g conj(w): conj(w) is y for gerc, conj(y) for geru
        gx = GEMV(ca, g, y if conj or not cplx else y.conj().resolve_conj(), 0.0, None, "N")
    if needs[2]:  # grad w = conj(alpha) g^T conj(x); grad y = conj(grad w) when w = conj(y)
        xc = x.conj().resolve_conj() if cplx else x
        gw = GEMV(ca, g, xc, 0.0, None, "T")
        gy = gw.conj().resolve_conj() if conj and cplx else gw
    if A is not None and needs[3]:
        gA = g
    return None, gx, gy, gA, None


def _trsv_backward(inputs, output, g, needs):
    # z = op(T)^-1 x: grad x = op(T)^-H g (one more solve); grad op(T) = -grad_x z^H, on T's triangle
    A, x, u, t, d = inputs
    Ah, th = _adjoint(A, t)
    gx = TRSV(Ah, g, u, th, d)
    gA = None
    if needs[0]:
        gA = _on_triangle(_back_through(GER(-1.0, gx, output, None, True), t), u, d == "U")
    return gA, gx if needs[1] else None, None, None, None


def _on_triangle(G, u, unit):
    """``G`` kept on the stored ``u`` triangle (strict for a unit diagonal, which is not read)."""
    return G.triu(1 if unit else 0) if u == "U" else G.tril(-1 if unit else 0)


def _trmv_backward(inputs, output, g, needs):
    # z = op(T) x: grad x = op(T)^H g (one more trmv); grad op(T) = g x^H, on T's triangle
    A, x, u, t, d = inputs
    gA = gx = None
    if needs[1]:
        Ah, th = _adjoint(A, t)
        gx = TRMV(Ah, g, u, th, d)
    if needs[0]:
        gA = _on_triangle(_back_through(GER(1.0, g, x, None, True), t), u, d == "U")
    return gA, gx, None, None, None


def _symv_backward(inputs, output, g, needs):
    # z = alpha S x + beta y, S = the symmetric (Hermitian) matrix of A's u triangle:
    # grad x = conj(alpha) S^H g (one more symv); grad S = conj(alpha) g x^H (one ger), folded onto
    # the stored triangle: G_ij + G_ji off the diagonal (G_ij + conj(G_ji) Hermitian), G_ii on it
    # (its real part, Hermitian: the imaginary part of the diagonal is not read)
    alpha, A, x, beta, y, u, herm = inputs
    ca = _conj(alpha)
    herm = herm and A.is_complex()
    gA = gx = gy = None
    if needs[2]:
        gx = SYMV(ca, A if herm or not A.is_complex() else A.conj().resolve_conj(), g, 0.0, None, u, herm)
    if needs[1]:
        G = GER(ca, g, x, None, True)
        diag = G.diagonal().real.to(G.dtype) if herm else G.diagonal()
        G = _on_triangle(G + (G.mH if herm else G.mT), u, True)
        G.diagonal().copy_(diag)
        gA = G
    if y is not None and needs[4]:
        gy = g * _conj(beta)
    return None, gA, gx, None, gy, None, None


def _rank_sum(a, g, v, second):
    """``a g v + second g^H v`` (``second``: a scalar, or "T" for ``a (g + g^T) v``): two gemv calls."""
    if second == "T":
        return GEMV(a, g, v, 0.0, None, "N") + GEMV(a, g, v, 0.0, None, "T")
    return GEMV(a, g, v, 0.0, None, "N") + GEMV(second, g, v, 0.0, None, "C")


def _syr_backward(inputs, output, g, needs):
    # R = A + alpha x x^T: grad x = conj(alpha) (g + g^T) conj(x); Hermitian R = A + alpha x x^H:
    # grad x = conj(alpha) g x + alpha g^H x; grad A = g
    alpha, x, A, herm = inputs
    gx = None
    if needs[1]:
        if herm and x.is_complex():
            gx = _rank_sum(_conj(alpha), g, x, alpha)
        else:
            gx = _rank_sum(_conj(alpha), g, x.conj().resolve_conj() if x.is_complex() else x, "T")
    return None, gx, g if A is not None and needs[2] else None, None


def _syr2_backward(inputs, output, g, needs):
    # R = A + alpha (x y^T + y x^T): grad x = conj(alpha) (g + g^T) conj(y), grad y likewise with x;
    # Hermitian R = A + alpha x y^H + conj(alpha) y x^H: grad x = conj(alpha) (g + g^H) y,
    # grad y = alpha (g + g^H) x; grad A = g
    alpha, x, y, A, herm = inputs
    ca = _conj(alpha)
    cplx = x.is_complex()
    gx = gy = None
    if herm and cplx:
        gx = _rank_sum(ca, g, y, ca) if needs[1] else None
        gy = _rank_sum(alpha, g, x, alpha) if needs[2] else None
    else:
        gx = _rank_sum(ca, g, y.conj().resolve_conj() if cplx else y, "T") if needs[1] else None
        gy = _rank_sum(ca, g, x.conj().resolve_conj() if cplx else x, "T") if needs[2] else None
    return None, gx, gy, g if A is not None and needs[3] else None, None


SYR.backward(_syr_backward, formula="dx = conj(alpha) (g + g^T) conj(x) (Hermitian: conj(alpha) g x + alpha g^H x); "
             "dA = g", runs="two `trnblas.gemv` calls")
SYR2.backward(_syr2_backward, formula="dx = conj(alpha) (g + g^T) conj(y), dy = conj(alpha) (g + g^T) conj(x) "
              "(Hermitian: dx = conj(alpha) (g + g^H) y, dy = alpha (g + g^H) x); dA = g",
              runs="two `trnblas.gemv` calls per vector")
TRMV.backward(_trmv_backward, formula="dx = op(A)^H g; dA = g x^H put back through op, on A's triangle",
              runs="`trnblas.trmv` and `trnblas.ger` calls")
SYMV.backward(_symv_backward, formula="dx = conj(alpha) S^H g; dA = G + G^T (G + G^H Hermitian) on the stored "
              "triangle, G_ii on the diagonal, G = conj(alpha) g x^H; dy = conj(beta) g",
              runs="`trnblas.symv` and `trnblas.ger` calls")
GEMV.backward(_gemv_backward, formula="dA = conj(alpha) g x^H put back through op(A); dx = conj(alpha) op(A)^H g; "
              "dy = conj(beta) g", runs="`trnblas.ger` and `trnblas.gemv` calls")
GER.backward(_ger_backward, formula="dx = conj(alpha) g conj(w); dw = conj(alpha) g^T conj(x) (w = y, or conj(y) "
             "for gerc); dA = g", runs="two `trnblas.gemv` calls")
TRSV.backward(_trsv_backward, formula="dx = op(A)^-H g; dA = -dx z^H on A's triangle (strict for a unit diagonal)",
              runs="`trnblas.trsv` and `trnblas.ger` calls")
