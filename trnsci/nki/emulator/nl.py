"""Emulated ``nki.language`` (nl): tile creation, data movement, elementwise
math, reductions, matmul, index expressions and loops.

``nl`` operations return new tiles (in SBUF unless stated) and count one
instruction on the engine that would run them:

* Tensor Engine: ``matmul`` (plus one transpose when ``transpose_x=False``),
  ``transpose``.
* Vector Engine: arithmetic, comparisons, bitwise ops, ``copy``, ``where``,
  reductions, ``zeros/ones/full`` on chip, assignment into a tile view.
* Scalar Engine: transcendental / activation functions (exp, log, sqrt,
  rsqrt, sin, cos, tanh, sigmoid, relu, gelu, silu, erf, softplus).
* DMA: ``load``, ``store``, ``load_transpose2d``.

The functions double as ``op=`` arguments of the ``nisa`` instructions.
"""

import builtins as _b
from math import prod as _prod

import numpy as np

from . import dtypes as dt
from . import memory as mem
from .access import ds  # noqa: F401  (nl.ds)
from .dtypes import (  # noqa: F401  (re-exported dtype names)
    bfloat16,
    bool_,
    float16,
    float32,
    int8,
    int16,
    int32,
    uint8,
    uint16,
    uint32,
)
from .errors import fail
from .memory import Tensor, hbm, private_hbm, psum, sbuf, shared_hbm  # noqa: F401

PMAX = mem.PMAX


class tile_size:
    """Hardware tile limits (same names as ``nki.language.tile_size``)."""

    pmax = 128
    psum_fmax = 512
    gemm_stationary_fmax = 128
    gemm_moving_fmax = 512
    psum_partition_bytes = 16 * 1024
    total_available_sbuf_size = 192 * 1024


# ===========================================================================
# helpers shared with nisa


def _counters():
    return mem.current().counters


def is_scalar(x):
    return isinstance(x, (bool, int, float, np.integer, np.floating))


def onchip(x, op, operand, allow_scalar=False):
    """Check that x is an SBUF/PSUM tile (or a scalar when allowed)."""
    if isinstance(x, Tensor):
        if not x.on_chip:
            fail(
                op,
                f"operand '{operand}' ('{x.name}') is in HBM; compute instructions "
                "access SBUF or PSUM only (nl.load HBM data into SBUF first)",
            )
        if x.ndim < 2:
            fail(
                op,
                f"operand '{operand}' ('{x.name}') has rank {x.ndim} (shape {x.shape}); "
                "SBUF/PSUM tiles must be at least 2-D",
            )
        if x.shape[0] > PMAX:
            fail(
                op, f"number of partitions {x.shape[0]} exceeds architecture limitation of {PMAX} (operand '{operand}')"
            )
        return x
    if allow_scalar and is_scalar(x):
        return x
    if isinstance(x, np.ndarray):
        fail(
            op,
            f"operand '{operand}' is a NumPy array; only kernel arguments (HBM) and "
            "tiles are valid (index expressions go inside [] of a tensor)",
        )
    fail(
        op,
        f"operand '{operand}' must be a tile"
        + (" or a compile-time scalar" if allow_scalar else "")
        + f", got {type(x).__name__}",
    )


def hbm_tensor(x, op, operand):
    if not isinstance(x, Tensor) or x.on_chip:
        where = x.buffer.name.upper() if isinstance(x, Tensor) else type(x).__name__
        fail(op, f"operand '{operand}' must be an HBM tensor, got {where}")
    return x


def new_tile(shape, dtype, buffer=sbuf, op="nl", name=None):
    return mem.allocate(shape, dtype, buffer, name=name or op, op=op, fill=False)


def store_values(dst, values):
    """Write already-converted values into dst (a tile or view)."""
    dst._write(values)


def elems(t):
    """Elements per partition (the N of the cycle rules)."""
    return int(_prod(t.shape[1:])) if len(t.shape) > 1 else 1


def vals(x):
    return x._read() if isinstance(x, Tensor) else x


def check_partitions(op, pairs):
    """Binary ops need matching partition sizes (no partition broadcast)."""
    ref = None
    for name, t in pairs:
        if isinstance(t, Tensor):
            if ref is None:
                ref = (name, t)
            elif t.shape[0] != ref[1].shape[0]:
                fail(
                    op,
                    f"partition dimension mismatch: '{ref[0]}' has {ref[1].shape[0]} "
                    f"partitions but '{name}' has {t.shape[0]}; broadcasting along the "
                    "partition dimension is not supported",
                )


def align(values, nd):
    """Append trailing unit dims so a (P, 1) operand broadcasts over free dims."""
    if isinstance(values, np.ndarray) and values.ndim < nd:
        return values.reshape(values.shape + (1,) * (nd - values.ndim))
    return values


def broadcast_free_shape(op, named):
    shapes = [t.shape for _, t in named if isinstance(t, Tensor)]
    nd = _b.max(len(s) for s in shapes)
    shapes = [s + (1,) * (nd - len(s)) for s in shapes]
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        desc = ", ".join(f"'{n}' {t.shape}" for n, t in named if isinstance(t, Tensor))
        fail(op, f"operand shapes do not broadcast along the free dimensions: {desc}")


def scalar_bits(x, udt, op):
    if isinstance(x, (float, np.floating)):
        if float(x) != int(x):
            fail(op, f"bitwise operand {x!r} is not an integer")
    return np.array(int(x) & ((1 << (8 * udt.itemsize)) - 1), dtype=udt)


def to_bits(x, out_dt, op, operand):
    """Raw bits of x as the unsigned type of out_dt's width."""
    udt = dt.unsigned_of(out_dt)
    if isinstance(x, Tensor):
        if not dt.is_int(x.dtype):
            fail(op, f"bitwise operations need integer operands; '{operand}' is {x.dtype}")
        a = x._read()
        if a.dtype.itemsize != udt.itemsize:
            a = a.astype(out_dt)  # C-style wrap / sign extension
        return a.view(udt)
    return scalar_bits(x, udt, op)


# ===========================================================================
# elementwise operations


class Op:
    """An nl function that can also be passed as ``op=`` to nisa instructions.

    kind: "arith" (fp32 math), "cmp" (fp32 compare -> 1/0), "bitvec" (raw
    bits), "act" (Scalar Engine activation function, fp32).
    """

    def __init__(self, name, kind, fn, arity, cost=1, engine="vector", reduce=None):
        self.name = name
        self.kind = kind
        self.fn = fn
        self.arity = arity
        self.cost = cost
        self.engine = engine
        self.reduce = reduce  # numpy reduction for tensor_reduce(op=...)
        self.__name__ = name
        self.__qualname__ = name

    def __repr__(self):
        return f"nl.{self.name}"

    def __call__(self, *args, dtype=None, mask=None, **kw):
        op = f"nl.{self.name}"
        if len(args) != self.arity:
            raise TypeError(f"{op} takes {self.arity} operand(s), got {len(args)}")
        ctx = mem.current(op)
        if self.arity == 1:
            x = onchip(args[0], op, "x")
            out_dt = dt.normalize(dtype, op) or x.dtype
            res = self.compute1(x._read(), x.dtype, out_dt, op)
            n = elems(x)
            ctx.counters.engine(self.engine, self.cost * n)
            buf = x.buffer if self.name == "copy" else sbuf
            out = new_tile(x.shape, out_dt, buf, op)
            out._write(res)
            return out
        x, y = args
        x = onchip(x, op, "x", allow_scalar=True)
        y = onchip(y, op, "y", allow_scalar=True)
        if not isinstance(x, Tensor) and not isinstance(y, Tensor):
            fail(op, "at least one operand must be a tile")
        check_partitions(op, (("x", x), ("y", y)))
        shape = broadcast_free_shape(op, (("x", x), ("y", y)))
        out_dt = dt.normalize(dtype, op)
        if out_dt is None:
            if isinstance(x, Tensor) and isinstance(y, Tensor):
                out_dt = dt.promote(x.dtype, y.dtype)
            else:
                out_dt = (x if isinstance(x, Tensor) else y).dtype
        res = self.compute2(x, y, out_dt, op, len(shape))
        full = all(isinstance(t, Tensor) and elems(t) == elems_of(shape) for t in (x, y))
        ctx.counters.engine(self.engine, (2 if full else 1) * self.cost * elems_of(shape))
        out = new_tile(shape, out_dt, sbuf, op)
        out._write(np.broadcast_to(res, shape))
        return out

    # --- numerics ---------------------------------------------------------
    def compute1(self, a, in_dt, out_dt, op):
        if self.kind == "bitvec":
            if not dt.is_int(in_dt) or not dt.is_int(out_dt):
                fail(op, f"bitwise operations need integer dtypes, got {in_dt} -> {out_dt}")
            udt = dt.unsigned_of(out_dt)
            b = a.astype(out_dt).view(udt) if a.dtype.itemsize != udt.itemsize else a.view(udt)
            return self.fn(b).view(out_dt)
        with np.errstate(all="ignore"):
            r = self.fn(dt.to_fp32(a))
        return dt.from_fp32(r, out_dt)

    def compute2(self, x, y, out_dt, op, nd):
        """x, y: tiles or scalars.  Returns values in out_dt (broadcastable)."""
        if self.kind == "bitvec":
            if not dt.is_int(out_dt):
                fail(op, f"bitwise operations need an integer output dtype, got {out_dt}")
            a = align(to_bits(x, out_dt, op, "x"), nd)
            b = align(to_bits(y, out_dt, op, "y"), nd)
            return np.asarray(self.fn(a, b, 8 * out_dt.itemsize)).view(out_dt)
        a = align(dt.to_fp32(vals(x)), nd)
        b = align(dt.to_fp32(vals(y)), nd)
        with np.errstate(all="ignore"):
            r = self.fn(a, b)
        if self.kind == "cmp":
            r = r.astype(np.float32)
        return dt.from_fp32(r, out_dt)

    def fp32(self, a, b=None):
        """Apply the op to fp32 arrays (used by tensor_scalar/activation)."""
        with np.errstate(all="ignore"):
            r = self.fn(a) if self.arity == 1 else self.fn(a, b)
        if self.kind == "cmp":
            r = r.astype(np.float32)
        return np.asarray(r, dtype=np.float32)


def elems_of(shape):
    return int(_prod(shape[1:])) if len(shape) > 1 else 1


def _shl(a, b, bits):
    b = np.asarray(b).astype(np.int64)
    big = (b >= bits) | (b < 0)
    return np.where(big, 0, a << np.where(big, 0, b).astype(a.dtype)).astype(a.dtype)


def _shr(a, b, bits):
    b = np.asarray(b).astype(np.int64)
    big = (b >= bits) | (b < 0)
    return np.where(big, 0, a >> np.where(big, 0, b).astype(a.dtype)).astype(a.dtype)


def _bit(fn):
    return lambda a, b, bits: fn(a, b)


def _rsqrt(x):
    return np.float32(1.0) / np.sqrt(x)


def _sigmoid(x):
    return np.float32(1.0) / (np.float32(1.0) + np.exp(-x))


def _erf(x):
    from scipy.special import erf

    return erf(x).astype(np.float32)


def _gelu(x):
    return (np.float32(0.5) * x * (np.float32(1.0) + _erf(x / np.float32(np.sqrt(2.0))))).astype(np.float32)


def _softplus(x):
    return np.logaddexp(np.float32(0.0), x).astype(np.float32)


# binary arithmetic (Vector Engine)
add = Op("add", "arith", np.add, 2, reduce=np.add)
subtract = Op("subtract", "arith", np.subtract, 2)
multiply = Op("multiply", "arith", np.multiply, 2, reduce=np.multiply)
divide = Op("divide", "arith", np.divide, 2)
maximum = Op("maximum", "arith", np.maximum, 2, reduce=np.maximum)
minimum = Op("minimum", "arith", np.minimum, 2, reduce=np.minimum)
power = Op("power", "arith", np.power, 2)
mod = Op("mod", "arith", np.fmod, 2)
# comparisons (Vector Engine; 1/0 in the output dtype)
equal = Op("equal", "cmp", np.equal, 2)
not_equal = Op("not_equal", "cmp", np.not_equal, 2)
less = Op("less", "cmp", np.less, 2)
less_equal = Op("less_equal", "cmp", np.less_equal, 2)
greater = Op("greater", "cmp", np.greater, 2)
greater_equal = Op("greater_equal", "cmp", np.greater_equal, 2)
# bitwise (Vector Engine, exact on raw bits; right shift is logical)
bitwise_and = Op("bitwise_and", "bitvec", _bit(np.bitwise_and), 2)
bitwise_or = Op("bitwise_or", "bitvec", _bit(np.bitwise_or), 2)
bitwise_xor = Op("bitwise_xor", "bitvec", _bit(np.bitwise_xor), 2)
left_shift = Op("left_shift", "bitvec", _shl, 2)
right_shift = Op("right_shift", "bitvec", _shr, 2)
logical_shift_right = right_shift
invert = Op("invert", "bitvec", np.invert, 1)
bitwise_not = invert
# unary arithmetic (Vector Engine)
negative = Op("negative", "arith", np.negative, 1)
abs = Op("abs", "arith", np.abs, 1)  # noqa: A001
square = Op("square", "arith", np.square, 1)
reciprocal = Op("reciprocal", "arith", np.reciprocal, 1, cost=8)
copy = Op("copy", "arith", lambda x: x, 1)
sign = Op("sign", "arith", np.sign, 1)
floor = Op("floor", "arith", np.floor, 1)
ceil = Op("ceil", "arith", np.ceil, 1)
# activation functions (Scalar Engine)
exp = Op("exp", "act", np.exp, 1, engine="scalar")
log = Op("log", "act", np.log, 1, engine="scalar")
sqrt = Op("sqrt", "act", np.sqrt, 1, engine="scalar")
rsqrt = Op("rsqrt", "act", _rsqrt, 1, engine="scalar")
sin = Op("sin", "act", np.sin, 1, engine="scalar")
cos = Op("cos", "act", np.cos, 1, engine="scalar")
tanh = Op("tanh", "act", np.tanh, 1, engine="scalar")
arctan = Op("arctan", "act", np.arctan, 1, engine="scalar")
sigmoid = Op("sigmoid", "act", _sigmoid, 1, engine="scalar")
relu = Op("relu", "act", lambda x: np.maximum(x, np.float32(0.0)), 1, engine="scalar")
gelu = Op("gelu", "act", _gelu, 1, engine="scalar")
silu = Op("silu", "act", lambda x: x * _sigmoid(x), 1, engine="scalar")
erf = Op("erf", "act", _erf, 1, engine="scalar")
softplus = Op("softplus", "act", _softplus, 1, engine="scalar")
identity = Op("identity", "act", lambda x: x, 1, engine="scalar")

_NUMPY_ALIASES = {
    np.add: add,
    np.subtract: subtract,
    np.multiply: multiply,
    np.divide: divide,
    np.maximum: maximum,
    np.minimum: minimum,
    np.bitwise_and: bitwise_and,
    np.bitwise_or: bitwise_or,
    np.bitwise_xor: bitwise_xor,
    np.left_shift: left_shift,
    np.right_shift: right_shift,
    np.exp: exp,
    np.log: log,
    np.sqrt: sqrt,
    np.sin: sin,
    np.cos: cos,
    np.tanh: tanh,
    np.square: square,
    np.abs: abs,
    np.negative: negative,
    np.equal: equal,
    np.less: less,
    np.greater: greater,
}


def as_op(op, where, operand="op"):
    """Accept an nl function (or its NumPy twin) as an ``op=`` argument."""
    if isinstance(op, Op):
        return op
    if isinstance(op, Reduction):
        return op.binary
    try:
        return _NUMPY_ALIASES[op]
    except (KeyError, TypeError):
        pass
    fail(where, f"unsupported {operand} {op!r}; pass an nl function such as nl.add")


def where(condition, x, y, dtype=None, mask=None):
    """Select x where condition is nonzero, else y (Vector Engine)."""
    op = "nl.where"
    ctx = mem.current(op)
    c = onchip(condition, op, "condition")
    x = onchip(x, op, "x", allow_scalar=True)
    y = onchip(y, op, "y", allow_scalar=True)
    check_partitions(op, (("condition", c), ("x", x), ("y", y)))
    shape = broadcast_free_shape(op, (("condition", c), ("x", x), ("y", y)))
    out_dt = dt.normalize(dtype, op)
    if out_dt is None:
        tiles = [t.dtype for t in (x, y) if isinstance(t, Tensor)]
        out_dt = tiles[0] if len(tiles) == 1 else dt.promote(*tiles) if tiles else c.dtype
    nd = len(shape)
    cond = align(c._read(), nd) != 0
    same = all((not isinstance(t, Tensor)) or t.dtype == out_dt for t in (x, y))
    if same and dt.is_int(out_dt):
        a = align(x._read(), nd) if isinstance(x, Tensor) else np.asarray(x).astype(out_dt)
        b = align(y._read(), nd) if isinstance(y, Tensor) else np.asarray(y).astype(out_dt)
        res = np.where(cond, a, b).astype(out_dt)
    else:
        res = dt.from_fp32(np.where(cond, align(dt.to_fp32(vals(x)), nd), align(dt.to_fp32(vals(y)), nd)), out_dt)
    ctx.counters.engine("vector", 2 * elems_of(shape))
    out = new_tile(shape, out_dt, sbuf, op)
    out._write(np.broadcast_to(res, shape))
    return out


def assign(dst, value):
    """``tile[...] = value``: a Vector Engine copy into a view (cast if needed)."""
    op = "tensor assignment"
    ctx = mem.current(op)
    if not isinstance(dst, Tensor) or not dst.on_chip:
        fail(op, "only SBUF/PSUM tiles can be assigned to inside a kernel; use nl.store to write HBM")
    if isinstance(value, Tensor):
        onchip(value, op, "value")
        check_partitions(op, (("destination", dst), ("value", value)))
        v = value._read()
        if v.shape != dst.shape:
            if v.size == int(_prod(dst.shape)):
                v = v.reshape(dst.shape)
            else:
                v = align(v, len(dst.shape))
                try:
                    v = np.broadcast_to(v, dst.shape)
                except ValueError:
                    fail(op, f"cannot assign shape {value.shape} to {dst.shape}")
        res = dt.convert(v, dst.dtype)
    elif is_scalar(value):
        res = (
            dt.from_fp32(np.float32(value), dst.dtype) if dt.is_float(dst.dtype) else np.array(value).astype(dst.dtype)
        )
    else:
        fail(op, f"cannot assign {type(value).__name__} to a tile")
    ctx.counters.engine("vector", elems(dst))
    dst._write(res)


mem._nl_ops = __import__(__name__, fromlist=["_"])


# ===========================================================================
# reductions


class Reduction:
    def __init__(self, name, npfn, binary, mean=False):
        self.name = name
        self.npfn = npfn
        self.binary = binary
        self.mean = mean
        self.__name__ = name

    def __repr__(self):
        return f"nl.{self.name}"

    def __call__(self, x, axis, dtype=None, keepdims=False, mask=None):
        op = f"nl.{self.name}"
        ctx = mem.current(op)
        x = onchip(x, op, "x")
        axes = reduce_axes(op, axis, x.ndim)
        out_dt = dt.normalize(dtype, op) or x.dtype
        r = reduce_values(self.npfn, x._read(), axes, keepdims, self.mean)
        ctx.counters.engine("vector", elems(x))
        out = new_tile(r.shape, out_dt, sbuf, op)
        out._write(dt.from_fp32(r, out_dt))
        return out


def reduce_axes(op, axis, nd):
    if axis is None:
        fail(op, "axis is required; reductions run over free axes only")
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    norm = []
    for a in axes:
        a = int(a)
        if not -nd <= a < nd:
            fail(op, f"axis {a} is out of range for a rank-{nd} tile")
        norm.append(a % nd)
    if 0 in norm:
        fail(
            op,
            "reduction over the partition axis (axis 0) is not supported; reductions "
            "run over free axes only (transpose first, or matmul by a ones vector)",
        )
    return tuple(sorted(set(norm)))


def reduce_values(npfn, a, axes, keepdims, mean=False):
    with np.errstate(all="ignore"):
        a32 = dt.to_fp32(a)
        r = (
            npfn.reduce(a32, axis=axes, keepdims=keepdims, dtype=np.float32)
            if npfn in (np.add, np.multiply)
            else npfn.reduce(a32, axis=axes, keepdims=keepdims)
        )
        if mean:
            r = r / np.float32(_prod(a.shape[i] for i in axes))
    return np.asarray(r, dtype=np.float32)


sum = Reduction("sum", np.add, add)  # noqa: A001
prod_ = Reduction("prod", np.multiply, multiply)
max = Reduction("max", np.maximum, maximum)  # noqa: A001
min = Reduction("min", np.minimum, minimum)  # noqa: A001
mean = Reduction("mean", np.add, add, mean=True)
globals()["prod"] = prod_


# ===========================================================================
# allocation


def par_dim(n):
    """Legacy marker for the partition dimension; returns n."""
    return n


def _buffer(buffer, op):
    if buffer is None:
        return sbuf
    if not isinstance(buffer, mem.Buffer):
        fail(op, f"unknown buffer {buffer!r}; use nl.sbuf, nl.psum, nl.hbm or nl.shared_hbm")
    return buffer


def ndarray(shape, dtype, buffer=None, name=""):
    """Allocate an uninitialized tensor (sentinel-filled: NaN or 0xA5 bytes)."""
    return mem.allocate(shape, dtype, _buffer(buffer, "nl.ndarray"), name=name, op="nl.ndarray")


def full(shape, fill_value, dtype, buffer=None, name=""):
    """Allocate and fill (a Vector Engine memset when on chip)."""
    op = "nl.full"
    buf = _buffer(buffer, op)
    t = mem.allocate(shape, dtype, buf, name=name, op=op, fill=False)
    if dt.is_float(t.dtype):
        v = dt.from_fp32(np.float32(fill_value), t.dtype)
    else:
        v = _int_immediate(fill_value, t.dtype, op)
    t._write(v)
    if buf.on_chip:
        mem.current().counters.engine("vector", elems(t))
    return t


def _int_immediate(value, d, op):
    info = np.iinfo(d)
    iv = int(value)
    if iv != value or not info.min <= iv <= info.max:
        fail(op, f"value {value!r} does not fit dtype {d}")
    return np.array(iv, dtype=d)


def zeros(shape, dtype, buffer=None, name=""):
    return full(shape, 0, dtype, buffer=buffer, name=name)


def ones(shape, dtype, buffer=None, name=""):
    return full(shape, 1, dtype, buffer=buffer, name=name)


def zeros_like(a, dtype=None, buffer=None, name=""):
    return full(a.shape, 0, dtype or a.dtype, buffer=buffer or a.buffer, name=name)


def ones_like(a, dtype=None, buffer=None, name=""):
    return full(a.shape, 1, dtype or a.dtype, buffer=buffer or a.buffer, name=name)


def shared_identity_matrix(n, dtype=float32):
    """An n x n identity tile in SBUF (counted as one GpSimd instruction)."""
    op = "nl.shared_identity_matrix"
    t = mem.allocate((n, n), dtype, sbuf, name="identity", op=op, fill=False)
    t._write(np.eye(n, dtype=np.float32).astype(t.dtype))
    mem.current().counters.engine("gpsimd", n)
    return t


def empty_like(a, dtype=None, buffer=None, name=""):
    return ndarray(a.shape, dtype or a.dtype, buffer=buffer or a.buffer, name=name)


# ===========================================================================
# data movement (DMA)


def load(src, dtype=None, mask=None, name=""):
    """HBM view -> new SBUF tile of the same shape (one DMA transfer)."""
    op = "nl.load"
    c = mem.current(op).counters
    if isinstance(src, Tensor) and src.buffer is psum:
        fail(op, "source 'src' is in PSUM; nl.load reads HBM")
    hbm_tensor(src, op, "src")
    out_dt = dt.normalize(dtype, op) or src.dtype
    out = mem.allocate(src.shape, out_dt, sbuf, name=name or "load", op=op, fill=False)
    out._write(dt.convert(src._read(), out_dt))
    c.dma(src.shape[0], src.nbytes, hbm_read=src.nbytes)
    return out


def store(dst, value, mask=None):
    """SBUF tile -> HBM view (one DMA transfer).  PSUM tiles are rejected."""
    op = "nl.store"
    c = mem.current(op).counters
    hbm_tensor(dst, op, "dst")
    if isinstance(value, Tensor) and value.buffer is psum:
        fail(
            op,
            f"cannot store PSUM tile 'value' ('{value.name}') to HBM directly; copy it "
            "to an SBUF tile first (nisa.tensor_copy into nl.ndarray(..., "
            "buffer=nl.sbuf)) and store that",
        )
    if is_scalar(value):
        fail(op, "'value' must be an SBUF tile, got a Python scalar")
    onchip(value, op, "value")
    v = value._read()
    if value.shape != dst.shape:
        if value.size != dst.size:
            fail(op, f"shape mismatch: 'dst' {dst.shape} vs 'value' {value.shape}")
        v = v.reshape(dst.shape)
    dst._write(dt.convert(v, dst.dtype))
    c.dma(value.shape[0], dst.nbytes, hbm_write=dst.nbytes)


def load_transpose2d(src, dtype=None, mask=None, name=""):
    """HBM [F, P] -> SBUF [P, F] (one DMA transfer)."""
    op = "nl.load_transpose2d"
    c = mem.current(op).counters
    hbm_tensor(src, op, "src")
    if src.ndim != 2:
        fail(op, f"source 'src' must be 2-D, got shape {src.shape}")
    f, p = src.shape
    out_dt = dt.normalize(dtype, op) or src.dtype
    out = mem.allocate((p, f), out_dt, sbuf, name=name or "load_transpose2d", op=op, fill=False)
    out._write(dt.convert(src._read().T, out_dt))
    c.dma(p, src.nbytes, hbm_read=src.nbytes)
    return out


# ===========================================================================
# Tensor Engine


def check_matmul(op, stationary, moving, names=("stationary", "moving")):
    for t, n in ((stationary, names[0]), (moving, names[1])):
        if not isinstance(t, Tensor):
            fail(op, f"operand '{n}' must be a tile, got {type(t).__name__}")
        if t.buffer is not sbuf:
            fail(
                op,
                f"operand '{n}' ('{t.name}') must be in SBUF, got "
                f"{t.buffer.name.upper()}; the Tensor Engine reads SBUF only",
            )
        onchip(t, op, n)
        if t.ndim != 2:
            fail(op, f"operand '{n}' must be 2-D [partition, free], got shape {t.shape}")
    k, m = stationary.shape
    k2, n = moving.shape
    if k != k2:
        fail(op, f"contraction (partition) sizes differ: '{names[0]}' has {k}, '{names[1]}' has {k2}")
    if m > tile_size.gemm_stationary_fmax:
        fail(op, f"free size {m} of '{names[0]}' exceeds gemm_stationary_fmax ({tile_size.gemm_stationary_fmax})")
    if n > tile_size.gemm_moving_fmax:
        fail(op, f"free size {n} of '{names[1]}' exceeds gemm_moving_fmax ({tile_size.gemm_moving_fmax})")
    return k, m, n


def matmul_values(c, stationary, moving):
    """fp32 result of stationary.T @ moving; counts the Tensor instruction."""
    k, m = stationary.shape
    n = moving.shape[1]
    s = stationary._read()
    v = moving._read()
    lowp = s.dtype in (bfloat16, float16) and v.dtype in (bfloat16, float16)
    res = dt.to_fp32(s).T @ dt.to_fp32(v)
    cycles = _b.max(_b.min(64, m), n) * (1 if lowp else 4)
    c.engine("tensor", cycles)
    if lowp:
        c.flops_lowp += 2 * k * m * n
    else:
        c.flops_fp32 += 2 * k * m * n
    return res


def transpose_cycles(p, f, d):
    return _b.max(_b.min(64, f), p) * (1 if d in (bfloat16, float16) else 4)


def matmul(x, y, transpose_x=False, mask=None):
    """x.T @ y (transpose_x=True, x is [K, M]) or x @ y (x is [M, K]).

    Returns a new fp32 PSUM tile [M, N].  With ``transpose_x=False`` one extra
    Tensor Engine transpose of x is counted.
    """
    op = "nl.matmul"
    c = mem.current(op).counters
    if not transpose_x:
        onchip(x, op, "x")
        if x.buffer is not sbuf:
            fail(op, f"operand 'x' must be in SBUF, got {x.buffer.name.upper()}")
        if x.ndim != 2:
            fail(op, f"operand 'x' must be 2-D, got shape {x.shape}")
        if x.shape[1] > PMAX:
            fail(
                op,
                f"number of partitions {x.shape[1]} exceeds architecture limitation of "
                f"{PMAX} (contraction size of 'x' with transpose_x=False)",
            )
        xt = new_tile(x.shape[::-1], x.dtype, sbuf, op)
        xt._write(x._read().T)
        c.engine("tensor", transpose_cycles(*x.shape, x.dtype))
        x = xt
    k, m, n = check_matmul(op, x, y, ("x", "y"))
    res = matmul_values(c, x, y)
    out = new_tile((m, n), float32, psum, op)
    out._write(res)
    return out


def transpose(x, dtype=None, mask=None):
    """[P, F] -> [F, P] on the Tensor Engine; returns a PSUM tile."""
    op = "nl.transpose"
    c = mem.current(op).counters
    onchip(x, op, "x")
    if x.ndim != 2:
        fail(op, f"operand 'x' must be 2-D, got shape {x.shape}")
    p, f = x.shape
    if f > PMAX:
        fail(
            op,
            f"number of partitions {f} exceeds architecture limitation of {PMAX} "
            "(free size of 'x' becomes the partition size of the result)",
        )
    out_dt = dt.normalize(dtype, op) or x.dtype
    out = new_tile((f, p), out_dt, psum, op)
    out._write(dt.convert(x._read().T, out_dt))
    c.engine("tensor", transpose_cycles(p, f, x.dtype))
    return out


# ===========================================================================
# index expressions, loops, programs


def arange(start, stop=None, step=1):
    """Integer index vector; combine with [:, None] / [None, :] for 2-D."""
    if stop is None:
        start, stop = 0, start
    return np.arange(start, stop, step, dtype=np.int64)


class _Grid(tuple):
    @property
    def p(self):
        return self[0]

    @property
    def x(self):
        return self[1]


class _MGrid:
    def __getitem__(self, key):
        if not isinstance(key, tuple):
            key = (key,)
        return _Grid(np.ogrid[key])


mgrid = _MGrid()


def affine_range(start, stop=None, step=1, **hints):
    """Loop with independent iterations (yields Python ints)."""
    return range(start, stop, step) if stop is not None else range(start)


def sequential_range(start, stop=None, step=1, **hints):
    """Loop with a loop-carried dependency (yields Python ints)."""
    return range(start, stop, step) if stop is not None else range(start)


def static_range(start, stop=None, step=1, **hints):
    """Fully unrolled loop (yields Python ints)."""
    return range(start, stop, step) if stop is not None else range(start)


def program_id(axis=0):
    ctx = mem.current("nl.program_id")
    if axis >= len(ctx.program_id):
        return 0
    return ctx.program_id[axis]


def num_programs(axis=0):
    ctx = mem.current("nl.num_programs")
    if axis >= len(ctx.grid):
        return 1
    return ctx.grid[axis]


def program_ndim():
    return len(mem.current("nl.program_ndim").grid)


def device_print(prefix, x):
    """Print a tile's values (emulator only: values are available here)."""
    print(prefix, x._read() if isinstance(x, Tensor) else x)
