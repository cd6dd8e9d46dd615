"""NKI lowering of :mod:`trnrand.philox`'s block function: the explicit counters and keys go to
``philox_block_kernel`` as uint32 rows, the words come back as uint32.
"""

from __future__ import annotations

import numpy as np
import torch

from trnsci import nki

from ..kernels.philox_block import philox_block_counts, philox_block_kernel
from ..philox import PHILOX4X32


# ---- philox4x32: the block function on explicit counters and keys -------------------------------
def _philox_block_supports(c, k, r):
    return "no counters: an empty call runs no kernel" if c.numel() == 0 else None


def _philox_block_counts(c, k, r):
    return {"kernel": "philox_block_kernel", **philox_block_counts(c.numel() // 4, r)}


@PHILOX4X32.lowering("nki", dtypes=(torch.int64,), supports=_philox_block_supports, counts=_philox_block_counts)
def _philox4x32_nki(c, k, r):
    lead = tuple(c.shape[:-1])
    cw = c.reshape(-1, 4).cpu().numpy().astype(np.uint32)  # values 0 .. 2**32-1 (checked by philox4x32)
    kw = k.reshape(-1, 2).cpu().numpy().astype(np.uint32)
    out = nki.run(philox_block_kernel, cw, kw, rounds=r)
    return out.to(torch.int64).reshape(*lead, 4).to(c.device)
