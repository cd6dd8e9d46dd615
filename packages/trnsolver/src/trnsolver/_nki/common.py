"""What trnsolver's NKI lowerings share: the kernels' dtype, trnblas on trnsolver's backend, the finiteness
check, and the tally that sums a composition's launches into one plan entry.
"""

from __future__ import annotations

import torch

from trnsci.backend import get_backend, use_backend

F32 = torch.float32
KERNEL_DTYPES = (torch.float32,)
#: Off-norm target below which fp32 sweeps cannot usefully go (relative to ||A||_F).
FP32_TOL = 1e-6
_KEYS = ("hbm_read_bytes", "hbm_write_bytes", "tensor", "vector")


def _trnblas():
    """Run trnblas on trnsolver's backend for the duration of a lowering."""
    return use_backend(get_backend("trnsolver"), "trnblas")


def not_finite(A) -> str | None:
    """Why a kernel path cannot take ``A`` holding NaN/Inf (reached with ``check_finite=False``
    or from ``det``/``slogdet``): pivot searches, norms and ``rsqrt`` need finite values, and
    the torch path propagates NaN as LAPACK does."""
    # a host tensor is scanned; on a device that would be a host read per call: the pivots report NaN there
    if A.is_cpu and A.is_floating_point() and not bool(torch.isfinite(A).all()):
        return "A holds NaN/Inf: the kernels' pivot searches and norms need finite values"
    return None


class _Tally:
    """The launches of a composition in order, and their closed forms summed, as a plan's
    kernel entry: ``{"kernel": summary, "kernels": [name, ...], <summed figures>}``."""

    def __init__(self):
        self.sum = dict.fromkeys(_KEYS, 0)
        self.order: list[str] = []

    def add(self, figures: dict, times: int = 1):
        self.order += [figures.get("kernel")] * times
        for k in _KEYS:
            self.sum[k] += times * figures.get(k, 0)

    def result(self, times: int = 1):
        order = self.order * times
        counts: dict[str, int] = {}
        for name in order:
            counts[name] = counts.get(name, 0) + 1
        summary = ", ".join(f"{k} x{v}" for k, v in counts.items())
        return {"kernel": summary, "kernels": order, **{k: times * v for k, v in self.sum.items()}}


def _batch(*Ts) -> int:
    shape = torch.broadcast_shapes(*(T.shape[:-2] for T in Ts))
    out = 1
    for s in shape:
        out *= s
    return out
