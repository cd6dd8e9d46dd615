"""Sobol', Halton and Latin hypercube against scipy.stats.qmc."""

import warnings

import numpy as np
import pytest
import scipy.stats.qmc as qmc
import torch

import trnrand


def _scipy(engine, n):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SciPy's "n should be a power of 2" note
        return engine.random(n)


@pytest.mark.parametrize("d,n", [(1, 300), (2, 1025), (7, 513), (1111, 130), (21201, 9)])
def test_sobol_unscrambled_bit_exact(d, n):
    got = trnrand.sobol(n, d, scramble=False, dtype=torch.float64).numpy()
    assert np.array_equal(got, _scipy(qmc.Sobol(d, scramble=False), n))


def test_sobol_skip_and_float32():
    ref = _scipy(qmc.Sobol(5, scramble=False), 700)
    got = trnrand.sobol(200, 5, scramble=False, dtype=torch.float64, skip=500).numpy()
    assert np.array_equal(got, ref[500:])
    f = trnrand.sobol(700, 5, scramble=False).numpy()
    # float32 keeps the top 24 of 30 bits (truncated): exactly floor(x 2**24) 2**-24
    assert np.array_equal(f.astype(np.float64), np.floor(ref * 2**24) / 2**24)


@pytest.mark.parametrize("n,d,skip", [(1, 3, 0), (2, 3, 5), (3, 2, 2**24 + 12345), (37, 4, 2**25 - 37),
                                      (1000, 3, 2**20 - 3), (5, 9000, 3)])
def test_sobol_split_tables_equal_scipy_fast_forward(n, d, skip):
    # the points come from two tables and a recursion on the index bits (quasi._index_rows): every level,
    # the 1-2 row base case, far skips and a row of more than 2**15 values, against SciPy's per-point loop
    eng = qmc.Sobol(d, scramble=False)
    if skip:  # (SciPy 1.x rejects fast_forward(0))
        eng.fast_forward(skip)
    ref = _scipy(eng, n)
    assert np.array_equal(trnrand.sobol(n, d, scramble=False, dtype=torch.float64, skip=skip).numpy(), ref)
    f = trnrand.sobol(n, d, scramble=False, skip=skip).numpy()
    assert np.array_equal(f.astype(np.float64), np.floor(ref * 2**24) / 2**24)


def test_sobol_scrambled_discrepancy_vs_scipy():
    n, d = 1024, 6
    ours = [qmc.discrepancy(trnrand.sobol(n, d, seed=s, dtype=torch.float64).numpy()) for s in range(4)]
    theirs = [qmc.discrepancy(qmc.Sobol(d, seed=s).random(n)) for s in range(4)]
    iid = qmc.discrepancy(np.random.default_rng(0).random((n, d)))
    # same order of magnitude as SciPy's LMS+shift, and far below i.i.d. points
    assert 0.3 < np.mean(ours) / np.mean(theirs) < 3.0
    assert max(ours) < iid / 10
    # reproducible per seed, different across seeds, still a (0, m, d)-net: one point per dyadic interval in dim 0
    a = trnrand.sobol(64, d, seed=3, dtype=torch.float64)
    assert torch.equal(a, trnrand.sobol(64, d, seed=3, dtype=torch.float64))
    assert not torch.equal(a, trnrand.sobol(64, d, seed=4, dtype=torch.float64))
    assert sorted(np.floor(a[:, 2].numpy() * 64).astype(int).tolist()) == list(range(64))


@pytest.mark.parametrize("d,n", [(1, 100), (5, 2000), (40, 257)])
def test_halton_unscrambled_bit_exact(d, n):
    got = trnrand.halton(n, d, dtype=torch.float64).numpy()
    assert np.array_equal(got, _scipy(qmc.Halton(d, scramble=False), n))
    assert np.array_equal(trnrand.halton(n - 10, d, dtype=torch.float64, skip=10).numpy(), got[10:])


def test_halton_block_sums_equal_scipy():
    # points past ~256 come from a table of partial sums plus one term per block and level
    # (quasi._radical_inverse, two levels of recursion here); SciPy's per-point loop is the reference
    eng = qmc.Halton(2, scramble=False)
    eng.fast_forward(12345)
    assert np.array_equal(trnrand.halton(70000, 2, dtype=torch.float64, skip=12345).numpy(), _scipy(eng, 70000))
    # far indices (SciPy's fast_forward would generate them): SciPy's sum order on Python ints
    skip = 2**40 + 3
    x = trnrand.halton(3000, 3, dtype=torch.float64, skip=skip).numpy()
    want = [[_radical_inverse(i, b) for b in (2, 3, 5)] for i in range(skip, skip + 3000)]
    assert np.array_equal(x, np.array(want))


def test_halton_scrambled_block_sums_equal_the_per_point_loop():
    # scrambled: the same table/block split, against the per-point sum of permuted digits on Python ints
    from trnrand import quasi

    n, skip = 700, 10**6 + 7
    x = trnrand.halton(n, 2, scramble=True, seed=5, dtype=torch.float64, skip=skip).numpy()
    g = quasi._seed_generator(5, "t")
    perms = quasi._halton_perms(g, torch.tensor([2, 3]), 2).numpy()
    for c, base in enumerate((2, 3)):
        want = []
        for i in range(skip, skip + n):
            acc, b2r, lev = 0.0, 1.0 / base, 0
            while lev < perms.shape[1]:
                i, dig = divmod(i, base)
                acc += int(perms[c, lev, dig]) * b2r
                b2r /= base
                lev += 1
                if b2r < 2.0**-54:
                    break
            want.append(acc)
        assert np.array_equal(x[:, c], np.array(want))


def test_halton_scrambled():
    n, d = 1000, 4
    x = trnrand.halton(n, d, scramble=True, seed=1, dtype=torch.float64).numpy()
    assert ((x >= 0) & (x < 1)).all()
    ours = qmc.discrepancy(x)
    theirs = qmc.discrepancy(qmc.Halton(d, seed=1).random(n))
    assert 0.3 < ours / theirs < 3.0
    # digit scrambling keeps the stratification: 2**k consecutive points fill the 2**k dyadic cells of dim 0
    assert sorted(np.floor(x[:512, 0] * 512).astype(int).tolist()) == list(range(512))


def test_latin_hypercube_strength_1_and_2():
    x = trnrand.latin_hypercube(50, 4, generator=trnrand.Generator(seed=1), dtype=torch.float64).numpy()
    for c in range(4):
        assert sorted(np.floor(x[:, c] * 50).astype(int).tolist()) == list(range(50))
    p = 7
    y = trnrand.latin_hypercube(p * p, 8, strength=2, generator=trnrand.Generator(seed=2)).numpy()
    assert ((y >= 0) & (y < 1)).all()
    for c in range(8):
        assert sorted(np.floor(y[:, c] * p * p).astype(int).tolist()) == list(range(p * p))
    cells = np.floor(y * p).astype(int)
    for i in range(8):
        for j in range(i):
            assert len(set(zip(cells[:, i], cells[:, j]))) == p * p  # each p x p cell of every 2-D projection once
    with pytest.raises(ValueError, match="prime"):
        trnrand.latin_hypercube(36, 3, strength=2)
    with pytest.raises(ValueError, match="n_dims"):
        trnrand.latin_hypercube(25, 7, strength=2)


def test_shipped_joe_kuo_table_equals_scipys():
    # trnrand ships its own bit-packed copy of new-joe-kuo-6.21201; SciPy's npz is the independent reference
    import os

    import scipy.stats

    from trnrand import _joe_kuo

    with np.load(os.path.join(os.path.dirname(scipy.stats.__file__), "_sobol_direction_numbers.npz")) as z:
        poly, vinit = z["poly"].astype(np.int64), z["vinit"].astype(np.int64)
    got_poly, got_vinit = _joe_kuo.table()
    assert got_poly.shape == (21201,) and np.array_equal(got_poly, poly) and np.array_equal(got_vinit, vinit)
    with open(_joe_kuo.PATH, "rb") as f:  # and the encoder reproduces the shipped bytes
        assert _joe_kuo.encode(poly, vinit) == f.read()
    p, v = _joe_kuo.table(1111)  # a prefix decodes alone
    assert np.array_equal(p, poly[:1111]) and np.array_equal(v, vinit[:1111])


def test_sobol_needs_no_scipy(monkeypatch):
    import sys

    from trnrand import quasi

    quasi._direction_numbers.cache_clear()
    monkeypatch.setitem(sys.modules, "scipy", None)  # any scipy import now fails
    monkeypatch.setitem(sys.modules, "scipy.stats", None)
    x = trnrand.sobol(4, 2, scramble=False, dtype=torch.float64)
    assert x.tolist() == [[0.0, 0.0], [0.5, 0.5], [0.75, 0.25], [0.25, 0.75]]
    quasi._direction_numbers.cache_clear()


def _radical_inverse(i: int, base: int) -> float:
    """SciPy's van der Corput sum order (x += digit * b2r; b2r /= base) on Python integers."""
    x, b2r = 0.0, 1.0 / base
    while i:
        i, dig = divmod(i, base)
        x += dig * b2r
        b2r /= base
    return x


@pytest.mark.parametrize("n", [600, 601])  # skip + n = 2**50 (float64 digits) and one past (int64 digits)
def test_halton_digits_exact_up_to_the_float64_limit(n):
    skip = (1 << 50) - 600
    got = trnrand.halton(n, 3, dtype=torch.float64, skip=skip).numpy()
    for j in (0, 1, n // 2, n - 2, n - 1):
        assert [float(v) for v in got[j]] == [_radical_inverse(skip + j, b) for b in (2, 3, 5)]
