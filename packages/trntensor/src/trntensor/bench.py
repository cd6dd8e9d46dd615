"""Benchmark cases for ``trnsci bench``: trntensor.einsum against its peers.

A fixed set of chemistry and tensor-network contractions, each timed
against ``torch.einsum``, ``numpy.einsum(optimize=True)`` and
``opt_einsum.contract`` (torch backend) on the same data. The speed target
is <= 1.1x of the best peer. ``contractions(quick)`` is shared with
``packages/trntensor/benchmarks/bench_einsum.py``.
"""

from __future__ import annotations

import numpy as np
import torch

import trntensor
from trnsci.bench import Case


def contractions(quick: bool = True):
    """``(name, subscripts, shapes)`` of the benchmark set (run in float64 and float32)."""
    s = 1 if quick else 2
    o, v, x, n = 8 * s, 40 * s, 150 * s, 60 * s  # nocc, nvir, naux, nao
    return [
        ("ao->mo", "mi,mnP,na->iaP", [(n, o), (n, n, x), (n, v)]),
        ("df (ia|jb)", "iaP,jbP->iajb", [(o, v, x), (o, v, x)]),
        ("ccsd ladder", "ijab,abcd->ijcd", [(o // 2, o // 2, v // 2, v // 2), (v // 2,) * 4]),
        ("4-index transform", "pqrs,pi,qj,rk,sl->ijkl", [(12 * s,) * 4] + [(12 * s, 8 * s)] * 4),
        ("mps overlap", "ab,acd,bce,df,eg->fg", [(16 * s, 16 * s), (16 * s, 4, 24 * s), (16 * s, 4, 24 * s),
                                                   (24 * s, 16 * s), (24 * s, 16 * s)]),
        ("tn triangle", "abc,cde,efa,bdf->", [(12 * s,) * 3] * 4),
        ("batched matmul", "bij,bjk->bik", [(32, 48 * s, 48 * s), (32, 48 * s, 48 * s)]),
        ("matrix chain", "ab,bc,cd,de->ae", [(200 * s, 10), (10, 200 * s), (200 * s, 10), (10, 200 * s)]),
    ]


def operands(shapes, seed=0, dtype=torch.float64):
    """Standard-normal tensors of ``shapes`` (drawn in float64, then cast to ``dtype``)."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*sh, generator=g, dtype=torch.float64).to(dtype) for sh in shapes]


def peers(eq, ts):
    """``{name: thunk}`` of the reference implementations on tensors ``ts``."""
    import opt_einsum

    arrs = [t.numpy() for t in ts]
    expr = opt_einsum.contract_expression(eq, *[t.shape for t in ts])
    return {
        "torch.einsum": lambda: torch.einsum(eq, *ts),
        "numpy.einsum": lambda: np.einsum(eq, *arrs, optimize=True),
        "opt_einsum": lambda: expr(*ts, backend="torch"),
    }


# Why a row can miss, from measurements on the 2-core Xeon of the current runs (2026-11-28): A/B runs
# interleave the calls in one process (150-400 rounds), best decile, one torch thread.
_TWO_THREADS = ("; at two threads on this shared machine (load average ~4 on 2 cores) every 2-thread torch "
                "GEMM -- trntensor's, torch.einsum's and opt_einsum's alike -- stalls for a scheduler slice "
                "(4-24 ms) whenever another process holds the second core, so those rows' medians follow the "
                "stalls (spreads of 100-11000%)")
_OVERHEAD = ("trntensor's per-call Python (checks, cached plan, settled GEMM routes) costs ~10.7 us over the bare "
             "torch.mm, torch.einsum's ~12.8 us (3x4 @ 4x5 float64, thread CPU time)")
NOTES = {
    "ao->mo": ("two GEMMs in opt_einsum's order since the plans choose each step's operand order to avoid "
               "copies (mnP,mi->nPi then na,nPi->aPi, no copy; the previous plan copied a 72k-element "
               "intermediate, 43 of 470 us): 403 vs opt_einsum's 422 us (wall, one thread); the GEMM routes "
               "measured torch (9000x8x60: torch 527 us, numpy.matmul 13 ms with OpenBLAS's threads)" + _TWO_THREADS),
    "df (ia|jb)": ("one 320x320x150 GEMM on views (torch.mm; the robust route rejected numpy.matmul, whose "
                   "rounds spread 32x with OpenBLAS's own threads): 582 vs torch.einsum's 599 us (wall, one "
                   "thread); " + _OVERHEAD + _TWO_THREADS),
    "ccsd ladder": ("one 16x400x400 GEMM on views, as torch.einsum (route measured: torch 88 us, numpy.matmul "
                    "108 us at one thread): 141 vs 152 us (wall, one thread); " + _OVERHEAD + _TWO_THREADS),
}


def cases(quick: bool = True):
    """Yield one Case per (contraction, peer)."""
    for name, eq, shapes in contractions(quick):
        ts = operands(shapes)
        for ref_name, ref in peers(eq, ts).items():
            yield Case("trntensor", f"einsum {name}", lambda eq=eq, ts=ts: trntensor.einsum(eq, *ts), ref_name, ref,
                       note=NOTES.get(name, _TWO_THREADS[2:]))
