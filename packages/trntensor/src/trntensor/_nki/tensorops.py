"""NKI lowerings of :mod:`trntensor.tensorops` (permute, elementwise, reduce).

Host-side work, and why:

* An operand that is neither contiguous nor a permutation of a contiguous
  tensor (a stepped slice, a broadcast) is copied contiguous first (one
  host pass); a permuted view of a contiguous tensor is not copied -- its
  permutation runs on the device as :func:`~trntensor.kernels.transpose.transpose_passes`.
* Half-precision operands go to the kernels as they are: the DMA widens them
  to fp32 tiles and narrows the result once.
* Range checks of the Scalar Engine's activations (sqrt, log, sin, cos) read
  the operand's min and max on the host: out-of-range data runs on torch
  (``supports`` says why), as the hardware would return invalid results.
* The Tensor Engine transpose on trn1 is not bit-accurate for NaN/Inf, so a
  tensor holding them is permuted on torch (one host ``isfinite`` pass).

Every lowering launches its kernels in a fixed order; ``counts`` lists them
(``"kernels"``) with the summed closed forms when there is more than one.
"""

from __future__ import annotations

import itertools
import math

import torch

from trnsci import nki

from ..kernels.elementwise import RANGES, elementwise_counts, elementwise_kernel
from ..kernels.gather import fits as gather_fits
from ..kernels.gather import gather_counts, gather_kernel
from ..kernels.reduce import reduce_counts, reduce_kernel
from ..kernels.transpose import transpose_counts, transpose_kernel, transpose_passes
from ..tensorops import ELEMENTWISE, PERMUTE, REDUCE

#: what the three kernels take (fp32 tiles inside; half precision is widened by the DMA)
KERNEL_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _figures(launches):
    """``launches``: [(kernel name, counts dict)] -> one plan ``counts`` dict (summed if several)."""
    if not launches:
        return None
    if len(launches) == 1:
        return {"kernel": launches[0][0], **launches[0][1]}
    total: dict = {}
    for _, c in launches:
        for k, v in c.items():
            total[k] = total.get(k, 0) + v
    return {"kernel": launches[0][0], "kernels": [n for n, _ in launches], **total}


def _transpose_launches(shape, perm, itemsize):
    return [("transpose_kernel", transpose_counts(b, m, n, itemsize)) for b, m, n in transpose_passes(shape, perm)]


def _run_passes(x, perm, alpha=1.0):
    """``alpha * x.permute(perm)`` of a contiguous ``x`` through transpose kernels (alpha on the last pass);
    returns the result (contiguous) and whether alpha was applied."""
    passes = transpose_passes(tuple(x.shape), perm)
    out_shape = tuple(x.shape[p] for p in perm)
    for k, (b, m, n) in enumerate(passes):
        a = float(alpha) if k == len(passes) - 1 else 1.0
        x = nki.run(transpose_kernel, x.reshape(b, m, n), alpha=a)
    return x.reshape(out_shape), bool(passes)


def _meta(x):
    return x.device.type == "meta"


# ------------------------------------------------------------------ permute

def _permute_supports(A, perm, alpha):
    if A.numel() == 0:
        return "empty tensor: nothing to move"
    fig = _permute_counts(A, perm, alpha)
    names = fig.get("kernels", [fig["kernel"]])
    # a host tensor is scanned here; on a device the lowering restores non-finite entries there instead
    if "transpose_kernel" in names and A.is_cpu and not bool(torch.isfinite(A).all()):
        return "A holds NaN/Inf: the Tensor Engine transpose is not bit-accurate for them on trn1"
    return None


def _source(A):
    """How the permute lowering reads ``A``: ``(kind, tensor, info)``.

    ``"dense"``: ``A = tensor.permute(info)`` with ``tensor`` contiguous (a
    permuted view is not copied); ``"gather"``: ``A`` is the strided view
    ``info = (shape, strides, offset)`` of the 1-D storage span ``tensor``
    (a diagonal, a stepped slice), read by the gather kernel; ``"host"``:
    ``A.contiguous()`` made on the host (a view the gather kernel cannot take).
    """
    if A.is_contiguous():
        return "dense", A, tuple(range(A.dim()))
    base, back = _layout(A)
    if back is not None:
        return "dense", base, back
    shape, strides = tuple(A.shape), tuple(A.stride())
    if gather_fits(shape) and A.numel() > 0:
        span = 1 + sum((n - 1) * st for n, st in zip(shape, strides))
        return "gather", A.as_strided((span,), (1,), A.storage_offset()), (shape, strides, 0)
    return "host", A.contiguous(), tuple(range(A.dim()))


def _permute_counts(A, perm, alpha):
    size = A.element_size()
    kind, base, info = _source(A)
    launches = []
    if kind == "gather":
        launches.append(("gather_kernel", gather_counts(info[0], size)))
        full = tuple(perm)
        shape = info[0]
    else:
        full = tuple(info[p] for p in perm)
        shape = tuple(base.shape)
    launches += _transpose_launches(shape, full, size)
    if len(launches) == 0 or (alpha != 1 and launches[-1][0] == "gather_kernel"):
        launches.append(("elementwise_kernel", elementwise_counts(A.numel(), size, False, False, alpha, 1, 1,
                                                                  "identity", "identity", "identity")))
    return _figures(launches)


def _scaled_copy(x, alpha):
    return nki.run(elementwise_kernel, x.reshape(-1), None, None, alpha=float(alpha), beta=1.0, gamma=1.0,
                   op_a="identity", op_b="identity", op_c="identity", op_ab="add", op_abc="add")


@PERMUTE.lowering("nki", dtypes=KERNEL_DTYPES, supports=_permute_supports, counts=_permute_counts)
def _permute_nki(A, perm, alpha):
    kind, base, info = _source(A)
    if kind == "gather":
        shape, strides, offset = info
        base = nki.run(gather_kernel, base, shape=shape, strides=strides, offset=offset)
        full = tuple(perm)
    else:
        full = tuple(info[p] for p in perm)
    R, moved = _run_passes(base, full, alpha)
    if not moved and (kind != "gather" or alpha != 1):
        R = _scaled_copy(R, alpha).reshape(R.shape)
    if not A.is_cpu and not _meta(A):  # NaN/Inf (not bit-accurate through the transpose): torch's, on the device
        P = A.permute(tuple(perm))
        R = torch.where(torch.isfinite(P), R, P * alpha if alpha != 1 else P)
    return R


# ------------------------------------------------------------------ elementwise

def _layout(v):
    """How operand view ``v`` reaches the kernel: ``(base, perm)`` with ``v == base.permute(perm)``,
    ``base`` contiguous (``perm`` None: ``v`` itself is); ``(v.contiguous(), None)`` when neither holds."""
    if v.is_contiguous():
        return v, None
    order = sorted(range(v.dim()), key=lambda d: (-v.stride(d), d))
    base = v.permute(order)
    if not base.is_contiguous():
        return v.contiguous(), None  # a host copy (stepped slices, broadcasts)
    back = [0] * v.dim()
    for k, d in enumerate(order):
        back[d] = k
    return base, tuple(back)


def _range_problem(x, op, name):
    rng = RANGES.get(op)
    if rng is None or _meta(x):
        return None
    lo, hi = float(x.min()), float(x.max())
    if lo < rng[0] or hi > rng[1]:
        return (f"{name} holds values in [{lo:.4g}, {hi:.4g}], outside [{rng[0]:.4g}, {rng[1]:.4g}], the Scalar "
                f"Engine's valid input range for {op!r}")
    return None


def _operand_launches(v, size):
    """The launches that make view ``v`` a contiguous device tensor (none when it already is)."""
    kind, base, info = _source(v)
    if kind == "gather":
        return [("gather_kernel", gather_counts(info[0], size))]
    if kind == "dense":
        return _transpose_launches(tuple(base.shape), info, size)
    return []  # a host copy


def _operand_on_device(v):
    """``v`` as a contiguous tensor, moved by the launches :func:`_operand_launches` lists."""
    kind, base, info = _source(v)
    if kind == "gather":
        shape, strides, offset = info
        return nki.run(gather_kernel, base, shape=shape, strides=strides, offset=offset)
    if kind == "dense":
        return _run_passes(base, info)[0]
    return base


def _elementwise_supports(ops, coef, names, shape, dtype):
    if math.prod(shape) == 0:
        return "empty result: nothing to compute"
    if any(isinstance(c, complex) for c in coef):
        return "complex scale factors"
    size = torch.empty((), dtype=dtype).element_size()
    for x, name, op in zip(ops, ("A", "B", "C"), names[:3]):
        if x is None:
            continue
        if x.dtype != dtype:
            return f"{name} is {str(x.dtype)[6:]}, the result {str(dtype)[6:]}: the kernel takes one dtype"
        why = _range_problem(x, op, name)
        if why:
            return why
        moves = [n for n, _ in _operand_launches(x.expand(shape), size)]
        if "transpose_kernel" in moves and not _meta(x) and not bool(torch.isfinite(x).all()):
            return f"{name} holds NaN/Inf: the Tensor Engine transpose is not bit-accurate for them on trn1"
    return None


def _elementwise_counts(ops, coef, names, shape, dtype):
    size = torch.empty((), dtype=dtype).element_size()
    launches = []
    for x in ops:
        if x is not None:
            launches += _operand_launches(x.expand(shape), size)
    alpha, beta, gamma = coef
    launches.append(("elementwise_kernel", elementwise_counts(
        math.prod(shape), size, ops[1] is not None, ops[2] is not None, alpha, beta, gamma, *names[:3])))
    return _figures(launches)


@ELEMENTWISE.lowering("nki", dtypes=KERNEL_DTYPES, supports=_elementwise_supports, counts=_elementwise_counts)
def _elementwise_nki(ops, coef, names, shape, dtype):
    # operands in the result's layout: permuted ones by transposes, broadcast ones gathered (stride-0 access
    # patterns), all on the device
    flat = [None if x is None else _operand_on_device(x.expand(shape)).reshape(-1) for x in ops]
    alpha, beta, gamma = (float(c) for c in coef)
    op_a, op_b, op_c, op_ab, op_abc = names
    R = nki.run(elementwise_kernel, *flat, alpha=alpha, beta=beta, gamma=gamma, op_a=op_a, op_b=op_b,
                op_c=op_c, op_ab=op_ab, op_abc=op_abc, out_dtype=dtype)
    return R.reshape(shape)


# ------------------------------------------------------------------ reduce

def _mk(A, axes):
    """``(perm, M, K)``: the layout ``[kept axes in order, reduced axes]`` the kernel reads as ``[M, K]``.

    The reduced axes may come in any order (the reduction does not care);
    the one needing the fewest transpose passes is taken (up to 5 reduced
    axes are tried, beyond that their own order).
    """
    kept = tuple(d for d in range(A.dim()) if d not in axes)
    M = math.prod(A.shape[d] for d in kept)
    K = math.prod(A.shape[d] for d in axes)
    shape = tuple(A.shape)
    orders = itertools.permutations(axes) if len(axes) <= 5 else [tuple(axes)]
    perm = min((kept + tuple(o) for o in orders), key=lambda p: len(transpose_passes(shape, p)))
    return perm, M, K


def _reduce_supports(A, axes, op, alpha, beta, C):
    if not axes:
        return "no axis reduced: nothing for the kernel to do"
    _, M, K = _mk(A, axes)
    if M == 0 or K == 0:
        return "empty extent: nothing to reduce"
    if C is not None and C.dtype != A.dtype:
        return f"C is {str(C.dtype)[6:]}, A {str(A.dtype)[6:]}: the kernel takes one dtype"
    return None


def _reduce_counts(A, axes, op, alpha, beta, C):
    perm, M, K = _mk(A, axes)
    size = A.element_size()
    launches = _transpose_launches(tuple(A.shape), perm, size)
    launches.append(("reduce_kernel", reduce_counts(M, K, size, C is not None, alpha, op)))
    return _figures(launches)


@REDUCE.lowering("nki", dtypes=KERNEL_DTYPES, supports=_reduce_supports, counts=_reduce_counts)
def _reduce_nki(A, axes, op, alpha, beta, C):
    perm, M, K = _mk(A, axes)
    X, _ = _run_passes(A.contiguous(), perm)
    c = C.contiguous().reshape(-1) if C is not None else None
    R = nki.run(reduce_kernel, X.reshape(M, K), c, op=op, alpha=float(alpha), beta=float(beta), out_dtype=A.dtype)
    return R.reshape(tuple(A.shape[d] for d in perm[:A.dim() - len(axes)]))
