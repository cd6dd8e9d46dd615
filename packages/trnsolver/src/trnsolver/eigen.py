"""Hermitian eigensolvers (cuSOLVER ``syevd``/``sygvd``, ``scipy.linalg.eigh``) and the Schur
decomposition (LAPACK ``?gees``, ``scipy.linalg.schur``).

The torch path calls LAPACK: ``dsyevd`` through ``scipy.linalg.lapack`` for a
single float64 CPU matrix without autograd where its measured route says it
is the faster call (``trnsolver._host``, :mod:`trnsci.routes`),
``torch.linalg.eigh`` for everything else; the device path will be the
parallel Jacobi method whose torch reference is ``trnsolver._nki.eigen_jacobi``.
"""

from __future__ import annotations

import numpy as np
import torch

from trnsci import linalg as la
from trnsci import precision, validate
from trnsci.dispatch import Op
from trnsolver import _host
from trnsolver.factor import _NOT_PD, _raise_info

__all__ = ["eigh", "eigvalsh", "eigh_generalized", "schur"]

_UPLO = validate.Options({"L": ("L", "lower"), "U": ("U", "upper")})


def _subset(subset_by_index, n: int, where: str) -> tuple[int, int] | None:
    if subset_by_index is None:
        return None
    if not isinstance(subset_by_index, (tuple, list)) or len(subset_by_index) != 2:
        raise TypeError(f"{where}: subset_by_index must be a pair (lo, hi) of ints")
    lo = validate.integer(subset_by_index[0], "subset_by_index[0]", where, minimum=0)
    hi = validate.integer(subset_by_index[1], "subset_by_index[1]", where, minimum=0)
    if not lo <= hi < n:
        raise ValueError(f"{where}: subset_by_index must satisfy 0 <= lo <= hi < n = {n}, got ({lo}, {hi})")
    return lo, hi


def _eigh_flops(A, uplo, lo, hi, vectors, tol=1e-10, max_sweeps=100):
    n = A.shape[-1]
    return 9.0 * n ** 3 * (A.numel() // n // n if n else 0)


def _eigh_describe(A, uplo, lo, hi, vectors, tol=1e-10, max_sweeps=100):
    return f"eigh n={A.shape[-1]} batch={tuple(A.shape[:-2])} {str(A.dtype).replace('torch.', '')}"


#: Op ``(A, uplo, lo, hi, vectors, tol, max_sweeps)``: eigenpairs lo..hi of a
#: Hermitian matrix. Threshold: no Trainium here to calibrate on; a Jacobi
#: sweep costs ~6 n^3 flops and takes 5-10 sweeps against LAPACK's ~9 n^3, so
#: the kernel is only worth a launch for large tiles -- 9 * 512^3 is a
#: placeholder until `trnsci calibrate` runs on hardware.
def _eigh_fake(A, uplo, lo, hi, vectors, tol=1e-10, max_sweeps=100):
    k = hi - lo + 1
    w = A.new_empty((*A.shape[:-1][:-1], k), dtype=A.real.dtype if A.is_complex() else A.dtype)
    return w, (A.new_empty((*A.shape[:-1], k)) if vectors else None)


EIGH = Op("trnsolver.eigh", "flops", 9.0 * 512 ** 3, size=_eigh_flops, describe=_eigh_describe,
          doc="symmetric/Hermitian eigensolver (parallel Jacobi kernel on the device)",
          schema="(Tensor A, str uplo, int lo, int hi, bool vectors, float tol=1e-10, int max_sweeps=100)"
                 " -> (Tensor, Tensor?)", fake=_eigh_fake)


@EIGH.lowering("torch")
def _eigh_torch(A: torch.Tensor, uplo: str, lo: int, hi: int, vectors: bool, tol: float = 1e-10,
                max_sweeps: int = 100):
    """Eigenpairs ``lo..hi`` (inclusive, ascending) of the Hermitian matrix in
    ``A``'s ``uplo`` triangle; ``V`` is None when ``vectors`` is False
    (``tol``/``max_sweeps`` are the Jacobi kernel's; LAPACK ignores them)."""
    n = A.shape[-1]
    if _host.eligible(A) and _eigh_route(A, uplo, vectors) == "lapack":
        # LAPACK's ?syevd through SciPy, only where it measured clearly faster than torch.linalg.eigh (MKL's
        # syevd) on this machine for this dtype and size class (trnsci.routes via trnsolver._host.use;
        # estimate mode runs torch, the obvious call)
        r = _host.syevd(A, uplo == "L", vectors)
        if r is not None:
            w, V = r
            if lo != 0 or hi != n - 1:
                w, V = w[lo:hi + 1], (V[:, lo:hi + 1] if vectors else None)
            return w, V
    if vectors:
        w, V = torch.linalg.eigh(A, UPLO=uplo)
        if lo != 0 or hi != n - 1:
            w, V = w[..., lo:hi + 1], V[..., lo:hi + 1]
        return w, V
    w = torch.linalg.eigvalsh(A, UPLO=uplo)
    if lo != 0 or hi != n - 1:
        w = w[..., lo:hi + 1]
    return w, None


def _eigh_route(A: torch.Tensor, uplo: str, vectors: bool) -> str:
    """``"lapack"`` (SciPy's ?syevd) or ``"torch"`` for a float32/float64 CPU matrix: chosen by timing both
    on ``A`` once per dtype, size class (the next power of two of n), vectors or not, and thread count."""
    n = A.shape[-1]
    lower = uplo == "L"

    def cands():
        return {"lapack": lambda: _host.syevd(A, lower, vectors),
                "torch": (lambda: torch.linalg.eigh(A, UPLO=uplo)) if vectors else
                         (lambda: torch.linalg.eigvalsh(A, UPLO=uplo))}
    return "lapack" if _host.use("eigh", A, 9.0 * n ** 3, cands, (bool(vectors),)) else "torch"


def _eigh_args(where, A, tol, max_sweeps, subset_by_index, uplo, check_finite):
    A = la.square_matrix(A, "A", where)
    validate.positive(tol, "tol", where, zero_ok=True)
    validate.integer(max_sweeps, "max_sweeps", where, minimum=1, maximum=validate.INDEX_MAX)
    uplo = _UPLO(uplo, "uplo", where)
    n = A.shape[-1]
    sub = _subset(subset_by_index, n, where)
    lo, hi = sub if sub is not None else (0, n - 1)
    la.check_finite(check_finite, where, A=A)
    return A, uplo, lo, hi


@precision.computes_in("float32")
@validate.numpy_io
def eigh(A, max_sweeps=100, tol=1e-10, *, subset_by_index=None, uplo="L", check_finite=True):
    """Eigenvalues and eigenvectors of a real symmetric / complex Hermitian matrix.

    Parameters
    ----------
    A : tensor, shape (..., n, n)
        float32, float64, complex64 or complex128; only the ``uplo``
        triangle is read (the imaginary part of the diagonal is ignored).
    max_sweeps, tol : int, float
        Sweep limit and off-diagonal tolerance ``off(A) <= tol ||A||_F`` of the
        Jacobi eigensolver the NKI path uses; validated, not needed by the
        torch path (LAPACK).
    subset_by_index : (lo, hi), optional
        Only eigenpairs ``lo..hi`` (0-based, inclusive, ascending order), as
        in ``scipy.linalg.eigh``.
    uplo : {"L", "U"}
        Which triangle holds ``A``.

    Returns
    -------
    w : tensor, real, shape (..., k)
        Eigenvalues in ascending order (``k = n`` or ``hi - lo + 1``).
    V : tensor, shape (..., n, k)
        Orthonormal eigenvectors, ``A V = V diag(w)``; columns are unique
        only up to sign (phase) and rotation within repeated eigenvalues.

    Raises
    ------
    TypeError, ValueError
        Not a square float/complex matrix; NaN/Inf; a bad subset.

    Examples
    --------
    >>> import torch, trnsolver
    >>> w, V = trnsolver.eigh(torch.tensor([[2.0, 1.0], [1.0, 2.0]], dtype=torch.float64))
    >>> w.tolist()
    [1.0, 3.0]
    >>> trnsolver.eigh(torch.diag(torch.tensor([3.0, 1.0, 2.0])), subset_by_index=(1, 2))[0].tolist()
    [2.0, 3.0]
    """
    A, uplo, lo, hi = _eigh_args("eigh", A, tol, max_sweeps, subset_by_index, uplo, check_finite)
    return EIGH(A, uplo, lo, hi, True, float(tol), int(max_sweeps))


@precision.computes_in("float32")
@validate.numpy_io
def eigvalsh(A, *, subset_by_index=None, uplo="L", check_finite=True):
    """Eigenvalues only of a real symmetric / complex Hermitian matrix (ascending).

    Parameters and errors as in :func:`eigh`.

    Returns
    -------
    w : tensor, real, shape (..., k)

    Examples
    --------
    >>> import torch, trnsolver
    >>> trnsolver.eigvalsh(torch.tensor([[0.0, 1.0], [1.0, 0.0]])).tolist()
    [-1.0, 1.0]
    """
    A, uplo, lo, hi = _eigh_args("eigvalsh", A, 0.0, 1, subset_by_index, uplo, check_finite)
    return EIGH(A, uplo, lo, hi, False)[0]


def _eigh_generalized_torch(A: torch.Tensor, B: torch.Tensor, lo: int, hi: int):
    """``A x = w B x`` via ``B = L L^H``, ``C = L^-1 A L^-H``, ``x = L^-H y``.
    Returns ``(w, X, info)``; ``info`` is potrf's for ``B``."""
    L, info = torch.linalg.cholesky_ex(B)
    if bool((info != 0).any()):
        return None, None, info
    Y = torch.linalg.solve_triangular(L, A, upper=False)
    C = torch.linalg.solve_triangular(L, Y.mH, upper=False)   # L^-1 A^H L^-H = L^-1 A L^-H
    w, Z = EIGH(C, "L", lo, hi, True)
    X = torch.linalg.solve_triangular(L.mH, Z, upper=True)
    return w, X, info


@precision.computes_in("float32")
@validate.numpy_io
def eigh_generalized(A, B, max_sweeps=100, tol=1e-10, *, subset_by_index=None, check_finite=True):
    """Generalized Hermitian-definite eigenproblem ``A x = w B x`` (``sygvd``, type 1).

    Parameters
    ----------
    A : tensor, shape (..., n, n)
        Hermitian (lower triangle read).
    B : tensor, shape (..., n, n)
        Hermitian positive definite (lower triangle read).
    max_sweeps, tol, subset_by_index
        As in :func:`eigh`.

    Returns
    -------
    w : tensor, real, shape (..., k), ascending
    X : tensor, shape (..., n, k)
        ``B``-orthonormal eigenvectors: ``X^H B X = I``, ``A X = B X diag(w)``
        (the normalisation of ``scipy.linalg.eigh(A, B)``).

    Raises
    ------
    LinAlgError
        ``B`` is not positive definite (names the leading minor).

    Examples
    --------
    >>> import torch, trnsolver
    >>> A = torch.tensor([[2.0, 0.0], [0.0, 8.0]], dtype=torch.float64)
    >>> B = torch.tensor([[1.0, 0.0], [0.0, 2.0]], dtype=torch.float64)
    >>> [round(v, 12) for v in trnsolver.eigh_generalized(A, B)[0].tolist()]
    [2.0, 4.0]
    """
    where = "eigh_generalized"
    A, _, lo, hi = _eigh_args(where, A, tol, max_sweeps, subset_by_index, "L", check_finite)
    B = la.square_matrix(B, "B", where)
    validate.agree(where, A=A, B=B)
    if B.shape[-1] != A.shape[-1]:
        raise validate.mismatch(where, "A and B must be the same size", A=A, B=B)
    try:
        torch.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    except RuntimeError:
        raise validate.mismatch(where, "batch dimensions do not broadcast", A=A, B=B) from None
    if check_finite:
        la.finite(where, B=B)
    A = la.symmetric(A, "L", hermitian=True)
    w, X, info = _eigh_generalized_torch(A, B, lo, hi)
    _raise_info(where, info, "B is not positive definite: " + _NOT_PD)
    return w, X


# ===================================================================== Schur

_OUTPUT = validate.Options({"real": ("real", "r"), "complex": ("complex", "c")})
_SORTS = ("lhp", "rhp", "iuc", "ouc")


def _schur_flops(A, complex_out, sort):
    n = A.shape[-1]
    return 25.0 * n ** 3  # Hessenberg 10/3 n^3 + Z, plus ~2 Francis sweeps per eigenvalue (Golub & Van Loan)


def _schur_describe(A, complex_out, sort):
    how = sort if sort is None or isinstance(sort, str) else "callable"
    return (f"schur n={A.shape[-1]} {str(A.dtype).replace('torch.', '')} "
            f"output={'complex' if complex_out else 'real'} sort={how}")


#: Op ``(A, complex_out, sort)``: ``A = Z T Z^H``. Threshold: a placeholder (no
#: hardware here to calibrate); the reduction's GEMM-shaped updates pay only
#: for large n.
SCHUR = Op("trnsolver.schur", "flops", 25.0 * 512 ** 3, size=_schur_flops, describe=_schur_describe,
           doc="Schur decomposition: Householder Hessenberg reduction, Francis QR, block reordering",
           # a named sort crosses as its name, the sorted dimension as a 0-d tensor (0 without a sort); a
           # sort callable crosses no schema: that call stays a plain Op. The results carry no gradient
           # (a Schur form is unique only up to the phases of Z's columns and the order of the blocks)
           schema="(Tensor A, bool complex_out, str? sort) -> (Tensor T, Tensor Z, Tensor sdim)",
           fake=lambda A, complex_out, sort: _schur_fake(A, complex_out), differentiable=False)


def _schur_fake(A, complex_out):
    dt = A.dtype
    if complex_out and not dt.is_complex:
        dt = torch.complex64 if dt == torch.float32 else torch.complex128
    return (A.new_empty(A.shape, dtype=dt), A.new_empty(A.shape, dtype=dt), A.new_empty((), dtype=torch.int64))


SCHUR.boundary(lambda A, complex_out, sort: None if callable(sort) else (A, complex_out, sort),
               lambda A, complex_out, sort: (A, complex_out, sort),
               lambda out, A, complex_out, sort: (out[0], out[1], torch.tensor(
                   0 if out[2] is None else int(out[2]), dtype=torch.int64, device=A.device)))


def _selector(sort, complex_out):
    """``select(eigenvalues of one block) -> bool`` for the Schur reordering (SciPy's rules)."""
    if sort is None:
        return None
    if sort == "lhp":
        return lambda w: bool(w[0].real < 0.0)
    if sort == "rhp":
        return lambda w: bool(w[0].real >= 0.0)
    if sort == "iuc":
        return lambda w: any(abs(x) <= 1.0 for x in w)
    if sort == "ouc":
        return lambda w: any(abs(x) > 1.0 for x in w)
    if complex_out:
        return lambda w: bool(sort(complex(w[0])))
    # real output: the callable takes (real, imaginary); a pair is chosen if either eigenvalue is
    return lambda w: any(bool(sort(float(x.real), float(x.imag))) for x in w)


def _standard_form(T: np.ndarray, Z: np.ndarray) -> None:
    """Put every 2x2 block of the quasi-triangular ``T`` in standard form, in place, updating ``Z``
    (:mod:`trnsolver._schur`'s rotations; what the NKI Schur lowering finishes with)."""
    from trnsolver import _schur

    for i, size in _schur.blocks(T):
        if size == 2:
            _schur._standardize(T, Z, i)


@SCHUR.lowering("torch")
def _schur_torch(A: torch.Tensor, complex_out: bool, sort):
    """``(T, Z, sdim)`` of one square matrix by :mod:`trnsolver._schur` (sdim None without ``sort``)."""
    from trnsolver import _schur

    M = A.detach().cpu().numpy()
    if complex_out and not np.iscomplexobj(M):
        M = M.astype(np.complex64 if M.dtype == np.float32 else np.complex128)
    n = M.shape[0]
    H, Z = _schur.hessenberg(M)
    eps = np.finfo(M.dtype).eps
    try:
        if np.iscomplexobj(M):
            T, Z = _schur.francis_complex(H, Z, eps, 30 * max(n, 1))
        else:
            T, Z = _schur.francis_real(H, Z, eps, 30 * max(n, 1))
    except _schur.NoConvergence as e:
        raise la.LinAlgError(f"schur: the QR iteration did not converge (eigenvalue {e.args[0] + 1} of {n})",
                             info=int(e.args[0]) + 1) from None
    sdim = None
    select = _selector(sort, complex_out or np.iscomplexobj(M))
    if select is not None:
        try:
            sdim = _schur.reorder(T, Z, select)
        except np.linalg.LinAlgError:  # a swap's Sylvester equation is singular: equal eigenvalues across it
            raise la.LinAlgError("schur: eigenvalues could not be separated for reordering",
                                 info=n + 1) from None
    T = np.triu(T, -1)
    if np.iscomplexobj(T):
        T = np.triu(T)
    dev = A.device
    return torch.from_numpy(T).to(dev), torch.from_numpy(Z).to(dev), sdim


@validate.numpy_io
@precision.computes_in(precision.promote("float32"), args=("a",), note=False)  # SciPy's rule: T, Z in float32
def schur(a, output="real", lwork=None, overwrite_a=False, sort=None, check_finite=True):
    """Schur decomposition ``A = Z T Z^H`` (``scipy.linalg.schur``, LAPACK ``?gees``).

    ``T`` is upper triangular (``output="complex"``) or quasi upper
    triangular (``output="real"``, real input: 2x2 diagonal blocks, in
    standard form -- equal diagonal entries, off-diagonal entries of
    opposite sign -- for each complex conjugate pair); ``Z`` is unitary.

    Parameters
    ----------
    a : tensor or array, shape (n, n)
        Real or complex; integer input is computed in float64 (as SciPy),
        bfloat16/float16 in float32 (results in float32).
    output : {"real", "complex"}
        ``"complex"`` gives a complex triangular ``T`` for real input too.
        For complex input ``T`` is complex either way.
    lwork : int, optional
        Accepted for SciPy compatibility (no workspace to size).
    overwrite_a : bool
        Accepted for SciPy compatibility; ``a`` is never modified.
    sort : {None, "lhp", "rhp", "iuc", "ouc"} or callable, optional
        Moves the chosen eigenvalues to the top left of ``T`` (the first
        ``sdim`` columns of ``Z`` span their invariant subspace):
        ``"lhp"`` real part < 0, ``"rhp"`` real part >= 0, ``"iuc"``
        ``|w| <= 1``, ``"ouc"`` ``|w| > 1``. A callable takes the complex
        eigenvalue (complex ``T``), or its real and imaginary parts as two
        floats (real ``T``); a complex pair of a real ``T`` is chosen if
        either eigenvalue is.
    check_finite : bool
        Reject Inf/NaN in ``a`` (``ValueError``).

    Returns
    -------
    T : tensor, shape (n, n)
    Z : tensor, shape (n, n)
    sdim : int
        Only when ``sort`` is given: the number of chosen eigenvalues (a
        complex pair of a real ``T`` counts 2).

    Raises
    ------
    ValueError
        ``a`` not square, an unknown ``output``/``sort``, non-finite entries.
    TypeError
        ``sort`` neither None, a name nor a callable; bool/non-numeric ``a``.
    LinAlgError
        The QR iteration did not converge (``info``: the eigenvalue it
        stopped at), or ``sort`` asked to separate eigenvalues too close to
        swap (``info = n + 1``, as LAPACK's).

    Notes
    -----
    Householder reduction to Hessenberg form, then the implicit
    double-shift (Francis) QR iteration for real ``T`` or the implicit
    single-shift one with Wilkinson shifts for complex ``T``, deflating
    subdiagonal entries below ``eps (|h_kk| + |h_k+1,k+1|)``; reordering by
    swaps of adjacent diagonal blocks (a Sylvester equation per swap).
    The torch path computes on the host in the input's precision
    (float64/complex128, or float32/complex64): a tensor on another device
    is copied to the host for the iteration and ``T``, ``Z`` come back on
    its device. The results do not carry gradients. The eigenvalues match LAPACK's to rounding; ``T``
    and ``Z`` are unique only up to the signs (phases) of ``Z``'s columns
    and the order of eigenvalues within the unsorted form.

    Examples
    --------
    >>> import torch, trnsolver
    >>> A = torch.tensor([[0.0, 2.0], [-2.0, 0.0], ], dtype=torch.float64)
    >>> T, Z = trnsolver.schur(A)
    >>> torch.allclose(Z @ T @ Z.T, A)
    True
    >>> T, Z, sdim = trnsolver.schur(torch.diag(torch.tensor([3.0, -1.0, 2.0])), sort="lhp")
    >>> sdim, T.diagonal().tolist()
    (1, [-1.0, 3.0, 2.0])
    """
    where = "schur"
    if isinstance(a, torch.Tensor) or isinstance(a, np.ndarray):
        t = a if isinstance(a, torch.Tensor) else torch.from_numpy(np.asarray(a))
        if t.dtype == torch.bool:
            raise TypeError(f"{where}: a has dtype bool; schur takes real or complex matrices")
        if not (t.dtype.is_floating_point or t.dtype.is_complex):
            a = t.to(torch.float64)
    A = la.square_matrix(a, "a", where)
    if A.dim() != 2:
        raise ValueError(f"{where}: a must be one (n, n) matrix, got shape {tuple(A.shape)}")
    complex_out = _OUTPUT(output, "output", where) == "complex"
    if lwork is not None:
        validate.integer(lwork, "lwork", where, minimum=-1)
    validate.flag(overwrite_a, "overwrite_a", where)
    if sort is not None and not callable(sort):
        if not isinstance(sort, str):
            raise TypeError(f"{where}: sort must be None, a callable or one of {', '.join(_SORTS)}; got {sort!r}")
        if sort.lower() not in _SORTS:
            raise ValueError(f"{where}: sort must be None, a callable or one of {', '.join(_SORTS)}; got {sort!r}")
        sort = sort.lower()
    la.check_finite(check_finite, where, a=A)
    if not check_finite:
        la.finite(where, a=A)  # NaN/Inf would make the QR iteration wander: never a silent wrong answer
    T, Z, sdim = SCHUR(A, complex_out, sort)
    if isinstance(sdim, torch.Tensor) and not torch.compiler.is_compiling():  # the operator's 0-d tensor
        sdim = int(sdim)
    return (T, Z) if sort is None else (T, Z, sdim)
