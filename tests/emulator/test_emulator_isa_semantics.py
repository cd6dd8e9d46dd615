"""Documented semantics of NKI 0.6 instructions on small hand-checked cases.

Expected values are written out by hand or computed with NumPy / exact
Python integers from the pseudo code in ``nki/api/nki/isa/__init__.py``.
"""

import numpy as np
import pytest

from trnsci.nki.emulator import nisa, nl, profile
from trnsci.nki.emulator.errors import NkiValidationError

F32 = np.float32
RC = nisa.reduce_cmd


def _run(body, *arrays, target="trn1"):
    """Run body(*hbm) -> tile(s); return the tiles' values as NumPy arrays and the profile."""

    def k(*hbm):
        tiles = body(*hbm)
        tiles = tiles if isinstance(tiles, tuple) else (tiles,)
        outs = []
        for t in tiles:
            if t.buffer is nl.psum:
                s = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.sbuf)
                nisa.tensor_copy(s, t)
                t = s
            o = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
            nl.store(o, t)
            outs.append(o)
        return tuple(outs)

    outs, prof = profile(k, *arrays, target=target)
    return (outs[0] if len(outs) == 1 else outs), prof


def _tile(shape, dtype=nl.float32, buffer=nl.sbuf):
    return nl.ndarray(shape, dtype=dtype, buffer=buffer)


def _load(a, dtype=None):
    return nl.load(a, dtype=dtype)


# ------------------------------------------------------------- integer paths


def test_int32_tensor_tensor_on_gpsimd_is_exact_and_wraps():
    a = np.array([[2**24 + 1, 2**31 - 1, -7, 123456789]], np.int32)
    b = np.array([[1, 1, 3, 1000]], np.int32)

    def body(x, y):
        s, p = _tile((1, 4), nl.int32), _tile((1, 4), nl.int32)
        nisa.tensor_tensor(s, _load(x), _load(y), op=nl.add)
        nisa.tensor_tensor(p, _load(x), _load(y), op=nl.multiply)
        return s, p

    (s, p), prof = _run(body, a, b)
    wrap = lambda v: ((v + 2**31) % 2**32) - 2**31  # noqa: E731  (two's complement int32)
    assert s.tolist() == [[wrap(int(u) + int(v)) for u, v in zip(a[0], b[0])]]
    assert p.tolist() == [[wrap(int(u) * int(v)) for u, v in zip(a[0], b[0])]]
    assert prof.by_instruction["nisa.tensor_tensor@gpsimd"] == 2


def test_int32_tensor_tensor_engine_vector_goes_through_fp32():
    a = np.array([[2**24 + 1]], np.int32)
    b = np.array([[0]], np.int32)

    def body(x, y):
        s = _tile((1, 1), nl.int32)
        nisa.tensor_tensor(s, _load(x), _load(y), op=nl.add, engine=nisa.engine.vector)
        return s

    s, prof = _run(body, a, b)
    assert s[0, 0] == 2**24  # 2**24 + 1 is not an fp32 value: rounds to even
    assert prof.by_instruction["nisa.tensor_tensor@vector"] == 1


def test_uint32_tensor_tensor_with_psum_operand_falls_back_to_fp32():
    a = np.array([[2**24 + 3]], np.uint32)

    def body(x):
        p = _tile((1, 1), nl.uint32, nl.psum)
        nisa.tensor_copy(p, _load(x))  # bit-exact copy into PSUM
        s = _tile((1, 1), nl.uint32)
        z = _tile((1, 1), nl.uint32)
        nisa.memset(z, 0)
        nisa.tensor_tensor(s, p, z, op=nl.add)
        return s

    s, prof = _run(body, a)
    assert int(s[0, 0]) == 2**24 + 4  # 16777219 -> nearest fp32 (ties to even) 16777220
    assert prof.by_instruction["nisa.tensor_tensor@vector"] == 1


def test_bitwise_ops_are_exact_on_raw_bits():
    a = np.array([[0xDEADBEEF, 0xFFFFFFFF]], np.uint32)
    b = np.array([[0x0F0F0F0F, 0x80000001]], np.uint32)

    def body(x, y):
        r = _tile((1, 2), nl.uint32)
        t = _tile((1, 2), nl.uint32)
        nisa.tensor_tensor(r, _load(x), _load(y), op=nl.bitwise_xor)
        nisa.tensor_scalar(t, _load(x), nl.right_shift, 28, op1=nl.bitwise_and, operand1=0x3)
        return r, t

    (r, t), _ = _run(body, a, b)
    assert r.tolist() == [[0xDEADBEEF ^ 0x0F0F0F0F, 0xFFFFFFFF ^ 0x80000001]]
    assert t.tolist() == [[(0xDEADBEEF >> 28) & 3, (0xFFFFFFFF >> 28) & 3]]


def test_fp32_to_int_casts_round_half_even_and_saturate():
    a = np.array([[2.5, 3.5, -2.5, 1e10, -1e10, np.nan, 300.0, -5.0]], F32)

    def body(x):
        i32, u8 = _tile((1, 8), nl.int32), _tile((1, 8), nl.uint8)
        v = _load(x)
        nisa.tensor_copy(i32, v)
        nisa.tensor_copy(u8, v)
        return i32, u8

    (i32, u8), _ = _run(body, a)
    assert i32.tolist() == [[2, 4, -2, 2**31 - 1, -(2**31), 0, 300, -5]]
    assert u8.tolist() == [[2, 4, 0, 255, 0, 0, 255, 0]]


# ------------------------------------------------------------- reduce_cmd registers


def test_activation_reduce_cmd_registers_persist_across_instructions():
    a = np.array([[1.0, 2.0], [3.0, 4.0]], F32)
    b = np.array([[10.0, 20.0], [30.0, 40.0]], F32)

    def body(x, y):
        r1, r2, r3 = _tile((2, 1)), _tile((2, 1)), _tile((2, 1))
        d = _tile((2, 2))
        nisa.activation(d, op=nl.copy, data=_load(x), reduce_op=nl.add, reduce_cmd=RC.reset_reduce, reduce_res=r1)
        # another engine's instruction in between does not touch the Scalar registers
        nisa.tensor_tensor(_tile((2, 2)), d, d, op=nl.add)
        nisa.activation(d, op=nl.copy, data=_load(y), reduce_op=nl.add, reduce_cmd=RC.reduce)
        nisa.activation(d, op=nl.copy, data=_load(y), reduce_cmd=RC.idle, reduce_res=r2)  # read out only
        nisa.activation(d, op=nl.copy, data=_load(y), reduce_cmd=RC.reset, reduce_res=r3)
        return r1, r2, r3

    (r1, r2, r3), _ = _run(body, a, b)
    assert r1.ravel().tolist() == [3.0, 7.0]
    assert r2.ravel().tolist() == [3.0 + 30.0, 7.0 + 70.0]
    assert r3.ravel().tolist() == [0.0, 0.0]


def test_activation_reduce_res_without_reset_reads_undefined_registers():
    def body():
        r = _tile((2, 1))
        src = _tile((2, 2))
        nisa.memset(src, 1.0)
        nisa.activation(_tile((2, 2)), op=nl.copy, data=src, reduce_res=r)  # idle: never initialized
        return r

    r, _ = _run(body)
    assert np.isnan(r).all()


def test_activation_reduce_equals_reset_reduce():
    a = np.array([[0.0, 1.0, 2.0]], F32)

    def body(x):
        r = _tile((1, 1))
        d = _tile((1, 3))
        nisa.activation_reduce(d, op=nl.exp, data=_load(x), reduce_op=nl.add, reduce_res=r, scale=2.0)
        return d, r

    (d, r), prof = _run(body, a)
    np.testing.assert_allclose(d, np.exp(2 * a), rtol=1e-6)
    np.testing.assert_allclose(r[0, 0], np.exp(2 * a).sum(), rtol=1e-6)
    assert prof.instructions["scalar"] == 2  # the activation + the read-out of the registers


def test_tensor_scalar_reduce_accumulates_across_tiles():
    a = np.array([[1.0, 5.0, 2.0], [-1.0, -2.0, -3.0]], F32)
    b = np.array([[0.5, 9.0, 1.0], [-7.0, 0.0, 4.0]], F32)

    def body(x, y):
        r1, r2, r3 = _tile((2, 1)), _tile((2, 1)), _tile((2, 1))
        d = _tile((2, 3))
        init = _tile((2, 1))
        nisa.memset(init, 100.0)
        nisa.tensor_scalar_reduce(d, _load(x), nl.multiply, 2.0, nl.maximum, r1)  # reset_reduce
        nisa.tensor_scalar_reduce(d, _load(y), nl.multiply, 2.0, nl.maximum, r2, reduce_cmd=RC.reduce)
        nisa.tensor_scalar_reduce(d, _load(x), nl.add, 1.0, nl.add, r3, reduce_cmd=RC.load_reduce,
                                  reduce_init=init)
        return d, r1, r2, r3

    (d, r1, r2, r3), _ = _run(body, a, b)
    np.testing.assert_array_equal(d, a + 1)
    assert r1.ravel().tolist() == [10.0, -2.0]
    assert r2.ravel().tolist() == [18.0, 8.0]
    assert r3.ravel().tolist() == [100 + 2 + 6 + 3, 100 + 0 - 1 - 2]


def test_select_reduce_with_running_max():
    pred = np.array([[1, 0, 1, 0], [0, 0, 0, 1]], np.uint8)
    on_true = np.array([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, -8.0]], F32)

    def body(p, t):
        d = _tile((2, 4))
        r = _tile((2, 1))
        nisa.select_reduce(d, _load(p), _load(t), -1.0, reduce_res=r, reduce_cmd=RC.reset_reduce)
        d2 = _tile((2, 4))
        nisa.select_reduce(d2, _load(p), _load(t), -1.0, reverse_pred=True)
        return d, r, d2

    (d, r, d2), _ = _run(body, pred, on_true)
    assert d.tolist() == [[1, -1, 3, -1], [-1, -1, -1, -8]]
    assert r.ravel().tolist() == [3.0, -1.0]
    assert d2.tolist() == [[-1, 2, -1, 4], [5, 6, 7, -1]]


def test_range_select_trn2():
    t = np.arange(1, 9, dtype=F32).reshape(1, 8)

    def body(x):
        d, r = _tile((1, 8)), _tile((1, 1))
        b0, b1 = _tile((1, 1)), _tile((1, 1))
        nisa.memset(b0, 12.0)
        nisa.memset(b1, 15.0)
        nisa.range_select(d, _load(x), nl.greater_equal, nl.less, b0, b1, reduce_res=r, range_start=10)
        return d, r

    (d, r), _ = _run(body, t, target="trn2")
    lo = np.finfo(F32).min
    # indices 10..17; keep 12 <= idx < 15 -> positions 2, 3, 4
    assert d.tolist() == [[lo, lo, 3, 4, 5, lo, lo, lo]]
    assert r[0, 0] == 5.0


# ------------------------------------------------------------- accumulate=None/True/False


def test_matmul_accumulate_modes():
    s = np.eye(2, dtype=F32)
    m = np.array([[1.0, 2.0], [3.0, 4.0]], F32)

    def body(a, b):
        acc = _tile((2, 2), buffer=nl.psum)
        x, y = _load(a), _load(b)
        nisa.nc_matmul(acc, x, y)  # None, never written: overwrite
        nisa.nc_matmul(acc, x, y)  # None, matmul-initialized: accumulate
        nisa.nc_matmul(acc, x, y, accumulate=True)
        first = _tile((2, 2))
        nisa.tensor_copy(first, acc)
        nisa.nc_matmul(acc, x, y, accumulate=False)
        return first, acc

    (first, acc), _ = _run(body, s, m)
    np.testing.assert_array_equal(first, 3 * m)
    np.testing.assert_array_equal(acc, m)


def test_matmul_accumulate_none_overwrites_a_memset_value():
    """isa stub: accumulate=None infers first-write overwrite; a memset (here 5.0) is overwritten, not added."""
    s = np.eye(2, dtype=F32)
    m = np.array([[1.0, 2.0], [3.0, 4.0]], F32)

    def body(a, b):
        acc = _tile((2, 2), buffer=nl.psum)
        nisa.memset(acc, 5.0)
        x, y = _load(a), _load(b)
        nisa.nc_matmul(acc, x, y)  # first matmul write: overwrite
        nisa.nc_matmul(acc, x, y)  # then accumulate
        return acc

    acc, _ = _run(body, s, m)
    np.testing.assert_array_equal(acc, 2 * m)


def test_find_index8_absent_value_gives_all_ones():
    """0.6 isa stub: an absent value's slot is 0xFFFFFFFF (uint32) / 0xFFFF (uint16), not an error."""
    x = np.array([[3, 9, 1, 9, 7, 2, 8, 5, 6, 4]], F32)
    v = np.array([[9, 9, 9, 42, 1, 1, 7, -1]], F32)

    def body(a, b):
        data, vals = _load(a), _load(b)
        i32, i16 = _tile((1, 8), nl.uint32), _tile((1, 8), nl.uint16)
        nisa.nc_find_index8(i32, data, vals)
        nisa.nc_find_index8(i16, data, vals)
        return i32, i16

    (i32, i16), _ = _run(body, x, v)
    A, B = 0xFFFFFFFF, 0xFFFF
    # the third 9 and the second 1 have no occurrence left: all-ones too
    assert i32.tolist() == [[1, 3, A, A, 2, A, 4, A]]
    assert i16.tolist() == [[1, 3, B, B, 2, B, 4, B]]


# ------------------------------------------------------------- patterns


def test_iota_pattern_form():
    def body():
        d = _tile((3, 2, 4), nl.int32)
        nisa.iota(d, [[10, 2], [1, 4]], offset=5, channel_multiplier=100)
        return d

    d, prof = _run(body)
    expect = [[[5 + 100 * p + 10 * i + j for j in range(4)] for i in range(2)] for p in range(3)]
    assert d.tolist() == expect
    assert prof.by_instruction["nisa.iota@gpsimd"] == 1


def test_iota_pattern_size_must_match():
    with pytest.raises(NkiValidationError, match="pattern covers 3 elements"):
        _run(lambda: (nisa.iota(_tile((2, 4), nl.int32), [[1, 3]]), _tile((1, 1)))[1])


def test_affine_select_causal_mask():
    x = np.arange(16, dtype=F32).reshape(4, 4)

    def body(a):
        d = _tile((4, 4))
        # keep where p - j >= 0 (lower triangle): value = p*1 + j*(-1)
        nisa.affine_select(d, [[-1, 4]], 1, _load(a), -9.0, cmp_op=nl.greater_equal)
        return d

    d, _ = _run(body, x)
    np.testing.assert_array_equal(d, np.where(np.tril(np.ones((4, 4), bool)), x, -9.0))


# ------------------------------------------------------------- elementwise instructions


def test_tensor_copy_predicated():
    def body():
        dst, src, pred = _tile((2, 3)), _tile((2, 3)), _tile((2, 3), nl.uint8)
        nisa.memset(dst, 1.0)
        nisa.iota(src, [[1, 3]], offset=10, channel_multiplier=10)
        nisa.iota(pred, [[1, 3]], channel_multiplier=1)  # 0 1 2 / 1 2 3
        nisa.tensor_copy_predicated(dst, src, pred)
        return dst

    d, _ = _run(body)
    assert d.tolist() == [[1, 11, 12], [20, 21, 22]]


def test_scalar_tensor_tensor():
    a = np.array([[1.0, 2.0], [3.0, 4.0]], F32)
    b = np.array([[10.0, 20.0], [30.0, 40.0]], F32)

    def body(x, y):
        d = _tile((2, 2))
        o0 = _tile((2, 1))
        nisa.iota(o0, [[1, 1]], offset=2, channel_multiplier=1)  # 2, 3
        nisa.scalar_tensor_tensor(d, _load(x), nl.multiply, o0, nl.subtract, _load(y), reverse1=True)
        return d

    d, prof = _run(body, a, b)
    np.testing.assert_array_equal(d, b - a * np.array([[2.0], [3.0]]))
    assert prof.by_instruction["nisa.scalar_tensor_tensor@vector"] == 1


def test_tensor_partition_reduce():
    a = np.array([[1.0, -5.0], [4.0, 2.0], [0.5, 3.0]], F32)

    def body(x):
        s, m = _tile((1, 2)), _tile((1, 2))
        nisa.tensor_partition_reduce(s, nl.add, _load(x))
        nisa.tensor_partition_reduce(m, nl.maximum, _load(x))
        return s, m

    (s, m), prof = _run(body, a)
    assert s.tolist() == [[5.5, 0.0]] and m.tolist() == [[4.0, 3.0]]
    assert prof.instructions["gpsimd"] == 2


def test_tensor_tensor_scan_matches_pseudo_code():
    a = np.array([[0.5, 2.0, 1.0, 3.0], [1.0, 1.0, 1.0, 1.0]], F32)
    b = np.array([[1.0, -1.0, 2.0, 0.0], [1.0, 2.0, 3.0, 4.0]], F32)

    def body(x, y):
        d = _tile((2, 4))
        nisa.tensor_tensor_scan(d, _load(x), _load(y), 2.0, op0=nl.multiply, op1=nl.add)
        return d

    d, _ = _run(body, a, b)
    ref = np.empty_like(a)
    prev = np.full(2, 2.0, F32)
    for i in range(4):  # result[:, i] = op1(op0(data0[:, i], prev), data1[:, i])
        prev = a[:, i] * prev + b[:, i]
        ref[:, i] = prev
    np.testing.assert_array_equal(d, ref)


def test_max8_find_index8_match_replace8():
    x = np.array([[3, 9, 1, 9, 7, 2, 8, 5, 6, 4, 0, 11]], F32)

    def body(a):
        v = _load(a)
        top = _tile((1, 8))
        nisa.max8(top, v)
        idx = _tile((1, 8), nl.uint32)
        nisa.nc_find_index8(idx, v, top)
        rep, ridx = _tile((1, 12)), _tile((1, 8), nl.uint32)
        nisa.nc_match_replace8(rep, v, top, -1.0, dst_idx=ridx)
        return top, idx, rep, ridx

    (top, idx, rep, ridx), _ = _run(body, x)
    assert top.tolist() == [[11, 9, 9, 8, 7, 6, 5, 4]]
    # 0.6 release notes / isa stub: duplicate vals take successive occurrences, in ascending slot order
    # for find_index8 and in descending slot order (vals served 7..0) for match_replace8
    assert idx.tolist() == [[11, 1, 3, 6, 4, 8, 7, 9]]
    assert ridx.tolist() == [[11, 3, 1, 6, 4, 8, 7, 9]]
    assert rep.tolist() == [[3, -1, 1, -1, -1, 2, -1, -1, -1, -1, 0, -1]]


def test_nc_n_gather():
    x = np.arange(10, dtype=F32).reshape(2, 5) * 10
    ix = np.array([[4, 0, 0], [1, 3, 2]], np.uint32)

    def body(a, i):
        d = _tile((2, 3))
        nisa.nc_n_gather(d, _load(a), _load(i))
        return d

    d, prof = _run(body, x, ix)
    assert d.tolist() == [[40, 0, 0], [60, 80, 70]]
    assert prof.by_instruction["nisa.nc_n_gather@gpsimd"] == 1


def test_local_gather_runs_per_16_partition_core():
    # AWS's example test: indices (element offsets, multiples of e) flattened partition-first
    # per 16-partition core; every partition of the core gathers the same runs from its own row
    src = np.arange(32 * 8, dtype=F32).reshape(32, 8)
    idx = np.zeros((32, 2), np.uint16)
    idx[0:3, 0] = [6, 0, 2]  # core 0, partition-first order: idx[0,0], idx[1,0], idx[2,0]
    idx[16:19, 0] = [4, 4, 0]  # core 1

    def body(s, i):
        d = _tile((32, 6))
        nisa.local_gather(d, _load(s), _load(i), num_elem_per_idx=2, num_valid_indices=3)
        return d

    d, _ = _run(body, src, idx)
    for p in range(16):
        assert d[p].tolist() == src[p, [6, 7, 0, 1, 2, 3]].tolist()
    for p in range(16, 32):
        assert d[p].tolist() == src[p, [4, 5, 4, 5, 0, 1]].tolist()


def test_dma_transpose_2d_and_3d():
    a = np.arange(6, dtype=F32).reshape(2, 3)
    b = np.arange(24, dtype=F32).reshape(2, 3, 4)

    def body(x, y):
        t2 = _tile((3, 2))
        nisa.dma_transpose(t2, x)
        t3 = _tile((4, 3, 2))
        nisa.dma_transpose(t3, y, axes=(2, 1, 0))
        return t2, t3

    (t2, t3), prof = _run(body, a, b)
    np.testing.assert_array_equal(t2, a.T)
    np.testing.assert_array_equal(t3, b.transpose(2, 1, 0))
    assert prof.by_instruction["nisa.dma_transpose@dma"] == 2


def test_dma_transpose_static_dge_none_4d():
    """nki-dge.rst allows dge_mode.none for a static dma_transpose (nki-library's mlp_tkg bias load);
    the 4-D permutation is (3, 1, 2, 0) per the isa stub; swdge (the indirect transpose) is refused."""
    b = np.arange(2 * 1 * 3 * 5, dtype=np.float16).reshape(2, 1, 3, 5)

    def body(x):
        t = _tile((5, 1, 3, 2), nl.float16)
        nisa.dma_transpose(dst=t, src=x, dge_mode=nisa.dge_mode.none)
        return t

    t, _ = _run(body, b)
    np.testing.assert_array_equal(t, b.transpose(3, 1, 2, 0))

    def bad(x):
        t = _tile((5, 1, 3, 2), nl.float16)
        nisa.dma_transpose(dst=t, src=x, dge_mode=nisa.dge_mode.swdge)
        return t

    with pytest.raises(NkiValidationError, match="unknown, hwdge or none"):
        _run(bad, b)


def test_dma_transpose_dst_shape_enforced():
    with pytest.raises(NkiValidationError, match="must equal the transposed"):
        _run(lambda x: (nisa.dma_transpose(_tile((2, 3)), x), _tile((1, 1)))[1], np.zeros((2, 3), F32))


def test_reciprocal_on_vector_engine():
    a = np.array([[2.0, -4.0, 0.5]], F32)

    def body(x):
        d = _tile((1, 3))
        nisa.reciprocal(d, _load(x))
        return d

    d, prof = _run(body, a)
    assert d.tolist() == [[0.5, -0.25, 2.0]]
    assert prof.by_instruction["nisa.reciprocal@vector"] == 1


def test_nc_transpose_engine_selection():
    a = np.arange(12, dtype=F32).reshape(3, 4)

    def body(x):
        v = _load(x)
        t_tensor = _tile((4, 3), buffer=nl.psum)
        nisa.nc_transpose(t_tensor, v, engine=nisa.engine.tensor)
        t_vec = _tile((4, 3))
        nisa.nc_transpose(t_vec, v, engine=nisa.engine.vector)
        return t_tensor, t_vec

    (tt, tv), prof = _run(body, a)
    np.testing.assert_array_equal(tt, a.T)
    np.testing.assert_array_equal(tv, a.T)
    assert prof.by_instruction["nisa.nc_transpose@tensor"] == 1
    assert prof.by_instruction["nisa.nc_transpose@vector"] == 1
    with pytest.raises(NkiValidationError, match="reads 'data' from SBUF and writes 'dst' to PSUM"):
        _run(lambda x: (nisa.nc_transpose(_tile((4, 3)), _load(x), engine=nisa.engine.tensor), _tile((1, 1)))[1],
             a)


def test_bn_stats_and_aggr():
    a = np.array([[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]], F32)

    def body(x):
        st = _tile((1, 6))
        nisa.bn_stats(st, _load(x))
        mv = _tile((1, 2))
        nisa.bn_aggr(mv, st)
        return mv

    mv, _ = _run(body, a)
    np.testing.assert_allclose(mv[0], [a.mean(), a.var()], rtol=1e-6)


def test_dma_compute_adds_sources():
    a = np.ones((2, 3), F32)
    b = np.full((2, 3), 2.5, F32)

    def body(x, y):
        d = _tile((2, 3))
        nisa.dma_compute(d, [x, y], nl.add)
        return d

    d, _ = _run(body, a, b)
    np.testing.assert_array_equal(d, a + b)


def test_registers_and_fori_loop():
    def body():
        acc = _tile((1, 1))
        nisa.memset(acc, 0.0)
        reg = nisa.register_alloc(3)

        def step(i):
            nisa.tensor_scalar(acc, acc, nl.add, 2.0)

        nl.fori_loop(0, reg, step)
        return acc

    d, _ = _run(body)
    assert d[0, 0] == 6.0


# ------------------------------------------------------------- the instruction table


def test_every_nisa_instruction_is_in_the_table():
    from trnsci.nki.emulator import INSTRUCTIONS

    names = {f"nisa.{n}" for n in dir(nisa) if callable(getattr(nisa, n)) and hasattr(getattr(nisa, n), "spec")}
    assert names and names <= set(INSTRUCTIONS)
    for n in ("nisa.nc_matmul", "nisa.activation", "nisa.tensor_tensor", "nisa.iota", "nisa.dma_copy"):
        assert INSTRUCTIONS[n].engines


def test_profile_cycles_come_from_the_table(monkeypatch):
    from trnsci.nki.emulator import INSTRUCTIONS

    def body():
        d, s = _tile((2, 1000)), _tile((2, 1000))
        nisa.memset(s, 2.0)
        nisa.reciprocal(d, s)
        return d

    _, p1 = _run(body)
    spec = INSTRUCTIONS["nisa.reciprocal"]
    monkeypatch.setattr(spec, "cost", lambda n, **_: 100 * n)
    _, p2 = _run(body)
    # Vector busy time grows by (100 - 8) * 1000 cycles at the trn1 Vector clock (1.12 GHz)
    assert p2.engine_time_s["vector"] - p1.engine_time_s["vector"] == pytest.approx(92 * 1000 / 1.12e9)


def test_adding_an_instruction_is_one_decorated_function():
    from trnsci.nki.emulator import INSTRUCTIONS
    from trnsci.nki.emulator._table import instruction

    @instruction("nisa.test_double", engines=("vector",), memory={"dst": "sbuf", "data": "sbuf|psum"})
    def test_double(call, dst, data, name=None):
        dst._write(data._read() * 2)
        call.issue("vector", 4)

    try:
        def body():
            d, s = _tile((1, 2)), _tile((1, 2), buffer=nl.psum)
            nisa.memset(s, 3.0)
            test_double(d, s)
            return d

        d, prof = _run(body)
        assert d.tolist() == [[6.0, 6.0]] and prof.by_instruction["nisa.test_double@vector"] == 1
        with pytest.raises(NkiValidationError, match="'dst' .* is in PSUM; it must be in SBUF"):
            _run(lambda: (test_double(_tile((1, 2), buffer=nl.psum), _tile((1, 2))), _tile((1, 1)))[1])
    finally:
        INSTRUCTIONS.pop("nisa.test_double", None)


# ------------------------------------------------------------- the remaining emulated instructions


def test_tensor_scalar_cumulative_running_sum_and_max():
    a = np.array([[1.0, 2.0, 3.0, 4.0], [4.0, -1.0, 5.0, 0.0]], F32)

    def body(x):
        s, m = _tile((2, 4)), _tile((2, 4))
        nisa.tensor_scalar_cumulative(s, _load(x), nl.multiply, nl.add, 2.0)  # reset_reduce: reg = 0
        nisa.tensor_scalar_cumulative(m, _load(x), nl.add, nl.maximum, 0.0)  # reg = -inf
        c = _tile((2, 4))
        nisa.tensor_scalar_cumulative(c, _load(x), nl.multiply, nl.add, 1.0, imm1=10.0,
                                      reduce_cmd=nisa.reduce_cmd.load_reduce)
        return s, m, c

    (s, m, c), _ = _run(body, a)
    assert s.tolist() == [[2, 6, 12, 20], [8, 6, 16, 16]]
    assert m.tolist() == [[1, 2, 3, 4], [4, 4, 5, 5]]
    assert c.tolist() == [[11, 13, 16, 20], [14, 13, 18, 18]]


def test_nc_stream_shuffle_within_quadrants():
    a = np.arange(64, dtype=F32).reshape(64, 1)
    mask = [31 - i for i in range(32)]
    mask[5] = 255  # leave partition 5 (and 37) unchanged

    def body(x):
        d = _tile((64, 1))
        nisa.memset(d, -1.0)
        nisa.nc_stream_shuffle(d, _load(x), mask)
        return d

    d, _ = _run(body, a)
    expect = [31 - i for i in range(32)] + [63 - i for i in range(32)]
    expect[5] = expect[37] = -1
    assert d[:, 0].tolist() == expect


def test_nonzero_with_count_trn2():
    a = np.zeros((32, 8), F32)
    a[0] = [0, 1, 1, 0, 0, 1, 0, 0]  # the documented example
    a[16] = [2, 0, 0, 0, 0, 0, 0, 3]

    def body(x):
        d = _tile((32, 9), nl.int32)
        nisa.memset(d, 7)
        nisa.nonzero_with_count(d, _load(x), index_offset=16, padding_val=-1)
        return d

    d, _ = _run(body, a, target="trn2")
    assert d[0].tolist() == [17, 18, 21, -1, -1, -1, -1, -1, 3]
    assert d[16].tolist() == [16, 23, -1, -1, -1, -1, -1, -1, 2]
    assert (d[1] == 7).all()  # only partitions 0, 16, ... are written


def test_sequence_bounds():
    ids = np.array([[1, 1, 2, 2, 2, 0, 3]], np.int32)

    def body(x):
        d = _tile((1, 2, 7), nl.int32)
        nisa.sequence_bounds(d, _load(x))
        return d

    d, _ = _run(body, ids)
    assert d[0, 0].tolist() == [0, 0, 2, 2, 2, 7, 6]
    assert d[0, 1].tolist() == [1, 1, 4, 4, 4, -1, 6]


def test_register_load_store_and_while_loop():
    def body(n):
        cnt = _tile((1, 1), nl.int32)
        nisa.dma_copy(cnt, n)
        reg = nisa.register_alloc()
        nisa.register_load(reg, cnt)
        acc = _tile((1, 1))
        nisa.memset(acc, 0.0)

        def step(r):
            nisa.tensor_scalar(acc, acc, nl.add, 1.0)
            nisa.tensor_scalar(cnt, cnt, nl.subtract, 1.0)
            nisa.register_load(r, cnt)
            return r

        nl.while_loop(reg, step)
        out = _tile((1, 1), nl.int32)
        nisa.register_store(out, reg)
        return acc, out

    (acc, out), _ = _run(body, np.array([[4]], np.int32))
    assert acc[0, 0] == 4.0 and out[0, 0] == 0
