"""Implementation of the emulated ``nki.language`` (nl), NKI 0.6.

The ``nl`` compute functions are the experimental convenience wrappers of
NKI >= 0.3: each allocates its result and lowers to the ``nisa`` instruction
the release uses, so the rules, numerics and counters are those of that
instruction (``nl.add`` -> ``nisa.tensor_tensor`` or ``nisa.tensor_scalar``,
``nl.exp`` -> ``nisa.activation``, ``nl.load`` -> a DMA, ...).  The known
issues of the release notes (``release-notes/components/nki.rst``) are
errors here: binary ops do not broadcast; ``divide``, ``mod``, ``fmod`` and
``power(tile, scalar)`` fail; ``matmul`` needs ``transpose_x=True``;
``store`` of a PSUM tile fails; ``softmax`` / ``rms_norm`` fail on hardware.
"""

import contextlib
import warnings

import numpy as np

from . import _isa as I
from . import _ops as O
from . import dtypes as dt
from . import memory as mem
from .access import ds  # noqa: F401  (nl.ds, re-exported by nl)
from .errors import NkiValidationError, NotEmulatedError, fail
from .memory import Tensor, hbm, private_hbm, psum, sbuf, shared_hbm  # noqa: F401

PMAX = mem.PMAX


class tile_size:
    """Hardware tile limits (``nki.language.tile_size``; SBUF figures for trn1)."""

    pmax = 128
    psum_fmax = 512  # deprecated in NKI 0.4: use psum_bank_fmax
    psum_bank_fmax = 512  # fp32 elements per PSUM bank per partition (2 KiB)
    psum_bank_fmax_bytes = 2048
    psum_num_banks = 8
    gemm_stationary_fmax = 128
    gemm_moving_fmax = 512
    bn_stats_fmax = 512
    psum_min_align = 4  # not stated in the docs the emulator follows; byte alignment assumed 4
    sbuf_min_align = 4  # idem
    total_available_sbuf_size = 192 * 1024  # deprecated in NKI 0.4: bytes per partition
    sbuf_fmax_bytes = 192 * 1024
    sbuf_fmax = 192 * 1024 // 4  # in fp32 elements
    sbuf_size_bytes = 128 * 192 * 1024
    psum_partition_bytes = 16 * 1024


# ===========================================================================
# allocation


def _buffer(buffer, op):
    from ._nl06 import as_buffer

    return as_buffer(buffer, op)


def _address(address, shape, buf, op):
    """Check ``address=(partition_offset, free_offset)``; the emulator does not place tiles by address."""
    if address is None:
        return
    if not buf.on_chip:
        fail(op, "'address' is for SBUF/PSUM tiles (partition_offset, free_offset); HBM tensors take none")
    if (not isinstance(address, (tuple, list)) or len(address) != 2
            or not all(isinstance(a, (int, np.integer)) and a >= 0 for a in address)):
        fail(op, f"'address' must be (partition_offset, free_offset) non-negative ints, got {address!r}")
    if int(address[0]) + int(shape[0]) > PMAX:
        fail(op, f"'address' partition offset {address[0]} + {shape[0]} partitions exceeds {PMAX}")


def ndarray(shape, dtype, buffer=sbuf, name="", address=None):
    """Allocate an uninitialized tensor (filled with sentinels: NaN or 0xA5 bytes).

    ``address=(partition_offset, free_offset)`` (on chip) places the tile:
    it must lie inside the partitions and the partition's bytes (a PSUM tile
    inside one bank), and tiles placed at overlapping addresses share those
    bytes for the capacity check (the union counts). The emulator still gives
    each tile its own storage, so a kernel that reads one tile's data through
    another tile at the same address is not modeled.
    """
    buf = _buffer(buffer, "nl.ndarray")
    _address(address, tuple(shape), buf, "nl.ndarray")
    return mem.allocate(shape, dtype, buf, name=name, op="nl.ndarray",
                        address=None if address is None else tuple(int(a) for a in address))


def zeros(shape, dtype, buffer=sbuf, name=""):
    """Allocate a tensor filled with zeros (on chip: one nisa.memset on the Vector Engine)."""
    op = "nl.zeros"
    buf = _buffer(buffer, op)
    t = mem.allocate(shape, dtype, buf, name=name, op=op, fill=not buf.on_chip)
    if buf.on_chip:
        I.memset(t, 0)
    else:
        t._write(np.zeros((), dtype=t.dtype))
    return t


def shared_constant(constant):
    """A shared_hbm tensor holding constant data (a NumPy array or a ``.npy`` path), dtype kept.

    The constant is part of the compiled kernel, in HBM before the kernel runs
    (NKI 0.6 stub): creating it moves no bytes; reading it is the kernel's DMA.
    """
    op = "nl.shared_constant"
    mem.current(op)
    if isinstance(constant, str):
        constant = np.load(constant)
    a = np.asarray(constant)
    if a.ndim == 0:
        a = a.reshape(1)
    t = mem.allocate(a.shape, a.dtype, shared_hbm, name="constant", op=op, fill=False)
    t._write(a)
    return t


def shared_identity_matrix(n, dtype=dt.uint8, dst=None):
    """An n x n identity tile in SBUF (a shared constant DMA'd in; into ``dst`` when given)."""
    op = "nl.shared_identity_matrix"
    c = mem.current(op).counters
    n = int(n)
    if dst is None:
        t = mem.allocate((n, n), dtype, sbuf, name="identity", op=op, fill=False)
    else:
        if not isinstance(dst, Tensor) or not dst.on_chip or tuple(dst.shape) != (n, n):
            fail(op, f"'dst' must be an ({n}, {n}) SBUF tile")
        t = dst
    t._write(dt.from_fp32(np.eye(n, dtype=np.float32), t.dtype) if dt.is_float(t.dtype)
             else np.eye(n, dtype=t.dtype))
    c.dma(n, t.nbytes, hbm_read=t.nbytes, instr="nisa.dma_copy")
    return t


# ===========================================================================
# data movement


def load(src, dtype=None):
    """HBM tensor (or view) -> new SBUF tile of the same shape (one DMA transfer)."""
    op = "nl.load"
    c = mem.current(op).counters
    if not isinstance(src, Tensor):
        fail(op, f"'src' must be an HBM tensor, got {type(src).__name__}")
    if src.on_chip:
        fail(op, f"'src' ('{src.name}') is in {src.buffer.name.upper()}; nl.load reads HBM")
    out_dt = dt.normalize(dtype, op) or src.dtype
    out = mem.allocate(src.shape, out_dt, sbuf, name="load", op=op, fill=False)
    out._write(dt.convert(src._read(), out_dt))
    c.dma(src.shape[0], src.nbytes, hbm_read=src.nbytes)
    return out


def store(dst, value):
    """SBUF tile -> HBM tensor (one DMA transfer).  PSUM tiles are rejected (known issue)."""
    op = "nl.store"
    c = mem.current(op).counters
    if not isinstance(dst, Tensor) or dst.on_chip:
        where = dst.buffer.name.upper() if isinstance(dst, Tensor) else type(dst).__name__
        fail(op, f"'dst' must be an HBM tensor, got {where}")
    if not isinstance(value, Tensor):
        fail(op, f"'value' must be an SBUF tile, got {type(value).__name__}")
    if value.buffer is psum:
        fail(op, f"cannot store PSUM tile 'value' ('{value.name}') directly (NKI known issue); copy it to an "
                 "SBUF tile with nisa.tensor_copy first and store that")
    if not value.on_chip:
        fail(op, f"'value' ('{value.name}') is in HBM; store an SBUF tile")
    v = value._read()
    if value.shape != dst.shape:
        if value.size != dst.size:
            fail(op, f"shape mismatch: 'dst' {dst.shape} vs 'value' {value.shape}")
        v = v.reshape(dst.shape)
    dst._write(dt.convert(v, dst.dtype))
    c.dma(value.shape[0], dst.nbytes, hbm_write=dst.nbytes)


# ===========================================================================
# elementwise wrappers


def _check_tile(op, x, name):
    if not isinstance(x, Tensor):
        fail(op, f"operand '{name}' must be a tile, got {type(x).__name__}")
    if not x.on_chip:
        fail(op, f"operand '{name}' ('{x.name}') is in HBM; compute instructions access SBUF or PSUM only "
                 "(nl.load it first)")
    return x


def _binary(o):
    def fn(x, y, dtype=None):
        op = f"nl.{o.name}"
        mem.current(op)
        if o.name == "divide":
            fail(op, "is not supported on hardware (NKI known issue: no divide instruction); "
                     "multiply by the reciprocal: nl.multiply(x, nl.reciprocal(y))")
        if o.name in ("mod", "fmod"):
            fail(op, "is not supported on hardware (NKI known issue: no modulo instruction)")
        tx, ty = isinstance(x, Tensor), isinstance(y, Tensor)
        if not tx and not ty:
            fail(op, "at least one operand must be a tile")
        for n, v in (("x", x), ("y", y)):
            if isinstance(v, Tensor):
                _check_tile(op, v, n)
            elif not O.is_scalar(v):
                fail(op, f"operand '{n}' must be a tile or a scalar, got {type(v).__name__}")
        if tx and ty:
            O.same_partitions(op, (("x", x), ("y", y)))
            if x.shape != y.shape:
                fail(op, f"operands of shapes {x.shape} and {y.shape} do not match; binary operations do not "
                         "broadcast on hardware (NKI known issue): use nisa.tensor_scalar with a (P, 1) "
                         "operand, or nisa.tensor_tensor on equal shapes")
            out_dt = dt.normalize(dtype, op) or dt.promote(x.dtype, y.dtype)
            out = O.new_tile(x.shape, out_dt, sbuf, op)
            I.tensor_tensor(out, x, y, op=o)
            return out
        tile, scal = (x, y) if tx else (y, x)
        if o is O.power and tx:
            fail(op, "nl.power(tile, scalar) is not supported (NKI known issue); use nl.power(tile, tile)")
        out_dt = dt.normalize(dtype, op) or tile.dtype
        out = O.new_tile(tile.shape, out_dt, sbuf, op)
        I.tensor_scalar(out, tile, o, scal, reverse0=not tx)
        return out

    fn.__name__ = o.name
    fn.__qualname__ = o.name
    return fn


def _activation_wrapper(o):
    def fn(x, dtype=None):
        op = f"nl.{o.name}"
        mem.current(op)
        _check_tile(op, x, "x")
        out = O.new_tile(x.shape, dt.normalize(dtype, op) or x.dtype, sbuf if o is not O.copy else x.buffer, op)
        I.activation(out, o, x)
        return out

    fn.__name__ = o.name
    return fn


def _alu_unary_wrapper(o, engine_name=None):
    def fn(x, dtype=None):
        op = f"nl.{o.name}"
        mem.current(op)
        _check_tile(op, x, "x")
        out = O.new_tile(x.shape, dt.normalize(dtype, op) or x.dtype, sbuf, op)
        if o is O.reciprocal:
            I.reciprocal(out, x)
        elif engine_name == "gpsimd":
            if x.buffer is psum:
                fail(op, "runs on the GpSimd engine since NKI 0.5 and does not accept PSUM inputs; use "
                         "nisa.activation(op=nl.rsqrt) for PSUM data")
            I.tensor_scalar(out, x, o, None, engine=I.engine.gpsimd)
        else:
            I.tensor_scalar(out, x, o, None)
        return out

    fn.__name__ = o.name
    return fn


def _logical_not(x, dtype=None):
    op = "nl.logical_not"
    mem.current(op)
    _check_tile(op, x, "x")
    out = O.new_tile(x.shape, dt.normalize(dtype, op) or x.dtype, sbuf, op)
    I.tensor_scalar(out, x, O.equal, 0.0)
    return out


def _cmp_wrapper(o):
    base = _binary(o)

    def fn(x, y, dtype=None):
        # 0.6 stub: the result dtype defaults to the input tile's dtype (use dtype=nl.uint8 for a mask)
        return base(x, y, dtype=dtype)

    fn.__name__ = o.name
    return fn


for _o in (O.add, O.subtract, O.multiply, O.maximum, O.minimum, O.power, O.divide, O.mod, O.fmod,
           O.bitwise_and, O.bitwise_or, O.bitwise_xor, O.left_shift, O.right_shift):
    _o._wrapper = _binary(_o)
for _o in (O.equal, O.not_equal, O.greater, O.greater_equal, O.less, O.less_equal, O.logical_and,
           O.logical_or, O.logical_xor):
    _o._wrapper = _cmp_wrapper(_o)
for _o in (O.copy, O.square, O.sigmoid, O.relu, O.gelu, O.gelu_dx, O.gelu_apprx_tanh, O.gelu_apprx_sigmoid,
           O.gelu_apprx_sigmoid_dx, O.silu, O.silu_dx, O.tanh, O.softplus, O.mish, O.erf, O.erf_dx, O.exp, O.log,
           O.sin, O.arctan, O.sqrt, O.sign):
    _o._wrapper = _activation_wrapper(_o)
O.abs._wrapper = _alu_unary_wrapper(O.abs)
O.invert._wrapper = _alu_unary_wrapper(O.invert)
O.reciprocal._wrapper = _alu_unary_wrapper(O.reciprocal)
O.rsqrt._wrapper = _alu_unary_wrapper(O.rsqrt, "gpsimd")
O.logical_not._wrapper = _logical_not
del _o


def _sig(o, text):
    import inspect

    params = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                default=inspect.Parameter.empty if d is None else d[0])
              for n, d in text]
    o.__signature__ = inspect.Signature(params)


for _o in O.ALL_OPS.values():
    if _o.arity == 2:
        _sig(_o, [("x", None), ("y", None), ("dtype", (None,))])
    else:
        _sig(_o, [("x", None), ("dtype", (None,))])
del _o

# module-level names of the operators
add, subtract, multiply, maximum, minimum, power = O.add, O.subtract, O.multiply, O.maximum, O.minimum, O.power
divide, mod, fmod = O.divide, O.mod, O.fmod
equal, not_equal, greater, greater_equal, less, less_equal = (
    O.equal, O.not_equal, O.greater, O.greater_equal, O.less, O.less_equal)
logical_and, logical_or, logical_xor, logical_not = O.logical_and, O.logical_or, O.logical_xor, O.logical_not
bitwise_and, bitwise_or, bitwise_xor, invert = O.bitwise_and, O.bitwise_or, O.bitwise_xor, O.invert
left_shift, right_shift = O.left_shift, O.right_shift
abs, reciprocal, rsqrt = O.abs, O.reciprocal, O.rsqrt  # noqa: A001
copy, square, sigmoid, relu, gelu, gelu_dx = O.copy, O.square, O.sigmoid, O.relu, O.gelu, O.gelu_dx
gelu_apprx_tanh, gelu_apprx_sigmoid, gelu_apprx_sigmoid_dx = (
    O.gelu_apprx_tanh, O.gelu_apprx_sigmoid, O.gelu_apprx_sigmoid_dx)
silu, silu_dx, tanh, softplus, mish, erf, erf_dx = O.silu, O.silu_dx, O.tanh, O.softplus, O.mish, O.erf, O.erf_dx
exp, log, sin, arctan, sqrt, sign = O.exp, O.log, O.sin, O.arctan, O.sqrt, O.sign


def negative(x):
    """-x (internal: the unary minus operator on tiles); nisa.tensor_scalar multiply by -1."""
    op = "negation"
    _check_tile(op, x, "x")
    out = O.new_tile(x.shape, x.dtype, sbuf, op)
    I.tensor_scalar(out, x, O.multiply, -1.0)
    return out


def assign(dst, value):
    """``tile[...] = value``: nisa.tensor_copy of a tile (same elements) or nisa.memset of a scalar."""
    op = "tensor assignment"
    if not isinstance(dst, Tensor) or not dst.on_chip:
        fail(op, "only SBUF/PSUM tiles can be assigned to inside a kernel; use nl.store / nisa.dma_copy for HBM")
    if isinstance(value, Tensor):
        I.tensor_copy(dst, value)
    elif O.is_scalar(value):
        I.memset(dst, value)
    else:
        fail(op, f"cannot assign {type(value).__name__} to a tile")


mem._nl_ops = __import__(__name__, fromlist=["_"])


# ===========================================================================
# reductions


def _reduction(r):
    def fn(x, axis, dtype=None, keepdims=False):
        op = f"nl.{r.name}"
        mem.current(op)
        _check_tile(op, x, "x")
        nd = x.ndim
        axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
        axes = sorted({int(a) % nd for a in axes})
        if axes and 0 in axes:
            fail(op, "reduction over the partition axis (axis 0) is not supported; use "
                     "nisa.tensor_partition_reduce, a transpose, or a matmul with a ones vector")
        shape = tuple(1 if i in axes else s for i, s in enumerate(x.shape)) if keepdims else tuple(
            s for i, s in enumerate(x.shape) if i not in axes)
        if len(shape) < 2:
            fail(op, f"the result of shape {shape} would be a rank-{len(shape)} tile; SBUF/PSUM tiles must be at "
                     "least 2-D (use keepdims=True)")
        out = O.new_tile(shape, dt.normalize(dtype, op) or x.dtype, sbuf, op)
        I.tensor_reduce(out, r, x, axis, keepdims=keepdims)
        return out

    fn.__name__ = r.name
    return fn


for _r in (O.sum, O.max, O.min, O.mean, O.prod):
    _r._wrapper = _reduction(_r)
    _sig(_r, [("x", None), ("axis", None), ("dtype", (None,)), ("keepdims", (False,))])
del _r
sum, max, min, mean, prod = O.sum, O.max, O.min, O.mean, O.prod  # noqa: A001


# ===========================================================================
# Tensor Engine wrappers


def matmul(x, y, transpose_x=False):
    """x.T @ y into a new fp32 PSUM tile; ``transpose_x=True`` is required (NKI known issue)."""
    op = "nl.matmul"
    mem.current(op)
    if not transpose_x:
        fail(op, "nl.matmul without transpose_x=True fails on hardware (NKI known issue); pass x as [K, M] "
                 "with transpose_x=True, or call nisa.nc_matmul(dst, stationary=x, moving=y)")
    _check_tile(op, x, "x")
    _check_tile(op, y, "y")
    if x.ndim != 2 or y.ndim != 2:
        fail(op, f"operands must be 2-D, got {x.shape} and {y.shape}")
    out = O.new_tile((x.shape[1], y.shape[1]), dt.float32, psum, op)
    I.nc_matmul(out, x, y)
    return out


def transpose(x, dtype=None):
    """[P, F] -> [F, P] on the Tensor Engine into a new PSUM tile (dtype stays x's)."""
    op = "nl.transpose"
    mem.current(op)
    _check_tile(op, x, "x")
    d = dt.normalize(dtype, op) or x.dtype
    if d != x.dtype:
        fail(op, f"the transpose keeps the dtype of 'x' ({x.dtype}); convert before or after")
    out = O.new_tile((O.elems(x), x.shape[0]), d, psum, op)
    I.nc_transpose(out, x, engine=I.engine.tensor)
    return out


# ===========================================================================
# known-issue and not-emulated wrappers


def softmax(x, axis=-1, dtype=None):
    """Fails on hardware (NKI known issue: internal broadcasting); compose it from nisa instructions."""
    fail("nl.softmax", "fails on hardware (NKI known issue: relies on broadcasting between full-size and reduced "
                       "tiles); compose it: nisa.tensor_reduce(max), nisa.activation(exp, bias=-max, "
                       "reduce_cmd=reset_reduce), nisa.reciprocal, nisa.tensor_scalar(multiply)")


def rms_norm(x, w, axis, n, epsilon=1e-06, dtype=None, compute_dtype=None):
    """Fails on hardware (NKI known issue); compose it from nisa instructions."""
    fail("nl.rms_norm", "fails on hardware (NKI known issue: relies on broadcasting between full-size and reduced "
                        "tiles); compose it from nisa.activation(square, reduce_cmd=...) and nisa.tensor_scalar")


def random_seed(seed):
    """Not emulated (hardware PRNG)."""
    raise NotEmulatedError("nl.random_seed is not emulated yet: the hardware PRNG bit streams are not modeled")


def rand(shape, dtype, buffer=sbuf, name=""):
    """Not emulated (hardware PRNG)."""
    raise NotEmulatedError("nl.rand is not emulated yet: the hardware PRNG bit streams are not modeled")


# ===========================================================================
# iterators and control flow


def _range(start, stop, step):
    return range(start, stop, step) if stop is not None else range(start)


def affine_range(start, stop=None, step=1):
    """Loop with independent iterations (yields Python ints)."""
    return _range(start, stop, step)


def sequential_range(start, stop=None, step=1):
    """Loop with a loop-carried dependency (yields Python ints)."""
    return _range(start, stop, step)


def static_range(start, stop=None, step=1):
    """Fully unrolled loop (yields Python ints)."""
    return _range(start, stop, step)




def _as_int(v, op, name):
    if isinstance(v, I.VirtualRegister):
        return v._get(op)
    if isinstance(v, (int, np.integer)):
        return int(v)
    fail(op, f"'{name}' must be an int or a VirtualRegister, got {type(v).__name__}")


def dynamic_range(start, stop=None, step=1):
    """Deprecated in NKI 0.6 (use nl.fori_loop); a runtime-bound loop."""
    warnings.warn("nl.dynamic_range is deprecated in NKI 0.6; use nl.fori_loop", DeprecationWarning, stacklevel=2)
    a = _as_int(start, "nl.dynamic_range", "start")
    return range(a) if stop is None else range(a, _as_int(stop, "nl.dynamic_range", "stop"), step)


def fori_loop(lower, upper, body_fun, step=1):
    """Runtime counted loop: ``body_fun(i)`` for i in range(lower, upper, step); the body returns nothing."""
    op = "nl.fori_loop"
    if not isinstance(step, (int, np.integer)) or step <= 0:
        fail(op, "'step' must be a positive compile-time integer")
    for i in range(_as_int(lower, op, "lower"), _as_int(upper, op, "upper"), int(step)):
        r = body_fun(i)
        if r is not None:
            fail(op, "the body function cannot return a value")


def while_loop(init, body_fun):
    """Runtime while loop: ``r = body_fun(r)`` while the register ``r`` (starting at ``init``) is nonzero."""
    op = "nl.while_loop"
    if not isinstance(init, I.VirtualRegister):
        fail(op, "'init' must be a VirtualRegister (nisa.register_alloc)")
    cond = init
    while cond._get(op):
        nxt = body_fun(cond)
        if not isinstance(nxt, I.VirtualRegister):
            fail(op, "the body must return the condition register for the next iteration")
        cond = nxt


@contextlib.contextmanager
def no_reorder():
    """Keep instruction order inside the block (the emulator runs in program order anyway)."""
    yield


# ===========================================================================
# SPMD and printing


def program_id(axis=0):
    ctx = mem.current("nl.program_id")
    return ctx.program_id[axis] if axis < len(ctx.program_id) else 0


def num_programs(axes=0):
    ctx = mem.current("nl.num_programs")
    if axes is None:
        n = 1
        for g in ctx.grid:
            n *= g
        return n
    return ctx.grid[axes] if axes < len(ctx.grid) else 1


def program_ndim():
    return len(mem.current("nl.program_ndim").grid)


def device_print(print_prefix, tensor):
    """Print a tensor's values (emulator only: values are available here)."""
    print(print_prefix, tensor._read() if isinstance(tensor, Tensor) else tensor)


# ===========================================================================
# removed APIs: an error naming the replacement


_SLICES = "use slices, nl.ds(start, size) or access patterns (tensor.ap(...))"
REMOVED = {
    "arange": f"nl.arange was removed in NKI 0.2: {_SLICES}",
    "mgrid": f"nl.mgrid was removed in NKI 0.2: {_SLICES}",
    "par_dim": "nl.par_dim was removed with block dimensions: the partition dim is always the first dim",
    "ones_like": "nl.ones_like is not in NKI 0.6: use nl.ndarray + nisa.memset",
    "full_like": "nl.full_like is not in NKI 0.6: use nl.ndarray + nisa.memset",
    "identity": "nl.identity is not an activation in NKI 0.6: use nl.copy",
    "atomic_rmw": "nl.atomic_rmw was removed: use nisa.dma_compute",
    "logical_shift_right": "use nl.right_shift (a logical shift)",
    "bitwise_not": "use nl.invert",
    "spmd_dim": "SPMD grids are launched as kernel[g0, g1](...)",
    "tile_size_sbuf": "use nl.tile_size",
}


def removed(name):
    from .errors import RemovedAPIError

    raise RemovedAPIError(f"nki.language has no attribute {name!r}: {REMOVED[name]}")


_ = NkiValidationError
