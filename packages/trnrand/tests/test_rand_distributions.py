"""Distributions against scipy.stats with fixed seeds.

Power: with n = 20000 samples, a KS test at p > 1e-3 rejects any sampler whose
CDF is off by more than 1.95/sqrt(n) = 0.014 anywhere (e.g. a mean shift of
0.035 sd for a normal); chi-square tests on <= 30 cells at p > 1e-3 reject a
cell probability off by ~10% relative for cells with >= 100 expected counts.
Fixed seeds make the tests deterministic (no flakes); p > 1e-3 leaves margin.
"""

import numpy as np
import pytest
import scipy.stats as st
import torch

import trnrand

N = 20000
ALPHA = 1e-3


def G(seed=1):
    return trnrand.Generator(seed=seed)


CONT = [
    ("uniform", {"low": -2.0, "high": 3.0}, st.uniform(loc=-2, scale=5).cdf),
    ("normal", {"mean": 1.0, "std": 2.0}, st.norm(1, 2).cdf),
    ("lognormal", {"mean": 0.5, "std": 0.5}, st.lognorm(s=0.5, scale=np.exp(0.5)).cdf),
    ("exponential", {"rate": 2.0}, st.expon(scale=0.5).cdf),
    ("gamma", {"shape": 0.3, "scale": 2.0}, st.gamma(0.3, scale=2.0).cdf),
    ("gamma", {"shape": 4.5}, st.gamma(4.5).cdf),
    ("beta", {"alpha": 2.0, "beta": 0.7}, st.beta(2.0, 0.7).cdf),
    ("chi_squared", {"df": 3.0}, st.chi2(3).cdf),
    ("student_t", {"df": 2.5}, st.t(2.5).cdf),
    ("truncated_normal", {"low": -1.0, "high": 2.5}, st.truncnorm(-1.0, 2.5).cdf),
    ("truncated_normal", {"low": 3.0, "high": 8.0}, st.truncnorm(3.0, 8.0).cdf),
]


@pytest.mark.parametrize("name,kw,cdf", CONT, ids=[f"{c[0]}-{i}" for i, c in enumerate(CONT)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_continuous_ks(name, kw, cdf, dtype):
    x = getattr(trnrand, name)(N, dtype=dtype, generator=G(4), **kw).double().numpy()
    assert x.dtype == np.float64 and np.isfinite(x).all()
    assert st.kstest(x, cdf).pvalue > ALPHA


def test_normal_tails_and_box_muller_pairs():
    z = trnrand.normal(2 * N, dtype=torch.float64, generator=G(2)).numpy()
    # both members of each pair are N(0,1) and uncorrelated (|r| < 5/sqrt(n) = 0.05 for n=N pairs)
    assert st.kstest(z[0::2], "norm").pvalue > ALPHA and st.kstest(z[1::2], "norm").pvalue > ALPHA
    assert abs(np.corrcoef(z[0::2], z[1::2])[0, 1]) < 5 / np.sqrt(N)


def _chi2_discrete(x, pmf, support):
    x = np.asarray(x).astype(np.int64)
    obs = np.array([(x == k).sum() for k in support], dtype=float)
    exp = np.array([pmf(k) for k in support]) * len(x)
    keep = exp >= 5
    obs_tail = len(x) - obs[keep].sum()
    exp_tail = len(x) - exp[keep].sum()
    o = np.append(obs[keep], obs_tail)
    e = np.append(exp[keep], exp_tail)
    if e[-1] < 5:  # fold a small remainder into the last kept cell
        o[-2] += o[-1]
        e[-2] += e[-1]
        o, e = o[:-1], e[:-1]
    return st.chisquare(o, e).pvalue


DISC = [
    ("poisson", {"lam": 0.4}, st.poisson(0.4).pmf, range(0, 10)),
    ("poisson", {"lam": 6.0}, st.poisson(6.0).pmf, range(0, 30)),
    ("poisson", {"lam": 40.0}, st.poisson(40.0).pmf, range(0, 90)),
    ("poisson", {"lam": 1e5}, None, None),
    ("binomial", {"n": 12, "p": 0.3}, st.binom(12, 0.3).pmf, range(0, 13)),
    ("binomial", {"n": 500, "p": 0.8}, st.binom(500, 0.8).pmf, range(300, 501)),
    ("geometric", {"p": 0.2}, st.geom(0.2).pmf, range(1, 60)),
    ("bernoulli", {"p": 0.3}, st.bernoulli(0.3).pmf, range(0, 2)),
    ("randint", {"low": -3, "high": 7}, st.randint(-3, 7).pmf, range(-3, 7)),
]


@pytest.mark.parametrize("name,kw,pmf,support", DISC, ids=[f"{c[0]}-{i}" for i, c in enumerate(DISC)])
def test_discrete_chi_square(name, kw, pmf, support):
    x = getattr(trnrand, name)(N, generator=G(6), **kw).numpy()
    if pmf is None:  # huge lam: moments (sd of the sample mean is sqrt(lam/N) = 2.2; 5 sd)
        assert abs(x.mean() - 1e5) < 5 * np.sqrt(1e5 / N)
        assert abs(x.var() / 1e5 - 1) < 5 * np.sqrt(2 / N)
        return
    assert _chi2_discrete(x, pmf, support) > ALPHA


def test_categorical_and_multinomial():
    p = torch.tensor([0.1, 0.0, 0.5, 0.4], dtype=torch.float64)
    x = trnrand.categorical(p * 3, N, generator=G(1)).numpy()
    assert _chi2_discrete(x, lambda k: p.numpy()[k], range(4)) > ALPHA
    m = trnrand.multinomial(p, N, replacement=True, generator=G(2)).numpy()
    assert _chi2_discrete(m, lambda k: p.numpy()[k], range(4)) > ALPHA
    # without replacement: first pick ~ p; the k picks are distinct and never the zero-probability category
    rows = torch.stack([p] * 4000)
    w = trnrand.multinomial(rows, 3, generator=G(3)).numpy()
    assert all(len(set(r)) == 3 and 1 not in r for r in w)
    assert _chi2_discrete(w[:, 0], lambda k: p.numpy()[k], range(4)) > ALPHA


def test_randperm_is_uniform_permutation():
    n = 5
    perms = [tuple(trnrand.randperm(n, generator=G(s)).tolist()) for s in range(2400)]
    assert all(sorted(q) == list(range(n)) for q in perms)
    # position of element 0 is uniform on 5 cells (chi-square, 480 expected each)
    pos = np.array([q.index(0) for q in perms])
    assert st.chisquare(np.bincount(pos, minlength=n)).pvalue > ALPHA


def test_into_variants_match_and_keep_buffer():
    b = torch.empty(3, 4, dtype=torch.float64)
    ptr = b.data_ptr()
    out = trnrand.normal_into(b, mean=2.0, generator=G(5))
    assert out is b and b.data_ptr() == ptr
    assert torch.equal(b, trnrand.normal(3, 4, mean=2.0, dtype=torch.float64, generator=G(5)))
    assert torch.equal(trnrand.uniform_into(torch.empty(7), generator=G(5)), trnrand.uniform(7, generator=G(5)))
    assert torch.equal(trnrand.exponential_into(torch.empty(7), generator=G(5)), trnrand.exponential(7, generator=G(5)))


def test_uniform_never_reaches_high_and_exponential_finite():
    x = trnrand.uniform(N, low=1.0, high=1.0 + 2**-20, generator=G(1))  # coarse float32 grid: rounding hits high
    assert bool((x < 1.0 + 2**-20).all()) and bool((x >= 1.0).all())
    e = trnrand.exponential(N, generator=G(2))
    assert bool(torch.isfinite(e).all()) and bool((e >= 0).all()) and not bool(torch.signbit(e).any())


def test_size_forms_and_empty():
    assert trnrand.uniform((2, 3), generator=G()).shape == (2, 3)
    assert trnrand.normal(0, generator=G()).shape == (0,)
    assert trnrand.uniform(generator=G()).shape == ()
