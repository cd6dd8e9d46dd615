"""Emulated ``nki.isa`` (nisa), NKI >= 0.3 form: ``dst`` first, returns None.

Engine per instruction: nc_matmul / nc_transpose (to PSUM) -> Tensor;
tensor_tensor, tensor_scalar, tensor_reduce, tensor_copy, memset,
reciprocal, nc_transpose (SBUF to SBUF, <= 32x32) -> Vector (GpSimd or
Scalar when ``engine=`` says so); activation -> Scalar; iota -> GpSimd;
dma_copy -> DMA.
"""

import numpy as np

from . import access, nl
from . import dtypes as dt
from . import memory as mem
from .errors import EmulatorError, fail
from .memory import Tensor, psum, sbuf

dge_mode = access.dge_mode  # DMA descriptor generation modes (nisa.dge_mode)
oob_mode = access.oob_mode  # out-of-bounds handling of indirect DMA (nisa.oob_mode)


class engine:
    """Engine selectors accepted by ``engine=`` arguments."""

    unknown = None
    tensor = "tensor"
    vector = "vector"
    scalar = "scalar"
    gpsimd = "gpsimd"


class reduce_cmd:
    idle = "idle"
    reset = "reset"
    reduce = "reduce"
    reset_reduce = "reset_reduce"


def _engine(e, default):
    if e is None:
        return default
    if e not in ("vector", "scalar", "gpsimd", "tensor"):
        raise EmulatorError(f"unknown engine {e!r}")
    return e


def _dst(op, dst):
    if not isinstance(dst, Tensor):
        fail(op, f"'dst' must be a tile, got {type(dst).__name__}")
    return nl.onchip(dst, op, "dst")


def _same_shape(op, dst, shape, what="result"):
    if dst.shape != tuple(shape):
        if dst.shape[0] == shape[0] and nl.elems(dst) == nl.elems_of(shape):
            return
        fail(op, f"'dst' shape {dst.shape} does not match the {what} shape {tuple(shape)}")


def _vector_operand(op, x, data, name):
    """A tensor_scalar / activation operand: scalar, or (P, 1) tile."""
    if nl.is_scalar(x):
        return x
    nl.onchip(x, op, name)
    if x.shape[0] != data.shape[0]:
        fail(
            op,
            f"partition dimension mismatch: 'data' has {data.shape[0]} partitions but "
            f"'{name}' has {x.shape[0]}; broadcasting along the partition dimension is "
            "not supported",
        )
    if nl.elems(x) != 1:
        fail(op, f"'{name}' must be a compile-time scalar or a ({data.shape[0]}, 1) tile, got shape {x.shape}")
    return x


# ===========================================================================
# Tensor Engine


def nc_matmul(
    dst,
    stationary,
    moving,
    is_stationary_onezero=False,
    is_moving_onezero=False,
    is_transpose=False,
    accumulate=None,
    tile_position=(),
    tile_size=(),
    perf_mode=None,
    name=None,
):
    """dst[M, N] (+)= stationary[K, M].T @ moving[K, N] on the Tensor Engine.

    ``accumulate=None``: elements of dst never written since allocation are
    overwritten, already written ones are accumulated into.  ``False``:
    overwrite.  ``True``: add to the current contents.
    """
    op = "nisa.nc_matmul"
    c = mem.current(op).counters
    if is_transpose:
        fail(op, "is_transpose=True is not emulated; use nisa.nc_transpose")
    k, m, n = nl.check_matmul(op, stationary, moving)
    if not isinstance(dst, Tensor) or dst.buffer is not psum:
        where = dst.buffer.name.upper() if isinstance(dst, Tensor) else type(dst).__name__
        fail(op, f"'dst' must be a PSUM tile, got {where}")
    nl.onchip(dst, op, "dst")
    if dst.dtype != dt.float32:
        fail(op, f"'dst' must be float32 (PSUM accumulates in fp32), got {dst.dtype}")
    if dst.shape != (m, n):
        fail(op, f"'dst' shape {dst.shape} does not match stationary.T @ moving shape ({m}, {n})")
    res = nl.matmul_values(c, stationary, moving)
    cur = dst._read()
    if accumulate is True:
        dst._write(cur + res)
        return
    if accumulate is False:
        dst._write(res)
        return
    written = dst._mask_read()
    if written.all():
        if dst._key is None:
            cur += res
        else:
            dst._write(cur + res)
    elif not written.any():
        dst._write(res)
    else:
        dst._write(np.where(written, cur + res, res))


def nc_transpose(dst, data, engine=None, name=None):
    """dst[F, P] = data[P, F].  Tensor Engine when dst is in PSUM (<= 128x128);
    Vector Engine when dst is in SBUF (<= 32x32)."""
    op = "nisa.nc_transpose"
    c = mem.current(op).counters
    nl.onchip(data, op, "data")
    _dst(op, dst)
    if data.ndim != 2:
        fail(op, f"'data' must be 2-D, got shape {data.shape}")
    p, f = data.shape
    eng = _engine(engine, "tensor" if dst.buffer is psum else "vector")
    if eng == "tensor":
        if dst.buffer is not psum:
            fail(op, "Tensor Engine transpose writes PSUM; 'dst' is in SBUF")
        if data.buffer is not sbuf:
            fail(op, "Tensor Engine transpose reads SBUF; 'data' is in PSUM")
        if f > 128:
            fail(
                op,
                f"number of partitions {f} exceeds architecture limitation of 128 "
                "(free size of 'data' becomes the partition size of 'dst')",
            )
    else:
        if p > 32 or f > 32:
            fail(op, f"Vector Engine transpose supports at most 32x32, got {data.shape}")
    if dst.shape != (f, p):
        fail(op, f"'dst' shape {dst.shape} must be the transpose of 'data' shape {data.shape}")
    dst._write(dt.convert(data._read().T, dst.dtype))
    if eng == "tensor":
        c.engine("tensor", nl.transpose_cycles(p, f, data.dtype))
    else:
        c.engine(eng, f)


# ===========================================================================
# Vector / Scalar / GpSimd


def tensor_copy(dst, src, engine=None, name=None):
    """Copy src into dst (exact for equal dtypes, else converted via fp32)."""
    op = "nisa.tensor_copy"
    c = mem.current(op).counters
    nl.onchip(src, op, "src")
    _dst(op, dst)
    nl.check_partitions(op, (("src", src), ("dst", dst)))
    _same_shape(op, dst, src.shape, "'src'")
    v = src._read()
    if v.shape != dst.shape:
        v = v.reshape(dst.shape)
    dst._write(dt.convert(v, dst.dtype))
    c.engine(_engine(engine, "vector"), nl.elems(src))


def tensor_tensor(dst, data1, data2, op, engine=None, name=None):
    """dst = data1 <op> data2, elementwise on tiles of equal shape."""
    where = "nisa.tensor_tensor"
    c = mem.current(where).counters
    o = nl.as_op(op, where)
    if o.arity != 2:
        fail(where, f"op {o!r} is not a binary operator")
    nl.onchip(data1, where, "data1")
    nl.onchip(data2, where, "data2")
    _dst(where, dst)
    nl.check_partitions(where, (("data1", data1), ("data2", data2), ("dst", dst)))
    if data1.shape != data2.shape:
        fail(where, f"'data1' shape {data1.shape} and 'data2' shape {data2.shape} must match")
    _same_shape(where, dst, data1.shape)
    res = o.compute2(data1, data2, dst.dtype, where, data1.ndim)
    dst._write(np.reshape(res, dst.shape) if res.shape != dst.shape else res)
    c.engine(_engine(engine, "vector"), 2 * nl.elems(data1))


def _scalar_chain(where, data, ops, dst_dtype):
    """Apply [(op, operand, reverse)] to data; fp32 or raw-bit pipeline."""
    kinds = {o.kind == "bitvec" for o, _, _ in ops}
    if len(kinds) > 1:
        fail(where, "op0 and op1 must both be arithmetic or both be bitwise operators")
    nd = data.ndim
    if kinds == {True}:
        if not dt.is_int(data.dtype) or not dt.is_int(dst_dtype):
            fail(where, f"bitwise operators need integer 'data' and 'dst', got {data.dtype} -> {dst_dtype}")
        width = dst_dtype if dst_dtype.itemsize >= data.dtype.itemsize else data.dtype
        acc = nl.to_bits(data, width, where, "data")
        for o, operand, rev in ops:
            b = nl.align(nl.to_bits(operand, width, where, "operand"), nd)
            a, b = (b, acc) if rev else (acc, b)
            acc = np.asarray(o.fn(a, b, 8 * width.itemsize)).astype(acc.dtype)
        res = acc.view(width)
        return res if width == dst_dtype else res.astype(dst_dtype)
    acc = dt.to_fp32(data._read())
    for o, operand, rev in ops:
        b = nl.align(dt.to_fp32(nl.vals(operand)), nd)
        acc = o.fp32(b, acc) if rev else o.fp32(acc, b)
    return dt.from_fp32(acc, dst_dtype)


def tensor_scalar(
    dst, data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False, engine=None, name=None
):
    """dst = (data <op0> operand0) <op1> operand1, operands broadcast along the
    free dimension (scalars or (P, 1) tiles); one instruction."""
    where = "nisa.tensor_scalar"
    c = mem.current(where).counters
    nl.onchip(data, where, "data")
    _dst(where, dst)
    nl.check_partitions(where, (("data", data), ("dst", dst)))
    _same_shape(where, dst, data.shape)
    ops = [(nl.as_op(op0, where, "op0"), _vector_operand(where, operand0, data, "operand0"), reverse0)]
    if op1 is not None:
        if operand1 is None:
            fail(where, "op1 given without operand1")
        ops.append((nl.as_op(op1, where, "op1"), _vector_operand(where, operand1, data, "operand1"), reverse1))
    for o, _, _ in ops:
        if o.arity != 2:
            fail(where, f"{o!r} is not a binary operator")
    res = _scalar_chain(where, data, ops, dst.dtype)
    dst._write(res.reshape(dst.shape) if res.shape != dst.shape else res)
    c.engine(_engine(engine, "vector"), nl.elems(data))


def activation(dst, op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None, reduce_cmd=None, name=None):
    """dst = op(data * scale + bias) on the Scalar Engine (fp32 math).

    scale: scalar or (P, 1) tile; bias: (P, 1) tile or scalar.  With
    ``reduce_res`` (a (P, 1) tile) the free-axis sum of the result is written
    there too (``reduce_op`` must be nl.add).
    """
    where = "nisa.activation"
    c = mem.current(where).counters
    o = nl.as_op(op, where)
    if o.arity != 1:
        fail(where, f"op {o!r} is not an activation function (unary)")
    nl.onchip(data, where, "data")
    _dst(where, dst)
    nl.check_partitions(where, (("data", data), ("dst", dst)))
    _same_shape(where, dst, data.shape)
    nd = data.ndim
    x = dt.to_fp32(data._read())
    s = nl.align(dt.to_fp32(nl.vals(_vector_operand(where, scale, data, "scale"))), nd)
    x = x * s
    if bias is not None:
        b = nl.align(dt.to_fp32(nl.vals(_vector_operand(where, bias, data, "bias"))), nd)
        x = x + b
    r = o.fp32(np.asarray(x, dtype=np.float32))
    dst._write(dt.from_fp32(r, dst.dtype).reshape(dst.shape))
    if reduce_res is not None:
        if nl.as_op(reduce_op if reduce_op is not None else nl.add, where, "reduce_op") is not nl.add:
            fail(where, "reduce_op must be nl.add (Scalar Engine sums only)")
        nl.onchip(reduce_res, where, "reduce_res")
        if reduce_res.shape[0] != data.shape[0] or nl.elems(reduce_res) != 1:
            fail(where, f"'reduce_res' must have shape ({data.shape[0]}, 1), got {reduce_res.shape}")
        tot = np.sum(r.reshape(r.shape[0], -1), axis=1, dtype=np.float32)
        reduce_res._write(dt.from_fp32(tot, reduce_res.dtype).reshape(reduce_res.shape))
    c.engine("scalar", nl.elems(data))


def tensor_reduce(dst, op, data, axis, negate=False, keepdims=False, name=None):
    """dst = reduce(op, data, axis) over free axes (Vector Engine, fp32)."""
    where = "nisa.tensor_reduce"
    c = mem.current(where).counters
    if isinstance(op, nl.Reduction):
        npfn, mean = op.npfn, op.mean
    else:
        o = nl.as_op(op, where)
        if o.reduce is None:
            fail(
                where,
                f"op {o!r} cannot be used as a reduction (use nl.add, nl.multiply, "
                "nl.maximum/nl.max, nl.minimum/nl.min)",
            )
        npfn, mean = o.reduce, False
    nl.onchip(data, where, "data")
    _dst(where, dst)
    axes = nl.reduce_axes(where, axis, data.ndim)
    nl.check_partitions(where, (("data", data), ("dst", dst)))
    r = nl.reduce_values(npfn, data._read(), axes, keepdims, mean)
    if negate:
        r = -r
    _same_shape(where, dst, r.shape if r.ndim >= 2 else (r.shape[0], 1))
    dst._write(dt.from_fp32(r, dst.dtype).reshape(dst.shape))
    c.engine("vector", nl.elems(data))


def reciprocal(dst, data, name=None):
    """dst = 1 / data (Vector Engine, ~8 cycles per element)."""
    where = "nisa.reciprocal"
    c = mem.current(where).counters
    nl.onchip(data, where, "data")
    _dst(where, dst)
    _same_shape(where, dst, data.shape)
    with np.errstate(all="ignore"):
        r = np.float32(1.0) / dt.to_fp32(data._read())
    dst._write(dt.from_fp32(r, dst.dtype).reshape(dst.shape))
    c.engine("vector", 8 * nl.elems(data))


def memset(dst, value, engine=None, name=None):
    """Fill dst with a constant (Vector Engine)."""
    where = "nisa.memset"
    c = mem.current(where).counters
    _dst(where, dst)
    if dt.is_float(dst.dtype):
        v = dt.from_fp32(np.float32(value), dst.dtype)
    else:
        v = nl._int_immediate(value, dst.dtype, where)
    dst._write(v)
    c.engine(_engine(engine, "vector"), nl.elems(dst))


def iota(dst, pattern, offset=0, channel_multiplier=0, name=None):
    """Write an integer index pattern into an SBUF tile (GpSimd Engine).

    Two spellings of ``pattern``:

    * the NKI >= 0.3 access-pattern form, a list of ``[step, num]`` pairs
      (outermost first): the value at partition ``p`` and free indices
      ``(i0, i1, ...)`` is ``offset + p * channel_multiplier + sum(i_k * step_k)``,
      and the product of the ``num`` must equal dst's elements per partition;
    * an index expression built from ``nl.arange`` (an integer array here) or
      an int, broadcast to dst's shape, plus ``offset``.

    Values are computed in 32-bit integers and converted to dst's dtype.
    """
    where = "nisa.iota"
    c = mem.current(where).counters
    _dst(where, dst)
    if dst.buffer is not sbuf:
        fail(where, f"'dst' must be in SBUF, got {dst.buffer.name.upper()}")
    if (
        isinstance(pattern, (list, tuple))
        and pattern
        and all(isinstance(q, (list, tuple)) and len(q) == 2 for q in pattern)
    ):
        steps = [int(q[0]) for q in pattern]
        nums = [int(q[1]) for q in pattern]
        if int(np.prod(nums)) != nl.elems(dst):
            fail(
                where,
                f"pattern covers {int(np.prod(nums))} elements per partition but 'dst' {dst.shape} has {nl.elems(dst)}",
            )
        e = np.zeros(nums, dtype=np.int64)
        for d, (st, n) in enumerate(zip(steps, nums)):
            shp = [1] * len(nums)
            shp[d] = n
            e = e + st * np.arange(n, dtype=np.int64).reshape(shp)
        chan = np.arange(dst.shape[0], dtype=np.int64) * int(channel_multiplier)
        e = (int(offset) + chan[:, None] + e.reshape(1, -1)).reshape(dst.shape)
    else:
        e = np.asarray(pattern)
        if e.dtype.kind not in "iu":
            fail(
                where, f"'pattern' must be a list of [step, num] pairs or an integer index expression, got {pattern!r}"
            )
        e = e.astype(np.int64) + int(offset)
        if 0 < e.ndim < dst.ndim:
            e = e.reshape(e.shape + (1,) * (dst.ndim - e.ndim))
        try:
            e = np.broadcast_to(e, dst.shape)
        except ValueError:
            fail(where, f"'pattern' of shape {np.shape(pattern)} does not broadcast to 'dst' {dst.shape}")
    e32 = e.astype(np.int32)  # 32-bit integer math (wraps)
    if dt.is_float(dst.dtype):
        v = e32.astype(np.float32).astype(dst.dtype)
    else:
        v = e32.astype(dst.dtype)
    dst._write(v)
    c.engine("gpsimd", 150 + nl.elems(dst))


def dma_copy(
    dst,
    src,
    priority=None,
    oob_mode=access.oob_mode.error,
    dge_mode=access.dge_mode.unknown,
    engine=None,
    name=None,
):
    """Copy ``src`` into ``dst`` by DMA (HBM and SBUF, either direction).

    Element counts must match (shapes may differ; elements pair up in
    row-major order); dtypes convert through fp32 when they differ.
    Indirect gather/scatter: pass ``src`` (gather) or ``dst`` (scatter) as
    ``hbm.ap(pattern=[[F, P], [1, F]], vector_offset=idx, indirect_dim=0)``
    with ``idx`` a (P, 1) SBUF integer tile; partition ``p`` then reads or
    writes row ``idx[p]``.  Out-of-bounds indices raise, or with
    ``oob_mode=nisa.oob_mode.skip`` skip their rows.  HBM byte counters
    count the elements actually moved.
    """
    access.dma_copy(mem.current("nisa.dma_copy"), dst, src, priority, oob_mode, dge_mode, engine, name)


def get_nc_version():
    """The emulated NeuronCore generation of the current target ("trn1" -> v2)."""
    return {"trn1": "gen2", "trn2": "gen3"}[mem.current("nisa.get_nc_version").target.name]
