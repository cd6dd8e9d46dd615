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
from trnsci.bench import Case

# Measured here (thread CPU time, best of 9 interleaved rounds, 1 thread, 64^3 float64, load ~4): torch.mm
# 7.0-7.5 us, SciPy dgemm 6.8-8.2 us, trnblas.gemm 9.2-9.4 us, whose settled route calls torch.mm directly.
_GEMM64_F64_NOTE = (
    "per-call overhead, not the product: torch.mm (MKL) takes 7.0-7.5 us and SciPy's dgemm 6.8-8.2 us "
    "(1 thread, thread CPU time, best of 9 rounds), trnblas.gemm 9.2-9.4 us -- its settled route calls "
    "torch.mm directly, so the ~2 us are the settled public wrapper (key checks and table lookup, "
    "trnsci.settled); NumPy's matmul / SciPy's dgemm as a route cost 8.4-10 us here (~2 us of tensor<->array "
    "conversion), so the measured route keeps torch.mm. At 2 threads MKL splits even this GEMM over both "
    "threads: torch.mm took 8.4 us in the route's timing but 45-160 us (min/median of 9 rounds) while another "
    "process held the second core, where the single-threaded dgemm took 7-20 us and NumPy's matmul route "
    "9.5-10.4 us; which of torch and NumPy wins then depends on the load at the moment of measuring"
)


# What a float64 row measured against SciPy's threaded OpenBLAS suffers at 2 threads (OMP_NUM_THREADS=2,
# torch.set_num_threads(2), 256^3 float64, median of 15 rounds of 10, load ~4 from other processes).
_OPENBLAS_SPIN = (
    "at 2 threads the peer's own OpenBLAS workers keep spinning after each SciPy call and take the cores "
    "from the next torch call (torch.mm 256^3 float64: 196 us after a torch.mm, 10-17 ms after a threaded "
    "np.matmul, measured in one process): the trnsci side is slowed by the peer it alternates with, so "
    "trnblas keeps OpenBLAS for problems it runs single-threaded (m n k < 2^19) beside torch's threads"
)
_GEMM_F64_NOTE = (
    "at 1 thread the measured host route (trnblas._host) runs the fastest of torch.mm, NumPy's matmul and "
    "SciPy's dgemm for the class (torch.mm here: 478-530 us vs 577-638 us, thread CPU time); " + _OPENBLAS_SPIN
)
_SYRK_F64_NOTE = (
    "at 1 thread the measured host route runs SciPy's dsyrk itself, on the zero-copy transposed view "
    "(304-334 us vs the peer's 335-350 us, thread CPU time), plus ~8 us of checks and array conversion; "
    + _OPENBLAS_SPIN
)


def _gemm_cases(sizes):
    for n in sizes:
        for dtype, ref_name, ref in ((torch.float32, "torch.mm", None), (torch.float64, "scipy dgemm", sblas.dgemm)):
            g = torch.Generator().manual_seed(n)
            A = torch.randn(n, n, generator=g, dtype=dtype)
            B = torch.randn(n, n, generator=g, dtype=dtype)
            if ref is None:
                yield Case("trnblas", f"gemm {n}^3 float32", lambda A=A, B=B: trnblas.gemm(1.0, A, B),
                           ref_name, lambda A=A, B=B: torch.mm(A, B))
            else:
                An, Bn = np.asfortranarray(A.numpy()), np.asfortranarray(B.numpy())
                yield Case("trnblas", f"gemm {n}^3 float64", lambda A=A, B=B: trnblas.gemm(1.0, A, B),
                           ref_name, lambda An=An, Bn=Bn, ref=ref: ref(1.0, An, Bn),
                           note=_GEMM64_F64_NOTE if n == 64 else _GEMM_F64_NOTE)


def _small_cases(n: int = 64):
    """Level 1/2 calls small enough that the ratio is trnblas's per-call overhead."""
    g = torch.Generator().manual_seed(n)
    A = torch.randn(n, n, generator=g)
    x, y = torch.randn(n, generator=g), torch.randn(n, generator=g)
    yield Case("trnblas", f"gemv {n} float32", lambda: trnblas.gemv(1.0, A, x), "torch.mv", lambda: torch.mv(A, x))
    yield Case("trnblas", f"axpy {n} float32", lambda: trnblas.axpy(2.0, x, y),
               "torch.add", lambda: torch.add(y, x, alpha=2.0))
    yield Case("trnblas", f"dot {n} float32", lambda: trnblas.dot(x, y), "torch.dot", lambda: torch.dot(x, y))
    yield Case("trnblas", f"nrm2 {n} float32", lambda: trnblas.nrm2(x), "torch vector_norm",
               lambda: torch.linalg.vector_norm(x))
    yield Case("trnblas", f"ger {n} float32", lambda: trnblas.ger(1.0, x, y, A), "torch.addr",
               lambda: torch.addr(A, x, y))


def _level3_extra_cases(n: int):
    """The level-3 routines that gained kernels with the level-1/2 ones (torch path here, no NeuronCore)."""
    g = torch.Generator().manual_seed(n + 1)
    A, B = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)
    x = torch.randn(n, generator=g)
    yield Case("trnblas", f"syr2k {n} float32", lambda: trnblas.syr2k(1.0, A, B), "torch.mm x2",
               lambda: (lambda P: P + P.T)(torch.mm(A, B.T)).triu())
    yield Case("trnblas", f"geam {n} float32", lambda: trnblas.geam(2.0, A, 3.0, B), "torch.add",
               lambda: torch.add(A * 2.0, B, alpha=3.0))
    yield Case("trnblas", f"dgmm {n} float32", lambda: trnblas.dgmm(A, x), "torch broadcast",
               lambda: A * x[:, None],
               note="per-call overhead: the lowering (A * x.unsqueeze(1)) takes 7.4-8.0 us and the bare "
                    "broadcast 7.7-8.3 us, trnblas.dgmm 8.6-9.2 us (1 thread, thread CPU time, best of 9 rounds, "
                    "load ~4) -- the ~1 us is the settled public wrapper (key checks, table lookup, the lowering "
                    "frame; trnsci.settled)")


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
               "scipy dsyrk", lambda: sblas.dsyrk(1.0, An), note=_SYRK_F64_NOTE)
    T = torch.eye(n, dtype=torch.float64) * n + torch.randn(n, n, generator=g, dtype=torch.float64).triu()
    Tn = np.asfortranarray(T.numpy())
    yield Case("trnblas", f"trsm {n} float64", lambda: trnblas.trsm(1.0, T, A),
               "scipy dtrsm", lambda: sblas.dtrsm(1.0, Tn, An))
    b = 64 if quick else 256
    X = torch.randn(b, 64, 64, generator=g)
    Y = torch.randn(b, 64, 64, generator=g)
    yield Case("trnblas", f"batched_gemm {b}x64^3 float32", lambda: trnblas.batched_gemm(1.0, X, Y),
               "torch.bmm", lambda: torch.bmm(X, Y))
    nocc, nvir, naux = (10, 60, 200) if quick else (24, 200, 600)
    Bq = torch.randn(nocc, nvir, naux, generator=g, dtype=torch.float64) * 0.1
    eo = -1.0 - torch.rand(nocc, generator=g, dtype=torch.float64)
    ev = 0.5 + torch.rand(nvir, generator=g, dtype=torch.float64)

    def einsum_mp2():
        ovov = torch.einsum("iaP,jbP->iajb", Bq, Bq)
        d = eo[:, None, None, None] - ev[None, :, None, None] + eo[None, None, :, None] - ev[None, None, None, :]
        return (ovov * (2 * ovov - ovov.transpose(1, 3)) / d).sum()

    yield Case("trnblas", f"mp2_energy {nocc}/{nvir}/{naux} float64", lambda: trnblas.mp2_energy(Bq, eo, ev),
               "torch.einsum", einsum_mp2)
