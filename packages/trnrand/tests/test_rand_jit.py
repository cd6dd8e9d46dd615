"""The compiled CPU route (numba, trnrand's ``jit`` extra) gives the NumPy route's bits.

References: the NumPy passes of ``trnrand._philox`` (the route the compiled one replaces: every map, offset
and span compared element for element), the scalar Philox in ``ref_philox`` (plain Python ints) and
Random123's published known answers, which neither route computes with.
"""

import numpy as np
import pytest
import ref_philox
import torch

from trnrand import _host, _philox

pytestmark = pytest.mark.skipif(_philox._philox_jit.AVAILABLE is False, reason="numba is not installed")

SEED = 0x0123456789ABCDEF
# starts: every lane, odd and even; one draw crossing a multiple of 2**32 blocks (counter word 1 carries); a
# word index past 2**64 (block indices go to 2**64 - 1)
STARTS = [0, 1, 2, 3, 4 * ((1 << 32) - 3) + 1, 12345, (1 << 65) + 3]
SIZES = [1, 2, 3, 7, 131, 1031, 4099 * 4 + 5]


def _both(fn, *args, **kw):
    saved = _host._JIT
    try:
        _host._JIT = _philox._philox_jit
        a = fn(*args, **kw)
        _host._JIT = None
        b = fn(*args, **kw)
    finally:
        _host._JIT = saved
    return a, b


@pytest.mark.parametrize("sub", [0, 5, (1 << 64) - 1])
@pytest.mark.parametrize("start", STARTS)
def test_compiled_route_equals_the_numpy_passes(start, sub):
    for n in SIZES:
        for fn, kw in ((_philox.words, {}), (_philox.uniform32, {}), (_philox.uniform32, {"open_low": True}),
                       (_philox.uniform64, {}), (_philox.uniform64, {"open_low": True})):
            a, b = _both(fn, SEED, sub, start, n, **kw)
            assert a.dtype == b.dtype and torch.equal(a, b), (fn.__name__, kw, n)
        for dt in (torch.float32, torch.float64):
            a, b = _both(_philox.normals, SEED, sub, start, n, dt)
            assert torch.equal(a, b), ("normals", dt, n)


def test_compiled_words_are_the_reference_philox():
    # Random123 kat_vectors (philox4x32_10), as (seed, block, subsequence) of the stream
    kat = [((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
           ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD))]
    saved = _host._JIT
    _host._JIT = _philox._philox_jit
    try:
        for ctr, key, want in kat:
            seed, block, sub = key[0] | key[1] << 32, ctr[0] | ctr[1] << 32, ctr[2] | ctr[3] << 32
            assert _philox.words(seed, sub, 4 * block, 4).tolist() == list(want)
        w = _philox.words(SEED, 7, 4 * ((1 << 32) - 1) + 2, 9).tolist()  # across the counter's word-1 carry
        assert w == [ref_philox.stream_word(SEED, 7, 4 * ((1 << 32) - 1) + 2 + j) for j in range(9)]
        u = _philox.uniform64(SEED, 7, 3, 5).numpy()  # odd start: pairs straddle blocks
        ref = [ref_philox.stream_word(SEED, 7, 3 + j) for j in range(10)]
        m53 = [(ref[2 * k] >> 5) * 2**26 + (ref[2 * k + 1] >> 6) for k in range(5)]
        np.testing.assert_array_equal(u, np.array(m53, dtype=np.float64) * 2.0**-53)
    finally:
        _host._JIT = saved


def test_public_draws_use_the_compiled_route_and_keep_their_bits():
    import trnrand

    def draw():
        g = trnrand.Generator(seed=3, subsequence=2, offset=5)
        return (trnrand.uniform(1031, generator=g), trnrand.normal(777, generator=g),
                trnrand.uniform(515, dtype=torch.float64, generator=g), trnrand.normal(99, dtype=torch.float64,
                                                                                     generator=g))

    a, b = _both(draw)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
