"""trnrand's NKI kernels through the emulator: known answers, bit-identity with the torch path, counters.

References are independent of the code under test: the scalar Philox in
``ref_philox`` (plain Python ints), published Random123 vectors, and
``scipy.stats.qmc.Sobol``. Sizes are small and ragged (not multiples of
128 partitions x 4 lanes) so the whole file runs in a few seconds.
"""

import math
import warnings

import numpy as np
import pytest
import ref_philox
import torch
from scipy.stats import qmc

import trnrand
from trnrand import _philox
from trnrand.kernels.normal import normal_counts, normal_kernel
from trnrand.kernels.philox import SBUF_TILES, philox_counts, philox_kernel
from trnrand.kernels.sobol import groups, sobol_counts, sobol_kernel
from trnrand.quasi import _direction_numbers
from trnsci import nki
from trnsci.testing import assert_counts, kernel_ran

MASK = 0xFFFFFFFF

# Random123 kat_vectors, philox4x32_10: (counter, key, expected); as (seed, block, subsequence) of the stream
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((MASK,) * 4, (MASK,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def _as_stream(ctr, key):
    return key[0] | key[1] << 32, ctr[0] | ctr[1] << 32, ctr[2] | ctr[3] << 32


def _kernel_words(seed, sub, block0, nblocks, **kw):
    out = nki.run(philox_kernel, seed=seed, subsequence=sub, block0=block0, nblocks=nblocks, backend="simulator",
                  **kw)
    return [int(v) for v in out.to(torch.int64).reshape(-1)]


@pytest.mark.parametrize("ctr,key,want", KAT)
def test_philox_kernel_known_answers(ctr, key, want):
    seed, block, sub = _as_stream(ctr, key)
    assert _kernel_words(seed, sub, block, 1) == list(want)


def test_naive_fp32_engine_multiply_fails_the_known_answer():
    # engine=vector computes the products in fp32 (24-bit significand): the low bits of every 32x32 product are
    # lost, so the first Random123 vector comes out wrong -- why the kernel uses 16-bit limbs on GpSimd.
    ctr, key, want = KAT[0]
    seed, block, sub = _as_stream(ctr, key)
    assert _kernel_words(seed, sub, block, 1, naive=True) != list(want)
    assert _kernel_words(seed, sub, block, 1) == list(want)


@pytest.mark.parametrize("seed,sub,block0,nblocks", [
    (0, 0, 0, 389),                        # 3 full partitions x F=4 ... ragged: 389 = 97*4 + 1
    (0x0123456789ABCDEF, 7, 12345, 130),   # ragged last row
    ((1 << 64) - 1, (1 << 64) - 1, (1 << 32) - 3, 3),  # block lo word near its wrap, high words all ones
])
def test_philox_kernel_words_equal_reference(seed, sub, block0, nblocks):
    got = _kernel_words(seed, sub, block0, nblocks)
    want = [ref_philox.stream_word(seed, sub, 4 * block0 + j) for j in range(4 * nblocks)]
    assert got == want


def test_philox_kernel_uniform_mode_is_the_documented_map():
    out = nki.run(philox_kernel, seed=99, subsequence=3, block0=5, nblocks=77, mode="uniform", backend="simulator")
    w = np.array([ref_philox.stream_word(99, 3, 20 + j) for j in range(4 * 77)], dtype=np.int64)
    want = (w >> 8).astype(np.float32) * np.float32(2.0**-24)  # 24-bit integers: exact in float32
    assert out.dtype == torch.float32 and np.array_equal(out.reshape(-1).numpy(), want)


@pytest.mark.parametrize("nblocks,mode", [(1, "words"), (389, "uniform"), (128 * 512, "words")])
def test_philox_counters_equal_closed_form(nblocks, mode):
    # 128*512 is one full 128 x 512 tile: 181 GpSimd + 178 Vector instructions per 65536 blocks
    _, prof = nki.profile(philox_kernel, seed=1, subsequence=2, block0=0, nblocks=nblocks, mode=mode)
    assert_counts(prof, philox_counts(nblocks, mode))
    if nblocks == 128 * 512:
        assert prof.instructions["gpsimd"] == 6 + 181 and prof.instructions["vector"] == 178
        assert prof.peak_sbuf_bytes <= SBUF_TILES * 4 * 512  # the documented SBUF plan


@pytest.mark.parametrize("n,offset,sub,dtype", [
    (1, 0, 0, torch.float32), (517, 3, 5, torch.float32),
    (2 * 512 + 7, 1, 0, torch.float64), (130, 2, 9, torch.float64),
])
def test_uniform_simulator_is_bit_identical_to_torch(n, offset, sub, dtype):
    def draw():
        return trnrand.uniform(n, dtype=dtype, generator=trnrand.Generator(seed=2024, subsequence=sub, offset=offset))

    want = draw()
    with trnrand.use_backend("simulator"), kernel_ran("philox_kernel"):
        got = draw()
    assert got.dtype == dtype and torch.equal(got, want)
    if dtype == torch.float32:  # and both are the documented (w >> 8) 2**-24 of the reference words
        w = np.array([ref_philox.stream_word(2024, sub, offset + j) for j in range(n)], dtype=np.int64)
        assert np.array_equal(got.numpy(), (w >> 8).astype(np.float32) * np.float32(2.0**-24))


def test_uniform_partitions_and_bounds_on_the_simulator():
    whole = trnrand.uniform(301, low=-1.0, high=2.5, generator=trnrand.Generator(seed=8))
    with trnrand.use_backend("simulator"), kernel_ran() as runs:
        parts = [trnrand.uniform(301, low=-1.0, high=2.5,
                                 generator=trnrand.Generator(seed=8, partition_rank=r, partition_size=3))
                 for r in range(3)]
    g = trnrand.Generator(seed=8)
    single = trnrand.uniform(903, low=-1.0, high=2.5, generator=g)
    assert [r.kernel for r in runs] == ["philox_kernel"] * 3
    assert torch.equal(parts[0], whole) and torch.equal(torch.cat(parts), single)


def test_uniform_across_the_block_counter_word_boundary():
    # words 4*(2**32 - 2) .. : the block index's low word wraps; the host splits the call there
    off = 4 * ((1 << 32) - 2) + 1
    want = trnrand.uniform(21, generator=trnrand.Generator(seed=5, offset=off))
    with trnrand.use_backend("simulator"), kernel_ran() as runs:
        got = trnrand.uniform(21, generator=trnrand.Generator(seed=5, offset=off))
    assert [r.kernel for r in runs] == ["philox_kernel"] * 2 and torch.equal(got, want)
    w = np.array([ref_philox.stream_word(5, 0, off + j) for j in range(21)], dtype=np.int64)
    assert np.array_equal(got.numpy(), (w >> 8).astype(np.float32) * np.float32(2.0**-24))


def test_sin_arguments_are_in_range_by_construction():
    c, s = np.float32(_philox.C_PI), np.float32(_philox.S_ANGLE)
    # compare as Python floats (NumPy 2 would round np.pi to float32 against a float32 scalar)
    assert float(c) == _philox.C_PI and float(c) < math.pi < float(np.nextafter(c, np.float32(4)))
    m = np.array([0, 1, (1 << 23), (1 << 24) - 1], dtype=np.float32)
    arg = m * s - c  # the kernel's activation: data * scale + bias, in fp32
    assert all(-math.pi <= float(a) <= math.pi for a in arg)


def _ref_normals(seed, sub, w0, n):
    """Independent float64 Box-Muller of the reference words (pairs at even words)."""
    w = np.array([ref_philox.stream_word(seed, sub, w0 + j) for j in range(n + (n % 2))], dtype=np.int64)
    u1 = ((w[0::2] >> 8) + 1) * 2.0**-24
    r = np.sqrt(-2.0 * np.log(u1))
    m = w[1::2] >> 8
    mq = (m + (1 << 22)) % (1 << 24)
    z = np.stack([r * np.sin(2 * np.pi * m / 2**24 - np.pi), r * np.sin(2 * np.pi * mq / 2**24 - np.pi)], 1)
    return z.reshape(-1)[:n]


# odd offsets: the draw's pairs start at odd words, the kernel's odd pairing (w1, w2), (w3, next w0), which
# crosses partitions (f = 1 at n = 3) and tile columns (f = 3 at n = 1031, ragged last rows)
@pytest.mark.parametrize("n,offset", [(3, 0), (1031, 6), (3, 1), (1031, 7), (1030, 4 * 5 + 3)])
def test_normal_simulator_matches_torch_and_reference(n, offset):
    def draw():
        return trnrand.normal(n, mean=0.5, std=2.0, generator=trnrand.Generator(seed=77, offset=offset))

    want = draw()
    with trnrand.use_backend("simulator"), kernel_ran("normal_kernel"):
        got = draw()
    # the same float32 operations in the same order, and the torch path evaluates log/sqrt/sin with NumPy's
    # float32 functions as the emulator does: bit for bit (on hardware the Scalar Engine's approximations differ)
    assert torch.equal(got, want)
    # the reference uses pi and 2 pi / 2**24 in float64 where the stream uses the float32 C < pi: a relative
    # angle change of 3e-8 plus fp32 rounding of log/sin: 1e-5 absolute on std=2 normals
    ref = 0.5 + 2.0 * _ref_normals(77, 0, offset, n)
    np.testing.assert_allclose(got.numpy(), ref, rtol=0, atol=1e-5)


def test_box_muller_counters_equal_closed_form():
    for nblocks in (1, 389):
        for odd in (False, True):  # the odd pairing computes one more column, the same instructions
            _, prof = nki.profile(normal_kernel, seed=1, subsequence=0, block0=4, nblocks=nblocks, odd=odd)
            assert_counts(prof, normal_counts(nblocks))


def test_odd_normal_partitions_on_the_simulator():
    # from odd word 3 (as after an odd-sized float32 draw), 2 ranks x 7 normals (rank 1 starts mid-pair)
    # equal the single-process torch draw of 14
    def draw(rank, size, n):
        g = trnrand.Generator(seed=8, partition_rank=rank, partition_size=size, offset=3)
        return trnrand.normal(n, generator=g)

    want = draw(0, 1, 14)
    with trnrand.use_backend("simulator"), kernel_ran("normal_kernel", "normal_kernel"):
        got = torch.cat([draw(r, 2, 7) for r in range(2)])
    assert torch.equal(got, want)  # as above


@pytest.mark.parametrize("d,n,skip", [(3, 37, 0), (130, 600, 5), (1, 1, 0), (10, 16384 + 5, 0)])
def test_sobol_kernel_equals_scipy(d, n, skip):
    v = _direction_numbers(d).astype(np.uint32)
    x, prof = nki.profile(sobol_kernel, v, np.zeros((d, 1), np.uint32), skip=skip, n=n)
    assert_counts(prof, sobol_counts(d, n, skip))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # SciPy warns when n is not a power of 2
        ref = qmc.Sobol(d, scramble=False).random(skip + n)[skip:]
    assert np.array_equal(x.T.astype(np.float64) * 2.0**-30, ref)


def test_sobol_layout_fills_the_partitions():
    # (point group, dimension) on partitions: 10 dimensions x 12 groups = 120 of 128 partitions, 16389 points in
    # 3 tiles of 12 x 512 (a dimensions-only layout would use 10 partitions and 33 tiles); 3 dims: 42 x 3 = 126
    assert groups(10, 16389) == (12, 512, 3) and groups(3, 37) == (42, 1, 1) and groups(128, 5) == (1, 5, 1)


@pytest.mark.parametrize("scramble,dtype", [(False, torch.float64), (True, torch.float32), (True, torch.float64)])
def test_sobol_simulator_is_bit_identical_to_torch(scramble, dtype):
    want = trnrand.sobol(77, 4, seed=11, scramble=scramble, dtype=dtype, skip=3)
    with trnrand.use_backend("simulator"), kernel_ran("sobol_kernel"):
        got = trnrand.sobol(77, 4, seed=11, scramble=scramble, dtype=dtype, skip=3)
    assert got.dtype == dtype and torch.equal(got, want)
    assert math.isclose(float(got.mean()), 0.5, abs_tol=0.05)  # a sanity check of the scale, not of exactness
