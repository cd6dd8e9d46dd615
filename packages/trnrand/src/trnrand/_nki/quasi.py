"""NKI lowerings of :mod:`trnrand.quasi`: Sobol, Halton and Latin hypercube points.

* sobol: direction numbers (scrambled on the host, as on the torch path)
  go to the kernel as uint32; its ``[d, n]`` integers are transposed and
  mapped to floats exactly.
* halton: exact digits, fp32 accumulation.
* latin hypercube: exact ranks by counting comparisons, fp32 positions.
"""

from __future__ import annotations

import numpy as np
import torch

from trnsci import nki

from ..kernels.halton import halton_counts, halton_kernel, halton_levels
from ..kernels.lhs import lhs_counts, lhs_kernel
from ..kernels.sobol import sobol_counts, sobol_kernel
from ..quasi import HALTON, LATIN_HYPERCUBE, SOBOL, _sobol_floats
from .distributions import SPAN


# ---- sobol ---------------------------------------------------------------------------------------
def _sobol_supports(V, shift, skip, n, dtype):
    return "an empty point set runs no kernel" if n == 0 else None


def _sobol_counts(V, shift, skip, n, dtype):
    return {"kernel": "sobol_kernel", **sobol_counts(V.shape[0], n, skip)}


@SOBOL.lowering("nki", dtypes=(torch.float32, torch.float64), supports=_sobol_supports, counts=_sobol_counts)
def _sobol_nki(V, shift, skip, n, dtype):
    v = V.to(torch.int32).contiguous().numpy().view("uint32")  # 30-bit values: the int32 bits are the uint32
    s = shift.to(torch.int32).reshape(-1, 1).contiguous().numpy().view("uint32")
    x = nki.run(sobol_kernel, v, s, skip=skip, n=n)
    return _sobol_floats(x.to(torch.int64).T.contiguous(), dtype)


# ---- halton: exact digits, fp32 accumulation (a few ulp from the torch path's float64 sum) ------------------------
HALTON_MAX_INDEX = 1 << 24  # point indices stay exact fp32 integers


def _halton_inputs(bases, skip, n):
    """radix [d, 2] (p, fl32(1/p)) and scale [d, L] (the torch path's float64 b2r sequence, rounded) as float32."""
    lv = halton_levels(skip, n)
    b = bases.to(torch.float64).numpy()
    radix = np.stack([b, 1.0 / b], axis=1).astype(np.float32)
    scale = np.empty((b.size, lv))
    b2r = 1.0 / b
    for lev in range(lv):
        scale[:, lev] = b2r
        b2r = b2r / b
    return radix, scale.astype(np.float32)


def _halton_supports(bases, perms, skip, n, dtype):
    if perms is not None:
        return "scrambled Halton digit permutations have no kernel yet"
    if n == 0:
        return "an empty point set runs no kernel"
    if skip + n > HALTON_MAX_INDEX:
        return "skip + n_points > 2**24: point indices would not be exact fp32 integers"
    return None


def _halton_counts(bases, perms, skip, n, dtype):
    return {"kernel": "halton_kernel", **halton_counts(bases.numel(), n, skip)}


@HALTON.lowering("nki", dtypes=(torch.float32,), supports=_halton_supports, counts=_halton_counts)
def _halton_nki(bases, perms, skip, n, dtype):
    radix, scale = _halton_inputs(bases, skip, n)
    x = nki.run(halton_kernel, radix, scale, skip=skip, n=n)
    return x.T.contiguous().clamp_(max=1.0 - 2.0**-24)


# ---- latin hypercube (strength 1): exact ranks by counting comparisons, fp32 positions ---------------------------
LHS_MAX_POINTS = 4096  # the comparisons grow as n**2 d


def _lhs_supports(seed, subsequence, base, n, d, oa, dtype):
    if oa is not None:
        return "strength 2 (orthogonal-array LHS) has no kernel yet"
    if n == 0:
        return "an empty point set runs no kernel"
    if n > LHS_MAX_POINTS:
        return f"n_points {n} > {LHS_MAX_POINTS}: the kernel's rank by comparisons grows as n**2"
    if base % 4:
        return f"the draw starts at stream word {base}, inside a Philox block (the kernel gives each point one block)"
    b0 = base // 4
    if b0 // SPAN != (b0 + n * d - 1) // SPAN:
        return "the draw's blocks straddle a multiple of 2**32 blocks"
    return None


def _lhs_counts(seed, subsequence, base, n, d, oa, dtype):
    return {"kernel": "lhs_kernel", **lhs_counts(n, d)}


@LATIN_HYPERCUBE.lowering("nki", dtypes=(torch.float32,), supports=_lhs_supports, counts=_lhs_counts)
def _lhs_nki(seed, subsequence, base, n, d, oa, dtype):
    x = nki.run(lhs_kernel, seed=seed, subsequence=subsequence, block0=base // 4, n=n, d=d)
    return x.clamp_(max=1.0 - 2.0**-24)
