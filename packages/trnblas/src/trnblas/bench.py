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

# Measured here (thread CPU time, 1 thread, best of 31 shuffled rounds of 500 calls in one process, load ~4,
# the other vCPU busy): torch.mm 64^3 float64 12.2 us, SciPy dgemm 11.2 us, trnblas.gemm 15.1 us; float32
# torch.mm 8.3 us, trnblas.gemm 11.0 us. The route's own calibration at 1 thread: torch 8.4, NumPy 11.0,
# SciPy 11.8 us (the host routes pay ~2-3 us of tensor <-> array conversion).
_GEMM64_F64_NOTE = (
    "per-call overhead, not the product: SciPy's dgemm 11.2 us, torch.mm (MKL) 12.2 us (1.09x of it), "
    "trnblas.gemm 15.1 us (thread CPU time, 1 thread, best of 31 rounds, load ~4) -- its settled route calls "
    "torch.mm, so the rest is the settled wrapper (two tensor keys, four sentinel tests, the backend test, the "
    "route frame: trnsci.settled); the measured host route keeps torch.mm because NumPy's matmul / SciPy's "
    "dgemm as a route took 11.0 / 11.8 us against torch's 8.4 us in its own timing (~2-3 us of tensor <-> "
    "array conversion). At 2 threads every torch call here may wait at an OpenMP barrier while another "
    "process holds the second vCPU"
)
_GEMM64_F32_NOTE = (
    "per-call overhead, not the product: torch.mm 8.3 us, trnblas.gemm 11.0 us (1.32x; thread CPU time, 1 "
    "thread, best of 31 rounds, load ~4); the settled route calls torch.mm, the rest is the settled wrapper "
    "(see gemm 64^3 float64)"
)


# What a float64 row measured against SciPy's threaded OpenBLAS suffers at 2 threads (torch at 2 threads,
# 256 float64, wall-clock medians of 30 alternations trnsci / peer in one process, load ~4).
_OPENBLAS_SPIN = (
    "at 2 threads: right after a threaded SciPy call the peer's OpenBLAS workers keep spinning and take the "
    "cores from the next torch call (trnblas.syrk 256 float64: 405-433 us alone, 32 ms after each threaded "
    "dsyrk, 645-666 us beside a dsyrk held at one thread by trnsci.hostblas; medians of 30, wall clock, load "
    "~4) -- the bench now pauses past that spin; what remains are torch's own 2-thread calls waiting at an "
    "OpenMP barrier while another process holds the second vCPU: with no peer at all gemm 256^3 float64 "
    "took 8.0 ms and syrk 16 ms in other runs at that load (4 ms scheduler steps), so a 2-thread row's "
    "ratio is the load of its moment. trnblas's own OpenBLAS routes run through trnsci.hostblas"
)
_GEMM_F64_NOTE = (
    "at 1 thread the measured host route (trnblas._host) keeps torch.mm for the class: trnblas.gemm 541 us "
    "(median 701), torch.mm 530 (687), the peer's dgemm 475 (1132), and dgemm with OpenBLAS held at one "
    "thread 585 (853) -- best (median) of 15 shuffled rounds after 0.12 s pauses, load ~1.5; the row's ratio "
    "swings with the peer's rounds; " + _OPENBLAS_SPIN
)
_SYRK_F64_NOTE = (
    "at 1 thread the measured host route runs SciPy's dsyrk itself, on the zero-copy transposed view "
    "(304-334 us vs the peer's 335-350 us, thread CPU time), plus ~8 us of checks and array conversion; "
    + _OPENBLAS_SPIN
)
_TRSM_NOTE = (
    "1 thread: within target. 2 threads (wall-clock medians of 30 alternations in one process, load 3.3-4.3): "
    "trnblas.trsm 256 float64 (torch's triangular solve) took 337-401 us alone, 10-14 ms right after each "
    "threaded SciPy dtrsm (the peer's OpenBLAS workers spin after a call; the peer itself took 9-12 ms), and "
    "beside a dtrsm held at one thread (trnsci.hostblas) 0.63 ms in one run, 14 ms in the next: the 2-thread "
    "torch call waits at its OpenMP barrier whenever the second vCPU is taken, by the peer's spinning "
    "workers or by other processes"
)
_GEMM256_F32_NOTE = (
    "1 thread: the measured host route of this class in this machine's calibration file is NumPy's matmul "
    "(267 us against torch.mm's 399 us when it was timed), and with torch at one thread trnsci.hostblas "
    "leaves OpenBLAS at its own 2 threads; since then each such product waited at OpenBLAS's barrier for a "
    "core: 22-24 ms per call in the row at load ~4; at load ~1.7 np.matmul alone took 12-16 ms per call in "
    "three sets of 20 (0.38-0.41 ms in a fourth) while torch.mm took 0.26-0.56 ms (one process, 1 torch "
    "thread). Choices are now robust whenever a candidate may thread (trnblas._host._robust); the stored "
    "choice stands until re-measured"
)
def _gemm_cases(sizes):
    for n in sizes:
        for dtype, ref_name, ref in ((torch.float32, "torch.mm", None), (torch.float64, "scipy dgemm", sblas.dgemm)):
            g = torch.Generator().manual_seed(n)
            A = torch.randn(n, n, generator=g, dtype=dtype)
            B = torch.randn(n, n, generator=g, dtype=dtype)
            if ref is None:
                yield Case("trnblas", f"gemm {n}^3 float32", lambda A=A, B=B: trnblas.gemm(1.0, A, B),
                           ref_name, lambda A=A, B=B: torch.mm(A, B),
                           note=_GEMM64_F32_NOTE if n == 64 else _GEMM256_F32_NOTE if n == 256 else "")
            else:
                An, Bn = np.asfortranarray(A.numpy()), np.asfortranarray(B.numpy())
                yield Case("trnblas", f"gemm {n}^3 float64", lambda A=A, B=B: trnblas.gemm(1.0, A, B),
                           ref_name, lambda An=An, Bn=Bn, ref=ref: ref(1.0, An, Bn),
                           note=_GEMM64_F64_NOTE if n == 64 else _GEMM_F64_NOTE)


# The settled route's fixed cost (trnsci.settled), measured here: thread CPU time, 1 thread, best of 31
# shuffled rounds of 1000 calls in one process, load ~4. dot's generated wrapper with a no-op route takes
# 1.05 us: 0.75 us the signature key (per tensor four torch getters -- dtype, layout, is_cpu ~0.06 us
# each, shape 0.13 us -- then the tuple's hash), 0.13 us the inline backend test, 0.17 us the frame, type
# tests and table lookup. A route that is the torch call itself (dot) adds no frame; one that reorders
# arguments (axpy, gemv, ger, gemm) adds one (~0.1 us).
_WRAPPER = ("the settled wrapper's fixed cost, not the work: its signature key reads four torch attributes per "
            "tensor (~0.3 us each tensor), plus ~0.3 us of backend test, frame and table lookup (dot's wrapper "
            "with a no-op route: 1.05 us, 0.75 of it the key; thread CPU time, 1 thread, best of 31 rounds)")


def _small_note(peer: str, peer_us: tuple, ours_us: tuple, ratio: tuple, extra: str = "") -> str:
    return (f"{peer} {peer_us[0]:.2f}-{peer_us[1]:.2f} us, trnblas {ours_us[0]:.2f}-{ours_us[1]:.2f} us "
            f"({ratio[0]:.2f}-{ratio[1]:.2f}x; thread CPU time, 1 thread, best of 31 shuffled rounds of 1000 "
            f"calls in one process, four runs, load 3-4): {_WRAPPER}"
            + (f"; {extra}" if extra else "") + ". Wall-clock rounds on the shared machine scale the whole call, "
            "so the fixed ~1 us weighs more in the reported ratio")


def _small_cases(n: int = 64):
    """Level 1/2 calls small enough that the ratio is trnblas's per-call overhead."""
    g = torch.Generator().manual_seed(n)
    A = torch.randn(n, n, generator=g)
    x, y = torch.randn(n, generator=g), torch.randn(n, generator=g)
    yield Case("trnblas", f"gemv {n} float32", lambda: trnblas.gemv(1.0, A, x), "torch.mv", lambda: torch.mv(A, x),
               note=_small_note("torch.mv", (1.95, 2.02), (3.60, 3.90), (1.83, 1.93),
                                "six positional parameters, three of them left out "
                                "(each a sentinel test), and the route frame that passes (A, x) to torch.mv"))
    yield Case("trnblas", f"axpy {n} float32", lambda: trnblas.axpy(2.0, x, y),
               "torch.add", lambda: torch.add(y, x, alpha=2.0),
               note=_small_note("torch.add", (2.10, 2.19), (3.51, 3.79), (1.65, 1.73),
                                "two tensors and a float alpha, and the route frame "
                                "that reorders them into torch.add(y, x, alpha=alpha)"))
    yield Case("trnblas", f"dot {n} float32", lambda: trnblas.dot(x, y), "torch.dot", lambda: torch.dot(x, y),
               note=_small_note("torch.dot", (1.28, 1.36), (2.50, 2.70), (1.87, 2.04),
                                "the route is torch.dot itself (no frame)"))
    yield Case("trnblas", f"nrm2 {n} float32", lambda: trnblas.nrm2(x), "torch vector_norm",
               lambda: torch.linalg.vector_norm(x),
               note=_small_note("torch vector_norm", (1.79, 1.92), (3.11, 3.34), (1.69, 1.77),
                                "the route reads the norm on the host once (float(r), 0.48 us) to decide whether "
                                "the scaled norm is needed: torch's vector_norm gives inf for [1e30, 1e30] in "
                                "float32, reference BLAS's nrm2 does not"))
    yield Case("trnblas", f"ger {n} float32", lambda: trnblas.ger(1.0, x, y, A), "torch.addr",
               lambda: torch.addr(A, x, y),
               note=_small_note("torch.addr", (3.41, 3.74), (5.60, 5.97), (1.58, 1.67),
                                "three tensors (1.9 us for the wrapper with a no-op "
                                "route) and the route frame into torch.addr(A, x, y)"))


def _level3_extra_cases(n: int):
    """The level-3 routines that gained kernels with the level-1/2 ones (torch path here, no NeuronCore)."""
    g = torch.Generator().manual_seed(n + 1)
    A, B = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)
    x = torch.randn(n, generator=g)
    yield Case("trnblas", f"syr2k {n} float32", lambda: trnblas.syr2k(1.0, A, B), "torch.mm x2",
               lambda: (lambda P: P + P.T)(torch.mm(A, B.T)).triu(),
               note="both sides are torch calls on 2 threads' OpenMP: in two quick runs each (load ~4) 0.70 and "
                    "0.95x at 1 thread, 0.67 and 1.12x at 2 threads, where rounds of either side that waited at "
                    "a barrier for a core another process held (4 ms scheduler steps) decide the ratio")
    yield Case("trnblas", f"geam {n} float32", lambda: trnblas.geam(2.0, A, 3.0, B), "torch.add",
               lambda: torch.add(A * 2.0, B, alpha=3.0),
               note="both sides are torch calls: 0.77-0.81x at 1 thread (25 vs 31 us); at 2 threads one quick "
                    "run (load ~4) timed both sides at 16.0 ms, i.e. every round of either waited four "
                    "scheduler steps at an OpenMP barrier -- the load, not the work")
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
               "scipy dtrsm", lambda: sblas.dtrsm(1.0, Tn, An), note=_TRSM_NOTE)
    b = 64 if quick else 256
    X = torch.randn(b, 64, 64, generator=g)
    Y = torch.randn(b, 64, 64, generator=g)
    yield Case("trnblas", f"batched_gemm {b}x64^3 float32", lambda: trnblas.batched_gemm(1.0, X, Y),
               "torch.bmm", lambda: torch.bmm(X, Y),
               note="the settled route calls torch.bmm: 1.03-1.04x at 1 thread, 0.97-1.09x at 2 threads in "
                    "two quick runs each (load ~4), the spread of torch.bmm's own rounds")
    nocc, nvir, naux = (10, 60, 200) if quick else (24, 200, 600)
    Bq = torch.randn(nocc, nvir, naux, generator=g, dtype=torch.float64) * 0.1
    eo = -1.0 - torch.rand(nocc, generator=g, dtype=torch.float64)
    ev = 0.5 + torch.rand(nvir, generator=g, dtype=torch.float64)

    def einsum_mp2():
        ovov = torch.einsum("iaP,jbP->iajb", Bq, Bq)
        d = eo[:, None, None, None] - ev[None, :, None, None] + eo[None, None, :, None] - ev[None, None, None, :]
        return (ovov * (2 * ovov - ovov.transpose(1, 3)) / d).sum()

    yield Case("trnblas", f"mp2_energy {nocc}/{nvir}/{naux} float64", lambda: trnblas.mp2_energy(Bq, eo, ev),
               "torch.einsum", einsum_mp2, note=_MP2_NOTE)


# 2 threads, wall clock, 40 alternations in one process, load 4.1-4.7 (two runs).
_MP2_NOTE = (
    "at 2 threads both sides' torch calls wait at OpenMP barriers while other processes hold the second "
    "vCPU: in two runs of 40 alternations trnblas.mp2_energy took 4.3 / 13.7 ms (best) and 17 / 28 ms "
    "(median), torch.einsum 2.7 / 65 ms and 48 / 90 ms -- a row's ratio is the load of its moment. The "
    "energy's measured route (trnsci.routes, family trnblas.mp2) keeps the pool of single-threaded workers: "
    "block after block on 2 threads took 188 ms against the pool's 11 ms in its timing; at 1 thread "
    "trnblas 3.2-6.6 ms against einsum's 5.0-9.8 ms (best of 40)"
)
