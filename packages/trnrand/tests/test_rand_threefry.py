"""Threefry4x32: Random123 known answers, the stream on torch and on the kernels, counters.

References independent of the code under test: Random123's kat_vectors for threefry4x32 at 13, 20
and 72 rounds, and a scalar Threefry written below from the SC'11 paper / Random123's
specification (plain Python ints), itself pinned to those vectors. Sizes are small and ragged.
"""

import numpy as np
import pytest
import torch

import trnrand
from trnrand.kernels.threefry import (
    SBUF_TILES,
    threefry_counts,
    threefry_kernel,
)
from trnrand.kernels.threefry_block import threefry_block_counts
from trnsci import nki
from trnsci.dispatch import plan_call
from trnsci.testing import assert_counts, assert_plan_matches_run, kernel_ran

MASK = 0xFFFFFFFF
PI_CTR = (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344)
PI_KEY = (0xA4093822, 0x299F31D0, 0x082EFA98, 0xEC4E6C89)
# Random123 kat_vectors, threefry4x32_R: (R, counter, key, expected)
KAT = [
    (13, (0,) * 4, (0,) * 4, (0x531C7E4F, 0x39491EE5, 0x2C855A92, 0x3D6ABF9A)),
    (13, (MASK,) * 4, (MASK,) * 4, (0xC4189358, 0x1C9CC83A, 0xD5881C67, 0x6A0A89E0)),
    (13, PI_CTR, PI_KEY, (0x4AA71D8F, 0x734738C2, 0x431FC6A8, 0xAE6DEBF1)),
    (20, (0,) * 4, (0,) * 4, (0x9C6CA96A, 0xE17EAE66, 0xFC10ECD4, 0x5256A7D8)),
    (20, (MASK,) * 4, (MASK,) * 4, (0x2A881696, 0x57012287, 0xF6C7446E, 0xA16A6732)),
    (20, PI_CTR, PI_KEY, (0x59CD1DBB, 0xB8879579, 0x86B5D00C, 0xAC8B6D84)),
    (72, (0,) * 4, (0,) * 4, (0x93171DA6, 0x9220326D, 0xB392B7B1, 0xFF58A002)),
    (72, (MASK,) * 4, (MASK,) * 4, (0x60743F3D, 0x9961E684, 0xAAB21C34, 0x8C65FB7D)),
    (72, PI_CTR, PI_KEY, (0x09930ADF, 0x7F27BD55, 0x9ED68CE1, 0x97F803F6)),
]
R_4x32 = [(10, 26), (11, 21), (13, 27), (23, 5), (6, 20), (17, 11), (25, 10), (18, 20)]


def ref_threefry(ctr, key, rounds=20):
    """Scalar Threefry4x32 from the specification."""
    x = list(ctr)
    ks = list(key) + [key[0] ^ key[1] ^ key[2] ^ key[3] ^ 0x1BD11BDA]
    for i in range(4):
        x[i] = (x[i] + ks[i]) & MASK
    for r in range(rounds):
        pairs = ((0, 1), (2, 3)) if r % 2 == 0 else ((0, 3), (2, 1))
        for (a, b), rot in zip(pairs, R_4x32[r % 8]):
            x[a] = (x[a] + x[b]) & MASK
            x[b] = (((x[b] << rot) | (x[b] >> (32 - rot))) & MASK) ^ x[a]
        if r % 4 == 3:
            s = (r + 1) // 4
            for i in range(4):
                x[i] = (x[i] + ks[(s + i) % 5]) & MASK
            x[3] = (x[3] + s) & MASK
    return tuple(x)


def ref_stream_words(seed, sub, block0, nblocks):
    return [w for b in range(block0, block0 + nblocks)
            for w in ref_threefry((b & MASK, b >> 32, sub & MASK, sub >> 32), (seed & MASK, seed >> 32, 0, 0))]


@pytest.mark.parametrize("rounds,ctr,key,want", KAT)
def test_reference_and_block_function_known_answers(rounds, ctr, key, want):
    assert ref_threefry(ctr, key, rounds) == want
    assert tuple(trnrand.threefry4x32(list(ctr), list(key), rounds=rounds).tolist()) == want


def test_block_function_kernel_known_answers_and_counts():
    c = torch.tensor([k[1] for k in KAT], dtype=torch.int64)
    k = torch.tensor([k[2] for k in KAT], dtype=torch.int64)
    for rounds in (13, 20, 72):
        rows = [i for i, v in enumerate(KAT) if v[0] == rounds]
        with kernel_ran("threefry_block_kernel") as runs:
            got = trnrand.threefry4x32(c[rows], k[rows], rounds=rounds)
        assert [tuple(r) for r in got.tolist()] == [KAT[i][3] for i in rows]
        assert_counts(runs[0].profile, threefry_block_counts(len(rows), rounds))


@pytest.mark.parametrize("nb", [1, 389])
def test_block_kernel_ragged_rows_equal_torch(nb):
    g = np.random.default_rng(nb)
    c = torch.from_numpy(g.integers(0, 1 << 32, (nb, 4), dtype=np.int64))
    k = torch.from_numpy(g.integers(0, 1 << 32, (nb, 4), dtype=np.int64))
    want = trnrand.threefry4x32(c, k)
    with kernel_ran("threefry_block_kernel") as runs:
        got = trnrand.threefry4x32(c, k)
    assert torch.equal(got, want)
    assert_counts(runs[0].profile, threefry_block_counts(nb, 20))
    assert [tuple(r) for r in want[:3].tolist()] == [ref_threefry(tuple(a), tuple(b)) for a, b in
                                                     zip(c[:3].tolist(), k[:3].tolist())]


def test_uint32_and_numpy_inputs_keep_their_kind():
    c = np.zeros((2, 4), dtype=np.uint32)
    out = trnrand.threefry4x32(c, np.zeros(4, dtype=np.uint32))
    assert isinstance(out, np.ndarray) and out.shape == (2, 4) and int(out[0, 0]) == 0x9C6CA96A
    t = trnrand.threefry4x32(torch.zeros(4, dtype=torch.uint32), torch.zeros(4, dtype=torch.uint32))
    assert t.dtype == torch.uint32


# ------------------------------------------------------------------ the stream

@pytest.mark.parametrize("seed,sub,off,n", [(0, 0, 0, 4), (5, 3, 7, 1001), ((7 << 32) | 9, 1 << 40, 1 << 33, 10)])
def test_stream_uniform_equals_the_scalar_reference(seed, sub, off, n):
    w = ref_stream_words(seed, sub, off, (n + 3) // 4)[:n]
    want = torch.tensor([(v >> 8) * 2.0**-24 for v in w], dtype=torch.float32)
    assert torch.equal(trnrand.threefry_stream_uniform(n, seed, off, subsequence=sub), want)
    with kernel_ran("threefry_kernel") as runs:
        got = trnrand.threefry_stream_uniform(n, seed, off, subsequence=sub)
    assert torch.equal(got, want)
    assert_counts(runs[0].profile, threefry_counts((n + 3) // 4, "uniform"))


def test_stream_kernel_known_answer_and_words_counts():
    out, prof = nki.profile(threefry_kernel, seed=0, subsequence=0, block0=0, nblocks=1)
    assert [int(v) for v in out.astype(np.int64).reshape(-1)] == list(KAT[3][3])
    assert_counts(prof, threefry_counts(1, "words"))
    nb = 128 * 512 + 300  # two tiles, the second ragged (both DMA parts)
    out, prof = nki.profile(threefry_kernel, seed=11, subsequence=2, block0=5, nblocks=nb)
    assert_counts(prof, threefry_counts(nb, "words"))
    w = out.astype(np.int64)
    for row in (0, 1, 128 * 512 - 1, 128 * 512, nb - 1):
        assert tuple(int(v) for v in w[row]) == ref_threefry((5 + row, 0, 2, 0), (11, 0, 0, 0))


@pytest.mark.parametrize("n,off", [(1001, 3), (5, 0), (24, (1 << 32) - 3)])
def test_stream_normal_kernel_is_bit_identical_to_torch(n, off):
    want = trnrand.threefry_stream_normal(n, 5, off)
    spans = 2 if off == (1 << 32) - 3 else 1  # a draw across a 2**32-block boundary: one call per span
    with kernel_ran(*["threefry_kernel"] * spans) as runs:
        got = trnrand.threefry_stream_normal(n, 5, off)
    assert torch.equal(got, want)
    if spans == 1:
        assert_counts(runs[0].profile, threefry_counts((n + 3) // 4, "normal"))
    # the first pair from the scalar reference (float64 evaluation of the same map: within a few ulp)
    a, b = ref_stream_words(5, 0, off, 1)[:2]
    u1 = ((a >> 8) + 1) * 2.0**-24
    c_pi = float(np.nextafter(np.float32(np.pi), 0))
    z = np.sqrt(-2 * np.log(u1)) * np.sin((b >> 8) * 2 * c_pi * 2.0**-24 - c_pi)
    assert abs(float(want[0]) - z) <= 8 * np.finfo(np.float32).eps * max(1.0, abs(z))


def test_stream_uniform_across_a_span_boundary():
    off, n = (1 << 32) - 2, 17
    want = trnrand.threefry_stream_uniform(n, 3, off)
    with kernel_ran("threefry_kernel", "threefry_kernel"):
        got = trnrand.threefry_stream_uniform(n, 3, off)
    assert torch.equal(got, want)
    w = ref_stream_words(3, 0, off, 5)[:n]
    assert torch.equal(want, torch.tensor([(v >> 8) * 2.0**-24 for v in w], dtype=torch.float32))


def test_streaming_by_counter_offset_and_statistics():
    a = trnrand.threefry_stream_uniform(40, seed=9)
    parts = [trnrand.threefry_stream_uniform(8, seed=9, counter_offset=2 * i) for i in range(5)]
    assert torch.equal(torch.cat(parts), a)
    z = trnrand.threefry_stream_normal(200_000, seed=2)
    # mean ~ N(0, 1/n): 5 sigma = 0.011; variance ~ N(1, 2/n): 5 sigma = 0.016
    assert abs(float(z.mean())) < 0.011 and abs(float(z.var()) - 1) < 0.016
    u = trnrand.threefry_stream_uniform(200_000, seed=2)
    assert float(u.min()) >= 0 and float(u.max()) < 1 and abs(float(u.mean()) - 0.5) < 5 * (1 / 12 / 2e5) ** 0.5
    assert not torch.equal(trnrand.threefry_stream_uniform(8, seed=2, subsequence=1), u[:8])


def test_empty_and_bad_input():
    assert trnrand.threefry_stream_uniform(0).shape == (0,)
    with pytest.raises(TypeError, match="n"):
        trnrand.threefry_stream_uniform(2.5)
    with pytest.raises(ValueError, match="seed"):
        trnrand.threefry_stream_normal(4, seed=1 << 64)
    with pytest.raises(ValueError, match="counter_offset"):
        trnrand.threefry_stream_uniform(8, counter_offset=(1 << 64) - 1)
    with pytest.raises(ValueError, match="rounds"):
        trnrand.threefry4x32([0, 0, 0, 0], [0, 0, 0, 0], rounds=73)
    with pytest.raises(ValueError, match=r"key must have shape \(\.\.\., 4\)"):
        trnrand.threefry4x32([0, 0, 0, 0], [0, 0])
    with pytest.raises(TypeError, match="device"):
        trnrand.threefry_stream_uniform(4, device=3)


@pytest.mark.parametrize("mode", ["words", "uniform", "normal"])
def test_sbuf_plan_holds_the_emulators_peak(mode):
    _, prof = nki.profile(threefry_kernel, seed=1, subsequence=0, block0=0, nblocks=128 * 512, mode=mode)
    assert_counts(prof, threefry_counts(128 * 512, mode))
    assert prof.peak_sbuf_bytes <= SBUF_TILES * 4 * 512  # the documented SBUF plan


@pytest.mark.parametrize("kernel,fn,args,kwargs", [
    ("threefry_kernel", trnrand.threefry_stream_uniform, (301,), {"seed": 4, "counter_offset": 9}),
    ("threefry_kernel", trnrand.threefry_stream_normal, (130,), {"seed": 4, "subsequence": 2}),
    ("threefry_block_kernel", trnrand.threefry4x32,
     (torch.zeros(3, 4, dtype=torch.int64), torch.ones(4, dtype=torch.int64)), {"rounds": 13}),
], ids=["uniform", "normal", "block"])
def test_plan_names_the_kernel_that_runs(kernel, fn, args, kwargs):
    with trnrand.use_backend("simulator"):
        plan, _, runs = assert_plan_matches_run(fn, *args, **kwargs)
    assert plan.backend == "simulator" and plan.kernel["name"] == kernel
    assert [r.kernel for r in runs] == [kernel]


def test_plan_of_an_empty_draw_says_torch():
    with trnrand.use_backend("simulator"):
        plan = plan_call(trnrand.threefry_stream_uniform, 0, seed=1)
    assert plan.backend == "torch" and "empty" in plan.reason
