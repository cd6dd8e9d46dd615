"""torch.mm/bmm against numpy.matmul on the GEMM steps of the benchmark set (the autotuner's two routes).

For every GEMM step of ``trntensor.bench.contractions(quick=True)`` (the
``(batch, M, N, K)`` of each plan step) both routes are timed on plain
contiguous operands, interleaved, best of ``--rounds`` (each round the mean
of a ~10 ms block after one untimed call), in one process per thread count
(``OMP_NUM_THREADS``, read by OpenBLAS when NumPy loads; torch gets
``torch.set_num_threads``). Prints the ratio numpy.matmul / torch per step:
below 1, NumPy's BLAS was faster.

Run: ``python packages/trntensor/benchmarks/gemm_routes.py [--threads 1 2] [--rounds 9] [--quiet 0.9]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from peer_table import _time, _wait_quiet


def _child(rounds, quiet):
    import numpy as np
    import torch

    import trntensor
    from trntensor.bench import contractions

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    rows, seen = [], set()
    for dt in (torch.float32, torch.float64):
        for name, eq, shapes in contractions(quick=True):
            plan = trntensor.plan_contraction(eq, *shapes, autotune=False)
            for s in plan.steps:
                if s.strategy not in ("gemm", "batched_gemm") or (s.dims, dt) in seen:
                    continue
                seen.add((s.dims, dt))
                Bn, M, N, K = s.dims
                lead = (Bn,) if s.strategy == "batched_gemm" else ()
                g = torch.Generator().manual_seed(0)
                a = torch.randn(*lead, M, K, generator=g, dtype=dt)
                b = torch.randn(*lead, K, N, generator=g, dtype=dt)
                an, bn = a.numpy(), b.numpy()
                mm = torch.bmm if lead else torch.mm
                fns = {"torch": lambda mm=mm, a=a, b=b: mm(a, b), "numpy": lambda an=an, bn=bn: np.matmul(an, bn)}
                t0 = time.perf_counter()
                fns["torch"]()
                reps = max(3, min(500, int(0.01 / max(time.perf_counter() - t0, 1e-7))))
                best = {k: float("inf") for k in fns}
                for r in range(rounds):
                    if quiet:
                        _wait_quiet(quiet)
                    for k in (("torch", "numpy") if r % 2 else ("numpy", "torch")):
                        time.sleep(0.05)
                        fns[k]()
                        best[k] = min(best[k], _time(fns[k], reps))
                row = dict(threads=torch.get_num_threads(), dtype=str(dt)[6:], case=name, step=s.subscripts,
                           dims=s.dims, torch_us=best["torch"] * 1e6, numpy_us=best["numpy"] * 1e6,
                           ratio=best["numpy"] / best["torch"])
                rows.append(row)
                print(f"t={row['threads']} {row['dtype']:8s} {name:18s} {s.subscripts:18s} B,M,N,K={s.dims}  "
                      f"torch {row['torch_us']:8.1f} us  numpy {row['numpy_us']:8.1f} us  "
                      f"numpy/torch {row['ratio']:.2f}",
                      file=sys.stderr, flush=True)
    json.dump(rows, sys.stdout)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--quiet", type=float, default=0.0)
    ap.add_argument("--json")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        return _child(a.rounds, a.quiet)
    rows = []
    for t in a.threads:
        env = dict(os.environ, OMP_NUM_THREADS=str(t))
        out = subprocess.run([sys.executable, __file__, "--child", "--rounds", str(a.rounds), "--quiet", str(a.quiet)],
                             env=env, check=True, stdout=subprocess.PIPE, text=True).stdout
        rows += json.loads(out)
    heads = " | ".join(f"{t} thread" + ("s" if t > 1 else "") for t in a.threads)
    print(f"\n| step (contraction) | batch, M, N, K | dtype | numpy.matmul / torch: {heads} |")
    print("|---|---|---|" + "---:|" * len(a.threads))
    for key in dict.fromkeys((r["case"], r["step"], tuple(r["dims"]), r["dtype"]) for r in rows):
        cells = []
        for t in a.threads:
            r = next(r for r in rows
                     if (r["case"], r["step"], tuple(r["dims"]), r["dtype"]) == key and r["threads"] == t)
            cells.append(f"{r['ratio']:.2f} ({r['numpy_us']:.0f} / {r['torch_us']:.0f} us)")
        print(f"| `{key[1]}` ({key[0]}) | {', '.join(map(str, key[2]))} | {key[3]} | {' | '.join(cells)} |")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
