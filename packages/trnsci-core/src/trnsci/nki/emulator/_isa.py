"""Implementation of the emulated ``nki.isa`` (NKI 0.6): ``dst`` first, returns None.

Each instruction is one function registered with :func:`._table.instruction`,
which declares its engines, operand memories, dtypes, targets and cycle cost
(the profile reads the same table).  The semantics follow the docstrings of
``nki/api/nki/isa/__init__.py`` in aws-neuron/aws-neuron-sdk (NKI 0.6);
activation ranges and ALU operators follow ``nki/api/nki.api.shared.rst``.
"""

from enum import Enum

import numpy as np

from . import _ops as O
from . import access
from . import dtypes as dt
from . import memory as mem
from ._table import (
    cost_2n,
    cost_8n,
    cost_dma,
    cost_iota,
    cost_matmul,
    cost_n,
    instruction,
    not_emulated,
)
from .errors import NkiValidationError, fail
from .memory import NKIObject, Tensor
from .numerics import matmul_rounded_products

F32 = np.float32
FP32_MIN = float(np.finfo(np.float32).min)


# ===========================================================================
# enums (values as in the NKI stubs)


class engine(Enum):
    """Neuron Device engines."""

    tensor = 1
    vector = 5
    scalar = 2
    gpsimd = 3
    dma = 4
    sync = 6
    unknown = 0


class reduce_cmd(Enum):
    """Engine register reduce commands."""

    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4


dge_mode = access.dge_mode  # one definition of the DMA enums, shared with the access-pattern layer
oob_mode = access.oob_mode


class matmul_perf_mode(Enum):
    """Performance mode for matmul."""

    none = "none"
    double_row = "double_row"


class nc_version(Enum):
    """NeuronCore version; ordered by generation (nki-library kernels write ``v <= nc_version.gen3``)."""

    gen2 = 2
    gen3 = 3
    gen4 = 4

    def _cmp(self, other, op):
        if not isinstance(other, nc_version):
            return NotImplemented
        return op(self.value, other.value)

    def __lt__(self, other):
        return self._cmp(other, int.__lt__)

    def __le__(self, other):
        return self._cmp(other, int.__le__)

    def __gt__(self, other):
        return self._cmp(other, int.__gt__)

    def __ge__(self, other):
        return self._cmp(other, int.__ge__)


class dma_engine(Enum):
    """DMA transfer engine."""

    dma = 1
    gpsimd_dma = 2


_RC = reduce_cmd
_DGE = dge_mode
_OOB = oob_mode

tensor_engine = engine.tensor
vector_engine = engine.vector
scalar_engine = engine.scalar
gpsimd_engine = engine.gpsimd
unknown_engine = engine.unknown


class NkiInstruction(NKIObject):
    """Handle of a traced instruction (NKI 0.6).

    ``depends_on(*producers)`` adds scheduling edges on hardware; the emulator
    runs instructions in program order, so it only checks its arguments.
    """

    def __init__(self, handle):
        self.handle = handle

    def depends_on(self, *producers):
        for p in producers:
            if not isinstance(p, NkiInstruction):
                fail("NkiInstruction.depends_on", f"producers must be NkiInstruction handles, got {type(p).__name__}")
        return self


class VirtualRegister(NKIObject):
    """A virtual engine register (``nisa.register_alloc``); holds a 32-bit integer."""

    def __init__(self, state=None, frozen=False):
        self.value = None if state is None else int(state)
        self.frozen = frozen

    def _get(self, op):
        if self.value is None:
            fail(op, "reading a virtual register that was never written")
        return self.value

    def __bool__(self):
        return bool(self._get("VirtualRegister"))

    def __index__(self):
        return self._get("VirtualRegister")

    def __int__(self):
        return self._get("VirtualRegister")

    def __repr__(self):
        return f"VirtualRegister({self.value})"


# ===========================================================================
# helpers


def _enum(call, name, value, enum_cls):
    if not isinstance(value, enum_cls):
        hint = ""
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            member = next((m for m in enum_cls if m.value == int(value)), None)
            if member is not None:
                hint = f"; write nisa.{enum_cls.__name__}.{member.name}"
        call.fail(
            f"'{name}' must be a nisa.{enum_cls.__name__} member, got {value!r}{hint} "
            "(raw integers and strings are not accepted since NKI 0.3: nki/migration/index.rst, "
            "'Integer enum constants no longer supported')"
        )
    return value


def _need_tile(call, name, x):
    if not isinstance(x, Tensor):
        call.fail(f"operand '{name}' must be a tile, got {type(x).__name__}")
    return x


def _not_both_psum(call, a, b):
    x, y = call.args.get(a), call.args.get(b)
    if isinstance(x, Tensor) and isinstance(y, Tensor) and x.buffer is mem.psum and y.buffer is mem.psum:
        call.fail(f"'{a}' and '{b}' cannot both be in PSUM; move one of them to SBUF")


def _acc(ctx, eng):
    """Per-lane accumulation registers of an engine (128 fp32, NaN = undefined)."""
    regs = getattr(ctx, "acc_regs", None)
    if regs is None:
        regs = {"scalar": np.full(128, np.nan, F32), "vector": np.full(128, np.nan, F32)}
        ctx.acc_regs = regs
    return regs[eng]


def _reduce_block(op, x):
    """Reduce [P, F] fp32 over F with an ALU op (max/min/add/multiply)."""
    with np.errstate(all="ignore"):
        if op.reduce in (np.add, np.multiply):
            return op.reduce.reduce(x, axis=1, dtype=F32)
        return op.reduce.reduce(x, axis=1)


def _vec_out(call, name, t, p):
    t = _need_tile(call, name, t)
    if t.shape[0] != p or O.elems(t) != 1:
        call.fail(f"'{name}' must have shape ({p}, 1), got {t.shape}")
    return t


def _pattern_values(call, pattern, p, n_elems, offset, channel_multiplier):
    """int32 affine values offset + p*cm + sum(i_k*step_k) as [P, F] (iota / affine_select)."""
    if not (isinstance(pattern, (list, tuple)) and pattern
            and all(isinstance(q, (list, tuple)) and len(q) == 2 for q in pattern)):
        call.fail(
            f"'pattern' must be a list of [step, num] pairs, got {pattern!r} "
            "(index expressions from nl.arange were removed in NKI 0.2)"
        )
    if len(pattern) > 4:
        call.fail(f"'pattern' has {len(pattern)} dimensions; at most 4 are supported")
    steps = [int(q[0]) for q in pattern]
    nums = [int(q[1]) for q in pattern]
    if int(np.prod(nums)) != n_elems:
        call.fail(f"pattern covers {int(np.prod(nums))} elements per partition but 'dst' has {n_elems}")
    e = np.zeros(nums, dtype=np.int64)
    for d, (st, n) in enumerate(zip(steps, nums)):
        shp = [1] * len(nums)
        shp[d] = n
        e = e + st * np.arange(n, dtype=np.int64).reshape(shp)
    chan = np.arange(p, dtype=np.int64) * int(channel_multiplier)
    v = int(offset) + chan[:, None] + e.reshape(1, -1)
    return v.astype(np.int32)  # 32-bit integer arithmetic (wraps)


def _int_to(values_i32, d):
    """GpSimd cast of int32 results to dtype d (floats via RNE, ints saturate)."""
    if dt.is_float(d):
        return values_i32.astype(F32).astype(d) if d != dt.float32 else values_i32.astype(F32)
    if d == dt.int32:
        return values_i32
    info = np.iinfo(d)
    return np.clip(values_i32.astype(np.int64), info.min, info.max).astype(d)


# ===========================================================================
# target


def get_nc_sub_version():
    """The silicon revision within the nc_version generation: 0 (first revision) for both emulated targets."""
    return 0


def get_nc_version():
    """The nc_version of the current target (trn1 -> gen2, trn2 -> gen3).

    Inside a kernel run: the run's target; outside one (host code choosing a
    kernel variant): the default target (``NEURON_PLATFORM_TARGET_OVERRIDE``,
    else trn1).
    """
    ctx = mem.active()
    if ctx is not None:
        name = ctx.target.name
    else:
        from .jit import default_target

        name = default_target()
    return {"trn1": nc_version.gen2, "trn2": nc_version.gen3}[name]


# ===========================================================================
# Tensor Engine


@instruction(
    "nisa.nc_matmul", engines=("tensor",), cost=cost_matmul,
    memory={"dst": "psum", "stationary": "sbuf", "moving": "sbuf"},
    dtypes={"stationary": "float", "moving": "float", "dst": "float"},
)
def nc_matmul(call, dst, stationary, moving, is_stationary_onezero=False, is_moving_onezero=False,
              is_transpose=False, accumulate=None, tile_position=(), tile_size=(),
              perf_mode=matmul_perf_mode.none, name=None):
    """dst[M, N] (+)= stationary[K, M].T @ moving[K, N] on the Tensor Engine (fp32 accumulation)."""
    for n, t in (("stationary", stationary), ("moving", moving), ("dst", dst)):
        _need_tile(call, n, t)
    _enum(call, "perf_mode", perf_mode, matmul_perf_mode)
    # dst dtype (isa stub "Data types": dst float32 on NeuronCore-v2/v3). Transpose mode on
    # NeuronCore-v3+ writes FP16/BF16 PSUM output for an FP16/BF16 transpose (trainium2_arch.rst,
    # "Transpose mode"; fp8 input gives 16-bit elements, not modeled); NeuronCore-v2 has no native
    # transpose mode, so there the instruction stays a matmul with an fp32 dst.
    transpose16 = (bool(is_transpose) and call.target != "trn1" and stationary.dtype in (dt.bfloat16, dt.float16))
    if not dt.is_fp32(dst.dtype) and not (transpose16 and dst.dtype == stationary.dtype):
        want = f"float32 or {stationary.dtype} (is_transpose=True)" if transpose16 else "float32"
        call.fail(f"operand 'dst' ('{dst.name}') has dtype {dst.dtype}; it must be {want}")
    if perf_mode is matmul_perf_mode.double_row:
        if call.target == "trn1":
            call.fail("perf_mode=double_row is not supported on NeuronCore-v2 (trn1)")
        call.fail("perf_mode=double_row needs float8 operands packed along the first free dim; not emulated yet")
    fp32 = [dt.is_fp32(t.dtype) for t in (stationary, moving)]
    if any(fp32) and not all(fp32):
        call.fail(
            f"'stationary' is {stationary.dtype} and 'moving' is {moving.dtype}: if one matmul input is "
            "float32 the other must be float32 too"
        )
    if stationary.ndim != 2 or moving.ndim != 2:
        call.fail(f"operands must be 2-D [partition, free]; got stationary {stationary.shape}, moving {moving.shape}")
    k, m = stationary.shape
    k2, n = moving.shape
    rows, cols = 128, 128
    if tile_position or tile_size:
        if not (tile_position and tile_size):
            call.fail("tile_position and tile_size must both be set to enable tiling mode")
        rows, cols = (int(v) for v in tile_size)
        r0, c0 = (int(v) for v in tile_position)
        ok_rows = (64, 128) if call.target == "trn1" else (32, 64, 128)
        if rows not in ok_rows or cols not in ok_rows:
            call.fail(f"tile_size {tuple(tile_size)} must use row/column sizes in {ok_rows} on {call.target}")
        if r0 % rows or c0 % cols or r0 + rows > 128 or c0 + cols > 128:
            call.fail(f"tile_position {tuple(tile_position)} must be a multiple of tile_size {tuple(tile_size)} "
                      "inside the 128x128 array")
    if k != k2:
        call.fail(f"contraction (partition) sizes differ: 'stationary' has {k}, 'moving' has {k2}")
    if k > rows:
        call.fail(f"number of partitions {k} exceeds architecture limitation of {rows} (contraction dim)")
    if m > cols:
        call.fail(f"free size {m} of 'stationary' exceeds gemm_stationary_fmax ({cols})")
    if n > 512:
        call.fail(f"free size {n} of 'moving' exceeds gemm_moving_fmax (512)")
    if dst.shape != (m, n):
        call.fail(f"'dst' shape {dst.shape} does not match stationary.T @ moving shape ({m}, {n})")
    acc = None if accumulate is None else bool(accumulate)
    state = dst._mask_read()
    bit_transpose = transpose16 and dst.dtype == stationary.dtype
    res = _matmul_values(call, stationary, moving, compute=not bit_transpose)
    if bit_transpose:
        # bit-accurate transpose (NaN/Inf kept): dst[m, j] = stationary[j, m], moving the identity
        if k != n or not np.array_equal(dt.to_fp32(moving._read()), np.eye(k, dtype=np.float32)):
            call.fail(f"is_transpose=True with a 16-bit 'dst' transposes 'stationary': 'moving' must be the "
                      f"({k}, {k}) identity, got shape {moving.shape}")
        dst._write(stationary._read().T)
        dst._mask_write(2)
        return
    if acc is None:
        # isa stub: None infers "first write overwrites, subsequent writes accumulate" -- elements no
        # matmul has written yet (fresh, or value-initialized by memset/copy) are overwritten
        mm = state == 2
        if mm.all():
            dst._write(dst._read() + res)
        elif not mm.any():
            dst._write(res)
        else:
            dst._write(np.where(mm, dst._read() + res, res))
    elif acc:
        if not (state == 2).all():
            call.fail(
                "accumulate=True into PSUM elements of 'dst' that no matmul initialized is undefined on "
                "trn1/trn2 (e.g. after memset); use accumulate=False (or None) for the first matmul"
            )
        dst._write(dst._read() + res)
    else:
        dst._write(res)
    dst._mask_write(2)


def _matmul_values(call, stationary, moving, compute=True):
    k, m = stationary.shape
    n = moving.shape[1]
    lowp = not (dt.is_fp32(stationary.dtype) or dt.is_fp32(moving.dtype))
    if not compute:
        res = None
    elif (stationary.dtype == dt.bfloat16 and moving.dtype == dt.bfloat16
            and call.ctx.bf16_products == "rounded"):
        # trn1/trn2 round each bf16 x bf16 product to bf16 before fp32 accumulation (numerics.py)
        res = matmul_rounded_products(dt.to_fp32(stationary._read()), dt.to_fp32(moving._read()))
    else:
        res = dt.to_fp32(stationary._read()).T @ dt.to_fp32(moving._read())
    call.issue("tensor", n, m=m, lowp=lowp)
    c = call.ctx.counters
    if lowp:
        c.flops_lowp += 2 * k * m * n
    else:
        c.flops_fp32 += 2 * k * m * n
    return res


@instruction(
    "nisa.nc_transpose", engines=("tensor", "vector"), cost={"tensor": cost_matmul, "vector": cost_n},
    memory={"dst": "sbuf|psum", "data": "sbuf|psum"},
)
def nc_transpose(call, dst, data, engine=engine.unknown, name=None):
    """dst[F, P] = data[P, F]: Tensor Engine (<= 128x128, SBUF -> PSUM) or Vector Engine (<= 32x32)."""
    _need_tile(call, "dst", dst)
    _need_tile(call, "data", data)
    p = data.shape[0]
    f = O.elems(data)
    if dst.dtype != data.dtype:
        call.fail(f"'dst' dtype {dst.dtype} must equal 'data' dtype {data.dtype}")
    eng = engine
    if eng is None:  # the compiler's choice: Tensor Engine for SBUF -> PSUM, else Vector
        eng = "tensor" if (dst.buffer is mem.psum and data.buffer is mem.sbuf) else "vector"
    if eng == "tensor":
        if dst.buffer is not mem.psum or data.buffer is not mem.sbuf:
            call.fail("the Tensor Engine transpose reads 'data' from SBUF and writes 'dst' to PSUM; got "
                      f"data in {data.buffer.name.upper()}, dst in {dst.buffer.name.upper()}")
        if f > 128:
            call.fail(f"number of partitions {f} exceeds architecture limitation of 128 (free size of 'data' "
                      "becomes the partition size of 'dst')")
    elif p > 32 or f > 32:
        call.fail(f"the Vector Engine transposes at most 32x32, got {p}x{f}")
    if dst.shape[0] != f or O.elems(dst) != p:
        call.fail(f"'dst' shape {dst.shape} must be the transpose ({f}, {p}) of 'data' {data.shape}")
    a = O.flat(data)
    if eng == "tensor" and call.target == "trn1" and dt.is_float(data.dtype) and not np.isfinite(
            dt.to_fp32(a)).all():
        call.fail("'data' holds NaN/Inf; the Tensor Engine transpose is not bit-accurate for NaN/Inf on "
                  "NeuronCore-v2 (trn1): replace them first or transpose on the Vector Engine")
    O.write_flat(dst, a.T)
    if eng == "tensor":
        call.issue("tensor", p, m=f, lowp=data.dtype in (dt.bfloat16, dt.float16) + dt.FP8_DTYPES)
    else:
        call.issue("vector", f)


# ===========================================================================
# copies and fills


@instruction(
    "nisa.tensor_copy", engines=("vector", "scalar", "gpsimd"), cost=cost_n,
    memory={"dst": "sbuf|psum", "src": "sbuf|psum"},
    engine_targets={"scalar": ("trn2",)},
)
def tensor_copy(call, dst, src, engine=engine.unknown, name=None):
    """Copy src into dst on Vector / Scalar / GpSimd (bit-exact for equal dtypes except on Scalar)."""
    _need_tile(call, "dst", dst)
    _need_tile(call, "src", src)
    O.same_elems(call.spec.name, (("src", src), ("dst", dst)))
    eng = engine or "vector"
    if eng == "scalar" and call.target == "trn1":
        call.fail("tensor_copy is not supported on the Scalar Engine of NeuronCore-v2 (trn1); "
                  "use nisa.activation(op=nl.copy)")
    v = O.flat(src)
    if eng == "scalar":
        out = dt.from_fp32(dt.to_fp32(v), dst.dtype)
    else:
        out = dt.convert(v, dst.dtype)
    O.write_flat(dst, out)
    call.issue(eng, O.elems(src))


@instruction(
    "nisa.memset", engines=("vector", "gpsimd"), cost=cost_n, memory={"dst": "sbuf|psum"},
)
def memset(call, dst, value, engine=engine.unknown, name=None):
    """Fill dst with a compile-time constant; ``value`` must match dst's dtype (an int for int dtypes)."""
    _need_tile(call, "dst", dst)
    if not O.is_scalar(value):
        call.fail(f"'value' must be a compile-time constant, got {type(value).__name__}")
    if dt.is_int(dst.dtype):
        if isinstance(value, (float, np.floating)):
            call.fail(f"'value' {value!r} is a float but 'dst' is {dst.dtype}; pass an integer literal "
                      "(strict type matching since NKI 0.3)")
        info = np.iinfo(dst.dtype)
        if not info.min <= int(value) <= info.max:
            call.fail(f"'value' {value!r} does not fit 'dst' dtype {dst.dtype}")
        v = np.array(int(value), dtype=dst.dtype)
    else:
        v = dt.from_fp32(F32(value), dst.dtype)
    dst._write(v)
    call.issue(engine or "vector", O.elems(dst))


@instruction(
    "nisa.tensor_copy_predicated", engines=("vector",), cost=cost_n,
    memory={"dst": "sbuf|psum", "src": "sbuf|psum|scalar", "predicate": "sbuf|psum"},
    dtypes={"predicate": "uint8|uint16|uint32"},
)
def tensor_copy_predicated(call, dst, src, predicate, reverse_pred=False, name=None):
    """dst = src where predicate is nonzero (zero with reverse_pred); elsewhere dst is unchanged."""
    _need_tile(call, "dst", dst)
    _need_tile(call, "predicate", predicate)
    _not_both_psum(call, "src", "predicate")
    O.same_elems(call.spec.name, (("dst", dst), ("src", src), ("predicate", predicate)))
    if isinstance(src, Tensor) and src.dtype != dst.dtype:
        call.fail(f"'src' dtype {src.dtype} and 'dst' dtype {dst.dtype} must be the same")
    pred = O.flat(predicate) != 0
    if reverse_pred:
        pred = ~pred
    cur = O.flat(dst)
    if isinstance(src, Tensor):
        s = O.flat(src)
    else:
        s = np.asarray(dt.from_fp32(F32(src), dst.dtype) if dt.is_float(dst.dtype) else int(src)).astype(dst.dtype)
    O.write_flat(dst, np.where(pred, s, cur))
    call.issue("vector", O.elems(dst))


# ===========================================================================
# elementwise arithmetic


def _int_exact(o, a, b, out_dt):
    """GpSimd native 32-bit integer arithmetic: exact, wrapping to the output width."""
    a64 = a.astype(np.int64)
    b64 = b.astype(np.int64)
    r = np.asarray(o.int_fn(a64, b64)).astype(np.int64)
    if out_dt.itemsize == 4:
        r = r & 0xFFFFFFFF
        return r.astype(np.uint32).view(out_dt) if out_dt == dt.int32 else r.astype(np.uint32)
    info = np.iinfo(out_dt)
    return np.clip(r, info.min, info.max).astype(out_dt)


@instruction(
    "nisa.tensor_tensor", engines=("vector", "gpsimd"), cost=cost_2n,
    memory={"dst": "sbuf|psum", "data1": "sbuf|psum", "data2": "sbuf|psum"},
)
def tensor_tensor(call, dst, data1, data2, op, engine=engine.unknown, name=None):
    """dst = data1 <op> data2 elementwise (same partitions, same elements per partition)."""
    where = call.spec.name
    for n in ("dst", "data1", "data2"):
        _need_tile(call, n, call.args[n])
    o = O.alu_op(op, where, "op", arity=2)
    _not_both_psum(call, "data1", "data2")
    O.same_elems(where, (("data1", data1), ("data2", data2), ("dst", dst)))
    any_psum = any(t.buffer is mem.psum for t in (dst, data1, data2))
    all_i32 = all(dt.is_int32(t.dtype) for t in (dst, data1, data2))
    if o is O.power:
        eng = engine or "gpsimd"
        if eng != "gpsimd":
            call.fail("op=nl.power runs on the GpSimd engine only")
    elif engine is None:
        eng = "gpsimd" if (all_i32 and not any_psum and o.alu == "arith") else "vector"
    else:
        eng = engine
    a, b = O.flat(data1), O.flat(data2)
    if o.alu == "bitvec":
        if eng != "vector":
            call.fail("bitvec operators run on the Vector Engine only")
        if not all(dt.is_int(t.dtype) for t in (dst, data1, data2)):
            call.fail("bitvec operators need integer 'data1', 'data2' and 'dst'")
        ab = O.to_bits(data1, dst.dtype, where, "data1").reshape(a.shape)
        bb = O.to_bits(data2, dst.dtype, where, "data2").reshape(b.shape)
        res = np.asarray(o.fn(ab, bb, 8 * dst.dtype.itemsize)).view(dst.dtype)
    elif eng == "gpsimd" and all_i32 and o.int_fn is not None:
        res = _int_exact(o, a, b, dst.dtype)
    else:
        res = dt.from_fp32(o.fp32(dt.to_fp32(a), dt.to_fp32(b)), dst.dtype)
    O.write_flat(dst, res)
    call.issue(eng, O.elems(data1))


def _scalar_chain(call, data, ops, dst_dtype):
    """Apply [(op, operand, reverse)] to data ([P, F]); fp32 or raw-bit pipeline."""
    where = call.spec.name
    p = data.shape[0]
    if ops[0][0].alu == "bitvec":
        width = dst_dtype if dst_dtype.itemsize >= data.dtype.itemsize else data.dtype
        acc = O.to_bits(data, width, where, "data").reshape(p, -1)
        for o, operand, rev in ops:
            if o.arity == 1:
                acc = np.asarray(o.fn(acc)).astype(acc.dtype)
                continue
            if isinstance(operand, Tensor):
                b = O.to_bits(operand, width, where, "operand").reshape(p, 1)
            else:
                b = O.scalar_bits(operand, dt.unsigned_of(width), where)
            x, y = (b, acc) if rev else (acc, b)
            acc = np.asarray(o.fn(x, y, 8 * width.itemsize)).astype(acc.dtype)
        res = acc.view(width)
        return res if width == dst_dtype else res.astype(dst_dtype)
    acc = dt.to_fp32(O.flat(data))
    for o, operand, rev in ops:
        if o.arity == 1:
            acc = o.fp32(acc)
            continue
        b = O.column(operand, p)
        acc = o.fp32(b, acc) if rev else o.fp32(acc, b)
    return dt.from_fp32(acc, dst_dtype)


_SCALAR_ENGINE_COMBOS = {("multiply", "add"), ("multiply", None), ("add", None)}


def _cost_tensor_scalar(n, recip=False, **_):
    """N per element; 8N when a reciprocal runs on the Vector ALU (nki.api.shared.rst, engine selection)."""
    return 8 * n if recip else n


@instruction(
    "nisa.tensor_scalar", engines=("vector", "scalar", "gpsimd"), cost=_cost_tensor_scalar,
    memory={"dst": "sbuf|psum", "data": "sbuf|psum", "operand0": "sbuf|psum|scalar",
            "operand1": "sbuf|psum|scalar"},
)
def tensor_scalar(call, dst, data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False,
                  engine=engine.unknown, name=None):
    """dst = (data <op0> operand0) <op1> operand1 with scalars or (P, 1) vectors broadcast along the free dim."""
    where = call.spec.name
    _need_tile(call, "dst", dst)
    _need_tile(call, "data", data)
    O.same_elems(where, (("data", data), ("dst", dst)))
    o0 = O.alu_op(op0, where, "op0")
    ops = [o0]
    if op1 is not None:
        ops.append(O.alu_op(op1, where, "op1"))
    elif operand1 is not None:
        call.fail("'operand1' given without 'op1'; both must be None when unused")
    if len({o.alu for o in ops}) > 1:
        call.fail("'op0' and 'op1' must both be arithmetic or both be bitvec operators")
    bitvec = o0.alu == "bitvec"
    chain = []
    for i, (o, operand, rev) in enumerate(zip(ops, (operand0, operand1), (reverse0, reverse1))):
        nm = f"operand{i}"
        if o.arity == 1:
            if operand not in (None, 0, 0.0):
                call.fail(f"'{nm}' must be None or 0 when op{i}={o!r} is a unary operator")
        else:
            if operand is None:
                call.fail(f"'{nm}' is required for the binary operator op{i}={o!r}")
            O.vector_operand(where, operand, data, nm, fp32=not bitvec)
        chain.append((o, operand, rev))
    eng = engine or "vector"
    if bitvec:
        if eng != "vector":
            call.fail("bitvec operators run on the Vector Engine only")
        if not (dt.is_int(data.dtype) and dt.is_int(dst.dtype)):
            call.fail(f"bitvec operators need integer 'data' and 'dst', got {data.dtype} -> {dst.dtype}")
    if eng == "scalar":
        combo = (o0.name, ops[1].name if len(ops) > 1 else None)
        if combo not in _SCALAR_ENGINE_COMBOS:
            call.fail(f"the Scalar Engine supports only op0/op1 = multiply/add, multiply/None, add/None; got {combo}")
    if eng == "gpsimd" and not (o0 is O.rsqrt and len(ops) == 1):
        call.fail("engine=gpsimd is only allowed for op0=nl.rsqrt")
    res = _scalar_chain(call, data, chain, dst.dtype)
    O.write_flat(dst, res)
    call.issue(eng, O.elems(data), recip=eng == "vector" and O.reciprocal in ops)


@instruction(
    "nisa.scalar_tensor_tensor", engines=("vector",), cost=cost_2n,
    memory={"dst": "sbuf|psum", "data": "sbuf|psum", "operand0": "sbuf|psum|scalar", "operand1": "sbuf|psum"},
)
def scalar_tensor_tensor(call, dst, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False, name=None):
    """dst = (data <op0> operand0) <op1> operand1: operand0 broadcast along the free dim, operand1 elementwise."""
    where = call.spec.name
    for n in ("dst", "data", "operand1"):
        _need_tile(call, n, call.args[n])
    o0 = O.alu_op(op0, where, "op0", arity=2)
    o1 = O.alu_op(op1, where, "op1", arity=2)
    if o0.alu != "arith" or o1.alu != "arith":
        call.fail("op0 and op1 must be arithmetic operators (bitvec operators are not supported)")
    _not_both_psum(call, "data", "operand1")
    O.same_elems(where, (("data", data), ("operand1", operand1), ("dst", dst)))
    O.vector_operand(where, operand0, data, "operand0")
    p = data.shape[0]
    x = dt.to_fp32(O.flat(data))
    b = O.column(operand0, p)
    t = o0.fp32(b, x) if reverse0 else o0.fp32(x, b)
    y = dt.to_fp32(O.flat(operand1))
    r = o1.fp32(y, t) if reverse1 else o1.fp32(t, y)
    O.write_flat(dst, dt.from_fp32(r, dst.dtype))
    call.issue("vector", O.elems(data))


@instruction(
    "nisa.reciprocal", engines=("vector",), cost=cost_8n, memory={"dst": "sbuf|psum", "data": "sbuf|psum"},
)
def reciprocal(call, dst, data, name=None):
    """dst = 1 / data on the Vector Engine (fp32 math, ~8 cycles per element)."""
    _need_tile(call, "dst", dst)
    _need_tile(call, "data", data)
    O.same_elems(call.spec.name, (("data", data), ("dst", dst)))
    with np.errstate(all="ignore"):
        r = F32(1.0) / dt.to_fp32(O.flat(data))
    O.write_flat(dst, dt.from_fp32(r, dst.dtype))
    call.issue("vector", O.elems(data))


# ===========================================================================
# Scalar Engine activation


def _activation_core(call, dst, op, data, bias, scale):
    where = call.spec.name
    _need_tile(call, "dst", dst)
    _need_tile(call, "data", data)
    o = O.act_op(op, where)
    O.same_elems(where, (("data", data), ("dst", dst)))
    p = data.shape[0]
    O.vector_operand(where, scale, data, "scale", fp32=True)
    x = dt.to_fp32(O.flat(data)) * O.column(scale, p)
    if bias is not None:
        if call.target == "trn1":
            if o is O.reciprocal:
                call.fail("op=nl.reciprocal does not support a bias on NeuronCore-v2 (trn1) "
                          "(nki.api.shared.rst, NKI Engine Selection)")
            if not isinstance(bias, Tensor):
                call.fail(f"'bias' must be a ({p}, 1) tile on NeuronCore-v2 (trn1); scalar biases need "
                          "NeuronCore-v3 (trn2) or newer")
        O.vector_operand(where, bias, data, "bias")
        x = x + O.column(bias, p)
    x = np.asarray(x, dtype=F32)
    O.check_act_range(where, o, x)
    r = o.fp32(x)
    O.write_flat(dst, dt.from_fp32(r, dst.dtype))
    return r


def _reduce_regs(call, eng, p, lane, r, cmd, reduce_res, op=O.add, init=None, negate=False):
    """Apply reduce_cmd to an engine's accumulation registers; read them out into reduce_res."""
    regs = _acc(call.ctx, eng)
    sl = slice(lane, lane + p)
    if cmd in (reduce_cmd.reset, reduce_cmd.reset_reduce):
        regs[sl] = op.identity if eng == "vector" else 0.0
    elif cmd is reduce_cmd.load_reduce:
        regs[sl] = O.column(init, p)[:, 0]
    if cmd in (reduce_cmd.reduce, reduce_cmd.reset_reduce, reduce_cmd.load_reduce):
        part = _reduce_block(op, r.reshape(p, -1))
        with np.errstate(all="ignore"):
            regs[sl] = op.fp32(regs[sl], part)
    if reduce_res is not None:
        _vec_out(call, "reduce_res", reduce_res, p)
        out = -regs[sl] if negate else regs[sl].copy()
        O.write_flat(reduce_res, dt.from_fp32(out, reduce_res.dtype))


@instruction(
    "nisa.activation", engines=("scalar",), cost=cost_n,
    memory={"dst": "sbuf|psum", "data": "sbuf|psum", "bias": "sbuf|psum|scalar", "scale": "sbuf|psum|scalar",
            "reduce_res": "sbuf|psum"},
)
def activation(call, dst, op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None,
               reduce_cmd=reduce_cmd.idle, name=None):
    """dst = op(data * scale + bias) on the Scalar Engine; reduce_cmd drives the per-lane sum registers."""
    cmd = _enum(call, "reduce_cmd", reduce_cmd, _RC)
    if cmd is _RC.load_reduce:
        call.fail("reduce_cmd=load_reduce is not supported by activation (idle, reset, reduce, reset_reduce)")
    if reduce_op is not None and O.as_op(reduce_op, call.spec.name, "reduce_op") is not O.add:
        call.fail("reduce_op must be nl.add")
    r = _activation_core(call, dst, op, data, bias, scale)
    _reduce_regs(call, "scalar", data.shape[0], O.lane0(data), r, cmd, reduce_res)
    call.issue("scalar", O.elems(data))
    if reduce_res is not None:
        call.issue("scalar", 1)  # reading reduce_regs out is one more (short) instruction


@instruction(
    "nisa.activation_reduce", engines=("scalar",), cost=cost_n,
    memory={"dst": "sbuf|psum", "data": "sbuf|psum", "bias": "sbuf|psum|scalar", "scale": "sbuf|psum|scalar",
            "reduce_res": "sbuf|psum"},
)
def activation_reduce(call, dst, op, data, reduce_op, reduce_res, bias=None, scale=1.0, name=None):
    """activation with reduce_cmd=reset_reduce and the free-axis reduction written to reduce_res."""
    o = O.as_op(reduce_op, call.spec.name, "reduce_op")
    if o is not O.add and (call.target == "trn1" or o.alu is None):
        call.fail("reduce_op must be nl.add" + (" on NeuronCore-v2 (trn1)" if call.target == "trn1" else ""))
    if reduce_res is None:
        call.fail("'reduce_res' is required")
    r = _activation_core(call, dst, op, data, bias, scale)
    _reduce_regs(call, "scalar", data.shape[0], O.lane0(data), r, _RC.reset_reduce, reduce_res, op=o)
    call.issue("scalar", O.elems(data))
    call.issue("scalar", 1)  # the read-out of reduce_regs into reduce_res


# ===========================================================================
# reductions


def _check_trailing_axes(call, axis, nd):
    if axis is None:
        call.fail("'axis' is required; reductions run over the trailing free axes")
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    norm = []
    for a in axes:
        a = int(a)
        if not -nd <= a < nd:
            call.fail(f"axis {a} is out of range for a rank-{nd} tile")
        norm.append(a % nd)
    norm = sorted(set(norm))
    if 0 in norm:
        call.fail("reduction over the partition axis (axis 0) is not supported; use "
                  "nisa.tensor_partition_reduce, a transpose, or a matmul with a ones vector")
    if norm != list(range(norm[0], nd)):
        call.fail(f"reduction axes {tuple(norm)} must be the last contiguous free dimensions ending at the "
                  f"final dimension {nd - 1} (e.g. {tuple(range(nd - 1, nd))} or {tuple(range(1, nd))})")
    return tuple(norm)


@instruction(
    "nisa.tensor_reduce", engines=("vector",), cost=cost_n, memory={"dst": "sbuf|psum", "data": "sbuf|psum"},
)
def tensor_reduce(call, dst, op, data, axis, negate=False, keepdims=False, name=None):
    """dst = reduce(op, data, axis) over the trailing free axes (Vector Engine)."""
    where = call.spec.name
    _need_tile(call, "dst", dst)
    _need_tile(call, "data", data)
    mean = isinstance(op, O.Reduction) and op.mean
    o = O.alu_op(op, where, "op")
    if not o.reducible:
        call.fail(f"op {o!r} is not a legal reduction operator (nki.api.shared.rst, nki-aluop)")
    axes = _check_trailing_axes(call, axis, data.ndim)
    O.same_partitions(where, (("data", data), ("dst", dst)))
    a = data._read()
    keep = a.shape[: axes[0]]
    a2 = a.reshape(keep + (-1,))
    if o.alu == "bitvec":
        if negate:
            call.fail("'negate' applies to arithmetic operators only")
        if not (dt.is_int(data.dtype) and dt.is_int(dst.dtype)):
            call.fail("bitvec reductions need integer 'data' and 'dst'")
        bits = O.to_bits(data, dst.dtype, where, "data").reshape(a2.shape)
        r = o.reduce.reduce(bits, axis=-1).view(dst.dtype)
    else:
        x = dt.to_fp32(a2)
        with np.errstate(all="ignore"):
            if o.kind == "logical":
                r = o.reduce.reduce(x != 0, axis=-1).astype(F32)
            elif o.reduce in (np.add, np.multiply):
                r = o.reduce.reduce(x, axis=-1, dtype=F32)
            else:
                r = o.reduce.reduce(x, axis=-1)
        if mean:
            r = r / F32(a2.shape[-1])
        if negate:
            r = -r
        r = dt.from_fp32(r, dst.dtype)
    nout = int(np.prod(r.shape[1:])) if r.ndim > 1 else 1
    if dst.shape[0] != r.shape[0] or O.elems(dst) != nout:
        call.fail(f"'dst' shape {dst.shape} does not match the reduction result: {r.shape[0]} partitions x "
                  f"{nout} elements (axis={axis}, keepdims={keepdims})")
    O.write_flat(dst, r.reshape(r.shape[0], -1))
    call.issue("vector", O.elems(data))


_PARTITION_REDUCE_OPS = ("add", "maximum", "bitwise_or", "bitwise_and")


@instruction(
    "nisa.tensor_partition_reduce", engines=("gpsimd",), cost=cost_n,
    memory={"dst": "sbuf", "data": "sbuf"},
)
def tensor_partition_reduce(call, dst, op, data, name=None):
    """dst[0, ...] = reduce(op, data, axis=0): a reduction across partitions on GpSimd."""
    _need_tile(call, "dst", dst)
    _need_tile(call, "data", data)
    o = O.as_op(op, call.spec.name, "op")
    if o.name not in _PARTITION_REDUCE_OPS:
        call.fail(f"op {o!r} is not supported; use nl.add, nl.maximum, nl.bitwise_or or nl.bitwise_and")
    if dst.shape[0] != 1 or O.elems(dst) != O.elems(data):
        call.fail(f"'dst' must have 1 partition and {O.elems(data)} elements per partition, got {dst.shape}")
    if o.alu == "bitvec":
        if not (dt.is_int(data.dtype) and dt.is_int(dst.dtype)):
            call.fail("bitvec reductions need integer 'data' and 'dst'")
        bits = O.to_bits(data, dst.dtype, call.spec.name, "data").reshape(data.shape[0], -1)
        r = o.reduce.reduce(bits, axis=0).view(dst.dtype)
    else:
        x = dt.to_fp32(O.flat(data))
        r = dt.from_fp32(_reduce_block(o, x.T), dst.dtype)
    O.write_flat(dst, r.reshape(1, -1))
    call.issue("gpsimd", O.elems(data))


@instruction(
    "nisa.tensor_tensor_scan", engines=("vector",), cost=cost_2n,
    memory={"dst": "sbuf|psum", "data0": "sbuf|psum", "data1": "sbuf|psum", "initial": "sbuf|psum|scalar"},
)
def tensor_tensor_scan(call, dst, data0, data1, initial, op0, op1, reverse0=False, reverse1=False, name=None):
    """res[:, i] = op1(op0(data0[:, i], res[:, i-1]), data1[:, i]) with res[:, -1] = initial (fp32)."""
    where = call.spec.name
    for n in ("dst", "data0", "data1"):
        _need_tile(call, n, call.args[n])
    o0 = O.alu_op(op0, where, "op0", arity=2)
    o1 = O.alu_op(op1, where, "op1", arity=2)
    if o0.alu != "arith" or o1.alu != "arith":
        call.fail("op0 and op1 must be arithmetic operators")
    _not_both_psum(call, "data0", "data1")
    O.same_elems(where, (("data0", data0), ("data1", data1), ("dst", dst)))
    O.vector_operand(where, initial, data0, "initial")
    p = data0.shape[0]
    a = dt.to_fp32(O.flat(data0))
    b = dt.to_fp32(O.flat(data1))
    prev = O.column(initial, p)[:, 0]
    out = np.empty_like(a)
    for i in range(a.shape[1]):
        t = o0.fp32(prev, a[:, i]) if reverse0 else o0.fp32(a[:, i], prev)
        prev = o1.fp32(b[:, i], t) if reverse1 else o1.fp32(t, b[:, i])
        out[:, i] = prev
    O.write_flat(dst, dt.from_fp32(out, dst.dtype))
    call.issue("vector", O.elems(data0))


@instruction(
    "nisa.tensor_scalar_reduce", engines=("vector",), cost=cost_n,
    memory={"dst": "sbuf|psum", "data": "sbuf|psum", "operand0": "sbuf|psum|scalar", "reduce_res": "sbuf|psum",
            "reduce_init": "sbuf|psum|scalar"},
)
def tensor_scalar_reduce(call, dst, data, op0, operand0, reduce_op, reduce_res=None, reverse0=False,
                         reduce_cmd=reduce_cmd.reset_reduce, reduce_init=None, reduce_res_negate=False, name=None):
    """dst = data <op0> operand0; the free-axis reduce_op of dst accumulates in the Vector registers."""
    where = call.spec.name
    _need_tile(call, "dst", dst)
    _need_tile(call, "data", data)
    O.same_elems(where, (("data", data), ("dst", dst)))
    o0 = O.alu_op(op0, where, "op0")
    if o0.alu != "arith":
        call.fail("op0 must be an arithmetic operator (bitvec operators are not supported)")
    if reverse0:
        call.fail("reverse0=True is not supported yet (documented)")
    ro = O.as_op(reduce_op, where, "reduce_op")
    if ro.name not in ("add", "multiply", "maximum", "minimum"):
        call.fail("reduce_op must be nl.add, nl.multiply, nl.max or nl.min")
    cmd = _enum(call, "reduce_cmd", reduce_cmd, _RC)
    if cmd not in (_RC.reset_reduce, _RC.reduce, _RC.load_reduce):
        call.fail(f"reduce_cmd must be reset_reduce, reduce or load_reduce, got {cmd}")
    if (cmd is _RC.load_reduce) != (reduce_init is not None):
        call.fail("'reduce_init' must be given exactly when reduce_cmd=load_reduce")
    if reduce_init is not None:
        O.vector_operand(where, reduce_init, data, "reduce_init", fp32=True)
    if o0.arity == 2:
        O.vector_operand(where, operand0, data, "operand0", fp32=True)
    elif operand0 not in (None, 0, 0.0):
        call.fail(f"'operand0' must be None or 0 for the unary op0={o0!r}")
    p = data.shape[0]
    x = dt.to_fp32(O.flat(data))
    r = o0.fp32(x) if o0.arity == 1 else o0.fp32(x, O.column(operand0, p))
    O.write_flat(dst, dt.from_fp32(r, dst.dtype))
    _reduce_regs(call, "vector", p, O.lane0(data), r, cmd, reduce_res, op=ro, init=reduce_init,
                 negate=bool(reduce_res_negate))
    call.issue("vector", O.elems(data))


@instruction(
    "nisa.tensor_scalar_cumulative", engines=("vector",), cost=cost_n,
    memory={"dst": "sbuf|psum", "src": "sbuf|psum", "imm0": "sbuf|psum|scalar", "imm1": "sbuf|psum|scalar"},
)
def tensor_scalar_cumulative(call, dst, src, op0, op1, imm0, imm1=None, reduce_cmd=reduce_cmd.reset_reduce,
                             name=None):
    """Running op1-accumulation of (src <op0> imm0) along the free dim, written element by element."""
    where = call.spec.name
    _need_tile(call, "dst", dst)
    _need_tile(call, "src", src)
    O.same_elems(where, (("src", src), ("dst", dst)))
    for t, n in ((src, "src"), (dst, "dst")):
        if dt.is_int32(t.dtype):
            call.fail(f"'{n}' is {t.dtype}; int32/uint32 are not supported by this instruction")
    o0 = O.alu_op(op0, where, "op0", arity=2)
    o1 = O.alu_op(op1, where, "op1", arity=2)
    if o1.name not in ("add", "subtract", "multiply", "maximum", "minimum"):
        call.fail("op1 must be add, subtract, multiply, maximum or minimum")
    cmd = _enum(call, "reduce_cmd", reduce_cmd, _RC)
    if cmd not in (_RC.reset_reduce, _RC.reduce, _RC.load_reduce):
        call.fail(f"reduce_cmd must be reset_reduce, reduce or load_reduce, got {cmd}")
    O.vector_operand(where, imm0, src, "imm0", fp32=True)
    p = src.shape[0]
    regs = _acc(call.ctx, "vector")
    sl = slice(O.lane0(src), O.lane0(src) + p)
    if cmd is _RC.reset_reduce:
        regs[sl] = o1.identity
    elif cmd is _RC.load_reduce:
        if imm1 is None:
            call.fail("'imm1' is required with reduce_cmd=load_reduce")
        O.vector_operand(where, imm1, src, "imm1", fp32=True)
        regs[sl] = O.column(imm1, p)[:, 0]
    x = o0.fp32(dt.to_fp32(O.flat(src)), O.column(imm0, p))
    out = np.empty_like(x)
    reg = regs[sl].copy()
    for i in range(x.shape[1]):
        reg = o1.fp32(x[:, i], reg)
        out[:, i] = reg
    regs[sl] = reg
    O.write_flat(dst, dt.from_fp32(out, dst.dtype))
    call.issue("vector", O.elems(src))


# ===========================================================================
# selection


_CMP_OPS = ("equal", "less", "less_equal", "greater", "greater_equal")


@instruction(
    "nisa.select_reduce", engines=("vector",), cost=cost_n,
    memory={"dst": "sbuf|psum", "predicate": "sbuf|psum", "on_true": "sbuf|psum",
            "on_false": "sbuf|psum|scalar", "reduce_res": "sbuf|psum"},
    dtypes={"predicate": "int8|uint8|int16|uint16", "reduce_res": "float"},
)
def select_reduce(call, dst, predicate, on_true, on_false, reduce_res=None, reduce_cmd=reduce_cmd.idle,
                  reduce_op=O.maximum, reverse_pred=False, name=None):
    """dst = where(predicate, on_true, on_false) with an optional running max in the Vector registers."""
    where = call.spec.name
    for n in ("dst", "predicate", "on_true"):
        _need_tile(call, n, call.args[n])
    _not_both_psum(call, "on_true", "predicate")
    O.same_elems(where, (("on_true", on_true), ("predicate", predicate), ("dst", dst)))
    if on_true.dtype in (dt.int32, dt.uint32):
        call.fail(f"'on_true' dtype {on_true.dtype} is not supported (int32/uint32/tfloat32 are excluded)")
    O.vector_operand(where, on_false, on_true, "on_false")
    if O.as_op(reduce_op, where, "reduce_op") is not O.maximum:
        call.fail("reduce_op must be nl.maximum")
    cmd = _enum(call, "reduce_cmd", reduce_cmd, _RC)
    if cmd not in (_RC.idle, _RC.reduce, _RC.reset_reduce):
        call.fail(f"reduce_cmd must be idle, reduce or reset_reduce, got {cmd}")
    p = on_true.shape[0]
    pred = O.flat(predicate) != 0
    if reverse_pred:
        pred = ~pred
    r = np.where(pred, dt.to_fp32(O.flat(on_true)), O.column(on_false, p)).astype(F32)
    O.write_flat(dst, dt.from_fp32(r, dst.dtype))
    lane = O.lane0(on_true)
    if cmd is _RC.idle:
        _acc(call.ctx, "vector")[lane:lane + p] = np.nan  # "accumulator state may still be modified"
        if reduce_res is not None:
            call.fail("'reduce_res' needs reduce_cmd=reduce or reset_reduce (idle leaves the registers undefined)")
    else:
        _reduce_regs(call, "vector", p, lane, r, cmd, reduce_res, op=O.maximum)
    call.issue("vector", O.elems(on_true))


@instruction(
    "nisa.range_select", engines=("vector",), cost=cost_n, targets=("trn2",),
    memory={"dst": "sbuf|psum", "on_true_tile": "sbuf|psum", "bound0": "sbuf|psum", "bound1": "sbuf|psum",
            "reduce_res": "sbuf|psum"},
    dtypes={"on_true_tile": "float", "bound0": "float32", "bound1": "float32"},
)
def range_select(call, dst, on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd=reduce_cmd.reset_reduce,
                 reduce_res=None, reduce_op=O.maximum, range_start=0, on_false_value=..., name=None):
    """dst = on_true where comp_op0(idx, bound0) & comp_op1(idx, bound1) else FP32_MIN; idx = range_start + j."""
    where = call.spec.name
    for n in ("dst", "on_true_tile", "bound0", "bound1"):
        _need_tile(call, n, call.args[n])
    for n, o in (("comp_op0", comp_op0), ("comp_op1", comp_op1)):
        if O.as_op(o, where, n).name not in _CMP_OPS:
            call.fail(f"'{n}' must be one of nl.equal, nl.less, nl.less_equal, nl.greater, nl.greater_equal")
    if on_false_value is not ... and float(on_false_value) != FP32_MIN:
        call.fail(f"'on_false_value' must be FP32_MIN ({FP32_MIN!r}) due to a hardware constraint")
    if O.as_op(reduce_op, where, "reduce_op") is not O.maximum:
        call.fail("reduce_op must be nl.maximum")
    if not isinstance(range_start, (int, np.integer)):
        call.fail("'range_start' must be a compile-time integer")
    cmd = _enum(call, "reduce_cmd", reduce_cmd, _RC)
    O.same_elems(where, (("on_true_tile", on_true_tile), ("dst", dst)))
    p = on_true_tile.shape[0]
    _vec_out(call, "bound0", bound0, p)
    _vec_out(call, "bound1", bound1, p)
    f = O.elems(on_true_tile)
    idx = (np.float32(range_start) + np.arange(f, dtype=F32))[None, :]
    c0 = O.as_op(comp_op0, where).fn(idx, O.column(bound0, p))
    c1 = O.as_op(comp_op1, where).fn(idx, O.column(bound1, p))
    r = np.where(c0 & c1, dt.to_fp32(O.flat(on_true_tile)), F32(FP32_MIN)).astype(F32)
    O.write_flat(dst, dt.from_fp32(r, dst.dtype))
    lane = O.lane0(on_true_tile)
    if cmd is _RC.idle:
        _acc(call.ctx, "vector")[lane:lane + p] = np.nan
        if reduce_res is not None:
            call.fail("'reduce_res' needs reduce_cmd=reduce or reset_reduce")
    else:
        _reduce_regs(call, "vector", p, lane, r, cmd, reduce_res, op=O.maximum)
    call.issue("vector", f)


@instruction(
    "nisa.iota", engines=("gpsimd",), cost=cost_iota, memory={"dst": "sbuf"},
)
def iota(call, dst, pattern, offset=0, channel_multiplier=0, name=None):
    """dst[c, i...] = offset + c * channel_multiplier + sum(i_k * step_k) (int32 math) on GpSimd."""
    _need_tile(call, "dst", dst)
    v = _pattern_values(call, pattern, dst.shape[0], O.elems(dst), offset, channel_multiplier)
    O.write_flat(dst, _int_to(v, dst.dtype))
    call.issue("gpsimd", O.elems(dst))


@instruction(
    "nisa.affine_select", engines=("gpsimd",), cost=cost_n, memory={"dst": "sbuf", "on_true_tile": "sbuf"},
)
def affine_select(call, dst, pattern, channel_multiplier, on_true_tile, on_false_value, cmp_op=O.equal, offset=0,
                  name=None):
    """dst = on_true_tile where cmp_op(affine value, 0) else on_false_value (affine value as in iota)."""
    _need_tile(call, "dst", dst)
    _need_tile(call, "on_true_tile", on_true_tile)
    O.same_elems(call.spec.name, (("on_true_tile", on_true_tile), ("dst", dst)))
    co = O.as_op(cmp_op, call.spec.name, "cmp_op")
    if co.kind != "cmp":
        call.fail(f"'cmp_op' must be a comparison operator, got {co!r}")
    if not O.is_scalar(on_false_value):
        call.fail("'on_false_value' must be a float32 compile-time scalar")
    v = _pattern_values(call, pattern, dst.shape[0], O.elems(dst), offset, channel_multiplier)
    pred = co.int_fn(v.astype(np.int64), 0)
    src = O.flat(on_true_tile)
    if on_true_tile.dtype == dst.dtype:
        sel = src
    else:
        sel = dt.from_fp32(dt.to_fp32(src), dst.dtype)
    fv = dt.from_fp32(F32(on_false_value), dst.dtype)
    O.write_flat(dst, np.where(pred, sel, fv).astype(dst.dtype))
    call.issue("gpsimd", O.elems(dst))


# ===========================================================================
# top-8 search


def _check_8_to_16k(call, name, t):
    n = O.elems(t)
    if not 8 <= n <= 16384:
        call.fail(f"'{name}' must have between 8 and 16,384 elements per partition, got {n}")
    if t.ndim > 3:
        call.fail(f"'{name}' can be at most 3-D, got shape {t.shape}")


@instruction(
    "nisa.max8", engines=("vector",), cost=cost_n, memory={"dst": "sbuf|psum", "src": "sbuf|psum"},
)
def max8(call, dst, src, name=None):
    """dst[p, :] = the 8 largest values of src[p] in descending order (compared in fp32)."""
    _need_tile(call, "dst", dst)
    _need_tile(call, "src", src)
    _check_8_to_16k(call, "src", src)
    if dst.ndim != 2 or dst.shape != (src.shape[0], 8):
        call.fail(f"'dst' must have shape ({src.shape[0]}, 8), got {dst.shape}")
    x = dt.to_fp32(O.flat(src))
    top = -np.sort(-x, axis=1)[:, :8]
    O.write_flat(dst, dt.from_fp32(top, dst.dtype))
    call.issue("vector", O.elems(src))


def _find_first(call, x, v, used=None, order=None, absent=None):
    """Per partition, the first not-yet-used occurrence of each v[p, k] in x[p] (fp32 compare).

    Slots are served in ``order`` (default 0..7); each takes the first
    occurrence the earlier slots did not take, so duplicate values get
    successive positions.  A value without a (free) occurrence gives ``absent``,
    or fails when ``absent`` is None.
    """
    p = x.shape[0]
    out = np.empty(v.shape, dtype=np.int64)
    used = np.zeros(x.shape, dtype=bool) if used is None else used
    rows = np.arange(p)
    for k in (range(v.shape[1]) if order is None else order):
        hit = (x == v[:, k:k + 1]) & ~used
        found = hit.any(axis=1)
        if not found.all() and absent is None:
            bad = int(np.argmin(found))
            call.fail(f"value {float(v[bad, k])!r} (vals[{bad}, {k}]) does not occur in partition {bad} of 'data'; "
                      "the result is undefined on hardware")
        first = np.argmax(hit, axis=1)
        out[:, k] = np.where(found, first, -1 if absent is None else absent)
        used[rows[found], first[found]] = True
    return out


@instruction(
    "nisa.nc_find_index8", engines=("vector",), cost=cost_n,
    memory={"dst": "sbuf|psum", "data": "sbuf|psum", "vals": "sbuf|psum"}, dtypes={"dst": "uint16|uint32"},
)
def nc_find_index8(call, dst, data, vals, name=None):
    """dst[p, k] = index of vals[p, k] in data[p] (free dims flattened).

    Duplicate vals take successive occurrences in ascending slot order; a value
    that does not occur (or has no occurrence left) gives the all-ones sentinel
    of dst's dtype (0xFFFFFFFF / 0xFFFF), as the 0.6 stub and release notes say.
    """
    for n in ("dst", "data", "vals"):
        _need_tile(call, n, call.args[n])
    _check_8_to_16k(call, "data", data)
    O.same_partitions(call.spec.name, (("data", data), ("vals", vals), ("dst", dst)))
    if O.elems(vals) != 8 or O.elems(dst) != 8:
        call.fail("'vals' and 'dst' must have exactly 8 elements per partition")
    ones = int(np.iinfo(dst.dtype).max)
    idx = _find_first(call, dt.to_fp32(O.flat(data)), dt.to_fp32(O.flat(vals)), absent=ones)
    O.write_flat(dst, idx.astype(dst.dtype))
    call.issue("vector", O.elems(data))


@instruction(
    "nisa.nc_match_replace8", engines=("vector",), cost=cost_n,
    memory={"dst": "sbuf|psum", "data": "sbuf|psum", "vals": "sbuf|psum", "dst_idx": "sbuf|psum"},
)
def nc_match_replace8(call, dst, data, vals, imm, dst_idx=None, name=None):
    """dst = data with one occurrence per val replaced by imm; indices to dst_idx.

    vals are served in reverse slot order (7..0), each taking the first
    occurrence not yet taken, so duplicate vals pair with their occurrences in
    descending slot order (isa stub).
    """
    for n in ("dst", "data", "vals"):
        _need_tile(call, n, call.args[n])
    _check_8_to_16k(call, "data", data)
    O.same_elems(call.spec.name, (("data", data), ("dst", dst)))
    if O.elems(vals) != 8:
        call.fail("'vals' must have exactly 8 elements per partition")
    if not O.is_scalar(imm):
        call.fail("'imm' must be a float compile-time scalar")
    x = dt.to_fp32(O.flat(data))
    used = np.zeros(x.shape, dtype=bool)
    idx = _find_first(call, x, dt.to_fp32(O.flat(vals)), used=used, order=range(7, -1, -1))
    out = np.where(used, F32(imm), x)
    O.write_flat(dst, dt.from_fp32(out, dst.dtype) if dst.dtype != data.dtype or not dt.is_float(dst.dtype)
                 else np.where(used, dt.from_fp32(F32(imm), dst.dtype), O.flat(data)))
    if dst_idx is not None:
        _need_tile(call, "dst_idx", dst_idx)
        if dst_idx.shape[0] != data.shape[0] or O.elems(dst_idx) != 8:
            call.fail(f"'dst_idx' must have shape ({data.shape[0]}, 8), got {dst_idx.shape}")
        O.write_flat(dst_idx, idx.astype(dst_idx.dtype))
    call.issue("vector", O.elems(data))


# ===========================================================================
# gathers (GpSimd, within SBUF)


@instruction(
    "nisa.nc_n_gather", engines=("gpsimd",), cost=cost_n,
    memory={"dst": "sbuf", "data": "sbuf", "indices": "sbuf"}, dtypes={"indices": "uint32"},
)
def nc_n_gather(call, dst, data, indices, name=None):
    """dst[p, j] = data[p].flatten()[indices[p].flatten()[j]] (per partition)."""
    for n in ("dst", "data", "indices"):
        _need_tile(call, n, call.args[n])
    O.same_partitions(call.spec.name, (("data", data), ("indices", indices), ("dst", dst)))
    if dst.dtype != data.dtype:
        call.fail(f"'dst' dtype {dst.dtype} must equal 'data' dtype {data.dtype}")
    if O.elems(dst) != O.elems(indices):
        call.fail(f"'dst' has {O.elems(dst)} elements per partition but 'indices' has {O.elems(indices)}")
    x = O.flat(data)
    ix = O.flat(indices).astype(np.int64)
    f = x.shape[1]
    if ix.size and (ix.max() >= f):
        call.fail(f"index {int(ix.max())} is out of range [0, {f}) of 'data' elements per partition")
    O.write_flat(dst, np.take_along_axis(x, ix, axis=1))
    call.issue("gpsimd", O.elems(dst))


@instruction(
    "nisa.local_gather", engines=("gpsimd",), cost=cost_n,
    memory={"dst": "sbuf", "src_buffer": "sbuf", "index": "sbuf"}, dtypes={"index": "uint16"},
)
def local_gather(call, dst, src_buffer, index, num_elem_per_idx=1, num_valid_indices=None, name=None):
    """Per GpSimd core (16 partitions): every partition gathers the same list of element runs.

    Core c's indices are its 16-partition slice of ``index`` flattened
    partition-first, cut to ``num_valid_indices``; each index is an element
    offset into a partition's (flattened) free dim, from which
    ``num_elem_per_idx`` contiguous elements are read.  For each partition p
    of the core: ``dst[p, j*e:(j+1)*e] = src[p, idx_j : idx_j + e]``
    (the NumPy semantics of AWS's local_gather example test).
    """
    for n in ("dst", "src_buffer", "index"):
        _need_tile(call, n, call.args[n])
    p = src_buffer.shape[0]
    if index.shape[0] != p or p % 16:
        call.fail(f"'src_buffer' and 'index' must have the same partition count, a multiple of 16; "
                  f"got {p} and {index.shape[0]}")
    if num_elem_per_idx not in (1, 2, 4, 8, 16, 32):
        call.fail(f"'num_elem_per_idx' must be one of 1, 2, 4, 8, 16, 32, got {num_elem_per_idx}")
    if dst.dtype != src_buffer.dtype:
        call.fail(f"'dst' dtype {dst.dtype} must equal 'src_buffer' dtype {src_buffer.dtype} (no casting)")
    per_core = 16 * O.elems(index)
    nvalid = per_core if num_valid_indices is None else int(num_valid_indices)
    if not 0 < nvalid <= per_core:
        call.fail(f"num_valid_indices {nvalid} must be in 1..{per_core} (the indices per core)")
    if nvalid > 4096:
        call.fail(f"{nvalid} indices per core exceed the limit of 4096")
    e = int(num_elem_per_idx)
    if dst.shape[0] != p or O.elems(dst) != nvalid * e:
        call.fail(f"'dst' must have {p} partitions and {nvalid} x {e} = {nvalid * e} elements per partition, "
                  f"got {dst.shape}")
    src = O.flat(src_buffer)
    ix = O.flat(index).astype(np.int64)
    out = np.empty((p, nvalid * e), dtype=src.dtype)
    f = src.shape[1]
    for core in range(p // 16):
        rows = slice(16 * core, 16 * core + 16)
        idx = ix[rows].T.reshape(-1)[:nvalid]
        if idx.size and (idx.max() + e > f):
            call.fail(f"index {int(idx.max())} + {e} elements exceeds the {f} elements per partition of "
                      f"'src_buffer' (GpSimd core {core}); out-of-bound gathers are undefined")
        cols = (idx[:, None] + np.arange(e)).reshape(-1)
        out[rows] = src[rows][:, cols]
    O.write_flat(dst, out)
    call.issue("gpsimd", nvalid * e)


# ===========================================================================
# DMA


@instruction(
    "nisa.dma_copy", engines=("dma",), cost=cost_dma, memory={"dst": "hbm|sbuf", "src": "hbm|sbuf"},
    removed={
        "dst_rmw_op": "read-modify-write moved to nisa.dma_compute(dst, [src, dst], reduce_op=nl.add) in NKI 0.3",
        "unique_indices": "moved to nisa.dma_compute in NKI 0.3",
    },
)
def dma_copy(call, dst, src, priority=None, oob_mode=oob_mode.error, dge_mode=dge_mode.unknown,
             engine=engine.unknown, name=None):
    """Copy ``src`` into ``dst`` by DMA (HBM and SBUF, either direction).

    Element counts must match (shapes may differ; elements pair up in
    row-major order); dtypes convert when they differ (not with hwdge).
    Indirect gather/scatter: pass ``src`` (gather) or ``dst`` (scatter) as
    ``hbm.ap(pattern=[[F, P], [1, F]], vector_offset=idx, indirect_dim=0)``
    with ``idx`` a (P, 1) SBUF integer tile; partition ``p`` then reads or
    writes row ``idx[p]``. Out-of-bounds indices raise, or with
    ``oob_mode=nisa.oob_mode.skip`` skip their rows. HBM byte counters count
    the elements actually moved (see :func:`.access.dma_copy`).
    """
    _dma_options(call, priority, dge_mode, oob_mode)
    if dge_mode is _DGE.hwdge and all(isinstance(t, Tensor) for t in (dst, src)) and dst.dtype != src.dtype:
        call.fail(f"with dge_mode=hwdge 'src' ({src.dtype}) and 'dst' ({dst.dtype}) must have the same dtype "
                  "(hardware DGE moves raw bytes; use .view() to reinterpret)")
    access.dma_copy(call.ctx, dst, src, None, oob_mode, dge_mode, engine, name)


def _dma_options(call, priority, dge, oob):
    """Rules shared by the DMA instructions: enum arguments, priority and hwdge per target."""
    _enum(call, "dge_mode", dge, _DGE)
    _enum(call, "oob_mode", oob, _OOB)
    if priority is not None:
        call.fail("'priority' (DMA QoS) needs NeuronCore-v4 (trn3)")
    if dge is _DGE.hwdge and call.target == "trn1":
        call.fail("dge_mode=hwdge (hardware DGE) needs NeuronCore-v3 (trn2) or newer")


_DMA_T_AXES = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}


@instruction(
    "nisa.dma_transpose", engines=("dma",), cost=cost_dma, memory={"dst": "sbuf", "src": "hbm|sbuf"},
)
def dma_transpose(call, dst, src, axes=None, priority=None, dge_mode=dge_mode.unknown, oob_mode=oob_mode.error,
                  name=None):
    """dst = src transposed by DMA: permutation (1, 0), (2, 1, 0) or (3, 1, 2, 0) by rank."""
    _need_tile(call, "dst", dst)
    if not isinstance(src, Tensor):
        call.fail("indirect (access-pattern) sources are not emulated yet; pass a tensor")
    _dma_options(call, priority, dge_mode, oob_mode)
    mode = dge_mode
    # The 0.6 stub names unknown/hwdge for a direct transpose; nki-dge.rst's ".ap() affects DGE mode"
    # table (03/31/2026) also allows none (host-built descriptors) for a static pattern, which
    # nki-library's mlp_tkg passes. swdge stays the indirect (vector_offset) transpose, not emulated.
    if mode not in (_DGE.unknown, _DGE.hwdge, _DGE.none):
        call.fail(f"dge_mode must be unknown, hwdge or none for a direct (static) transpose, got {mode}"
                  " (nki-dge.rst: swdge is the indirect, vector_offset transpose)")
    perm = _DMA_T_AXES.get(src.ndim)
    if perm is None:
        call.fail(f"'src' must be 2-D, 3-D or 4-D, got shape {src.shape}")
    if axes is not None and tuple(axes) != perm:
        call.fail(f"axes {tuple(axes)} not supported for a {src.ndim}-D 'src'; use {perm}")
    if src.dtype != dst.dtype:
        call.fail(f"'src' dtype {src.dtype} must equal 'dst' dtype {dst.dtype}")
    want = tuple(src.shape[i] for i in perm)
    if dst.shape != want:
        call.fail(f"'dst' shape {dst.shape} must equal the transposed 'src' shape {want} exactly (rank included)")
    if mode is _DGE.hwdge:
        if call.target == "trn1":
            call.fail("hardware DGE needs NeuronCore-v3 (trn2) or newer")
        if src.shape[0] != 16 or src.shape[-1] % 128 or src.dtype.itemsize != 2:
            call.fail("hwdge transpose needs src.shape[0] == 16, src.shape[-1] % 128 == 0 and a 2-byte dtype")
    dst._write(np.transpose(src._read(), perm))
    nb = src.nbytes
    call.ctx.counters.dma(dst.shape[0], nb, hbm_read=0 if src.on_chip else nb, instr=call.spec.name)


@instruction(
    "nisa.dma_compute", engines=("dma",), cost=cost_dma, memory={"dst": "hbm|sbuf"},
)
def dma_compute(call, dst, srcs, reduce_op, scales=None, unique_indices=True, oob_mode=oob_mode.error, name=None):
    """dst = srcs[0] + srcs[1] + ... computed by the DMA engines in fp32 (direct tensors only)."""
    _need_tile(call, "dst", dst)
    if O.as_op(reduce_op, call.spec.name, "reduce_op") is not O.add:
        call.fail("only reduce_op=nl.add is supported")
    srcs = list(srcs)
    if not 1 <= len(srcs) <= 16:
        call.fail(f"'srcs' must hold 1 to 16 tensors, got {len(srcs)}")
    if scales is not None and any(float(s) != 1.0 for s in scales):
        call.fail("all 'scales' must be 1.0")
    acc = None
    for i, s in enumerate(srcs):
        if not isinstance(s, Tensor):
            call.fail(f"srcs[{i}] is not a tensor (indirect access patterns are not emulated yet)")
        if s.buffer is mem.psum:
            call.fail(f"srcs[{i}] is in PSUM, which DMA cannot access")
        if s.size != dst.size:
            call.fail(f"srcs[{i}] has {s.size} elements but 'dst' has {dst.size}")
        v = dt.to_fp32(s._read()).reshape(dst.shape)
        acc = v if acc is None else acc + v
    dst._write(dt.from_fp32(acc, dst.dtype))
    rd = sum(s.nbytes for s in srcs if not s.on_chip)
    call.ctx.counters.dma(dst.shape[0] if dst.on_chip else srcs[0].shape[0], sum(s.nbytes for s in srcs),
                          hbm_read=rd, hbm_write=0 if dst.on_chip else dst.nbytes, instr=call.spec.name)


# ===========================================================================
# statistics, shuffles, misc


@instruction(
    "nisa.bn_stats", engines=("vector",), cost=cost_n, memory={"dst": "sbuf|psum", "data": "sbuf|psum"},
)
def bn_stats(call, dst, data, name=None):
    """Per partition: (count, mean, var*count) of the even-indexed then of the odd-indexed elements."""
    _need_tile(call, "dst", dst)
    _need_tile(call, "data", data)
    f = O.elems(data)
    if f > 512:
        call.fail(f"'data' has {f} elements per partition; at most 512 (tile_size.bn_stats_fmax)")
    if dst.shape[0] != data.shape[0] or O.elems(dst) != 6:
        call.fail(f"'dst' must have shape ({data.shape[0]}, 6), got {dst.shape}")
    x = dt.to_fp32(O.flat(data)).astype(np.float64)
    cols = []
    for part in (x[:, 0::2], x[:, 1::2]):
        n = part.shape[1]
        mu = part.mean(axis=1) if n else np.zeros(x.shape[0])
        m2 = ((part - mu[:, None]) ** 2).sum(axis=1) if n else np.zeros(x.shape[0])
        cols += [np.full(x.shape[0], n, np.float64), mu, m2]
    O.write_flat(dst, dt.from_fp32(np.stack(cols, axis=1).astype(F32), dst.dtype))
    call.issue("vector", f)


@instruction(
    "nisa.bn_aggr", engines=("vector",), cost=cost_n, memory={"dst": "sbuf|psum", "data": "sbuf|psum"},
)
def bn_aggr(call, dst, data, name=None):
    """Combine (count, mean, var*count) triples per partition into (mean, variance)."""
    _need_tile(call, "dst", dst)
    _need_tile(call, "data", data)
    f = O.elems(data)
    if f % 3:
        call.fail(f"'data' must hold (count, mean, var*count) triples; {f} elements per partition")
    if dst.shape[0] != data.shape[0] or O.elems(dst) != 2:
        call.fail(f"'dst' must have shape ({data.shape[0]}, 2), got {dst.shape}")
    t = dt.to_fp32(O.flat(data)).astype(np.float64).reshape(data.shape[0], -1, 3)
    n, mu, m2 = t[..., 0], t[..., 1], t[..., 2]
    tot = n.sum(axis=1)
    with np.errstate(all="ignore"):
        mean = (n * mu).sum(axis=1) / tot
        var = (m2 + n * (mu - mean[:, None]) ** 2).sum(axis=1) / tot
    O.write_flat(dst, dt.from_fp32(np.stack([mean, var], axis=1).astype(F32), dst.dtype))
    call.issue("vector", f)


@instruction(
    "nisa.nc_stream_shuffle", engines=("vector",), cost=cost_n, memory={"dst": "sbuf|psum", "src": "sbuf|psum"},
)
def nc_stream_shuffle(call, dst, src, shuffle_mask, name=None):
    """Within each 32-partition quadrant: dst[i] = src[shuffle_mask[i]] (255 leaves dst[i] unchanged)."""
    _need_tile(call, "dst", dst)
    _need_tile(call, "src", src)
    if dst.dtype != src.dtype:
        call.fail(f"'dst' dtype {dst.dtype} must equal 'src' dtype {src.dtype}")
    if O.elems(dst) != O.elems(src):
        call.fail("'dst' and 'src' must have the same number of elements per partition")
    mask = [int(m) for m in shuffle_mask]
    if len(mask) != 32:
        call.fail(f"'shuffle_mask' must have 32 entries, got {len(mask)}")
    s = O.flat(src).copy()
    out = O.flat(dst).copy()
    ps, pd = s.shape[0], out.shape[0]
    for q in range(-(-max(ps, pd) // 32)):
        for i, m in enumerate(mask):
            di = 32 * q + i
            if m == 255 or di >= pd:
                continue
            si = 32 * q + m
            if si >= ps:
                call.fail(f"shuffle_mask[{i}]={m} selects partition {si} outside 'src' ({ps} partitions)")
            out[di] = s[si]
    O.write_flat(dst, out)
    call.issue("vector", O.elems(src))


@instruction(
    "nisa.nonzero_with_count", engines=("gpsimd",), cost=cost_n, targets=("trn2",),
    memory={"dst": "sbuf", "src": "sbuf"}, dtypes={"src": "float32|int32", "dst": "int32"},
)
def nonzero_with_count(call, dst, src, index_offset=0, padding_val=-1, name=None):
    """On partitions 0, 16, ..., 112: indices of nonzeros (+offset), padding, then the count."""
    _need_tile(call, "dst", dst)
    _need_tile(call, "src", src)
    if dst.shape[0] != src.shape[0] or O.elems(dst) != O.elems(src) + 1:
        call.fail("'dst' must have the partitions of 'src' and one more element per partition")
    s = O.flat(src)
    out = O.flat(dst).copy()
    f = s.shape[1]
    for p in range(0, s.shape[0], 16):
        nz = np.nonzero(s[p])[0]
        row = np.full(f + 1, int(padding_val), dtype=np.int64)
        row[: nz.size] = nz + int(index_offset)
        row[f] = nz.size
        out[p] = row.astype(np.int32)
    O.write_flat(dst, out)
    call.issue("gpsimd", f)


@instruction(
    "nisa.sequence_bounds", engines=("gpsimd",), cost=cost_n, memory={"dst": "sbuf", "segment_ids": "sbuf"},
    dtypes={"dst": "float32|int32", "segment_ids": "float32|int32"},
)
def sequence_bounds(call, dst, segment_ids, name=None):
    """For each element: [start, end] of its segment (padding id 0 gives [n, -1]); shape (1, 2, n)."""
    _need_tile(call, "dst", dst)
    _need_tile(call, "segment_ids", segment_ids)
    if segment_ids.shape[0] != 1:
        call.fail("the partition dimension of 'segment_ids' must be 1")
    ids = dt.to_fp32(O.flat(segment_ids))[0]
    n = ids.size
    if dst.shape != (1, 2, n):
        call.fail(f"'dst' must have shape (1, 2, {n}), got {dst.shape}")
    if (ids < 0).any():
        call.fail("segment ids must be non-negative")
    start = np.full(n, n, dtype=np.int64)
    end = np.full(n, -1, dtype=np.int64)
    for sid in np.unique(ids[ids != 0]):
        pos = np.nonzero(ids == sid)[0]
        start[ids == sid] = pos.min()
        end[ids == sid] = pos.max()
    dst._write(np.stack([start, end])[None].astype(F32).astype(dst.dtype) if dt.is_float(dst.dtype)
               else np.stack([start, end])[None].astype(dst.dtype))
    call.issue("gpsimd", n)


# ===========================================================================
# registers


def register_alloc(x=None):
    """Allocate a virtual register, optionally initialized to the integer x."""
    if x is not None and not isinstance(x, (int, np.integer)):
        fail("nisa.register_alloc", f"'x' must be None or an int, got {type(x).__name__}")
    return VirtualRegister(x)


def register_move(dst, src):
    """dst = src (an int constant or another register)."""
    if not isinstance(dst, VirtualRegister):
        fail("nisa.register_move", "'dst' must be a VirtualRegister")
    dst.value = src._get("nisa.register_move") if isinstance(src, VirtualRegister) else int(src)


def register_load(dst, src):
    """Load the single 32-bit value of an HBM/SBUF tensor into a register."""
    if not isinstance(dst, VirtualRegister):
        fail("nisa.register_load", "'dst' must be a VirtualRegister")
    if not isinstance(src, Tensor) or src.size != 1 or src.buffer is mem.psum:
        fail("nisa.register_load", "'src' must be a one-element HBM or SBUF tensor")
    dst.value = int(np.asarray(src._read()).reshape(-1)[0])


def register_store(dst, src):
    """Store a register's value into a one-element HBM/SBUF tensor."""
    if not isinstance(src, VirtualRegister):
        fail("nisa.register_store", "'src' must be a VirtualRegister")
    if not isinstance(dst, Tensor) or dst.size != 1 or dst.buffer is mem.psum:
        fail("nisa.register_store", "'dst' must be a one-element HBM or SBUF tensor")
    dst._write(np.array(src._get("nisa.register_store")).astype(dst.dtype).reshape(dst._read().shape))


# ===========================================================================
# multi-core (LNC2): grid programs are concurrent threads (multicore.py)

_GPSIMD_DMA_BYTES = {4: 1024, 2: 512, 1: 256}  # isa stub sendrecv: per-partition limit of gpsimd_dma by itemsize


def _scheduler(call, what):
    s = call.ctx.scheduler
    if s is None or s.n < 2:
        call.fail(f"{what} synchronises the programs of a multi-core launch (LNC2: kernel[2](...)); this kernel "
                  "runs as a single program")
    return s


@instruction(
    "nisa.sendrecv", engines=("dma",), memory={"src": "sbuf", "dst": "sbuf"}, targets=("trn2",),
)
def sendrecv(call, src, dst, send_to_rank, recv_from_rank, pipe_id, dma_engine=dma_engine.dma, name=None):
    """Send ``src`` to core ``send_to_rank``'s ``dst`` while receiving ``recv_from_rank``'s ``src`` into ``dst``."""
    _need_tile(call, "src", src)
    _need_tile(call, "dst", dst)
    _enum(call, "dma_engine", dma_engine, globals()["dma_engine"])
    if src.dtype != dst.dtype:
        call.fail(f"'src' ({src.dtype}) and 'dst' ({dst.dtype}) must have the same dtype")
    if src.shape != dst.shape:
        call.fail(f"'src' {src.shape} and 'dst' {dst.shape} must have the same shape and layout")
    for n, r in (("send_to_rank", send_to_rank), ("recv_from_rank", recv_from_rank)):
        if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or int(r) not in (0, 1):
            call.fail(f"'{n}' must be 0 or 1 (the two NeuronCores of an LNC2 pair), got {r!r}")
    if dma_engine is globals()["dma_engine"].gpsimd_dma:
        limit = _GPSIMD_DMA_BYTES.get(src.dtype.itemsize)
        per_part = O.elems(src) * src.dtype.itemsize
        if limit is not None and per_part > limit:
            call.fail(f"dma_engine=gpsimd_dma moves at most {limit} bytes per partition of "
                      f"{8 * src.dtype.itemsize}-bit data, got {per_part}")
    s = _scheduler(call, "nisa.sendrecv")
    if int(send_to_rank) >= s.n or int(recv_from_rank) >= s.n:
        call.fail(f"ranks {send_to_rank} / {recv_from_rank}: the launch has {s.n} programs")
    payload = np.array(src._read(), copy=True)
    data = s.exchange("nisa.sendrecv", payload, int(send_to_rank), int(recv_from_rank), pipe_id)
    dst._write(data)
    call.ctx.counters.dma(src.shape[0], src.nbytes, instr="nisa.sendrecv")


@instruction(
    "nisa.core_barrier", engines=("gpsimd", "vector", "scalar", "tensor"), memory={"data": "hbm"},
    targets=("trn2",),
)
def core_barrier(call, data, cores, engine=engine.gpsimd, name=None):
    """Every core in ``cores`` waits here until all of them arrived (``data``: the shared HBM tensor)."""
    if not isinstance(data, Tensor) or data.buffer is not mem.shared_hbm:
        call.fail("'data' must be a tensor in shared HBM (nl.shared_hbm, or a kernel argument)")
    try:
        cs = tuple(int(c) for c in cores)
    except TypeError:
        call.fail(f"'cores' must be a tuple of core indices, got {cores!r}")
    if cs != (0, 1):
        call.fail(f"only cores=(0, 1) is supported (LNC2), got {cores!r}")
    s = call.ctx.scheduler
    if s is not None and s.n > 1:
        s.barrier("nisa.core_barrier", cs)
    # a single-program launch has no other core to wait for: the barrier completes at once
    # (nki-library's router_topk issues it unconditionally and runs at LNC=1)
    call.issue(engine or "gpsimd", 1)


# ===========================================================================
# in NKI 0.6 but not emulated: random numbers (hardware PRNG bits), multi-core,
# and NeuronCore-v4 (trn3) instructions


def _sig_rng(dst, engine=engine.vector, name=None): ...
def _sig_dropout(dst, data, prob, name=None): ...
def _sig_set_rng_seed(src_seeds, name=None): ...
def _sig_rand_set_state(src_seeds, engine=engine.gpsimd, name=None): ...
def _sig_rand_get_state(dst, engine=engine.gpsimd, name=None): ...
def _sig_rand2(dst, min, max, name=None): ...  # noqa: A002
def _sig_nc_matmul_mx(dst, stationary, moving, stationary_scale, moving_scale, tile_position=None, tile_size=None,
                      accumulate=None, name=None): ...
def _sig_activate2(dst, op, data, imm0, imm1, op0, op1, relu_param=0.0, reverse0=False, reverse1=False,
                   reduce_op=None, reduce_res=None, reduce_cmd=reduce_cmd.idle, name=None): ...
def _sig_exponential(dst, src, max_value=0.0, reduce_res=None, reduce_cmd=reduce_cmd.idle, reduce_init=0.0,
                     name=None): ...
def _sig_quantize_mx(dst, src, dst_scale, name=None): ...
def _sig_topk(val_dst, idx_dst, src, n, name=None): ...


_PRNG = "the hardware PRNG bit streams are not modeled"
rng = not_emulated("nisa.rng", _sig_rng, _PRNG)
dropout = not_emulated("nisa.dropout", _sig_dropout, _PRNG)
set_rng_seed = not_emulated("nisa.set_rng_seed", _sig_set_rng_seed, _PRNG)
rand_set_state = not_emulated("nisa.rand_set_state", _sig_rand_set_state, _PRNG, targets=("trn2",))
rand_get_state = not_emulated("nisa.rand_get_state", _sig_rand_get_state, _PRNG, targets=("trn2",))
_V4 = "available only on NeuronCore-v4 (trn3); the emulator models trn1 and trn2"
rand2 = not_emulated("nisa.rand2", _sig_rand2, _V4, targets=("trn3",))
nc_matmul_mx = not_emulated("nisa.nc_matmul_mx", _sig_nc_matmul_mx, _V4, targets=("trn3",))
activate2 = not_emulated("nisa.activate2", _sig_activate2, _V4, targets=("trn3",))
exponential = not_emulated("nisa.exponential", _sig_exponential, _V4, targets=("trn3",))
quantize_mx = not_emulated("nisa.quantize_mx", _sig_quantize_mx, _V4, targets=("trn3",))
topk = not_emulated("nisa.topk", _sig_topk, "the 16-partition snake layout of the source is not modeled yet; "
                    "use nisa.max8 + nisa.nc_find_index8 / nc_match_replace8", engines=("gpsimd",))

for _f, _n in ((rng, "rng"), (dropout, "dropout"), (set_rng_seed, "set_rng_seed"),
               (rand_set_state, "rand_set_state"), (rand_get_state, "rand_get_state"), (rand2, "rand2"),
               (nc_matmul_mx, "nc_matmul_mx"),
               (activate2, "activate2"), (exponential, "exponential"), (quantize_mx, "quantize_mx"),
               (topk, "topk")):
    _f.__name__ = _n
    _f.__qualname__ = _n
del _f, _n

__all__ = [n for n in dir() if not n.startswith("_")]
_ = NkiValidationError
