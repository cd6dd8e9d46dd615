"""The device kernels' fp32 arithmetic on the host, so that both backends give the same bits.

Geometric, truncated normal, gamma (hence beta and Student's t) and PTRS
Poisson have kernels that compute in fp32 (no NeuronCore engine computes in
float64). The torch lowerings run the same algorithm in the same arithmetic:
every function here is its kernel's epilogue, instruction for instruction,
as the emulator defines the instructions (``docs/emulator.md``, numerics):

* every Vector/Scalar/GpSimd float operation rounds its result to fp32 (an
  operand given as a Python float is rounded to fp32 first);
* ``activation(f, x, scale, bias)`` is ``f(fp32(x * scale) + bias)`` with
  NumPy's float32 ``log``/``sqrt``/``sin``/``exp`` (``rsqrt`` is ``1 /
  sqrt``);
* comparisons give 1.0/0.0; ``tensor_copy_predicated`` a select.

Inputs are the words the kernels read (the stream's two-word sample keys
and the keyed attempt streams of :func:`trnrand.distributions._attempt_words`),
as int64 tensors holding uint32; outputs are fp32 NumPy arrays equal to the
kernel's output bit for bit on the emulator (the hardware's activation
functions are approximations: a few ulp). A sample every round rejected is
marked as the kernel marks it (``-1``, or NaN for Student's t) and finished by
the caller with the float64 attempts from round ``rounds`` on, as the kernel
path's host does.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ._philox import C_PI, R_BIAS

F32 = np.float32
S53 = 2.0 * C_PI * 2.0**-53  # the kernels' angle step (gamma.S53)
V_MIN = 2.0**-60
CAP = float(1 << 23)
INV_US_MAX = float(1 << 28)
HALF_LN_2PI = 0.5 * math.log(2.0 * math.pi)

# Where the fp32 algorithms hold (both backends use them inside these limits, the float64 ones outside):
GEOMETRIC_MIN_P = 2.0**-16  # below it the fp32 floor cap (2**23 trials) would cost > e**-128 of mass
PTRS_ROUNDS = 6  # after 2 rounds 6% (lam = 10) / 1.2% (lam = 6e4) of samples were left (emulator): after 6,
#                  about 2e-4 at lam = 10 go to the float64 attempts
PTRS_MAX_LAM = float(1 << 16)  # the fp32 test's error (~6e-8 lam in a log-probability) stays below 4e-3
GAMMA_ROUNDS = 4  # P(4 rejections) < 1e-5 for shape >= 1 (acceptance > 0.95 per attempt)
GAMMA_MAX_SHAPE = 1000.0  # beyond, d (1 - v + ln v) cancels below fp32 resolution
FP32_MAX = 3.4028234663852886e38
MIN_MASS = 2.0**-20  # below it the interval's mass is too small for fp32 quantiles


def geometric_scale(p):
    return 1.0 / math.log1p(-p)


def truncated_param(mean, std, low, high):
    """The fp32 quantile's constants, from float64 ndtr (the mirror image for a positive interval)."""
    flip = low > 0
    a, b = (-high, -low) if flip else (low, high)
    nd = torch.special.ndtr
    lo = float(nd(torch.tensor(a, dtype=torch.float64)))
    hi = float(nd(torch.tensor(b, dtype=torch.float64)))
    up = float(nd(torch.tensor(-b, dtype=torch.float64)))  # 1 - hi, accurate in the upper tail
    mass = hi - lo
    # q = lo + m 2**-53 mass and 1 - q = up + (2**53 - m) 2**-53 mass, from m and its complement 2**53 - 1 - m
    return (max(a, -FP32_MAX), min(b, FP32_MAX), 2.0**-53 * mass, lo, up + 2.0**-53 * mass,
            -std if flip else std, mean), mass


def truncated_refusal(mean, std, low, high):
    """Why the fp32 quantile cannot serve this interval (then float64 ndtri does, on both backends), or None."""
    prm, mass = truncated_param(mean, std, low, high)
    if not mass >= MIN_MASS:
        return f"the interval's normal mass {mass:.3g} < 2**-20: too small for the kernel's fp32 quantiles"
    with np.errstate(over="ignore"):
        if not all(np.isfinite(np.float32(v)) for v in (std, mean, std * max(abs(prm[0]), abs(prm[1])))):
            return "mean, std or the scaled bounds overflow float32"
    return None


def _f(x) -> np.float32:
    return F32(x)


def _u32(w) -> np.ndarray:
    """uint32 NumPy view of words (an int64 tensor or array holding uint32)."""
    a = w.detach().cpu().numpy() if hasattr(w, "detach") else np.asarray(w)
    return np.ascontiguousarray(a.astype(np.uint32))


def _act(fn, x, scale, bias) -> np.ndarray:
    """Scalar Engine ``activation``: ``fn(fp32(fp32(x) * scale) + bias)``."""
    y = np.ascontiguousarray(np.asarray(x, F32) * _f(scale))
    y = np.ascontiguousarray(y + _f(bias))
    return np.asarray(fn(y), F32)


def _rsqrt(x):
    return F32(1.0) / np.sqrt(x)


def _cmp(mask) -> np.ndarray:
    return np.asarray(mask, F32)


def _m53(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """fp32 ``(hi >> 5) 2**26 + (lo >> 6)`` as the kernels' ``_m53`` forms it (each half converted to fp32, then
    one fp32 multiply-by-2**26 and add)."""
    return (hi >> np.uint32(5)).astype(F32) * _f(1 << 26) + (lo >> np.uint32(6)).astype(F32)


def _ln_open(m: np.ndarray) -> np.ndarray:
    """ln((m + 1) 2**-53) of an fp32 m."""
    return _act(np.log, m, 2.0**-53, 2.0**-53)


def _normal(w: np.ndarray) -> np.ndarray:
    """Box-Muller's first normal of words 0-3 (gamma._normal)."""
    lg = _ln_open(_m53(w[:, 0], w[:, 1]))
    r = _act(np.sqrt, lg, -2.0, R_BIAS)
    x = _act(np.sin, _m53(w[:, 2], w[:, 3]), S53, -C_PI)
    return x * r


def _merge(at, ok, val, dst, done):
    """The rounds' merge: the first accepted attempt's value (``take = ok > done``)."""
    if at == 0:
        take = ok != 0
        done = ok.copy()
    else:
        take = _cmp(ok > done) != 0
        done = np.maximum(done, ok)
    return np.where(take, val, dst), done


# ---- gamma (gamma.gamma_kernel) ------------------------------------------------------------
def gamma_rounds(words_of, shape: float, component: int, rounds: int, student_df=None) -> np.ndarray:
    """gamma_kernel's per-sample output: Gamma(shape) from the first accepted of ``rounds`` attempts, or -1.

    ``words_of(t, component)``: the keyed attempt words (m, 8) of attempt ``t``. With ``student_df``:
    Student's t ``z rsqrt(max(2 G / df, 2**-80))``, NaN where every round rejected.
    """
    a = shape + 1.0 if shape < 1.0 else shape
    d = a - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    small = shape < 1.0
    dst = done = None
    with np.errstate(all="ignore"):
        for at in range(rounds):
            w = _u32(words_of(at, component))
            if dst is None:
                dst = np.full(w.shape[0], -1.0, F32)
            x = _normal(w[:, 0:4])
            lgu = _ln_open(_m53(w[:, 4], w[:, 5]))
            v = x * _f(c) + _f(1.0)
            v = (v * v) * v
            vs = np.maximum(v, _f(V_MIN))
            lv = _act(np.log, vs, 1.0, 0.0)
            rhs = (lv - v + _f(1.0)) * _f(d)
            rhs = rhs + (x * _f(0.5)) * x
            ok = _cmp(lgu < rhs) * _cmp(v > _f(0.0))
            val = v * _f(d)
            if small:
                lg2 = _ln_open(_m53(w[:, 6], w[:, 7]))
                val = val * _act(np.exp, lg2, 1.0 / shape, 0.0)
            dst, done = _merge(at, ok, val, dst, done)
        if student_df is not None:
            z = _normal(_u32(words_of(0, 1))[:, 0:4])
            q = np.maximum(dst * _f(2.0 / student_df), _f(2.0**-80))
            z = z * _act(_rsqrt, q, 1.0, 0.0)
            dst = np.where(_cmp(done > _f(0.5)) != 0, z, F32(np.nan))
    return dst


# ---- PTRS Poisson (kernels/poisson.py) ------------------------------------------------------------------
def ptrs_rounds(words_of, lam: float, a: float, b: float, invalpha: float, vr: float, rounds: int) -> np.ndarray:
    """poisson_kernel's per-sample output: the first accepted k of ``rounds`` PTRS attempts, or -1."""
    dst = done = None
    with np.errstate(all="ignore"):
        for at in range(rounds):
            w = _u32(words_of(at, 0))
            if dst is None:
                dst = np.full(w.shape[0], -1.0, F32)
            u = _m53(w[:, 0], w[:, 1]) * _f(2.0**-53) + _f(-0.5)
            v = _m53(w[:, 2], w[:, 3]) * _f(2.0**-53) + _f(2.0**-53)
            us = np.abs(u) * _f(-1.0) + _f(0.5)
            inv = np.minimum(F32(1.0) / us, _f(INV_US_MAX))
            y = inv * _f(2.0 * a) + _f(b)
            y = y * u
            y = np.maximum(y + _f(lam + 1.43), _f(0.0))
            y = np.minimum(y, _f(CAP))
            x = (y + _f(CAP)) - _f(CAP)
            x = x - _cmp(x > y)
            fast = _cmp(us >= _f(0.07)) * _cmp(v <= _f(vr))
            good = _cmp(v > us) * _cmp(us < _f(0.013))
            good = np.maximum(good, _cmp(x < _f(1.0)))
            good = good * _f(-1.0) + _f(1.0)
            lhs = _act(np.log, v, 1.0, 0.0)
            lq = _act(np.log, inv * inv, a, b)
            lhs = (lhs + _f(math.log(invalpha))) - lq
            xc = np.maximum(x, _f(1.0))
            lx = _act(np.log, xc, 1.0, 0.0)
            lr = _act(np.log, xc, 1.0 / lam, 0.0)
            rhs = (xc + _f(-1.0)) * lr
            rhs = (xc + _f(-lam - HALF_LN_2PI)) - rhs
            rhs = (lx * _f(-0.5)) + rhs
            rx = F32(1.0) / xc
            tmp = (rx * rx) * _f(1.0 / 360.0) - _f(1.0 / 12.0)
            rhs = rhs + tmp * rx
            ok = np.maximum(_cmp(lhs <= rhs) * good, fast)
            dst, done = _merge(at, ok, x - _f(1.0), dst, done)
    return dst


# ---- geometric and truncated normal (philox_transform.philox_transform_kernel) ---------------------------
def geometric(w: np.ndarray, scale: float) -> np.ndarray:
    """The kernel's ``floor(log(u) c) + 1`` of two-word samples ``w`` (n, 2), ``c = 1 / log1p(-p)``."""
    w = _u32(w)
    with np.errstate(all="ignore"):
        lg = _ln_open(_m53(w[:, 0], w[:, 1]))
        x = np.minimum(lg * _f(scale), _f(CAP))
        r = (x + _f(CAP)) - _f(CAP)
        return (r + _f(1.0)) - _cmp(r > x)


def _poly(x, coef):
    acc = x * _f(coef[0])
    for c in coef[1:-1]:
        acc = (acc + _f(c)) * x
    return acc + _f(coef[-1])


def _ratio(x, shift, num, den):
    y = x - _f(shift)
    return _poly(y, num) * (F32(1.0) / _poly(y, den))


def truncated_normal(w: np.ndarray, param) -> np.ndarray:
    """The kernel's fp32 PPND7 truncated normals of two-word samples ``w`` (n, 2); ``param`` its 7 constants."""
    from .kernels.philox_transform import PPND7_A, PPND7_B, PPND7_C, PPND7_D, PPND7_E, PPND7_F, S_CENTRAL, S_MIN

    lo_b, hi_b, scale, off_lo, off_up, std, mean = param
    w = _u32(w)
    a, b = w[:, 0], w[:, 1]
    full = np.uint32(0xFFFFFFFF)
    with np.errstate(all="ignore"):
        v = (a >> np.uint32(5)).astype(F32) * _f(1 << 26) + (b >> np.uint32(6)).astype(F32)
        vc = ((a ^ full) >> np.uint32(5)).astype(F32) * _f(1 << 26) + ((b ^ full) >> np.uint32(6)).astype(F32)
        q = v * _f(scale) + _f(off_lo)
        qu = vc * _f(scale) + _f(off_up)
        s = np.maximum(np.minimum(q, qu), _f(S_MIN))
        lg = _act(np.log, s, 1.0, 0.0)
        rt = _act(np.sqrt, lg, -1.0, 0.0)
        xt = _ratio(rt, 1.6, PPND7_C, PPND7_D)
        far = _ratio(rt, 5.0, PPND7_E, PPND7_F)
        xt = np.where(_cmp(rt > _f(5.0)) != 0, far, xt)
        sgn = _cmp(q > qu) * _f(2.0) + _f(-1.0)
        xt = xt * sgn
        qc = q - _f(0.5)
        r = np.maximum(_f(0.180625) - qc * qc, _f(0.0))
        x = _poly(r, PPND7_A) * (F32(1.0) / _poly(r, PPND7_B))
        x = x * qc
        x = np.where(_cmp(s < _f(S_CENTRAL)) != 0, xt, x)
        x = np.minimum(np.maximum(x, _f(lo_b)), _f(hi_b))
        return x * _f(std) + _f(mean)
