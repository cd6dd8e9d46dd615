"""trnrand's transform kernels (bernoulli, exponential, randint, geometric) and the philox4x32 block kernel.

Through the emulator (backend "simulator") against the torch path (bit identity where both define the same
bits) and against references independent of the code under test: the scalar Philox in ``ref_philox`` (plain
Python ints), Random123's published vectors, big-integer arithmetic, float64 NumPy, scipy.stats. Sizes are
ragged (not multiples of 128 partitions x 4 lanes) and exceed one partition per block row (nblocks > 128).
"""

import math

import numpy as np
import pytest
import ref_philox
import torch
from scipy import stats

import trnrand
from trnrand.kernels.philox_block import philox_block_counts, philox_block_kernel
from trnrand.kernels.philox_transform import philox_transform_counts, philox_transform_kernel
from trnsci import nki
from trnsci.testing import assert_counts, kernel_ran

MASK = 0xFFFFFFFF
SEED, SUB = 0x0123456789ABCDEF, 5


def G(offset=0, **kw):
    return trnrand.Generator(seed=SEED, subsequence=SUB, offset=offset, **kw)


def ref_words(w0, n):
    return np.array([ref_philox.stream_word(SEED, SUB, w0 + j) for j in range(n)], dtype=np.int64)


# ---- philox4x32: explicit counters and keys ---------------------------------------------------------
KAT = [  # Random123 kat_vectors, philox4x32_10
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((MASK,) * 4, (MASK,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def test_philox4x32_simulator_gives_the_known_answers():
    c = torch.tensor([k[0] for k in KAT], dtype=torch.int64)
    k = torch.tensor([k[1] for k in KAT], dtype=torch.int64)
    with kernel_ran("philox_block_kernel"):
        got = trnrand.philox4x32(c, k)
    assert got.tolist() == [list(k[2]) for k in KAT]


@pytest.mark.parametrize("n,rounds", [(1, 10), (389, 10), (130, 7)])
def test_philox_block_kernel_equals_reference_and_closed_form(n, rounds):
    rng = np.random.default_rng(n)
    c = rng.integers(0, 1 << 32, size=(n, 4), dtype=np.uint64).astype(np.uint32)
    k = rng.integers(0, 1 << 32, size=(n, 2), dtype=np.uint64).astype(np.uint32)
    out, prof = nki.profile(philox_block_kernel, c, k, rounds=rounds)
    want = [ref_philox.philox4x32([int(v) for v in c[i]], [int(v) for v in k[i]], rounds) for i in range(n)]
    assert np.array_equal(out.astype(np.int64), np.array(want, dtype=np.int64))
    assert_counts(prof, philox_block_counts(n, rounds))


def test_philox4x32_simulator_is_bit_identical_to_torch_with_broadcast_keys():
    # counters (3, 131, 4) with one key per row of 131: 393 rows, ragged, > 128 partitions
    g = torch.Generator().manual_seed(3)
    c = torch.randint(0, 1 << 32, (3, 131, 4), generator=g)
    k = torch.randint(0, 1 << 32, (131, 2), generator=g)
    want = trnrand.philox4x32(c, k, rounds=9)
    with kernel_ran("philox_block_kernel"):
        got = trnrand.philox4x32(c, k, rounds=9)
    assert got.dtype == torch.int64 and torch.equal(got, want)
    assert want[2, 130].tolist() == ref_philox.philox4x32(c[2, 130].tolist(), k[130].tolist(), 9)


# ---- the stream transforms: bit identity with the torch path ------------------------------------------
# offsets 0..3 put the draw's first word in every lane and both pairings; 1031 samples are > 128 blocks
TRANSFORMS = [
    ("bernoulli", {"p": 0.3}),
    ("bernoulli", {"p": 0.0, "dtype": torch.bool}),
    ("exponential", {"rate": 2.5}),
    ("randint", {"low": -5, "high": 1000}),
    ("randint", {"low": 1 << 40, "high": (1 << 40) + (1 << 32), "dtype": torch.int64}),  # r = 2**32
    ("randint", {"low": 0, "high": 0xFFFFFFFF, "dtype": torch.float64}),
]


@pytest.mark.parametrize("offset", [0, 1, 3])
@pytest.mark.parametrize("fn,kw", TRANSFORMS, ids=lambda v: v if isinstance(v, str) else None)
def test_transform_simulator_is_bit_identical_to_torch(fn, kw, offset):
    want = getattr(trnrand, fn)(1031, generator=G(offset), **kw)
    with kernel_ran("philox_transform_kernel"):
        got = getattr(trnrand, fn)(1031, generator=G(offset), **kw)
    assert got.dtype == want.dtype and torch.equal(got, want)


def test_bernoulli_and_randint_equal_the_integer_reference():
    n, off = 517, 6
    w = ref_words(off, n)
    with kernel_ran("philox_transform_kernel"):
        b = trnrand.bernoulli(n, p=0.7, dtype=torch.int64, generator=G(off))
    assert b.tolist() == (w < round(0.7 * 2**32)).astype(int).tolist()
    w2 = ref_words(off + 1, 2 * n).reshape(-1, 2)  # odd start word: the kernel's odd pairing
    with kernel_ran("philox_transform_kernel"):
        r = trnrand.randint(n, low=-7, high=1234567, generator=G(off + 1))
    want = [-7 + ((int(a) << 32 | int(c)) * 1234574 >> 64) for a, c in w2]
    assert r.tolist() == want


def test_exponential_equals_float64_reference():
    # float32 log of an exact u and one float32 product: within 2 ulp of the float64 value (rtol 3e-7)
    n = 389
    with kernel_ran("philox_transform_kernel"):
        e = trnrand.exponential(n, rate=0.75, generator=G(2))
    u = ((ref_words(2, n) >> 8) + 1) * 2.0**-24
    np.testing.assert_allclose(e.numpy(), -np.log(u) / 0.75, rtol=3e-7, atol=0)


def test_transform_partitions_on_the_simulator():
    # 3 ranks x 301 randints (2 words each, ranks start mid-block) equal the single-process torch draw of 903
    want = trnrand.randint(903, low=0, high=10, generator=G(1))
    with kernel_ran("philox_transform_kernel", "philox_transform_kernel", "philox_transform_kernel"):
        parts = [trnrand.randint(301, low=0, high=10, generator=G(1, partition_rank=r, partition_size=3))
                 for r in range(3)]
    assert torch.equal(torch.cat(parts), want)


@pytest.mark.parametrize("transform,param", [
    ("bernoulli", 123456789), ("exponential", -0.4), ("randint", 1000), ("randint", 1 << 32),
    ("randint", 0xFFFF0001), ("geometric", 1.0 / math.log1p(-0.2)),
    ("truncated_normal", (-2.0, 2.0, 2.0**-53 * 0.95, 0.0228, 0.0228 + 2.0**-53 * 0.95, 1.5, 0.25)),
])
@pytest.mark.parametrize("nblocks,odd", [(1, False), (389, False), (389, True)])
def test_transform_counters_equal_closed_form(transform, param, nblocks, odd):
    _, prof = nki.profile(philox_transform_kernel, seed=1, subsequence=2, block0=7, nblocks=nblocks,
                          transform=transform, param=param, odd=odd)
    assert_counts(prof, philox_transform_counts(transform, nblocks, param))


# ---- geometric: the same law, not the same bits (float64 log on torch; the device has fp32) ----------------
def _geometric_chi2(k, p, kmax=12):
    """Chi-square p-value of integer samples k >= 1 against Geometric(p) on bins 1..kmax-1 and >= kmax."""
    obs = np.array([np.sum(k == j) for j in range(1, kmax)] + [np.sum(k >= kmax)], dtype=float)
    probs = np.append(stats.geom.pmf(np.arange(1, kmax), p), stats.geom.sf(kmax - 1, p))
    return stats.chisquare(obs, probs * k.size).pvalue


def test_geometric_kernel_passes_the_torch_paths_chi_square():
    n, p = 20011, 0.2
    torch_k = trnrand.geometric(n, p=p, generator=G(1)).numpy()
    with kernel_ran("philox_transform_kernel"):
        dev_k = trnrand.geometric(n, p=p, generator=G(1)).numpy()
    assert dev_k.min() >= 1 and torch_k.min() >= 1
    # the same test on both paths; alpha 1e-3 (a fixed seed: deterministic, not flaky)
    assert _geometric_chi2(torch_k, p) > 1e-3 and _geometric_chi2(dev_k, p) > 1e-3
    assert _geometric_chi2(dev_k, 0.21) < 1e-3  # the test has the power to see a 5% change of p
    # and most samples agree exactly (the fp32 and float64 maps differ only near integer boundaries)
    assert np.mean(dev_k == torch_k) > 0.999


# ---- truncated normal: fp32 PPND7 quantile -- a few ulp from the torch path's float64 ndtri ---------------------
@pytest.mark.parametrize("kw", [
    {}, {"low": -math.inf, "high": math.inf}, {"low": 1.0, "high": 3.0, "mean": 2.0, "std": 0.5},
    {"low": -8.0, "high": -4.0}, {"low": 3.0, "high": math.inf},
], ids=["-2..2", "unbounded", "positive-interval", "lower-tail", "upper-tail"])
def test_truncated_normal_kernel_matches_torch_and_passes_its_ks_test(kw):
    n, off = 4099, 1
    want = trnrand.truncated_normal(n, generator=G(off), **kw)
    with kernel_ran("philox_transform_kernel"):
        got = trnrand.truncated_normal(n, generator=G(off), **kw)
    a, b = kw.get("low", -2.0), kw.get("high", 2.0)
    mean, std = kw.get("mean", 0.0), kw.get("std", 1.0)
    lo, hi = mean + a * std, mean + b * std
    assert bool(((got >= lo) & (got <= hi)).all())
    # the same uniform, PPND7 (~1e-7) in fp32 vs float64 ndtri rounded to fp32: 1e-6 relative (about 8 ulp)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)
    cdf = stats.truncnorm(a, b, loc=mean, scale=std).cdf
    assert stats.kstest(got.numpy(), cdf).pvalue > 1e-3 and stats.kstest(want.numpy(), cdf).pvalue > 1e-3


# ---- threshold counts: categorical and Poisson (lam < 10), bit for bit -------------------------------------
def _m53(w0, w1):
    return ((int(w0) >> 5) << 26) | (int(w1) >> 6)


@pytest.mark.parametrize("offset", [0, 1, 3])
@pytest.mark.parametrize("fn,args,kw", [
    ("poisson", (), {"lam": 0.5}),
    ("poisson", (), {"lam": 9.99, "dtype": torch.int32}),
    ("categorical", (torch.tensor([0.1, 0.0, 0.5, 0.4]),), {}),
    ("categorical", (torch.rand(40, generator=torch.Generator().manual_seed(1), dtype=torch.float64),), {}),
], ids=["poisson-0.5", "poisson-9.99", "categorical-4", "categorical-40"])
def test_threshold_simulator_is_bit_identical_to_torch(fn, args, kw, offset):
    want = getattr(trnrand, fn)(*args, 1031, generator=G(offset), **kw)
    with kernel_ran("discrete_kernel"):
        got = getattr(trnrand, fn)(*args, 1031, generator=G(offset), **kw)
    assert got.dtype == want.dtype and torch.equal(got, want)


def test_categorical_equals_numpy_searchsorted_of_the_reference_words():
    n, off = 301, 5  # odd start word: the odd pairing
    probs = np.array([0.05, 0.3, 0.0, 0.15, 0.5])
    with kernel_ran("discrete_kernel"):
        got = trnrand.categorical(torch.tensor(probs), n, generator=G(off))
    w = ref_words(off, 2 * n).reshape(-1, 2)
    u = np.array([_m53(a, b) for a, b in w], dtype=np.float64) * 2.0**-53
    cdf = np.cumsum(probs)
    want = np.minimum(np.searchsorted(cdf, u * cdf[-1], side="right"), len(probs) - 1)
    assert got.tolist() == want.tolist()


def test_poisson_equals_the_keyed_reference_search():
    # sample i keys philox4x32_10(counter 0, key = its two stream words); u from the first two words; then the
    # sequential search of the documented recurrence, in Python floats
    n, off, lam = 260, 2, 4.5
    with kernel_ran("discrete_kernel"):
        got = trnrand.poisson(n, lam=lam, dtype=torch.int64, generator=G(off))
    w = ref_words(off, 2 * n).reshape(-1, 2)
    want = []
    for a, b in w:
        x = ref_philox.philox4x32([0, 0, 0, 0], [int(a), int(b)])
        u = _m53(x[0], x[1]) * 2.0**-53
        k, p = 0, math.exp(-lam)
        c = p
        while u > c and k < 200:
            k += 1
            p = p * lam / k
            c += p
        want.append(k)
    assert got.tolist() == want
    assert abs(np.mean(want) - lam) < 4 * math.sqrt(lam / n)  # and it is Poisson-ish (4 sigma)


@pytest.mark.parametrize("keyed,th", [
    (False, ()), (False, ((5, 1), (1 << 40, 3), ((1 << 53) - 1, 1))), (True, ((123, 1), (1 << 52, 2))),
])
@pytest.mark.parametrize("nblocks,odd", [(1, False), (389, True)])
def test_threshold_counters_equal_closed_form(keyed, th, nblocks, odd):
    from trnrand.kernels.discrete import discrete_counts, discrete_kernel

    _, prof = nki.profile(discrete_kernel, seed=1, subsequence=2, block0=3, nblocks=nblocks,
                          thresholds=th, keyed=keyed, odd=odd)
    assert_counts(prof, discrete_counts(nblocks, th, keyed))


# ---- gamma: Marsaglia-Tsang in fp32, fixed rounds, the host finishes rejected samples --------------------------
@pytest.mark.parametrize("shape,scale", [(2.0, 1.0), (0.3, 2.0)])
def test_gamma_kernel_passes_the_torch_paths_ks_test(shape, scale):
    n = 8191
    want = trnrand.gamma(n, shape=shape, scale=scale, generator=G(1))
    with kernel_ran("gamma_kernel"):
        got = trnrand.gamma(n, shape=shape, scale=scale, generator=G(1))
    cdf = stats.gamma(shape, scale=scale).cdf
    assert stats.kstest(got.numpy(), cdf).pvalue > 1e-3 and stats.kstest(want.numpy(), cdf).pvalue > 1e-3
    assert stats.kstest(got.numpy(), stats.gamma(shape * 1.1, scale=scale).cdf).pvalue < 1e-3  # the test's power
    # the same attempt words: the fp32 and float64 tests accept the same attempt but for rounding (rtol 1e-5)
    assert torch.isclose(got, want, rtol=1e-5, atol=0).float().mean() > 0.999


def test_gamma_fallback_finishes_rejected_samples_with_the_torch_attempts(monkeypatch):
    # one round on the device: ~5% of samples are rejected there and finished by the torch path's attempts 1, 2, ..
    # which are the torch path's own attempts after the same rejection: those samples equal it (float64 -> fp32)
    from trnrand._nki import distributions as K

    monkeypatch.setattr(K, "GAMMA_ROUNDS", 1)
    n = 2053
    want = trnrand.gamma(n, shape=1.5, generator=G(3))
    with kernel_ran("gamma_kernel"):
        got = trnrand.gamma(n, shape=1.5, generator=G(3))
    assert bool((got > 0).all())
    assert torch.isclose(got, want, rtol=1e-5, atol=0).float().mean() > 0.999
    from trnrand.kernels.gamma import gamma_kernel

    raw = nki.run(gamma_kernel, seed=SEED, subsequence=SUB, block0=0, nblocks=(n + 3) // 2 + 1, shape=1.5, rounds=1,
                  odd=True).reshape(-1)[1:n + 1]
    assert 0 < int((raw < 0).sum()) < n // 5  # the fallback had work to do


@pytest.mark.parametrize("shape", [2.0, 0.3])
@pytest.mark.parametrize("nblocks,odd", [(1, False), (389, True)])
def test_gamma_counters_equal_closed_form(shape, nblocks, odd):
    from trnrand.kernels.discrete import keyed_counts
    from trnrand.kernels.gamma import gamma_counts, gamma_kernel

    assert keyed_counts(lanes=4) == (198, 198) and keyed_counts(lanes=2) == (188, 187)  # the docstring's K4, K2
    _, prof = nki.profile(gamma_kernel, seed=1, subsequence=2, block0=3, nblocks=nblocks, shape=shape, rounds=2,
                          odd=odd)
    assert_counts(prof, gamma_counts(nblocks, shape, 2))
    _, prof = nki.profile(gamma_kernel, seed=1, subsequence=2, block0=3, nblocks=nblocks, shape=shape, rounds=2,
                          odd=odd, student_df=2 * shape)
    assert_counts(prof, gamma_counts(nblocks, shape, 2, student=True))


def test_beta_from_two_device_gammas_passes_the_torch_paths_ks_test():
    n, a, b = 4099, 2.0, 0.5
    want = trnrand.beta(n, alpha=a, beta=b, generator=G(2))
    with kernel_ran("gamma_kernel", "gamma_kernel"):
        got = trnrand.beta(n, alpha=a, beta=b, generator=G(2))
    cdf = stats.beta(a, b).cdf
    assert bool(((got >= 0) & (got <= 1)).all())
    assert stats.kstest(got.numpy(), cdf).pvalue > 1e-3 and stats.kstest(want.numpy(), cdf).pvalue > 1e-3
    assert torch.isclose(got, want, rtol=1e-5, atol=1e-7).float().mean() > 0.998  # both gammas keyed alike


@pytest.mark.parametrize("df", [3.0, 0.8])
def test_student_t_kernel_passes_the_torch_paths_ks_test(df, monkeypatch):
    from trnrand._nki import distributions as K

    monkeypatch.setattr(K, "GAMMA_ROUNDS", 2)  # a few samples left for the host: the fallback runs too
    n = 4099
    want = trnrand.student_t(n, df=df, generator=G(1))
    with kernel_ran("gamma_kernel"):
        got = trnrand.student_t(n, df=df, generator=G(1))
    assert bool(torch.isfinite(got).all())
    cdf = stats.t(df).cdf
    assert stats.kstest(got.numpy(), cdf).pvalue > 1e-3 and stats.kstest(want.numpy(), cdf).pvalue > 1e-3
    assert torch.isclose(got, want, rtol=1e-5, atol=1e-6).float().mean() > 0.998


# ---- Poisson lam >= 10: PTRS in fp32, fixed rounds, the host finishes rejected samples -------------------------
def _poisson_chi2(k, lam, bins=20):
    """Chi-square p-value of integer samples against Poisson(lam) on ~equal-probability bins."""
    cuts = np.unique(stats.poisson.ppf(np.linspace(0, 1, bins + 1)[1:-1], lam))
    obs = np.bincount(np.searchsorted(cuts, k, side="left"), minlength=len(cuts) + 1)
    probs = np.diff(np.concatenate([[0.0], stats.poisson.cdf(cuts, lam), [1.0]]))
    return stats.chisquare(obs, probs * k.size).pvalue


@pytest.mark.parametrize("lam", [10.0, 1000.0, 60000.0])
def test_ptrs_kernel_passes_the_torch_paths_chi_square(lam, monkeypatch):
    from trnrand._nki import distributions as K

    monkeypatch.setattr(K, "PTRS_ROUNDS", 2)  # leaves 1-6% for the host: the fallback runs too
    n = 8191
    want = trnrand.poisson(n, lam=lam, dtype=torch.int64, generator=G(1)).numpy()
    with kernel_ran("poisson_kernel"):
        got = trnrand.poisson(n, lam=lam, dtype=torch.int64, generator=G(1)).numpy()
    assert got.min() >= 0
    assert _poisson_chi2(got, lam) > 1e-3 and _poisson_chi2(want, lam) > 1e-3
    assert _poisson_chi2(got, lam * 1.01 if lam > 100 else lam * 1.1) < 1e-3  # the test's power
    assert np.mean(got == want) > 0.99  # the same attempt words: decisions differ only at the boundary


@pytest.mark.parametrize("nblocks,odd", [(1, False), (389, True)])
def test_ptrs_counters_equal_closed_form(nblocks, odd):
    from trnrand.distributions import _ptrs_constants
    from trnrand.kernels.poisson import poisson_counts, poisson_kernel

    a, b, ia, vr = _ptrs_constants(25.0)
    _, prof = nki.profile(poisson_kernel, seed=1, subsequence=2, block0=3, nblocks=nblocks, lam=25.0, a=a, b=b,
                          invalpha=ia, vr=vr, rounds=3, odd=odd)
    assert_counts(prof, poisson_counts(nblocks, 3))


# ---- halton: exact digits, fp32 sums -------------------------------------------------------------------------
@pytest.mark.parametrize("n,d,skip", [(1031, 5, 0), (300, 130, 7), (20000, 3, 1)])
def test_halton_kernel_is_within_ulps_of_scipy_and_torch(n, d, skip):
    import warnings

    from scipy.stats import qmc

    want = trnrand.halton(n, d, skip=skip)
    with kernel_ran("halton_kernel"):
        got = trnrand.halton(n, d, skip=skip)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # SciPy warns when n is not a power of 2
        ref = qmc.Halton(d, scramble=False).random(skip + n)[skip:]
    # up to L = 15 fp32 roundings of terms < 1 vs one: measured 2.3 ulp of 1 (2**-24 each); a wrong digit is >= 1/p**L
    assert got.dtype == torch.float32 and got.shape == (n, d)
    assert np.abs(got.numpy() - ref).max() <= 4 * 2.0**-24
    assert (got.double() - want.double()).abs().max() <= 4 * 2.0**-24


@pytest.mark.parametrize("n,d,skip", [(37, 3, 0), (600, 130, 5)])
def test_halton_counters_equal_closed_form(n, d, skip):
    from trnrand._nki.quasi import _halton_inputs
    from trnrand.kernels.halton import halton_counts, halton_kernel
    from trnrand.quasi import _first_primes

    radix, scale = _halton_inputs(torch.tensor(_first_primes(d)), skip, n)
    _, prof = nki.profile(halton_kernel, radix, scale, skip=skip, n=n)
    assert_counts(prof, halton_counts(d, n, skip))


# ---- binomial, n min(p, 1-p) < 30: the inversion as exact thresholds ------------------------------------------
@pytest.mark.parametrize("offset", [0, 1])
@pytest.mark.parametrize("trials,p", [(10, 0.3), (100, 0.2), (7, 0.9), (1000, 0.02)])
def test_binomial_inversion_simulator_is_bit_identical_to_torch(trials, p, offset):
    want = trnrand.binomial(1031, n=trials, p=p, generator=G(offset))
    with kernel_ran("discrete_kernel"):
        got = trnrand.binomial(1031, n=trials, p=p, generator=G(offset))
    assert got.dtype == want.dtype and torch.equal(got, want)


def test_binomial_equals_the_keyed_reference_search():
    # the documented inversion in Python floats on the reference words (u from the key's block 0), flipped for p > 1/2
    n, off, trials, p = 203, 3, 12, 0.65
    with kernel_ran("discrete_kernel"):
        got = trnrand.binomial(n, n=trials, p=p, generator=G(off))
    pp, q = 1 - p, p
    s, want = pp / q, []
    aa = (trials + 1) * s
    for a, b in ref_words(off, 2 * n).reshape(-1, 2):
        x = ref_philox.philox4x32([0, 0, 0, 0], [int(a), int(b)])
        u, r, k = _m53(x[0], x[1]) * 2.0**-53, q**trials, 0
        active = u > r
        while active:
            u -= r
            k += 1
            r *= aa / k - s
            active = u > r and k < trials
        want.append(trials - k)
    assert got.tolist() == want


# ---- latin hypercube (strength 1): exact ranks, fp32 positions ------------------------------------------------
@pytest.mark.parametrize("n,d,off", [(37, 3, 0), (600, 2, 8), (130, 5, 4)])
def test_lhs_kernel_equals_the_reference_strata(n, d, off):
    # reference: per element one block of the reference stream; the stable rank of the 63-bit keys, (rank + u) / n
    want = trnrand.latin_hypercube(n, d, generator=G(off))
    with kernel_ran("lhs_kernel"):
        got = trnrand.latin_hypercube(n, d, generator=G(off))
    w = ref_words(off, 4 * n * d).reshape(n, d, 4)
    key = (w[..., 0] >> 1) * 2**32 + w[..., 1]
    rank = np.argsort(np.argsort(key, axis=0, kind="stable"), axis=0, kind="stable")
    u = np.array([[_m53(a, b) for a, b in zip(row[:, 2], row[:, 3])] for row in w]) * 2.0**-53
    ref = (rank + u) / n
    # fp32 position (rank + u) fl32(1/n) vs the float64 value: measured 2 ulp of 1; a wrong stratum is off by 1/n
    assert got.dtype == torch.float32 and np.abs(got.numpy() - ref).max() <= 4 * 2.0**-24
    assert (got.double() - want.double()).abs().max() <= 4 * 2.0**-24
    assert all(sorted(rank[:, k]) == list(range(n)) for k in range(d))


@pytest.mark.parametrize("n,d", [(37, 3), (600, 2)])
def test_lhs_counters_equal_closed_form(n, d):
    from trnrand.kernels.lhs import lhs_counts, lhs_kernel

    _, prof = nki.profile(lhs_kernel, seed=5, subsequence=1, block0=2, n=n, d=d)
    assert_counts(prof, lhs_counts(n, d))


# ---- multinomial with replacement: one categorical threshold run per row -----------------------------------
def test_multinomial_with_replacement_is_bit_identical_to_torch():
    probs = torch.rand(3, 9, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    probs[1, 4] = 0.0
    want = trnrand.multinomial(probs, 301, replacement=True, generator=G(1))
    with kernel_ran(*["discrete_kernel"] * 3):
        got = trnrand.multinomial(probs, 301, replacement=True, generator=G(1))
    assert got.shape == (3, 301) and torch.equal(got, want)
    assert not bool((got[1] == 4).any())  # the zero-probability category is never drawn
