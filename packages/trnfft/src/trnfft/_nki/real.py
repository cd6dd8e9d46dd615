"""NKI lowerings of :mod:`trnfft.real` (rfft, irfft, hfft, ihfft, rfftn, irfftn): the half-length kernels
(:mod:`trnfft.kernels.rfft`, :mod:`trnfft.kernels.irfft`) where they fit, else the complex route of
:mod:`trnfft._nki.basic` (routing in its docstring).
"""

from __future__ import annotations

import math

import torch

from trnsci import nki

from .. import algorithms as A
from ..kernels import irfft as KI
from ..kernels import rfft as KR
from ..real import HFFT, IHFFT, IRFFT, IRFFTN, RFFT, RFFTN
from .basic import (
    F32,
    _along,
    _c2c,
    _c2c_counts_rows,
    _c2c_names,
    _c2r_kernels,
    _c2r_names,
    _c2r_route,
    _nonempty,
    _r2c_kernels,
    _r2c_names,
    _rfft_route,
    _rows_c2c,
    _scaled,
    _table,
    algorithm,
)


def _rfft_supports(x, n, dim, norm, precision):
    return _nonempty(x) or _rfft_route(n, precision)[1] or None


def _rfft_counts(x, n, dim, norm, precision):
    B = RFFT.size(x, n, dim, norm, precision) // n  # the rows (the Op's points / n)
    if _rfft_route(n, precision)[0] == "rfft_half":
        return {"kernel": "rfft_kernel", **KR.rfft_counts(B, n)}
    return _c2c_counts_rows(B, n, precision)


@RFFT.lowering("nki", dtypes=(torch.float32,), supports=_rfft_supports, counts=_rfft_counts, kernels=_r2c_kernels)
def _rfft_nki(x, n, dim, norm, precision):
    return _r2c(x, n, dim, norm, precision)


def _r2c(x, n, dim, norm, precision):
    h = n // 2 + 1
    if _rfft_route(n, precision)[0] == "rfft_half":
        def fn(r, i):
            y = nki.run(KR.rfft_kernel, r.contiguous(), _table("half", n), _table("tw", n // 2),
                        out_dtype=F32)
            return y[0], y[1]

        y = _along(x.to(F32).to(torch.complex64), n, dim, fn)
    else:
        def fn(r, i):
            yr, yi = _rows_c2c(r, torch.zeros_like(r), False, precision)
            return yr[:, :h], yi[:, :h]

        y = _along(x.to(torch.complex64), n, dim, fn)
    return _scaled(y, norm, False, n)


def _c2r_supports(x, n, dim, norm, precision):
    return _nonempty(x) or _c2r_route(n, precision)[1] or None


def _irfft_counts(x, n, dim, norm, precision):
    B = IRFFT.size(x, n, dim, norm, precision) // n
    route = _c2r_route(n, precision)[0]
    if route == "irfft_half":
        return {"kernel": "irfft_kernel", **KI.irfft_counts(B, n)}
    if route == "half":
        return _c2c_counts_rows(B, n // 2, precision)
    return _c2c_counts_rows(B, n, precision)


@IRFFT.lowering("nki", dtypes=(torch.complex64,), supports=_c2r_supports, counts=_irfft_counts,
                kernels=_c2r_kernels)
def _irfft_nki(x, n, dim, norm, precision):
    return _c2r(x, n, dim, norm, precision)


def _half_c2r_host(Xr, Xi, n, precision):
    """``n irfft`` of float32 ``(R, n/2 + 1)`` planes: host pre-twiddle, one complex inverse of length n/2."""
    h = n // 2
    c, s = _table("ihalf0", n)
    Xi = Xi.clone()
    Xi[:, 0] = 0
    Xi[:, h] = 0
    fr, fi = Xr[:, :h], Xi[:, :h]  # X_k, k = 0 .. h-1
    rr, ri = Xr[:, 1:].flip(-1), Xi[:, 1:].flip(-1)  # X_(h-k)
    dr, di = fr - rr, fi + ri
    zr = (fr + rr) - (s * dr + c * di)
    zi = (fi - ri) + (c * dr - s * di)
    yr, yi = _rows_c2c(zr.contiguous(), zi.contiguous(), True, precision)
    return torch.stack((yr, yi), -1).reshape(Xr.shape[0], n)


def _c2r(x, n, dim, norm, precision):
    """Real output of length n along dim from the half spectrum (the routes above)."""
    h = n // 2 + 1
    x = A.resize(x.to(torch.complex64), h, dim)
    rows, shp = A.as_rows(x, dim, h)
    route = _c2r_route(n, precision)[0]
    if route == "irfft_half":
        planes = torch.stack((rows.real, rows.imag)).contiguous()  # one host pass (split planes)
        y = nki.run(KI.irfft_kernel, planes, _table("ihalf", n), _table("tw", n // 2), out_dtype=F32)
    elif route == "half":
        y = _half_c2r_host(rows.real, rows.imag, n, precision)
    else:
        Xr, Xi = rows.real.clone(), rows.imag.clone()
        Xi[:, 0] = 0
        tail = n - h  # conj(X[n - k]) for k = h .. n-1
        full_r = torch.cat((Xr, Xr[:, 1:1 + tail].flip(-1)), 1).contiguous()
        full_i = torch.cat((Xi, -Xi[:, 1:1 + tail].flip(-1)), 1).contiguous()
        y, _ = _rows_c2c(full_r, full_i, True, precision)
    y = y.reshape(*shp[:-1], n).movedim(-1, dim)
    return _scaled(y, norm, True, n)


@HFFT.lowering("nki", dtypes=(torch.complex64,), supports=_c2r_supports, counts=_irfft_counts,
               kernels=_c2r_kernels)
def _hfft_nki(x, n, dim, norm, precision):
    """hfft(x, n) = irfft(conj(x), n) with the normalization swapped."""
    return _c2r(x.conj().resolve_conj(), n, dim, A.swap_norm(norm), precision)


def _ihfft_counts(x, n, dim, norm, precision):
    return _rfft_counts(x, n, dim, norm, precision)


@IHFFT.lowering("nki", dtypes=(torch.float32,), supports=_rfft_supports, counts=_ihfft_counts,
                kernels=_r2c_kernels)
def _ihfft_nki(x, n, dim, norm, precision):
    """ihfft(x, n) = conj(rfft(x, n)) with the normalization swapped."""
    return _r2c(x, n, dim, A.swap_norm(norm), precision).conj().resolve_conj()


def _rn_supports(x, s, dim, norm, precision):
    why = _nonempty(x) or _rfft_route(s[-1], precision)[1]
    for n in s[:-1]:
        why = why or algorithm(n, precision)[1]
    return why or None


def _rfftn_counts(x, s, dim, norm, precision):
    if len(s) == 1:
        return _rfft_counts(x, s[0], dim[0], norm, precision)
    return None  # one kernel run per transformed dim


def _irfftn_counts(x, s, dim, norm, precision):
    if len(s) == 1:
        return _irfft_counts(x, s[0], dim[0], norm, precision)
    return None


def _rfftn_kernels(x, s, dim, norm, precision):
    """The real-input kernel along dim[-1] first, then the complex kernels along the other dims."""
    return _r2c_names(s[-1], precision) + [k for n in s[:-1] for k in _c2c_names(n, precision)]


@RFFTN.lowering("nki", dtypes=(torch.float32,), supports=_rn_supports, counts=_rfftn_counts, kernels=_rfftn_kernels)
def _rfftn_nki(x, s, dim, norm, precision):
    """Half spectrum along dim[-1] (real-input kernel), then complex kernels along the other dims."""
    y = _r2c(x, s[-1], dim[-1], "backward", precision)
    if len(s) > 1:
        y = _c2c(y, s[:-1], dim[:-1], "backward", False, precision)
    return _scaled(y, norm, False, math.prod(s))


def _irn_supports(x, s, dim, norm, precision):
    why = _nonempty(x) or _c2r_route(s[-1], precision)[1]
    for n in s[:-1]:
        why = why or algorithm(n, precision)[1]
    return why or None


def _irfftn_kernels(x, s, dim, norm, precision):
    """The complex inverse kernels along dim[:-1] first, then the real-output one along dim[-1]."""
    return [k for n in s[:-1] for k in _c2c_names(n, precision)] + _c2r_names(s[-1], precision)


@IRFFTN.lowering("nki", dtypes=(torch.complex64,), supports=_irn_supports, counts=_irfftn_counts,
                 kernels=_irfftn_kernels)
def _irfftn_nki(x, s, dim, norm, precision):
    """Complex inverse kernels along dim[:-1], then the Hermitian-to-real inverse along dim[-1]."""
    if len(s) > 1:
        x = _c2c(x, s[:-1], dim[:-1], "forward", True, precision)  # unscaled
    y = _c2r(x, s[-1], dim[-1], "forward", precision)  # unscaled
    return _scaled(y, norm, True, math.prod(s))
