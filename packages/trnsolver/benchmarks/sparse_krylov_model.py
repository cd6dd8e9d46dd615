"""Sparse CG / BiCGSTAB on the device: modeled time and HBM bytes of ONE iteration vs its minimum.

    python packages/trnsolver/benchmarks/sparse_krylov_model.py [--grids 23x19 64x64 128x128]

A trnsparse CSR matrix reaches trnsolver's Krylov loops through the
``__trnsci_spmv__`` seam (docs/trnsolver.md). For each 2-D Poisson grid
(CG) and the same grid plus an upwind convection term (BiCGSTAB), the call
runs under backend "simulator" with ``maxiter=1`` on trn1 and trn2
(``NEURON_PLATFORM_TARGET_OVERRIDE``); the first iteration's launches are
summed (back to back, no overlap, no host time between them). HBM bytes and
instruction counts are exact emulator counters and equal the plan's closed
form (asserted here too); times are the emulator's cost model: **modeled**.

Minimum HBM bytes per iteration, launch by launch (each operand read once,
each result written once, float32): SpMV ``8 nnz + 4 n`` read (values and
column indices, x) and ``4 n`` written; CG's update reads ``x, r, p, Ap``
and writes ``x, r, p`` (``28 n``); BiCGSTAB: two SpMVs, the half step reads
``x, r, p, v, rhat`` and writes ``s, x_half`` (``28 n``), the finish reads
six vectors and writes three (``36 n``). Minimum time = minimum bytes / one
core's DMA bandwidth (~272 GB/s trn1, ~368 GB/s trn2, /work/shared/NKI.md);
the work is memory-bound (a few flops per byte).
"""

from __future__ import annotations

import argparse
import os
import warnings

import numpy as np
import scipy.sparse as sp
import torch

import trnsolver
import trnsparse
from trnsci.backend import use_backend
from trnsci.dispatch import plan_call
from trnsci.nki import capture

DMA_BW = {"trn1": 272e9, "trn2": 368e9}


def _matrix(nx, ny, convection=0.0):
    def lap(k):
        return sp.diags([-np.ones(k - 1), 2 * np.ones(k), -np.ones(k - 1)], [-1, 0, 1])
    S = sp.kron(sp.eye(ny), lap(nx)) + sp.kron(lap(ny), sp.eye(nx))
    if convection:
        S = S + convection * sp.kron(sp.eye(ny), sp.diags([-np.ones(nx - 1), np.ones(nx)], [-1, 0]))
    S = S.tocsr().astype(np.float32)
    A = trnsparse.CSRMatrix(torch.tensor(S.data), torch.from_numpy(S.indices.astype(np.int64)),
                            torch.from_numpy(S.indptr.astype(np.int64)), S.shape)
    return S, A


def _one_iteration(fn, A, b, target):
    os.environ["NEURON_PLATFORM_TARGET_OVERRIDE"] = target
    try:
        with use_backend("simulator"), capture() as runs, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # maxiter=1: not converged, by design
            fn(A, b, tol=1e-12, maxiter=1)
    finally:
        os.environ.pop("NEURON_PLATFORM_TARGET_OVERRIDE", None)
    return runs


def main(grids):
    print("solver    grid       n      nnz    | launches/it | HBM B/it (min) ratio "
          "| modeled us/it trn1 (min) | trn2 (min)")
    for grid in grids:
        nx, ny = (int(v) for v in grid.lower().split("x"))
        for name, fn, conv, vec_min in (("cg", trnsolver.cg, 0.0, 28), ("bicgstab", trnsolver.bicgstab, 0.4, 64)):
            S, A = _matrix(nx, ny, conv)
            n, nnz = S.shape[0], S.nnz
            b = torch.from_numpy(np.random.default_rng(0).standard_normal(n).astype(np.float32))
            with use_backend("simulator"):
                k = plan_call(fn, A, b, tol=1e-12, maxiter=1).kernel
            nk = len(k["kernels"])
            nsp = k["kernels"].count("csr_spmv_kernel")
            min_bytes = nsp * (8 * nnz + 8 * n) + vec_min * n
            row = {}
            for target in ("trn1", "trn2"):
                runs = _one_iteration(fn, A, b, target)[:nk]
                assert [r.kernel for r in runs] == k["kernels"], [r.kernel for r in runs]
                byts = sum(r.profile.hbm_read_bytes + r.profile.hbm_write_bytes for r in runs)
                assert byts == k["hbm_read_bytes"] + k["hbm_write_bytes"]
                row[target] = sum(r.profile.modeled_time_s for r in runs)
            print(f"{name:9s} {grid:9s} {n:6d} {nnz:8d} | {nk:11d} | {byts:9d} ({min_bytes:9d}) "
                  f"{byts / min_bytes:4.2f} "
                  f"| {row['trn1'] * 1e6:8.2f} ({min_bytes / DMA_BW['trn1'] * 1e6:6.2f}) "
                  f"| {row['trn2'] * 1e6:8.2f} ({min_bytes / DMA_BW['trn2'] * 1e6:6.2f})")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grids", nargs="+", default=["23x19", "64x64", "128x128"])
    main(ap.parse_args().grids)
