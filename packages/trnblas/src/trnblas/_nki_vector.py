"""NKI lowerings of the level-1 and level-2 BLAS ops, and of geam, dgmm, syr2k (imported by :mod:`trnblas._nki`).

Level 1 runs :mod:`trnblas.kernels.axpby` (vectors out) and
:mod:`trnblas.kernels.vreduce` (partials out, combined here in float64);
level 2 runs :mod:`trnblas.kernels.gemv`, :mod:`trnblas.kernels.ger` and,
for ``trsv``, :mod:`trnblas.kernels.trsm` with one right-hand side.

Host work and why:

* A strided vector is made contiguous (one gather) -- the kernels read
  ``[128, q]`` views of a dense vector.
* complex64 data with real coefficients (``axpy``/``scal``/``rot`` with
  real scalars, ``copy``, ``swap``, ``nrm2``, ``asum``) runs on the
  interleaved real view (``2 n`` floats): exact, since a real coefficient
  acts on real and imaginary parts alike; complex coefficients run the
  caxpby kernel (:mod:`trnblas.kernels.caxpby`), which combines the parts
  on the Vector Engine. Complex ``dot``/``dotc`` are two real dot kernels
  on real views (the second against ``-1j y`` or ``1j conj(y)``, built on
  the host). Complex ``iamax``/``iamin`` rank ``|Re| + |Im|`` inside the
  reduction kernel (``op="camax"``/``"camin"`` on the interleaved view).
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
* ``geam``: transposed operands are transposed on the host (one pass each),
  then the axpby kernel reads both once. ``dgmm``: its own kernel.
* ``syr2k``: ``op(A)^T`` and ``op(B)^T`` go to :mod:`trnblas.kernels.syr2k`
  (a transpose pass each for ``trans="N"``, none for ``"T"``), which adds
  both products in one PSUM group for the requested triangle's tiles;
  alpha, beta and the other triangle of ``C`` are applied on the host, as
  SYRK. Beyond SBUF: ``[a b] [b a]^T`` through the GEMM kernel.
* alpha and beta of ``gemv``/``symv`` are applied to the fp32 kernel result
  on the host (one pass over a vector), as for GEMM.
"""

from __future__ import annotations

import math

import torch

from trnblas import level1 as L1
from trnblas import level2 as L2
from trnblas import level3 as L3
from trnblas._nki import KERNEL_DTYPES, _finish, _gemm_figures, _run_any_gemm, _run_gemm_kernel
from trnblas.kernels.axpby import axpby_counts, axpby_kernel
from trnblas.kernels.axpby import kind as axpby_kind
from trnblas.kernels.caxpby import caxpby_counts, caxpby_kernel
from trnblas.kernels.dgmm import MAX_N as DGMM_MAX_N
from trnblas.kernels.dgmm import dgmm_counts, dgmm_kernel
from trnblas.kernels.dgmm import fits as dgmm_fits
from trnblas.kernels.gemm import gemm_kernel
from trnblas.kernels.gemv import MAX_N as GEMV_MAX_N
from trnblas.kernels.gemv import gemv_counts, gemv_kernel
from trnblas.kernels.ger import MAX_BYTES as GER_MAX_BYTES
from trnblas.kernels.ger import fits as ger_fits
from trnblas.kernels.ger import ger_counts, ger_kernel
from trnblas.kernels.syr2k import fits as syr2k_fits
from trnblas.kernels.syr2k import syr2k_counts, syr2k_kernel
from trnblas.kernels.trsm import fits as trsm_fits
from trnblas.kernels.trsm import trsm_counts, trsm_kernel
from trnblas.kernels.vreduce import MAX_INDEX, reduce_counts, reduce_kernel
from trnsci import linalg as la
from trnsci import nki

F32 = torch.float32
#: Vector kernels: the Vector Engine's float dtypes, and complex64 through its real view.
VEC_DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.complex64)
REAL_VEC_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
#: Matrix-vector kernels (the Tensor Engine's fp32, bf16 and fp16 operands; fp32 PSUM).
MV_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _flat(t):
    """A contiguous real 1-D tensor: the interleaved real view for complex data."""
    if t.is_complex():
        t = torch.view_as_real(t.resolve_conj())
    return t.reshape(-1).contiguous()


def _back(r, like):
    return torch.view_as_complex(r.reshape(-1, 2).contiguous()) if like.is_complex() else r


def _complex_coef(*vals):
    """True when a coefficient has an imaginary part (the caxpby kernel then runs)."""
    return any(isinstance(v, complex) and v.imag != 0 for v in vals)


def _real_only(name):
    def supports(x, *rest):
        if x.is_complex():
            return f"complex {name} is not split into real kernels yet"
        return None
    return supports


def _coef(*vals):
    return tuple(float(val.real if isinstance(val, complex) else val) for val in vals)


def _pairs(*vals):
    return tuple((float(complex(v).real), float(complex(v).imag)) for v in vals)


def _ckind(v):
    v = complex(v)
    return axpby_kind(0) if v == 0 else axpby_kind(1) if v == 1 else axpby_kind(2.5)


def _lin_plan(x, coefs):
    """(kernel, form, coefficient row values) for ``coefs`` = (a, b, c, d) on ``x``."""
    if x.is_complex() and _complex_coef(*coefs):
        return caxpby_kernel, (_ckind(coefs[1]), _ckind(coefs[3])), [p for c in _pairs(*coefs) for p in c]
    vals = _coef(*coefs)
    return axpby_kernel, tuple(axpby_kind(v) for v in vals), list(vals)


def _lin_counts(x, coefs, has_y, pair):
    """Closed forms of the kernel that runs ``coefs`` (a, b, c, d as numbers) on ``x``."""
    kernel, form, _ = _lin_plan(x, coefs)
    if kernel is caxpby_kernel:
        return {"kernel": "caxpby_kernel", **caxpby_counts(x.numel(), form, has_y, pair)}
    n = x.numel() * (2 if x.is_complex() else 1)
    size = 4 if x.is_complex() else x.element_size()
    return {"kernel": "axpby_kernel", **axpby_counts(n, size, form, has_y, pair)}


def _run_lin(x, y, coefs, pair=False):
    """``a x + b y`` (and ``c x + d y``) for vectors; the coefficient values travel as a float32 row."""
    kernel, form, row = _lin_plan(x, coefs)
    xf = _flat(x)
    yf = None if y is None else _flat(y)
    coef = torch.tensor([row], dtype=F32, device=x.device)
    out_dtype = F32 if kernel is caxpby_kernel else xf.dtype
    out = nki.run(kernel, xf, yf, coef, form=form, pair=pair, out_dtype=out_dtype)
    if pair:
        return _back(out[0], x), _back(out[1], x)
    return _back(out, x)


# ----------------------------------------------------------------- level 1, vectors out
# complex64 with real coefficients: the axpby kernel on the interleaved real view (exact);
# with complex coefficients: the caxpby kernel (parts combined on the Vector Engine).

@L1.AXPY.lowering("nki", dtypes=VEC_DTYPES, counts=lambda a, x, y: _lin_counts(x, (a, 1.0, 0.0, 0.0), True, False))
def _axpy_nki(alpha, x, y):
    return _run_lin(x, y, (alpha, 1.0, 0.0, 0.0))


@L1.SCAL.lowering("nki", dtypes=VEC_DTYPES, counts=lambda a, x: _lin_counts(x, (a, 0.0, 0.0, 0.0), False, False))
def _scal_nki(alpha, x):
    return _run_lin(x, None, (alpha, 0.0, 0.0, 0.0))


@L1.COPY.lowering("nki", dtypes=VEC_DTYPES, counts=lambda x: _lin_counts(x, (1.0, 0.0, 0.0, 0.0), False, False))
def _copy_nki(x):
    return _run_lin(x, None, (1.0, 0.0, 0.0, 0.0))


@L1.SWAP.lowering("nki", dtypes=VEC_DTYPES, counts=lambda x, y: _lin_counts(x, (0.0, 1.0, 1.0, 0.0), True, True))
def _swap_nki(x, y):
    return _run_lin(x, y, (0.0, 1.0, 1.0, 0.0), pair=True)


def _rot_coefs(c, s):
    """(c, s, -conj(s), c): x' = c x + s y, y' = c y - conj(s) x."""
    return (c, s, -(s.conjugate() if isinstance(s, complex) else s), c)


@L1.ROT.lowering("nki", dtypes=VEC_DTYPES,
                 counts=lambda x, y, c, s: _lin_counts(x, _rot_coefs(c, s), True, True))
def _rot_nki(x, y, c, s):
    return _run_lin(x, y, _rot_coefs(c, s), pair=True)


# ----------------------------------------------------------------- level 1, reductions

def _rcounts(op):
    def counts(x, *rest):
        n = x.shape[0] * (2 if x.is_complex() else 1)
        size = 4 if x.is_complex() else x.element_size()
        return {"kernel": "reduce_kernel", **reduce_counts(n, size, op)}
    return counts


def _partials(x, y, op):
    part = nki.run(reduce_kernel, _flat(x), None if y is None else _flat(y), op=op, out_dtype=F32)
    return part.to(torch.float64)


def _real_dtype(x):
    return x.real.dtype if x.is_complex() else x.dtype


def _dot_counts(x, y):
    if x.is_complex():
        return None  # two kernel runs (real and imaginary parts)
    return {"kernel": "reduce_kernel", **reduce_counts(x.shape[0], x.element_size(), "dot")}


def _dot_nki_impl(x, y, conj):
    if not x.is_complex():
        return _partials(x, y, "dot").sum().to(x.dtype)
    # On the interleaved real views: sum conj(x) y = x.y + i x.(-1j y);  sum x y = x.conj(y) + i x.(1j conj(y)).
    # Multiplying by -1j / 1j swaps and negates parts (exact): one host pass over y.
    yr = y if conj else y.conj()
    yi = yr * (-1j if conj else 1j)
    re = _partials(x, yr, "dot").sum()
    im = _partials(x, yi, "dot").sum()
    return torch.complex(re, im).to(x.dtype)


@L1.DOT.lowering("nki", dtypes=VEC_DTYPES, counts=_dot_counts, kernels=("reduce_kernel",))
def _dot_nki(x, y):
    return _dot_nki_impl(x, y, False)


@L1.DOTC.lowering("nki", dtypes=VEC_DTYPES, counts=_dot_counts, kernels=("reduce_kernel",))
def _dotc_nki(x, y):
    return _dot_nki_impl(x, y, True)


@L1.ASUM.lowering("nki", dtypes=VEC_DTYPES, counts=_rcounts("asum"))
def _asum_nki(x):
    return _partials(x, None, "asum").sum().to(_real_dtype(x))


@L1.NRM2.lowering("nki", dtypes=VEC_DTYPES, counts=_rcounts("nrm2"))
def _nrm2_nki(x):
    part = _partials(x, None, "nrm2")
    scale, ss = part[:, 0::2], part[:, 1::2]
    if not x.is_cpu:  # on a device: the same three cases chosen there, nothing read on the host
        val = torch.sqrt((ss / scale**2).sum())
        val = torch.where((scale == 0).any(), torch.full_like(val, math.inf), val)
        val = torch.where(torch.isnan(scale).any(), torch.full_like(val, math.nan), val)
        return val.to(_real_dtype(x))
    if torch.isnan(scale).any():  # a NaN entry (the row maximum propagates it)
        val = math.nan
    elif (scale == 0).any():  # an Inf entry (its row's sum of squares is Inf * 0 = NaN: not read)
        val = math.inf
    else:
        val = math.sqrt(float((ss / scale**2).sum()))
    return torch.tensor(val, dtype=torch.float64, device=x.device).to(_real_dtype(x))


def _index_supports(x):
    if x.shape[0] >= MAX_INDEX:
        return f"n = {x.shape[0]} >= 2^24: indices are carried in fp32"
    return None


def _index_counts(op):
    def counts(x):
        if x.is_complex():
            return {"kernel": "reduce_kernel", **reduce_counts(x.shape[0], 4, "c" + op)}
        return {"kernel": "reduce_kernel", **reduce_counts(x.shape[0], x.element_size(), op)}
    return counts


def _best_index(x, op):
    part = _partials(x, None, ("c" + op) if x.is_complex() else op)
    val, idx = part[:, 0::2], part[:, 1::2]
    if torch.isnan(val).any():  # NaN counts as the extreme, first NaN wins (as torch.argmax)
        return int(torch.isnan(x).nonzero()[0, 0])
    best = val.max() if op == "amax" else val.min()
    return int(idx[val == best].min())


@L1.IAMAX.lowering("nki", dtypes=VEC_DTYPES, supports=_index_supports, counts=_index_counts("amax"))
def _iamax_nki(x):
    return _best_index(x, "amax")


@L1.IAMIN.lowering("nki", dtypes=VEC_DTYPES, supports=_index_supports, counts=_index_counts("amin"))
def _iamin_nki(x):
    return _best_index(x, "amin")


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


def _real_mv(name):
    def supports(*args):
        A = next(a for a in args if isinstance(a, torch.Tensor))
        return f"complex {name} is not split into real kernels yet" if A.is_complex() else None
    return supports


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
    from trnblas._nki import trsm_operands

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


# ----------------------------------------------------------------- level 3: geam, dgmm, syr2k

def _geam_mats(A, B, tA, tB):
    a = la.op(A, tA).contiguous()  # a transposed operand is one host transpose pass
    b = None if B is None else la.op(B, tB).contiguous()
    return a, b


@L3.GEAM.lowering("nki", dtypes=VEC_DTYPES,
                  counts=lambda al, A, be, B, tA, tB: _lin_counts(A, (al, be, 0.0, 0.0), B is not None, False))
def _geam_nki(alpha, A, beta, B, tA, tB):
    a, b = _geam_mats(A, B, tA, tB)
    R = _run_lin(a.reshape(-1), None if b is None else b.reshape(-1), (alpha, beta, 0.0, 0.0))
    return R.reshape(a.shape)


def _dgmm_supports(A, x, side):
    if A.is_complex():
        return "complex dgmm is not split into real kernels yet"
    if not dgmm_fits(*A.shape, side == "L"):
        return f"side right with n = {A.shape[1]} > {DGMM_MAX_N}: the replicated x row exceeds the SBUF plan"
    return None


@L3.DGMM.lowering("nki", dtypes=REAL_VEC_DTYPES, supports=_dgmm_supports,
                  counts=lambda A, x, side: {"kernel": "dgmm_kernel",
                                             **dgmm_counts(*A.shape, A.element_size(), side == "L")})
def _dgmm_nki(A, x, side):
    return nki.run(dgmm_kernel, A.contiguous(), x.contiguous(), left=side == "L", out_dtype=A.dtype)


def _syr2k_counts(alpha, A, B, beta, C, trans, uplo, full=False):
    n, k = la.op_shape(A, trans)
    size = A.element_size()
    if not syr2k_fits(k, n, size):
        return _gemm_figures(n, n, 2 * k, size)
    return {"kernel": "syr2k_kernel", **syr2k_counts(n, k, size, uplo == "U")}


@L3.SYR2K.lowering("nki", dtypes=KERNEL_DTYPES, counts=_syr2k_counts)
def _syr2k_nki(alpha, A, B, beta, C, trans, uplo, full=False):
    a, b = la.op(A, trans), la.op(B, trans)  # [n, k]
    k, n = a.shape[1], a.shape[0]
    if syr2k_fits(k, n, A.element_size()):  # x = a^T, z = b^T: the kernel adds a b^T + b a^T
        P = nki.run(syr2k_kernel, a.mT.contiguous(), b.mT.contiguous(), upper=uplo == "U", out_dtype=F32)
    else:  # both operands do not fit SBUF: [a b] [b a]^T through the GEMM kernel (depth 2k)
        x = torch.cat([a.mT, b.mT]).contiguous()
        z = torch.cat([b.mT, a.mT]).contiguous()
        P = _run_gemm_kernel(gemm_kernel, x, z)
    R = _finish(P, alpha, beta, C, A.dtype)  # only the uplo triangle is meaningful
    return la.merge_triangle(R, C, uplo, full, False)  # full: mirrored on the host
