"""NKI lowering of :mod:`trntensor.einsum`: the device path as the einsum Op's lowering.

One decision for the whole call: under "simulator"/"nki" the einsum Op runs
its plan through the device path (:mod:`trntensor._nki.einsum_device`: transpose,
gather, reduce and elementwise kernels, trnblas's GEMM kernels), and its
plan lists those launches -- what the call runs.
"""

from __future__ import annotations

import torch

from trnsci import runtime as _runtime

from ..einsum import EINSUM, _stochastic_round
from . import einsum_device as _device


def _einsum_supports(plan, operands, alpha, beta, C, compute_dtype, result_dtype, precision, autotune=None):
    if precision not in ("fast", "sr"):
        return f"precision {precision!r}: the device path runs precisions 'fast' and 'sr'"
    if torch.is_grad_enabled() and any(x.requires_grad for x in operands):
        return "autograd: the einsum runs on torch, its GEMM steps through trnblas's differentiable operators"
    if _einsum_counts(plan, operands, alpha, beta, C, compute_dtype, result_dtype, precision) is None:
        return "no launch of the plan would run a kernel (dtype, sizes): every piece runs on torch"
    return None


def _einsum_counts(plan, operands, alpha, beta, C, compute_dtype, result_dtype, precision, autotune=None):
    """The launches of the device path, planned on meta tensors: their kernel names in order."""
    resident = _runtime.residency((*operands, *([] if C is None else [C])), {})
    launches = _device.annotate(plan, compute_dtype, alpha, beta if C is not None else 0, resident).launches
    names = []
    for _, p in launches:
        if p.backend == "torch" or p.kernel is None:
            continue
        names += p.kernel.get("kernels") or [p.kernel.get("name")]
    if not names:
        return None
    return {"kernel": names[0], "kernels": names}


@EINSUM.lowering("nki", supports=_einsum_supports, counts=_einsum_counts)
def _einsum_device(plan, operands, alpha, beta, C, compute_dtype, result_dtype, precision, autotune=None):
    ops = [x if x.dtype == compute_dtype else x.to(compute_dtype) for x in operands]
    R = _device.run(plan, ops, alpha, beta, C, compute_dtype)
    if R.dtype == result_dtype:
        return R
    return _stochastic_round(R, result_dtype) if precision == "sr" else R.to(result_dtype)
