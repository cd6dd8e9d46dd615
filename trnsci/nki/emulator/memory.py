"""Memories, allocations, tensors (HBM tensors and SBUF/PSUM tiles) and views.

A :class:`Tensor` is a window onto one :class:`Allocation`.  Basic indexing
(ints and slices) gives a NumPy view, so writes through a view land in the
allocation.  Index expressions built from ``nl.arange`` / ``nl.mgrid``
(integer arrays) give an "indexed view" that reads by gathering and writes
by scattering into its parent.

Every kernel call runs inside a fresh :class:`TraceContext` that owns the
counters and tracks live on-chip bytes per partition: an allocation is live
from creation until the last Python reference to it (or any view of it) is
dropped.
"""

import threading
from math import prod

import numpy as np

from . import dtypes as dt
from .errors import EmulatorError
from .profile import Counters, build_profile, get_target

PMAX = 128


class Buffer:
    """A memory kind: sbuf, psum, hbm, shared_hbm (and private_hbm)."""

    __slots__ = ("name", "on_chip")

    def __init__(self, name, on_chip):
        self.name = name
        self.on_chip = on_chip

    def __repr__(self):
        return f"nl.{self.name}"


sbuf = Buffer("sbuf", True)
psum = Buffer("psum", True)
hbm = Buffer("hbm", False)
shared_hbm = Buffer("shared_hbm", False)
private_hbm = Buffer("private_hbm", False)


def is_hbm(buffer):
    return buffer is hbm or buffer is shared_hbm or buffer is private_hbm


# --------------------------------------------------------------------------
# trace context

_state = threading.local()


def current(op="this operation"):
    ctx = getattr(_state, "ctx", None)
    if ctx is None:
        raise EmulatorError(
            f"{op} can only be used inside a kernel run by the emulator "
            "(nki.jit / nki.simulate / trnsci.nki.emulator.simulate)"
        )
    return ctx


class TraceContext:
    """State of one kernel call: counters, capacity tracking, program ids."""

    def __init__(self, target="trn1"):
        self.target = get_target(target)
        self.counters = Counters()
        self.live = {"sbuf": 0, "psum": 0}
        self.peak = {"sbuf": 0, "psum": 0}
        self.psum_banks_live = 0
        self.shared = []  # shared_hbm tensors of an SPMD launch, by creation order
        self.shared_index = 0
        self.program_id = ()
        self.grid = ()
        self._prev = None

    def __enter__(self):
        self._prev = getattr(_state, "ctx", None)
        _state.ctx = self
        return self

    def __exit__(self, *exc):
        _state.ctx = self._prev
        return False

    # ---- capacity -------------------------------------------------------
    def reserve(self, alloc, op, name):
        kind = alloc.buffer.name
        t = self.target
        limit = t.sbuf_bytes_per_partition if kind == "sbuf" else t.psum_bytes_per_partition
        need = self.live[kind] + alloc.pbytes
        if need > limit:
            raise EmulatorError(
                f"{op}: {kind.upper()} capacity exceeded on {t.name}: allocating "
                f"'{name}' ({alloc.pbytes} bytes per partition) needs {need} bytes per "
                f"partition of live {kind.upper()} allocations, but {t.name} has "
                f"{limit} bytes per partition"
            )
        if kind == "psum":
            banks = self.psum_banks_live + alloc.banks
            if banks > t.psum_banks:
                raise EmulatorError(
                    f"{op}: PSUM capacity exceeded on {t.name}: allocating '{name}' "
                    f"needs {banks} live PSUM banks of {t.psum_bank_bytes} bytes, but "
                    f"{t.name} has {t.psum_banks} banks per partition"
                )
            self.psum_banks_live = banks
        self.live[kind] = need
        if need > self.peak[kind]:
            self.peak[kind] = need

    def release(self, alloc):
        kind = alloc.buffer.name
        self.live[kind] -= alloc.pbytes
        if kind == "psum":
            self.psum_banks_live -= alloc.banks

    def profile(self):
        return build_profile(self.counters, self.target, self.peak["sbuf"], self.peak["psum"])


class Allocation:
    """One allocation: the backing NumPy array (+ PSUM written-mask)."""

    __slots__ = ("ctx", "buffer", "arr", "mask", "pbytes", "banks", "name", "__weakref__")

    def __init__(self, ctx, buffer, arr, name, op):
        self.ctx = None
        self.buffer = buffer
        self.arr = arr
        self.name = name
        self.mask = None
        self.pbytes = 0
        self.banks = 0
        if buffer.on_chip:
            self.pbytes = int(prod(arr.shape[1:])) * arr.dtype.itemsize
            if buffer is psum:
                # per element: 0 never written, 1 written by a non-matmul, 2 initialized by a matmul
                self.mask = np.zeros(arr.shape, dtype=np.uint8)
                bank = ctx.target.psum_bank_bytes
                self.banks = max(1, -(-self.pbytes // bank))
            ctx.reserve(self, op, name)
            self.ctx = ctx

    def __del__(self):
        ctx = self.ctx
        if ctx is not None:
            self.ctx = None
            try:
                ctx.release(self)
            except Exception:  # pragma: no cover - interpreter teardown
                pass


def check_tile_shape(shape, buffer, dtype, op, name):
    """Rules every SBUF/PSUM tile obeys: rank >= 2, partitions <= 128, PSUM <= 2 KiB."""
    if len(shape) < 2:
        raise EmulatorError(
            f"{op}: {buffer.name.upper()} tile '{name}' has rank {len(shape)} (shape "
            f"{tuple(shape)}); SBUF/PSUM tiles must be at least 2-D with the partition "
            "dimension first (use a (P, 1) shape, or keepdims=True for reductions)"
        )
    if shape[0] > PMAX:
        raise EmulatorError(
            f"{op}: number of partitions {shape[0]} exceeds architecture limitation of "
            f"{PMAX} (tile '{name}' of shape {tuple(shape)} in {buffer.name.upper()})"
        )
    if shape[0] < 1 or any(s < 1 for s in shape):
        raise EmulatorError(f"{op}: tile '{name}' has an empty dimension: {tuple(shape)}")
    if buffer is psum:
        fbytes = int(prod(shape[1:])) * dtype.itemsize
        if fbytes > 2048:
            raise EmulatorError(
                f"{op}: PSUM tile '{name}' of shape {tuple(shape)} and dtype {dtype} "
                f"needs {fbytes} bytes per partition, exceeding the 2048-byte (2 KiB) "
                "PSUM bank limit (psum_fmax = 512 fp32)"
            )


def allocate(shape, dtype, buffer, name="", op="nl.ndarray", fill=True):
    """Create a fresh tensor (tile or HBM tensor) filled with sentinels."""
    ctx = current(op)
    dtype = dt.normalize(dtype, op, "dtype")
    shape = tuple(int(s) for s in shape)
    name = name or buffer.name
    if buffer is shared_hbm and ctx.grid:
        # SPMD: every program instance sees the same shared_hbm output tensor
        i = ctx.shared_index
        ctx.shared_index += 1
        if i < len(ctx.shared):
            t = ctx.shared[i]
            if t.shape == shape and t.dtype == dtype:
                return t
        t = _allocate(ctx, shape, dtype, buffer, name, op, fill)
        ctx.shared.append(t)
        return t
    return _allocate(ctx, shape, dtype, buffer, name, op, fill)


def _allocate(ctx, shape, dtype, buffer, name, op, fill):
    if buffer.on_chip:
        check_tile_shape(shape, buffer, dtype, op, name)
    arr = np.empty(shape, dtype=dtype)
    if fill:
        dt.fill_sentinel(arr)
    alloc = Allocation(ctx, buffer, arr, name, op)
    return Tensor._new(alloc, arr, alloc.mask)


def wrap_hbm(array, name):
    """Wrap a caller's NumPy array as an HBM kernel argument (no copy)."""
    ctx = current("kernel argument")
    dt.normalize(array.dtype, "kernel argument", name)
    alloc = Allocation(ctx, shared_hbm, array, name, "kernel argument")
    return Tensor._new(alloc, array, None)


# --------------------------------------------------------------------------
# tensors and views

_nl_ops = None  # filled in by nl at import time (operator overloads)


def _is_index_array(k):
    return isinstance(k, np.ndarray) and k.dtype.kind in "iu"


class Tensor:
    """An HBM tensor or an SBUF/PSUM tile (or a view of one)."""

    __slots__ = ("_alloc", "_arr", "_mask", "_base", "_mbase", "_key", "shape", "dtype")
    __array_ufunc__ = None  # make NumPy defer to our reflected operators

    @classmethod
    def _new(cls, alloc, arr, mask, base=None, mbase=None, key=None, shape=None):
        t = object.__new__(cls)
        t._alloc = alloc
        t._arr = arr
        t._mask = mask
        t._base = base
        t._mbase = mbase
        t._key = key
        t.shape = tuple(arr.shape) if shape is None else shape
        t.dtype = alloc.arr.dtype
        return t

    # ---- properties ------------------------------------------------------
    @property
    def buffer(self):
        return self._alloc.buffer

    @property
    def name(self):
        return self._alloc.name

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def on_chip(self):
        return self._alloc.buffer.on_chip

    @property
    def size(self):
        return int(prod(self.shape))

    @property
    def nbytes(self):
        return self.size * self.dtype.itemsize

    @property
    def free_size(self):
        return int(prod(self.shape[1:]))

    def __repr__(self):
        return f"<{self.buffer.name} tensor '{self.name}' {self.shape} {self.dtype}>"

    # ---- raw access (used by the ops) -----------------------------------
    def _read(self):
        if self._key is None:
            return self._arr
        return self._base[self._key]

    def _write(self, values):
        if self._key is None:
            self._arr[...] = values
        else:
            self._base[self._key] = values
        if self._alloc.mask is not None:
            self._mask_write(True)

    def _mask_read(self):
        if self._key is None:
            return self._mask
        return self._mbase[self._key]

    def _mask_write(self, value):
        if self._key is None:
            self._mask[...] = value
        else:
            self._mbase[self._key] = value

    # ---- indexing ----------------------------------------------------------
    def _normalize_key(self, key):
        if not isinstance(key, tuple):
            key = (key,)
        nd = len(self.shape)
        if any(k is Ellipsis for k in key):
            i = next(j for j, k in enumerate(key) if k is Ellipsis)
            fill = nd - (len(key) - 1)
            key = key[:i] + (slice(None),) * fill + key[i + 1 :]
        if len(key) > nd:
            raise EmulatorError(f"indexing: too many indices ({len(key)}) for '{self.name}' of shape {self.shape}")
        key = key + (slice(None),) * (nd - len(key))
        advanced = False
        out = []
        for d, (k, n) in enumerate(zip(key, self.shape)):
            if isinstance(k, slice):
                start, stop = k.start, k.stop
                for v in (start, stop):
                    if v is not None and not isinstance(v, (int, np.integer)):
                        raise EmulatorError(
                            f"indexing: slice bounds of '{self.name}' must be compile-time "
                            f"integers, got {type(v).__name__}"
                        )
                if (start is not None and (start > n or start < -n)) or (stop is not None and (stop > n or stop < -n)):
                    raise EmulatorError(
                        f"indexing: out-of-bounds access {start}:{stop} on dimension {d} of "
                        f"'{self.name}' with shape {self.shape}"
                    )
                out.append(k)
            elif isinstance(k, (bool, np.bool_)):
                raise EmulatorError(f"indexing: boolean index on '{self.name}' is not supported")
            elif isinstance(k, (int, np.integer)):
                if not -n <= k < n:
                    raise EmulatorError(
                        f"indexing: index {k} is out of bounds for dimension {d} of '{self.name}' with size {n}"
                    )
                k = int(k) % n
                if d == 0 and self.on_chip:
                    k = slice(k, k + 1)  # tiles keep their partition dim
                out.append(k)
            elif _is_index_array(k):
                if k.size and (k.min() < 0 or k.max() >= n):
                    raise EmulatorError(
                        f"indexing: index expression out of bounds for dimension {d} of "
                        f"'{self.name}' with size {n} (range {k.min()}..{k.max()})"
                    )
                advanced = True
                out.append(k)
            elif isinstance(k, Tensor):
                raise EmulatorError(
                    f"indexing: dynamic indexing of '{self.name}' with tile values is not "
                    "supported by the emulator; use compile-time indices"
                )
            else:
                raise EmulatorError(f"indexing: unsupported index {k!r} for '{self.name}'")
        return tuple(out), advanced

    def __getitem__(self, key):
        if self._key is not None:
            raise EmulatorError(
                f"indexing: '{self.name}' is already an index-expression view; index the "
                "original tensor with one combined expression"
            )
        key, advanced = self._normalize_key(key)
        mask = self._mask
        if not advanced:
            arr = self._arr[key]
            return Tensor._new(self._alloc, arr, None if mask is None else mask[key])
        # index expression: slices become aranges along their own axis
        nd = len(self.shape)
        parts = []
        for d, k in enumerate(key):
            if isinstance(k, slice):
                r = np.arange(*k.indices(self.shape[d]))
                shp = [1] * nd
                shp[d] = r.size
                parts.append(r.reshape(shp))
            else:
                parts.append(k)
        try:
            shape = tuple(np.broadcast_shapes(*[np.shape(p) for p in parts]))
        except ValueError as e:
            raise EmulatorError(f"indexing: index expressions for '{self.name}' do not broadcast: {e}") from None
        if self.on_chip and len(shape) < 2:
            shape = (shape[0] if shape else 1, 1)
        parts = tuple(np.broadcast_to(p, shape) if np.ndim(p) else p for p in parts)
        return Tensor._new(self._alloc, self._arr, None, base=self._arr, mbase=mask, key=parts, shape=shape)

    def __setitem__(self, key, value):
        view = self[key]
        _nl_ops.assign(view, value)

    def reshape(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        if self._key is not None:
            raise EmulatorError(f"reshape: cannot reshape index-expression view of '{self.name}'")
        arr = self._arr.view()
        try:
            arr.shape = shape
        except (AttributeError, ValueError) as e:
            raise EmulatorError(
                f"reshape: cannot reshape '{self.name}' {self.shape} to {tuple(shape)} without a copy: {e}"
            ) from None
        if self.on_chip:
            check_tile_shape(arr.shape, self.buffer, self.dtype, "reshape", self.name)
        mask = None
        if self._mask is not None:
            mask = self._mask.view()
            mask.shape = shape
        return Tensor._new(self._alloc, arr, mask)

    # ---- tracing rules -----------------------------------------------------
    def __bool__(self):
        raise EmulatorError(
            f"bool() of tile '{self.name}': Python control flow cannot depend on tile "
            "values in an NKI kernel (kernels are traced); use nl.where / masks instead"
        )

    def __array__(self, *a, **k):
        raise EmulatorError(
            f"cannot convert '{self.name}' to a NumPy array inside a kernel; tile values "
            "are not available to Python code at trace time"
        )

    def __iter__(self):
        raise EmulatorError(f"cannot iterate over tile '{self.name}'; use nl.affine_range")

    def __len__(self):
        return self.shape[0]

    __hash__ = object.__hash__

    # ---- operators -> nl ops ----------------------------------------------
    def __add__(self, o):
        return _nl_ops.add(self, o)

    def __radd__(self, o):
        return _nl_ops.add(o, self)

    def __sub__(self, o):
        return _nl_ops.subtract(self, o)

    def __rsub__(self, o):
        return _nl_ops.subtract(o, self)

    def __mul__(self, o):
        return _nl_ops.multiply(self, o)

    def __rmul__(self, o):
        return _nl_ops.multiply(o, self)

    def __truediv__(self, o):
        return _nl_ops.divide(self, o)

    def __rtruediv__(self, o):
        return _nl_ops.divide(o, self)

    def __neg__(self):
        return _nl_ops.negative(self)

    def __abs__(self):
        return _nl_ops.abs(self)

    def __pow__(self, o):
        return _nl_ops.power(self, o)

    def __and__(self, o):
        return _nl_ops.bitwise_and(self, o)

    def __rand__(self, o):
        return _nl_ops.bitwise_and(o, self)

    def __or__(self, o):
        return _nl_ops.bitwise_or(self, o)

    def __ror__(self, o):
        return _nl_ops.bitwise_or(o, self)

    def __xor__(self, o):
        return _nl_ops.bitwise_xor(self, o)

    def __rxor__(self, o):
        return _nl_ops.bitwise_xor(o, self)

    def __lshift__(self, o):
        return _nl_ops.left_shift(self, o)

    def __rshift__(self, o):
        return _nl_ops.right_shift(self, o)

    def __invert__(self):
        return _nl_ops.invert(self)

    def __lt__(self, o):
        return _nl_ops.less(self, o)

    def __le__(self, o):
        return _nl_ops.less_equal(self, o)

    def __gt__(self, o):
        return _nl_ops.greater(self, o)

    def __ge__(self, o):
        return _nl_ops.greater_equal(self, o)

    def __eq__(self, o):
        if not isinstance(o, (Tensor, int, float, np.integer, np.floating)):
            return NotImplemented
        return _nl_ops.equal(self, o)

    def __ne__(self, o):
        if not isinstance(o, (Tensor, int, float, np.integer, np.floating)):
            return NotImplemented
        return _nl_ops.not_equal(self, o)

    def __iadd__(self, o):
        _nl_ops.assign(self, _nl_ops.add(self, o))
        return self

    def __isub__(self, o):
        _nl_ops.assign(self, _nl_ops.subtract(self, o))
        return self

    def __imul__(self, o):
        _nl_ops.assign(self, _nl_ops.multiply(self, o))
        return self
