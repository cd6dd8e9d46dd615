"""NKI 0.6 tensor views, indexing, access patterns and DMA gather/scatter.

Each case mirrors a statement or example of AWS's documentation
(aws-neuron-sdk: nki/get-started/nki-language-guide.rst "Tensor Values" /
"Tensor Indexing", nki/api/nki/language/__init__.py NkiTensor methods,
nki/deep-dives/nki-aps.rst, nki/api/nki/isa/__init__.py dma_copy); expected
values come from NumPy on the same data, never from the emulator.
All data are small integers or exact binary fractions, so every comparison
is exact.
"""

import ml_dtypes
import numpy as np
import pytest

from trnsci.nki.emulator import nisa, nl, profile, simulate
from trnsci.nki.emulator.errors import EmulatorError, NkiValidationError

F32 = np.float32


def run(fn, *args, target="trn1"):
    return profile(fn, *args, target=target)


def _sb(shape, dtype=nl.float32, name="t"):
    return nl.ndarray(shape, dtype=dtype, buffer=nl.sbuf, name=name)


def _hbm_out(shape, dtype=nl.float32):
    return nl.ndarray(shape, dtype=dtype, buffer=nl.shared_hbm)


def _to_hbm(t):
    """Copy an SBUF view out through a contiguous tile (tensor_copy) + DMA."""
    c = _sb(t.shape, t.dtype, "copy")
    nisa.tensor_copy(dst=c, src=t)
    out = _hbm_out(t.shape, t.dtype)
    nisa.dma_copy(dst=out, src=c)
    return out


def _load(a):
    t = _sb(a.shape, a.dtype, "in")
    nisa.dma_copy(dst=t, src=a)
    return t


# ------------------------------------------------------------ indexing rules


def test_indexing_shapes_follow_language_guide():
    def k():
        t = _sb((64, 64, 64))
        assert t[0, 0, 10].shape == (1, 1)  # partition int keeps size 1
        assert t[:, 0].shape == (64, 64)  # free int drops the dim
        assert t[:, 0, 10].shape == (64, 1)  # ... but the tile stays 2-D
        assert t[0:64, 0, 0:64].shape == (64, 64)
        assert t[:, :, ::2].shape == (64, 64, 32)
        assert t[...].shape == (64, 64, 64)
        assert t[0, ..., :].shape == (1, 64, 64)
        u = t[0, ...]
        assert u.shape == (1, 64, 64) and u[:, 0:32, :].shape == (1, 32, 64)
        h = nl.ndarray((4, 128, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        assert h[0, :, :].shape == (128, 32)  # HBM drops the dim
        assert h[1, 2].shape == (32,)
        s = _sb((128, 64))
        assert s.strides == (64, 1) and s.offset == 0 and s.ndim == 2 and s.size == 128 * 64
        v = s[:, 16:32]
        assert v.offset == 16 and v.strides == (64, 1)
        assert s[3].shape == (1, 64) and s[3].offset == 3 * 64
        assert s[nl.ds(8, 4), nl.ds(2, 5)].shape == (4, 5)
        assert t[0:64, :, :].permute((0, 2, 1))[:, 0, :].shape == (64, 64)

    run(k)


def test_ds_and_slices_read_the_documented_elements():
    def k(a):
        o1 = _hbm_out((3, 4))
        nisa.dma_copy(dst=o1, src=a[nl.ds(2, 3), nl.ds(1, 4)])
        o2 = _hbm_out((2, 3))
        nisa.dma_copy(dst=o2, src=a[1:5:2, ::2])
        o3 = _hbm_out((6,))
        nisa.dma_copy(dst=o3, src=a[4])
        return o1, o2, o3

    a = np.arange(36, dtype=F32).reshape(6, 6)
    (o1, o2, o3), prof = run(k, a)
    np.testing.assert_array_equal(o1, a[2:5, 1:5])
    np.testing.assert_array_equal(o2, a[1:5:2, ::2])
    np.testing.assert_array_equal(o3, a[4])
    # each copy reads exactly the viewed elements
    assert prof.hbm_read_bytes == 4 * (12 + 6 + 6)


@pytest.mark.parametrize(
    "bad, what",
    [
        (lambda a: a[np.array([0, 2])], "integer array"),
        (lambda a: a[[0, 2]], "list of indices"),
        (lambda a: a[None], "newaxis"),
        (lambda a: a[True], "boolean"),
        (lambda a: a[1.0], "float"),
    ],
)
def test_non_affine_indices_are_rejected_as_gathers(bad, what):
    def k(a):
        bad(a)

    with pytest.raises(NkiValidationError, match=r"indexing 'a'") as e:
        run(k, np.zeros((4, 4), F32))
    if what != "newaxis":
        assert "gather" in str(e.value) and "vector_offset" in str(e.value)


def test_tensor_valued_index_is_rejected():
    def k(a):
        idx = _sb((1, 1), nl.int32, "idx")
        a[idx]

    with pytest.raises(NkiValidationError, match=r"indexing 'a'.*the tensor 'idx'.*gather"):
        run(k, np.zeros((4, 4), F32))


@pytest.mark.parametrize(
    "bad, msg",
    [
        (lambda t: t[::2, :], "partition dimension"),
        (lambda t: t[:, 5:9], "out-of-bounds"),
        (lambda t: t[:, 3:3], "empty slice"),
        (lambda t: t[:, ::-1], "step must be >= 1"),
        (lambda t: t[0, 0, 0], "too many indices"),
        (lambda t: t[:, 8], "out of bounds"),
        (lambda t: nl.ds(-1, 2), "'start' must be >= 0"),
        (lambda t: nl.ds(0, 0), "'size' must be >= 1"),
        (lambda t: nl.ds(0.5, 2), "compile-time integer"),
    ],
)
def test_bad_slices_name_the_problem(bad, msg):
    def k():
        bad(_sb((8, 8)))

    with pytest.raises(NkiValidationError, match=msg):
        run(k)


# ------------------------------------------------------------ view primitives


def test_views_share_storage():
    # language guide: memset through a reshaped view is visible in the base tile
    def k():
        t = _sb((4, 8))
        nisa.memset(dst=t, value=0.0)
        u = t.reshape((4, 2, 4))
        nisa.memset(dst=u[:, 1, :], value=1.0)  # elements 4..7 of each partition
        w = t.permute((0, 1))[:, 0:2]
        nisa.memset(dst=w, value=2.0)
        return _to_hbm(t)

    out, _ = run(k)
    exp = np.zeros((4, 8), F32)
    exp[:, 4:] = 1
    exp[:, 0:2] = 2
    np.testing.assert_array_equal(out, exp)


def test_slice_select_permute_broadcast_values():
    def k(a, b):
        t = _load(a)  # (4, 2, 3)
        s = t.slice(dim=2, start=0, end=3, step=2)  # (4, 2, 2)
        sel = t.select(dim=1, index=1)  # (4, 3)
        per = t.permute((0, 2, 1))  # (4, 3, 2)
        assert (s.shape, sel.shape, per.shape) == ((4, 2, 2), (4, 3), (4, 3, 2))
        assert not per.is_contiguous() and t.is_contiguous()
        col = _load(b)  # (4, 1)
        bc = col.expand_dim(1).broadcast(dim=1, size=3)  # (4, 3, 1)
        assert bc.shape == (4, 3, 1) and bc.strides[1] == 0
        sq = bc.squeeze_dim(2)  # (4, 3)
        return _to_hbm(s), _to_hbm(sel), _to_hbm(per), _to_hbm(sq)

    a = np.arange(24, dtype=F32).reshape(4, 2, 3)
    b = np.array([[1], [2], [3], [4]], F32)
    (s, sel, per, sq), _ = run(k, a, b)
    np.testing.assert_array_equal(s, a[:, :, 0:3:2])
    np.testing.assert_array_equal(sel, a[:, 1, :])
    np.testing.assert_array_equal(per, a.transpose(0, 2, 1))
    np.testing.assert_array_equal(sq, np.repeat(b, 3, axis=1))


def test_reshape_dim_flatten_rearrange_values():
    def k(a):
        t = _load(a)  # (4, 24)
        g = t.rearrange(("b", ("h", "w")), ("b", "w", "h"), {"h": 4})  # (4, 6, 4)
        m = g.rearrange(("b", "w", "h"), ("b", ("w", "h")))  # not mergeable -> error
        return m

    a = np.arange(96, dtype=F32).reshape(4, 24)
    with pytest.raises(NkiValidationError, match=r"flatten_dims.*not contiguous"):
        run(k, a)

    def k2(a):
        t = _load(a)
        r = t.reshape_dim(1, (4, -1))
        assert r.shape == (4, 4, 6) and r.strides == (24, 6, 1)
        f = r.flatten_dims(1, 2)
        g = t.rearrange(("b", ("h", "w")), ("b", "w", "h"), {"h": 4})
        assert g.shape == (4, 6, 4)
        return _to_hbm(f), _to_hbm(g), _to_hbm(t.reshape((4, 2, 12)))

    (f, g, rs), _ = run(k2, a)
    np.testing.assert_array_equal(f, a)
    np.testing.assert_array_equal(g, a.reshape(4, 4, 6).transpose(0, 2, 1))
    np.testing.assert_array_equal(rs, a.reshape(4, 2, 12))


@pytest.mark.parametrize(
    "bad, msg",
    [
        (lambda t: t.permute((1, 0, 2)), "partition dimension must stay"),
        (lambda t: t.permute((0, 2, 1)).reshape((8, 24)), "without a copy"),
        (lambda t: t.reshape((4, 48)), "partition dimension must be preserved"),
        (lambda t: t.reshape((8, -1)), "-1 is not allowed"),
        (lambda t: t.reshape([8, (24,)]), "must be a tuple"),
        (lambda t: t.broadcast(1, 4), "must have size 1"),
        (lambda t: t.expand_dim(0), "before the partition dimension"),
        (lambda t: t.select(0, 1), "partition dimension"),
        (lambda t: t.slice(1, 3, 3), "start < end"),
        (lambda t: t[:, 0, 0:1].squeeze_dim(1), "at least 2-D"),
        (lambda t: t.reshape_dim(0, (2, 4)), "partition dimension"),
        (lambda t: t.flatten_dims(0, 1), "'start_dim' must be > 0"),
        (lambda t: t.rearrange(("p", "a"), ("p", "a")), "2 entries for a 3-D"),
        (lambda t: t.view(nl.float32).slice(2, 0, 3, 2).view(nl.int8), "contiguous"),
        (lambda t: t.indirect(t), "NeuronCore-v4"),
    ],
)
def test_view_primitive_constraints(bad, msg):
    def k():
        bad(_sb((8, 4, 6)))

    with pytest.raises(NkiValidationError, match=msg):
        run(k)


def test_view_bitcast_reinterprets_bits():
    def k(a, u8):
        t = _load(a)  # (2, 3) float32
        assert t.view(nl.uint8).shape == (2, 12)
        assert t.view(nl.int32).shape == (2, 3)
        w = _load(u8)  # (2, 8) uint8
        assert w.view(nl.float32).shape == (2, 2)
        return _to_hbm(t.view(nl.uint32)), _to_hbm(t.view(nl.uint8)), _to_hbm(w.view(nl.float32))

    a = np.array([[1.0, -2.0, 0.5], [3.0, 0.0, -0.25]], F32)
    u8 = np.frombuffer(np.array([1.0, 2.0, -1.0, 4.0], F32).tobytes(), np.uint8).reshape(2, 8)
    (bits, by, back), _ = run(k, a, u8)
    assert bits[0, 0] == 0x3F800000 and bits[0, 1] == 0xC0000000
    np.testing.assert_array_equal(bits, a.view(np.uint32))
    np.testing.assert_array_equal(by, a.view(np.uint8))
    np.testing.assert_array_equal(back, np.array([[1.0, 2.0], [-1.0, 4.0]], F32))


def test_get_pattern_and_is_indirect():
    def k():
        t = _sb((128, 64))
        assert t.get_pattern() == [[64, 128], [1, 64]]
        assert t[0:64, 1::2].get_pattern() == [[64, 64], [2, 32]]
        assert not t.is_indirect()

    run(k)


# ------------------------------------------------------------ .ap


def test_ap_concrete_example_of_the_deep_dive():
    # t[0:16, 8:16] == t.ap(pattern=[[16, 16], [1, 8]], offset=8)
    def k(a):
        t = _load(a)
        v = t.ap(pattern=[[16, 16], [1, 8]], offset=8)
        assert v.shape == (16, 8)
        big = _sb((128, 1024), nl.float16, "big")
        assert big.ap(pattern=[(1024, 128), (2, 512)]).shape == (128, 512)
        pat = big.get_pattern()
        pat[0][1] = 64
        assert big.ap(pattern=pat).shape == (64, 1024)
        return _to_hbm(v)

    a = np.arange(256, dtype=F32).reshape(16, 16)
    out, _ = run(k, a)
    np.testing.assert_array_equal(out, a[0:16, 8:16])


def test_ap_dtype_reinterpret_int32_as_bf16():
    def k(a):
        t = _load(a)  # (2, 3) int32
        v = t.ap(pattern=[[6, 2], [1, 6]], dtype=nl.bfloat16)
        assert v.shape == (2, 6) and v.dtype == nl.bfloat16
        return _to_hbm(v)

    a = np.array([[0x3F800000, 0x40004000, 7], [-1, 0, 0x12345678]], np.int32)
    out, _ = run(k, a)
    np.testing.assert_array_equal(out.view(np.uint16), a.view(np.uint16))
    assert out.dtype == ml_dtypes.bfloat16


def test_ap_on_hbm_any_pattern():
    # HBM has no partition dim: a transposing pattern is fine
    def k(a):
        out = _hbm_out((3, 4))
        t = _sb((3, 4), name="tt")
        nisa.dma_copy(dst=t, src=a.ap(pattern=[[1, 3], [3, 4]]))
        nisa.dma_copy(dst=out, src=t)
        return out

    a = np.arange(12, dtype=F32).reshape(4, 3)
    out, _ = run(k, a)
    np.testing.assert_array_equal(out, a.T)


@pytest.mark.parametrize(
    "bad, msg",
    [
        (lambda t, h, i: t.ap(pattern=[[64, 8], [1, 32]], offset=0), "partition step must equal"),
        (lambda t, h, i: t.ap(pattern=[[32, 16], [1, 33]]), "leaves the storage"),
        (lambda t, h, i: h.ap(pattern=[[8, 8], [1, 8]]), "outside storage"),
        (lambda t, h, i: h.ap(pattern=[[8, 2], [1, 8]], vector_offset=i, scalar_offset=i), "at most one"),
        (lambda t, h, i: t.ap(pattern=[[32, 2], [1, 8]], vector_offset=i), "HBM tensors only"),
        (lambda t, h, i: h.ap(pattern=[[8, 3], [1, 8]], vector_offset=i), r"shape \(3, 1\)"),
        (lambda t, h, i: h.ap(pattern=[[8, 2], [1, 8]], scalar_offset=i), r"shape \(1, 1\)"),
        (lambda t, h, i: h.ap(pattern=[[1, 2], [1, 1], [1, 1], [1, 1], [1, 1], [1, 1]]), "at most 5"),
        (lambda t, h, i: h.ap(pattern=[[8, 2], [1, 8]], vector_offset=i).ap(pattern=[[8, 2], [1, 8]]), "already"),
    ],
)
def test_ap_rules(bad, msg):
    def k(h):
        t = _sb((16, 32))
        i = _sb((2, 1), nl.int32, "idx")
        bad(t, h, i)

    with pytest.raises(NkiValidationError, match=msg):
        run(k, np.zeros((7, 8), F32))


def test_float_index_tile_is_rejected():
    def k(h):
        i = _sb((2, 1), nl.float32, "idx")
        h.ap(pattern=[[8, 2], [1, 8]], vector_offset=i, indirect_dim=0)

    with pytest.raises(NkiValidationError, match="integer dtype"):
        run(k, np.zeros((7, 8), F32))


# ------------------------------------------------------------ indirect DMA


def _gather_kernel(data, indices, skip=False):
    # mirrors the "Indirect gather example" of nisa.dma_copy
    P, F = indices.shape[0], data.shape[1]
    output = nl.ndarray((P, F), dtype=data.dtype, buffer=nl.shared_hbm)
    idx = nl.ndarray((P, 1), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx, src=indices)
    dst = nl.ndarray((P, F), dtype=data.dtype, buffer=nl.sbuf)
    nisa.memset(dst=dst, value=-1.0)
    kw = {"oob_mode": nisa.oob_mode.skip} if skip else {}
    nisa.dma_copy(dst=dst, src=data.ap(pattern=[[F, P], [1, F]], vector_offset=idx, indirect_dim=0), **kw)
    nisa.dma_copy(dst=output, src=dst)
    return output


def _scatter_kernel(src_data, indices, output):
    # mirrors the "Indirect scatter example" of nisa.dma_copy
    P, F = src_data.shape
    src = nl.ndarray((P, F), dtype=src_data.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=src_data)
    idx = nl.ndarray((P, 1), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx, src=indices)
    nisa.dma_copy(dst=output.ap(pattern=[[F, P], [1, F]], vector_offset=idx, indirect_dim=0), src=src)
    return output


def test_indirect_gather_doc_example():
    data = np.arange(50, dtype=F32).reshape(10, 5)
    rows = np.array([7, 0, 3, 7], np.uint32)
    out, prof = run(_gather_kernel, data, rows.reshape(4, 1))
    np.testing.assert_array_equal(out, data[rows])
    # bytes: 4 indices + 4 gathered rows of 5 fp32 read, 4 rows written -- not the 10-row table
    assert prof.hbm_read_bytes == 4 * 4 + 4 * 5 * 4
    assert prof.hbm_write_bytes == 4 * 5 * 4
    assert prof.dma_transfers == 3


def test_indirect_scatter_doc_example():
    src = np.arange(1, 21, dtype=F32).reshape(4, 5)
    rows = np.array([[2], [0], [9], [5]], np.uint32)
    output = np.zeros((10, 5), F32)
    out, prof = run(_scatter_kernel, src, rows, output)
    exp = np.zeros((10, 5), F32)
    exp[rows[:, 0]] = src
    np.testing.assert_array_equal(out, exp)
    np.testing.assert_array_equal(output, exp)  # written in place, as on hardware
    assert prof.hbm_write_bytes == 4 * 5 * 4
    assert prof.hbm_read_bytes == 4 * 5 * 4 + 4 * 4


def test_out_of_bounds_index_errors_or_skips():
    data = np.arange(50, dtype=F32).reshape(10, 5)
    rows = np.array([[1], [10], [4]], np.uint32)
    with pytest.raises(NkiValidationError, match="out of bounds"):
        run(_gather_kernel, data, rows)
    out, prof = run(lambda d, i: _gather_kernel(d, i, skip=True), data, rows)
    np.testing.assert_array_equal(out[[0, 2]], data[[1, 4]])
    np.testing.assert_array_equal(out[1], -1.0)  # skipped row left untouched
    assert prof.hbm_read_bytes == 3 * 4 + 2 * 5 * 4  # only the two valid rows moved


def test_vector_select_and_dynamic_select():
    def k(h, rows, which):
        idx = _sb((3, 1), nl.int32, "rows")
        nisa.dma_copy(dst=idx, src=rows)
        g = _sb((3, 2, 4), name="g")
        v = h.vector_select(0, idx)
        assert v.shape == (3, 2, 4) and v.is_indirect()
        nisa.dma_copy(dst=g, src=v)
        s = _sb((1, 1), nl.int32, "s")
        nisa.dma_copy(dst=s, src=which)
        one = _sb((2, 4), name="one")
        sel = h.select(0, s)
        assert sel.shape == (2, 4) and sel.is_indirect()
        nisa.dma_copy(dst=one, src=sel)
        return _to_hbm(g), _to_hbm(one)

    h = np.arange(40, dtype=F32).reshape(5, 2, 4)
    rows = np.array([[4], [1], [1]], np.int32)
    (g, one), _ = run(k, h, rows, np.array([[3]], np.int32))
    np.testing.assert_array_equal(g, h[[4, 1, 1]])
    np.testing.assert_array_equal(one, h[3])


def test_scalar_offset_selects_a_block_at_run_time():
    # nki-library style: expert weights [E, R, C]; scalar_offset scales by dim 0's stride
    def k(w, e):
        s = _sb((1, 1), nl.int32, "expert")
        nisa.dma_copy(dst=s, src=e)
        t = _sb((4, 3), name="w")
        nisa.dma_copy(dst=t, src=w.ap(pattern=[[3, 4], [1, 3]], offset=0, scalar_offset=s, indirect_dim=0))
        return _to_hbm(t)

    w = np.arange(36, dtype=F32).reshape(3, 4, 3)
    out, prof = run(k, w, np.array([[2]], np.int32))
    np.testing.assert_array_equal(out, w[2])
    assert prof.hbm_read_bytes == 4 + 12 * 4


@pytest.mark.parametrize(
    "kw, target, msg",
    [
        ({"dge_mode": nisa.dge_mode.hwdge}, "trn1", "hwdge"),
        ({"dge_mode": nisa.dge_mode.hwdge}, "trn2", "software DGE"),
        ({"dge_mode": nisa.dge_mode.none}, "trn2", "needs software DGE"),
        ({"priority": 0}, "trn2", "NeuronCore-v4"),
        ({"oob_mode": "skip"}, "trn1", "must be a nisa.oob_mode member"),  # strings are gone since NKI 0.3
    ],
)
def test_dma_copy_dge_rules(kw, target, msg):
    def k(d, i):
        idx = _sb((2, 1), nl.uint32, "idx")
        nisa.dma_copy(dst=idx, src=i)
        dst = _sb((2, 5), name="dst")
        nisa.dma_copy(dst=dst, src=d.ap(pattern=[[5, 2], [1, 5]], vector_offset=idx, indirect_dim=0), **kw)

    with pytest.raises(NkiValidationError, match=msg):
        run(k, np.zeros((4, 5), F32), np.zeros((2, 1), np.uint32), target=target)


def test_dma_copy_plain_rules_and_conversion():
    def k(a):
        t = _sb((2, 3), nl.bfloat16, "t")
        nisa.dma_copy(dst=t, src=a)  # fp32 -> bf16 conversion by the DMA
        out = _hbm_out((3, 2))
        nisa.dma_copy(dst=out, src=t)  # equal element counts, shapes may differ
        return out

    a = np.array([[1.0, 1.00390625, 3.0], [-2.0, 0.5, 1 + 2**-9]], F32)
    out, _ = run(k, a)
    np.testing.assert_array_equal(out.reshape(-1), a.astype(ml_dtypes.bfloat16).astype(F32).reshape(-1))

    def bad_size(a):
        nisa.dma_copy(dst=_sb((2, 2)), src=a)

    with pytest.raises(NkiValidationError, match="differ in size"):
        run(bad_size, a)

    def bad_psum(a):
        nisa.dma_copy(dst=nl.ndarray((2, 3), dtype=nl.float32, buffer=nl.psum), src=a)

    with pytest.raises(NkiValidationError, match="PSUM"):
        run(bad_psum, a)


def test_noncontiguous_hbm_argument_is_written_back():
    def k(a, o):
        t = _load(a)
        nisa.dma_copy(dst=o, src=t)

    a = np.arange(6, dtype=F32).reshape(2, 3)
    base = np.zeros((3, 2), F32)
    o = base.T  # non-contiguous (2, 3) view of the caller's array
    simulate(k, a, o)
    np.testing.assert_array_equal(base.T, a)


def test_validation_error_is_an_emulator_error():
    assert issubclass(NkiValidationError, EmulatorError) and issubclass(NkiValidationError, ValueError)


def test_scalar_offset_on_sbuf_with_dtype_feeds_a_compute_instruction():
    # NL .ap example form: sb.ap(pattern=..., dtype=nl.bfloat16, scalar_offset=idx, indirect_dim=1);
    # the offset scales by the stride of dim 1 of the fp32 tensor (one fp32 = two bf16 elements)
    def k(a, which):
        sb = _load(a)  # (4, 8) fp32
        s = _sb((1, 1), nl.int32, "s")
        nisa.dma_copy(dst=s, src=which)
        v = sb.ap(pattern=[[16, 4], [1, 4]], dtype=nl.bfloat16, scalar_offset=s, indirect_dim=1)
        assert v.shape == (4, 4) and v.is_indirect()
        sb.select(1, s)  # would be 1-D: dynamic select keeps SBUF tiles >= 2-D
        return _to_hbm(v)

    a = np.arange(32, dtype=F32).reshape(4, 8) + 0.5
    with pytest.raises(NkiValidationError, match="fewer than 2 dimensions"):
        run(k, a, np.array([[2]], np.int32))

    def k2(a, which):
        sb = _load(a)
        s = _sb((1, 1), nl.int32, "s")
        nisa.dma_copy(dst=s, src=which)
        v = sb.ap(pattern=[[16, 4], [1, 4]], dtype=nl.bfloat16, scalar_offset=s, indirect_dim=1)
        t3 = sb.reshape((4, 2, 4))
        row = t3.select(1, s)  # run-time pick of one of the two halves: (4, 4)
        return _to_hbm(v), _to_hbm(row)

    (bits, row), _ = run(k2, a, np.array([[1]], np.int32))
    np.testing.assert_array_equal(bits.view(np.uint16), a[:, 1:3].view(np.uint16))
    np.testing.assert_array_equal(row, a[:, 4:8])


def test_psum_views_keep_accumulation_groups():
    # a matmul into one half of a PSUM tile starts a group there only
    def k(x, y):
        xs, ys = _load(x), _load(y)
        ps = nl.ndarray((2, 4), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps[:, 0:2], xs, ys)
        nisa.nc_matmul(ps[:, 0:2], xs, ys)  # accumulates
        nisa.nc_matmul(ps[:, 2:4], xs, ys)  # first write of this half: overwrites
        return _to_hbm(ps)

    x = np.array([[1, 2], [3, 4]], F32)
    y = np.array([[1, 0], [0, 1]], F32)
    out, _ = run(k, x, y)
    np.testing.assert_array_equal(out, np.hstack([2 * x.T @ y, x.T @ y]))
