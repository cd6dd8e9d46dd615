"""Operators (``op=`` values and nl functions) and helpers shared by nl and nisa.

An :class:`Op` is both the value passed as ``op=`` to nisa instructions and
the ``nl`` function of the same name (its ``__call__`` is the nl wrapper,
installed by :mod:`._lang`).  Each op records which tables of
``nki/api/nki.api.shared.rst`` it appears in:

* ``alu``: "arith" or "bitvec" (Supported Math Operators for NKI ISA), with
  ``reducible`` for the "Legal Reduction op" column;
* ``act``: the activation table (Scalar Engine), with the valid input range.
"""

import math
from math import prod as _prod

import numpy as np
from scipy import special as _special

from . import dtypes as dt
from . import memory as mem
from .errors import fail
from .memory import Tensor, sbuf

PMAX = mem.PMAX
F32 = np.float32


# ===========================================================================
# helpers


def is_scalar(x):
    return isinstance(x, (bool, int, float, np.integer, np.floating))


def elems_of(shape):
    return int(_prod(shape[1:])) if len(shape) > 1 else 1


def elems(t):
    """Elements per partition (the N of the cycle rules)."""
    return elems_of(t.shape)


def vals(x):
    return x._read() if isinstance(x, Tensor) else x


def flat(t):
    """A tile's values as [P, F] (free dims flattened)."""
    a = t._read()
    return a.reshape(a.shape[0], -1)


def write_flat(dst, values):
    dst._write(np.asarray(values).reshape(dst.shape))


def new_tile(shape, dtype, buffer=sbuf, op="nl", name=None):
    return mem.allocate(shape, dtype, buffer, name=name or op, op=op, fill=False)


def lane0(t):
    """First physical partition (engine lane) a tile view starts at."""
    base = t._alloc.arr
    if not t.on_chip or base.ndim == 0 or t._key is not None:
        return 0
    off = t._arr.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    return int(off // base.strides[0]) if base.strides[0] else 0


def same_partitions(op, pairs):
    ref = None
    for name, t in pairs:
        if isinstance(t, Tensor):
            if ref is None:
                ref = (name, t)
            elif t.shape[0] != ref[1].shape[0]:
                fail(
                    op,
                    f"partition dimension mismatch: '{ref[0]}' has {ref[1].shape[0]} partitions but "
                    f"'{name}' has {t.shape[0]}; broadcasting along the partition dimension is not supported",
                )


def same_elems(op, pairs):
    """Same partition count and same number of elements per partition."""
    same_partitions(op, pairs)
    ref = None
    for name, t in pairs:
        if isinstance(t, Tensor):
            if ref is None:
                ref = (name, t)
            elif elems(t) != elems(ref[1]):
                fail(
                    op,
                    f"'{name}' has {elems(t)} elements per partition (shape {t.shape}) but '{ref[0]}' has "
                    f"{elems(ref[1])} (shape {ref[1].shape}); they must match",
                )


def vector_operand(op, x, data, name, fp32=False):
    """A scalar, or a (P, 1) tile on the same partitions as data."""
    if is_scalar(x):
        return x
    if not isinstance(x, Tensor):
        fail(op, f"'{name}' must be a compile-time scalar or a ({data.shape[0]}, 1) tile, got {type(x).__name__}")
    if not x.on_chip:
        fail(op, f"'{name}' ('{x.name}') is in HBM; it must be a scalar or an SBUF/PSUM tile")
    if x.shape[0] != data.shape[0]:
        fail(
            op,
            f"partition dimension mismatch: 'data' has {data.shape[0]} partitions but '{name}' has "
            f"{x.shape[0]}; broadcasting along the partition dimension is not supported",
        )
    if elems(x) != 1:
        fail(op, f"'{name}' must be a compile-time scalar or a ({data.shape[0]}, 1) tile, got shape {x.shape}")
    if fp32 and x.dtype != dt.float32:
        fail(op, f"'{name}' ('{x.name}') has dtype {x.dtype}; vector operands of this instruction must be float32")
    return x


def column(x, p):
    """A scalar or (P, 1) tile as an fp32 [P, 1] array."""
    if isinstance(x, Tensor):
        return dt.to_fp32(x._read()).reshape(p, 1)
    return np.full((p, 1), F32(x), dtype=F32)


def scalar_bits(x, udt, op):
    if isinstance(x, (float, np.floating)) and float(x) != int(x):
        fail(op, f"bitwise operand {x!r} is not an integer")
    return np.array(int(x) & ((1 << (8 * udt.itemsize)) - 1), dtype=udt)


def to_bits(x, out_dt, op, operand):
    """Raw bits of x as the unsigned type of out_dt's width."""
    udt = dt.unsigned_of(out_dt)
    if isinstance(x, Tensor):
        if not dt.is_int(x.dtype):
            fail(op, f"bitwise operators need integer operands; '{operand}' is {x.dtype}")
        a = x._read()
        if a.dtype.itemsize != udt.itemsize:
            a = a.astype(out_dt)  # C-style wrap / sign extension
        return a.view(udt)
    return scalar_bits(x, udt, op)


# ===========================================================================
# operators


class Op:
    """An ALU operator and/or activation function (also an nl function)."""

    def __init__(self, name, kind, fn, arity, alu=None, reducible=False, act=False, act_range=None,
                 int_fn=None, reduce=None, identity=None):
        self.name = name
        self.kind = kind  # "arith" | "cmp" | "logical" | "bitvec" | "act"
        self.fn = fn
        self.arity = arity
        self.alu = alu  # None | "arith" | "bitvec"
        self.reducible = reducible
        self.act = act
        self.act_range = act_range  # (lo, hi, on |x|) or None for [-inf, inf]
        self.int_fn = int_fn
        self.reduce = reduce
        self.identity = identity
        self.__name__ = name
        self.__qualname__ = name
        self._wrapper = None

    def __repr__(self):
        return f"nl.{self.name}"

    def __call__(self, *args, **kw):
        if self._wrapper is None:
            fail(f"nl.{self.name}", "is only an operator here (pass it as op= to a nisa instruction)")
        return self._wrapper(*args, **kw)

    # fp32 evaluation (Vector/Scalar/GpSimd float path)
    def fp32(self, a, b=None):
        with np.errstate(all="ignore"):
            r = self.fn(a) if self.arity == 1 else self.fn(a, b)
        if self.kind in ("cmp", "logical"):
            r = np.asarray(r).astype(F32)
        return np.asarray(r, dtype=F32)


def _bit(fn):
    return lambda a, b, bits: fn(a, b)


def _shl(a, b, bits):
    b = np.asarray(b).astype(np.int64)
    big = (b >= bits) | (b < 0)
    return np.where(big, 0, a << np.where(big, 0, b).astype(a.dtype)).astype(a.dtype)


def _shr(a, b, bits):
    b = np.asarray(b).astype(np.int64)
    big = (b >= bits) | (b < 0)
    return np.where(big, 0, a >> np.where(big, 0, b).astype(a.dtype)).astype(a.dtype)


def _sigmoid(x):
    return F32(1.0) / (F32(1.0) + np.exp(-x))


def _erf(x):
    return _special.erf(x).astype(F32)


def _phi(x):
    return (np.exp(-0.5 * np.asarray(x, np.float64) ** 2) / math.sqrt(2 * math.pi)).astype(F32)


def _gelu(x):
    return (F32(0.5) * x * (F32(1.0) + _erf(x / F32(math.sqrt(2.0))))).astype(F32)


def _gelu_dx(x):
    return (F32(0.5) * (F32(1.0) + _erf(x / F32(math.sqrt(2.0)))) + x * _phi(x)).astype(F32)


def _gelu_tanh(x):
    c = F32(math.sqrt(2.0 / math.pi))
    return (F32(0.5) * x * (F32(1.0) + np.tanh(c * (x + F32(0.044715) * x * x * x)))).astype(F32)


def _gelu_sig(x):
    return (x * _sigmoid(F32(1.702) * x)).astype(F32)


def _gelu_sig_dx(x):
    s = _sigmoid(F32(1.702) * x)
    return (s + F32(1.702) * x * s * (F32(1.0) - s)).astype(F32)


def _silu_dx(x):
    s = _sigmoid(x)
    return (s + x * s * (F32(1.0) - s)).astype(F32)


def _softplus(x):
    return np.logaddexp(F32(0.0), x).astype(F32)


def _mish(x):
    return (x * np.tanh(_softplus(x))).astype(F32)


def _erf_dx(x):
    return (F32(2.0 / math.sqrt(math.pi)) * np.exp(-x * x)).astype(F32)


def _rsqrt(x):
    return F32(1.0) / np.sqrt(x)


# --- ALU operators (nki.api.shared.rst, "Supported Math Operators") ---------
add = Op("add", "arith", np.add, 2, alu="arith", reducible=True, int_fn=np.add, reduce=np.add, identity=0.0)
subtract = Op("subtract", "arith", np.subtract, 2, alu="arith", reducible=True, int_fn=np.subtract,
              reduce=np.subtract, identity=0.0)
multiply = Op("multiply", "arith", np.multiply, 2, alu="arith", reducible=True, int_fn=np.multiply,
              reduce=np.multiply, identity=1.0)
maximum = Op("maximum", "arith", np.maximum, 2, alu="arith", reducible=True, int_fn=np.maximum,
             reduce=np.maximum, identity=-np.inf)
minimum = Op("minimum", "arith", np.minimum, 2, alu="arith", reducible=True, int_fn=np.minimum,
             reduce=np.minimum, identity=np.inf)
power = Op("power", "arith", np.power, 2, alu="arith")
equal = Op("equal", "cmp", np.equal, 2, alu="arith", int_fn=np.equal)
not_equal = Op("not_equal", "cmp", np.not_equal, 2, alu="arith", int_fn=np.not_equal)
greater = Op("greater", "cmp", np.greater, 2, alu="arith", int_fn=np.greater)
greater_equal = Op("greater_equal", "cmp", np.greater_equal, 2, alu="arith", int_fn=np.greater_equal)
less = Op("less", "cmp", np.less, 2, alu="arith", int_fn=np.less)
less_equal = Op("less_equal", "cmp", np.less_equal, 2, alu="arith", int_fn=np.less_equal)
logical_and = Op("logical_and", "logical", lambda a, b: (a != 0) & (b != 0), 2, alu="arith", reducible=True,
                 int_fn=lambda a, b: (a != 0) & (b != 0), reduce=np.logical_and)
logical_or = Op("logical_or", "logical", lambda a, b: (a != 0) | (b != 0), 2, alu="arith", reducible=True,
                int_fn=lambda a, b: (a != 0) | (b != 0), reduce=np.logical_or)
logical_xor = Op("logical_xor", "logical", lambda a, b: (a != 0) ^ (b != 0), 2, alu="arith", reducible=True,
                 int_fn=lambda a, b: (a != 0) ^ (b != 0), reduce=np.logical_xor)
logical_not = Op("logical_not", "logical", lambda a: a == 0, 1)
bitwise_and = Op("bitwise_and", "bitvec", _bit(np.bitwise_and), 2, alu="bitvec", reducible=True,
                 reduce=np.bitwise_and)
bitwise_or = Op("bitwise_or", "bitvec", _bit(np.bitwise_or), 2, alu="bitvec", reducible=True,
                reduce=np.bitwise_or)
bitwise_xor = Op("bitwise_xor", "bitvec", _bit(np.bitwise_xor), 2, alu="bitvec", reducible=True,
                 reduce=np.bitwise_xor)
left_shift = Op("left_shift", "bitvec", _shl, 2, alu="bitvec")
right_shift = Op("right_shift", "bitvec", _shr, 2, alu="bitvec")  # logical shift right
invert = Op("invert", "bitvec", np.invert, 1, alu="bitvec")

# --- activation functions (nki.api.shared.rst, "Supported Activation Functions");
# ALU-unary ones (rsqrt, reciprocal, abs) are in both tables ---------------------
copy = Op("copy", "act", lambda x: x, 1, act=True)
square = Op("square", "act", np.square, 1, act=True)
sigmoid = Op("sigmoid", "act", _sigmoid, 1, act=True)
relu = Op("relu", "act", lambda x: np.maximum(x, F32(0.0)), 1, act=True)
gelu = Op("gelu", "act", _gelu, 1, act=True)
gelu_dx = Op("gelu_dx", "act", _gelu_dx, 1, act=True)
gelu_apprx_tanh = Op("gelu_apprx_tanh", "act", _gelu_tanh, 1, act=True)
gelu_apprx_sigmoid = Op("gelu_apprx_sigmoid", "act", _gelu_sig, 1, act=True)
gelu_apprx_sigmoid_dx = Op("gelu_apprx_sigmoid_dx", "act", _gelu_sig_dx, 1, act=False)
silu = Op("silu", "act", lambda x: x * _sigmoid(x), 1, act=True)
silu_dx = Op("silu_dx", "act", _silu_dx, 1, act=True)
tanh = Op("tanh", "act", np.tanh, 1, act=True)
softplus = Op("softplus", "act", _softplus, 1, act=True)
mish = Op("mish", "act", _mish, 1, act=True)
erf = Op("erf", "act", _erf, 1, act=True)
erf_dx = Op("erf_dx", "act", _erf_dx, 1, act=True)
exp = Op("exp", "act", np.exp, 1, act=True)
log = Op("log", "act", np.log, 1, act=True, act_range=(2.0**-64, 2.0**64, False))
sin = Op("sin", "act", np.sin, 1, act=True, act_range=(-math.pi, math.pi, False))
arctan = Op("arctan", "act", np.arctan, 1, act=True, act_range=(-math.pi / 2, math.pi / 2, False))
sqrt = Op("sqrt", "act", np.sqrt, 1, act=True, act_range=(2.0**-116, 2.0**118, False))
rsqrt = Op("rsqrt", "arith", _rsqrt, 1, alu="arith", act=True, act_range=(2.0**-87, 2.0**97, False))
reciprocal = Op("reciprocal", "arith", np.reciprocal, 1, alu="arith", act=True,
                act_range=(2.0**-42, 2.0**42, True))
sign = Op("sign", "act", np.sign, 1, act=True)
abs = Op("abs", "arith", np.abs, 1, alu="arith", act=True)  # noqa: A001

# internal helpers (not exported by nl): divide/fmod for the known-issue errors
divide = Op("divide", "arith", np.divide, 2)
mod = Op("mod", "arith", np.mod, 2)
fmod = Op("fmod", "arith", np.fmod, 2)

ALL_OPS = {o.name: o for o in globals().values() if isinstance(o, Op)}


class Reduction:
    """nl.sum / nl.max / nl.min / nl.mean / nl.prod; also accepted as reduce op=."""

    def __init__(self, name, binary, mean=False):
        self.name = name
        self.binary = binary
        self.mean = mean
        self.__name__ = name
        self.__qualname__ = name
        self._wrapper = None

    def __repr__(self):
        return f"nl.{self.name}"

    def __call__(self, *a, **k):
        return self._wrapper(*a, **k)


sum = Reduction("sum", add)  # noqa: A001
max = Reduction("max", maximum)  # noqa: A001
min = Reduction("min", minimum)  # noqa: A001
mean = Reduction("mean", add, mean=True)
prod = Reduction("prod", multiply)

_NUMPY_ALIASES = {
    np.add: add, np.subtract: subtract, np.multiply: multiply, np.maximum: maximum, np.minimum: minimum,
    np.bitwise_and: bitwise_and, np.bitwise_or: bitwise_or, np.bitwise_xor: bitwise_xor,
    np.left_shift: left_shift, np.right_shift: right_shift, np.exp: exp, np.log: log, np.sqrt: sqrt,
    np.sin: sin, np.tanh: tanh, np.square: square, np.abs: abs, np.equal: equal, np.less: less,
    np.greater: greater,
}


def as_op(op, where, operand="op"):
    """Accept an nl operator (or its NumPy twin) as an ``op=`` argument."""
    if isinstance(op, Op):
        return op
    if isinstance(op, Reduction):
        return op.binary
    try:
        return _NUMPY_ALIASES[op]
    except (KeyError, TypeError):
        pass
    fail(where, f"unsupported {operand} {op!r}; pass an nl operator such as nl.add")


def alu_op(op, where, operand="op", arity=None):
    """An operator from the ALU table (nki.api.shared.rst, nki-aluop)."""
    o = as_op(op, where, operand)
    if o.alu is None:
        if o.name in ("divide", "mod", "fmod"):
            fail(where, f"'{operand}'={o!r} is not an ALU operator (no divide/modulo instruction); "
                        "multiply by nisa.reciprocal instead")
        fail(where, f"'{operand}'={o!r} is not in the ALU operator table (nki.api.shared.rst, nki-aluop)")
    if arity is not None and o.arity != arity:
        fail(where, f"'{operand}'={o!r} is {'a unary' if o.arity == 1 else 'a binary'} operator here")
    return o


def act_op(op, where, operand="op"):
    """An activation function from the Scalar Engine table."""
    o = as_op(op, where, operand)
    if not o.act:
        fail(
            where,
            f"'{operand}'={o!r} is not in the activation function table (nki.api.shared.rst, nki-act-func)"
            + ("; there is no cos activation: use sin with a pi/2 shift, range-reduced to [-pi, pi]"
               if o.name == "cos" else ""),
        )
    return o


def check_act_range(where, o, x):
    """Inputs outside an activation's documented valid range give invalid results on hardware."""
    if o.act_range is None:
        return
    lo, hi, on_abs = o.act_range
    v = np.abs(x) if on_abs else x
    with np.errstate(invalid="ignore"):
        bad = ~np.isnan(v) & ((v < lo) | (v > hi))
    if bad.any():
        idx = np.argwhere(bad)[0]
        val = float(np.asarray(x)[tuple(idx)])
        rng = f"±[{lo:.6g}, {hi:.6g}]" if on_abs else f"[{lo:.6g}, {hi:.6g}]"
        hint = " (range-reduce the argument or precompute the values)" if o.name == "sin" else ""
        fail(
            where,
            f"input {val!r} at index {tuple(int(i) for i in idx)} (after scale/bias) is outside the valid range "
            f"{rng} of {o!r} on the Scalar Engine (nki.api.shared.rst, nki-act-func); the hardware returns "
            f"invalid results there{hint}",
        )
