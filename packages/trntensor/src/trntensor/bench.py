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
from trnsci.bench import Case, why


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


_TWO_THREADS = why("trntensor-two-threads", "At 2 threads every torch GEMM, trntensor's and the peers' alike, "
                   "stalls while another process holds the second core")
_GEMM = why("trntensor-gemm", "GEMMs on views in opt_einsum's order on the measured GEMM route; at 2 threads OpenMP "
            "stalls on the shared machine decide the medians")
NOTES = {"ao->mo": _GEMM, "df (ia|jb)": _GEMM, "ccsd ladder": _GEMM}


def cases(quick: bool = True):
    """Yield one Case per (contraction, peer)."""
    for name, eq, shapes in contractions(quick):
        ts = operands(shapes)
        for ref_name, ref in peers(eq, ts).items():
            yield Case("trntensor", f"einsum {name}", lambda eq=eq, ts=ts: trntensor.einsum(eq, *ts), ref_name, ref,
                       note=NOTES.get(name, _TWO_THREADS))
