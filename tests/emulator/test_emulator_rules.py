"""One test per NKI rule the emulator enforces: the violating kernel raises
EmulatorError with a message that names the rule, the op and the operand."""

import numpy as np
import pytest

from trnsci.nki.emulator import EmulatorError, nisa, nl, profile, simulate

F32 = np.float32


def _raises(kernel, *arrays, match, target="trn1", **kw):
    with pytest.raises(EmulatorError, match=match) as info:
        profile(kernel, *arrays, target=target, **kw)
    return str(info.value)


def test_error_is_a_value_error():
    assert issubclass(EmulatorError, ValueError)


def test_partition_dim_at_most_128_on_allocation():
    def k():
        nl.ndarray((256, 4), dtype=nl.float32, buffer=nl.sbuf)

    msg = _raises(k, match="number of partitions 256 exceeds architecture limitation of 128")
    assert "nl.ndarray" in msg


def test_partition_dim_at_most_128_on_load():
    def k(a):
        nl.load(a)

    msg = _raises(k, np.zeros((256, 4), F32), match="number of partitions 256 exceeds")
    assert msg.startswith("nl.load")


def test_tiles_rank_at_least_2():
    def k():
        nl.ndarray((128,), dtype=nl.float32, buffer=nl.sbuf)

    _raises(k, match="at least 2-D")


def test_reduction_to_rank_1_tile_rejected():
    def k(a):
        nl.sum(nl.load(a), axis=1)  # (128,) is not a valid tile: keepdims=True

    _raises(k, np.zeros((128, 4), F32), match="keepdims=True")


def test_psum_tile_free_size_at_most_2kib():
    def k():
        nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.psum)

    msg = _raises(k, match="exceeding the 2048-byte")
    assert "4096 bytes per partition" in msg


def _use_all_at_end(tiles):
    """Write every tile, then read them all after the last write: all are live at once."""
    for t in tiles:
        nisa.memset(t, 0.0)
    sink = nl.ndarray(tiles[0].shape, dtype=tiles[0].dtype, buffer=nl.sbuf)
    for t in tiles:
        nisa.tensor_copy(sink, t)


def test_psum_banks_exhausted():
    def k():
        # nine 1 KiB tiles: 9 KiB fits the 16 KiB, but each unplaced tile takes a bank of its own
        _use_all_at_end([nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.psum, name=f"acc{i}")
                         for i in range(9)])

    msg = _raises(k, match="PSUM capacity exceeded on trn1")
    assert "9 live PSUM banks" in msg and "'acc0'" in msg and "'acc8'" in msg  # names the tiles live at the peak


def _mm_kernel(s_shape, m_shape, dst_shape=None, dst_buf=nl.psum, dst_dtype=nl.float32, s_buf=nl.sbuf):
    def k():
        s = nl.zeros(s_shape, dtype=nl.float32, buffer=s_buf)
        m = nl.zeros(m_shape, dtype=nl.float32)
        d = nl.ndarray(dst_shape or (s_shape[1], m_shape[1]), dtype=dst_dtype, buffer=dst_buf)
        nisa.nc_matmul(d, s, m)

    return k


def test_matmul_contraction_mismatch():
    _raises(_mm_kernel((128, 64), (64, 64)), match="contraction .* sizes differ")


def test_matmul_contraction_over_128_rejected():
    def k(a, b):
        s = nl.load(a)  # K = 256 partitions cannot even be loaded
        nisa.nc_matmul(nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.psum), s, nl.load(b))

    _raises(
        k,
        np.zeros((256, 64), F32),
        np.zeros((256, 64), F32),
        match="number of partitions 256 exceeds architecture limitation of 128",
    )


def test_matmul_stationary_free_at_most_128():
    msg = _raises(
        _mm_kernel((128, 256), (128, 64), dst_shape=(128, 64)),
        match="free size 256 of 'stationary' exceeds gemm_stationary_fmax",
    )
    assert msg.startswith("nisa.nc_matmul")


def test_matmul_moving_free_at_most_512():
    _raises(
        _mm_kernel((128, 64), (128, 1024), dst_shape=(64, 512)),
        match="free size 1024 of 'moving' exceeds gemm_moving_fmax",
    )


def test_matmul_operands_in_sbuf():
    _raises(_mm_kernel((128, 64), (128, 64), s_buf=nl.psum),
            match="operand 'stationary' .* is in PSUM; it must be in SBUF")


def test_matmul_dst_in_psum():
    _raises(_mm_kernel((128, 64), (128, 64), dst_buf=nl.sbuf), match="operand 'dst' .* is in SBUF; it must be in PSUM")


def test_matmul_dst_fp32():
    _raises(_mm_kernel((128, 64), (128, 64), dst_dtype=nl.bfloat16),
            match="operand 'dst' .* has dtype bfloat16; it must be float32")


def test_no_partition_broadcast_in_binary_ops():
    def k():
        a = nl.zeros((128, 4), dtype=nl.float32)
        b = nl.zeros((1, 4), dtype=nl.float32)
        nl.add(a, b)

    msg = _raises(k, match="partition dimension mismatch")
    assert "'x' has 128" in msg and "'y' has 1" in msg


def test_no_partition_broadcast_in_tensor_tensor_and_tensor_scalar():
    def k1():
        a = nl.zeros((128, 4), dtype=nl.float32)
        b = nl.zeros((64, 4), dtype=nl.float32)
        nisa.tensor_tensor(nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf), a, b, nl.add)

    def k2():
        a = nl.zeros((128, 4), dtype=nl.float32)
        c = nl.zeros((1, 1), dtype=nl.float32)
        nisa.tensor_scalar(nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf), a, nl.add, c)

    _raises(k1, match="nisa.tensor_tensor: partition dimension mismatch")
    _raises(k2, match="nisa.tensor_scalar: partition dimension mismatch")


def test_reductions_over_free_axes_only():
    def k1():
        nl.sum(nl.zeros((128, 4), dtype=nl.float32), axis=0, keepdims=True)

    def k2():
        d = nl.ndarray((1, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(d, nl.add, nl.zeros((128, 4), dtype=nl.float32), axis=0)

    _raises(k1, match="nl.sum: reduction over the partition axis")
    _raises(k2, match="nisa.tensor_reduce: reduction over the partition axis")


def test_store_of_psum_tile_rejected():
    def k(a):
        out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        ps = nl.zeros(a.shape, dtype=nl.float32, buffer=nl.psum)
        nl.store(out, ps)

    _raises(k, np.zeros((4, 4), F32), match="cannot store PSUM tile 'value'.*tensor_copy")


def test_sbuf_capacity_trn1_vs_trn2():
    def k(kib):
        t = nl.ndarray((128, kib * 256), dtype=nl.float32, buffer=nl.sbuf)  # kib KiB/partition
        nisa.memset(t, 0.0)

    # 200 KiB per partition: over trn1's 192 KiB, within trn2's 224 KiB
    msg = _raises(k, kib=200, match="SBUF capacity exceeded on trn1")
    assert "204800" in msg and "196608" in msg
    _, p = profile(k, kib=200, target="trn2")
    assert p.peak_sbuf_bytes == 200 * 1024
    # 240 KiB: over both
    _raises(k, kib=240, target="trn2", match="SBUF capacity exceeded on trn2.*229376")


def test_capacity_counts_live_allocations_only():
    def k():
        for _ in nl.affine_range(4):
            t = nl.ndarray((128, 25 * 1024), dtype=nl.float32, buffer=nl.sbuf)  # 100 KiB
            nisa.memset(t, 1.0)
            del t  # freed before the next iteration allocates

    def k_keep():
        keep = []
        for _ in nl.affine_range(2):
            keep.append(nl.ndarray((128, 25 * 1024), dtype=nl.float32, buffer=nl.sbuf))
        _use_all_at_end(keep)

    _, p = profile(k)
    assert p.peak_sbuf_bytes == 100 * 1024
    msg = _raises(k_keep, match="SBUF capacity exceeded on trn1")
    assert "307200 bytes per partition" in msg  # both tiles plus the sink they are read into


def test_capacity_counts_liveness_not_python_lifetime():
    """Twenty PSUM tiles held by one function, each evacuated right after its matmul: the
    compiler allocates by liveness (first write to last read), so at most two are live at once."""
    def k(a):
        x = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(x, a)
        out = nl.ndarray((20 * 128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        accs = []  # every PSUM tile stays referenced until the kernel returns
        for i in range(20):
            acc = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum, name=f"acc{i}")
            nisa.nc_matmul(acc, x, x)
            y = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(y, acc)
            nisa.dma_copy(out[i * 128:(i + 1) * 128, :], y)
            accs.append(acc)
        return out

    a = np.eye(128, dtype=F32) * 2
    out, p = profile(k, a)
    np.testing.assert_array_equal(out, np.tile(a.T @ a, (20, 1)))
    assert p.peak_psum_bytes == 512  # one (128, 128) fp32 tile: each is dead once copied out

    def k_unused():
        nl.ndarray((128, 25 * 1024), dtype=nl.float32, buffer=nl.sbuf)  # never touched: never live
        nl.ndarray((128, 25 * 1024), dtype=nl.float32, buffer=nl.sbuf)

    assert profile(k_unused)[1].peak_sbuf_bytes == 0


def test_bool_of_tile_is_python_truth():
    """The 0.6 NkiTensor defines no __bool__: a tile is truthy (presence, never its values)."""
    def k(a, bias=None):
        t = nl.load(a)
        o = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        cfg = {"bias": bias}
        if cfg["bias"] and nl.greater(t, 0.0):  # both tiles: True regardless of the values
            t = nl.add(t, nl.load(bias))
        nl.store(o, t)
        return o

    a = -np.ones((2, 2), F32)  # every element fails `> 0`: only Python truth can take the branch
    np.testing.assert_array_equal(simulate(k, a, bias=np.full((2, 2), 2.0, F32)), a + 2)
    np.testing.assert_array_equal(simulate(k, a), a)



def test_compute_on_hbm_operand_rejected():
    def k(a):
        nl.exp(a)

    _raises(k, np.ones((2, 2), F32), match="nl.exp: operand 'x' .* is in HBM")


def test_out_of_bounds_slice_rejected():
    def k(a):
        nl.load(a[0:4, 0:8])

    _raises(k, np.ones((4, 4), F32), match="out-of-bounds")


def test_unsupported_dtype_rejected():
    def k(a):
        nl.load(a)

    with pytest.raises(EmulatorError, match="unsupported dtype float64"):
        simulate(k, np.ones((2, 2)))


def test_bitwise_on_float_rejected():
    def k(a):
        t = nl.load(a)
        nl.bitwise_xor(t, t)

    _raises(k, np.ones((2, 2), F32), match="bitvec operators need integer")


def test_returning_a_tile_rejected():
    def k(a):
        return nl.load(a)

    _raises(k, np.ones((2, 2), F32), match="kernels return HBM tensors")


def test_dma_cannot_touch_psum():
    def k(a):
        ps = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.psum)
        nisa.dma_copy(dst=ps, src=a)

    _raises(k, np.ones((2, 2), F32), match="nisa.dma_copy: operand 'dst' .* is in PSUM, which DMA cannot access")


def test_compute_into_hbm_dst_rejected():
    def k(a):
        nisa.tensor_copy(a, nl.load(a))

    _raises(k, np.ones((2, 2), F32), match="nisa.tensor_copy: operand 'dst' .* is in HBM")


def test_vector_engine_transpose_at_most_32x32():
    def k():
        t = nl.zeros((64, 64), dtype=nl.float32)
        nisa.nc_transpose(nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.sbuf), t)

    _raises(k, match="the Vector Engine transposes at most 32x32")


def test_tensor_engine_transpose_free_at_most_128():
    def k():
        t = nl.zeros((4, 256), dtype=nl.float32)
        nl.transpose(t)

    _raises(k, match="number of partitions 256 exceeds architecture limitation of 128")


def test_matmul_dst_shape_checked():
    _raises(_mm_kernel((128, 64), (128, 32), dst_shape=(64, 64)), match="does not match")
