"""nki.language names of the 0.6 stub (Neuron 2.32.0) added to the emulator, against NumPy."""

import dataclasses

import numpy as np
import pytest

from trnsci.nki.emulator import nisa, nl, profile, simulate
from trnsci.nki.emulator.errors import NkiValidationError, NotEmulatedError

F32 = np.float32


def _out(shape, dtype=nl.float32):
    return nl.ndarray(shape, dtype=dtype, buffer=nl.shared_hbm)


def test_creation_helpers():
    def k(a):
        x = nl.load(a)
        o1, o2, o3, o4 = _out((3, 5)), _out((3, 5), nl.int32), _out((3, 5)), _out((3, 5))
        nl.store(o1, nl.ones((3, 5), nl.float32))
        nl.store(o2, nl.full((3, 5), 7, nl.int32))
        nl.store(o3, nl.zeros_like(x))
        e = nl.empty_like(x, buffer=nl.MemoryRegion.sbuf)
        assert e.shape == x.shape and nl.is_sbuf(e.buffer) and not nl.is_psum(e.buffer)
        nisa.tensor_copy(e, x)
        nl.store(o4, nl.negative(e))
        return o1, o2, o3, o4

    a = np.arange(15, dtype=F32).reshape(3, 5) - 7
    (o1, o2, o3, o4), prof = profile(k, a)
    np.testing.assert_array_equal(o1, np.ones((3, 5)))
    np.testing.assert_array_equal(o2, np.full((3, 5), 7))
    np.testing.assert_array_equal(o3, np.zeros((3, 5)))
    np.testing.assert_array_equal(o4, -a)
    # ones, full, zeros_like: one memset each; negative: one tensor_scalar
    assert prof.by_instruction["nisa.memset@vector"] == 3
    assert prof.by_instruction["nisa.tensor_scalar@vector"] == 1


def test_buffer_predicates():
    assert nl.is_hbm(nl.hbm) and nl.is_hbm(nl.shared_hbm) and nl.is_hbm(nl.MemoryRegion.private_hbm)
    assert nl.is_on_chip(nl.psum) and not nl.is_on_chip(nl.shared_hbm)
    assert nl.is_psum(nl.MemoryRegion.psum) and nl.is_sbuf(nl.sbuf)


def test_broadcast_to_free_dims_and_expand_dims():
    def k(a):
        col = nl.load(a)  # (4, 1)
        b = nl.broadcast_to(col, (4, 6))
        assert nl.broadcast_to(b, (4, 6)) is b
        c = nl.expand_dims(b, 2)
        assert c.shape == (4, 6, 1)
        o = _out((4, 6))
        nl.store(o, b)
        return o

    a = np.arange(4, dtype=F32).reshape(4, 1)
    o, prof = profile(k, a)
    np.testing.assert_array_equal(o, np.broadcast_to(a, (4, 6)))
    assert prof.by_instruction["nisa.tensor_copy@vector"] == 1


@pytest.mark.parametrize("shape, msg", [((4, 6, 1), "rank"), ((4, 3), "only broadcast from 1")])
def test_broadcast_to_rejects_bad_shapes(shape, msg):
    def k(a):
        nl.broadcast_to(nl.load(a), shape)

    with pytest.raises(NkiValidationError, match=msg):
        simulate(k, np.zeros((4, 2), F32))


def test_broadcast_to_partition_dim_is_one_sbuf_dma():
    def k(a):
        o = _out((4, 3))
        nl.store(o, nl.broadcast_to(nl.load(a), (4, 3)))
        return o

    a = np.array([[1.0, 2.0, 3.0]], F32)
    o, prof = profile(k, a)
    np.testing.assert_array_equal(o, np.broadcast_to(a, (4, 3)))
    assert prof.instructions["dma"] == 3 and prof.hbm_read_bytes == a.nbytes  # load, broadcast, store


def test_ndarray_address_keyword():
    def ok():
        t = nl.ndarray((8, 4), nl.float32, buffer=nl.sbuf, address=(120, 0))
        assert t.shape == (8, 4)

    simulate(ok)()

    def bad():
        nl.ndarray((16, 4), nl.float32, buffer=nl.sbuf, address=(120, 0))

    with pytest.raises(NkiValidationError, match="'address' partition offset 120"):
        simulate(bad)()


def test_placed_tiles_share_their_addresses():
    """Tiles placed at one address share its bytes (nki-library rotates PSUM banks this way)."""
    def use_all(tiles):  # write each, then read all: every tile live at once
        for t in tiles:
            nisa.memset(t, 0.0)
        sink = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
        for t in tiles:
            nisa.tensor_copy(sink, t)

    def rotate():
        keep = [nl.ndarray((128, 512), nl.float32, buffer=nl.psum, address=(0, (i % 8) * 2048)) for i in range(16)]
        free = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)  # a 9th bank: no room left
        use_all(keep + [free])

    with pytest.raises(NkiValidationError, match="PSUM capacity exceeded"):
        profile(rotate)

    def eight():
        keep = [nl.ndarray((128, 512), nl.float32, buffer=nl.psum, address=(0, (i % 8) * 2048)) for i in range(16)]
        use_all(keep)

    _, prof = profile(eight)
    assert prof.peak_psum_bytes == 16 * 1024

    def crossing():
        nl.ndarray((128, 512), nl.float32, buffer=nl.psum, address=(0, 1024))

    with pytest.raises(NkiValidationError, match="crosses a 2048-byte PSUM bank boundary"):
        profile(crossing)

    def past_end():
        nl.ndarray((128, 1024), nl.float32, buffer=nl.sbuf, address=(0, 192 * 1024 - 2048))

    with pytest.raises(NkiValidationError, match="ends past the 196608-byte SBUF partition"):
        profile(past_end)


def test_shared_constant_is_shared_hbm_and_identity():
    def k():
        c = nl.shared_constant(np.arange(6, dtype=np.int32).reshape(2, 3))
        assert c.buffer is nl.shared_hbm and c.dtype == nl.int32
        eye = nl.shared_identity_matrix(3, dtype=nl.float32)
        o = _out((3, 3))
        nl.store(o, eye)
        return c, o

    c, o = simulate(k)()
    np.testing.assert_array_equal(c, np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(o, np.eye(3))


def test_nkiobject_subclass_as_kernel_config():
    @dataclasses.dataclass
    class Cfg(nl.NKIObject):
        tile: int = 4

    assert Cfg().tile == 4 and isinstance(Cfg(), nl.NKIObject)
    assert issubclass(nl.NkiTensor, nl.NKIObject)
    assert Cfg(8).tile == 8 and Cfg(tile=2, extra="x").extra == "x"

    @dataclasses.dataclass
    class Section(nl.NKIObject):  # nki-library style: attributes without annotations, built with keywords
        idx = None
        offset = None

    s = Section(idx=3, offset=128)
    assert (s.idx, s.offset) == (3, 128)

    @dataclasses.dataclass(frozen=True)
    class Frozen(nl.NKIObject):
        n: int
        tags: list = dataclasses.field(default_factory=list)

        def __post_init__(self):
            if self.n < 0:
                raise ValueError("n must be >= 0")

    f = Frozen(5)
    assert f.n == 5 and f.tags == []
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.n = 6
    with pytest.raises(ValueError, match="n must be"):
        Frozen(-1)
    # the 0.6 stub's NKIObject.__init__(**kwargs) requires no field: an omitted field without a
    # default stays unset until the kernel assigns it (nki-library fills its params objects that way)
    @dataclasses.dataclass
    class Params(nl.NKIObject):
        expert_index: int
        bias: object

    p = Params(bias=None)
    assert p.bias is None and not hasattr(p, "expert_index")
    with pytest.raises(AttributeError, match="expert_index"):
        p.expert_index  # noqa: B018 -- reading an unset field names it
    p.expert_index = 3
    assert p.expert_index == 3
    with pytest.raises(AttributeError, match="'n'"):
        Frozen()  # its __post_init__ reads the unset field


def test_v4_only_and_not_emulated_names_say_so():
    def v4(a):
        x = nl.load(a)
        nl.abs_max(x, x)

    with pytest.raises(NkiValidationError, match="NeuronCore-v4"):
        simulate(v4, np.zeros((2, 2), F32))
    with pytest.raises(NotEmulatedError, match="nl.cos is not emulated yet"):
        nl.cos(None)


def test_bypass_passes_data_through():
    def k(a):
        x = nl.load(a)
        y = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(y, x, nl.multiply, 2.0, op1=nl.bypass, operand1=0.0)
        o = _out(x.shape)
        nl.store(o, y)
        return o

    a = np.arange(6, dtype=F32).reshape(2, 3)
    np.testing.assert_array_equal(simulate(k, a), 2 * a)
