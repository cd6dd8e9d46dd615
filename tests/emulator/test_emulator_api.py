"""Conformance of the emulated nl / nisa subset on small hand-checked cases.

References are NumPy (or hand-computed values), never the emulator itself.
"""

import ml_dtypes
import numpy as np
import pytest

from trnsci.nki.emulator import EmulatorError, KernelProfile, bf16_products, nisa, nki, nl, profile, simulate

F32 = np.float32


def _out(shape, dtype=nl.float32):
    return nl.ndarray(shape, dtype=dtype, buffer=nl.shared_hbm)


def _psum_to_hbm(ps):
    sb = nl.ndarray(ps.shape, dtype=ps.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(sb, ps)
    out = _out(ps.shape, ps.dtype)
    nl.store(out, sb)
    return out


# ----------------------------------------------------------------- running


def test_jit_call_simulate_forms_and_constants():
    @nki.jit
    def k(a, scale, shape_hint=(0, 0)):
        assert isinstance(scale, float) and shape_hint == (4, 3)
        t = nl.load(a)
        out = _out(a.shape)
        nl.store(out, nl.multiply(t, scale))
        return out

    a = np.arange(12, dtype=F32).reshape(4, 3)
    np.testing.assert_array_equal(k(a, 2.0, shape_hint=(4, 3)), a * 2)
    np.testing.assert_array_equal(nki.simulate(k)(a, 2.0, shape_hint=(4, 3)), a * 2)
    np.testing.assert_array_equal(simulate(k, a, 2.0, shape_hint=(4, 3)), a * 2)
    outs, prof = profile(k, a, 3.0, shape_hint=(4, 3), target="trn2")
    np.testing.assert_array_equal(outs, a * 3)
    assert isinstance(prof, KernelProfile) and prof.target == "trn2"


def test_tuple_outputs_and_torch_inputs():
    torch = pytest.importorskip("torch")

    def k(a, b):
        x, y = nl.load(a), nl.load(b)
        o1, o2 = _out(a.shape), _out(a.shape)
        nl.store(o1, nl.add(x, y))
        nl.store(o2, nl.subtract(x, y))
        return o1, o2

    a = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    b = torch.ones(2, 3)
    s, d = simulate(k, a, b)
    assert isinstance(s, np.ndarray)
    np.testing.assert_array_equal(s, a.numpy() + 1)
    np.testing.assert_array_equal(d, a.numpy() - 1)


def test_counters_reset_per_call():
    def k(a):
        out = _out(a.shape)
        nl.store(out, nl.exp(nl.load(a)))
        return out

    a = np.zeros((2, 2), F32)
    _, p1 = profile(k, a)
    _, p2 = profile(k, a)
    assert p1.instructions == p2.instructions == {"tensor": 0, "vector": 0, "scalar": 1, "gpsimd": 0, "dma": 2}
    assert p2.hbm_read_bytes == 16 and p2.hbm_write_bytes == 16 and p2.dma_transfers == 2


def test_unwritten_memory_shows_sentinels():
    def k(a):
        out = _out((2, 4))
        iout = _out((2, 4), nl.uint32)
        nl.store(out[:, 0:2], nl.load(a))
        return out, iout

    out, iout = simulate(k, np.ones((2, 2), F32))
    np.testing.assert_array_equal(out[:, :2], 1)
    assert np.isnan(out[:, 2:]).all()
    assert (iout == 0xA5A5A5A5).all()


def test_ops_outside_kernel_raise():
    with pytest.raises(EmulatorError, match="inside a kernel"):
        nl.ndarray((2, 2), dtype=nl.float32)


# ----------------------------------------------------------------- views


def test_slicing_views_write_through_and_ragged_tiles():
    def k(a):
        out = _out(a.shape)
        for i in nl.affine_range(3):  # 300 rows: 128 + 128 + 44
            r0, r1 = i * 128, min((i + 1) * 128, 300)
            t = nl.load(a[r0:r1, 1:5])
            nl.store(out[r0:r1, 1:5], nl.add(t, 1.0))
            nl.store(out[r0:r1, 0:1], t[:, 0:1])
        return out

    a = np.random.default_rng(1).standard_normal((300, 5)).astype(F32)
    out = simulate(k, a)
    np.testing.assert_array_equal(out[:, 1:5], a[:, 1:5] + 1)
    np.testing.assert_array_equal(out[:, 0], a[:, 1])


def test_tile_slice_assignment_writes_through():
    def k(a):
        t = nl.zeros((4, 6), dtype=nl.float32)
        t[:, 2:4] = nl.load(a)
        t[1, 0:1] = 7.0
        out = _out((4, 6))
        nl.store(out, t)
        return out

    a = np.arange(8, dtype=F32).reshape(4, 2)
    exp = np.zeros((4, 6), F32)
    exp[:, 2:4] = a
    exp[1, 0] = 7
    np.testing.assert_array_equal(simulate(k, a), exp)


def test_strided_slices_replace_index_expressions():
    # NKI 0.6: affine access is written with slices (nl.arange index
    # expressions are gone); integer-array indices are rejected (test_access.py)
    def k(a):
        t = nl.load(a[:, 1::2])  # odd columns
        out = _out((4, 3))
        nl.store(out, t)
        out2 = _out((4, 6))
        nl.store(out2[:, 0::2], t)  # scatter into even columns
        return out, out2

    a = np.arange(24, dtype=F32).reshape(4, 6)
    out, out2 = simulate(k, a)
    np.testing.assert_array_equal(out, a[:, 1::2])
    np.testing.assert_array_equal(out2[:, ::2], a[:, 1::2])
    assert np.isnan(out2[:, 1::2]).all()


def test_hbm_reshape_view():
    def k(a):
        v = a.reshape((4, 4))
        out = _out((4, 4))
        nl.store(out, nl.load(v))
        return out

    a = np.arange(16, dtype=F32)
    np.testing.assert_array_equal(simulate(k, a), a.reshape(4, 4))


# ----------------------------------------------------------------- data movement


def test_load_with_dtype_casts_rne():
    def k(a):
        t = nl.load(a, dtype=nl.bfloat16)
        out = _out(a.shape, nl.bfloat16)
        nl.store(out, t)
        return out

    a = np.array([[1.0 + 2**-8, 1.0 + 3 * 2**-8]], F32)  # ties -> even
    out = simulate(k, a)
    assert out.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(out.astype(F32), [[1.0, 1.0 + 2**-6]])


def test_dma_copy_both_directions():
    def k(a):
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        out = _out(a.shape)
        nisa.dma_copy(dst=out, src=t)
        return out

    a = np.arange(6, dtype=F32).reshape(2, 3)
    out, p = profile(k, a)
    np.testing.assert_array_equal(out, a)
    assert (p.hbm_read_bytes, p.hbm_write_bytes, p.dma_transfers) == (24, 24, 2)


# ----------------------------------------------------------------- Tensor Engine


def test_nc_matmul_is_stationary_transposed_times_moving():
    def k(s, m):
        st, mv = nl.load(s), nl.load(m)
        ps = nl.ndarray((s.shape[1], m.shape[1]), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, st, mv)
        return _psum_to_hbm(ps)

    s = np.array([[1, 2], [3, 4], [5, 6]], F32)  # K=3, M=2
    m = np.array([[1, 0, 2, 1], [0, 1, 1, 0], [1, 1, 0, 2]], F32)  # K=3, N=4
    # hand-computed S.T @ M
    exp = np.array([[6, 8, 5, 11], [8, 10, 8, 14]], F32)
    out, p = profile(k, s, m)
    np.testing.assert_array_equal(out, exp)
    assert p.instructions["tensor"] == 1 and p.flops == 2 * 3 * 2 * 4


def test_accumulate_semantics():
    def k(s, m):
        st, mv = nl.load(s), nl.load(m)
        ps = nl.ndarray((2, 2), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, st, mv)  # first write overwrites the NaN sentinel
        nisa.nc_matmul(ps, st, mv)  # later writes add
        o1 = _psum_to_hbm(ps)
        nisa.nc_matmul(ps, st, mv, accumulate=False)  # explicit overwrite
        o2 = _psum_to_hbm(ps)
        nisa.nc_matmul(ps, st, mv, accumulate=True)  # explicit add
        o3 = _psum_to_hbm(ps)
        fresh = nl.ndarray((2, 2), dtype=nl.float32, buffer=nl.psum)  # new group
        nisa.nc_matmul(fresh, st, mv)
        o4 = _psum_to_hbm(fresh)
        part = nl.ndarray((2, 2), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(part[:, 0:1], st, mv[:, 0:1])  # only column 0 written
        nisa.nc_matmul(part, st, mv)  # column 0 accumulates, column 1 overwrites
        o5 = _psum_to_hbm(part)
        return o1, o2, o3, o4, o5

    s = np.eye(2, dtype=F32)
    m = np.array([[1, 2], [3, 4]], F32)
    o1, o2, o3, o4, o5 = simulate(k, s, m)
    np.testing.assert_array_equal(o1, 2 * m)
    np.testing.assert_array_equal(o2, m)
    np.testing.assert_array_equal(o3, 2 * m)
    np.testing.assert_array_equal(o4, m)
    np.testing.assert_array_equal(o5, [[2, 2], [6, 4]])


def test_matmul_bf16_operands_rounded_fp32_accumulate():
    rng = np.random.default_rng(2)
    s = rng.standard_normal((128, 64)).astype(F32)
    m = rng.standard_normal((128, 96)).astype(F32)

    def k(s, m):
        st = nl.load(s, dtype=nl.bfloat16)
        mv = nl.load(m, dtype=nl.bfloat16)
        ps = nl.ndarray((64, 96), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, st, mv)
        return _psum_to_hbm(ps)

    out, p = profile(k, s, m)
    sb = s.astype(ml_dtypes.bfloat16).astype(np.float64)
    mb = m.astype(ml_dtypes.bfloat16).astype(np.float64)
    # default: each bf16 x bf16 product rounded to bf16 (exact in fp32 first), summed in fp32 (numerics.py;
    # trnfft's trn1/trn2 measurement). fp32 accumulation of 128 O(1) terms: error ~1e-5 << atol 1e-4
    prods = (sb[:, :, None] * mb[:, None, :]).astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)
    np.testing.assert_allclose(out, prods.sum(axis=0), rtol=0, atol=1e-4)
    assert np.abs(out - sb.T @ mb).max() > 1e-3  # the product rounding is real
    assert p.flops_bf16 == 2 * 128 * 64 * 96 and p.flops_fp32 == 0
    with bf16_products("exact"):  # the switch: exact products (a CPU fp32 fallback's numerics)
        out_exact = profile(k, s, m)[0]
    np.testing.assert_allclose(out_exact, sb.T @ mb, rtol=0, atol=1e-4)
    assert np.abs(out - s.astype(np.float64).T @ m).max() > 1e-3  # the input rounding is real too


def test_nl_matmul_and_transpose():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 16)).astype(F32)  # [M, K]
    y = rng.standard_normal((16, 5)).astype(F32)  # [K, N]

    def k(xt, x, y):
        b = nl.matmul(nl.load(xt), nl.load(y), transpose_x=True)  # xt is [K, M]
        t = nl.transpose(nl.load(x))
        return _psum_to_hbm(b), _psum_to_hbm(t)

    (b, t), p = profile(k, np.ascontiguousarray(x.T), x, y)
    np.testing.assert_allclose(b, x.astype(np.float64) @ y, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(t, x.T)
    assert p.instructions["tensor"] == 2  # one nc_matmul + one Tensor Engine transpose


def test_nc_transpose_tensor_and_vector_engines():
    def k(a):
        t = nl.load(a)
        ps = nl.ndarray((a.shape[1], a.shape[0]), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_transpose(ps, t)
        sb = nl.ndarray((a.shape[1], a.shape[0]), dtype=nl.float32, buffer=nl.sbuf)
        nisa.nc_transpose(sb, t)
        o = _out(sb.shape)
        nl.store(o, sb)
        return _psum_to_hbm(ps), o

    a = np.arange(12, dtype=F32).reshape(3, 4)
    (x, y), p = profile(k, a)
    np.testing.assert_array_equal(x, a.T)
    np.testing.assert_array_equal(y, a.T)
    assert p.instructions["tensor"] == 1 and p.instructions["vector"] == 2


# ----------------------------------------------------------------- Vector / Scalar


def test_reduction_axes_and_keepdims():
    a = np.arange(2 * 3 * 4, dtype=F32).reshape(2, 3, 4)

    def k(a):
        t = nl.load(a)
        s1 = nl.sum(t, axis=2)  # (2, 3)
        s2 = nl.max(t, axis=(1, 2), keepdims=True)  # (2, 1, 1)
        s3 = nl.min(t, axis=-1, keepdims=True)  # (2, 3, 1)
        d = nl.ndarray((2, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(d, nl.add, t, axis=(1, 2))  # dst (2, 1) for a (2,) result
        e = nl.ndarray((2, 3), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(e, nl.minimum, t, axis=2, keepdims=False)
        f = nl.ndarray((2, 3, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(f, nl.maximum, t, axis=2, keepdims=True, negate=True)
        outs = []
        for x in (s1, s2, s3, d, e, f):
            o = _out(x.shape)
            nl.store(o, x)
            outs.append(o)
        return tuple(outs)

    s1, s2, s3, d, e, f = simulate(k, a)
    np.testing.assert_array_equal(s1, a.sum(axis=2))
    np.testing.assert_array_equal(s2, a.max(axis=(1, 2), keepdims=True))
    np.testing.assert_array_equal(s3, a.min(axis=2, keepdims=True))
    np.testing.assert_array_equal(d[:, 0], a.sum(axis=(1, 2)))
    np.testing.assert_array_equal(e, a.min(axis=2))
    np.testing.assert_array_equal(f, -a.max(axis=2, keepdims=True))


def test_comparisons_and_select():
    def k(a, b):
        x, y = nl.load(a), nl.load(b)
        m = nl.greater(x, y, dtype=nl.uint8)  # a 1/0 byte mask
        mf = nl.greater(x, y)  # 0.6 stub: the result dtype defaults to the input tile's
        assert mf.dtype == nl.float32
        sel = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.select_reduce(sel, m, x, 0.0)
        o = _out(a.shape)
        nl.store(o, sel)
        o2 = _out(a.shape, nl.uint8)
        nl.store(o2, m)
        return o, o2

    a = np.array([[1, 5, 3], [0, -2, 9]], F32)
    b = np.array([[2, 4, 3], [-1, -3, 10]], F32)
    o, o2 = simulate(k, a, b)
    np.testing.assert_array_equal(o, np.where(a > b, a, 0))
    np.testing.assert_array_equal(o2, (a > b).astype(np.uint8))


def test_iota_patterns():
    def k():
        t = nl.ndarray((4, 8), dtype=nl.int32, buffer=nl.sbuf)
        nisa.iota(t, [[1, 8]], channel_multiplier=8)
        f = nl.ndarray((4, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.iota(f, [[0, 1]], offset=1, channel_multiplier=3)
        g = nl.ndarray((4, 2, 3), dtype=nl.int32, buffer=nl.sbuf)
        nisa.iota(g, [[10, 2], [1, 3]], offset=5, channel_multiplier=100)
        o, of, og = _out((4, 8), nl.int32), _out((4, 1)), _out((4, 2, 3), nl.int32)
        nl.store(o, t)
        nl.store(of, f)
        nl.store(og, g)
        return o, of, og

    (o, of, og), p = profile(k)
    np.testing.assert_array_equal(o, np.arange(32).reshape(4, 8))
    np.testing.assert_array_equal(of[:, 0], [1, 4, 7, 10])
    exp = np.array([[[5 + 100 * c + 10 * w + x for x in range(3)] for w in range(2)] for c in range(4)])
    np.testing.assert_array_equal(og, exp)
    assert p.instructions["gpsimd"] == 3


def test_activation_with_bias_and_scale():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((4, 6)).astype(F32)
    bias = rng.standard_normal((4, 1)).astype(F32)
    scale = rng.standard_normal((4, 1)).astype(F32)

    def k(a, bias, scale):
        x, b, s = nl.load(a), nl.load(bias), nl.load(scale)
        d1 = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(d1, op=nl.exp, data=x, bias=b, scale=0.5)
        d2 = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((4, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(d2, op=nl.square, data=x, scale=s, reduce_op=nl.add, reduce_res=r,
                        reduce_cmd=nisa.reduce_cmd.reset_reduce)
        d3 = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(d3, op=nl.copy, data=x, bias=b)
        outs = []
        for t in (d1, d2, r, d3):
            o = _out(t.shape)
            nl.store(o, t)
            outs.append(o)
        return tuple(outs)

    (d1, d2, r, d3), p = profile(k, a, bias, scale)
    a64 = a.astype(np.float64)
    np.testing.assert_allclose(d1, np.exp(a64 * 0.5 + bias), rtol=1e-6)
    np.testing.assert_allclose(d2, (a64 * scale) ** 2, rtol=1e-6)
    np.testing.assert_allclose(r[:, 0], ((a64 * scale) ** 2).sum(axis=1), rtol=1e-5)
    np.testing.assert_allclose(d3, a64 + bias, rtol=1e-6)
    assert p.instructions["scalar"] == 4  # 3 activations + 1 read-out of reduce_regs into r


def test_tensor_scalar_op_chaining_and_reverse():
    a = np.array([[1, 2, 3], [4, 5, 6]], F32)
    col = np.array([[10], [20]], F32)

    def k(a, col):
        x, c = nl.load(a), nl.load(col)
        d1 = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(d1, x, nl.subtract, 1.0, op1=nl.multiply, operand1=c)
        d2 = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(d2, x, nl.subtract, c, reverse0=True, op1=nl.maximum, operand1=12.0)
        d3 = nl.ndarray(a.shape, dtype=nl.int32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=d3, data=x, op0=nl.multiply, operand0=2.5)  # 2.5, 5, 7.5 ... RNE
        outs = []
        for t in (d1, d2, d3):
            o = _out(t.shape, t.dtype)
            nl.store(o, t)
            outs.append(o)
        return tuple(outs)

    (d1, d2, d3), p = profile(k, a, col)
    np.testing.assert_array_equal(d1, (a - 1) * col)
    np.testing.assert_array_equal(d2, np.maximum(col - a, 12))
    np.testing.assert_array_equal(d3, [[2, 5, 8], [10, 12, 15]])  # 2.5->2, 7.5->8, 12.5->12
    assert p.instructions["vector"] == 3


def test_tensor_tensor_and_free_dim_broadcast_with_tensor_scalar():
    a = np.arange(6, dtype=F32).reshape(2, 3)
    c = np.array([[1], [2]], F32)

    def k(a, c):
        x, y = nl.load(a), nl.load(c)
        d = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(d, x, x, op=nl.multiply)
        e = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(e, x, nl.add, y)  # (P, F) + (P, 1): broadcast along the free dim
        o1, o2, o3 = _out(a.shape), _out(a.shape), _out(a.shape)
        nl.store(o1, d)
        nl.store(o2, e)
        nl.store(o3, x * 2.0 - x)  # operators map to nl functions
        return o1, o2, o3

    o1, o2, o3 = simulate(k, a, c)
    np.testing.assert_array_equal(o1, a * a)
    np.testing.assert_array_equal(o2, a + c)
    np.testing.assert_array_equal(o3, a)


def test_arithmetic_rounds_to_bf16_output():
    a = np.array([[1.0]], ml_dtypes.bfloat16)
    b = np.array([[2.0**-8]], ml_dtypes.bfloat16)

    def k(a, b):
        o = _out(a.shape, nl.bfloat16)
        nl.store(o, nl.add(nl.load(a), nl.load(b)))
        o2 = _out(a.shape, nl.float32)
        nl.store(o2, nl.add(nl.load(a), nl.load(b), dtype=nl.float32))
        return o, o2

    o, o2 = simulate(k, a, b)
    assert float(o[0, 0]) == 1.0  # 1 + 2**-8 is a tie in bf16 -> even (1.0)
    assert float(o2[0, 0]) == 1.0 + 2.0**-8


def test_transcendentals_and_unary_ops():
    a = np.array([[0.25, 1.0, 3.0]], F32)

    def k(a):
        x = nl.load(a)
        res = [
            nl.exp(x),
            nl.log(x),
            nl.sqrt(x),
            nl.rsqrt(x),
            nl.sin(x),
            nl.reciprocal(x),
            nl.square(x),
            -x,
            nl.tanh(x),
            nl.sigmoid(x),
        ]
        outs = []
        for t in res:
            o = _out(a.shape)
            nl.store(o, t)
            outs.append(o)
        return tuple(outs)

    outs, p = profile(k, a)
    a64 = a.astype(np.float64)
    refs = [
        np.exp(a64),
        np.log(a64),
        np.sqrt(a64),
        1 / np.sqrt(a64),
        np.sin(a64),
        1 / a64,
        a64**2,
        -a64,
        np.tanh(a64),
        1 / (1 + np.exp(-a64)),
    ]
    for o, r in zip(outs, refs):
        np.testing.assert_allclose(o, r, rtol=1e-6)
    # activations on Scalar; reciprocal and negation on Vector; rsqrt on GpSimd (NKI 0.5)
    assert p.instructions["scalar"] == 7 and p.instructions["vector"] == 2 and p.instructions["gpsimd"] == 1


def test_memset_zeros_copy():
    def k():
        t = nl.ndarray((2, 3), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.memset(t, 0xFFFFFFFF)
        z = nl.zeros((2, 3), dtype=nl.float32)
        f = nl.ndarray((2, 3), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(f, 2.5)
        c = nl.copy(f)
        outs = []
        for x in (t, z, c):
            o = _out(x.shape, x.dtype)
            nl.store(o, x)
            outs.append(o)
        return tuple(outs)

    (t, z, c), p = profile(k)
    assert (t == 0xFFFFFFFF).all() and (z == 0).all() and (c == 2.5).all()
    assert p.instructions["vector"] == 3 and p.instructions["scalar"] == 1  # nl.copy is an activation


def test_shared_identity_matrix_matmul():
    def k(a):
        ident = nl.shared_identity_matrix(n=4, dtype=nl.float32)
        return _psum_to_hbm(nl.matmul(ident, nl.load(a), transpose_x=True))

    a = np.arange(12, dtype=F32).reshape(4, 3)
    np.testing.assert_array_equal(simulate(k, a), a)


def test_program_id_grid():
    def k(a):
        out = _out(a.shape)
        i = nl.program_id(0)
        nl.store(out[i : i + 1, :], nl.add(nl.load(a[i : i + 1, :]), float(nl.num_programs(0))))
        return out

    a = np.zeros((3, 2), F32)
    out = nki.jit(k)[3](a)
    np.testing.assert_array_equal(out, np.full((3, 2), 3.0))


def test_profile_str_labels_modeled_and_utilization():
    def k(s, m):
        ps = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, nl.load(s), nl.load(m))
        return _psum_to_hbm(ps)

    s = np.zeros((128, 128), F32)
    m = np.zeros((128, 512), F32)
    _, p = profile(k, s, m)
    text = str(p)
    assert "modeled" in text and "HBM read" in text
    assert 0 < p.tensor_engine_utilization() <= 1.0
    assert p.modeled_time_lower_s <= p.modeled_time_upper_s
    # fp32 128x128x512 matmul: 4 * 512 cycles at 2.8 GHz on trn1
    assert p.engine_time_s["tensor"] == pytest.approx(2048 / 2.8e9)
    _, p2 = profile(k, s, m, target="trn2")
    assert p2.engine_time_s["tensor"] == pytest.approx(2048 / 2.4e9)


def test_integer_index_keeps_partition_dim_and_psum_views():
    def k(a):
        t = nl.load(a)
        row = t[2]  # (1, F) on chip
        assert row.shape == (1, 3)
        o = _out((1, 3))
        nl.store(o, row)
        ps = nl.ndarray((4, 3), dtype=nl.float32, buffer=nl.psum)
        nisa.memset(ps[:, 0:1], 0.0)
        ident = nl.shared_identity_matrix(n=4, dtype=nl.float32)
        nisa.nc_matmul(ps[:, 1:3], ident, t[:, 1:3])  # a PSUM view as dst
        return o, _psum_to_hbm(ps)

    a = np.arange(12, dtype=F32).reshape(4, 3)
    o, ps = simulate(k, a)
    np.testing.assert_array_equal(o[0], a[2])
    exp = a.copy()
    exp[:, 0] = 0
    np.testing.assert_array_equal(ps, exp)


def test_psum_accumulation_over_k_loop_matches_numpy():
    rng = np.random.default_rng(5)
    at = rng.standard_normal((384, 100)).astype(F32)  # K=384 -> three 128-row K tiles
    b = rng.standard_normal((384, 60)).astype(F32)

    def k(at, b):
        ps = nl.ndarray((100, 60), dtype=nl.float32, buffer=nl.psum)
        for kk in nl.affine_range(3):
            nisa.nc_matmul(ps, nl.load(at[kk * 128 : (kk + 1) * 128, :]), nl.load(b[kk * 128 : (kk + 1) * 128, :]))
        return _psum_to_hbm(ps)

    np.testing.assert_allclose(simulate(k, at, b), at.astype(np.float64).T @ b, rtol=1e-5, atol=1e-4)


def test_torch_bf16_input():
    torch = pytest.importorskip("torch")
    x = torch.tensor([[1.5, -2.25], [3.0, 0.5]], dtype=torch.bfloat16)

    def k(a):
        o = _out(a.shape, nl.float32)
        nl.store(o, nl.load(a, dtype=nl.float32))
        return o

    np.testing.assert_array_equal(simulate(k, x), [[1.5, -2.25], [3.0, 0.5]])


def test_kernels_emulated_in_parallel_threads_agree_with_numpy():
    """Two threads emulating at once: each gets its own trace, results and counters stay right."""
    import threading

    from trnsci.nki.emulator import _blas

    def scale_kernel(x):
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        nl.store(out, value=nl.multiply(t, 3.0))
        return out

    before = _blas._find() and _blas._find()[1]()
    results = {}

    def worker(i):
        x = np.full((128, 64), float(i), np.float32)
        for _ in range(20):
            out, prof = profile(scale_kernel, x)
            results.setdefault(i, []).append((float(out[0, 0]), prof.hbm_read_bytes))

    threads = [threading.Thread(target=worker, args=(i,)) for i in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r == (3.0 * i, 128 * 64 * 4) for i in (1, 2) for r in results[i])
    if before:
        assert _blas._find()[1]() == before  # the caller's BLAS thread count is back
