"""``nki.language`` names the 0.6 stub (Neuron 2.32.0) has beyond the older ones.

The 2.32.0 stub ``nki/api/nki/language/__init__.py`` documents creation
helpers (``ones``, ``full``, ``zeros_like``, ``empty_like``), buffer
predicates, ``broadcast_to`` / ``expand_dims``, and more convenience math.
Each one here either lowers to the ``nisa`` instruction(s) named in its
docstring (so it has that instruction's rules and counters) or raises
``NotEmulatedError`` naming the ``nisa`` route, because the stub does not say
how it lowers and a guessed lowering would give made-up counters.
"""

from enum import Enum

import numpy as np

from . import _isa as I
from . import _ops as O
from . import dtypes as dt
from . import memory as mem
from .errors import NotEmulatedError, fail
from .memory import NKIObject, Tensor, sbuf  # noqa: F401

DType = str  # the stub's alias: dtypes are written as nl.<name>
float8_e8m0fnu = "float8_e8m0fnu"  # MX scale dtype: no emulator storage type (NOT_EMULATED in dtypes)
NkiTensor = Tensor


class MemoryRegion(Enum):
    """The stub's memory-region enum.

    ``nl.sbuf``, ``nl.psum``, ``nl.hbm``, ``nl.private_hbm`` and
    ``nl.shared_hbm`` are the emulator's buffer objects (``nl.hbm`` stays an
    alias of ``private_hbm`` as the stub says); every ``buffer=`` argument also
    accepts these enum members.
    """

    sbuf = "sbuf"
    psum = "psum"
    private_hbm = "private_hbm"
    shared_hbm = "shared_hbm"


_REGION = {
    "sbuf": mem.sbuf, "psum": mem.psum, "private_hbm": mem.private_hbm, "shared_hbm": mem.shared_hbm,
}


def as_buffer(buffer, op, default=mem.sbuf):
    """A ``buffer=`` argument as the emulator's buffer object (MemoryRegion members accepted)."""
    if buffer is None:
        return default
    if isinstance(buffer, MemoryRegion):
        return _REGION[buffer.value]
    if isinstance(buffer, str):
        fail(op, f"string buffer names are not accepted since NKI 0.3; use nl.{buffer} instead of {buffer!r}")
    if not isinstance(buffer, mem.Buffer):
        fail(op, f"unknown buffer {buffer!r}; use nl.sbuf, nl.psum, nl.hbm, nl.private_hbm or nl.shared_hbm")
    return buffer


def is_hbm(buffer):
    """True for nl.hbm, nl.private_hbm and nl.shared_hbm."""
    return mem.is_hbm(as_buffer(buffer, "nl.is_hbm"))


def is_on_chip(buffer):
    """True for nl.sbuf and nl.psum."""
    return as_buffer(buffer, "nl.is_on_chip").on_chip


def is_psum(buffer):
    return as_buffer(buffer, "nl.is_psum") is mem.psum


def is_sbuf(buffer):
    return as_buffer(buffer, "nl.is_sbuf") is mem.sbuf


# ---------------------------------------------------------------- creation


def full(shape, fill_value, dtype, buffer=sbuf, name=""):
    """A new tensor filled with ``fill_value``: on chip one ``nisa.memset``; in HBM a constant (no instruction)."""
    op = "nl.full"
    buf = as_buffer(buffer, op)
    t = mem.allocate(shape, dtype, buf, name=name, op=op, fill=not buf.on_chip)
    if not O.is_scalar(fill_value):
        fail(op, f"'fill_value' must be a scalar, got {type(fill_value).__name__}")
    if buf.on_chip:
        v = fill_value
        if not dt.is_float(t.dtype) and float(v) == int(v):
            v = int(v)
        I.memset(t, v)
    else:
        t._write(np.asarray(fill_value).astype(np.float32).astype(t.dtype) if dt.is_float(t.dtype)
                 else np.asarray(int(fill_value)).astype(t.dtype))
    return t


def ones(shape, dtype, buffer=sbuf, name=""):
    """A new tensor of ones (``nl.full(shape, 1, ...)``)."""
    return full(shape, 1, dtype, buffer=buffer, name=name)


def zeros_like(x, dtype=None, buffer=None, name=""):
    """Zeros of ``x``'s shape (and dtype unless given); ``buffer`` defaults to SBUF (stub)."""
    if not isinstance(x, Tensor):
        fail("nl.zeros_like", f"'x' must be a tensor, got {type(x).__name__}")
    return full(x.shape, 0, dtype or x.dtype, buffer=as_buffer(buffer, "nl.zeros_like"), name=name)


def empty_like(x, dtype=None, buffer=None, name=""):
    """An uninitialized tensor (sentinels) of ``x``'s shape; ``buffer`` defaults to SBUF (stub)."""
    op = "nl.empty_like"
    if not isinstance(x, Tensor):
        fail(op, f"'x' must be a tensor, got {type(x).__name__}")
    return mem.allocate(x.shape, dtype or x.dtype, as_buffer(buffer, op), name=name, op=op)


# ------------------------------------------------------- tensor manipulation


def _tile(op, x):
    if not isinstance(x, Tensor):
        fail(op, f"'x' must be a tile, got {type(x).__name__}")
    if not x.on_chip:
        fail(op, f"'x' ('{x.name}') is in HBM; the source tile must be in SBUF or PSUM")
    return x


def expand_dims(x, axis):
    """A view of ``x`` with a size-1 axis inserted at ``axis`` (no instruction; ``x.expand_dim``)."""
    if not isinstance(x, Tensor):
        fail("nl.expand_dims", f"'x' must be a tile, got {type(x).__name__}")
    return x.expand_dim(axis)


def broadcast_to(x, shape, dtype=None):
    """``x`` broadcast to ``shape`` (same rank; each dim equal or from 1), as a new SBUF tile.

    Lowering (the stub does not give one; this is the emulator's): free dims
    only -- one ``nisa.tensor_copy`` (Vector Engine) from a stride-0 view
    (``x.broadcast``); a size-1 partition dim -- one SBUF->SBUF DMA (a DMA may
    read the same source partition for every destination partition; engines
    cannot, and a stride-0 partition view is not allowed on chip).  Same shape
    and dtype returns ``x`` itself.
    """
    op = "nl.broadcast_to"
    _tile(op, x)
    try:
        shape = tuple(int(s) for s in shape)
    except (TypeError, ValueError):
        fail(op, f"'shape' must be a tuple of ints, got {shape!r}")
    if len(shape) != x.ndim:
        fail(op, f"'shape' {shape} must have the rank of 'x' {x.shape}")
    for i, (a, b) in enumerate(zip(x.shape, shape)):
        if a != b and a != 1:
            fail(op, f"dimension {i} of 'x' has size {a}; it can only broadcast from 1 (to {b})")
    d = dt.normalize(dtype, op) or x.dtype
    if shape == x.shape and d == x.dtype:
        return x
    if shape[0] != x.shape[0]:
        if x.buffer is mem.psum:
            fail(op, "broadcasting the partition dim is a DMA, and DMAs do not access PSUM; copy to SBUF first")
        if shape[0] > mem.PMAX:
            fail(op, f"target partition dim {shape[0]} exceeds {mem.PMAX}")
        out = O.new_tile(shape, d, sbuf, op)
        out._write(dt.convert(np.broadcast_to(x._read(), shape), d))
        mem.current(op).counters.dma(shape[0], out.nbytes, instr="nisa.dma_copy")
        return out
    view = x
    for i in range(1, x.ndim):
        if x.shape[i] != shape[i]:
            view = view.broadcast(i, shape[i])
    out = O.new_tile(shape, d, sbuf, op)
    I.tensor_copy(out, view)
    return out


# ------------------------------------------------------------ elementwise


def negative(x, dtype=None):
    """-x: one ``nisa.tensor_scalar(op0=nl.multiply, operand0=-1.0)``."""
    op = "nl.negative"
    _tile(op, x)
    out = O.new_tile(x.shape, dt.normalize(dtype, op) or x.dtype, sbuf, op)
    I.tensor_scalar(out, x, O.multiply, -1.0)
    return out


_V4 = "is available only on NeuronCore-v4 (trn3) and newer (nl stub); the emulator models trn1 and trn2"


def abs_max(x, y, dtype=None):
    """NeuronCore-v4 only: fails on trn1/trn2."""
    fail("nl.abs_max", _V4)


def abs_min(x, y, dtype=None):
    """NeuronCore-v4 only: fails on trn1/trn2."""
    fail("nl.abs_min", _V4)


def _not_emulated(name, hint):
    def fn(*args, **kwargs):
        raise NotEmulatedError(f"nl.{name} is not emulated yet (its lowering is not documented): {hint}")

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Not emulated yet: {hint}"
    return fn


def _sig(fn, params):
    import inspect

    P = inspect.Parameter
    fn.__signature__ = inspect.Signature(
        [P(n, P.POSITIONAL_OR_KEYWORD, default=P.empty if d is _REQ else d) for n, d in params])
    return fn


_REQ = object()
_UNARY = [("x", _REQ), ("dtype", None)]
_RED = [("x", _REQ), ("axis", _REQ), ("dtype", None), ("keepdims", False)]

cos = _sig(_not_emulated("cos", "there is no cos activation; use nl.sin / nisa.activation(op=nl.sin) of x + pi/2, "
                                "range-reduced to [-pi, pi]"), _UNARY)
tan = _sig(_not_emulated("tan", "compose sin and cos (range-reduced) with nisa.reciprocal"), _UNARY)
ceil = _sig(_not_emulated("ceil", "round through an fp32 -> int32 nisa.tensor_copy and correct with a compare"),
            _UNARY)
floor = _sig(_not_emulated("floor", "round through an fp32 -> int32 nisa.tensor_copy and correct with a compare"),
             _UNARY)
trunc = _sig(_not_emulated("trunc", "round through an fp32 -> int32 nisa.tensor_copy and correct with a compare"),
             _UNARY)
var = _sig(_not_emulated("var", "use nisa.bn_stats + nisa.bn_aggr"), _RED)
all = _sig(_not_emulated("all", "use nisa.tensor_reduce(op=nl.minimum) of the 0/1 tile"),  # noqa: A001
           [("x", _REQ), ("axis", _REQ), ("dtype", None)])
where = _sig(_not_emulated("where", "use nisa.tensor_copy_predicated, nisa.select_reduce or nisa.affine_select"),
             [("condition", _REQ), ("x", _REQ), ("y", _REQ), ("dtype", None)])
gather_flattened = _sig(_not_emulated("gather_flattened", "use nisa.nc_n_gather or nisa.local_gather"),
                        [("data", _REQ), ("indices", _REQ), ("axis", 0), ("dtype", None)])
load_transpose2d = _sig(_not_emulated("load_transpose2d", "use nisa.dma_transpose, or nl.load + nisa.nc_transpose"),
                        [("src", _REQ), ("dtype", None)])
dropout = _sig(_not_emulated("dropout", "the hardware PRNG bit streams are not modeled"),
               [("x", _REQ), ("rate", _REQ), ("dtype", None)])

# operator constants of the stub (ALU / activation tables)
bypass = O.Op("bypass", "arith", lambda a, b: a, 2, alu="arith", int_fn=lambda a, b: a)
prelu = O.Op("prelu", "special", None, 1)  # needs relu_param: only nisa.activate2 (NeuronCore-v4) takes it
average = O.Op("average", "special", None, 2)  # no documented use on trn1/trn2
