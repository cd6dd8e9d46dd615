"""Benchmark cases for ``trnsci bench``: trnblas against torch and SciPy's BLAS.

Each case times a trnblas call and the reference it replaces on the same
inputs (see :mod:`trnsci.bench`). The backend is whatever the current
settings select -- on a machine without a NeuronCore that is the torch
path, so the ratios show trnblas's own overhead.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg.blas as sblas
import torch

import trnblas
from trnsci.bench import Case, why

_SMALL = why("trnblas-small-calls", "Per-call overhead, not the work: the public layer's fixed 1-3 us over the bare "
               "torch call weighs most on the smallest calls")
_GEMM256_F32 = why("trnblas-gemm-256-float32", "The host route stored in this machine's calibration (NumPy's matmul) "
                   "waited at OpenBLAS's thread barrier on the loaded machine; the stored choice stands until "
                   "re-measured")
_GEMM256_F64 = why("trnblas-gemm-256-float64", "Both sides run a dgemm of the same cost: the ratio swings with the "
                   "peer's rounds at 1 thread and with the load at 2 threads")
_OPENBLAS_SPIN = why("trnblas-openblas-spin", "At 2 threads torch's calls wait for a core held by the peer's spinning "
                     "OpenBLAS workers or by other processes: the ratio is the load of its moment")
_TORCH_BOTH = why("trnblas-torch-both-sides", "Both sides are the same torch calls; rounds that waited at an OpenMP "
                  "barrier for a core decide the ratio")
_MP2 = why("trnblas-mp2-energy", "At 2 threads both sides' torch calls wait at OpenMP barriers while other processes "
           "hold the second vCPU: the ratio is the load of its moment")


def _gemm_cases(sizes):
    for n in sizes:
        for dtype, ref_name, ref in ((torch.float32, "torch.mm", None), (torch.float64, "scipy dgemm", sblas.dgemm)):
            g = torch.Generator().manual_seed(n)
            A = torch.randn(n, n, generator=g, dtype=dtype)
            B = torch.randn(n, n, generator=g, dtype=dtype)
            if ref is None:
                yield Case("trnblas", f"gemm {n}^3 float32", lambda A=A, B=B: trnblas.gemm(1.0, A, B),
                           ref_name, lambda A=A, B=B: torch.mm(A, B),
                           note=_SMALL if n == 64 else _GEMM256_F32 if n == 256 else "")
            else:
                An, Bn = np.asfortranarray(A.numpy()), np.asfortranarray(B.numpy())
                yield Case("trnblas", f"gemm {n}^3 float64", lambda A=A, B=B: trnblas.gemm(1.0, A, B),
                           ref_name, lambda An=An, Bn=Bn, ref=ref: ref(1.0, An, Bn),
                           note=_SMALL if n == 64 else _GEMM256_F64)


def _small_cases(n: int = 64):
    """Level 1/2 calls small enough that the ratio is trnblas's per-call overhead."""
    g = torch.Generator().manual_seed(n)
    A = torch.randn(n, n, generator=g)
    x, y = torch.randn(n, generator=g), torch.randn(n, generator=g)
    yield Case("trnblas", f"gemv {n} float32", lambda: trnblas.gemv(1.0, A, x), "torch.mv", lambda: torch.mv(A, x),
               note=_SMALL)
    yield Case("trnblas", f"axpy {n} float32", lambda: trnblas.axpy(2.0, x, y),
               "torch.add", lambda: torch.add(y, x, alpha=2.0),
               note=_SMALL)
    yield Case("trnblas", f"dot {n} float32", lambda: trnblas.dot(x, y), "torch.dot", lambda: torch.dot(x, y),
               note=_SMALL)
    yield Case("trnblas", f"nrm2 {n} float32", lambda: trnblas.nrm2(x), "torch vector_norm",
               lambda: torch.linalg.vector_norm(x),
               note=_SMALL)
    yield Case("trnblas", f"ger {n} float32", lambda: trnblas.ger(1.0, x, y, A), "torch.addr",
               lambda: torch.addr(A, x, y),
               note=_SMALL)


def _level3_extra_cases(n: int):
    """The level-3 routines that gained kernels with the level-1/2 ones (torch path here, no NeuronCore)."""
    g = torch.Generator().manual_seed(n + 1)
    A, B = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)
    x = torch.randn(n, generator=g)
    yield Case("trnblas", f"syr2k {n} float32", lambda: trnblas.syr2k(1.0, A, B), "torch.mm x2",
               lambda: (lambda P: P + P.T)(torch.mm(A, B.T)).triu(),
               note=_TORCH_BOTH)
    yield Case("trnblas", f"geam {n} float32", lambda: trnblas.geam(2.0, A, 3.0, B), "torch.add",
               lambda: torch.add(A * 2.0, B, alpha=3.0),
               note=_TORCH_BOTH)
    yield Case("trnblas", f"dgmm {n} float32", lambda: trnblas.dgmm(A, x), "torch broadcast",
               lambda: A * x[:, None],
               note=_SMALL)


def cases(quick: bool = True):
    """Yield the comparison cases (smaller sizes when ``quick``)."""
    sizes = (64, 256) if quick else (64, 256, 1024, 2048)
    yield from _gemm_cases(sizes)
    yield from _small_cases()
    yield from _level3_extra_cases(256 if quick else 1024)
    n = 256 if quick else 1024
    g = torch.Generator().manual_seed(7)
    A = torch.randn(n, n, generator=g, dtype=torch.float64)
    An = np.asfortranarray(A.numpy())
    yield Case("trnblas", f"syrk {n} float64", lambda: trnblas.syrk(1.0, A, fill="triangle"),  # as dsyrk
               "scipy dsyrk", lambda: sblas.dsyrk(1.0, An), note=_OPENBLAS_SPIN)
    T = torch.eye(n, dtype=torch.float64) * n + torch.randn(n, n, generator=g, dtype=torch.float64).triu()
    Tn = np.asfortranarray(T.numpy())
    yield Case("trnblas", f"trsm {n} float64", lambda: trnblas.trsm(1.0, T, A),
               "scipy dtrsm", lambda: sblas.dtrsm(1.0, Tn, An), note=_OPENBLAS_SPIN)
    b = 64 if quick else 256
    X = torch.randn(b, 64, 64, generator=g)
    Y = torch.randn(b, 64, 64, generator=g)
    yield Case("trnblas", f"batched_gemm {b}x64^3 float32", lambda: trnblas.batched_gemm(1.0, X, Y),
               "torch.bmm", lambda: torch.bmm(X, Y),
               note=_TORCH_BOTH)
    nocc, nvir, naux = (10, 60, 200) if quick else (24, 200, 600)
    Bq = torch.randn(nocc, nvir, naux, generator=g, dtype=torch.float64) * 0.1
    eo = -1.0 - torch.rand(nocc, generator=g, dtype=torch.float64)
    ev = 0.5 + torch.rand(nvir, generator=g, dtype=torch.float64)

    def einsum_mp2():
        ovov = torch.einsum("iaP,jbP->iajb", Bq, Bq)
        d = eo[:, None, None, None] - ev[None, :, None, None] + eo[None, None, :, None] - ev[None, None, None, :]
        return (ovov * (2 * ovov - ovov.transpose(1, 3)) / d).sum()

    yield Case("trnblas", f"mp2_energy {nocc}/{nvir}/{naux} float64", lambda: trnblas.mp2_energy(Bq, eo, ev),
               "torch.einsum", einsum_mp2, note=_MP2)
