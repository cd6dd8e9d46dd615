"""The FFT algorithms of trnfft's kernels, on the host, and the tables the kernels load.

Shared by the torch lowerings' precision modes, the NKI lowerings and the
kernels. Pure torch (no ``torch.fft``), split real/imaginary throughout, batch on the
leading dimension: every function takes ``(xr, xi)`` of shape ``(B, n)`` and
returns ``(yr, yi)`` of the same kind. These are the host-side models of the
kernels (``trnfft/kernels/``): the constant tables
they use -- DFT matrices, stage twiddles, Bluestein chirps -- are computed
here in float64 from angles reduced to ``[-pi, pi]`` (the range of the
Scalar Engine's ``sin``; there is no ``cos`` activation) and then cast to
the working dtype.

Algorithms and their float32 error bounds (``u = 2**-24``; the bound is on
``||y_hat - y||_2 / ||y||_2`` per transform, checked in
``tests/test_fft_algorithms.py`` against ``scipy.fft`` in float64):

* :func:`dft_gemm` -- ``y = W x`` as real matmuls with the stationary
  ``cos``/``sin`` DFT matrices. Each output is an n-term dot product, so the
  worst-case bound is ``GEMM_BOUND(n) = 2 n u`` (gamma_n plus the rounding
  of the table entries).
* :func:`stockham` -- self-sorting (no bit reversal) mixed-radix stages,
  radix 8/4/2 (or larger radices done as small DFT-GEMMs). Per stage one
  twiddle multiply and one radix-r DFT; ``STOCKHAM_BOUND(n) = 8 u log2 n``
  (Higham, Accuracy and Stability, Thm 24.2: ``log2(n) eta`` with
  ``eta = mu + gamma_4 (sqrt2 + mu)`` ~ 6.7 u for accurate twiddles).
* :func:`bluestein` -- chirp-z: any ``n`` as a circular convolution of
  length ``m = 2**ceil(log2(2n-1))`` done with two Stockham transforms and a
  precomputed chirp spectrum. ``BLUESTEIN_BOUND(n) = 30 u log2 m``.
* :func:`rfft_half` / :func:`irfft_half` -- real-input transforms of even
  length through one complex transform of length ``n/2`` plus an O(n)
  post-/pre-processing pass; error is the inner transform's plus ~3 u.

Precision variants (``mode`` arguments): ``"kahan"`` makes :func:`stockham`
carry a compensation term (TwoSum error of every butterfly addition and the
low part of every twiddle, pushed linearly through the remaining stages and
added at the end); ``"bf16"`` rounds both GEMM operands to bfloat16 and
accumulates in float32 (exactly what the Tensor Engine does: bf16 x bf16
products are exact in float32); ``"bf16_refined"`` splits each operand into
a bf16 high part and a bf16 residual and adds the two cross products (one
residual-correction step, three bf16 GEMMs). bf16 bounds: per GEMM stage
``2 u_b`` with ``u_b = 2**-9`` for ``"bf16"`` and ``4 u_b**2 + 2 r u`` for
``"bf16_refined"`` (r = stage radix), summed over the stages.

``"ozaki"`` / ``"ozaki_hq"`` (Ozaki scheme) cut each GEMM operand into
``D`` slices of ``b`` significant bits (:func:`ozaki_slices`) and add the
slice products ``a_i w_j`` with ``i + j < D`` (:func:`ozaki_pairs`), in
float32. ``D b`` is 16 bits for ``"ozaki"`` and 24 for ``"ozaki_hq"``;
``b = 4`` by default, so every slice product has at most 8 significant bits
and is exact even where the Tensor Engine rounds each bf16 x bf16 product
to bf16 before the fp32 PSUM accumulation (trn1/trn2, see docs/NKI.md);
``b = 8`` (half the products) once
:func:`trnfft.set_ozaki_product_precision_verified` declares the products
exact. Componentwise bound per real dot product ``sum_k a_k w_k`` of
``K`` terms done as ``P`` slice-pair GEMMs (:func:`ozaki_bound`)::

    |y_hat - y| <= (eps_split + gamma_{P K} + 2 u) * sum_k |a_k| |w_k|,
    eps_split = (D + 1) 2**(-b D) (1 + 2**-b)**2 / (1 - 2**-b)

(the dropped pairs ``i + j >= D`` and the slicing residuals; the float32
accumulation of all slice products; the float32 operands). With bf16
products rounded to bf16 and ``b = 8`` slices instead, each of the largest
products carries a rounding error up to ``u_b |a_k w_k|``: the bound is
then ``u_b`` -- no better than ``"bf16"`` (measured ~1.7e-3 normwise at
n = 64 on trn1/trn2 by the published trnfft).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

U32 = 2.0**-24
U_BF16 = 2.0**-9

#: The DFT-as-GEMM precision modes (bf16 operands on the Tensor Engine).
GEMM_MODES = ("bf16", "bf16_refined", "ozaki", "ozaki_hq")
#: Significant bits the Ozaki modes carry per operand (``D * b``).
OZAKI_BITS = {"ozaki": 16, "ozaki_hq": 24}
#: ``[verified]``: whether bf16 x bf16 products are exact before PSUM accumulation
#: (``trnfft.set_ozaki_product_precision_verified``); False: 4-bit slices, True: 8-bit.
_ozaki_verified = [False]


def ozaki_verified() -> bool:
    """Whether the Ozaki modes cut 8-bit slices (products declared exact) rather than 4-bit ones."""
    return _ozaki_verified[0]


def ozaki_params(mode: str, verified: bool | None = None) -> tuple[int, int]:
    """``(D, b)``: slice count and bits per slice of an Ozaki mode."""
    if verified is None:
        verified = _ozaki_verified[0]
    b = 8 if verified else 4
    return OZAKI_BITS[mode] // b, b


def ozaki_pairs(D: int) -> list[tuple[int, int]]:
    """Slice pairs ``(i, j)`` with ``i + j < D``, largest weight first (``D (D + 1) / 2`` of them)."""
    return [(i, L - i) for L in range(D) for i in range(L + 1)]


def ozaki_slices(a: torch.Tensor, D: int, b: int) -> list[torch.Tensor]:
    """``D`` tensors of ``a``'s dtype whose entries have at most ``b`` significant bits each,
    ``a = sum(slices) + r`` with ``|r| <= 2**(-b D) |a|`` elementwise: slice ``i`` is the
    residual left by slices ``< i`` rounded to nearest at ``b`` bits (computed in float64,
    exact: every slice and residual is representable in ``a``'s float format)."""
    r = a.double()
    out = []
    for _ in range(D):
        m, e = torch.frexp(r)  # r = m 2**e, 0.5 <= |m| < 1 (m = 0 for r = 0)
        q = torch.ldexp(torch.round(torch.ldexp(m, torch.full_like(e, b))), e - b)
        out.append(q.to(a.dtype))
        r = r - q
    return out


def ozaki_bound(mode: str, K: int, verified: bool | None = None) -> float:
    """Componentwise bound (relative to ``sum_k |a_k||w_k|``) of one Ozaki dot product of
    ``K`` terms, see the module docstring."""
    D, b = ozaki_params(mode, verified)
    t = 2.0**-b
    eps_split = (D + 1) * 2.0 ** (-b * D) * (1 + t) ** 2 / (1 - t)
    P = len(ozaki_pairs(D))
    kk = P * K * U32
    return eps_split + kk / (1 - kk) * (1 + t) ** 2 / (1 - t) ** 2 + 2 * U32


def GEMM_BOUND(n: int) -> float:
    return 2.0 * n * U32


def STOCKHAM_BOUND(n: int) -> float:
    return 8.0 * U32 * max(1.0, math.log2(n))


def BLUESTEIN_BOUND(n: int) -> float:
    return 30.0 * U32 * math.log2(bluestein_length(n))


# ------------------------------------------------------------------ tables

def reduced_angle(k: np.ndarray, n: int) -> np.ndarray:
    """``-2 pi k / n`` with ``k`` reduced mod n exactly (integers) into ``[-pi, pi]``."""
    k = np.mod(k.astype(np.int64), n)
    k = np.where(2 * k > n, k - n, k)  # k in (-n/2, n/2]
    return -2.0 * np.pi * k.astype(np.float64) / n


def cos_sin(angle: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(cos a, sin a)`` in float64 using sin only (the Scalar Engine has no cos): ``cos a = sin(a + pi/2)``,
    with the shifted argument wrapped back into ``[-pi, pi]``."""
    s = np.sin(angle)
    # cos(a) = sin(a + pi/2); keep the argument in [-pi, pi]
    b = angle + np.pi / 2
    b = np.where(b > np.pi, b - 2 * np.pi, b)
    return np.sin(b), s


@functools.lru_cache(maxsize=64)
def dft_tables(n: int) -> tuple[np.ndarray, np.ndarray]:
    """float64 ``(C, S)`` with ``W[j, k] = exp(-2 pi i jk/n) = C + i S`` (symmetric)."""
    j = np.arange(n, dtype=np.int64)
    return cos_sin(reduced_angle(np.outer(j, j) % n, n))


@functools.lru_cache(maxsize=128)
def stage_twiddles(ls: int, r: int) -> tuple[np.ndarray, np.ndarray]:
    """float64 ``(ls, r)`` table ``exp(-2 pi i p k1 / (ls r))`` for one Stockham stage."""
    k1 = np.arange(ls, dtype=np.int64)[:, None]
    p = np.arange(r, dtype=np.int64)[None, :]
    return cos_sin(reduced_angle(k1 * p, ls * r))


def max_radix_for(mode: str) -> int:
    """Stockham stage radix: 8 (butterflies) normally, 128 (one DFT-GEMM per stage) in the GEMM modes."""
    return 128 if mode in GEMM_MODES else 8


def radices(n: int, max_radix: int = 8) -> list[int]:
    """Stage radices for a power of two ``n``: as many ``max_radix`` as fit, then the rest."""
    out = []
    while n > 1:
        r = max_radix
        while n % r:
            r //= 2
        out.append(r)
        n //= r
    return out


def bluestein_length(n: int) -> int:
    return 1 << (2 * n - 2).bit_length() if n > 1 else 1


@functools.lru_cache(maxsize=64)
def chirp(n: int) -> tuple[np.ndarray, np.ndarray]:
    """float64 chirp ``w_k = exp(-i pi k^2 / n)``, k < n, with k^2 reduced mod 2n exactly."""
    k = np.arange(n, dtype=np.int64)
    a = np.mod(k * k, 2 * n)  # exact: angle = -pi a / n = -2 pi a / (2n)
    return cos_sin(reduced_angle(a, 2 * n))


@functools.lru_cache(maxsize=64)
def chirp_filter_spectrum(n: int) -> tuple[np.ndarray, np.ndarray]:
    """float64 DFT (length m) of the Bluestein filter ``b_j = conj(w_|j|)``, wrapped circularly."""
    m = bluestein_length(n)
    c, s = chirp(n)
    b = np.zeros(m, dtype=np.complex128)
    b[:n] = c - 1j * s
    if n > 1:
        b[m - n + 1:] = (c[1:] - 1j * s[1:])[::-1]
    B = np.fft.fft(b)  # host-side plan table, computed once per n in float64
    return B.real.copy(), B.imag.copy()


_TABLE_CACHE: dict = {}


def _t(arr: np.ndarray, dtype: torch.dtype, device) -> torch.Tensor:
    key = (id(arr), dtype, str(device))
    hit = _TABLE_CACHE.get(key)
    if hit is None or hit[0] is not arr:
        if len(_TABLE_CACHE) > 512:
            _TABLE_CACHE.clear()
        hit = (arr, torch.from_numpy(arr).to(dtype=dtype, device=device))
        _TABLE_CACHE[key] = hit
    return hit[1]


# ------------------------------------------------------------------ GEMM core

def _split_bf16(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    hi = a.to(torch.bfloat16).to(a.dtype)
    lo = (a - hi).to(torch.bfloat16).to(a.dtype)
    return hi, lo


def _mm(a: torch.Tensor, b: torch.Tensor, mode: str) -> torch.Tensor:
    """``a @ b`` with the operand rounding of ``mode`` and float32/64 accumulation."""
    if mode == "bf16":
        return a.to(torch.bfloat16).to(a.dtype) @ b.to(torch.bfloat16).to(b.dtype)
    if mode == "bf16_refined":
        ah, al = _split_bf16(a)
        bh, bl = _split_bf16(b)
        return ah @ bh + (ah @ bl + al @ bh)
    if mode in OZAKI_BITS:
        D, bits = ozaki_params(mode)
        sa, sb = ozaki_slices(a, D, bits), ozaki_slices(b, D, bits)
        y = None
        for i, j in ozaki_pairs(D):
            p = sa[i] @ sb[j]
            y = p if y is None else y + p
        return y
    return a @ b


def dft_gemm(xr: torch.Tensor, xi: torch.Tensor, inverse: bool = False, mode: str = "fast"):
    """DFT of each row of ``(B, n)`` as four real GEMMs with the stationary DFT matrix.

    ``X = x W``, ``W = C + i S`` (``S`` negated for the inverse; unnormalized).
    """
    n = xr.shape[-1]
    c, s = dft_tables(n)
    C, S = _t(c, xr.dtype, xr.device), _t(s, xr.dtype, xr.device)
    if inverse:
        S = -S
    yr = _mm(xr, C, mode) - _mm(xi, S, mode)
    yi = _mm(xi, C, mode) + _mm(xr, S, mode)
    return yr, yi


# ------------------------------------------------------------------ Stockham

def _two_sum(a: torch.Tensor, b: torch.Tensor):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def stockham(xr: torch.Tensor, xi: torch.Tensor, inverse: bool = False, mode: str = "fast",
             max_radix: int | None = None):
    """Self-sorting mixed-radix FFT of each row of ``(B, n)``, ``n`` a power of two.

    State after a stage: ``Y[k1, t] = sum_j x[t + ns j] w_ls^(j k1)`` for
    ``k1 < ls``, ``t < ns`` (``ls * ns = n``): DFTs of length ``ls`` of the
    ``ns`` decimated subsequences. A radix-r stage makes ``ls -> ls r``:
    ``Y'[k1 + ls q, t'] = sum_p w_r^(p q) w_(ls r)^(p k1) Y[k1, t' + (ns/r) p]``
    -- a twiddle multiply, an r-point DFT (a small GEMM), and a transpose
    that writes the output in natural order (no bit reversal at the end).
    """
    B, n = xr.shape
    if n & (n - 1):
        raise ValueError(f"stockham: n must be a power of two, got {n}")
    if max_radix is None:
        max_radix = max_radix_for(mode)
    comp = mode == "kahan"
    dt, dev = xr.dtype, xr.device
    yr, yi = xr.reshape(B, 1, n), xi.reshape(B, 1, n)
    er = ei = None
    if comp:
        er, ei = torch.zeros_like(yr), torch.zeros_like(yi)
    ls, ns = 1, n
    for r in radices(n, max_radix):
        nsp = ns // r
        yr, yi = yr.reshape(B, ls, r, nsp), yi.reshape(B, ls, r, nsp)
        if ls > 1:
            tc64, ts64 = stage_twiddles(ls, r)
            tc, ts = _t(tc64, dt, dev)[:, :, None], _t(ts64, dt, dev)[:, :, None]
            if inverse:
                ts = -ts
            if comp:
                er, ei = er.reshape(B, ls, r, nsp), ei.reshape(B, ls, r, nsp)
                # low parts of the twiddles (fp64 table minus its rounded value)
                tcl = _t(_low(tc64, dt), dt, dev)[:, :, None]
                tsl = _t(_low(ts64, dt), dt, dev)[:, :, None] * (-1 if inverse else 1)
                er, ei = (er * tc - ei * ts + (yr * tcl - yi * tsl),
                          er * ts + ei * tc + (yr * tsl + yi * tcl))
            yr, yi = yr * tc - yi * ts, yr * ts + yi * tc
        elif comp:
            er, ei = er.reshape(B, ls, r, nsp), ei.reshape(B, ls, r, nsp)
        # r-point DFT over p (dim 2) -> q
        if comp:
            yr, yi, dr, di = _radix_dft_comp(yr, yi, r, inverse)
            er, ei = _radix_dft(er, ei, r, inverse, "fast")
            er, ei = er + dr, ei + di
            er = er.permute(0, 2, 1, 3).reshape(B, ls * r, nsp)
            ei = ei.permute(0, 2, 1, 3).reshape(B, ls * r, nsp)
        else:
            yr, yi = _radix_dft(yr, yi, r, inverse, mode)
        yr = yr.permute(0, 2, 1, 3).reshape(B, ls * r, nsp)
        yi = yi.permute(0, 2, 1, 3).reshape(B, ls * r, nsp)
        ls, ns = ls * r, nsp
    yr, yi = yr.reshape(B, n), yi.reshape(B, n)
    if comp:
        yr, yi = yr + er.reshape(B, n), yi + ei.reshape(B, n)
    return yr, yi


_LOW: dict = {}


def _low(t64: np.ndarray, dt: torch.dtype) -> np.ndarray:
    key = (id(t64), dt)
    hit = _LOW.get(key)
    if hit is None or hit[0] is not t64:
        hi = torch.from_numpy(t64).to(dt).double().numpy()
        hit = (t64, t64 - hi)
        _LOW[key] = hit
    return hit[1]


def _radix_dft(yr, yi, r, inverse, mode):
    """r-point DFT over dim 2 of ``(B, ls, r, ns)``: explicit butterflies for r <= 4, else a GEMM."""
    if r == 1:
        return yr, yi
    if r == 2 and mode == "fast":
        a_r, b_r = yr[:, :, 0:1], yr[:, :, 1:2]
        a_i, b_i = yi[:, :, 0:1], yi[:, :, 1:2]
        return torch.cat((a_r + b_r, a_r - b_r), 2), torch.cat((a_i + b_i, a_i - b_i), 2)
    if r == 4 and mode == "fast":
        x0r, x1r, x2r, x3r = yr.unbind(2)
        x0i, x1i, x2i, x3i = yi.unbind(2)
        ar, ai = x0r + x2r, x0i + x2i
        br, bi = x0r - x2r, x0i - x2i
        cr, ci = x1r + x3r, x1i + x3i
        dr, di = x1r - x3r, x1i - x3i
        # forward: -i * d ; inverse: +i * d
        if inverse:
            jdr, jdi = -di, dr
        else:
            jdr, jdi = di, -dr
        return (torch.stack((ar + cr, br + jdr, ar - cr, br - jdr), 2),
                torch.stack((ai + ci, bi + jdi, ai - ci, bi - jdi), 2))
    c, s = dft_tables(r)
    C, S = _t(c, yr.dtype, yr.device), _t(s, yr.dtype, yr.device)
    if inverse:
        S = -S
    # contract over p: (B, ls, ns, r) @ (r, r)
    ar, ai = yr.transpose(2, 3), yi.transpose(2, 3)
    zr = _mm(ar, C, mode) - _mm(ai, S, mode)
    zi = _mm(ai, C, mode) + _mm(ar, S, mode)
    return zr.transpose(2, 3), zi.transpose(2, 3)


def _radix_dft_comp(yr, yi, r, inverse):
    """Radix-2/4/8 butterflies with TwoSum: returns the sums and their rounding errors."""
    if r == 2:
        sr, er_ = _two_sum(yr[:, :, 0], yr[:, :, 1])
        si, ei_ = _two_sum(yi[:, :, 0], yi[:, :, 1])
        dr, fr = _two_sum(yr[:, :, 0], -yr[:, :, 1])
        di, fi = _two_sum(yi[:, :, 0], -yi[:, :, 1])
        return (torch.stack((sr, dr), 2), torch.stack((si, di), 2),
                torch.stack((er_, fr), 2), torch.stack((ei_, fi), 2))
    # radix 4 and 8 as two / three radix-2 levels (decimation in time inside the stage)
    if r == 4:
        x = [(yr[:, :, p], yi[:, :, p]) for p in range(4)]
        errs = [(torch.zeros_like(yr[:, :, 0]), torch.zeros_like(yr[:, :, 0])) for _ in range(4)]
        return _comp_small_dft(x, 4, inverse, errs)
    x = [(yr[:, :, p], yi[:, :, p]) for p in range(r)]
    errs = [(torch.zeros_like(yr[:, :, 0]), torch.zeros_like(yr[:, :, 0])) for _ in range(r)]
    return _comp_small_dft(x, r, inverse, errs)


def _comp_small_dft(x, r, inverse, errs):
    """Compensated r-point DFT (r = 4 or 8) by recursive radix-2 DIT on lists of (re, im)."""
    res, err = _comp_rec(x, inverse)
    return (torch.stack([a for a, _ in res], 2), torch.stack([b for _, b in res], 2),
            torch.stack([a for a, _ in err], 2), torch.stack([b for _, b in err], 2))


def _comp_rec(x, inverse):
    r = len(x)
    if r == 1:
        z = torch.zeros_like(x[0][0])
        return x, [(z, z)]
    ev, eerr = _comp_rec(x[0::2], inverse)
    od, oerr = _comp_rec(x[1::2], inverse)
    h = r // 2
    out = [None] * r
    err = [None] * r
    for k in range(h):
        ang = (2 if inverse else -2) * math.pi * k / r
        c, s = round(math.cos(ang), 17), round(math.sin(ang), 17)
        orr, oi = od[k]
        oer, oei = oerr[k]
        if k == 0:
            tr, ti, ter, tei = orr, oi, oer, oei
        elif abs(c) < 1e-300:  # multiply by -i (forward) or +i (inverse): exact
            tr, ti = (-s * oi, s * orr)
            ter, tei = (-s * oei, s * oer)
        else:  # 45-degree twiddle: product rounding is not compensated (first-order)
            tr, ti = orr * c - oi * s, orr * s + oi * c
            ter, tei = oer * c - oei * s, oer * s + oei * c
        er_, ei_ = ev[k]
        eer, eei = eerr[k]
        ar, e1 = _two_sum(er_, tr)
        ai, e2 = _two_sum(ei_, ti)
        br, e3 = _two_sum(er_, -tr)
        bi, e4 = _two_sum(ei_, -ti)
        out[k], out[k + h] = (ar, ai), (br, bi)
        err[k] = (e1 + eer + ter, e2 + eei + tei)
        err[k + h] = (e3 + eer - ter, e4 + eei - tei)
    return out, err


# ------------------------------------------------------------------ Bluestein

def bluestein(xr: torch.Tensor, xi: torch.Tensor, inverse: bool = False, mode: str = "fast"):
    """Chirp-z transform of each row of ``(B, n)`` for any ``n``.

    ``X_k = w_k sum_j (x_j w_j) conj(w_(k-j))``, ``w_k = exp(-i pi k^2/n)``: the
    sum is a circular convolution of length ``m >= 2n - 1`` (a power of two),
    done as ``ifft(fft(a) * B)`` with ``B`` the precomputed filter spectrum.
    The inverse transform is ``conj(fft(conj(x)))``.
    """
    B, n = xr.shape
    if inverse:
        yr, yi = bluestein(xr, -xi, False, mode)
        return yr, -yi
    dt, dev = xr.dtype, xr.device
    c64, s64 = chirp(n)
    wc, ws = _t(c64, dt, dev), _t(s64, dt, dev)
    m = bluestein_length(n)
    ar = torch.zeros(B, m, dtype=dt, device=dev)
    ai = torch.zeros(B, m, dtype=dt, device=dev)
    ar[:, :n] = xr * wc - xi * ws
    ai[:, :n] = xr * ws + xi * wc
    Ar, Ai = stockham(ar, ai, False, mode)
    b64r, b64i = chirp_filter_spectrum(n)
    Br, Bi = _t(b64r, dt, dev), _t(b64i, dt, dev)
    Pr, Pi = Ar * Br - Ai * Bi, Ar * Bi + Ai * Br
    cr, ci = stockham(Pr, Pi, True, mode)
    cr, ci = cr[:, :n] / m, ci[:, :n] / m
    return cr * wc - ci * ws, cr * ws + ci * wc


def fft_any(xr: torch.Tensor, xi: torch.Tensor, inverse: bool = False, mode: str = "fast"):
    """Pick the kernel algorithm for length n: DFT-GEMM (n <= 64, or n <= 1024 not a power of
    two in the bf16 modes), Stockham (powers of two), else Bluestein."""
    n = xr.shape[-1]
    if n <= 64 or (mode in GEMM_MODES and n <= 1024 and n & (n - 1)):
        return dft_gemm(xr, xi, inverse, mode)
    if n & (n - 1) == 0:
        return stockham(xr, xi, inverse, mode)
    return bluestein(xr, xi, inverse, mode)


def algorithm_for(n: int, mode: str = "fast") -> str:
    """Name of the algorithm :func:`fft_any` uses for length ``n``."""
    if n <= 64 or (mode in GEMM_MODES and n <= 1024 and n & (n - 1)):
        return "dft_gemm"
    return "stockham" if n & (n - 1) == 0 else "bluestein"


# ------------------------------------------------------------------ real input

def rfft_half(x: torch.Tensor, mode: str = "fast"):
    """rfft of each row of real ``(B, n)``, ``n`` even, via one complex FFT of length n/2.

    ``z_j = x_2j + i x_2j+1``; with ``Z = fft(z)``, ``E_k = (Z_k + conj Z_(h-k))/2`` and
    ``O_k = (Z_k - conj Z_(h-k))/(2i)``, ``X_k = E_k + exp(-2 pi i k/n) O_k`` for k <= h.
    """
    B, n = x.shape
    if n % 2:
        raise ValueError(f"rfft_half: n must be even, got {n}")
    h = n // 2
    Zr, Zi = fft_any(x[:, 0::2].contiguous(), x[:, 1::2].contiguous(), False, mode)
    idx = torch.arange(h + 1, device=x.device)
    Zkr, Zki = Zr[:, idx % h], Zi[:, idx % h]
    Zcr, Zci = Zr[:, (h - idx) % h], -Zi[:, (h - idx) % h]
    Er, Ei = (Zkr + Zcr) / 2, (Zki + Zci) / 2
    # (a + ib)/(2i) = (b - ia)/2
    Dr, Di = Zkr - Zcr, Zki - Zci
    Or, Oi = Di / 2, -Dr / 2
    wc, ws = _half_twiddles(n, x.dtype, x.device)
    return Er + Or * wc - Oi * ws, Ei + Or * ws + Oi * wc


_HALF: dict = {}


def _half_twiddles(n: int, dt: torch.dtype, dev) -> tuple[torch.Tensor, torch.Tensor]:
    """``exp(-2 pi i k / n)`` for ``k = 0 .. n/2`` (float64 table, cast once per dtype/device)."""
    key = (n, dt, str(dev))
    hit = _HALF.get(key)
    if hit is None:
        if len(_HALF) > 256:
            _HALF.clear()
        c64, s64 = cos_sin(reduced_angle(np.arange(n // 2 + 1), n))
        hit = (torch.from_numpy(c64).to(dt).to(dev), torch.from_numpy(s64).to(dt).to(dev))
        _HALF[key] = hit
    return hit


def irfft_half(Xr: torch.Tensor, Xi: torch.Tensor, n: int, mode: str = "fast"):
    """Inverse of :func:`rfft_half` (unnormalized, like ``n * irfft``): ``(B, n/2+1)`` -> real ``(B, n)``."""
    h = n // 2
    idx = torch.arange(h, device=Xr.device)
    Xkr, Xki = Xr[:, idx], Xi[:, idx]
    Xcr, Xci = Xr[:, h - idx], -Xi[:, h - idx]
    Er, Ei = Xkr + Xcr, Xki + Xci
    Dr, Di = Xkr - Xcr, Xki - Xci
    wc, ws = _half_twiddles(n, Xr.dtype, Xr.device)
    wc, ws = wc[:h], -ws[:h]  # exp(+2 pi i k/n)
    Or, Oi = Dr * wc - Di * ws, Dr * ws + Di * wc
    # Z = E + i O
    Zr, Zi = Er - Oi, Ei + Or
    zr, zi = fft_any(Zr, Zi, True, mode)
    out = torch.empty(Xr.shape[0], n, dtype=Xr.dtype, device=Xr.device)
    out[:, 0::2] = zr
    out[:, 1::2] = zi
    return out


# ------------------------------------------------------------------ transform conventions
# (numpy.fft's: ``n`` crops or zero-pads, ``norm`` scales one direction or both by sqrt)

def resize(x: torch.Tensor, n: int, d: int) -> torch.Tensor:
    """``x`` cropped or zero-padded to length ``n`` along dim ``d``."""
    m = x.shape[d]
    if m == n:
        return x
    if m > n:
        return x.narrow(d, 0, n)
    pad = list(x.shape)
    pad[d] = n - m
    return torch.cat((x, x.new_zeros(pad)), d)


def norm_scale(norm: str, inverse: bool, N: int) -> float:
    """The factor a transform of ``N`` points multiplies by under ``norm`` (1.0 where it does not scale)."""
    if norm == "ortho":
        return 1.0 / math.sqrt(N)
    if (norm == "forward") != inverse:
        return 1.0 / N
    return 1.0


def as_rows(x: torch.Tensor, d: int, n: int) -> tuple[torch.Tensor, torch.Size]:
    """``(rows, shape)``: ``x`` with dim ``d`` (length ``n``) moved last and flattened to ``[B, n]``,
    and the moved shape that restores it."""
    xm = x.movedim(d, -1)
    shp = xm.shape
    return xm.reshape(-1, n), shp


_SWAP_NORM = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def swap_norm(norm: str) -> str:
    """The ``norm`` of the opposite direction (``"backward"`` <-> ``"forward"``): what a transform computed
    as the conjugate of its inverse is called with."""
    return _SWAP_NORM[norm]
