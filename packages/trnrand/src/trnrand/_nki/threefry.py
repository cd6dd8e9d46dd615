"""NKI lowerings of :mod:`trnrand.threefry`: the block function through ``threefry_block_kernel``, and the
Threefry stream draws (``threefry_stream_uniform``/``_normal``), one ``threefry_kernel`` call per 2**32-block
span of the request's blocks.
"""

from __future__ import annotations

import numpy as np
import torch

from trnsci import nki

from ..kernels.threefry import threefry_counts, threefry_kernel
from ..kernels.threefry_block import threefry_block_counts, threefry_block_kernel
from ..threefry import THREEFRY4X32, THREEFRY_NORMAL, THREEFRY_UNIFORM
from .distributions import SPAN


# ---- Threefry4x32: the stream (uniform, normal) and the block function ------------------------------------
# The draw's blocks counter_offset .. + ceil(n / 4) - 1 run as one threefry_kernel call per 2**32-block span
# (the counter's word 1 is a constant of a call); the host drops the < 4 samples after the request.
def _threefry_spans(off, n):
    nb = (n + 3) // 4
    out, b = [], off
    while b < off + nb:
        m = min(off + nb - b, SPAN - b % SPAN)
        out.append((b, m))
        b += m
    return out


def _threefry_supports(seed, sub, off, n, dev):
    return "an empty draw runs no kernel" if n == 0 else None


def _threefry_counts(mode):
    def counts(seed, sub, off, n, dev):
        spans = _threefry_spans(off, n)
        if len(spans) != 1:
            return None  # several kernel calls
        return {"kernel": "threefry_kernel", **threefry_counts(spans[0][1], mode)}

    return counts


def _threefry_stream(mode, seed, sub, off, n, dev):
    parts = [nki.run(threefry_kernel, seed=seed, subsequence=sub, block0=b, nblocks=m, mode=mode)
             for b, m in _threefry_spans(off, n)]
    y = parts[0] if len(parts) == 1 else torch.cat(parts)
    return y.reshape(-1)[:n].to(dev)


@THREEFRY_UNIFORM.lowering("nki", dtypes=(torch.float32,), supports=_threefry_supports,
                           counts=_threefry_counts("uniform"))
def _threefry_uniform_nki(seed, sub, off, n, dev):
    return _threefry_stream("uniform", seed, sub, off, n, dev)


@THREEFRY_NORMAL.lowering("nki", dtypes=(torch.float32,), supports=_threefry_supports,
                          counts=_threefry_counts("normal"))
def _threefry_normal_nki(seed, sub, off, n, dev):
    return _threefry_stream("normal", seed, sub, off, n, dev)


def _threefry_block_supports(c, k, r):
    return "no counters: an empty call runs no kernel" if c.numel() == 0 else None


def _threefry_block_counts(c, k, r):
    return {"kernel": "threefry_block_kernel", **threefry_block_counts(c.numel() // 4, r)}


@THREEFRY4X32.lowering("nki", dtypes=(torch.int64,), supports=_threefry_block_supports,
                       counts=_threefry_block_counts)
def _threefry4x32_nki(c, k, r):
    lead = tuple(c.shape[:-1])
    cw = c.reshape(-1, 4).cpu().numpy().astype(np.uint32)  # values 0 .. 2**32-1 (checked by threefry4x32)
    kw = k.reshape(-1, 4).cpu().numpy().astype(np.uint32)
    out = nki.run(threefry_block_kernel, cw, kw, rounds=r)
    return out.to(torch.int64).reshape(*lead, 4).to(c.device)
