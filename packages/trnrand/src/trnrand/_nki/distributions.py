"""NKI lowerings of :mod:`trnrand.distributions`, and :func:`stream`, the one call of a stream kernel.

Each function is the ``"nki"`` lowering (which also serves ``"simulator"``)
of an :class:`~trnsci.dispatch.Op` declared next to its public function,
with the torch lowering's signature. The host part is small and exact:

* stream draws (uniform, normal, lognormal): the request's words
  ``w0 .. w0 + nw - 1`` become whole Philox blocks ``w0 // 4 ..``; ONE
  kernel call produces them all (split only where the block index crosses a
  multiple of 2**32, so the counter's word 1 is a constant of the call);
  the host drops the < 4 words before/after the request and applies the
  same affine map as the torch path (``low + (high - low) u``,
  ``mean + std z``, ``exp``), so uniforms are bit-identical to torch;
* float64 uniforms take the kernel's uint32 words and the torch path's
  exact 53-bit map;
* transforms of the stream (bernoulli, exponential float32, randint,
  geometric): one ``philox_transform_kernel`` call makes the samples in
  SBUF; one-word samples are addressed like uniforms, two-word samples by
  pairs (the kernel's odd pairing when the draw starts at an odd word); the
  host adds ``low`` (randint), casts and drops the < 2 samples outside the
  request -- integer-exact;
* categorical, Poisson, binomial, multinomial: exact thresholds on the
  stream's words (``discrete_kernel``); gamma, beta, student_t and
  the truncated normal: fp32 kernels the host finishes.

The quasi-random, philox4x32 and threefry lowerings are in
:mod:`trnrand._nki.quasi`, :mod:`trnrand._nki.philox` and
:mod:`trnrand._nki.threefry`.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

from trnsci import nki

from ..distributions import (
    BERNOULLI,
    BETA,
    BINOMIAL,
    CATEGORICAL,
    EXPONENTIAL,
    GAMMA,
    GEOMETRIC,
    LOGNORMAL,
    MULTINOMIAL,
    NORMAL,
    POISSON,
    RANDINT,
    STUDENT_T,
    TRUNCATED_NORMAL,
    UNIFORM,
    _affine,
    _attempt_words,
    _gamma_from_keys,
    _normal53,
    _ptrs_attempt,
    _ptrs_constants,
    _rejection,
    _sample_keys,
    _scale,
    _u01,
    _wps,
)
from ..fp32 import (
    GAMMA_MAX_SHAPE,
    GAMMA_ROUNDS,
    GEOMETRIC_MIN_P,
    PTRS_MAX_LAM,
    PTRS_ROUNDS,
    geometric_scale,
    truncated_param,
    truncated_refusal,
)
from ..kernels.discrete import discrete_counts, discrete_kernel
from ..kernels.gamma import gamma_counts, gamma_kernel
from ..kernels.normal import normal_counts, normal_kernel
from ..kernels.philox import philox_counts, philox_kernel
from ..kernels.philox_transform import FULL, philox_transform_counts, philox_transform_kernel
from ..kernels.poisson import poisson_counts, poisson_kernel

__all__ = ["stream"]

SPAN = 1 << 32  # blocks per value of the counter's word 1


def _runs(w0: int, nw: int) -> list[tuple[int, int]]:
    """(block0, nblocks) kernel calls covering words w0 .. w0+nw-1 (nw >= 1)."""
    b0, b1 = w0 // 4, (w0 + nw - 1) // 4 + 1
    runs = []
    while b0 < b1:
        e = min(b1, (b0 // SPAN + 1) * SPAN)
        runs.append((b0, e - b0))
        b0 = e
    return runs


def stream(kernel, seed: int, subsequence: int, w0: int, nw: int, **kw) -> torch.Tensor:
    """Kernel output per stream word w0 .. w0+nw-1 (flat), from whole blocks."""
    parts = [nki.run(kernel, seed=seed, subsequence=subsequence, block0=b, nblocks=m, **kw).reshape(-1)
             for b, m in _runs(w0, nw)]
    flat = parts[0] if len(parts) == 1 else torch.cat(parts)
    lead = w0 - 4 * (w0 // 4)
    return flat[lead:lead + nw]


def _one_call(w0, nw, kernel, counts):
    """Plans' figures: the kernel's closed forms when one call covers the request, else None."""
    runs = _runs(w0, nw)
    return {"kernel": kernel, **counts(runs[0][1])} if len(runs) == 1 else None


# ---- uniform -------------------------------------------------------------------------------------
def _uniform_words(seed, subsequence, base, first, n, low, high, dtype, device):
    k = _wps(dtype)
    return base + k * first, k * n


def _uniform_supports(*a):
    return "an empty draw runs no kernel" if a[4] == 0 else None


def _uniform_counts(*a):
    w0, nw = _uniform_words(*a)
    mode = "uniform" if a[7] == torch.float32 else "words"
    return _one_call(w0, nw, "philox_kernel", lambda nb: philox_counts(nb, mode))


@UNIFORM.lowering("nki", dtypes=(torch.float32, torch.float64), supports=_uniform_supports, counts=_uniform_counts)
def _uniform_nki(seed, subsequence, base, first, n, low, high, dtype, device):
    w0, nw = _uniform_words(seed, subsequence, base, first, n, low, high, dtype, device)
    if dtype == torch.float32:  # the kernel's (w >> 8) 2**-24
        u = stream(philox_kernel, seed, subsequence, w0, nw, mode="uniform")
    else:  # the kernel's words, the torch path's exact 53-bit map
        w = stream(philox_kernel, seed, subsequence, w0, nw, mode="words").to(torch.int64)
        u = _u01(w, dtype)
    return _affine(u.to(device), low, high, dtype)


# ---- normal / lognormal --------------------------------------------------------------------------
def _normal_span(base, first, n):
    """(w0, nw, odd) of the kernel call for normals first .. first+n-1 of a draw starting at word base.

    Pairs start at base + even. For even base the kernel's pairs (w0, w1), (w2, w3) are the draw's and
    normal k sits at its word; for odd base the kernel's odd pairing (w1, w2), (w3, w0 of the next
    block) is, and its value at word j is the normal of word j + 1.
    """
    odd = base % 2 == 1
    return base + first - odd, n, odd


def _normal_supports(*a):
    if a[4] == 0:
        return "an empty draw runs no kernel"
    w0, nw, odd = _normal_span(a[2], a[3], a[4])
    if odd and len(_runs(w0, nw + 1)) > 1:
        return (f"the draw starts at odd stream word {a[2]} and its last pair straddles a multiple of 2**32 "
                "blocks (the kernel's odd pairing reads the next block inside one counter-word-1 span)")
    return None


def _normal_counts(*a):
    w0, nw, _ = _normal_span(a[2], a[3], a[4])
    return _one_call(w0, nw, "normal_kernel", normal_counts)


def _standard_normal_nki(seed, subsequence, base, first, n, device):
    """Normal sample k of the draw from the kernel's pairing that matches the parity of ``base``."""
    w0, nw, odd = _normal_span(base, first, n)
    return stream(normal_kernel, seed, subsequence, w0, nw, odd=odd).to(device)


@NORMAL.lowering("nki", dtypes=(torch.float32,), supports=_normal_supports, counts=_normal_counts)
def _normal_nki(seed, subsequence, base, first, n, mean, std, dtype, device):
    return _scale(_standard_normal_nki(seed, subsequence, base, first, n, device), mean, std)


@LOGNORMAL.lowering("nki", dtypes=(torch.float32,), supports=_normal_supports, counts=_normal_counts)
def _lognormal_nki(seed, subsequence, base, first, n, mean, std, dtype, device):
    return _standard_normal_nki(seed, subsequence, base, first, n, device).mul(std).add_(mean).exp_()


# ---- transforms of the stream: bernoulli, exponential, randint, geometric ---------------------------
TRANSFORM = "philox_transform_kernel"


def _empty(n):
    return "an empty draw runs no kernel" if n == 0 else None


def _one_word(transform, param, seed, subsequence, base, first, n, device):
    """Samples first .. first+n-1 of a one-word-per-sample draw at word base (splits at 2**32-block spans)."""
    return stream(philox_transform_kernel, seed, subsequence, base + first, n, transform=transform,
                  param=param).to(device)


def _one_word_counts(transform, param, base, first, n):
    return _one_call(base + first, n, TRANSFORM, lambda nb: philox_transform_counts(transform, nb, param))


def _pairs(base, first, n):
    """(block0, nblocks, lead, odd) of the kernel call for two-word samples first .. first+n-1 at word base.

    Sample k's words start at ``base + 2 k``: at even words the kernel's pairs (w0, w1), (w2, w3); at odd words
    its odd pairing (w1, w2), (w3, next block's w0). ``lead`` samples of the first block precede the request.
    """
    ws = base + 2 * first
    lead = (ws % 4) // 2
    return ws // 4, (n + lead + 1) // 2, lead, ws % 2


def _pairs_supports(base, first, n):
    if n == 0:
        return "an empty draw runs no kernel"
    b0, nb, _, odd = _pairs(base, first, n)
    if b0 // SPAN != (b0 + nb - 1 + odd) // SPAN:
        return ("the draw's blocks straddle a multiple of 2**32 blocks (one kernel call keeps the counter's "
                "word 1 constant)")
    return None


def _two_words(transform, param, seed, subsequence, base, first, n, device):
    b0, nb, lead, odd = _pairs(base, first, n)
    out = nki.run(philox_transform_kernel, seed=seed, subsequence=subsequence, block0=b0, nblocks=nb,
                  transform=transform, param=param, odd=bool(odd))
    return out.reshape(-1)[lead:lead + n].to(device)


def _pairs_counts(transform, param, base, first, n):
    return {"kernel": TRANSFORM, **philox_transform_counts(transform, _pairs(base, first, n)[1], param)}


# bernoulli: w < round(p 2**32), exact uint32 compare on GpSimd
def _threshold(p):
    return round(p * 2.0**32)


def _bernoulli_supports(seed, subsequence, base, first, n, p, dtype, device):
    if _threshold(p) == FULL:
        return f"p = {p!r} rounds to threshold 2**32, which does not fit a uint32 word (every sample is 1)"
    return _empty(n)


def _bernoulli_counts(seed, subsequence, base, first, n, p, dtype, device):
    return _one_word_counts("bernoulli", _threshold(p), base, first, n)


@BERNOULLI.lowering("nki", supports=_bernoulli_supports, counts=_bernoulli_counts)
def _bernoulli_nki(seed, subsequence, base, first, n, p, dtype, device):
    return _one_word("bernoulli", _threshold(p), seed, subsequence, base, first, n, device).to(dtype)


# exponential (float32): log((m + 1) 2**-24) * fp32(-1/rate) + 0.0
def _exp_scale(rate):
    return -1.0 / rate


def _exponential_supports(seed, subsequence, base, first, n, rate, dtype, device):
    with np.errstate(over="ignore"):
        c = np.float32(_exp_scale(rate))
    if not np.isfinite(c) or c == 0:
        return f"-1/rate = {_exp_scale(rate)!r} is not a finite non-zero float32 (the kernel's scale operand)"
    return _empty(n)


def _exponential_counts(seed, subsequence, base, first, n, rate, dtype, device):
    return _one_word_counts("exponential", _exp_scale(rate), base, first, n)


@EXPONENTIAL.lowering("nki", dtypes=(torch.float32,), supports=_exponential_supports, counts=_exponential_counts)
def _exponential_nki(seed, subsequence, base, first, n, rate, dtype, device):
    return _one_word("exponential", _exp_scale(rate), seed, subsequence, base, first, n, device)


# randint: floor((w 2**32 + w') r / 2**64) + low, exact
def _randint_supports(seed, subsequence, base, first, n, low, high, dtype, device):
    return _pairs_supports(base, first, n)


def _randint_counts(seed, subsequence, base, first, n, low, high, dtype, device):
    return _pairs_counts("randint", high - low, base, first, n)


@RANDINT.lowering("nki", supports=_randint_supports, counts=_randint_counts)
def _randint_nki(seed, subsequence, base, first, n, low, high, dtype, device):
    k = _two_words("randint", high - low, seed, subsequence, base, first, n, device)
    return (k.to(torch.int64) + low).to(dtype)


# geometric: fp32 floor(log(u) / log1p(-p)) + 1 -- the torch path runs the same fp32 map (trnrand.fp32)
def _geometric_supports(seed, subsequence, base, first, n, p, dtype, device):
    if p == 1.0:
        return "p = 1: every sample is 1 (nothing to transform)"
    if p < GEOMETRIC_MIN_P:
        return (f"p = {p!r} < 2**-16: the kernel's fp32 floor caps samples at 2**23 + 1, which would cut "
                "more than e**-128 of the tail")
    return _pairs_supports(base, first, n)


def _geometric_counts(seed, subsequence, base, first, n, p, dtype, device):
    return _pairs_counts("geometric", geometric_scale(p), base, first, n)


@GEOMETRIC.lowering("nki", supports=_geometric_supports, counts=_geometric_counts)
def _geometric_nki(seed, subsequence, base, first, n, p, dtype, device):
    k = _two_words("geometric", geometric_scale(p), seed, subsequence, base, first, n, device)
    return k.to(torch.float64).to(dtype)


# ---- threshold counts: categorical and Poisson (lam < 10), exact ------------------------------------
THRESHOLD = "discrete_kernel"
MAX_THRESHOLDS = 64  # distinct thresholds per call (each costs 8 instructions per tile)
TOP = 1 << 53


def _grouped(ms) -> tuple:
    """((M, multiplicity), ...) of the thresholds below 2**53 (m < 2**53 never reaches the others), sorted."""
    out: dict[int, int] = {}
    for m in ms:
        if m < TOP:
            out[int(m)] = out.get(int(m), 0) + 1
    return tuple(sorted(out.items()))


def _categorical_thresholds(cdf: torch.Tensor) -> tuple:
    """Least m with cdf[i] <= fl(m 2**-53 cdf[-1]) for i < K - 1 (the torch path's float64 ops; binary search)."""
    c = cdf.detach().cpu().numpy().astype(np.float64)
    total, targets = c[-1], c[:-1]
    lo, hi = np.zeros(targets.shape, np.int64), np.full(targets.shape, TOP, np.int64)
    while bool((lo < hi).any()):
        mid = (lo + hi) // 2
        ok = (mid.astype(np.float64) * 2.0**-53) * total >= targets
        hi, lo = np.where(ok, mid, hi), np.where(ok, lo, mid + 1)
    return _grouped(lo.tolist())


def _threshold_supports(thresholds, base, first, n):
    if len(thresholds) > MAX_THRESHOLDS:
        return f"{len(thresholds)} distinct thresholds > {MAX_THRESHOLDS} (8 instructions each per tile)"
    return _pairs_supports(base, first, n)


def _threshold_run(thresholds, keyed, seed, subsequence, base, first, n, device):
    b0, nb, lead, odd = _pairs(base, first, n)
    out = nki.run(discrete_kernel, seed=seed, subsequence=subsequence, block0=b0, nblocks=nb,
                  thresholds=thresholds, keyed=keyed, odd=bool(odd))
    return out.reshape(-1)[lead:lead + n].to(torch.int64).to(device)


def _categorical_supports(seed, subsequence, base, first, n, cdf, device):
    if n == 0:
        return "an empty draw runs no kernel"
    if cdf.numel() > 16 * MAX_THRESHOLDS:  # not worth a threshold search: far more categories than the kernel takes
        return f"{cdf.numel()} categories > {16 * MAX_THRESHOLDS} (at most {MAX_THRESHOLDS} distinct thresholds)"
    return _threshold_supports(_categorical_thresholds(cdf), base, first, n)


def _categorical_counts(seed, subsequence, base, first, n, cdf, device):
    th = _categorical_thresholds(cdf)
    return {"kernel": THRESHOLD, **discrete_counts(_pairs(base, first, n)[1], th)}


@CATEGORICAL.lowering("nki", supports=_categorical_supports, counts=_categorical_counts)
def _categorical_nki(seed, subsequence, base, first, n, cdf, device):
    return _threshold_run(_categorical_thresholds(cdf), False, seed, subsequence, base, first, n, device)


def _poisson_thresholds(lam: float) -> tuple:
    """floor(cdf_j 2**53) + 1 of the torch path's sequential search (its float64 recurrence, 200 steps)."""
    p = c = math.exp(-lam)
    ms = []
    for j in range(200):
        if j:
            p = p * lam / j
            c = c + p
        ms.append(math.floor(c * 2.0**53) + 1)
    return _grouped(ms)


def _poisson_supports(seed, subsequence, base, first, n, lam, dtype, device):
    if lam == 0.0:
        return "lam = 0: every sample is 0"
    if lam > PTRS_MAX_LAM:
        return (f"lam = {lam!r} > 2**16: the fp32 PTRS test's error (~6e-8 lam in a log-probability) would grow "
                "past 4e-3")
    if lam >= 10.0:
        return _pairs_supports(base, first, n)
    return _threshold_supports(_poisson_thresholds(lam), base, first, n)


def _poisson_counts(seed, subsequence, base, first, n, lam, dtype, device):
    nb = _pairs(base, first, n)[1]
    if lam >= 10.0:
        return {"kernel": "poisson_kernel", **poisson_counts(nb, PTRS_ROUNDS)}
    return {"kernel": THRESHOLD, **discrete_counts(nb, _poisson_thresholds(lam), True)}


def _ptrs_values(seed, subsequence, base, first, n, lam, device):
    """float64 PTRS samples: the kernel's rounds, then the torch path's attempts for any it rejected."""
    b0, nb, lead, odd = _pairs(base, first, n)
    a, b, invalpha, vr = _ptrs_constants(lam)
    out = nki.run(poisson_kernel, seed=seed, subsequence=subsequence, block0=b0, nblocks=nb, lam=lam, a=a, b=b,
                  invalpha=invalpha, vr=vr, rounds=PTRS_ROUNDS, odd=bool(odd))
    k = out.reshape(-1)[lead:lead + n].to(torch.float64)
    miss = torch.nonzero(k < 0).reshape(-1)
    if miss.numel():
        keys = torch.cat([_sample_keys(seed, subsequence, base, first + int(i), 1, "cpu") for i in miss])
        k[miss] = _rejection(keys, 0, _ptrs_attempt(lam), t0=PTRS_ROUNDS)
    return k.to(device)


@POISSON.lowering("nki", supports=_poisson_supports, counts=_poisson_counts)
def _poisson_nki(seed, subsequence, base, first, n, lam, dtype, device):
    if lam >= 10.0:  # PTRS: the fp32 test, as the torch path runs it (trnrand.fp32)
        return _ptrs_values(seed, subsequence, base, first, n, lam, device).to(dtype)
    k = _threshold_run(_poisson_thresholds(lam), True, seed, subsequence, base, first, n, device)
    return k.to(torch.float64).to(dtype)


# ---- truncated normal: fp32 inverse CDF, which the torch path runs too (trnrand.fp32) ------------------------
def _truncated_supports(seed, subsequence, base, first, n, mean, std, low, high, dtype, device):
    return truncated_refusal(mean, std, low, high) or _pairs_supports(base, first, n)


def _truncated_counts(seed, subsequence, base, first, n, mean, std, low, high, dtype, device):
    return _pairs_counts("truncated_normal", None, base, first, n)


@TRUNCATED_NORMAL.lowering("nki", dtypes=(torch.float32,), supports=_truncated_supports, counts=_truncated_counts)
def _truncated_normal_nki(seed, subsequence, base, first, n, mean, std, low, high, dtype, device):
    prm, _ = truncated_param(mean, std, low, high)
    return _two_words("truncated_normal", prm, seed, subsequence, base, first, n, device)


# ---- gamma: Marsaglia-Tsang in fp32 with a fixed number of rounds, the host finishes the rest --------------
def _gamma_supports(seed, subsequence, base, first, n, shape, scale, dtype, device):
    if shape > GAMMA_MAX_SHAPE:
        return (f"shape {shape!r} > {GAMMA_MAX_SHAPE:g}: the fp32 acceptance test d (1 - v + ln v) loses its "
                "precision to cancellation")
    return _pairs_supports(base, first, n)


def _gamma_counts(seed, subsequence, base, first, n, shape, scale, dtype, device):
    return {"kernel": "gamma_kernel", **gamma_counts(_pairs(base, first, n)[1], shape, GAMMA_ROUNDS)}


def _gamma_kernel_values(seed, subsequence, base, first, n, shape, component, device):
    """float64 Gamma(shape) samples: the kernel's rounds, then the torch path's attempts for any it rejected."""
    b0, nb, lead, odd = _pairs(base, first, n)
    out = nki.run(gamma_kernel, seed=seed, subsequence=subsequence, block0=b0, nblocks=nb, shape=shape,
                  component=component, rounds=GAMMA_ROUNDS, odd=bool(odd))
    vals = out.reshape(-1)[lead:lead + n].to(torch.float64)
    miss = torch.nonzero(vals < 0).reshape(-1)
    if miss.numel():  # rare: every round rejected; the same keys, attempts GAMMA_ROUNDS, GAMMA_ROUNDS + 1, ...
        keys = torch.cat([_sample_keys(seed, subsequence, base, first + int(i), 1, "cpu") for i in miss])
        vals[miss] = _gamma_from_keys(keys, shape, component, t0=GAMMA_ROUNDS)
    return vals.to(device)


@GAMMA.lowering("nki", dtypes=(torch.float32,), supports=_gamma_supports, counts=_gamma_counts)
def _gamma_nki(seed, subsequence, base, first, n, shape, scale, dtype, device):
    return _gamma_kernel_values(seed, subsequence, base, first, n, shape, 0, device).mul_(scale).to(dtype)


# beta: X / (X + Y) of two device gammas (components 0 and 1, as the torch path keys them); the ratio on the host
def _beta_supports(seed, subsequence, base, first, n, alpha, beta, dtype, device):
    for name, v in (("alpha", alpha), ("beta", beta)):
        if v > GAMMA_MAX_SHAPE:
            return f"{name} {v!r} > {GAMMA_MAX_SHAPE:g}: its gamma's fp32 acceptance test loses its precision"
    return _pairs_supports(base, first, n)


def _beta_counts(seed, subsequence, base, first, n, alpha, beta, dtype, device):
    return None  # two gamma_kernel runs: no single closed form (each run's is gamma_counts)


@BETA.lowering("nki", dtypes=(torch.float32,), supports=_beta_supports, counts=_beta_counts, kernels=("gamma_kernel",))
def _beta_nki(seed, subsequence, base, first, n, alpha, beta, dtype, device):
    x = _gamma_kernel_values(seed, subsequence, base, first, n, alpha, 0, device)
    y = _gamma_kernel_values(seed, subsequence, base, first, n, beta, 1, device)
    return (x / (x + y)).to(dtype)


# student_t: z / sqrt(chi2(df) / df) with the gamma and the normal both on the device; the host finishes NaNs
def _student_supports(seed, subsequence, base, first, n, df, dtype, device):
    if df / 2.0 > GAMMA_MAX_SHAPE:
        return f"df / 2 = {df / 2.0!r} > {GAMMA_MAX_SHAPE:g}: the gamma's fp32 acceptance test loses its precision"
    return _pairs_supports(base, first, n)


def _student_counts(seed, subsequence, base, first, n, df, dtype, device):
    return {"kernel": "gamma_kernel", **gamma_counts(_pairs(base, first, n)[1], df / 2.0, GAMMA_ROUNDS, True)}


@STUDENT_T.lowering("nki", dtypes=(torch.float32,), supports=_student_supports, counts=_student_counts)
def _student_t_nki(seed, subsequence, base, first, n, df, dtype, device):
    b0, nb, lead, odd = _pairs(base, first, n)
    out = nki.run(gamma_kernel, seed=seed, subsequence=subsequence, block0=b0, nblocks=nb, shape=df / 2.0,
                  component=0, rounds=GAMMA_ROUNDS, odd=bool(odd), student_df=df)
    t = out.reshape(-1)[lead:lead + n].to(torch.float64)
    miss = torch.nonzero(torch.isnan(t)).reshape(-1)
    if miss.numel():  # every round rejected: the torch path's later gamma attempts, its normal, its ratio
        keys = torch.cat([_sample_keys(seed, subsequence, base, first + int(i), 1, "cpu") for i in miss])
        g = _gamma_from_keys(keys, df / 2.0, 0, t0=GAMMA_ROUNDS).mul_(2.0)
        z = _normal53(_attempt_words(keys, 0, 1), 0)
        t[miss] = z / torch.sqrt(g / df)
    return t.to(dtype).to(device)


# ---- binomial, n min(p, 1-p) < 30: the torch path's inversion as exact thresholds (bit-identical) ----------------
BINOMIAL_MAX_STEPS = 1024  # inversion steps the host will chart
BINOMIAL_MAX_THRESHOLDS = 128


@functools.lru_cache(maxsize=32)  # a pure function of (trials, p)
def _binomial_thresholds(trials: int, p: float):
    """Thresholds M_j (grouped) with k = #{j : m >= M_j}, or a reason string.

    The torch path's search keeps ``u_j = u_{j-1} - r_{j-1}`` (float64) and continues while ``u_j > r_j``
    and ``j < trials``; each step's condition is monotone in ``u = m 2**-53`` (a float64 subtraction of a
    constant is), so "still searching at step j" is ``m >= M_j``: a binary search per step, on the host, with
    the torch path's float64 operations.
    """
    pp = 1.0 - p if p > 0.5 else p
    q = 1.0 - pp
    s = pp / q
    aa = (trials + 1) * s
    r = [q**trials]
    for j in range(1, BINOMIAL_MAX_STEPS + 1):
        r.append(r[-1] * (aa / float(j) - s))

    def steps(m):
        """(C, J) bool: for candidates m (C,), is the search still active after step j = 0 .. J-1."""
        u = m.astype(np.float64) * 2.0**-53
        act = u > r[0]
        out = [act]
        for j in range(1, jmax):
            u = np.where(act, u - r[j - 1], u)
            act = act & (u > r[j]) & (j < trials)
            out.append(act)
        return np.stack(out, axis=1)

    jmax = BINOMIAL_MAX_STEPS
    top = steps(np.array([TOP - 1], dtype=np.int64))[0]
    if top[-1]:
        return f"the inversion can take more than {BINOMIAL_MAX_STEPS} steps"
    jmax = int(top.sum())  # steps the largest uniform takes; every smaller one stops no later
    if jmax == 0:
        return ()
    lo, hi = np.zeros(jmax, np.int64), np.full(jmax, TOP - 1, np.int64)
    while bool((lo < hi).any()):
        mid = (lo + hi) // 2
        ok = steps(mid)[np.arange(jmax), np.arange(jmax)]
        hi, lo = np.where(ok, mid, hi), np.where(ok, lo, mid + 1)
    th = _grouped(lo.tolist())
    if len(th) > BINOMIAL_MAX_THRESHOLDS:
        return f"{len(th)} distinct thresholds > {BINOMIAL_MAX_THRESHOLDS}"
    return th


def _binomial_supports(seed, subsequence, base, first, n, trials, p, dtype, device):
    if p == 0.0 or trials == 0 or p == 1.0:
        return "p = 0, p = 1 or n = 0: every sample is the same"
    if trials * min(p, 1.0 - p) >= 30.0:
        return "n min(p, 1-p) >= 30: BTRS rejection (float64 lgamma) has no kernel yet"
    th = _binomial_thresholds(trials, p)
    if isinstance(th, str):
        return th
    return _pairs_supports(base, first, n)


def _binomial_counts(seed, subsequence, base, first, n, trials, p, dtype, device):
    th = _binomial_thresholds(trials, p)
    return {"kernel": THRESHOLD, **discrete_counts(_pairs(base, first, n)[1], th, True)}


@BINOMIAL.lowering("nki", supports=_binomial_supports, counts=_binomial_counts)
def _binomial_nki(seed, subsequence, base, first, n, trials, p, dtype, device):
    k = _threshold_run(_binomial_thresholds(trials, p), True, seed, subsequence, base, first, n, device)
    k = k.to(torch.float64)
    if p > 0.5:
        k = trials - k
    return k.to(dtype)


# ---- multinomial with replacement: each row is a categorical draw (its words follow the previous row's) ---------
MULTINOMIAL_MAX_ROWS = 16  # one threshold-kernel run per row


def _row_thresholds(probs):
    return [_categorical_thresholds(torch.cumsum(row.to(torch.float64), 0)) for row in probs]


def _multinomial_supports(seed, subsequence, base, probs, num_samples, replacement, device):
    if not replacement:
        return "without replacement (exponential races: a sort per row) has no kernel yet"
    if num_samples == 0:
        return "an empty draw runs no kernel"
    rows = probs.shape[0]
    if rows > MULTINOMIAL_MAX_ROWS:
        return f"{rows} rows > {MULTINOMIAL_MAX_ROWS} (one kernel run per row)"
    if probs.shape[1] > 16 * MAX_THRESHOLDS:
        return f"{probs.shape[1]} categories > {16 * MAX_THRESHOLDS} (at most {MAX_THRESHOLDS} distinct thresholds)"
    for r, th in enumerate(_row_thresholds(probs)):
        why = _threshold_supports(th, base + 2 * r * num_samples, 0, num_samples)
        if why:
            return f"row {r}: {why}"
    return None


def _multinomial_counts(seed, subsequence, base, probs, num_samples, replacement, device):
    if probs.shape[0] != 1:
        return None  # one run per row: no single closed form (each run's is discrete_counts)
    th = _row_thresholds(probs)[0]
    return {"kernel": THRESHOLD, **discrete_counts(_pairs(base, 0, num_samples)[1], th)}


@MULTINOMIAL.lowering("nki", supports=_multinomial_supports, counts=_multinomial_counts)
def _multinomial_nki(seed, subsequence, base, probs, num_samples, replacement, device):
    return torch.stack([_threshold_run(th, False, seed, subsequence, base + 2 * r * num_samples, 0, num_samples,
                                       device) for r, th in enumerate(_row_thresholds(probs))])
