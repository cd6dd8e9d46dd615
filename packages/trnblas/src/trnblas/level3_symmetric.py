"""BLAS level 3, symmetric and Hermitian: ``symm``, ``hemm``, ``syrk``, ``herk``, ``syr2k``, ``her2k``.

Op ``SYRK`` ``(alpha, A, beta, C, trans, uplo, full)``: the ``uplo``
triangle computed, the other one copied from ``C`` (zeros if None), or --
``full`` -- mirrored from the computed one (the whole symmetric matrix: the
public functions' ``fill``), so a lowering whose product is symmetric
already (SYR2K's ``P + P^T``) skips every triangle pass; torch lowering
here, NKI lowering in :mod:`trnblas._nki.level3`. ``symm``/``hemm`` expand the
stored triangle and run ``GEMM``. Op ``SYR2K`` ``(alpha, A, B, beta, C,
trans, uplo, full)`` (real data: ``syr2k``, and ``her2k`` on real data) has
the same contract as ``SYRK``; complex ``herk``/``her2k``/``syr2k`` form the
full product through ``GEMM`` (its complex64 kernel composition).
"""

from __future__ import annotations

import torch

from trnblas import _host
from trnblas.level3_gemm import _cplx, _product, _run_gemm, _scalars, _scaled
from trnsci import linalg as la
from trnsci import validate
from trnsci.dispatch import Op

__all__ = ["symm", "hemm", "syrk", "herk", "syr2k", "her2k", "SYRK", "SYR2K"]


def _syrk_flops(alpha, A, beta, C, trans, uplo, full=False):
    n, k = la.op_shape(A, trans)
    return n * n * k * _cplx(A)


def _syrk_describe(alpha, A, beta, C, trans, uplo, full=False):
    n, k = la.op_shape(A, trans)
    what = f"{n}x{n} triangle {uplo!r}" + (" (mirrored: the whole matrix)" if full else "")
    return f"{what} of op(A) op(A)^T, op(A) {n}x{k}   (trans={trans!r})"


SYRK = Op(
    "trnblas.syrk", "flops", 512**3, size=_syrk_flops, describe=_syrk_describe,
    doc="one triangle (or, full, the whole) of C = alpha op(A) op(A)^T + beta C; flops = n^2 k",
    schema="(Scalar alpha, Tensor A, Scalar beta, Tensor? C, str trans, str uplo, bool full=False) -> Tensor",
    fake=lambda alpha, A, beta, C, trans, uplo, full=False: A.new_empty((la.op_shape(A, trans)[0],) * 2),
    half="float32",  # bf16/fp16 computed in float32, rounded once, by the core (trnsci.precision)
)

#: Block rows of this height; fewer than four blocks run as one full GEMM, the faster form there
#: (docs/perf-notes.md#design-trnblas-host).
_SYRK_BLOCK = 512


@SYRK.lowering("torch")
def _syrk_torch(alpha, A, beta, C, trans, uplo, full=False):
    """SciPy's ?syrk or torch (:func:`_syrk_on_torch`), as measured; then the mirror when ``full``."""
    a = A if trans == "N" else A.mT  # (n, k)
    # SciPy's ?syrk (half the flops, no triangle pass) or torch below, whichever measured faster for
    # this class here (trnblas._host); the torch candidate is exactly the torch route
    if _host.syrk_uses_blas(a, C, uplo == "U", lambda: _syrk_on_torch(1.0, a, 1.0, C, uplo)):
        R = _host.syrk_blas(alpha, a, beta, C, uplo == "U")
    else:
        R = _syrk_on_torch(alpha, a, beta, C, uplo)
    return la.merge_triangle(R, None, uplo, True, False) if full else R


def _syrk_on_torch(alpha, a, beta, C, uplo):
    """One GEMM per block row, each covering only the ``uplo`` side: about half of a full GEMM's flops."""
    n = a.shape[0]
    if n < 4 * _SYRK_BLOCK:
        R = _product(torch.mm, torch.addmm, alpha, a, a.mT, beta, C)
        return la.merge_triangle(R, C, uplo, False, False)
    R = torch.zeros((n, n), dtype=a.dtype, device=a.device) if C is None else C.clone()
    for i0 in range(0, n, _SYRK_BLOCK):
        i1 = min(n, i0 + _SYRK_BLOCK)
        j0, j1 = (i0, n) if uplo == "U" else (0, i1)  # this block row's part of the triangle
        Cp = None if C is None else C[i0:i1, j0:j1]
        R[i0:i1, j0:j1] = _product(torch.mm, torch.addmm, alpha, a[i0:i1], a[j0:j1].mT, beta, Cp)
        d = slice(i0, i1)  # the diagonal block: only its own triangle is ours
        Cd = None if C is None else C[d, d]
        R[d, d] = la.merge_triangle(R[d, d].clone(), Cd, uplo, False, False)
    return R


SYR2K = Op(
    "trnblas.syr2k", "flops", 512**3, size=lambda al, A, B, *r: 2 * _syrk_flops(al, A, *r),
    describe=lambda al, A, B, beta, C, trans, uplo, full=False: _syrk_describe(
        al, A, beta, C, trans, uplo, full).replace("op(A) op(A)^T", "op(A) op(B)^T + op(B) op(A)^T"),
    doc="one triangle (or, full, the whole) of C = alpha (op(A) op(B)^T + op(B) op(A)^T) + beta C (real data); "
        "flops = 2 n^2 k",
    schema="(Scalar alpha, Tensor A, Tensor B, Scalar beta, Tensor? C, str trans, str uplo, bool full=False) -> Tensor",
    fake=lambda alpha, A, B, beta, C, trans, uplo, full=False: A.new_empty((la.op_shape(A, trans)[0],) * 2),
    half="float32",  # bf16/fp16 computed in float32, rounded once, by the core (trnsci.precision)
)


@SYR2K.lowering("torch")
def _syr2k_torch(alpha, A, B, beta, C, trans, uplo, full=False):
    """One GEMM ``P = alpha a b^T``; ``P + P^T`` is exactly symmetric (x + y == y + x), so the whole
    matrix without ``C`` needs no triangle pass at all."""
    a, b = la.op(A, trans), la.op(B, trans)
    P = torch.mm(a, b.mT)
    if alpha != 1:
        P.mul_(alpha)
    R = P + P.mT
    if C is None or beta == 0:
        return R if full else la.merge_triangle(R, C, uplo, False, False)
    R.add_(C, alpha=beta)
    return la.merge_triangle(R, C, uplo, full, False)


def _syrk_backward(inputs, output, g, needs):
    """R = the ``uplo`` triangle of Q = alpha a a^T + beta C, the other triangle C's (zeros), or -- full --
    Q's mirrored. grad Q is g on the triangle (plus the mirrored part's g transposed, when full);
    grad a = conj(alpha) (grad Q + grad Q^T) conj(a): one GEMM; grad C = conj(beta) grad Q (plus g
    off the triangle when C fills it)."""
    from trnblas.level3_gemm import GEMM

    alpha, A, beta, C, trans, uplo, full = inputs
    gQ, mask = _triangle_grad(g, uplo, full)
    gA = gC = None
    if needs[1]:
        S = gQ + gQ.mT
        Ac = A.conj().resolve_conj() if A.is_complex() else A
        ca = alpha.conjugate() if isinstance(alpha, complex) else alpha
        # a = A ("N"): grad A = ca S conj(A); a = A^T: grad A = (ca S conj(A)^T)^T = ca conj(A) S (S symmetric)
        gA = GEMM(ca, S, Ac, 0.0, None, "N", "N") if trans == "N" else GEMM(ca, Ac, S, 0.0, None, "N", "N")
    if C is not None and needs[3]:
        gC = gQ * (beta.conjugate() if isinstance(beta, complex) else beta)
        if not full:
            gC = torch.where(mask, gC, g)
    return None, gA, None, gC, None, None, None


def _triangle_grad(g, uplo, full):
    """The gradient of the computed matrix Q from that of R (Q's ``uplo`` triangle, mirrored when ``full``)."""
    mask = la.triangle_mask(g.shape[-1], uplo, g.device)
    on = torch.where(mask, g, torch.zeros_like(g))
    return (on + torch.where(mask, torch.zeros_like(g), g).mT if full else on), mask


def _syr2k_backward(inputs, output, g, needs):
    """As :func:`_syrk_backward` with Q = alpha (a b^T + b a^T) + beta C (real data): grad a = alpha S b,
    grad b = alpha S a with S = grad Q + grad Q^T -- one GEMM each."""
    from trnblas.level3_gemm import GEMM

    alpha, A, B, beta, C, trans, uplo, full = inputs
    gQ, mask = _triangle_grad(g, uplo, full)
    S = gQ + gQ.mT
    gA = gB = gC = None
    for k, (_X, Y) in enumerate(((A, B), (B, A))):
        if needs[1 + k]:
            # a = X ("N"): grad = alpha S Y; a = X^T: grad = (alpha S Y^T)^T = alpha Y S
            G = GEMM(alpha, S, Y, 0.0, None, "N", "N") if trans == "N" else GEMM(alpha, Y, S, 0.0, None, "N", "N")
            if k == 0:
                gA = G
            else:
                gB = G
    if C is not None and needs[4]:
        gC = gQ * beta
        if not full:
            gC = torch.where(mask, gC, g)
    return None, gA, gB, None, gC, None, None, None


SYR2K.backward(_syr2k_backward, formula="dA = alpha S op(B) and dB = alpha S op(A) put back through op, S = G + G^T, "
               "G as for syrk; dC as for syrk", runs="one `trnblas.gemm` call per operand")
SYRK.backward(_syrk_backward, formula="dA = conj(alpha) (G + G^T) conj(op(A)) put back through op, G = g on the "
              "computed triangle (plus the mirrored part transposed); dC = conj(beta) G (and g where C is copied)",
              runs="one `trnblas.gemm` call")


# ===================================================================== symmetric / Hermitian

def _symm_like(where, alpha, A, B, beta, C, side, uplo, hermitian, out):
    A = validate.matrix(A, "A", where, validate.ALL_FLOAT_DTYPES)
    B = validate.matrix(B, "B", where, validate.ALL_FLOAT_DTYPES)
    if C is not None:
        C = validate.matrix(C, "C", where, validate.ALL_FLOAT_DTYPES)
    validate.agree(where, A=A, B=B, C=C)
    s = la.side(side, "side", where)
    u = la.uplo(uplo, "uplo", where)
    alpha, beta = _scalars(where, alpha, beta, A.dtype)
    na = validate.square(A, "A", where)
    m, n = B.shape
    if na != (m if s == "L" else n):
        which = "rows" if s == "L" else "columns"
        raise validate.mismatch(where, f"side={s!r} needs A to be {which}(B) x {which}(B)", A=A, B=B)
    if C is not None and tuple(C.shape) != (m, n):
        raise validate.mismatch(where, f"C must have the shape of B, ({m}, {n})", B=B, C=C)
    if alpha == 0 or m == 0 or n == 0:
        return validate.finish(_scaled(beta, C, (m, n), A.dtype, A.device), out, where)
    full = la.symmetric(A, u, hermitian)
    if s == "L":
        R = _run_gemm(where, alpha, full, B, beta, C, "N", "N", m, n, na)
    else:
        R = _run_gemm(where, alpha, B, full, beta, C, "N", "N", m, n, na)
    return validate.finish(R, out, where)


@validate.numpy_io
def symm(alpha, A, B, beta=0.0, C=None, side="left", uplo="upper", *, out=None):
    """Symmetric matrix multiply: ``alpha A B + beta C`` (left) or ``alpha B A + beta C`` (right).

    Parameters
    ----------
    alpha, beta : number
        ``beta == 0`` never reads ``C``; ``alpha == 0`` never reads ``A``/``B``.
    A : tensor, shape (m, m) for side="left", (n, n) for side="right"
        Symmetric; only its ``uplo`` triangle (diagonal included) is read.
    B : tensor, shape (m, n)
    C : tensor, shape (m, n), optional
    side : {"left", "right", "L", "R"}
    uplo : {"upper", "lower", "U", "L"}
    out : tensor, optional

    Returns
    -------
    tensor, shape (m, n)

    Raises
    ------
    TypeError
        Non-BLAS dtypes (float32/64, complex64/128 are accepted), mixed dtypes.
    ValueError
        Shapes, devices, or option strings.

    Notes
    -----
    For complex data ``A`` is symmetric (``A == A.T``, as ``csymm``), not
    Hermitian; see :func:`hemm`. The full matrix is rebuilt from the
    triangle (O(n^2)) and multiplied as a :func:`gemm`.

    Examples
    --------
    >>> import torch, trnblas
    >>> A = torch.tensor([[2.0, 1.0], [float("nan"), 3.0]])   # lower triangle unused
    >>> trnblas.symm(1.0, A, torch.eye(2)).tolist()
    [[2.0, 1.0], [1.0, 3.0]]
    """
    return _symm_like("symm", alpha, A, B, beta, C, side, uplo, False, out)


@validate.numpy_io
def hemm(alpha, A, B, beta=0.0, C=None, side="left", uplo="upper", *, out=None):
    """Hermitian matrix multiply: ``alpha A B + beta C`` (left) or ``alpha B A + beta C`` (right).

    Parameters
    ----------
    alpha, beta : number
    A : tensor, square
        Hermitian; only its ``uplo`` triangle is read, and the imaginary
        part of its diagonal is ignored (taken as zero), as in BLAS.
    B, C, side, uplo, out
        As in :func:`symm`.

    Returns
    -------
    tensor, shape (m, n)

    Raises
    ------
    TypeError, ValueError
        As :func:`symm`.

    Notes
    -----
    For real data ``hemm`` equals :func:`symm`.

    Examples
    --------
    >>> import torch, trnblas
    >>> A = torch.tensor([[1, 2j], [0, 1]], dtype=torch.complex64)
    >>> trnblas.hemm(1, A, torch.eye(2, dtype=torch.complex64))[1, 0]
    tensor(0.-2.j)
    """
    return _symm_like("hemm", alpha, A, B, beta, C, side, uplo, True, out)


def _rank_k_operands(where, A, B, C, trans, uplo, allowed_trans):
    A = validate.matrix(A, "A", where, validate.ALL_FLOAT_DTYPES)
    if B is not None:
        B = validate.matrix(B, "B", where, validate.ALL_FLOAT_DTYPES)
    if C is not None:
        C = validate.matrix(C, "C", where, validate.ALL_FLOAT_DTYPES)
    validate.agree(where, A=A, B=B, C=C)
    t = la.real_trans(la.trans(trans, "trans", where), A.dtype)
    if t not in allowed_trans and A.is_complex():
        raise ValueError(f"{where}: trans={trans!r} is not allowed for complex data; "
                         f"use one of {', '.join(repr(x) for x in allowed_trans)}")
    u = la.uplo(uplo, "uplo", where)
    n, k = (A.shape[0], A.shape[1]) if t == "N" else (A.shape[1], A.shape[0])
    if B is not None and B.shape != A.shape:
        raise validate.mismatch(where, "A and B must have one shape", A=A, B=B)
    if C is not None and tuple(C.shape) != (n, n):
        raise validate.mismatch(where, f"C must be ({n}, {n}) for trans={t!r}", A=A, C=C)
    return A, B, C, t, u, n, k


def _quick_rank_k(alpha, beta, C, u, n, k, dtype, device, full, hermitian):
    """``alpha == 0`` or ``k == 0``: the triangle becomes ``beta * C`` (BLAS quick return)."""
    if C is not None and beta == 1 and not full:
        return C.clone()  # BLAS returns without touching C
    R = _scaled(beta, C, (n, n), dtype, device)
    R = la.merge_triangle(R, C, u, full, hermitian)
    if hermitian:
        la.real_diagonal(R)
    return R


def _finish_triangle(R, C, beta, u, full, hermitian):
    """After a lowering that ignored ``C`` (``beta == 0``): restore its other triangle."""
    if beta == 0 and C is not None and not full:
        return la.merge_triangle(R, C, u, False, hermitian)
    return R


@validate.numpy_io
def syrk(alpha, A, beta=0.0, C=None, trans=False, uplo="upper", fill=None, *, out=None):
    """Symmetric rank-k update: one triangle of ``alpha op(A) op(A)^T + beta C``.

    Parameters
    ----------
    alpha, beta : number
        ``beta == 0`` never reads ``C``'s ``uplo`` triangle; ``alpha == 0``
        (or ``k == 0``) never reads ``A``.
    A : tensor, shape (n, k) if not trans, (k, n) if trans
    C : tensor, shape (n, n), optional
    trans : bool or {"N", "T"}
        ``False``: ``A A^T``; ``True``: ``A^T A``. ``"C"`` is accepted for
        real data (where it means ``"T"``); complex data takes ``"N"``/``"T"``
        (no conjugation -- see :func:`herk`).
    uplo : {"upper", "lower", "U", "L"}
        The triangle (diagonal included) that is computed.
    fill : {None, "full", "triangle"}
        ``None``: with ``C``, BLAS semantics -- the other triangle of the
        result is ``C``'s, untouched; without ``C`` there is nothing to
        preserve and the whole symmetric matrix comes back (as the published
        trnblas returned it). ``"full"``: always the whole matrix (the other
        triangle mirrors the computed one). ``"triangle"``: always one
        triangle (zeros in the other when ``C`` is None).
    out : tensor, optional

    Returns
    -------
    tensor, shape (n, n)

    Raises
    ------
    TypeError
        Non-BLAS dtypes, mixed dtypes, complex alpha/beta for real data.
    ValueError
        Shapes, devices, option strings, ``trans="C"`` with complex data.

    Notes
    -----
    Runs the ``trnblas.syrk`` operation (NKI kernel for float32/bfloat16).
    On the torch path real float32/float64 CPU data takes SciPy's ``?syrk``
    or the full product with one ``torch.mm``, whichever measured faster on
    this machine for the size class and thread count (:mod:`trnsci.routes`,
    family ``trnblas.syrk``; ``TRNSCI_ROUTES=estimate`` keeps torch).

    Examples
    --------
    >>> import torch, trnblas
    >>> A = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> trnblas.syrk(1.0, A).tolist()
    [[5.0, 11.0], [11.0, 25.0]]
    >>> trnblas.syrk(1.0, A, fill="triangle").tolist()
    [[5.0, 11.0], [0.0, 25.0]]
    """
    where = "syrk"
    full = la.fill(fill, where, given=C is not None)
    A, _, C, t, u, n, k = _rank_k_operands(where, A, None, C, trans, uplo, ("N", "T"))
    alpha, beta = _scalars(where, alpha, beta, A.dtype)
    if alpha == 0 or k == 0 or n == 0:
        return validate.finish(_quick_rank_k(alpha, beta, C, u, n, k, A.dtype, A.device, full, False), out, where)
    R = SYRK(alpha, A, beta, C if beta != 0 else None, t, u, full)
    return validate.finish(_finish_triangle(R, C, beta, u, full, False), out, where)


@validate.numpy_io
def herk(alpha, A, beta=0.0, C=None, trans=False, uplo="upper", fill=None, *, out=None):
    """Hermitian rank-k update: one triangle of ``alpha op(A) op(A)^H + beta C``.

    Parameters
    ----------
    alpha, beta : real number
        Real, as in BLAS (a complex value is a ``TypeError``).
    A : tensor, shape (n, k) if trans is "N", (k, n) if trans is "C"
    C : tensor, shape (n, n), optional
        Hermitian; the imaginary part of its diagonal is discarded.
    trans : bool or {"N", "C"}
        ``"N"``/``False``: ``A A^H``; ``"C"``: ``A^H A``. ``True``/``"T"``
        are accepted for real data only.
    uplo, fill, out
        As in :func:`syrk`.

    Returns
    -------
    tensor, shape (n, n)
        The diagonal is real (imaginary part zero), as BLAS leaves it --
        except for BLAS's own quick return (``alpha == 0`` or ``k == 0``
        with ``beta == 1``), where ``C`` comes back unchanged.

    Raises
    ------
    TypeError, ValueError
        As :func:`syrk`.

    Notes
    -----
    For real data ``herk`` equals :func:`syrk` (and runs the same operation).

    Examples
    --------
    >>> import torch, trnblas
    >>> A = torch.tensor([[1j, 1.0]], dtype=torch.complex64)
    >>> trnblas.herk(1.0, A)
    tensor([[2.+0.j]])
    """
    where = "herk"
    full = la.fill(fill, where, given=C is not None)
    A, _, C, t, u, n, k = _rank_k_operands(where, A, None, C, trans, uplo, ("N", "C"))
    alpha, beta = _scalars(where, alpha, beta, A.dtype, real=True)
    if not A.is_complex():
        if alpha == 0 or k == 0 or n == 0:
            return validate.finish(_quick_rank_k(alpha, beta, C, u, n, k, A.dtype, A.device, full, False), out, where)
        R = SYRK(alpha, A, beta, C if beta != 0 else None, t, u, full)
        return validate.finish(_finish_triangle(R, C, beta, u, full, False), out, where)
    if alpha == 0 or k == 0 or n == 0:
        return validate.finish(_quick_rank_k(alpha, beta, C, u, n, k, A.dtype, A.device, full, True), out, where)
    # complex: the full product a a^H through GEMM (its complex64 kernel path, or torch)
    R = _run_gemm(where, alpha, A, A, beta, C if beta != 0 else None, t, "C" if t == "N" else "N", n, n, k)
    la.real_diagonal(R)
    return validate.finish(la.merge_triangle(R, C, u, full, True), out, where)


def _rank_2k(where, alpha, A, B, beta, C, trans, uplo, fill, hermitian, out):
    B = validate.matrix(B, "B", where, validate.ALL_FLOAT_DTYPES)  # required (syrk is the one-operand update)
    full = la.fill(fill, where, given=C is not None)
    A, B, C, t, u, n, k = _rank_k_operands(where, A, B, C, trans, uplo, ("N", "C") if hermitian else ("N", "T"))
    alpha = validate.scalar(alpha, "alpha", where, complex_ok=A.dtype.is_complex)
    beta = validate.scalar(beta, "beta", where, complex_ok=A.dtype.is_complex and not hermitian)
    herm = hermitian and A.is_complex()
    if alpha == 0 or k == 0 or n == 0:
        return validate.finish(_quick_rank_k(alpha, beta, C, u, n, k, A.dtype, A.device, full, herm), out, where)
    if not A.is_complex():
        R = SYR2K(alpha, A, B, beta, C if beta != 0 else None, t, u, full)
        return validate.finish(_finish_triangle(R, C, beta, u, full, False), out, where)
    # complex: P = alpha a b^H (her2k) or alpha a b^T through GEMM (its complex64 kernel path, or torch)
    tb = ("C" if herm else "T") if t == "N" else "N"  # op(B)^H / op(B)^T as an op of B itself
    P = _run_gemm(where, alpha, A, B, 0.0, None, t, tb, n, n, k)
    R = P + (P.mH if herm else P.mT)  # alpha a b^T + alpha b a^T  /  alpha a b^H + conj(alpha) b a^H
    if C is not None and beta != 0:
        R.add_(C, alpha=beta)
    if herm:
        la.real_diagonal(R)
    return validate.finish(la.merge_triangle(R, C, u, full, herm), out, where)


@validate.numpy_io
def syr2k(alpha, A, B, beta=0.0, C=None, trans=False, uplo="upper", fill=None, *, out=None):
    """Symmetric rank-2k update: one triangle of ``alpha (op(A) op(B)^T + op(B) op(A)^T) + beta C``.

    Parameters
    ----------
    alpha, beta : number
    A, B : tensor, shape (n, k) if not trans, (k, n) if trans
    C : tensor, shape (n, n), optional
    trans : bool or {"N", "T"}
        ``"C"`` accepted for real data.
    uplo, fill, out
        As in :func:`syrk`.

    Returns
    -------
    tensor, shape (n, n)

    Raises
    ------
    TypeError, ValueError
        As :func:`syrk`; ``A`` and ``B`` must have one shape.

    Notes
    -----
    One GEMM ``P = op(A) op(B)^T``; the result is ``alpha (P + P^T) + beta C``,
    exactly symmetric.

    Examples
    --------
    >>> import torch, trnblas
    >>> trnblas.syr2k(1.0, torch.ones(2, 1), torch.ones(2, 1)).tolist()
    [[2.0, 2.0], [2.0, 2.0]]
    """
    return _rank_2k("syr2k", alpha, A, B, beta, C, trans, uplo, fill, False, out)


@validate.numpy_io
def her2k(alpha, A, B, beta=0.0, C=None, trans=False, uplo="upper", fill=None, *, out=None):
    """Hermitian rank-2k update: one triangle of ``alpha a b^H + conj(alpha) b a^H + beta C``.

    ``a = op(A)``, ``b = op(B)``.

    Parameters
    ----------
    alpha : number
        May be complex.
    beta : real number
    A, B : tensor, shape (n, k) if trans is "N", (k, n) if trans is "C"
    C : tensor, shape (n, n), optional
    trans : bool or {"N", "C"}
    uplo, fill, out
        As in :func:`syrk`.

    Returns
    -------
    tensor, shape (n, n)
        Real diagonal, as BLAS.

    Raises
    ------
    TypeError, ValueError
        As :func:`syr2k`; complex ``beta``.

    Examples
    --------
    >>> import torch, trnblas
    >>> x = torch.tensor([[1j]], dtype=torch.complex64)
    >>> trnblas.her2k(1.0, x, x)
    tensor([[2.+0.j]])
    """
    return _rank_2k("her2k", alpha, A, B, beta, C, trans, uplo, fill, True, out)


