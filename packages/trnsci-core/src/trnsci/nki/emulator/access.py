"""Tensor views, indexing and access patterns of NKI 0.6, and DMA copies.

Every :class:`~trnsci.nki.emulator.memory.Tensor` is a *view* on the storage
of one allocation: ``shape``, ``strides`` and ``offset`` in elements of the
view's ``dtype`` over the allocation's bytes read as a flat row-major array
(an SBUF/PSUM allocation of shape ``(P, F...)`` keeps partition ``p`` at
element ``p * prod(F...)``).  The element at index ``(i0, ..., i_{n-1})``
lives at ``offset + sum(strides[k] * i_k)`` -- the model of the NKI language
guide ("Tensor Values").  Views never copy; writes through any view land in
the allocation.

A view may carry one *indirection* (``is_indirect()``):

* vector indirection (``.ap(..., vector_offset=idx, indirect_dim=d)`` or
  ``vector_select``): along view dim 0 the index ``i0`` is replaced by
  ``idx[i0]`` (read from the SBUF tile ``idx`` when the instruction runs),
  scaled by the stride of dim ``d`` of the tensor ``.ap`` was called on;
  HBM tensors only, and only DMA instructions consume it;
* scalar indirection (``.ap(..., scalar_offset=s, indirect_dim=d)`` or
  ``select(dim, s)`` with a tile ``s``): the runtime value of the (1, 1) tile
  ``s`` times that stride is added to the offset.

Sources: ``nki/get-started/nki-language-guide.rst`` (Tensor Values, View
primitives, Tensor Indexing), ``nki/api/nki/language/__init__.py``
(``NkiTensor`` methods, ``ds``), ``nki/deep-dives/nki-aps.rst`` (access
pattern semantics, partition rule) and ``nki/api/nki/isa/__init__.py``
(``dma_copy``: memories, dtype conversion, indirect gather/scatter, DGE and
out-of-bounds modes) in aws-neuron/aws-neuron-sdk.
"""

from enum import Enum
from math import prod

import numpy as np
from numpy.lib.stride_tricks import as_strided

from . import dtypes as dt
from .errors import EmulatorError, vfail

MAX_AP_DIMS = 5  # "a strided access pattern with up to 5 dimensions" (language guide)


class oob_mode(Enum):
    """Out-of-bounds handling of indirect DMA (``nisa.oob_mode``)."""

    error = 0
    skip = 1


class dge_mode(Enum):
    """DMA descriptor generation mode (``nisa.dge_mode``)."""

    unknown = 0
    swdge = 1
    hwdge = 2
    none = 3


def _enum_name(value, enum, op, operand):
    """Name of an enum member given as a member (of any same-named enum), int or str."""
    if value is None:
        return None
    name = getattr(value, "name", None)
    if isinstance(name, str) and name in enum.__members__:
        return name
    if isinstance(value, str) and value in enum.__members__:
        return value
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        for m in enum:
            if m.value == int(value):
                return m.name
    vfail(
        op,
        f"unknown {operand} {value!r}; expected one of " + ", ".join(f"{enum.__name__}.{m}" for m in enum.__members__),
    )


def _is_int(x):
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _check_int(op, value, what):
    if not _is_int(value):
        vfail(op, f"{what} must be a compile-time integer, got {type(value).__name__} {value!r}")
    return int(value)


# --------------------------------------------------------------------------
# nl.ds


class DynSlice:
    """``nl.ds(start, size)``: the index range ``start .. start + size - 1``."""

    __slots__ = ("start", "size")

    def __init__(self, start, size):
        self.start = start
        self.size = size

    def __repr__(self):
        return f"nl.ds({self.start}, {self.size})"


def ds(start, size):
    """A slice of ``size`` consecutive indices starting at ``start`` (``nl.ds``).

    ``t[nl.ds(s, n)]`` is the same view as ``t[s:s + n]``.

    Parameters
    ----------
    start : int
        First index (compile-time integer, e.g. a loop variable).
    size : int
        Number of indices, >= 1.

    Returns
    -------
    DynSlice
        An index object for ``Tensor.__getitem__``.
    """
    op = "nl.ds"
    start = _check_int(op, start, "'start'")
    size = _check_int(op, size, "'size'")
    if start < 0:
        vfail(op, f"'start' must be >= 0, got {start}")
    if size < 1:
        vfail(op, f"'size' must be >= 1, got {size}")
    return DynSlice(start, size)


# --------------------------------------------------------------------------
# indirection


class Indirect:
    """The single indirection a view may carry (see the module docstring)."""

    __slots__ = ("kind", "index", "dim", "mult", "bound")

    def __init__(self, kind, index, dim, mult, bound):
        self.kind = kind  # "vector" | "scalar"
        self.index = index  # the SBUF index tile
        self.dim = dim  # view dim replaced by the index (vector); None for scalar
        self.mult = mult  # elements (view dtype) per index step
        self.bound = bound  # valid indices are 0 .. bound - 1

    def moved(self, dim):
        return Indirect(self.kind, self.index, dim, self.mult, self.bound)


def _tensor_cls():
    from .memory import Tensor

    return Tensor


def _index_values(ind, op):
    """Runtime index values of an indirection (int64 vector)."""
    v = ind.index._read()
    if not dt.is_int(v.dtype):
        vfail(op, f"index tile '{ind.index.name}' must have an integer dtype, got {v.dtype}")
    return np.asarray(v, dtype=np.int64).reshape(-1)


def _contig_strides(shape):
    s, out = 1, []
    for n in reversed(shape):
        out.append(s)
        s *= n
    return tuple(reversed(out))


def _storage_len(t, dtype=None):
    d = t.dtype if dtype is None else dtype
    return t._alloc.flat.nbytes // d.itemsize


def _addresses(t, op, skip=False):
    """Element addresses of every element of view t (shape t.shape) and the
    per-element validity (None unless skip and some index was out of bounds)."""
    nd = len(t.shape)
    addr = np.full(t.shape, t.offset, dtype=np.int64)
    ind = t._ind
    valid = None
    for k, (n, s) in enumerate(zip(t.shape, t.strides)):
        shp = [1] * nd
        shp[k] = n
        if ind is not None and ind.kind == "vector" and k == ind.dim:
            idx = _index_values(ind, op)
            if idx.size != n:
                vfail(op, f"index tile '{ind.index.name}' holds {idx.size} indices for a dimension of size {n}")
            ok = (idx >= 0) & (idx < ind.bound)
            if not ok.all():
                if not skip:
                    bad = idx[~ok]
                    vfail(
                        op,
                        f"indirect index {int(bad[0])} from '{ind.index.name}' is out of bounds for a "
                        f"dimension of size {ind.bound} (oob_mode=oob_mode.error; pass "
                        "oob_mode=nisa.oob_mode.skip to skip such rows)",
                    )
                valid = np.broadcast_to(ok.reshape(shp), t.shape)
                idx = np.where(ok, idx, 0)
            addr = addr + (idx * ind.mult).reshape(shp)
        else:
            addr = addr + (np.arange(n, dtype=np.int64) * s).reshape(shp)
    if ind is not None and ind.kind == "scalar":
        v = _index_values(ind, op)
        s0 = int(v[0])
        if not 0 <= s0 < ind.bound:
            if not skip:
                vfail(
                    op,
                    f"scalar offset {s0} from '{ind.index.name}' is out of bounds for a dimension of size "
                    f"{ind.bound} (oob_mode=oob_mode.error)",
                )
            valid = np.zeros(t.shape, dtype=bool)
            s0 = 0
        addr = addr + s0 * ind.mult
    lim = _storage_len(t)
    chk = addr if valid is None else addr[valid]
    if chk.size and (chk.min() < 0 or chk.max() >= lim):
        vfail(op, f"access of '{t.name}' reaches outside its storage of {lim} elements (element {int(chk.max())})")
    return addr, valid


def gather(t, op="read", skip=False):
    """Values of view t (a copy) and their validity mask (None = all valid)."""
    addr, valid = _addresses(t, op, skip)
    flat = t._alloc.flat_as(t.dtype)
    return flat[addr], valid


def scatter(t, values, op="write", skip=False, mask=None):
    """Write values (shape t.shape) through view t; mask limits the elements written."""
    addr, valid = _addresses(t, op, skip)
    if mask is not None:
        valid = mask if valid is None else (valid & mask)
    flat = t._alloc.flat_as(t.dtype)
    values = np.broadcast_to(values, t.shape)
    if valid is None:
        flat[addr.reshape(-1)] = values.reshape(-1)
    else:
        flat[addr[valid]] = values[valid]
    return addr, valid


def strided_view(t):
    """NumPy view of a direct (non-indirect) view t over its storage."""
    flat = t._alloc.flat_as(t.dtype)
    isz = t.dtype.itemsize
    strides = tuple(s * isz for s in t.strides)
    if flat.flags.writeable and flat.flags.c_contiguous:
        return np.ndarray(t.shape, dtype=flat.dtype, buffer=flat, offset=t.offset * isz, strides=strides)
    return as_strided(flat[t.offset :], shape=t.shape, strides=strides)


_UINT = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}


def _mask_bytes(t):
    """The state bytes of direct view ``t``: shape ``t.shape + (itemsize,)``."""
    isz = t.dtype.itemsize
    return np.ndarray(
        t.shape + (isz,),
        dtype=np.uint8,
        buffer=t._alloc.mask,
        offset=t.offset * isz,
        strides=tuple(s * isz for s in t.strides) + (1,),
    )


_SPLAT = {1: 0x01, 2: 0x0101, 4: 0x01010101, 8: 0x0101010101010101}


def _mask_words(t):
    """The state bytes of direct view ``t`` as one unsigned word per element,
    or None when the byte mask cannot be read in ``t``'s element width."""
    isz = t.dtype.itemsize
    bm = t._alloc.mask
    if bm.nbytes % isz:
        return None
    words = bm.view(_UINT[isz])
    return np.ndarray(
        t.shape, dtype=words.dtype, buffer=words, offset=t.offset * isz, strides=tuple(s * isz for s in t.strides)
    )


def mask_read(t):
    """PSUM state of each element of ``t``: 0 never written, 1 written by a
    non-matmul instruction, 2 initialized by a matmul. An element whose bytes
    disagree (written through a narrower dtype view) takes its lowest byte state."""
    isz = t.dtype.itemsize
    if t._ind is None:
        w = _mask_words(t)
        if w is not None:
            low = (w & 0xFF).astype(np.uint8)
            if isz == 1 or (w == low.astype(w.dtype) * _UINT[isz].type(_SPLAT[isz])).all():
                return low  # every element's bytes agree: the common case, one word read each
        return _mask_bytes(t).min(axis=-1)
    addr, _ = _addresses(t, "read")
    bm = t._alloc.mask
    return np.minimum.reduce([bm[addr * isz + j] for j in range(isz)])


def mask_write(t, value, valid=None):
    """Set the PSUM state of ``t``'s elements (where ``valid``) to ``int(value)``."""
    isz = t.dtype.itemsize
    state = int(value)
    if t._ind is None and valid is None:
        _mask_bytes(t)[...] = state
        return
    addr = strided_addresses(t) if t._ind is None else _addresses(t, "write")[0]
    if valid is not None:
        addr = addr[valid]
    bm = t._alloc.mask
    for j in range(isz):
        bm[addr * isz + j] = state


def strided_addresses(t):
    nd = len(t.shape)
    addr = np.full(t.shape, t.offset, dtype=np.int64)
    for k, (n, s) in enumerate(zip(t.shape, t.strides)):
        shp = [1] * nd
        shp[k] = n
        addr = addr + (np.arange(n, dtype=np.int64) * s).reshape(shp)
    return addr


# --------------------------------------------------------------------------
# indexing


def _reject_index(t, k, d):
    kind = type(k).__name__
    if isinstance(k, np.ndarray):
        kind = f"an integer array of shape {k.shape}" if k.dtype.kind in "iu" else f"a {k.dtype} array"
    elif isinstance(k, _tensor_cls()):
        kind = f"the tensor '{k.name}'"
    elif isinstance(k, (list, tuple)):
        kind = "a list of indices"
    elif isinstance(k, (bool, np.bool_)):
        kind = "a boolean"
    elif k is None:
        vfail(
            f"indexing '{t.name}'",
            "None (newaxis) is not an NKI index; insert a size-1 dimension with t.expand_dim(dim)",
        )
    vfail(
        f"indexing '{t.name}'",
        f"index {kind} on dimension {d} is not an affine access pattern (it is a gather); tile "
        "indexing takes integers, slices and nl.ds(start, size) only. Gather/scatter rows of an "
        "HBM tensor with nisa.dma_copy on t.ap(pattern=..., vector_offset=idx_tile, indirect_dim=0) "
        "(or t.vector_select(0, idx_tile)); pick one runtime index with t.select(dim, idx_tile)",
    )


def _norm(t, op, v, n, d, what):
    v = _check_int(op, v, what)
    if v < 0:
        v += n
    return v


def index(t, key):
    """``t[key]``: ints, slices, ``...`` and ``nl.ds`` (NKI 0.6 indexing rules)."""
    op = f"indexing '{t.name}'"
    if not isinstance(key, tuple):
        key = (key,)
    for d, k in enumerate(key):
        if not (k is Ellipsis or isinstance(k, (slice, DynSlice)) or _is_int(k)):
            _reject_index(t, k, d)
    nd = len(t.shape)
    ells = [i for i, k in enumerate(key) if k is Ellipsis]
    if len(ells) > 1:
        vfail(op, "an index can only have a single ellipsis ('...')")
    if ells:
        i = ells[0]
        key = key[:i] + (slice(None),) * (nd - (len(key) - 1)) + key[i + 1 :]
    if len(key) > nd:
        vfail(op, f"too many indices ({len(key)}) for shape {t.shape}")
    key = key + (slice(None),) * (nd - len(key))
    ind = t._ind
    offset = t.offset
    dims = []  # (size, stride, dropped_int, old_dim)
    for d, (k, n, s) in enumerate(zip(key, t.shape, t.strides)):
        full = isinstance(k, slice) and k.start is None and k.stop is None and k.step in (None, 1)
        if ind is not None and ind.dim == d and not full:
            vfail(op, f"dimension {d} is indirectly addressed and cannot be sliced or selected again")
        if isinstance(k, DynSlice):
            k = slice(k.start, k.start + k.size)
        if isinstance(k, slice):
            step = 1 if k.step is None else _check_int(op, k.step, "slice step")
            if step < 1:
                vfail(op, f"slice step must be >= 1, got {step} on dimension {d}")
            start = 0 if k.start is None else _norm(t, op, k.start, n, d, "slice start")
            stop = n if k.stop is None else _norm(t, op, k.stop, n, d, "slice stop")
            if not (0 <= start <= n and 0 <= stop <= n):
                vfail(op, f"out-of-bounds access {k.start}:{k.stop} on dimension {d} of shape {t.shape}")
            size = max(0, -(-(stop - start) // step))
            if size < 1:
                vfail(op, f"empty slice {k.start}:{k.stop} on dimension {d} of shape {t.shape}")
            if t.on_chip and d == 0 and step != 1 and size > 1:
                vfail(
                    op,
                    f"strided access (step {step}) along the partition dimension is not supported by the "
                    "hardware; partition access must be contiguous",
                )
            offset += start * s
            dims.append([size, s * step, False, d])
        else:
            i = _norm(t, op, k, n, d, "index")
            if not 0 <= i < n:
                vfail(op, f"index {k} is out of bounds for dimension {d} with size {n} (shape {t.shape})")
            offset += i * s
            # SBUF/PSUM keep the partition dim at size 1; other ints drop their dim
            dims.append([1, s, not (t.on_chip and d == 0), d])
    if t.on_chip:
        kept = sum(1 for x in dims if not x[2])
        dropped = [i for i, x in enumerate(dims) if x[2]]
        if kept < 2 and dropped:
            dims[dropped[-1]][2] = False  # stay >= 2-D: the last integer-indexed free dim stays at size 1
    out = [x for x in dims if not x[2]]
    new_ind = None
    if ind is not None:
        if ind.kind == "scalar":
            new_ind = ind
        else:
            pos = [i for i, x in enumerate(out) if x[3] == ind.dim]
            new_ind = ind.moved(pos[0])
    return t._derive(tuple(x[0] for x in out), tuple(x[1] for x in out), offset, ind=new_ind)


# --------------------------------------------------------------------------
# view primitives (NkiTensor methods)


def _dim(op, t, dim, ndim=None, name="dim"):
    nd = len(t.shape) if ndim is None else ndim
    dim = _check_int(op, dim, f"'{name}'")
    if not 0 <= dim < nd:
        vfail(op, f"'{name}'={dim} is out of range for a {nd}-D tensor of shape {t.shape}")
    return dim


def _no_indirect_dim(op, t, dim):
    if t._ind is not None and t._ind.dim == dim:
        vfail(op, f"dimension {dim} of '{t.name}' is indirectly addressed and cannot be sliced or selected")


def slice_(t, dim, start, end, step=1):
    op = f"{t.name}.slice"
    dim = _dim(op, t, dim)
    start = _check_int(op, start, "'start'")
    end = _check_int(op, end, "'end'")
    step = _check_int(op, step, "'step'")
    if not 0 <= start < end <= t.shape[dim]:
        vfail(op, f"need 0 <= start < end <= {t.shape[dim]} on dimension {dim}, got start={start}, end={end}")
    if step < 1:
        vfail(op, f"'step' must be >= 1, got {step}")
    _no_indirect_dim(op, t, dim)
    key = [slice(None)] * len(t.shape)
    key[dim] = slice(start, end, step)
    return index(t, tuple(key))


def select(t, dim, index_):
    op = f"{t.name}.select"
    dim = _dim(op, t, dim)
    T = _tensor_cls()
    if isinstance(index_, T):
        return _dynamic_select(op, t, dim, index_)
    i = _check_int(op, index_, "'index'")
    if not 0 <= i < t.shape[dim]:
        vfail(op, f"index {i} is out of bounds for dimension {dim} with size {t.shape[dim]}")
    _no_indirect_dim(op, t, dim)
    if t.on_chip and dim == 0:
        vfail(op, "cannot remove the partition dimension of an SBUF/PSUM tensor; use t[i] or t.slice(0, i, i + 1)")
    key = [slice(None)] * len(t.shape)
    key[dim] = i
    return index(t, tuple(key))


def _check_index_tile(op, idx, name, shape=None):
    T = _tensor_cls()
    if not isinstance(idx, T):
        vfail(op, f"'{name}' must be an SBUF tile of indices, got {type(idx).__name__}")
    if idx.buffer.name != "sbuf":
        vfail(op, f"'{name}' ('{idx.name}') must be in SBUF, got {idx.buffer.name.upper()}")
    if not dt.is_int(idx.dtype):
        vfail(op, f"'{name}' ('{idx.name}') must have an integer dtype (int32/uint32), got {idx.dtype}")
    if idx._ind is not None:
        vfail(op, f"'{name}' ('{idx.name}') is itself indirectly addressed")
    if shape is not None and tuple(idx.shape) != tuple(shape):
        vfail(op, f"'{name}' ('{idx.name}') must have shape {tuple(shape)}, got {idx.shape}")
    return idx


def _dynamic_select(op, t, dim, idx):
    if t._ind is not None:
        vfail(op, f"'{t.name}' is already indirectly addressed; only one dynamic select per tensor")
    if t.on_chip and dim == 0:
        vfail(op, "dynamic select on the partition dimension of an SBUF/PSUM tensor is not supported")
    _check_index_tile(op, idx, "index", (1, 1))
    shape = t.shape[:dim] + t.shape[dim + 1 :]
    strides = t.strides[:dim] + t.strides[dim + 1 :]
    if t.on_chip and len(shape) < 2:
        vfail(op, f"selecting dimension {dim} would leave SBUF/PSUM tensor '{t.name}' with fewer than 2 dimensions")
    return t._derive(shape, strides, t.offset, ind=Indirect("scalar", idx, None, t.strides[dim], t.shape[dim]))


def vector_select(t, dim, vector_offset):
    op = f"{t.name}.vector_select"
    dim = _check_int(op, dim, "'dim'")
    if dim != 0:
        vfail(op, f"'dim' must be 0, got {dim}")
    if t.on_chip:
        vfail(op, f"only supported on HBM tensors; '{t.name}' is in {t.buffer.name.upper()}")
    if t._ind is not None:
        vfail(op, f"'{t.name}' is already indirectly addressed; only one dynamic select per tensor")
    T = _tensor_cls()
    if not isinstance(vector_offset, T) or len(vector_offset.shape) != 2 or vector_offset.shape[1] != 1:
        got = vector_offset.shape if isinstance(vector_offset, T) else type(vector_offset).__name__
        vfail(op, f"'vector_offset' must be an SBUF tile of shape (num_partitions, 1), got {got}")
    _check_index_tile(op, vector_offset, "vector_offset")
    p = vector_offset.shape[0]
    shape = (p,) + t.shape[1:]
    return t._derive(shape, t.strides, t.offset, ind=Indirect("vector", vector_offset, 0, t.strides[0], t.shape[0]))


def permute(t, dims):
    op = f"{t.name}.permute"
    try:
        dims = tuple(dims)
    except TypeError:
        vfail(op, f"'dims' must be a tuple of dimension indices, got {dims!r}")
    nd = len(t.shape)
    if sorted(_check_int(op, d, "'dims' entry") for d in dims) != list(range(nd)):
        vfail(op, f"'dims' {dims} is not a permutation of range({nd})")
    if t.on_chip and dims[0] != 0:
        vfail(op, f"the partition dimension must stay at position 0 on SBUF/PSUM, got dims={dims}")
    ind = t._ind
    if ind is not None and ind.kind == "vector" and dims[0] != ind.dim:
        vfail(op, f"after vector_select the indirect partition dim must stay outermost, got dims={dims}")
    new_ind = ind.moved(dims.index(ind.dim)) if ind is not None and ind.kind == "vector" else ind
    return t._derive(tuple(t.shape[d] for d in dims), tuple(t.strides[d] for d in dims), t.offset, ind=new_ind)


def broadcast(t, dim, size):
    op = f"{t.name}.broadcast"
    dim = _dim(op, t, dim)
    size = _check_int(op, size, "'size'")
    if t.shape[dim] != 1:
        vfail(op, f"dimension {dim} must have size 1 to broadcast, got {t.shape[dim]}")
    if size < 1:
        vfail(op, f"'size' must be >= 1, got {size}")
    if t.on_chip and dim == 0:
        vfail(op, "cannot broadcast the partition dimension of an SBUF/PSUM tensor")
    _no_indirect_dim(op, t, dim)
    shape = t.shape[:dim] + (size,) + t.shape[dim + 1 :]
    strides = t.strides[:dim] + (0,) + t.strides[dim + 1 :]
    return t._derive(shape, strides, t.offset, ind=t._ind)


def _vec_first(op, t, dim, what):
    if t._ind is not None and t._ind.kind == "vector" and dim == 0:
        vfail(op, f"after vector_select {what} must not be 0 (the indirect partition dim stays outermost)")


def expand_dim(t, dim):
    op = f"{t.name}.expand_dim"
    dim = _dim(op, t, dim, len(t.shape) + 1)
    if t.on_chip and dim == 0:
        vfail(op, "cannot insert a dimension before the partition dimension of an SBUF/PSUM tensor")
    _vec_first(op, t, dim, "'dim'")
    stride = t.strides[dim] * t.shape[dim] if dim < len(t.shape) else 1
    ind = t._ind
    if ind is not None and ind.kind == "vector" and ind.dim >= dim:
        ind = ind.moved(ind.dim + 1)
    return t._derive(
        t.shape[:dim] + (1,) + t.shape[dim:], t.strides[:dim] + (stride,) + t.strides[dim:], t.offset, ind=ind
    )


def squeeze_dim(t, dim):
    op = f"{t.name}.squeeze_dim"
    dim = _dim(op, t, dim)
    if t.shape[dim] != 1:
        vfail(op, f"dimension {dim} must have size 1, got {t.shape[dim]}")
    if t.on_chip and dim == 0:
        vfail(op, "cannot remove the partition dimension of an SBUF/PSUM tensor")
    _vec_first(op, t, dim, "'dim'")
    _no_indirect_dim(op, t, dim)
    if t.on_chip and len(t.shape) <= 2:
        vfail(op, f"SBUF/PSUM tensors stay at least 2-D; cannot squeeze '{t.name}' of shape {t.shape}")
    ind = t._ind
    if ind is not None and ind.kind == "vector" and ind.dim > dim:
        ind = ind.moved(ind.dim - 1)
    return t._derive(t.shape[:dim] + t.shape[dim + 1 :], t.strides[:dim] + t.strides[dim + 1 :], t.offset, ind=ind)


def _infer(op, shape, total, allow_neg):
    shape = [_check_int(op, s, "shape entry") for s in shape]
    neg = [i for i, s in enumerate(shape) if s == -1]
    if neg and not allow_neg:
        vfail(op, "-1 is not allowed in 'shape'; give every size (reshape_dim accepts one -1)")
    if len(neg) > 1:
        vfail(op, "at most one -1 in 'shape'")
    if any(s < 1 and s != -1 for s in shape):
        vfail(op, f"sizes must be >= 1, got {tuple(shape)}")
    if neg:
        rest = prod(s for s in shape if s != -1)
        if total % rest:
            vfail(op, f"cannot infer -1: {total} elements are not divisible by {rest}")
        shape[neg[0]] = total // rest
    if prod(shape) != total:
        vfail(op, f"shape {tuple(shape)} has {prod(shape)} elements, expected {total}")
    return tuple(shape)


def _restride(oshape, ostrides, nshape):
    """Strides of nshape viewing the same elements as (oshape, ostrides), or None."""
    old = [(n, s) for n, s in zip(oshape, ostrides) if n != 1]
    on = [n for n, _ in old]
    os_ = [s for _, s in old]
    ns = [1] * len(nshape)
    if not on:
        return ns
    nn = [n for n in nshape]
    oi, oj, ni, nj = 0, 1, 0, 1
    while ni < len(nn) and oi < len(on):
        npr, opr = nn[ni], on[oi]
        while npr != opr:
            if npr < opr:
                npr *= nn[nj]
                nj += 1
            else:
                opr *= on[oj]
                oj += 1
        for k in range(oi, oj - 1):
            if os_[k] != on[k + 1] * os_[k + 1]:
                return None
        ns[nj - 1] = os_[oj - 1]
        for k in range(nj - 1, ni, -1):
            ns[k - 1] = ns[k] * nn[k]
        ni, nj, oi, oj = nj, nj + 1, oj, oj + 1
    return ns


def reshape(t, shape):
    op = f"{t.name}.reshape"
    if not isinstance(shape, (tuple, list)) or any(isinstance(x, (tuple, list)) for x in shape):
        vfail(op, f"'shape' must be a tuple of sizes, got {shape!r} (call t.reshape((a, b, ...)))")
    nshape = _infer(op, shape, t.size, False)
    if t._ind is not None:
        if t._ind.kind == "vector" and (t._ind.dim != 0 or nshape[0] != t.shape[0]):
            vfail(op, "after vector_select shape[0] must equal t.shape[0] (indirect partition dim preserved)")
    if t.on_chip or (t._ind is not None and t._ind.kind == "vector"):
        if nshape[0] != t.shape[0]:
            vfail(op, f"the partition dimension must be preserved: shape[0] must be {t.shape[0]}, got {nshape[0]}")
        if len(nshape) < 2 and t.on_chip:
            vfail(op, f"SBUF/PSUM tensors stay at least 2-D, got shape {nshape}")
        rest = _restride(t.shape[1:], t.strides[1:], nshape[1:])
        strides = None if rest is None else (t.strides[0],) + tuple(rest)
    else:
        rest = _restride(t.shape, t.strides, nshape)
        strides = None if rest is None else tuple(rest)
    if strides is None:
        vfail(
            op,
            f"cannot view '{t.name}' of shape {t.shape} and strides {t.strides} as {nshape} without a copy "
            "(the layout is not contiguous on the reshaped dims); copy it first (e.g. nisa.tensor_copy)",
        )
    return t._derive(nshape, strides, t.offset, ind=t._ind)


def reshape_dim(t, dim, shape):
    op = f"{t.name}.reshape_dim"
    dim = _dim(op, t, dim)
    if not isinstance(shape, (tuple, list)):
        vfail(op, f"'shape' must be a tuple of sizes, got {shape!r}")
    sub = _infer(op, shape, t.shape[dim], True)
    if dim == 0 and len(sub) != 1 and (t.on_chip or (t._ind is not None and t._ind.kind == "vector")):
        vfail(op, "cannot split the partition dimension (dim 0) of an SBUF/PSUM or vector-indirect tensor")
    if len(sub) != 1:
        _no_indirect_dim(op, t, dim)
    s = t.strides[dim]
    sub_strides = tuple(s * prod(sub[k + 1 :]) for k in range(len(sub)))
    ind = t._ind
    if ind is not None and ind.kind == "vector" and ind.dim > dim:
        ind = ind.moved(ind.dim + len(sub) - 1)
    return t._derive(
        t.shape[:dim] + sub + t.shape[dim + 1 :],
        t.strides[:dim] + sub_strides + t.strides[dim + 1 :],
        t.offset,
        ind=ind,
    )


def flatten_dims(t, start_dim, end_dim):
    op = f"{t.name}.flatten_dims"
    a = _dim(op, t, start_dim, name="start_dim")
    b = _dim(op, t, end_dim, name="end_dim")
    if b < a:
        vfail(op, f"'end_dim' ({b}) must be >= 'start_dim' ({a})")
    if a == 0 and (t.on_chip or (t._ind is not None and t._ind.kind == "vector")) and b > 0:
        vfail(op, "'start_dim' must be > 0 for SBUF/PSUM (and vector-indirect) tensors: the partition dim stays")
    if t._ind is not None and t._ind.kind == "vector" and a <= t._ind.dim <= b and a != b:
        vfail(op, "cannot merge the indirectly addressed dimension")
    n = prod(t.shape[a : b + 1])
    st = _restride(t.shape[a : b + 1], t.strides[a : b + 1], (n,))
    if st is None:
        vfail(
            op,
            f"dimensions {a}..{b} of '{t.name}' (shape {t.shape}, strides {t.strides}) are not contiguous "
            "in memory and cannot be merged into one view dimension",
        )
    ind = t._ind
    if ind is not None and ind.kind == "vector" and ind.dim > b:
        ind = ind.moved(ind.dim - (b - a))
    return t._derive(
        t.shape[:a] + (n,) + t.shape[b + 1 :], t.strides[:a] + (st[0],) + t.strides[b + 1 :], t.offset, ind=ind
    )


def rearrange(t, src_pattern, dst_pattern, fixed_sizes=None):
    """einops-style split / permute / merge of dims, built from the primitives."""
    op = f"{t.name}.rearrange"
    fixed = dict(fixed_sizes or {})
    src = tuple(src_pattern)
    dst = tuple(dst_pattern)
    if len(src) != len(t.shape):
        vfail(op, f"'src_pattern' has {len(src)} entries for a {len(t.shape)}-D tensor of shape {t.shape}")

    def names(p):
        out = []
        for e in p:
            if isinstance(e, str):
                out.append(e)
            elif isinstance(e, (tuple, list)) and e and all(isinstance(x, str) for x in e):
                out.extend(e)
            else:
                vfail(op, f"pattern entries are names or tuples of names, got {e!r}")
        return out

    sn, dn = names(src), names(dst)
    if len(set(sn)) != len(sn) or sorted(sn) != sorted(dn):
        vfail(op, f"'src_pattern' {src} and 'dst_pattern' {dst} must name the same dimensions once each")
    for k in fixed:
        if k not in sn:
            vfail(op, f"'fixed_sizes' names '{k}', which is not in the patterns")
    v = t
    d = 0
    for e, n in zip(src, t.shape):  # split groups of the source
        if isinstance(e, str):
            if e in fixed and fixed[e] != n:
                vfail(op, f"dimension '{e}' has size {n}, but fixed_sizes gives {fixed[e]}")
            d += 1
            continue
        sizes = tuple(fixed.get(x, -1) for x in e)
        v = reshape_dim(v, d, sizes)
        d += len(e)
    order = tuple(sn.index(x) for x in dn)
    if order != tuple(range(len(order))):
        v = permute(v, order)
    d = 0
    for e in dst:  # merge groups of the destination
        if isinstance(e, str):
            d += 1
            continue
        if len(e) > 1:
            v = flatten_dims(v, d, d + len(e) - 1)
        d += 1
    return v


def view(t, dtype):
    op = f"{t.name}.view"
    new = dt.normalize(dtype, op, "dtype")
    if t._ind is not None:
        vfail(op, "dtype reinterpretation is not supported after a dynamic select / vector_select / indirect .ap")
    old = t.dtype
    if new == old:
        return t._derive(t.shape, t.strides, t.offset, ind=None)
    if len(t.shape) == 0:
        vfail(op, "cannot reinterpret a 0-d view")
    a, b = old.itemsize, new.itemsize
    last, ls = t.shape[-1], t.strides[-1]
    if last != 1 and ls != 1:
        vfail(op, f"the last dimension of '{t.name}' must be contiguous (stride 1), got stride {ls}")
    if b <= a:
        r = a // b
        shape = t.shape[:-1] + (last * r,)
        strides = tuple(s * r for s in t.strides[:-1]) + (1,)
        offset = t.offset * r
    else:
        r = b // a
        if last % r:
            vfail(op, f"last dimension {last} of '{t.name}' is not divisible by {r} ({old} -> {new})")
        bad = [s for s in t.strides[:-1] if (s * a) % b] + ([t.offset] if (t.offset * a) % b else [])
        if bad:
            vfail(op, f"strides/offset of '{t.name}' are not aligned to {b}-byte elements of {new}")
        shape = t.shape[:-1] + (last // r,)
        strides = tuple(s * a // b for s in t.strides[:-1]) + (1,)
        offset = t.offset * a // b
    return t._derive(shape, strides, offset, ind=None, dtype=new)


def get_pattern(t):
    return [[int(s), int(n)] for s, n in zip(t.strides, t.shape)]


def is_contiguous(t):
    expect = 1
    dims = list(zip(t.shape, t.strides))
    if t.on_chip:
        dims = dims[1:]
    for n, s in reversed(dims):
        if n != 1 and s != expect:
            return False
        expect *= n
    return True


def ap(t, pattern, offset=None, scalar_offset=None, vector_offset=None, indirect_dim=0, dtype=None):
    """``t.ap(...)``: an explicit ``[[step, num], ...]`` access pattern on t's storage."""
    op = f"{t.name}.ap"
    if t._ind is not None:
        vfail(op, f"'{t.name}' is already indirectly addressed; an access pattern cannot be applied on top")
    try:
        pairs = [tuple(p) for p in pattern]
    except TypeError:
        vfail(op, f"'pattern' must be a list of [step, num] pairs, got {pattern!r}")
    if not pairs or any(len(p) != 2 for p in pairs):
        vfail(op, f"'pattern' must be a non-empty list of [step, num] pairs, got {pattern!r}")
    steps = [_check_int(op, p[0], "pattern step") for p in pairs]
    nums = [_check_int(op, p[1], "pattern num") for p in pairs]
    if any(n < 1 for n in nums):
        vfail(op, f"every pattern num must be >= 1, got {pattern!r}")
    if len(pairs) > MAX_AP_DIMS:
        vfail(op, f"at most {MAX_AP_DIMS} [step, num] pairs, got {len(pairs)}")
    new = t.dtype if dtype is None else dt.normalize(dtype, op, "dtype")
    a, b = t.dtype.itemsize, new.itemsize

    def conv(x, what):
        if (x * a) % b:
            vfail(op, f"{what} {x} of '{t.name}' is not aligned to {b}-byte {new} elements")
        return x * a // b

    base = conv(t.offset, "offset")
    if offset is not None:
        base += _check_int(op, offset, "'offset'")
    if scalar_offset is not None and vector_offset is not None:
        vfail(op, "at most one of 'scalar_offset' and 'vector_offset' can be given")
    flen = t._alloc.flat.nbytes // b
    if t.on_chip:
        if len(pairs) < 2:
            vfail(op, "SBUF/PSUM access patterns need a partition pair and at least one free pair")
        free = (t._alloc.arr.size // t._alloc.arr.shape[0]) * t._alloc.arr.dtype.itemsize // b
        if nums[0] > 1 and steps[0] != free:
            vfail(
                op,
                f"the partition step must equal the storage's free size per partition ({free} {new} "
                f"elements): partition access must be contiguous, got step {steps[0]}",
            )
        p0, f0 = divmod(base, free)
        lo = f0 + sum(min(0, (n - 1) * s) for s, n in zip(steps[1:], nums[1:]))
        hi = f0 + sum(max(0, (n - 1) * s) for s, n in zip(steps[1:], nums[1:]))
        if base < 0 or lo < 0 or hi >= free or p0 + nums[0] > t._alloc.arr.shape[0]:
            vfail(
                op,
                f"pattern {pattern!r} with offset {base} leaves the storage of '{t.name}' "
                f"({t._alloc.arr.shape[0]} partitions x {free} elements)",
            )
    ind = None
    if scalar_offset is not None or vector_offset is not None:
        idim = _dim(op, t, indirect_dim, name="indirect_dim")
        mult = conv(t.strides[idim], "stride")
        bound = t.shape[idim]
        if vector_offset is not None:
            if t.on_chip:
                vfail(
                    op,
                    f"'vector_offset' indexes HBM tensors only; '{t.name}' is in {t.buffer.name.upper()} "
                    "(use nisa.nc_n_gather / nisa.local_gather on chip)",
                )
            _check_index_tile(op, vector_offset, "vector_offset", (nums[0], 1))
            ind = Indirect("vector", vector_offset, 0, mult, bound)
        else:
            if not isinstance(scalar_offset, _tensor_cls()):
                vfail(op, f"'scalar_offset' must be a (1, 1) SBUF tile, got {type(scalar_offset).__name__}")
            _check_index_tile(op, scalar_offset, "scalar_offset", (1, 1))
            ind = Indirect("scalar", scalar_offset, None, mult, bound)
    if ind is None or ind.kind == "scalar":
        lo = base + sum(min(0, (n - 1) * s) for s, n in zip(steps, nums))
        hi = base + sum(max(0, (n - 1) * s) for s, n in zip(steps, nums))
        if ind is None and (lo < 0 or hi >= flen):
            vfail(
                op,
                f"pattern {pattern!r} with offset {base} addresses elements {lo}..{hi} outside storage 0..{flen - 1}",
            )
    else:
        steps[0] = 0  # replaced by the index values
    return t._derive(tuple(nums), tuple(steps), base, ind=ind, dtype=new)


def indirect(t, index_, num_elem=None):
    vfail(
        f"{t.name}.indirect",
        "Tensor Indirection is available on NeuronCore-v4 (trn3) and later; the emulator targets trn1/trn2",
    )


# --------------------------------------------------------------------------
# nisa.dma_copy


def dma_copy(ctx, dst, src, priority=None, oob_mode=oob_mode.error, dge_mode=dge_mode.unknown, engine=None, name=None):
    """Body of ``nisa.dma_copy`` (see the nisa docstring)."""
    from .memory import Tensor

    op = "nisa.dma_copy"
    c = ctx.counters
    for x, n in ((dst, "dst"), (src, "src")):
        if not isinstance(x, Tensor):
            vfail(op, f"'{n}' must be a tensor (HBM or SBUF), got {type(x).__name__}")
        if x.buffer.name == "psum":
            vfail(
                op,
                f"'{n}' ('{x.name}') is in PSUM, which DMA cannot access; copy through SBUF with nisa.tensor_copy",
            )
    oob = _enum_name(oob_mode, globals()["oob_mode"], op, "oob_mode") or "error"
    dge = _enum_name(dge_mode, globals()["dge_mode"], op, "dge_mode") or "unknown"
    eng = getattr(engine, "name", engine)
    if priority is not None:
        vfail(op, f"'priority' is supported on NeuronCore-v4+ only; target {ctx.target.name} has no DMA priorities")
    if dge == "hwdge" and ctx.target.name == "trn1":
        vfail(op, "dge_mode=hwdge (hardware DGE) is only supported on NeuronCore-v3 (trn2) or newer")
    if eng not in (None, "unknown"):
        if dge != "hwdge":
            vfail(op, f"'engine' ({eng}) is only valid with dge_mode=nisa.dge_mode.hwdge")
        if eng not in ("sync", "scalar"):
            vfail(op, f"'engine' must be nisa.engine.sync or nisa.engine.scalar for HWDGE, got {eng}")
    for x, n in ((dst, "dst"), (src, "src")):
        ind = x._ind
        if ind is None:
            continue
        if ind.kind == "vector" and dge not in ("unknown", "swdge"):
            vfail(
                op, f"indirect gather/scatter through '{n}' needs software DGE (dge_mode=swdge or unknown), got {dge}"
            )
        if dge == "none":
            vfail(op, f"'{n}' has a dynamic (runtime) address, which needs DGE; dge_mode=none cannot generate it")
    if src.size != dst.size:
        vfail(
            op, f"'dst' shape {dst.shape} ({dst.size} elements) and 'src' shape {src.shape} ({src.size}) differ in size"
        )
    if src.on_chip and dst.on_chip and src.shape[0] != dst.shape[0]:
        vfail(op, f"partition sizes of 'src' ({src.shape[0]}) and 'dst' ({dst.shape[0]}) differ")
    skip = oob == "skip"
    if src._ind is not None:
        v, valid = gather(src, op, skip)
    else:
        v, valid = src._read(), None
    if v.shape != dst.shape:
        v = v.reshape(dst.shape)
        valid = None if valid is None else valid.reshape(dst.shape)
    v = dt.convert(v, dst.dtype)
    if dst._ind is not None:
        _, wvalid = scatter(dst, v, op, skip, mask=valid)
        if dst._alloc.mask is not None:
            mask_write(dst, True, wvalid)
        valid = wvalid
    elif valid is None:
        dst._write(v)
    else:
        view = strided_view(dst)
        view[valid] = v[valid]
        if dst._alloc.mask is not None:
            mask_write(dst, True, valid)
    moved = dst.size if valid is None else int(np.count_nonzero(valid))
    nbytes = moved * src.dtype.itemsize
    if dst.on_chip:
        parts = dst.shape[0]
    elif src.on_chip:
        parts = src.shape[0]
    else:
        parts = dst.shape[0] if dst.shape else 1
    c.dma(
        parts,
        nbytes,
        hbm_read=0 if src.on_chip else moved * src.dtype.itemsize,
        hbm_write=0 if dst.on_chip else moved * dst.dtype.itemsize,
    )


__all__ = ["ds", "DynSlice", "oob_mode", "dge_mode", "EmulatorError"]
