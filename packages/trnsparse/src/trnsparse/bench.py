"""Benchmark cases for ``trnsci bench --lib trnsparse``: trnsparse against scipy.sparse and torch.

Each case times a trnsparse call and the reference it stands in for on the
same matrix (see :mod:`trnsci.bench`): SciPy with its own int32-indexed
``csr_array`` for CSR SpMV/SpMM/SpGEMM/sparse add and dense-to-sparse conversion,
torch's CSR kernels for the same products, dense ``torch.mm`` for BSR
SpMM, and dense masked SDPA for block-sparse attention.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

import trnsparse
from trnsci.bench import Case, why

from ._benchdata import attention_case, bsr_case, csr_pair, dense_attention

_CSR = why("trnsparse-csr", "trnsparse runs torch's CSR product (the measured route) plus about 1 us of checks; at "
           "2 threads OpenMP barrier waits make single runs range widely")
NOTES = {
    "spmv": _CSR,
    "spmm": _CSR,
    "spgemm": why("trnsparse-spgemm", "Both sides run SciPy's csr_matmat; the spread between rounds is load, not work"),
    "bsr_spmm": why("trnsparse-bsr", "Either measured route is several multi-threaded calls per product against the "
                    "dense torch.mm's one; at 2 threads OpenMP barrier waits make single runs range widely"),
}


def _note(name: str, measured: bool) -> str:
    """The note of a row, for the sizes it was measured at (the quick grid)."""
    return NOTES.get(name.split(" ")[0], "") if measured else ""


def cases(quick: bool = True):
    """Yield the comparison cases (smaller sizes when ``quick``)."""
    grid = ((4096, 0.01),) if quick else ((4096, 0.05), (16384, 0.01), (65536, 0.001))
    for n, d in grid:
        measured = (n, d) == (4096, 0.01)
        A, S, T = csr_pair(n, d)
        x = torch.rand(n, dtype=torch.float64)
        X = torch.rand(n, 32, dtype=torch.float64)
        xn, Xn = x.numpy(), X.numpy()
        tag = f"n={n} {d:.1%}"
        yield Case("trnsparse", f"spmv {tag}", lambda A=A, x=x: trnsparse.spmv(A, x), "scipy csr",
                   lambda S=S, xn=xn: S @ xn, note=_note("spmv", measured))
        yield Case("trnsparse", f"spmv {tag}", lambda A=A, x=x: trnsparse.spmv(A, x), "torch csr",
                   lambda T=T, x=x: T @ x)
        yield Case("trnsparse", f"spmm {tag} k=32", lambda A=A, X=X: trnsparse.spmm(A, X), "scipy csr",
                   lambda S=S, Xn=Xn: S @ Xn, note=_note("spmm", measured))
        yield Case("trnsparse", f"spmm {tag} k=32", lambda A=A, X=X: trnsparse.spmm(A, X), "torch csr",
                   lambda T=T, X=X: T @ X)
        if n <= 16384:
            B, SB, _ = csr_pair(n, d / 4, seed=1)
            yield Case("trnsparse", f"spgemm {tag} x {d / 4:.2%}", lambda A=A, B=B: trnsparse.spgemm(A, B),
                       "scipy csr", lambda S=S, SB=SB: S @ SB, note=_note("spgemm", measured))
            yield Case("trnsparse", f"sparse_add {tag} + {d / 4:.2%}",
                       lambda A=A, B=B: trnsparse.sparse_add(A, B, 2.0, -1.0), "scipy csr",
                       lambda S=S, SB=SB: 2.0 * S - SB)
    m = 2048 if quick else 4096
    g = torch.Generator().manual_seed(0)
    D = torch.rand(m, m, generator=g, dtype=torch.float64)
    D = D * (torch.rand(m, m, generator=g, dtype=torch.float64) < 0.01)
    Dn = D.numpy()
    yield Case("trnsparse", f"from_dense {m}^2 1%", lambda: trnsparse.from_dense(D), "scipy csr_array",
               lambda: sp.csr_array(Dn))
    nb = 1024 if quick else 2048
    for bd in (0.1, 0.5):
        Bm, Bd = bsr_case(nb, bd)
        R = torch.randn(nb, 256, generator=g)
        yield Case("trnsparse", f"bsr_spmm {nb} blocks {Bm.block_density:.0%} k=256",
                   lambda Bm=Bm, R=R: trnsparse.bsr_spmm(Bm, R), "dense torch.mm", lambda Bd=Bd, R=R: Bd @ R,
                   note=_note("bsr_spmm", nb == 1024))
    seq = 1024 if quick else 4096
    for w in (1, 2):
        Q, K, V, M, dm = attention_case(seq, w)
        yield Case("trnsparse", f"attention seq={seq} window={w}",
                   lambda Q=Q, K=K, V=V, M=M: trnsparse.block_sparse_attention(Q, K, V, M),
                   "dense SDPA+mask", lambda Q=Q, K=K, V=V, dm=dm: dense_attention(Q, K, V, dm))
    _ = np  # numpy is part of the references above
