"""Jacobi eigensolver kernel: sweeps to converge vs n (simulator) and modeled time per sweep.

    python packages/trnsolver/benchmarks/jacobi_model.py [n ...]

Sweeps: ``trnsolver.eigh`` under the simulator backend on random symmetric
Gaussian matrices (fp32), counting ``eigh_sweep_kernel`` launches.
Per-sweep figures: the emulator's KernelProfile (trn1 and trn2) of one sweep
-- instruction counts are exact, times are the emulator's cost model
("modeled"), not measurements. The Vector-Engine alternative (rotating rows
and columns with per-partition scalars instead of building J) is modeled
from the same profile: it needs the same three cross-partition matmuls (a
Vector lane cannot read another partition) plus four more full-tile
Vector instructions per round; its extra time is four times the modeled
time of one full [n, n] tensor_tensor, profiled here.
"""

from __future__ import annotations

import sys

import numpy as np
import torch

import trnsolver
from trnsci.backend import use_backend
from trnsci.nki import capture, emulator, nisa, nki, nl
from trnsolver.kernels.eigh_sweep import eigh_sweep_kernel, partner_table


@nki.jit
def _one_full_tile_op(a):
    n = a.shape[0]
    out = nl.ndarray((n, n), dtype=nl.float32, buffer=nl.shared_hbm)
    A = nl.ndarray((n, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=A, src=a)
    B = nl.ndarray((n, n), dtype=nl.float32, buffer=nl.sbuf)
    for _ in nl.static_range(8):
        nisa.tensor_tensor(B, A, A, nl.multiply)
    nisa.dma_copy(dst=out, src=B)
    return out


def main(sizes):
    print("n  sweeps  max|w-w_ref|/||A||2  | per sweep (trn1): tensor vector scalar dma instr,"
          " modeled us [lower, upper]; trn2 upper | Vector-alternative extra modeled us")
    for n in sizes:
        X = np.random.default_rng(n).standard_normal((n, n))
        A = ((X + X.T) / 2).astype(np.float32)
        with use_backend("simulator", "trnsolver"), capture() as runs:
            w, _ = trnsolver.eigh(torch.from_numpy(A))
        ref = np.linalg.eigvalsh(A.astype(np.float64))
        err = np.abs(w.numpy() - ref).max() / np.abs(ref).max()
        m = n + n % 2
        eye = np.eye(m, dtype=np.float32)
        Ap = np.zeros((m, m), np.float32)
        Ap[:n, :n] = A
        _, p1 = emulator.profile(eigh_sweep_kernel, Ap, eye, eye, partner_table(m), target="trn1")
        _, p2 = emulator.profile(eigh_sweep_kernel, Ap, eye, eye, partner_table(m), target="trn2")
        _, q = emulator.profile(_one_full_tile_op, Ap, target="trn1")
        per_op = q.engine_time_s["vector"] / q.instructions["vector"]
        extra = 4 * (m - 1) * per_op
        i = p1.instructions
        print(f"{n:3d} {len(runs):5d}   {err:9.2e}   | {i['tensor']:5d} {i['vector']:5d} {i['scalar']:5d} {i['dma']:4d}"
              f"   [{p1.modeled_time_lower_s * 1e6:8.1f}, {p1.modeled_time_upper_s * 1e6:8.1f}]  "
              f"{p2.modeled_time_upper_s * 1e6:8.1f} | +{extra * 1e6:7.1f}", flush=True)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [8, 16, 32, 64, 128])
