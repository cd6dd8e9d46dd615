"""Distributions drawn from the Philox stream.

Every public function validates, reserves its words from the generator
(:meth:`Generator._reserve`), and calls one :class:`trnsci.dispatch.Op`
(``UNIFORM``, ``NORMAL``, ...) whose lowerings -- the torch implementation

    ``_<name>_torch(seed, subsequence, base, first, n, <parameters>, dtype, device)``

and, for some, an NKI kernel (:mod:`trnrand._nki.distributions`) -- return samples
``first .. first+n-1`` of the draw whose words start at stream word
``base``. Sample ``k`` depends only on ``(seed, subsequence, base, k)``,
which is what makes partitions and the NKI path reproduce it.
Word consumption per sample is listed in ``docs/trnrand.md``.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from trnsci import validate
from trnsci.dispatch import Op, traceable_as

from . import _philox, fp32
from ._philox import MASK, TWO_M53, _philox_torch
from .generator import Generator, _resolve, key_tensor, key_values

FLOATS = (torch.float32, torch.float64)
INTS = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)
TWO_PI = 2.0 * math.pi
MAX_SAMPLES = 1 << 48


# ---- validation helpers ---------------------------------------------------------------------------
def _size(size, where: str) -> tuple[int, ...]:
    if len(size) == 1 and type(size[0]) is int and 0 <= size[0] <= MAX_SAMPLES:  # the common call, checked cheaply
        return size
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        size = tuple(size[0])
    size = tuple(validate.integer(s, "size", where, minimum=0) for s in size)
    if math.prod(size) > MAX_SAMPLES:
        raise ValueError(f"{where}: size {size} asks for more than 2**48 samples")
    return size


def _real(x, name: str, where: str, *, finite: bool = True) -> float:
    x = validate.scalar(x, name, where, complex_ok=False)
    x = float(x)
    if finite and not math.isfinite(x):
        raise ValueError(f"{where}: {name} must be finite, got {x}")
    return x


def _positive(x, name: str, where: str) -> float:
    x = _real(x, name, where)
    if not x > 0:
        raise ValueError(f"{where}: {name} must be > 0, got {x}")
    return x


def _prob(p, name: str, where: str) -> float:
    p = _real(p, name, where, finite=False)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{where}: {name} must be in [0, 1], got {p}")
    return p


def _fdtype(dtype, where: str, allowed=FLOATS) -> torch.dtype:
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"{where}: dtype must be a torch.dtype, got {type(dtype).__name__}")
    if dtype not in allowed:
        names = ", ".join(str(d).replace("torch.", "") for d in allowed)
        raise TypeError(f"{where}: dtype must be one of {names}, got {str(dtype).replace('torch.', '')}")
    return dtype


def _numel(size) -> int:
    return math.prod(size)


def _span(gen: Generator, n: int, words_per_sample: int) -> tuple[int, int]:
    """Reserve a global draw of partition_size * n samples; return (base word, first sample of this rank)."""
    base = gen._reserve(words_per_sample * n * gen._size)
    return base, gen._rank * n


def _span_pairs(gen: Generator, n: int, words_per_pair: int) -> tuple[int, int]:
    """As _span for samples made in pairs (Box-Muller): a draw of N samples uses ceil(N/2) pairs."""
    total = n * gen._size
    base = gen._reserve(words_per_pair * ((total + 1) // 2))
    return base, gen._rank * n


def _wps(dtype) -> int:
    """Words per uniform sample: 1 for float32 (24 bits), 2 for float64 (53 bits)."""
    return 2 if dtype == torch.float64 else 1


# ---- the unit maps --------------------------------------------------------------------------------
def _u01(w: torch.Tensor, dtype, open_low=False) -> torch.Tensor:
    return _philox._unit(w, dtype, open_low)


def _box_muller(w: torch.Tensor, dtype) -> torch.Tensor:
    """Pairs of normals from words: float32 2 words/pair, float64 4 words/pair; returns (pairs, 2).

    Radius from u1 in (0, 1] (never log 0). The angle is kept as an integer
    m on a 2**24 (2**53) grid; both outputs are sin of an argument in
    [-pi, pi]: z0 = r sin(2 pi m / 2**b - pi), z1 = r sin(2 pi m' / 2**b - pi)
    with m' = (m + 2**(b-2)) mod 2**b (a quarter turn, exact integer
    arithmetic). Since sin(t - pi) = -sin t and sin(t + pi/2 - pi) = -cos t,
    (z0, z1) = -(r sin 2 pi v, r cos 2 pi v): Box-Muller using only sin on
    [-pi, pi], the range of the Scalar Engine's Sin activation. The map is
    ``_philox._box_muller_np``, shared with the chunked stream (bit for bit).
    """
    wide = dtype == torch.float64
    a = w.detach().cpu().numpy().view(np.uint64)
    if wide:
        a = a.reshape(-1, 4)
        uw = ((a[:, 0] >> np.uint64(5)) << np.uint64(32)) | (a[:, 1] & np.uint64(0xFFFFFFC0))  # m53 << 6
        aw = ((a[:, 2] >> np.uint64(5)) << np.uint64(32)) | (a[:, 3] & np.uint64(0xFFFFFFC0))
    else:
        a = a.reshape(-1, 2)
        uw, aw = a[:, 0] & np.uint64(0xFFFFFF00), a[:, 1] & np.uint64(0xFFFFFF00)
    out = np.empty((a.shape[0], 2), dtype=np.float64 if wide else np.float32)
    _philox._box_muller_np(uw[None], aw[None], (out[:, 0],), (out[:, 1],), wide)
    return torch.from_numpy(out).to(w.device)


# ---- Ops: every public draw decides torch vs kernel through one trnsci.dispatch.Op ----------------
# Default threshold (samples): a placeholder until `trnsci calibrate` runs on a trn1/trn2; a draw this
# large costs the CPU far more than a kernel launch plus the output DMA
# (docs/perf-notes.md#design-launch-placeholders); ops without a kernel keep it for symmetry.
THRESHOLD = float(1 << 20)


def _n(*a, **k) -> float:
    return float(a[4])


def _drawn_dtype(*a, **k):
    """The dtype of the samples: every sampling lowering ends in ``(..., dtype, device)``."""
    return a[-2]


def _describe(*a, **k) -> str:
    return f"{a[4]} samples, seed={a[0]}, subsequence={a[1]}, stream words from {a[2]}"


# Every Op is also a torch operator, torch.ops.trnrand.<name>. The generator crosses the operator boundary
# as a key tensor of (seed, subsequence, base) (trnrand.generator.key_tensor: 64-bit seeds and 66-bit
# positions do not fit a schema's int), so a draw is a pure function of its arguments inside the
# operator; the public function advances the generator outside it, where torch.compile traces it.
# Random draws have no derivative: the operators mark their outputs non-differentiable.


def _keyed_crossing(last_is_device: bool = True):
    """(to_operator, from_operator) replacing the lowering's leading (seed, subsequence, base) with a key
    tensor (on the meta device when the draw's device is meta, so the operator dispatches to its fake)."""
    def to_operator(seed, subsequence, base, *rest):
        dev = rest[-1] if last_is_device else None
        return (key_tensor(seed, subsequence, base, device=dev), *rest)

    def from_operator(key, *rest):
        return (*key_values(key), *rest)

    return to_operator, from_operator


def _sample_fake(key, first, n, *rest):
    """n samples of the dtype and on the device the call names (the last two arguments)."""
    return torch.empty(n, dtype=rest[-2], device=rest[-1])


_TO_KEY, _FROM_KEY = _keyed_crossing()


# high may be 2**63 (an exclusive bound past int64): the randint operator takes low and the span (<= 2**32)
def _randint_to_operator(seed, subsequence, base, first, n, low, high, dtype, device):
    return _TO_KEY(seed, subsequence, base, first, n, low, high - low, dtype, device)


def _randint_from_operator(key, first, n, low, span, dtype, device):
    return _FROM_KEY(key, first, n, low, low + span, dtype, device)


#: The keyword arguments every draw's Op shares: the key crossing the operator boundary, no derivative.
_KEYED = dict(to_operator=_TO_KEY, from_operator=_FROM_KEY, differentiable=False)
#: ... and, for a draw of ``n`` samples of a dtype (every one but categorical, randperm, multinomial), its
#: size, description and fake.
_SAMPLES = dict(size=_n, describe=_describe, fake=_sample_fake, **_KEYED)
UNIFORM = Op("trnrand.uniform", "samples", THRESHOLD,
             doc="uniform floats from one (fp32) or two (fp64) words per sample",
             schema="(Tensor key, int first, int n, float low, float high, ScalarType dtype, Device device) -> Tensor",
             dtype=_drawn_dtype, **_SAMPLES)
NORMAL = Op("trnrand.normal", "samples", THRESHOLD, doc="Box-Muller normals, two words per fp32 pair",
            schema="(Tensor key, int first, int n, float mean, float std, ScalarType dtype, Device device) -> Tensor",
            dtype=_drawn_dtype, **_SAMPLES)
LOGNORMAL = Op("trnrand.lognormal", "samples", THRESHOLD, doc="exp of Box-Muller normals",
               schema="(Tensor key, int first, int n, float mean, float std, ScalarType dtype, "
                      "Device device) -> Tensor",
               dtype=_drawn_dtype, **_SAMPLES)
EXPONENTIAL = Op("trnrand.exponential", "samples", THRESHOLD, doc="-log(u) / rate with u in (0, 1]",
                 schema="(Tensor key, int first, int n, float rate, ScalarType dtype, Device device) -> Tensor",
                 dtype=_drawn_dtype, **_SAMPLES)
BERNOULLI = Op("trnrand.bernoulli", "samples", THRESHOLD, doc="word < round(p 2**32)",
               schema="(Tensor key, int first, int n, float p, ScalarType dtype, Device device) -> Tensor",
               dtype=_drawn_dtype, **_SAMPLES)
RANDINT = Op("trnrand.randint", "samples", THRESHOLD,
             doc="floor of a 64-bit fraction times the range (two words per sample)",
             schema="(Tensor key, int first, int n, int low, int span, ScalarType dtype, Device device) -> Tensor",
             dtype=_drawn_dtype, size=_n, describe=_describe, fake=_sample_fake, to_operator=_randint_to_operator,
             from_operator=_randint_from_operator, differentiable=False)
GEOMETRIC = Op("trnrand.geometric", "samples", THRESHOLD, doc="inversion of a 53-bit uniform",
               schema="(Tensor key, int first, int n, float p, ScalarType dtype, Device device) -> Tensor",
               dtype=_drawn_dtype, **_SAMPLES)
TRUNCATED_NORMAL = Op("trnrand.truncated_normal", "samples", THRESHOLD, doc="inverse-CDF on the truncated interval",
                      schema="(Tensor key, int first, int n, float mean, float std, float low, float high, "
                             "ScalarType dtype, Device device) -> Tensor",
                      dtype=_drawn_dtype, **_SAMPLES)
GAMMA = Op("trnrand.gamma", "samples", THRESHOLD, doc="Marsaglia-Tsang rejection, two key words per sample",
           schema="(Tensor key, int first, int n, float shape, float scale, ScalarType dtype, Device device) -> Tensor",
           dtype=_drawn_dtype, **_SAMPLES)
BETA = Op("trnrand.beta", "samples", THRESHOLD, doc="X / (X + Y) of two keyed gammas",
          schema="(Tensor key, int first, int n, float alpha, float beta, ScalarType dtype, Device device) -> Tensor",
          dtype=_drawn_dtype, **_SAMPLES)
STUDENT_T = Op("trnrand.student_t", "samples", THRESHOLD, doc="normal / sqrt(chi2 / df), keyed",
               schema="(Tensor key, int first, int n, float df, ScalarType dtype, Device device) -> Tensor",
               dtype=_drawn_dtype, **_SAMPLES)
POISSON = Op("trnrand.poisson", "samples", THRESHOLD, doc="inversion (lam < 10) or PTRS rejection, keyed",
             schema="(Tensor key, int first, int n, float lam, ScalarType dtype, Device device) -> Tensor",
             dtype=_drawn_dtype, **_SAMPLES)
BINOMIAL = Op("trnrand.binomial", "samples", THRESHOLD, doc="inversion (n p < 30) or BTRS rejection, keyed",
              schema="(Tensor key, int first, int n, int trials, float p, ScalarType dtype, Device device) -> Tensor",
              dtype=_drawn_dtype, **_SAMPLES)
CATEGORICAL = Op("trnrand.categorical", "samples", THRESHOLD, doc="search of a 53-bit uniform in the CDF",
                 schema="(Tensor key, int first, int n, Tensor cdf, Device device) -> Tensor", size=_n,
                 describe=_describe,
                 fake=lambda key, first, n, cdf, device: torch.empty(n, dtype=torch.int64, device=device), **_KEYED)
RANDPERM = Op("trnrand.randperm", "samples", THRESHOLD, doc="argsort of 63-bit keys",
              schema="(Tensor key, int n, ScalarType dtype, Device device) -> Tensor", dtype=_drawn_dtype,
              size=lambda *a, **k: float(a[3]), describe=lambda *a, **k: f"a permutation of {a[3]}",
              fake=lambda key, n, dtype, device: torch.empty(n, dtype=dtype, device=device), **_KEYED)
MULTINOMIAL = Op("trnrand.multinomial", "samples", THRESHOLD,
                 doc="rows x num_samples draws (CDF search or exponential races)",
                 schema="(Tensor key, Tensor probs, int num_samples, bool replacement, Device device) -> Tensor",
                 size=lambda *a, **k: float(a[3].shape[0] * a[4]),
                 describe=lambda *a, **k: f"{a[3].shape[0]} rows x {a[4]} samples",
                 fake=lambda key, probs, m, replacement, device: torch.empty(
                     probs.shape[0], m, dtype=torch.int64, device=device), **_KEYED)


# ---- private torch implementations: each Op's torch lowering ----------------------------------------
def _uniform_bits(seed, subsequence, start, n, dtype, device, open_low=False):
    """_u01 of words start .. start+n*wps-1; float32 takes the fused path (no int64 word array)."""
    if dtype == torch.float32:
        return _philox.uniform32(seed, subsequence, start, n, device, open_low)
    return _philox.uniform64(seed, subsequence, start, n, device, open_low)


@UNIFORM.lowering("torch")
def _uniform_torch(seed, subsequence, base, first, n, low, high, dtype, device):
    u = _uniform_bits(seed, subsequence, base + _wps(dtype) * first, n, dtype, device)
    return _affine(u, low, high, dtype)


def _affine(u, low, high, dtype):
    """low + (high - low) u for u in [0, 1), kept below high."""
    if low == 0.0 and high == 1.0:
        return u
    x = u.mul_(high - low).add_(low)
    # [low, high): rounding of low + (high-low) u can reach high; step back one ulp
    return torch.where(x < high, x, torch.nextafter(torch.tensor(high, dtype=dtype), torch.tensor(low, dtype=dtype)))


def _standard_normal_pairs(seed, subsequence, base, first, n, dtype, device) -> torch.Tensor:
    q = 4 if dtype == torch.float64 else 2
    p0 = first // 2
    p1 = (first + n + 1) // 2
    w0 = base + q * p0
    z = _philox.normals(seed, subsequence, w0, p1 - p0, dtype, device)  # per chunk, in cache
    lead = first - 2 * p0
    return z[lead : lead + n]


def _scale(z, mean, std):
    return z if mean == 0.0 and std == 1.0 else z.mul(std).add_(mean)


@NORMAL.lowering("torch")
def _normal_torch(seed, subsequence, base, first, n, mean, std, dtype, device):
    z = _standard_normal_pairs(seed, subsequence, base, first, n, dtype, device)
    return z if mean == 0.0 and std == 1.0 else z.mul_(std).add_(mean)  # z is this call's own array: in place


@LOGNORMAL.lowering("torch")
def _lognormal_torch(seed, subsequence, base, first, n, mean, std, dtype, device):
    return _standard_normal_pairs(seed, subsequence, base, first, n, dtype, device).mul(std).add_(mean).exp_()


@EXPONENTIAL.lowering("torch")
def _exponential_torch(seed, subsequence, base, first, n, rate, dtype, device):
    u = _uniform_bits(seed, subsequence, base + _wps(dtype) * first, n, dtype, device, open_low=True)
    if dtype == torch.float32:  # NumPy's float32 log, as for the normals: the function the emulator's Ln evaluates
        lg = torch.from_numpy(np.log(u.cpu().numpy())).to(device)  # (torch's differs in the last bit for ~20% of u)
    else:
        lg = torch.log(u)
    return lg.mul_(-1.0 / rate).add_(0.0)  # u in (0, 1]: finite; + 0.0 turns -0.0 into 0.0


@BERNOULLI.lowering("torch")
def _bernoulli_torch(seed, subsequence, base, first, n, p, dtype, device):
    w = _philox.words(seed, subsequence, base + first, n, device)
    threshold = round(p * 2.0**32)  # P(w < T) = T / 2**32, within 2**-33 of p
    return (w < threshold).to(dtype)


def _mulhi_range(w0: torch.Tensor, w1: torch.Tensor, r: int) -> torch.Tensor:
    """floor((w0 * 2**32 + w1) * r / 2**64) for r <= 2**32, from 32 x 32 -> 64 products only."""
    if r == 1 << 32:
        return w0.clone()
    a = w0 * r
    b = w1 * r
    carry = ((a & MASK) + ((b >> 32) & MASK)) >> 32
    return ((a >> 32) & MASK) + carry


@RANDINT.lowering("torch")
def _randint_torch(seed, subsequence, base, first, n, low, high, dtype, device):
    w = _philox.words(seed, subsequence, base + 2 * first, 2 * n, device).reshape(-1, 2)
    return (_mulhi_range(w[:, 0], w[:, 1], high - low) + low).to(dtype)


@GEOMETRIC.lowering("torch")
def _geometric_torch(seed, subsequence, base, first, n, p, dtype, device):
    if p == 1.0:
        return torch.ones(n, dtype=dtype, device=device)
    w = _philox.words(seed, subsequence, base + 2 * first, 2 * n, device)
    if p >= fp32.GEOMETRIC_MIN_P:  # the kernel's fp32 map, bit for bit (trnrand.fp32)
        k = fp32.geometric(w.reshape(n, 2), fp32.geometric_scale(p))
        return torch.from_numpy(k).to(torch.float64).to(dtype).to(device)
    u = _u01(w, torch.float64, open_low=True)  # p < 2**-16: float64 inversion (no fp32 cap) on every backend
    return torch.floor(torch.log(u) / math.log1p(-p)).add_(1).to(dtype)


@TRUNCATED_NORMAL.lowering("torch")
def _truncated_normal_torch(seed, subsequence, base, first, n, mean, std, low, high, dtype, device):
    w = _philox.words(seed, subsequence, base + 2 * first, 2 * n, device)
    if dtype == torch.float32 and fp32.truncated_refusal(mean, std, low, high) is None:
        # the kernel's fp32 PPND7 quantile, bit for bit (trnrand.fp32)
        prm, _ = fp32.truncated_param(mean, std, low, high)
        return torch.from_numpy(fp32.truncated_normal(w.reshape(n, 2), prm)).to(device)
    u = _u01(w, torch.float64)  # float64 draws, and intervals fp32 cannot resolve: float64 ndtri
    flip = low > 0  # sample the mirror image so the CDF differences are taken where they are accurate
    a, b = (-high, -low) if flip else (low, high)
    lo = torch.special.ndtr(torch.tensor(a, dtype=torch.float64))
    hi = torch.special.ndtr(torch.tensor(b, dtype=torch.float64))
    x = torch.special.ndtri(lo + u * (hi - lo)).clamp_(a, b)
    if flip:
        x = x.neg_()
    return x.mul_(std).add_(mean).to(dtype)


@CATEGORICAL.lowering("torch")
def _categorical_torch(seed, subsequence, base, first, n, cdf, device):
    u = _u01(_philox.words(seed, subsequence, base + 2 * first, 2 * n, device), torch.float64)
    idx = torch.searchsorted(cdf, u * cdf[-1], right=True)
    return idx.clamp_(max=cdf.numel() - 1)


# ---- rejection samplers: a fixed 2 words per sample key a private Philox stream of attempts -------
def _attempt_words(keys: torch.Tensor, attempt: int, component: int) -> torch.Tensor:
    """Eight words (two Philox blocks) per sample attempt: counter (2t + i, component, 0, 0), key = the sample key."""
    m = keys.shape[0]
    ctr = torch.zeros((m, 2, 4), dtype=torch.int64, device=keys.device)
    ctr[:, 0, 0] = 2 * attempt
    ctr[:, 1, 0] = 2 * attempt + 1
    ctr[:, :, 1] = component
    return _philox_torch(ctr, keys[:, None, :].expand(m, 2, 2), 10).reshape(m, 8)


def _u53(w: torch.Tensor, i: int, open_low=False) -> torch.Tensor:
    m = _philox._m53(w[:, i], w[:, i + 1])
    return (m + 1 if open_low else m).to(torch.float64).mul_(TWO_M53)


def _normal53(w: torch.Tensor, i: int) -> torch.Tensor:
    return _box_muller(w[:, i : i + 4].reshape(-1), torch.float64)[:, 0]


def _rejection(keys: torch.Tensor, component: int, attempt_fn, t0: int = 0) -> torch.Tensor:
    """Run attempt_fn(words (m, 8)) -> (values, accepted) on every sample until each has accepted once.

    ``t0``: the first attempt (a device kernel that ran attempts 0 .. t0-1 hands over the rest)."""
    n = keys.shape[0]
    out = torch.empty(n, dtype=torch.float64, device=keys.device)
    todo = torch.arange(n, device=keys.device)
    t = t0
    while todo.numel():
        val, ok = attempt_fn(_attempt_words(keys[todo], t, component))
        out[todo[ok]] = val[ok]
        todo = todo[~ok]
        t += 1
    return out


def _sample_keys(seed, subsequence, base, first, n, device) -> torch.Tensor:
    return _philox.words(seed, subsequence, base + 2 * first, 2 * n, device).reshape(n, 2)


def _gamma_from_keys(keys: torch.Tensor, shape: float, component: int, t0: int = 0) -> torch.Tensor:
    """Marsaglia-Tsang (2000) on Gamma(max(shape, shape+1)); shape < 1 boosted by U**(1/shape)."""
    a = shape + 1.0 if shape < 1.0 else shape
    d = a - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)

    def attempt(w):
        x = _normal53(w, 0)
        u = _u53(w, 4, open_low=True)
        v = (1.0 + c * x) ** 3
        ok = v > 0
        vs = torch.where(ok, v, torch.ones_like(v))
        ok &= torch.log(u) < 0.5 * x * x + d - d * vs + d * torch.log(vs)
        val = d * vs
        if shape < 1.0:  # words 6, 7 are independent of the acceptance test
            val = val * _u53(w, 6, open_low=True) ** (1.0 / shape)
        return val, ok

    return _rejection(keys, component, attempt, t0)


def _fp32_gamma_ok(shape: float, dtype) -> bool:
    """float32 draws take the gamma kernel's fp32 rounds (on both backends) where that kernel holds."""
    return dtype == torch.float32 and shape <= fp32.GAMMA_MAX_SHAPE


def _gamma_rounds_then_float64(keys: torch.Tensor, shape: float, component: int) -> torch.Tensor:
    """float64 Gamma(shape) samples as the kernel path makes them: ``GAMMA_ROUNDS`` fp32 rounds
    (:func:`trnrand.fp32.gamma_rounds`), then the float64 attempts from that round on for a sample
    every round rejected."""
    vals = torch.from_numpy(fp32.gamma_rounds(lambda t, c: _attempt_words(keys, t, c), shape, component,
                                               fp32.GAMMA_ROUNDS)).to(torch.float64).to(keys.device)
    miss = torch.nonzero(vals < 0).reshape(-1)
    if miss.numel():
        vals[miss] = _gamma_from_keys(keys[miss], shape, component, t0=fp32.GAMMA_ROUNDS)
    return vals


@GAMMA.lowering("torch")
def _gamma_torch(seed, subsequence, base, first, n, shape, scale, dtype, device):
    keys = _sample_keys(seed, subsequence, base, first, n, device)
    if _fp32_gamma_ok(shape, dtype):
        return _gamma_rounds_then_float64(keys, shape, 0).mul_(scale).to(dtype)
    return _gamma_from_keys(keys, shape, 0).mul_(scale).to(dtype)


@BETA.lowering("torch")
def _beta_torch(seed, subsequence, base, first, n, alpha, beta, dtype, device):
    keys = _sample_keys(seed, subsequence, base, first, n, device)
    if _fp32_gamma_ok(alpha, dtype) and _fp32_gamma_ok(beta, dtype):
        x = _gamma_rounds_then_float64(keys, alpha, 0)
        y = _gamma_rounds_then_float64(keys, beta, 1)
    else:
        x = _gamma_from_keys(keys, alpha, 0)
        y = _gamma_from_keys(keys, beta, 1)
    return (x / (x + y)).to(dtype)


@STUDENT_T.lowering("torch")
def _student_t_torch(seed, subsequence, base, first, n, df, dtype, device):
    keys = _sample_keys(seed, subsequence, base, first, n, device)
    if _fp32_gamma_ok(df / 2.0, dtype):  # the kernel's fp32 rounds and ratio; float64 for every-round misses
        t = torch.from_numpy(fp32.gamma_rounds(lambda a, c: _attempt_words(keys, a, c), df / 2.0, 0,
                                                fp32.GAMMA_ROUNDS, student_df=df)).to(torch.float64)
        miss = torch.nonzero(torch.isnan(t)).reshape(-1)
        if miss.numel():
            g = _gamma_from_keys(keys[miss], df / 2.0, 0, t0=fp32.GAMMA_ROUNDS).mul_(2.0)
            z = _normal53(_attempt_words(keys[miss], 0, 1), 0)
            t[miss] = z / torch.sqrt(g / df)
        return t.to(dtype).to(device)
    g = _gamma_from_keys(keys, df / 2.0, 0).mul_(2.0)  # chi-squared(df)
    z = _normal53(_attempt_words(keys, 0, 1), 0)
    return (z / torch.sqrt(g / df)).to(dtype)


@POISSON.lowering("torch")
def _poisson_torch(seed, subsequence, base, first, n, lam, dtype, device):
    keys = _sample_keys(seed, subsequence, base, first, n, device)
    if lam == 0.0:
        return torch.zeros(n, dtype=dtype, device=device)
    if lam < 10.0:
        # inversion by sequential search on one uniform (expected lam + 1 steps)
        u = _u53(_attempt_words(keys, 0, 0), 0)
        k = torch.zeros(n, dtype=torch.float64, device=device)
        p = torch.full_like(k, math.exp(-lam))
        cdf = p.clone()
        active = u > cdf
        step = 0
        while bool(active.any()) and step < 200:
            step += 1
            k = torch.where(active, k + 1, k)
            p = torch.where(active, p * lam / k, p)
            cdf = torch.where(active, cdf + p, cdf)
            active &= u > cdf
        return k.to(dtype)
    if lam <= fp32.PTRS_MAX_LAM:  # the PTRS kernel's fp32 rounds, then float64 attempts (as the kernel path)
        a, b, invalpha, vr = _ptrs_constants(lam)
        k = torch.from_numpy(fp32.ptrs_rounds(lambda t, c: _attempt_words(keys, t, c), lam, a, b, invalpha, vr,
                                               fp32.PTRS_ROUNDS)).to(torch.float64).to(device)
        miss = torch.nonzero(k < 0).reshape(-1)
        if miss.numel():
            k[miss] = _rejection(keys[miss], 0, _ptrs_attempt(lam), t0=fp32.PTRS_ROUNDS)
        return k.to(dtype)
    return _rejection(keys, 0, _ptrs_attempt(lam)).to(dtype)


def _ptrs_constants(lam: float) -> tuple[float, float, float, float]:
    """(a, b, 1/alpha, v_r) of PTRS for mean lam (Hormann 1993)."""
    b = 0.931 + 2.53 * math.sqrt(lam)
    a = -0.059 + 0.02483 * b
    return a, b, 1.1239 + 1.1328 / (b - 3.4), 0.9277 - 3.6224 / (b - 2)


def _ptrs_attempt(lam: float):
    """PTRS, transformed rejection with squeeze (Hormann 1993): one attempt on words (m, 8) -> (k, accepted)."""
    loglam = math.log(lam)
    a, b, invalpha, vr = _ptrs_constants(lam)

    def attempt(w):
        U = _u53(w, 0) - 0.5
        Vv = _u53(w, 2, open_low=True)
        us = 0.5 - U.abs()
        k = torch.floor((2 * a / us + b) * U + lam + 0.43)
        fast = (us >= 0.07) & (Vv <= vr)
        bad = (k < 0) | ((us < 0.013) & (Vv > us))
        lhs = torch.log(Vv) + math.log(invalpha) - torch.log(a / (us * us) + b)
        rhs = -lam + k * loglam - torch.lgamma(k + 1)
        return k, fast | (~bad & (lhs <= rhs))

    return attempt


@BINOMIAL.lowering("torch")
def _binomial_torch(seed, subsequence, base, first, n, trials, p, dtype, device):
    keys = _sample_keys(seed, subsequence, base, first, n, device)
    if p == 0.0 or trials == 0:
        return torch.zeros(n, dtype=dtype, device=device)
    if p == 1.0:
        return torch.full((n,), trials, dtype=dtype, device=device)
    flip = p > 0.5
    pp = 1.0 - p if flip else p
    q = 1.0 - pp
    if trials * pp < 30.0:
        # inversion (expected n p + 1 steps)
        u = _u53(_attempt_words(keys, 0, 0), 0)
        s = pp / q
        aa = (trials + 1) * s
        r = torch.full((n,), q**trials, dtype=torch.float64, device=device)
        x = torch.zeros(n, dtype=torch.float64, device=device)
        active = u > r
        while bool(active.any()):
            u = torch.where(active, u - r, u)
            x = torch.where(active, x + 1, x)
            r = torch.where(active, r * (aa / x - s), r)
            active &= (u > r) & (x < trials)
        k = x
    else:
        # BTRS, transformed rejection with squeeze (Hormann 1993)
        spq = math.sqrt(trials * pp * q)
        b = 1.15 + 2.53 * spq
        a = -0.0873 + 0.0248 * b + 0.01 * pp
        c = trials * pp + 0.5
        alpha = (2.83 + 5.1 / b) * spq
        vr = 0.92 - 4.2 / b
        m = math.floor((trials + 1) * pp)
        h = math.lgamma(m + 1) + math.lgamma(trials - m + 1)
        lpq = math.log(pp / q)

        def attempt(w):
            U = _u53(w, 0) - 0.5
            Vv = _u53(w, 2, open_low=True)
            us = 0.5 - U.abs()
            kk = torch.floor((2 * a / us + b) * U + c)
            inr = (kk >= 0) & (kk <= trials)
            fast = inr & (us >= 0.07) & (Vv <= vr)
            ks = kk.clamp(0, trials)
            v2 = Vv * alpha / (a / (us * us) + b)
            slow = inr & (torch.log(v2) <= h - torch.lgamma(ks + 1) - torch.lgamma(trials - ks + 1) + (ks - m) * lpq)
            return kk, fast | slow

        k = _rejection(keys, 0, attempt)
    if flip:
        k = trials - k
    return k.to(dtype)


@RANDPERM.lowering("torch")
def _randperm_torch(seed, subsequence, base, n, dtype, device):
    w = _philox.words(seed, subsequence, base, 2 * n, device).reshape(-1, 2)
    key = ((w[:, 0] >> 1) << 32) | w[:, 1]  # 63 random bits: ties have probability < n**2 / 2**64
    return torch.argsort(key, stable=True).to(dtype)


@MULTINOMIAL.lowering("torch")
def _multinomial_torch(seed, subsequence, base, probs, num_samples, replacement, device):
    rows, k = probs.shape
    if replacement:
        cdf = torch.cumsum(probs.to(torch.float64), dim=1)
        w = _philox.words(seed, subsequence, base, 2 * rows * num_samples, device)
        u = _u01(w, torch.float64).reshape(rows, num_samples)
        idx = torch.searchsorted(cdf, u * cdf[:, -1:], right=True)
        return idx.clamp_(max=k - 1)
    # without replacement: exponential races, the num_samples smallest E_i / p_i (Efraimidis-Spirakis)
    w = _philox.words(seed, subsequence, base, 2 * rows * k, device)
    e = -torch.log(_u01(w, torch.float64, open_low=True)).reshape(rows, k)
    keyv = e / probs.to(torch.float64)
    return torch.argsort(keyv, dim=1, stable=True)[:, :num_samples]


# ---- public API -----------------------------------------------------------------------------------
def _finish(x: torch.Tensor, size) -> torch.Tensor:
    return x if x.shape == size else x.reshape(size)


def uniform(*size, low=0.0, high=1.0, dtype=torch.float32, generator=None):
    """Uniform samples on ``[low, high)``.

    Sample ``k`` of a draw is the word ``w_k`` (float32: ``(w_k >> 8) *
    2**-24``, 24 random bits) or the word pair ``(w_2k, w_2k+1)`` (float64:
    53 random bits), then ``low + (high - low) * u``; the result never
    equals ``high`` (a rounded ``high`` is stepped down one ulp).

    Parameters
    ----------
    *size : int or a tuple of ints
        Output shape (each >= 0).
    low, high : float
        Finite bounds with ``low < high``.
    dtype : torch.float32 or torch.float64
    generator : trnrand.Generator, optional
        Default: :func:`get_default_generator`.

    Returns
    -------
    torch.Tensor
        Shape ``size``, ``dtype``, on the generator's device.

    Raises
    ------
    ValueError
        A negative size, non-finite bounds, ``low >= high``.
    TypeError
        Non-integer sizes, non-real bounds, another dtype or generator type.

    Examples
    --------
    >>> import trnrand
    >>> g = trnrand.Generator(seed=0)
    >>> x = trnrand.uniform(2, 3, low=-1.0, high=1.0, generator=g)
    >>> x.shape, bool(((x >= -1) & (x < 1)).all())
    (torch.Size([2, 3]), True)
    """
    where = "uniform"
    size = _size(size, where)
    low, high = _real(low, "low", where), _real(high, "high", where)
    if not low < high:
        raise ValueError(f"{where}: low must be < high, got low={low}, high={high}")
    dtype = _fdtype(dtype, where)
    g = _resolve(generator, where)
    n = _numel(size)
    with g._draw():
        base, first = _span(g, n, _wps(dtype))
        return _finish(UNIFORM(g._seed, g._subsequence, base, first, n, low, high, dtype, g._device), size)


def normal(*size, mean=0.0, std=1.0, dtype=torch.float32, generator=None):
    """Normal samples N(mean, std**2) by Box-Muller.

    Normals come in pairs; pair ``i`` of a draw uses words ``2i, 2i+1``
    (float32) or ``4i .. 4i+3`` (float64): radius ``sqrt(-2 log u1)`` with
    ``u1`` in (0, 1] and an angle whose sine is taken only on [-pi, pi]
    (see the docs' stream section). Sample ``2i`` is the sine output,
    ``2i+1`` the quarter-turn output. A draw of ``N`` samples consumes
    ``ceil(N/2)`` pairs.

    Parameters
    ----------
    *size : int or a tuple of ints
    mean : float
    std : float
        Finite, > 0.
    dtype : torch.float32 or torch.float64
    generator : trnrand.Generator, optional

    Returns
    -------
    torch.Tensor of shape ``size``

    Raises
    ------
    ValueError
        Negative size, std <= 0, non-finite mean/std.
    TypeError
        Wrong argument types.

    Examples
    --------
    >>> import trnrand
    >>> z = trnrand.normal(4, mean=1.0, std=2.0, generator=trnrand.Generator(seed=7))
    >>> z.shape, z.dtype
    (torch.Size([4]), torch.float32)
    """
    where = "normal"
    size = _size(size, where)
    mean, std = _real(mean, "mean", where), _positive(std, "std", where)
    dtype = _fdtype(dtype, where)
    g = _resolve(generator, where)
    n = _numel(size)
    with g._draw():
        base, first = _span_pairs(g, n, 2 * _wps(dtype))
        return _finish(NORMAL(g._seed, g._subsequence, base, first, n, mean, std, dtype, g._device), size)


def standard_normal(*size, dtype=torch.float32, generator=None):
    """N(0, 1) samples; the same numbers as ``normal(*size, dtype=dtype, generator=generator)``.

    Examples
    --------
    >>> import trnrand
    >>> trnrand.standard_normal(3, generator=trnrand.Generator(seed=1)).shape
    torch.Size([3])
    """
    return normal(*size, mean=0.0, std=1.0, dtype=dtype, generator=generator)


def lognormal(*size, mean=0.0, std=1.0, dtype=torch.float32, generator=None):
    """exp of N(mean, std**2) samples (``mean``, ``std`` of the underlying normal); consumes as :func:`normal`.

    Examples
    --------
    >>> import trnrand
    >>> bool((trnrand.lognormal(5, generator=trnrand.Generator(seed=1)) > 0).all())
    True
    """
    where = "lognormal"
    size = _size(size, where)
    mean, std = _real(mean, "mean", where), _positive(std, "std", where)
    dtype = _fdtype(dtype, where)
    g = _resolve(generator, where)
    n = _numel(size)
    with g._draw():
        base, first = _span_pairs(g, n, 2 * _wps(dtype))
        return _finish(LOGNORMAL(g._seed, g._subsequence, base, first, n, mean, std, dtype, g._device), size)


def exponential(*size, rate=1.0, dtype=torch.float32, generator=None):
    """Exponential samples with density ``rate * exp(-rate x)``: ``-log(u) / rate``, ``u`` in (0, 1].

    ``u = (m + 1) 2**-24`` (float32, one word) or ``(m + 1) 2**-53``
    (float64, two words), so the log is always finite; the largest sample
    is ``24 log 2 / rate`` (float32) or ``53 log 2 / rate`` (float64).

    Raises
    ------
    ValueError
        Negative size, rate <= 0 or not finite.

    Examples
    --------
    >>> import trnrand
    >>> bool((trnrand.exponential(8, rate=2.0, generator=trnrand.Generator(seed=1)) >= 0).all())
    True
    """
    where = "exponential"
    size = _size(size, where)
    rate = _positive(rate, "rate", where)
    dtype = _fdtype(dtype, where)
    g = _resolve(generator, where)
    n = _numel(size)
    with g._draw():
        base, first = _span(g, n, _wps(dtype))
        return _finish(EXPONENTIAL(g._seed, g._subsequence, base, first, n, rate, dtype, g._device), size)


def _into(buf, where: str):
    if not isinstance(buf, torch.Tensor):
        raise TypeError(f"{where}: buf must be a torch.Tensor, got {type(buf).__name__}")
    if buf.dtype not in FLOATS:
        names = ", ".join(str(d).replace("torch.", "") for d in FLOATS)
        raise TypeError(f"{where}: buf has dtype {str(buf.dtype).replace('torch.', '')}; expected one of {names}")
    return buf


def uniform_into(buf, low=0.0, high=1.0, generator=None):
    """Fill ``buf`` (float32/float64 tensor, any shape) in place with :func:`uniform` samples; returns ``buf``.

    The numbers are those ``uniform(*buf.shape, low=low, high=high,
    dtype=buf.dtype)`` would return from the same generator state.

    Examples
    --------
    >>> import torch, trnrand
    >>> b = trnrand.uniform_into(torch.empty(3), generator=trnrand.Generator(seed=2))
    >>> bool(((b >= 0) & (b < 1)).all())
    True
    """
    buf = _into(buf, "uniform_into")
    buf.copy_(uniform(*buf.shape, low=low, high=high, dtype=buf.dtype, generator=generator))
    return buf


def normal_into(buf, mean=0.0, std=1.0, generator=None):
    """Fill ``buf`` in place with :func:`normal` samples; returns ``buf``.

    Examples
    --------
    >>> import torch, trnrand
    >>> trnrand.normal_into(torch.empty(2, 2), generator=trnrand.Generator(seed=2)).shape
    torch.Size([2, 2])
    """
    buf = _into(buf, "normal_into")
    buf.copy_(normal(*buf.shape, mean=mean, std=std, dtype=buf.dtype, generator=generator))
    return buf


def exponential_into(buf, rate=1.0, generator=None):
    """Fill ``buf`` in place with :func:`exponential` samples; returns ``buf``.

    Examples
    --------
    >>> import torch, trnrand
    >>> trnrand.exponential_into(torch.empty(3, dtype=torch.float64), generator=trnrand.Generator(seed=2)).dtype
    torch.float64
    """
    buf = _into(buf, "exponential_into")
    buf.copy_(exponential(*buf.shape, rate=rate, dtype=buf.dtype, generator=generator))
    return buf


def _keyed(name, size, dtype, generator, impl, *params, allowed=FLOATS):
    size = _size(size, name)
    dtype = _fdtype(dtype, name, allowed)
    g = _resolve(generator, name)
    n = _numel(size)
    with g._draw():
        base, first = _span(g, n, 2)
        return _finish(impl(g._seed, g._subsequence, base, first, n, *params, dtype, g._device), size)


def gamma(*size, shape, scale=1.0, dtype=torch.float32, generator=None):
    """Gamma(shape, scale) samples: density ``x**(shape-1) exp(-x/scale) / (Gamma(shape) scale**shape)``.

    Marsaglia-Tsang rejection; ``shape < 1`` via ``Gamma(shape+1) U**(1/shape)``.
    Each sample consumes two stream words that key its own Philox stream of
    attempts, so the draw is reproducible and splits across partitions.

    Raises
    ------
    ValueError
        shape or scale <= 0 or not finite.

    Examples
    --------
    >>> import trnrand
    >>> trnrand.gamma(3, shape=2.0, generator=trnrand.Generator(seed=1)).shape
    torch.Size([3])
    """
    where = "gamma"
    shape, scale = _positive(shape, "shape", where), _positive(scale, "scale", where)
    return _keyed(where, size, dtype, generator, GAMMA, shape, scale)


def chi_squared(*size, df, dtype=torch.float32, generator=None):
    """Chi-squared samples with ``df`` > 0 degrees of freedom (Gamma(df/2, scale=2)).

    Examples
    --------
    >>> import trnrand
    >>> trnrand.chi_squared(2, df=3.0, generator=trnrand.Generator(seed=1)).shape
    torch.Size([2])
    """
    df = _positive(df, "df", "chi_squared")
    return _keyed("chi_squared", size, dtype, generator, GAMMA, df / 2.0, 2.0)


def beta(*size, alpha, beta, dtype=torch.float32, generator=None):
    """Beta(alpha, beta) samples on [0, 1] as ``X / (X + Y)``, X ~ Gamma(alpha), Y ~ Gamma(beta).

    Examples
    --------
    >>> import trnrand
    >>> x = trnrand.beta(4, alpha=2.0, beta=3.0, generator=trnrand.Generator(seed=1))
    >>> bool(((x >= 0) & (x <= 1)).all())
    True
    """
    a, b = _positive(alpha, "alpha", "beta"), _positive(beta, "beta", "beta")
    return _keyed("beta", size, dtype, generator, BETA, a, b)


def student_t(*size, df, dtype=torch.float32, generator=None):
    """Student's t samples with ``df`` > 0 degrees of freedom: ``Z / sqrt(chi2(df) / df)``.

    Examples
    --------
    >>> import trnrand
    >>> trnrand.student_t(2, df=5.0, generator=trnrand.Generator(seed=1)).shape
    torch.Size([2])
    """
    df = _positive(df, "df", "student_t")
    return _keyed("student_t", size, dtype, generator, STUDENT_T, df)


def poisson(*size, lam=1.0, dtype=torch.float32, generator=None):
    """Poisson(lam) counts for any ``lam >= 0`` (as floats by default, like the published trnrand).

    ``lam < 10``: inversion by sequential search; ``lam >= 10``: PTRS
    transformed rejection (Hormann 1993). Two words per sample.

    Examples
    --------
    >>> import trnrand
    >>> k = trnrand.poisson(5, lam=3.0, generator=trnrand.Generator(seed=1))
    >>> bool((k == k.round()).all() and (k >= 0).all())
    True
    """
    where = "poisson"
    lam = _real(lam, "lam", where)
    if lam < 0:
        raise ValueError(f"{where}: lam must be >= 0, got {lam}")
    if lam > 2.0**52:
        raise ValueError(f"{where}: lam must be <= 2**52, got {lam}")
    return _keyed(where, size, dtype, generator, POISSON, lam, allowed=FLOATS + INTS)


def binomial(*size, n, p, dtype=torch.int64, generator=None):
    """Binomial(n, p) counts: inversion when ``n min(p, 1-p) < 30``, else BTRS (Hormann 1993).

    Examples
    --------
    >>> import trnrand
    >>> k = trnrand.binomial(6, n=10, p=0.3, generator=trnrand.Generator(seed=1))
    >>> bool(((k >= 0) & (k <= 10)).all())
    True
    """
    where = "binomial"
    trials = validate.integer(n, "n", where, minimum=0)
    if trials >= 1 << 53:
        raise ValueError(f"{where}: n must be < 2**53, got {trials}")
    p = _prob(p, "p", where)
    return _keyed(where, size, dtype, generator, BINOMIAL, trials, p, allowed=FLOATS + INTS)


def bernoulli(*size, p=0.5, dtype=torch.float32, generator=None):
    """1 with probability ``p`` in [0, 1], else 0: ``w < round(p 2**32)`` on one word per sample.

    Examples
    --------
    >>> import trnrand
    >>> trnrand.bernoulli(4, p=1.0, generator=trnrand.Generator(seed=1)).tolist()
    [1.0, 1.0, 1.0, 1.0]
    """
    where = "bernoulli"
    size = _size(size, where)
    p = _prob(p, "p", where)
    dtype = _fdtype(dtype, where, FLOATS + INTS + (torch.bool,))
    g = _resolve(generator, where)
    n = _numel(size)
    with g._draw():
        base, first = _span(g, n, 1)
        return _finish(BERNOULLI(g._seed, g._subsequence, base, first, n, p, dtype, g._device), size)


def geometric(*size, p, dtype=torch.int64, generator=None):
    """Trials up to the first success (support 1, 2, ...): ``floor(log u / log(1-p)) + 1``, u in (0, 1].

    Examples
    --------
    >>> import trnrand
    >>> bool((trnrand.geometric(5, p=0.2, generator=trnrand.Generator(seed=1)) >= 1).all())
    True
    """
    where = "geometric"
    p = _prob(p, "p", where)
    if p == 0.0:
        raise ValueError(f"{where}: p must be in (0, 1], got 0.0")
    return _keyed(where, size, dtype, generator, GEOMETRIC, p, allowed=FLOATS + INTS)


def randint(*size, low=0, high=1, dtype=torch.long, generator=None):
    """Integers uniform on ``[low, high)`` (``high - low <= 2**32``), two words per sample.

    ``low + floor(x (high - low) / 2**64)`` with ``x`` the 64-bit number of
    the two words: the bias is below ``(high - low) / 2**64``.

    Examples
    --------
    >>> import trnrand
    >>> x = trnrand.randint(5, low=3, high=6, generator=trnrand.Generator(seed=1))
    >>> bool(((x >= 3) & (x < 6)).all())
    True
    """
    where = "randint"
    low = validate.integer(low, "low", where)
    high = validate.integer(high, "high", where)
    if not low < high:
        raise ValueError(f"{where}: low must be < high, got low={low}, high={high}")
    if high - low > 1 << 32:
        raise ValueError(f"{where}: high - low must be <= 2**32, got {high - low}")
    if not -(1 << 63) <= low or high > 1 << 63:
        raise ValueError(f"{where}: low and high must fit int64")
    return _keyed(where, size, dtype, generator, RANDINT, low, high, allowed=INTS + FLOATS)


def randperm(n, dtype=torch.long, generator=None):
    """A uniformly random permutation of ``0 .. n-1`` (argsort of 63-bit keys, two words per element).

    Not split across partitions: every rank gets the whole permutation.

    Examples
    --------
    >>> import trnrand
    >>> sorted(trnrand.randperm(5, generator=trnrand.Generator(seed=1)).tolist())
    [0, 1, 2, 3, 4]
    """
    where = "randperm"
    n = validate.integer(n, "n", where, minimum=0)
    if n > MAX_SAMPLES:
        raise ValueError(f"{where}: n must be <= 2**48, got {n}")
    dtype = _fdtype(dtype, where, INTS)
    g = _resolve(generator, where)
    with g._draw():
        base = g._reserve(2 * n)
        return RANDPERM(g._seed, g._subsequence, base, n, dtype, g._device)


def _probs(probs, where: str) -> torch.Tensor:
    probs = validate.tensor(probs, "probs", where)
    validate.dtype(probs, "probs", FLOATS, where)
    validate.ndim(probs, "probs", (1, 2), where)
    if probs.shape[-1] == 0:
        raise ValueError(f"{where}: probs must have at least one category")
    if not bool(torch.isfinite(probs).all()) or bool((probs < 0).any()):
        raise ValueError(f"{where}: probs must be finite and >= 0")
    if bool((probs.sum(-1) <= 0).any()):
        raise ValueError(f"{where}: each row of probs must have a positive sum")
    return probs


def _probs_traced(probs, where: str) -> torch.Tensor:
    """:func:`_probs` as torch.compile traces it: the same checks of type, dtype and shape at trace time;
    the checks of the values are assertions of the graph (``torch._assert_async``: a RuntimeError with the
    eager message when the graph runs), no host read of the data."""
    probs = validate.tensor(probs, "probs", where)
    validate.dtype(probs, "probs", FLOATS, where)
    validate.ndim(probs, "probs", (1, 2), where)
    if probs.shape[-1] == 0:
        raise ValueError(f"{where}: probs must have at least one category")
    ok = torch.isfinite(probs).all() & (probs >= 0).all()
    torch._assert_async(ok, f"{where}: probs must be finite and >= 0")
    # fires only when the first holds: a compiled graph may run the two in either order
    torch._assert_async(~ok | (probs.sum(-1) > 0).all(), f"{where}: each row of probs must have a positive sum")
    return probs


traceable_as(_probs, _probs_traced)


def _enough_categories(p2: torch.Tensor, num_samples: int, where: str) -> None:
    """Without replacement: every row of ``p2`` has at least ``num_samples`` categories with p > 0."""
    nz = int((p2 > 0).sum(1).min())
    if num_samples > nz:
        raise ValueError(f"{where}: num_samples={num_samples} exceeds the {nz} categories with p > 0")


def _enough_categories_traced(p2: torch.Tensor, num_samples: int, where: str) -> None:
    valid = torch.isfinite(p2).all() & (p2 >= 0).all() & (p2.sum(1) > 0).all()  # else _probs_traced's assertion
    torch._assert_async(~valid | ((p2 > 0).sum(1).min() >= num_samples),
                        f"{where}: num_samples={num_samples} exceeds the categories with p > 0 of a row")


traceable_as(_enough_categories, _enough_categories_traced)


def categorical(probs, *size, generator=None):
    """Category indices ``i`` with probability ``probs[i] / probs.sum()`` (1-D ``probs``), int64 of shape ``size``.

    Inverse CDF on one float64 uniform (two words) per sample.

    Examples
    --------
    >>> import torch, trnrand
    >>> trnrand.categorical(torch.tensor([0.0, 1.0, 0.0]), 3, generator=trnrand.Generator(seed=1)).tolist()
    [1, 1, 1]
    """
    where = "categorical"
    probs = _probs(probs, where)
    if probs.dim() != 1:
        raise ValueError(f"{where}: probs must be 1-D, got shape {tuple(probs.shape)}")
    size = _size(size, where)
    g = _resolve(generator, where)
    n = _numel(size)
    with g._draw():
        base, first = _span(g, n, 2)
        cdf = torch.cumsum(probs.to(torch.float64), 0).to(g._device)
        return _finish(CATEGORICAL(g._seed, g._subsequence, base, first, n, cdf, g._device), size)


def multinomial(probs, num_samples, replacement=False, generator=None):
    """Like ``torch.multinomial``: ``num_samples`` category indices per row of ``probs`` (1-D or 2-D).

    With replacement: inverse CDF (two words per sample). Without:
    exponential races, the ``num_samples`` smallest ``E_i / p_i`` (two words
    per category). Not split across partitions.

    Examples
    --------
    >>> import torch, trnrand
    >>> p = torch.tensor([1.0, 0.0, 1.0])
    >>> sorted(trnrand.multinomial(p, 2, generator=trnrand.Generator(seed=1)).tolist())
    [0, 2]
    """
    where = "multinomial"
    probs = _probs(probs, where)
    num_samples = validate.integer(num_samples, "num_samples", where, minimum=0, maximum=validate.INDEX_MAX)
    if num_samples > MAX_SAMPLES:
        raise ValueError(f"{where}: num_samples must be <= 2**48, got {num_samples}")
    if not isinstance(replacement, bool):
        raise TypeError(f"{where}: replacement must be a bool, got {type(replacement).__name__}")
    p2 = probs.reshape(-1, probs.shape[-1]).to(torch.float64)
    if not replacement:
        _enough_categories(p2, num_samples, where)
    g = _resolve(generator, where)
    words = 2 * p2.shape[0] * (num_samples if replacement else p2.shape[1])
    with g._draw():
        base = g._reserve(words)
        out = MULTINOMIAL(g._seed, g._subsequence, base, p2.to(g._device), num_samples, replacement, g._device)
        return out.reshape(*probs.shape[:-1], num_samples)


def truncated_normal(*size, mean=0.0, std=1.0, low=-2.0, high=2.0, dtype=torch.float32, generator=None):
    """Normal N(mean, std**2) restricted to ``[mean + low std, mean + high std]`` (bounds in std units).

    Exact inversion ``ndtri(Phi(low) + u (Phi(high) - Phi(low)))`` in
    float64 (mirrored for a positive interval, so tails keep their
    accuracy); one float64 uniform (two words) per sample, no rejection.

    Raises
    ------
    ValueError
        low >= high, std <= 0, non-finite values (``low=-inf``/``high=inf`` allowed).

    Examples
    --------
    >>> import trnrand
    >>> x = trnrand.truncated_normal(100, generator=trnrand.Generator(seed=1))
    >>> bool(((x >= -2) & (x <= 2)).all())
    True
    """
    where = "truncated_normal"
    mean, std = _real(mean, "mean", where), _positive(std, "std", where)
    low, high = _real(low, "low", where, finite=False), _real(high, "high", where, finite=False)
    if math.isnan(low) or math.isnan(high) or not low < high:
        raise ValueError(f"{where}: low must be < high, got low={low}, high={high}")
    return _keyed(where, size, dtype, generator, TRUNCATED_NORMAL, mean, std, low, high)
