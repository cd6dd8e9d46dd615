"""NKI lowering of :mod:`trnsparse.screening`'s screened SpMM, and the Schwarz ranks its kernel reads.

Host-side work: A is passed transposed ([n, n], one pass), the Schwarz
factors |d| as float32 (:func:`schwarz_ranks`).
"""

from __future__ import annotations

import torch

from trnsci import nki
from trnsparse._nki.ops import F32, KERNEL_DTYPES, _grad
from trnsparse.kernels.screened_spmm import screened_spmm_counts, screened_spmm_kernel
from trnsparse.screening import SCREENED_SPMM


def schwarz_ranks(d, threshold):
    """``(rank, r)`` with ``|d_i| |d_j| > threshold  <=>  r_i <= rank_j`` exactly (float64 predicate).

    ``rank_j`` is the first position of ``|d_j|`` in sorted ``|d|``; ``r_i`` the
    smallest sorted position k with ``|d_i| * sorted[k] > threshold`` (n if
    none), by a vectorized binary search (the predicate is monotone in k).
    Both are integers <= n returned as float32 (exact below 2^24).
    """
    a = d.detach().double().abs()
    n = a.shape[0]
    s = torch.sort(a).values
    rank = torch.searchsorted(s, a)
    lo = torch.zeros(n, dtype=torch.long, device=a.device)
    hi = torch.full((n,), n, dtype=torch.long, device=a.device)
    while bool((lo < hi).any()):
        open_ = lo < hi
        mid = (lo + hi) // 2
        pred = a * s[mid.clamp(max=max(n - 1, 0))] > threshold
        hi = torch.where(open_ & pred, mid, hi)
        lo = torch.where(open_ & ~pred, mid + 1, lo)
    return rank.to(F32).reshape(n, 1), lo.to(F32).reshape(1, n)


def _screened_supports(A, d, B, threshold):
    if _grad(A, B):
        return "autograd: the kernel has no backward (the torch path is differentiable)"
    if A.numel() == 0 or B.numel() == 0:
        return "empty operand: nothing to compute"
    if A.shape[0] >= 1 << 24:
        return "n >= 2^24: the mask ranks would not be exact in float32"
    if not bool(torch.isfinite(d).all()):
        return "diag_integrals has non-finite values (the rank form of the mask needs an order)"
    return None


def _screened_counts(A, d, B, threshold):
    return {"kernel": "screened_spmm_kernel", **screened_spmm_counts(A.shape[0], B.shape[1])}


@SCREENED_SPMM.lowering("nki", dtypes=KERNEL_DTYPES, supports=_screened_supports, counts=_screened_counts)
def _screened_spmm_nki(A, d, B, threshold):
    rank, r = schwarz_ranks(d, threshold)
    C = nki.run(screened_spmm_kernel, A.mT.contiguous(), B.contiguous(), rank, r, out_dtype=F32)
    return C.to(B.dtype)
