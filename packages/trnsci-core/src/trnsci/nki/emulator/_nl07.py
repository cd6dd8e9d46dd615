"""NKI 0.7 (Neuron 2.33) additions to ``nki.language``: tiled / blocked layouts.

Source: the Neuron 2.33 API reference (``nki.language.tiles``, ``blocks``,
``alloc_tiles``, ``alloc_blocks``, ``NkiGrid``, ``NkiTileGrid``,
``NkiBlockGrid``; "relevant for Trn2, Trn3") and the NKI 0.7.0 release notes
("tiled/blocked on-chip memory layout APIs").  What is modeled:

* ``nl.tiles(source, *, tile_shape=None)`` views a tensor as a grid of
  ``tile_shape`` tiles over its trailing dims (leading dims of an HBM tensor
  stay untiled, one slab per index).  ``grid.shape`` counts tiles; the last
  tile along a dim is clamped to the tensor's extent (``is_remainder``).
  Indexing takes ints and unit-step slices of grid coordinates and returns a
  grid (an int keeps a one-tile coordinate); ``grid.data`` is the selected
  region as an ``NkiTensor`` view.  Views allocate nothing and move nothing.
* ``nl.blocks(source, *, tile_shape, block_shape)`` groups ``block_shape``
  tiles per block; ``nl.tiles(block)`` goes back to tile coordinates inside
  it.
* ``nl.alloc_tiles`` / ``nl.alloc_blocks`` allocate ``element_shape``
  (uninitialized: sentinels) and return the grid.  On SBUF/PSUM the storage
  is the documented dense rank-two capacity layout: the tiles side by side
  along the free dim of a ``(tile_shape[0], n_tiles * tile_free)`` tile, so an
  ``element_shape`` taller than 128 partitions still fits; there ``data`` of
  one tile (or of tiles adjacent in that layout) is representable, other
  selections are not (``is_data_representable``; ``data`` then raises).

Targets: the reference pages name Trn2/Trn3; the emulator refuses the grid
APIs on trn1.
"""

from math import prod

from . import memory as mem
from .errors import fail


def _ints(v, op, name, min_rank=1):
    if not isinstance(v, tuple) or len(v) < min_rank or not all(type(x) is int for x in v):
        raise TypeError(f"{op}: '{name}' must be a tuple of at least {min_rank} exact Python ints, got {v!r}")
    if any(x <= 0 for x in v):
        raise ValueError(f"{op}: every entry of '{name}' must be positive, got {v!r}")
    return v


def _need_trn2(op):
    ctx = mem.current(op)
    if ctx.target.name == "trn1":
        fail(op, "the tiled/blocked layout APIs (NKI 0.7) are documented for Trn2/Trn3 only")
    return ctx


class NkiGrid(mem.NKIObject):
    """A tensor region addressed in tile (or block) coordinates; see the module doc."""

    _kind = "grid"

    def __init__(self, **kwargs):  # kernels get grids from nl.tiles / nl.blocks / nl.alloc_*
        raise TypeError("NkiGrid views are created by nl.tiles / nl.blocks / nl.alloc_tiles / nl.alloc_blocks")

    @classmethod
    def _new(cls, base, origin, extent, tile_shape, block_shape, sel, layout):
        g = object.__new__(cls)
        g._base = base  # the NkiTensor (or the on-chip layout's storage tile)
        g._origin = origin  # element offset of the whole grid in the source (logical coordinates)
        g._extent = extent  # logical element extent of the whole grid
        g._tile = tile_shape
        g._block = block_shape
        g._sel = sel  # per grid dim: (start, stop) in grid coordinates
        g._layout = layout  # None (a view of base) or the on-chip layout: (tiles per dim)
        return g

    # ---- geometry -----------------------------------------------------------
    @property
    def _lead(self):
        return len(self._extent) - len(self._tile)

    @property
    def _cell(self):
        """Elements per grid step along each dim (1 on untiled leading dims)."""
        cell = tuple(t * b for t, b in zip(self._tile, self._block or (1,) * len(self._tile)))
        return (1,) * self._lead + cell

    def _counts(self):
        return tuple(-(-e // c) for e, c in zip(self._extent, self._cell))

    @property
    def shape(self):
        """Grid coordinates selected along each dim (tiles, or blocks)."""
        return tuple(b - a for a, b in self._sel)

    @property
    def tile_shape(self):
        return self._tile

    @property
    def block_shape(self):
        return self._block

    @property
    def index_step_elements(self):
        return self._cell

    def _range(self):
        """(start, stop) in logical elements along each dim, clamped to the extent."""
        return tuple((a * c, min(b * c, e)) for (a, b), c, e in zip(self._sel, self._cell, self._extent))

    @property
    def element_shape(self):
        return tuple(b - a for a, b in self._range())

    @property
    def is_remainder(self):
        return any(b * c > e for (_, b), c, e in zip(self._sel, self._cell, self._extent))

    @property
    def dtype(self):
        return self._base.dtype

    @property
    def buffer(self):
        return self._base.buffer

    @property
    def is_data_representable(self):
        if self._layout is None:
            return True
        return self._layout_slots() is not None

    def _layout_slots(self):
        """On-chip layout: the storage slot of the selected tile, or None when several are selected."""
        rng = self._tile_ranges()
        if any(b - a != 1 for a, b in rng):
            return None
        flat = 0
        for (a, _), n in zip(rng, self._layout):
            flat = flat * n + a
        return flat

    def _tile_ranges(self):
        b = self._block or (1,) * len(self._tile)
        return tuple((a * k, min(z * k, n)) for (a, z), k, n in zip(self._sel, b, self._layout))

    @property
    def data(self):
        """The selected region as one NkiTensor operand."""
        if self._layout is None:
            lead = self._lead
            key = tuple(o + a if d < lead and b - a == 1 else slice(o + a, o + b)  # one untiled slab: its index
                        for d, (o, (a, b)) in enumerate(zip(self._origin, self._range())))
            return self._base[key]
        slot = self._layout_slots()
        if slot is None:
            fail("NkiGrid.data", "several tiles of an on-chip tile grid are not one NkiTensor in its dense "
                 "rank-two layout (is_data_representable is False); take .data of each tile")
        tfree = int(prod(self._tile[1:]))
        ext = self.element_shape
        if len(self._tile) == 2:
            return self._base[:ext[0], slot * tfree:slot * tfree + ext[1]]
        v = self._base[:, slot * tfree:(slot + 1) * tfree].reshape(self._tile)
        return v[tuple(slice(0, e) for e in ext)]

    # ---- navigation -----------------------------------------------------------
    def __getitem__(self, key):
        if not isinstance(key, tuple):
            key = (key,)
        if len(key) > len(self._sel):
            raise IndexError(f"{type(self).__name__}: {len(key)} indices for a {len(self._sel)}-D grid")
        sel = list(self._sel)
        for d, k in enumerate(key):
            a, b = sel[d]
            if isinstance(k, int) and not isinstance(k, bool):
                i = k + (b - a) if k < 0 else k
                if not 0 <= i < b - a:
                    raise IndexError(f"{type(self).__name__}: index {k} out of range for {b - a} along dim {d}")
                sel[d] = (a + i, a + i + 1)
            elif isinstance(k, slice):
                start, stop, step = k.indices(b - a)
                if step != 1 or stop <= start:
                    raise IndexError(f"{type(self).__name__}: grid slices are non-empty with step 1, got {k}")
                sel[d] = (a + start, a + stop)
            else:
                raise TypeError(f"{type(self).__name__}: grid indices are ints or slices, got {type(k).__name__}")
        return type(self)._new(self._base, self._origin, self._extent, self._tile, self._block, tuple(sel),
                               self._layout)

    def __repr__(self):
        return (f"<{type(self).__name__} shape={self.shape} tile_shape={self._tile} "
                f"element_shape={self.element_shape} {self.buffer.name}>")


class NkiTileGrid(NkiGrid):
    """A grid navigated in tile coordinates (``nl.tiles``, ``nl.alloc_tiles``)."""


class NkiBlockGrid(NkiGrid):
    """A grid navigated in block coordinates (``nl.blocks``, ``nl.alloc_blocks``)."""


def _grid_over(cls, op, source, tile_shape, block_shape):
    if isinstance(source, NkiGrid):
        if source._layout is not None:
            fail(op, "re-tiling an on-chip tile grid is not modeled; take .data of a tile first")
        base = source._base
        r = source._range()
        origin = tuple(o + a for o, (a, _) in zip(source._origin, r))
        extent = source.element_shape
        if tile_shape is None:
            tile_shape = source._tile
    elif isinstance(source, mem.Tensor):
        base, origin, extent = source, (0,) * source.ndim, source.shape
        if tile_shape is None:
            raise TypeError(f"{op}: 'tile_shape' is required for a tensor source")
    else:
        raise TypeError(f"{op}: 'source' must be an NkiTensor or a grid, got {type(source).__name__}")
    tile_shape = _ints(tile_shape, op, "tile_shape", 2)
    if len(tile_shape) > len(extent):
        raise ValueError(f"{op}: tile_shape {tile_shape} has more dims than the source {extent}")
    if base.on_chip and len(tile_shape) != len(extent):
        fail(op, f"an SBUF/PSUM source is tiled over all its dims; tile_shape {tile_shape} vs shape {extent}")
    if base.on_chip and tile_shape[0] > 128:
        fail(op, f"tile_shape[0] = {tile_shape[0]} exceeds the 128 partitions")
    if block_shape is not None:
        block_shape = _ints(block_shape, op, "block_shape")
        if len(block_shape) != len(tile_shape):
            raise ValueError(f"{op}: block_shape {block_shape} must have the rank of tile_shape {tile_shape}")
    g = cls._new(base, origin, tuple(extent), tuple(tile_shape), block_shape, (), None)
    g._sel = tuple((0, n) for n in g._counts())
    return g


def tiles(source, *, tile_shape=None):
    """A tile-coordinate view of ``source`` (an NkiTensor, a tile grid, or one block of a block grid)."""
    _need_trn2("nl.tiles")
    if isinstance(source, NkiBlockGrid) and source._layout is not None:  # tiles of on-chip blocks
        if tile_shape not in (None, source._tile):
            fail("nl.tiles", "the tiles of an on-chip block grid keep its tile_shape")
        return NkiTileGrid._new(source._base, source._origin, source._extent, source._tile, None,
                                source._tile_ranges(), source._layout)
    if isinstance(source, NkiBlockGrid):
        return _grid_over(NkiTileGrid, "nl.tiles", source, tile_shape or source._tile, None)
    return _grid_over(NkiTileGrid, "nl.tiles", source, tile_shape, None)


def blocks(source, *, tile_shape, block_shape):
    """A block-coordinate view: ``block_shape`` tiles of ``tile_shape`` per block."""
    _need_trn2("nl.blocks")
    return _grid_over(NkiBlockGrid, "nl.blocks", source, tile_shape, block_shape)


def _alloc(cls, op, tile_shape, block_shape, element_shape, buffer, dtype, address, name):
    _need_trn2(op)
    tile_shape = _ints(tile_shape, op, "tile_shape", 2)
    element_shape = _ints(element_shape, op, "element_shape", 1)
    if len(tile_shape) > len(element_shape):
        raise ValueError(f"{op}: tile_shape {tile_shape} has greater rank than element_shape {element_shape}")
    if not isinstance(buffer, mem.Buffer):
        raise TypeError(f"{op}: 'buffer' must be an NKI memory region (nl.sbuf, nl.psum, nl.shared_hbm)")
    if block_shape is not None:
        block_shape = _ints(block_shape, op, "block_shape")
        if len(block_shape) != len(tile_shape):
            raise ValueError(f"{op}: block_shape {block_shape} must have the rank of tile_shape {tile_shape}")
    if not buffer.on_chip:
        t = mem.allocate(element_shape, dtype, buffer, name=name, op=op)
        g = cls._new(t, (0,) * len(element_shape), element_shape, tile_shape, block_shape, (), None)
        g._sel = tuple((0, n) for n in g._counts())
        return g
    if len(tile_shape) != len(element_shape):
        fail(op, f"on SBUF/PSUM tile_shape {tile_shape} must have the rank of element_shape {element_shape}")
    if tile_shape[0] > 128:
        fail(op, f"tile_shape[0] = {tile_shape[0]} exceeds the 128 partitions")
    counts = tuple(-(-e // t) for e, t in zip(element_shape, tile_shape))
    n_tiles = int(prod(counts))
    tfree = int(prod(tile_shape[1:]))
    store = mem.allocate((tile_shape[0], n_tiles * tfree), dtype, buffer, name=name, op=op, address=address)
    g = cls._new(store, (0,) * len(element_shape), element_shape, tile_shape, block_shape, (), counts)
    g._sel = tuple((0, n) for n in g._counts())
    return g


def alloc_tiles(*, tile_shape, element_shape, buffer, dtype, address=None, name=""):
    """New uninitialized storage for ``element_shape`` as a grid of ``tile_shape`` tiles."""
    return _alloc(NkiTileGrid, "nl.alloc_tiles", tile_shape, None, element_shape, buffer, dtype, address, name)


def alloc_blocks(*, tile_shape, block_shape, element_shape, buffer, dtype, address=None, name=""):
    """As :func:`alloc_tiles`, with ``block_shape`` tiles grouped per block."""
    return _alloc(NkiBlockGrid, "nl.alloc_blocks", tile_shape, block_shape, element_shape, buffer, dtype,
                  address, name)


NAMES_0_7 = ("tiles", "blocks", "alloc_tiles", "alloc_blocks", "NkiGrid", "NkiTileGrid", "NkiBlockGrid")
