"""NKI lowerings of trnblas's level-1 ops (:mod:`trnblas.level1`), and the vector-kernel helpers level 3 reuses.

Vectors out (``axpy``, ``scal``, ``copy``, ``swap``, ``rot``) run
:mod:`trnblas.kernels.axpby` (:mod:`trnblas.kernels.caxpby` for complex
coefficients); reductions (``dot``, ``dotc``, ``asum``, ``nrm2``,
``iamax``, ``iamin``) run :mod:`trnblas.kernels.vreduce`, whose partials
are combined here in float64.

Host work and why:

* A strided vector is made contiguous (one gather) -- the kernels read
  ``[128, q]`` views of a dense vector.
* complex64 data with real coefficients (``axpy``/``scal``/``rot`` with
  real scalars, ``copy``, ``swap``, ``nrm2``, ``asum``) runs on the
  interleaved real view (``2 n`` floats): exact, since a real coefficient
  acts on real and imaginary parts alike; complex coefficients run the
  caxpby kernel, which combines the parts on the Vector Engine. Complex
  ``dot``/``dotc`` are two real dot kernels on real views (the second
  against ``-1j y`` or ``1j conj(y)``, built on the host). Complex
  ``iamax``/``iamin`` rank ``|Re| + |Im|`` inside the reduction kernel
  (``op="camax"``/``"camin"`` on the interleaved view).
"""

from __future__ import annotations

import math

import torch

from trnblas import level1 as L1
from trnblas.kernels.axpby import axpby_counts, axpby_kernel
from trnblas.kernels.axpby import kind as axpby_kind
from trnblas.kernels.caxpby import caxpby_counts, caxpby_kernel
from trnblas.kernels.vreduce import MAX_INDEX, vreduce_counts, vreduce_kernel
from trnsci import nki

F32 = torch.float32
#: Vector kernels: the Vector Engine's float dtypes, and complex64 through its real view.
VEC_DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.complex64)
REAL_VEC_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


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
        return {"kernel": "vreduce_kernel", **vreduce_counts(n, size, op)}
    return counts


def _partials(x, y, op):
    part = nki.run(vreduce_kernel, _flat(x), None if y is None else _flat(y), op=op, out_dtype=F32)
    return part.to(torch.float64)


def _real_dtype(x):
    return x.real.dtype if x.is_complex() else x.dtype


def _dot_counts(x, y):
    if x.is_complex():
        return None  # two kernel runs (real and imaginary parts)
    return {"kernel": "vreduce_kernel", **vreduce_counts(x.shape[0], x.element_size(), "dot")}


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


@L1.DOT.lowering("nki", dtypes=VEC_DTYPES, counts=_dot_counts, kernels=("vreduce_kernel",))
def _dot_nki(x, y):
    return _dot_nki_impl(x, y, False)


@L1.DOTC.lowering("nki", dtypes=VEC_DTYPES, counts=_dot_counts, kernels=("vreduce_kernel",))
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
            return {"kernel": "vreduce_kernel", **vreduce_counts(x.shape[0], 4, "c" + op)}
        return {"kernel": "vreduce_kernel", **vreduce_counts(x.shape[0], x.element_size(), op)}
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
