"""LU / QR / SVD device compositions: modeled trn1/trn2 time and HBM bytes vs the analytic minimum.

    python packages/trnsolver/benchmarks/dense_model.py [--sizes 512 2048] [--cases lu_factor qr svd] [--counts-only]

Each case runs the public routine under backend "simulator" once per target
(``NEURON_PLATFORM_TARGET_OVERRIDE``), captures every kernel launch of the
composition and sums the emulator's figures: HBM bytes and instruction
counts are exact, times are the emulator's cost model -- **modeled**, not
measured; launches are summed as if run back to back (no overlap between
launches, no host time between them).

Analytic minimum per call: HBM bytes = each operand read once and each
result written once (float32); time = max(reference flops / the Tensor
Engine's fp32 peak, minimum bytes / one core's DMA bandwidth), with the
peaks of ``/work/shared/NKI.md`` (fp32: 23 TFLOPS trn1, 20 TFLOPS trn2; DMA
~272 GB/s trn1, ~368 GB/s trn2 per core). Reference flops: LU ``2 n^3 / 3``;
QR with the reduced Q ``4 m n^2 - 4 n^3 / 3`` (geqrf + orgqr: ``8 n^3 / 3``
square); SVD with thin vectors ``4 m n^2 + 8 n^3`` (R-bidiagonalization
class, Golub & Van Loan Table 8.6.1 order of magnitude).

The device SVD is one tile of one-sided Jacobi (``min(m, n) <= 128``), so
its cases are ``m x 128`` (m = the size), not square.

``--counts-only``: no emulation; the closed-form HBM bytes and
instruction counts of LU and QR (the plans' summed closed forms), for sizes
too slow to emulate on a laptop-class host.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

import trnsolver
from trnsci.backend import use_backend
from trnsci.dispatch import plan_call
from trnsci.nki import capture

PEAK_FP32 = {"trn1": 23e12, "trn2": 20e12}
DMA_BW = {"trn1": 272e9, "trn2": 368e9}


def _cases(n):
    rng = np.random.default_rng(n)
    A = torch.from_numpy(rng.standard_normal((n, n)).astype(np.float32))
    T = torch.from_numpy(rng.standard_normal((n, 128)).astype(np.float32))
    return [
        ("lu_factor", f"{n}x{n}", lambda: trnsolver.lu_factor(A), (A,), {},
         2 * n ** 3 / 3, 4 * (2 * n * n + n)),
        ("qr", f"{n}x{n}", lambda: trnsolver.qr(A), (A,), {},
         8 * n ** 3 / 3, 4 * 3 * n * n),
        ("svd", f"{n}x128", lambda: trnsolver.svd(T), (T,), {},
         4 * n * 128 ** 2 + 8 * 128 ** 3, 4 * (2 * n * 128 + 128 + 128 * 128)),
    ]


def _run(fn, target):
    os.environ["NEURON_PLATFORM_TARGET_OVERRIDE"] = target
    try:
        with use_backend("simulator", "trnsolver"), capture() as runs:
            fn()
    finally:
        os.environ.pop("NEURON_PLATFORM_TARGET_OVERRIDE", None)
    profs = [r.profile for r in runs]
    return {
        "launches": len(runs),
        "kernels": sorted({r.kernel for r in runs}),
        "time": sum(p.modeled_time_s for p in profs),
        "read": sum(p.hbm_read_bytes for p in profs),
        "write": sum(p.hbm_write_bytes for p in profs),
    }


def main(sizes, counts_only=False, only=None):
    fns = {"lu_factor": trnsolver.lu_factor, "qr": trnsolver.qr, "svd": trnsolver.svd}
    print("case  shape  | launches | HBM read+write MB (min) ratio | modeled ms trn1 (min) | trn2 (min)"
          " | emulation s")
    for n in sizes:
        for name, shape, fn, args, kw, flops, min_bytes in _cases(n):
            if only and name not in only:
                continue
            if counts_only:
                with use_backend("simulator", "trnsolver"):
                    plan = plan_call(fns[name], *args, **kw)
                k = plan.kernel
                if not k:
                    print(f"{name:9s} {shape:10s} | no closed form (data-dependent launches)")
                    continue
                tot = k["hbm_read_bytes"] + k["hbm_write_bytes"]
                print(f"{name:9s} {shape:10s} | {len(k['kernels']):5d} | {tot / 1e6:9.2f} "
                      f"({min_bytes / 1e6:.2f}) {tot / min_bytes:5.2f}x | closed form; tensor {k['tensor']:,}, "
                      f"vector {k['vector']:,} instructions", flush=True)
                continue
            t0 = time.time()
            r1, r2 = _run(fn, "trn1"), _run(fn, "trn2")
            tmin = {t: max(flops / PEAK_FP32[t], min_bytes / DMA_BW[t]) for t in ("trn1", "trn2")}
            tot = r1["read"] + r1["write"]
            print(f"{name:9s} {shape:10s} | {r1['launches']:5d} | {tot / 1e6:9.2f} ({min_bytes / 1e6:.2f}) "
                  f"{tot / min_bytes:5.2f}x | {r1['time'] * 1e3:9.3f} ({tmin['trn1'] * 1e3:.3f}) | "
                  f"{r2['time'] * 1e3:9.3f} ({tmin['trn2'] * 1e3:.3f}) | {time.time() - t0:6.1f}", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="*", default=[512, 2048])
    ap.add_argument("--counts-only", action="store_true")
    ap.add_argument("--cases", nargs="*", choices=["lu_factor", "qr", "svd"])
    a = ap.parse_args()
    main(a.sizes, a.counts_only, a.cases)
