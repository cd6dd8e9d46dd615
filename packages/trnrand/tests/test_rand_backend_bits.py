"""Issue 32: every distribution gives the same bits on the kernel path and on the torch path.

The reference is the other backend: each draw is made under the default backend (torch) and under
"simulator" (the NKI kernel through the emulator, which must run), from the same seed and offset, and the
tensors must be equal bit for bit (NaN where both are NaN). Offsets 0, 1, 3 put a draw's first word in
every lane and both word pairings; 1031 samples span more than 128 Philox blocks. The fp32 algorithms'
laws are tested against scipy.stats in test_rand_kernels_transform.py and test_rand_distributions.py;
here, in addition, the torch path's fp32 gamma and PTRS Poisson pass their KS / chi-square tests, since
both backends now share those bits.
"""

import numpy as np
import pytest
import torch
from scipy import stats

import trnrand
from trnrand import fp32
from trnsci.testing import kernel_ran

SEED, SUB = 0x0123456789ABCDEF, 5


def G(offset=0):
    return trnrand.Generator(seed=SEED, subsequence=SUB, offset=offset)


# (function, args, kwargs): every public distribution with a kernel, in each regime the kernel serves
CASES = [
    ("uniform", (), {}),
    ("uniform", (), {"low": -2.0, "high": 3.0, "dtype": torch.float64}),
    ("normal", (), {"mean": 1.0, "std": 2.0}),
    ("standard_normal", (), {}),
    ("lognormal", (), {"mean": 0.1, "std": 0.5}),
    ("exponential", (), {"rate": 2.5}),
    ("bernoulli", (), {"p": 0.3}),
    ("randint", (), {"low": -5, "high": 1000}),
    ("geometric", (), {"p": 0.2}),
    ("geometric", (), {"p": 0.001, "dtype": torch.int64}),
    ("truncated_normal", (), {"mean": 0.5, "std": 1.5, "low": -2.0, "high": 1.0}),
    ("truncated_normal", (), {"low": 1.0, "high": 3.0}),  # mirrored interval
    ("gamma", (), {"shape": 1.5, "scale": 2.0}),
    ("gamma", (), {"shape": 0.3}),  # boosted by U**(1/shape)
    ("beta", (), {"alpha": 0.7, "beta": 2.5}),
    ("chi_squared", (), {"df": 5.0}),
    ("student_t", (), {"df": 3.0}),
    ("poisson", (), {"lam": 4.0}),  # inversion thresholds
    ("poisson", (), {"lam": 25.0}),  # PTRS
    ("poisson", (), {"lam": 1e4, "dtype": torch.int64}),
    ("binomial", (), {"n": 20, "p": 0.3}),
    ("categorical", (torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64),), {}),
]


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.is_floating_point():
        return bool(((a == b) | (a.isnan() & b.isnan())).all())
    return torch.equal(a, b)


@pytest.mark.simulator
@pytest.mark.parametrize("offset", [0, 1, 3])
@pytest.mark.parametrize("fn,args,kw", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_every_distribution_is_bit_identical_across_backends(fn, args, kw, offset):
    f = getattr(trnrand, fn)
    want = f(*args, 1031, generator=G(offset), **kw)
    with kernel_ran():
        got = f(*args, 1031, generator=G(offset), **kw)
    assert _same(got, want), f"{int((got != want).sum())} of 1031 samples differ"


@pytest.mark.simulator
def test_multinomial_with_replacement_is_bit_identical_across_backends():
    p = torch.tensor([[0.1, 0.5, 0.4], [0.3, 0.3, 0.4]], dtype=torch.float64)
    want = trnrand.multinomial(p, 517, replacement=True, generator=G(2))
    with kernel_ran():
        got = trnrand.multinomial(p, 517, replacement=True, generator=G(2))
    assert torch.equal(got, want)


@pytest.mark.simulator
def test_rejected_samples_are_finished_alike(monkeypatch):
    # one fp32 round only: many samples go to the float64 attempts on both paths, which must agree too
    monkeypatch.setattr(fp32, "GAMMA_ROUNDS", 1)
    monkeypatch.setattr("trnrand._nki.distributions.GAMMA_ROUNDS", 1)
    monkeypatch.setattr(fp32, "PTRS_ROUNDS", 1)
    monkeypatch.setattr("trnrand._nki.distributions.PTRS_ROUNDS", 1)
    for fn, kw in (("gamma", {"shape": 0.4}), ("student_t", {"df": 2.5}), ("poisson", {"lam": 12.0})):
        want = getattr(trnrand, fn)(777, generator=G(1), **kw)
        with kernel_ran():
            got = getattr(trnrand, fn)(777, generator=G(1), **kw)
        assert _same(got, want), fn


def test_torch_paths_fp32_gamma_and_ptrs_follow_their_laws():
    # KS against scipy.stats (p > 1e-3 at 20000 samples), with the test's power shown on a 5% change of shape
    x = trnrand.gamma(20000, shape=2.5, generator=G(4)).numpy()
    assert stats.kstest(x, stats.gamma(2.5).cdf).pvalue > 1e-3
    assert stats.kstest(x, stats.gamma(2.5 * 1.05).cdf).pvalue < 1e-3
    k = trnrand.poisson(20000, lam=40.0, dtype=torch.int64, generator=G(5)).numpy()
    cuts = np.arange(25, 57)
    obs = np.array([(k < cuts[0]).sum(), *[(k == c).sum() for c in cuts[:-1]], (k >= cuts[-1]).sum()])
    pmf = np.array([stats.poisson.cdf(cuts[0] - 1, 40.0), *stats.poisson.pmf(cuts[:-1], 40.0),
                    stats.poisson.sf(cuts[-1] - 1, 40.0)])
    assert stats.chisquare(obs, pmf * len(k)).pvalue > 1e-3


def test_float64_draws_keep_the_float64_algorithms():
    # float64 has no kernel (no fp64 engine): its gamma is the float64 Marsaglia-Tsang, whose values agree with
    # the fp32 one's to fp32 precision wherever both accept the same attempt (most samples)
    a = trnrand.gamma(4000, shape=1.5, dtype=torch.float64, generator=G(6))
    b = trnrand.gamma(4000, shape=1.5, dtype=torch.float32, generator=G(6)).to(torch.float64)
    close = torch.isclose(a, b, rtol=2e-6, atol=0).float().mean()
    assert close > 0.99 and not torch.equal(a.to(torch.float32).to(torch.float64), b)
