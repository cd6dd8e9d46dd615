"""NKI lowerings of trnblas's level-2 ops (:mod:`trnblas.level2`).

``gemv``/``symv``/``hemv``/``trmv`` run :mod:`trnblas.kernels.gemv`; the
rank updates :mod:`trnblas.kernels.ger`; ``trsv`` runs
:mod:`trnblas.kernels.trsm` with one right-hand side (laid out by
:func:`trnblas._nki.level3.trsm_operands`).

Host work and why:

* complex64 ``gemv``/``symv``/``hemv``/``trmv``: the GEMM kernel on split
  parts (``[mr mi] @ [[xr, xi], [-xi, xr]]``, a 2-column right-hand side),
  after the host forms the full symmetric/Hermitian or triangular matrix.
* complex64 rank updates (``ger``/``gerc``/``syr``/``her``/``syr2``/``her2``)
  run the rank-update kernel on the real view of A (see :func:`_rank_update`).
* ``symv``/``trmv``: the full (symmetric, or triangular with the other
  triangle zeroed and the unit diagonal set) matrix is formed on the host,
  then the GEMV kernel reads it once.
* ``syr``/``syr2``: the kernel updates the full matrix; the host keeps the
  requested triangle of the result and the other one of ``A``.
* alpha and beta of ``gemv``/``symv`` are applied to the fp32 kernel result
  on the host (one pass over a vector), as for GEMM.
"""

from __future__ import annotations

import torch

from trnblas import level2 as L2
from trnblas._nki.level3 import _gemm_figures, _run_any_gemm, trsm_operands
from trnblas.kernels.gemm import gemm_kernel
from trnblas.kernels.gemv import MAX_N as GEMV_MAX_N
from trnblas.kernels.gemv import gemv_counts, gemv_kernel
from trnblas.kernels.ger import MAX_BYTES as GER_MAX_BYTES
from trnblas.kernels.ger import fits as ger_fits
from trnblas.kernels.ger import ger_counts, ger_kernel
from trnblas.kernels.trsm import fits as trsm_fits
from trnblas.kernels.trsm import trsm_counts, trsm_kernel
from trnsci import linalg as la
from trnsci import nki

F32 = torch.float32
#: Matrix-vector kernels (the Tensor Engine's fp32, bf16 and fp16 operands; fp32 PSUM).
MV_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


# ----------------------------------------------------------------- level 2

def _mv_finish(P, alpha, beta, y, dtype):
    """alpha P + beta y in fp32 on the host, cast once to ``dtype``."""
    R = P if alpha == 1 else P.mul_(alpha)
    if y is not None and beta != 0:
        R = R.add_(y.to(R.dtype), alpha=beta)
    return R.to(dtype)


#: Matrix-vector ops: the GEMV kernel's dtypes, and complex64 through the GEMM kernel.
CMV_DTYPES = MV_DTYPES + (torch.complex64,)


def _complex_mv(M, x, t):
    """complex64 ``op(M) x`` as one real GEMM (rows x 2 x 2 cols) on split parts, through the GEMM kernel.

    ``[mr mi] @ [[xr, xi], [-xi, xr]]``: the kernel reads M's parts once (the
    same bytes as complex M) and the 2-column right-hand side once.
    """
    return _run_any_gemm(gemm_kernel, M, x.unsqueeze(1), t, "N")[:, 0]


def _cmv_counts(M, t):
    rows, cols = la.op_shape(M, t)
    return _gemm_figures(rows, 2, 2 * cols, 4)


def _gemv_plan(A, t):
    """(matrix the kernel reads, trans constant) for op(A) x: row-major A, or A^T when n is too long."""
    m, n = A.shape
    if t == "N":
        return (A, False) if n <= GEMV_MAX_N else (A.mT, True)
    return A, True


def _gemv_counts(alpha, A, x, beta, y, t):
    if A.is_complex():
        return _cmv_counts(A, t)
    if t == "N" and A.shape[1] > GEMV_MAX_N:
        return None  # the host transposes A first: not one kernel read of A as given
    return {"kernel": "gemv_kernel", **gemv_counts(*A.shape, A.element_size(), t != "N")}


@L2.GEMV.lowering("nki", dtypes=CMV_DTYPES, counts=_gemv_counts)
def _gemv_nki(alpha, A, x, beta, y, t):
    if A.is_complex():
        return _mv_finish(_complex_mv(A, x, t), alpha, beta, y, A.dtype)
    M, trans = _gemv_plan(A, t)
    P = nki.run(gemv_kernel, M.contiguous(), x.contiguous(), trans=trans, out_dtype=F32)
    return _mv_finish(P, alpha, beta, y, A.dtype)


def _tri(u: str, strict: bool = False) -> str:
    """gemv_kernel's ``tri`` for the ``u`` ("U"/"L") triangle of A."""
    return ("strict_" if strict else "") + ("upper" if u == "U" else "lower")


def _symv_counts(alpha, A, x, beta, y, u, hermitian):
    if A.is_complex():
        return _cmv_counts(A, "N")
    if A.shape[0] > GEMV_MAX_N:  # the filled matrix through the Tensor-Engine variant
        return {"kernel": "gemv_kernel", **gemv_counts(*A.shape, A.element_size(), True)}
    return None  # two gemv_kernel runs (the triangle, then its strict transpose): no single closed form


def _symv_kernels(alpha, A, x, beta, y, u, hermitian):
    """Complex: the GEMM kernel on split parts; real: gemv_kernel (once on the filled matrix past
    GEMV_MAX_N, else twice on the stored triangle)."""
    return ("gemm_kernel",) if A.is_complex() else ("gemv_kernel",)


@L2.SYMV.lowering("nki", dtypes=CMV_DTYPES, counts=_symv_counts, kernels=_symv_kernels)
def _symv_nki(alpha, A, x, beta, y, u, hermitian):
    if A.is_complex():  # the full symmetric / Hermitian matrix, then the GEMM kernel
        return _mv_finish(_complex_mv(la.symmetric(A, u, hermitian), x, "N"), alpha, beta, y, A.dtype)
    n = A.shape[0]
    x = x.contiguous()
    if n > GEMV_MAX_N:  # too long for the Vector-Engine variant: S^T = S on the Tensor Engine, S formed by torch
        P = nki.run(gemv_kernel, la.symmetric(A, u, False).contiguous(), x, trans=True, out_dtype=F32)
        return _mv_finish(P, alpha, beta, y, A.dtype)
    # S x = T x + strict(T)^T x for the stored triangle T: A read as given, twice, masked in SBUF
    Ac = A.contiguous()
    P = nki.run(gemv_kernel, Ac, x, trans=False, tri=_tri(u), out_dtype=F32)
    P.add_(nki.run(gemv_kernel, Ac, x, trans=True, tri=_tri(u, True), out_dtype=F32))
    return _mv_finish(P, alpha, beta, y, A.dtype)


def _trmv_counts(A, x, u, t, d):
    if A.is_complex():
        return _cmv_counts(A, t)
    n = A.shape[0]
    if t == "N" and n > GEMV_MAX_N:
        return None
    return {"kernel": "gemv_kernel", **gemv_counts(n, n, A.element_size(), t != "N", _tri(u, d == "U"))}


@L2.TRMV.lowering("nki", dtypes=CMV_DTYPES, counts=_trmv_counts)
def _trmv_nki(A, x, u, t, d):
    if A.is_complex():
        return _complex_mv(la.triangle(A, u, d == "U"), x, t).to(A.dtype)
    n = A.shape[0]
    if t == "N" and n > GEMV_MAX_N:  # too long for the Vector-Engine variant: the triangle, transposed by torch
        M, trans = _gemv_plan(la.triangle(A, u, d == "U"), t)
        return nki.run(gemv_kernel, M.contiguous(), x.contiguous(), trans=trans, out_dtype=F32).to(A.dtype)
    # A read as given, its triangle selected in SBUF (strict for a unit diagonal, whose x is added here)
    P = nki.run(gemv_kernel, A.contiguous(), x.contiguous(), trans=t != "N", tri=_tri(u, d == "U"), out_dtype=F32)
    if d == "U":
        P.add_(x.to(F32))
    return P.to(A.dtype)


def _trsv_supports(A, x, u, t, d):
    n = A.shape[0]
    return None if trsm_fits(n) else f"order {n} exceeds the TRSM kernel's SBUF plan"


@L2.TRSV.lowering("nki", dtypes=(torch.float32, torch.bfloat16, torch.float16), supports=_trsv_supports,
                  counts=lambda A, x, u, t, d: {"kernel": "trsm_kernel", **trsm_counts(A.shape[0], 1)})
def _trsv_nki(A, x, u, t, d):

    w, r, undo = trsm_operands(1.0, A, x.unsqueeze(1), "L", u, t, d)
    return undo(nki.run(trsm_kernel, w, r, out_dtype=F32)).squeeze(1).to(x.dtype).contiguous()


def _ger_supports(m, n, x):
    size, n = (4, 2 * n) if x.is_complex() else (x.element_size(), n)
    if not ger_fits(m, n, size):
        return f"m + n = {m + n} vectors exceed the kernel's resident {GER_MAX_BYTES} B per partition"
    return None


def _ger_figures(m, n, terms, x, A):
    if x.is_complex():  # the real view: 2n columns, two contraction rows per complex term
        return {"kernel": "ger_kernel", **ger_counts(m, 2 * n, 2 * terms, 4, A is not None)}
    return {"kernel": "ger_kernel", **ger_counts(m, n, terms, x.element_size(), A is not None)}


def _rank_update(A, terms, like):
    """``A + sum_t a_t b_t^T`` through the rank-update kernel (``b_t`` already scaled/conjugated).

    complex64 runs on the real view of A (``[m, 2n]``, parts interleaved):
    ``a b^T`` contributes rows ``[ar; ai]`` against ``[[br, bi]; [-bi, br]]``
    interleaved per column, so each complex term is a depth-2 real update
    and A is read once.
    """
    if not like.is_complex():
        xs = torch.stack([a for a, _ in terms]).to(like.dtype).contiguous()
        ys = torch.stack([b.to(F32) for _, b in terms]).to(like.dtype).contiguous()
        a = None if A is None else A.contiguous()
        return nki.run(ger_kernel, a, xs, ys, out_dtype=like.dtype)
    rows_x, rows_y = [], []
    for a, b in terms:
        a, b = a.resolve_conj(), b.resolve_conj()
        rows_x += [a.real, a.imag]
        rows_y += [torch.stack([b.real, b.imag], -1).reshape(-1), torch.stack([-b.imag, b.real], -1).reshape(-1)]
    xs = torch.stack(rows_x).contiguous()
    ys = torch.stack(rows_y).contiguous()
    m, n = xs.shape[1], ys.shape[1] // 2
    a = None if A is None else torch.view_as_real(A.resolve_conj()).reshape(m, 2 * n).contiguous()
    out = nki.run(ger_kernel, a, xs, ys, out_dtype=F32)
    return torch.view_as_complex(out.reshape(m, n, 2).contiguous())


def _cj(t, flag):
    return t.conj() if flag and t.is_complex() else t


@L2.GER.lowering("nki", dtypes=CMV_DTYPES,
                 supports=lambda al, x, y, A, conj: _ger_supports(x.shape[0], y.shape[0], x),
                 counts=lambda al, x, y, A, conj: _ger_figures(x.shape[0], y.shape[0], 1, x, A))
def _ger_nki(alpha, x, y, A, conj):
    return _rank_update(A, [(x, _cj(y, conj) * alpha)], x)


@L2.SYR.lowering("nki", dtypes=CMV_DTYPES,
                 supports=lambda al, x, A, h: _ger_supports(x.shape[0], x.shape[0], x),
                 counts=lambda al, x, A, h: _ger_figures(x.shape[0], x.shape[0], 1, x, A))
def _syr_nki(alpha, x, A, herm):
    return _rank_update(A, [(x, _cj(x, herm) * alpha)], x)  # her: alpha x x^H (alpha real)


@L2.SYR2.lowering("nki", dtypes=CMV_DTYPES,
                  supports=lambda al, x, y, A, h: _ger_supports(x.shape[0], x.shape[0], x),
                  counts=lambda al, x, y, A, h: _ger_figures(x.shape[0], x.shape[0], 2, x, A))
def _syr2_nki(alpha, x, y, A, herm):
    if herm:  # her2: alpha x y^H + conj(alpha) y x^H
        return _rank_update(A, [(x, _cj(y, True) * alpha), (y, _cj(x * alpha, True))], x)
    return _rank_update(A, [(x, y * alpha), (y, x * alpha)], x)
