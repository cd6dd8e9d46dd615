"""Memories, allocations, tensors (HBM tensors and SBUF/PSUM tiles) and views.

A :class:`Tensor` is a view (shape, strides, offset, dtype) onto the storage
of one :class:`Allocation`; indexing and the NKI 0.6 view primitives live in
:mod:`.access`.  Writes through any view land in the allocation.

Every kernel call runs inside a fresh :class:`TraceContext` that owns the
counters and tracks live on-chip bytes per partition by liveness: an
allocation is live from the first to the last instruction that touches it
(see :meth:`TraceContext.check_capacity`).
"""

import threading
from math import prod

import numpy as np

from . import access
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


def active():
    """The trace context of the kernel running now, or None outside a kernel run."""
    return getattr(_state, "ctx", None)


def current(op="this operation"):
    ctx = getattr(_state, "ctx", None)
    if ctx is None:
        raise EmulatorError(
            f"{op} can only be used inside a kernel run by the emulator "
            "(nki.jit / nki.simulate / trnsci.nki.emulator.simulate)"
        )
    return ctx


class TraceContext:
    """State of one kernel call: counters, capacity tracking, program ids.

    Capacity is counted by liveness, the way the compiler allocates: an
    on-chip allocation occupies its bytes from the first instruction that
    touches it (normally its first write) to the last instruction that reads
    or writes it -- not for as long as its Python object lives. Every
    instruction is one step (``Counters.step``); :meth:`check_capacity` sweeps
    the intervals when the kernel returns, per program (each program of a
    multi-core launch is its own NeuronCore), records the peaks and refuses
    a kernel whose live tiles exceed SBUF, PSUM or the PSUM banks at some
    step, naming the tiles live there.
    """

    def __init__(self, target="trn1"):
        self.target = get_target(target)
        self.counters = Counters(self.target)
        self.peak = {"sbuf": 0, "psum": 0}
        self.alive = {}  # id(on-chip allocation) -> weakref, while its Python object lives
        self.done = []  # liveness records of released on-chip allocations (see _record)
        self.seq = 0
        self.shared = []  # shared_hbm tensors of an SPMD launch, by creation order
        self.shared_index = 0
        self.program_id = ()
        self.program_index = 0
        self.grid = ()
        self.scheduler = None  # multi-program launches: multicore.Scheduler
        from .numerics import bf16_products_mode

        self.bf16_products = bf16_products_mode()  # "rounded" | "exact", fixed for the run (numerics.py)
        self.writebacks = []  # (caller's non-contiguous array, dense storage)
        self._prev = None

    def __enter__(self):
        self._prev = getattr(_state, "ctx", None)
        _state.ctx = self
        return self

    def __exit__(self, *exc):
        _state.ctx = self._prev
        for orig, dense in self.writebacks:
            if orig.flags.writeable and orig.tobytes() != dense.tobytes():
                orig[...] = dense
        self.writebacks = []
        return False

    # ---- capacity -------------------------------------------------------
    def reserve(self, alloc, op, name):
        """Checks one allocation can obey on its own; the totals are checked by liveness at the end."""
        import weakref

        kind = alloc.buffer.name
        t = self.target
        limit = t.sbuf_bytes_per_partition if kind == "sbuf" else t.psum_bytes_per_partition
        if alloc.address is not None:
            start = int(alloc.address[1])
            if start + alloc.pbytes > limit:
                raise EmulatorError(
                    f"{op}: tile '{name}' placed at free offset {start} with {alloc.pbytes} bytes per partition "
                    f"ends past the {limit}-byte {kind.upper()} partition of {t.name}")
            if kind == "psum" and start // t.psum_bank_bytes != (start + alloc.pbytes - 1) // t.psum_bank_bytes:
                raise EmulatorError(
                    f"{op}: PSUM tile '{name}' placed at free offset {start} ({alloc.pbytes} bytes per partition) "
                    f"crosses a {t.psum_bank_bytes}-byte PSUM bank boundary")
        elif alloc.pbytes > limit:
            raise EmulatorError(
                f"{op}: {kind.upper()} capacity exceeded on {t.name}: allocating "
                f"'{name}' ({alloc.pbytes} bytes per partition) needs {alloc.pbytes} bytes per "
                f"partition on its own, but {t.name} has {limit} bytes per partition"
            )
        alloc.program = self.program_index
        alloc.seq = self.seq
        self.seq += 1
        self.alive[id(alloc)] = weakref.ref(alloc)

    def release(self, alloc):
        self.counters.forget(alloc)
        if self.alive.pop(id(alloc), None) is not None and alloc.first >= 0:
            self.done.append(_record(alloc))

    def live_records(self):
        """Liveness records of every on-chip allocation of this run that was touched."""
        recs = list(self.done)
        for ref in list(self.alive.values()):
            a = ref()
            if a is not None and a.first >= 0:
                recs.append(_record(a))
        return recs

    def check_capacity(self):
        """Sweep the liveness intervals: record the peaks, refuse a step with too much live."""
        t = self.target
        bank = t.psum_bank_bytes
        groups = {}
        for r in self.live_records():
            groups.setdefault((r[0], r[1]), []).append(r)
        for (_prog, kind), recs in sorted(groups.items()):
            limit = t.sbuf_bytes_per_partition if kind == "sbuf" else t.psum_bytes_per_partition
            events = []
            for r in recs:
                events.append((r[2], 1, r))
                events.append((r[3] + 1, 0, r))
            events.sort(key=lambda e: (e[0], e[1], e[2][4]))
            live = {}
            top_bytes = (0, 0, None, ())  # (bytes, banks, step, live records) at the byte peak
            top_banks = (0, 0, None, ())  # ... at the bank peak
            k = 0
            while k < len(events):
                step = events[k][0]
                while k < len(events) and events[k][0] == step:
                    _, add, r = events[k]
                    if add:
                        live[r[4]] = r
                    else:
                        live.pop(r[4], None)
                    k += 1
                used, banks = _usage(live.values(), bank)
                if used > top_bytes[0]:
                    top_bytes = (used, banks, step, tuple(live.values()) if used > limit else ())
                if banks > top_banks[1]:
                    top_banks = (used, banks, step, tuple(live.values()) if banks > t.psum_banks else ())
            if top_bytes[0] > self.peak[kind]:
                self.peak[kind] = top_bytes[0]
            over = None
            if top_bytes[0] > limit:
                over = top_bytes
            elif kind == "psum" and top_banks[1] > t.psum_banks:
                over = top_banks
            if over is not None:
                used, banks, step, tiles = over
                tiles = sorted(tiles, key=lambda r: r[4])
                names = ", ".join(f"'{r[6]}' {r[7]} {r[8]} ({r[5]} B)" for r in tiles[:12])
                more = f" and {len(tiles) - 12} more" if len(tiles) > 12 else ""
                prog = f" (program {_prog})" if self.grid else ""
                if used > limit:
                    what = (f"{kind.upper()} capacity exceeded on {t.name}{prog}: at its peak (instruction "
                            f"{step}) the live tiles need {used} bytes per partition of {kind.upper()}, "
                            f"but {t.name} has {limit} bytes per partition")
                else:
                    what = (f"PSUM capacity exceeded on {t.name}{prog}: at its peak (instruction {step}) the live "
                            f"tiles need {banks} live PSUM banks of {bank} bytes, but {t.name} has {t.psum_banks} "
                            "banks per partition")
                raise EmulatorError(
                    f"{what}. Capacity is counted by liveness (first to last use of each tile); live there: "
                    f"{names}{more}"
                )

    def profile(self):
        return build_profile(self.counters, self.target, self.peak["sbuf"], self.peak["psum"])


def _record(a):
    """(program, kind, first step, last step, seq, bytes per partition, name, shape, dtype, banks, range)."""
    rng = None
    if a.address is not None:
        start = int(a.address[1])
        rng = (start, start + a.pbytes)
    return (a.program, a.buffer.name, a.first, a.last, a.seq, a.pbytes, a.name, tuple(a.arr.shape),
            str(a.arr.dtype), a.banks, rng)


def _usage(recs, bank):
    """Bytes per partition and PSUM banks of live records; placed tiles count the union of their ranges."""
    total, banks, placed = 0, 0, []
    for r in recs:
        if r[10] is None:
            total += r[5]
            banks += r[9]
        else:
            placed.append(r[10])
    if placed:
        end, used_banks = -1, set()
        for a, b in sorted(placed):
            if b > end:
                total += b - max(a, end)
                end = b
            used_banks.update(range(a // bank, -(-b // bank)))
        banks += len(used_banks)
    return total, banks


class Allocation:
    """One allocation: the backing NumPy array, its flat storage (+ PSUM written-mask).

    ``flat`` is the storage as a 1-D array (a view of ``arr``); views of
    another dtype read it through ``flat_as(dtype)``.  PSUM allocations carry
    a per-byte written-mask (``mask``) so views of any dtype can track which
    elements an instruction has written.
    """

    __slots__ = ("ctx", "buffer", "arr", "flat", "_flats", "mask", "pbytes", "banks", "name", "address",
                 "first", "last", "program", "seq", "__weakref__")

    def __init__(self, ctx, buffer, arr, name, op, address=None):
        self.ctx = None
        self.address = address
        self.buffer = buffer
        self.arr = arr
        self.flat = arr.reshape(-1)
        self._flats = {}
        self.name = name
        self.mask = None
        self.pbytes = 0
        self.banks = 0
        self.first = -1  # first and last instruction step touching it (on-chip liveness)
        self.last = -1
        self.program = 0
        self.seq = 0
        if buffer.on_chip:
            self.pbytes = int(prod(arr.shape[1:])) * arr.dtype.itemsize
            if buffer is psum:
                # one state byte per byte of the tile: 0 never written, 1 written by a
                # non-matmul instruction, 2 initialized by a matmul (see access.mask_read)
                self.mask = np.zeros(arr.nbytes, dtype=np.uint8)
                bank = ctx.target.psum_bank_bytes
                self.banks = max(1, -(-self.pbytes // bank))
            ctx.reserve(self, op, name)
            self.ctx = ctx

    def flat_as(self, dtype):
        """The flat storage reinterpreted as dtype (no copy)."""
        if dtype == self.flat.dtype:
            return self.flat
        f = self._flats.get(dtype)
        if f is None:
            f = self._flats[dtype] = self.flat.view(dtype)
        return f

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


def allocate(shape, dtype, buffer, name="", op="nl.ndarray", fill=True, address=None):
    """Create a fresh tensor (tile or HBM tensor) filled with sentinels.

    ``address=(partition_offset, free_offset)`` places an on-chip tile: its
    bytes count toward capacity as the union with the other placed tiles
    (tiles at one address share it), not on top of them.
    """
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
    return _allocate(ctx, shape, dtype, buffer, name, op, fill, address)


def _allocate(ctx, shape, dtype, buffer, name, op, fill, address=None):
    if buffer.on_chip:
        check_tile_shape(shape, buffer, dtype, op, name)
    arr = np.empty(shape, dtype=dtype)
    if fill:
        dt.fill_sentinel(arr)
    alloc = Allocation(ctx, buffer, arr, name, op, address)
    return Tensor._fresh(alloc)


def wrap_hbm(array, name):
    """Wrap a caller's NumPy array as an HBM kernel argument (no copy)."""
    ctx = current("kernel argument")
    dt.normalize(array.dtype, "kernel argument", name)
    if not array.flags.c_contiguous:
        # HBM storage is dense row-major: run on a contiguous copy and write
        # changes back into the caller's array when the kernel returns
        dense = np.ascontiguousarray(array)
        ctx.writebacks.append((array, dense))
        array = dense
    alloc = Allocation(ctx, shared_hbm, array, name, "kernel argument")
    return Tensor._fresh(alloc)


def _touch(t, write):
    """Tell the running trace's timeline (and the liveness of on-chip tiles) that ``t`` is read / written."""
    ctx = getattr(_state, "ctx", None)
    if ctx is not None:
        a = t._alloc
        c = ctx.counters
        c.touch(a, write)
        if a.ctx is not None:  # on chip
            if a.first < 0:
                a.first = c.step
            a.last = c.step


# --------------------------------------------------------------------------
# tensors and views

_nl_ops = None  # filled in by nl at import time (operator overloads)


def _nki_object_init(self, *args, **kwargs):
    """``__init__`` of NKIObject subclasses that define none (dataclasses included).

    Dataclass fields are filled from positional and keyword arguments (then
    defaults / default factories, then ``__post_init__``), as the dataclass's
    own ``__init__`` would, except that no field is required: the 0.6 stub's
    ``NKIObject.__init__(**kwargs)`` requires none, so a field without a
    default that is not passed stays unset. Other keywords become attributes
    too. aws-neuron/nki-library relies on both:
    ``@dataclass class SectionParams(nl.NKIObject)`` declares its attributes
    without annotations (so the dataclass has no fields) and is built with
    keywords.
    """
    import dataclasses

    flds = [f for f in dataclasses.fields(self) if f.init] if dataclasses.is_dataclass(self) else []
    name = type(self).__name__
    if len(args) > len(flds):
        raise TypeError(f"{name}() takes {len(flds)} positional arguments but {len(args)} were given")
    vals = {f.name: a for f, a in zip(flds, args)}
    for k, v in kwargs.items():
        if k in vals:
            raise TypeError(f"{name}() got multiple values for argument {k!r}")
        vals[k] = v
    for f in flds:
        if f.name not in vals:
            if f.default is not dataclasses.MISSING:
                vals[f.name] = f.default
            elif f.default_factory is not dataclasses.MISSING:
                vals[f.name] = f.default_factory()
            # else: left unset, as the stub's NKIObject.__init__(**kwargs) requires no field;
            # reading it before a kernel assigns it raises AttributeError naming the field
    for k, v in vals.items():
        object.__setattr__(self, k, v)  # also for frozen dataclasses
    post = getattr(self, "__post_init__", None)
    if post is not None:
        post()


class NKIObject:
    """Base class of NKI objects (``nl.NKIObject``): tensors, registers, kernel config dataclasses.

    Kernels subclass it (often as a ``@dataclass``) for configuration objects.
    A subclass that defines no ``__init__`` gets one that takes the dataclass
    fields and any other keyword as an attribute (see :func:`_nki_object_init`);
    putting it in the subclass before ``@dataclass`` runs keeps the dataclass
    from replacing it.
    """

    __slots__ = ()

    def __init__(self, **kwargs):
        for k, v in kwargs.items():
            setattr(self, k, v)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "__init__" not in cls.__dict__:
            cls.__init__ = _nki_object_init


class Tensor(NKIObject):
    """An HBM tensor or an SBUF/PSUM tile: a view on one allocation's storage.

    ``shape``, ``strides`` and ``offset`` are in elements of ``dtype`` (NKI
    0.6 ``NkiTensor`` model); view operations live in :mod:`.access`.
    """

    __slots__ = ("_alloc", "shape", "strides", "offset", "dtype", "_ind", "_np")
    __array_ufunc__ = None  # make NumPy defer to our reflected operators

    @classmethod
    def _fresh(cls, alloc):
        a = alloc.arr
        return cls._make(alloc, tuple(a.shape), access._contig_strides(a.shape), 0, a.dtype, None)

    @classmethod
    def _make(cls, alloc, shape, strides, offset, dtype, ind):
        t = object.__new__(cls)
        t._alloc = alloc
        t.shape = tuple(int(n) for n in shape)
        t.strides = tuple(int(s) for s in strides)
        t.offset = int(offset)
        t.dtype = dtype
        t._ind = ind
        t._np = None
        return t

    def _derive(self, shape, strides, offset, ind=None, dtype=None):
        return Tensor._make(self._alloc, shape, strides, offset, self.dtype if dtype is None else dtype, ind)

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

    @property
    def _key(self):
        """None for a direct (strided) view; set for an indirect one."""
        return None if self._ind is None else self._ind.kind

    def __repr__(self):
        return f"<{self.buffer.name} tensor '{self.name}' {self.shape} {self.dtype}>"

    # ---- raw access (used by the ops) -----------------------------------
    @property
    def _arr(self):
        v = self._np
        if v is None:
            v = self._np = access.strided_view(self)
        return v

    def _read(self):
        _touch(self, False)
        if self._ind is None:
            return self._arr
        return access.gather(self)[0]

    def _write(self, values):
        _touch(self, True)
        if self._ind is None:
            self._arr[...] = values
        else:
            access.scatter(self, values)
        if self._alloc.mask is not None:
            access.mask_write(self, True)

    def _mask_read(self):
        return access.mask_read(self)

    def _mask_write(self, value):
        access.mask_write(self, value)

    # ---- NKI 0.6 indexing and view primitives (see access.py) ------------
    def __getitem__(self, key):
        return access.index(self, key)

    def __setitem__(self, key, value):
        view = self[key]
        _nl_ops.assign(view, value)

    def slice(self, dim, start, end, step=1):
        """View of ``start:end:step`` along ``dim`` (``0 <= start < end <= shape[dim]``)."""
        return access.slice_(self, dim, start, end, step)

    def select(self, dim, index):
        """Pick one index along ``dim`` and drop the dim; a (1, 1) SBUF int tile selects at run time."""
        return access.select(self, dim, index)

    def vector_select(self, dim, vector_offset):
        """HBM only, dim 0: partition p reads row ``vector_offset[p]`` (an indirect view)."""
        return access.vector_select(self, dim, vector_offset)

    def permute(self, dims):
        """Reorder dims (the partition dim stays first on SBUF/PSUM)."""
        return access.permute(self, dims)

    def broadcast(self, dim, size):
        """Repeat a size-1 dim ``size`` times (stride 0; not the partition dim)."""
        return access.broadcast(self, dim, size)

    def expand_dim(self, dim):
        """Insert a size-1 dim at ``dim``."""
        return access.expand_dim(self, dim)

    def squeeze_dim(self, dim):
        """Remove the size-1 dim ``dim``."""
        return access.squeeze_dim(self, dim)

    def reshape_dim(self, dim, shape):
        """Split dim ``dim`` into ``shape`` (one entry may be -1)."""
        return access.reshape_dim(self, dim, shape)

    def flatten_dims(self, start_dim, end_dim):
        """Merge dims ``start_dim..end_dim`` (inclusive; must be contiguous)."""
        return access.flatten_dims(self, start_dim, end_dim)

    def reshape(self, shape):
        """Same storage, new shape (a view; fails when a copy would be needed)."""
        return access.reshape(self, shape)

    def rearrange(self, src_pattern, dst_pattern, fixed_sizes=None):
        """einops-style split / permute / merge, e.g. ``(('b', ('h', 'w')), ('b', 'w', 'h'), {'h': 4})``."""
        return access.rearrange(self, src_pattern, dst_pattern, fixed_sizes)

    def view(self, dtype):
        """Reinterpret the bits as ``dtype``; the last dim scales by the itemsize ratio."""
        return access.view(self, dtype)

    reinterpret_cast = view

    def ap(self, pattern, offset=None, scalar_offset=None, vector_offset=None, indirect_dim=0, dtype=None):
        """Explicit access pattern ``[[step, num], ...]`` on this tensor's storage."""
        return access.ap(self, pattern, offset, scalar_offset, vector_offset, indirect_dim, dtype)

    def get_pattern(self):
        """``[[stride, count], ...]`` of this view, one pair per dim."""
        return access.get_pattern(self)

    def is_contiguous(self):
        return access.is_contiguous(self)

    def is_indirect(self):
        return self._ind is not None

    def indirect(self, index, num_elem=None):
        return access.indirect(self, index, num_elem)

    # ---- tracing rules -----------------------------------------------------
    def __bool__(self):
        """Always True: the 0.6 ``NkiTensor`` defines no ``__bool__`` (nor ``__len__``), so
        Python's default truth applies -- ``if cfg.bias and ...:`` tests for a tensor being
        present, never its values (which tracing cannot see)."""
        return True

    def __array__(self, *a, **k):
        raise EmulatorError(
            f"cannot convert '{self.name}' to a NumPy array inside a kernel; tile values "
            "are not available to Python code at trace time"
        )

    def __iter__(self):
        raise EmulatorError(f"cannot iterate over tile '{self.name}'; use nl.affine_range")

    def __len__(self):
        if not self.shape:
            raise TypeError(f"len() of 0-d view of '{self.name}'")
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
