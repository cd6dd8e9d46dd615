"""Integer fidelity.  int32/uint32 tensor_tensor defaults to the GpSimd native
integer path (exact, wrapping mod 2**32); on the Vector engine (engine=vector,
or an operand in PSUM) and in tensor_scalar it goes through fp32 and loses
bits above 2**24.  Bitwise ops and shifts are exact.  References are exact
Python integer math."""

import numpy as np
import pytest

from trnsci.nki.emulator import nisa, nl, simulate

MASK32 = (1 << 32) - 1
P, F = 128, 16


def _rand_u32(seed, lo=0, hi=1 << 32, shape=(P, F)):
    return np.random.default_rng(seed).integers(lo, hi, size=shape, dtype=np.uint64).astype(np.uint32)


def _exact(fn, a, b):
    """Apply fn elementwise with Python ints (the exact reference)."""
    return np.array([[fn(int(x), int(y)) for x, y in zip(ra, rb)] for ra, rb in zip(a, b)], dtype=np.uint64)


def _store(t):
    out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nl.store(out, t)
    return out


def _vector_tt(x, y, op):
    out = nl.ndarray(x.shape, dtype=nl.uint32, buffer=nl.sbuf)
    nisa.tensor_tensor(out, x, y, op=op, engine=nisa.engine.vector)
    return out


def test_uint32_multiply_on_gpsimd_is_exact_mod_2_32():
    a = _rand_u32(10)
    b = _rand_u32(11)

    def k(a, b):
        return _store(nl.multiply(nl.load(a), nl.load(b)))  # int tiles in SBUF -> GpSimd

    got = simulate(k, a, b).astype(np.uint64)
    np.testing.assert_array_equal(got, _exact(lambda x, y: (x * y) & MASK32, a, b))


def test_uint32_multiply_through_fp32_loses_bits():
    a = _rand_u32(0, 1 << 16)
    b = _rand_u32(1, 1 << 16)

    def k(a, b):
        return _store(_vector_tt(nl.load(a), nl.load(b), nl.multiply))

    got = simulate(k, a, b).astype(np.uint64)
    exact = _exact(lambda x, y: (x * y) & MASK32, a, b)
    assert got.dtype == np.uint64 and (got != exact).mean() > 0.99
    # What the hardware computes: fp32(a) * fp32(b) rounded to fp32, then RNE,
    # saturated to the uint32 range (here mostly 2**32 - 1).
    model = _exact(lambda x, y: min(MASK32, int(float(np.float32(np.float32(x) * np.float32(y))))), a, b)
    np.testing.assert_array_equal(got, model)


def test_uint32_add_above_2_24_loses_bits():
    a = np.full((P, 1), (1 << 24) + 1, np.uint32)
    b = np.zeros((P, 1), np.uint32)

    def k(a, b):
        return _store(_vector_tt(nl.load(a), nl.load(b), nl.add))

    def k_gpsimd(a, b):
        return _store(nl.add(nl.load(a), nl.load(b)))

    assert (simulate(k, a, b) == 1 << 24).all()  # the low bit is gone on the Vector engine
    assert (simulate(k_gpsimd, a, b) == (1 << 24) + 1).all()  # exact on GpSimd


def test_int32_add_saturates():
    a = np.full((2, 1), 2**31 - 1, np.int32)

    def k(a):
        return _store(nl.add(nl.load(a), 1))

    assert (simulate(k, a) == 2**31 - 1).all()


def _mask(x, m):
    return nl.bitwise_and(x, m)


def _add32(x, y):
    """Exact 32-bit add from 16-bit halves: every fp32 intermediate < 2**18."""
    lo = nl.add(_mask(x, 0xFFFF), _mask(y, 0xFFFF))
    hi = nl.add(nl.add(nl.right_shift(x, 16), nl.right_shift(y, 16)), nl.right_shift(lo, 16))
    return nl.bitwise_or(nl.left_shift(_mask(hi, 0xFFFF), 16), _mask(lo, 0xFFFF))


def limb_mul_kernel(a, b):
    """(a * b) mod 2**32 with 8-bit limbs of a times 16-bit limbs of b.

    Each partial product is < 2**24, so exact in fp32; shifts place it and
    the adder above sums exactly.  (16x16-bit limb products reach 2**32 and
    would not be exact in fp32.)
    """
    x, y = nl.load(a), nl.load(b)
    acc = nl.zeros(x.shape, dtype=nl.uint32)
    for i in nl.static_range(4):
        ai = _mask(nl.right_shift(x, 8 * i), 0xFF)
        for j in nl.static_range(2):
            s = 8 * i + 16 * j
            if s >= 32:
                continue
            bj = _mask(nl.right_shift(y, 16 * j), 0xFFFF)
            acc = _add32(acc, nl.left_shift(nl.multiply(ai, bj), s))
    return _store(acc)


def naive_16bit_limb_kernel(a, b):
    """lo16(a) * lo16(b) on the Vector engine: one fp32 multiply of 16-bit limbs, up to 32 bits."""
    x, y = nl.load(a), nl.load(b)
    return _store(_vector_tt(_mask(x, 0xFFFF), _mask(y, 0xFFFF), nl.multiply))


def test_limb_multiply_is_exact_mod_2_32():
    a = _rand_u32(2)
    b = _rand_u32(3)
    a[0, :4] = [MASK32, 0, 1, 0x80000000]
    b[0, :4] = [MASK32, MASK32, MASK32, 3]
    got = simulate(limb_mul_kernel, a, b).astype(np.uint64)
    np.testing.assert_array_equal(got, _exact(lambda x, y: (x * y) & MASK32, a, b))


def test_16bit_limb_product_itself_is_not_exact():
    a = _rand_u32(4, 1 << 15, 1 << 16)
    b = _rand_u32(5, 1 << 15, 1 << 16)
    got = simulate(naive_16bit_limb_kernel, a, b).astype(np.uint64)
    exact = _exact(lambda x, y: x * y, a, b)
    assert (got != exact).mean() > 0.5


def test_bitwise_xor_and_shifts_exact_on_32bit_words():
    a = _rand_u32(6)
    b = _rand_u32(7)

    def k(a, b):
        x, y = nl.load(a), nl.load(b)
        return (
            _store(nl.bitwise_xor(x, y)),
            _store(nl.left_shift(x, 7)),
            _store(nl.right_shift(x, 13)),
            _store(nl.bitwise_and(x, nl.invert(y))),
            _store(x ^ y),
        )

    xor, shl, shr, andn, xor2 = simulate(k, a, b)
    np.testing.assert_array_equal(xor, _exact(lambda p, q: p ^ q, a, b))
    np.testing.assert_array_equal(shl, _exact(lambda p, q: (p << 7) & MASK32, a, b))
    np.testing.assert_array_equal(shr, _exact(lambda p, q: p >> 13, a, b))
    np.testing.assert_array_equal(andn, _exact(lambda p, q: p & (~q & MASK32), a, b))
    np.testing.assert_array_equal(xor2, xor)


def test_right_shift_is_logical_on_int32():
    a = np.array([[-1, -256, 2**31 - 1, -(2**31)]], np.int32)

    def k(a):
        return _store(nl.right_shift(nl.load(a), 28))

    got = simulate(k, a)
    exp = [((int(v) & MASK32) >> 28) for v in a[0]]
    np.testing.assert_array_equal(got[0], exp)


def test_shift_by_tile_amounts_and_tensor_scalar_bitvec():
    a = _rand_u32(8, shape=(4, 8))
    s = np.random.default_rng(9).integers(0, 32, size=(4, 8)).astype(np.uint32)
    col = _rand_u32(10, shape=(4, 1))

    def k(a, s, col):
        x, sh, c = nl.load(a), nl.load(s), nl.load(col)
        r1 = nl.ndarray(a.shape, dtype=nl.uint32, buffer=nl.sbuf)
        nisa.tensor_tensor(r1, x, sh, op=nl.left_shift)
        r2 = nl.ndarray(a.shape, dtype=nl.uint32, buffer=nl.sbuf)
        nisa.tensor_scalar(r2, x, nl.bitwise_xor, c, op1=nl.right_shift, operand1=3)
        return _store(r1), _store(r2)

    r1, r2 = simulate(k, a, s, col)
    np.testing.assert_array_equal(r1, _exact(lambda p, q: (p << q) & MASK32, a, s))
    np.testing.assert_array_equal(r2, _exact(lambda p, q: (p ^ q) >> 3, a, np.broadcast_to(col, a.shape)))


@pytest.mark.parametrize("dtype", [np.uint16, np.int16, np.uint8, np.int8])
def test_narrow_integer_saturation(dtype):
    info = np.iinfo(dtype)
    a = np.array([[info.max, info.min]], dtype)

    def k(a):
        return _store(nl.add(nl.load(a), 1)), _store(nl.subtract(nl.load(a), 1))

    up, down = simulate(k, a)
    assert up[0, 0] == info.max and up[0, 1] == info.min + 1
    assert down[0, 0] == info.max - 1 and down[0, 1] == info.min
