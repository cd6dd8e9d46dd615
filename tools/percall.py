"""Per-call eager overhead of the smallest public calls, two checkouts against each other, interleaved.

    python tools/percall.py A_CHECKOUT B_CHECKOUT [--rounds 9] [--best 5] [--calls 200] [--only NAME ...]

Each checkout runs the benchmarks with its own ``.venv/bin/python`` (its own installed packages) in a
fresh subprocess, in rounds that alternate A, B, A, B, ... so both see the same machine load. Within a
round every benchmark is timed ``--best`` times over ``--calls`` calls (thread CPU time, one torch
thread) and the best is kept; the table gives the median over rounds, in microseconds per call, and
the ratio B / A. The environment is passed through unchanged, so ``TRNSCI_BACKEND=torch python
tools/percall.py ...`` measures both under that setting.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

# Run in each checkout's interpreter: the same text for both sides.
CHILD = r'''
import json, sys, time
import numpy as np
import torch
torch.set_num_threads(1)
import trnblas, trnfft, trnsolver, trnrand, trnsparse, trntensor

best, calls, only = int(sys.argv[1]), int(sys.argv[2]), set(sys.argv[3:])
g = torch.Generator().manual_seed(0)
cases = {}
for dt, tag in ((torch.float32, "f32"), (torch.float64, "f64")):
    x, y = torch.randn(64, generator=g, dtype=dt), torch.randn(64, generator=g, dtype=dt)
    A, B = torch.randn(64, 64, generator=g, dtype=dt), torch.randn(64, 64, generator=g, dtype=dt)
    cases[f"trnblas.dot 64 {tag}"] = (lambda x=x, y=y: trnblas.dot(x, y))
    cases[f"trnblas.axpy 64 {tag}"] = (lambda x=x, y=y: trnblas.axpy(2.0, x, y))
    cases[f"trnblas.gemv 64 {tag}"] = (lambda A=A, x=x: trnblas.gemv(1.0, A, x))
    cases[f"trnblas.gemm 64 {tag}"] = (lambda A=A, B=B: trnblas.gemm(1.0, A, B))
z = torch.randn(64, generator=g, dtype=torch.complex64)
cases["trnfft.fft 64 c64"] = lambda: trnfft.fft(z)
M = torch.randn(64, 64, generator=g, dtype=torch.float64)
S = M @ M.T + 64 * torch.eye(64, dtype=torch.float64)
cases["trnsolver.cholesky 64 f64"] = lambda: trnsolver.cholesky(S)
cases["trnrand.uniform 1000"] = lambda: trnrand.uniform(1000)
rng = np.random.default_rng(0)
D = torch.from_numpy(np.where(rng.random((64, 64)) < 0.05, rng.standard_normal((64, 64)), 0.0).astype(np.float32))
Acsr = trnsparse.from_dense(D)
v = torch.randn(64, generator=g)
cases["trnsparse.spmv 64 5% f32"] = lambda: trnsparse.spmv(Acsr, v)
E1, E2 = torch.randn(64, 64, generator=g), torch.randn(64, 64, generator=g)
cases["trntensor.einsum ij,jk 64 f32"] = lambda: trntensor.einsum("ij,jk->ik", E1, E2)

out = {}
for name, f in cases.items():
    if only and not any(o in name for o in only):
        continue
    for _ in range(20):  # warm: settles routes, fills caches
        f()
    ts = []
    for _ in range(best):
        t0 = time.thread_time_ns()
        for _ in range(calls):
            f()
        ts.append((time.thread_time_ns() - t0) / calls / 1e3)
    out[name] = min(ts)
print(json.dumps(out))
'''


def run(checkout: str, best: int, calls: int, only: list[str]) -> dict[str, float]:
    py = os.path.join(checkout, ".venv", "bin", "python")
    r = subprocess.run([py, "-c", CHILD, str(best), str(calls), *only], cwd=checkout,
                       capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    if r.returncode:
        sys.exit(f"{checkout}: benchmark failed\n{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", help="checkout A (the reference, e.g. a worktree of main)")
    ap.add_argument("b", help="checkout B (the change)")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--best", type=int, default=5)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--only", nargs="*", default=[], help="benchmarks whose name contains one of these")
    args = ap.parse_args()
    got: dict[str, dict[str, list[float]]] = {"a": {}, "b": {}}
    for r in range(args.rounds):
        for side in (("a", "b") if r % 2 == 0 else ("b", "a")):
            for name, us in run(getattr(args, side), args.best, args.calls, args.only).items():
                got[side].setdefault(name, []).append(us)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    env = os.environ.get("TRNSCI_BACKEND")
    print(f"A = {args.a}\nB = {args.b}\nTRNSCI_BACKEND={env!r}; median over {args.rounds} rounds of the best of "
          f"{args.best} x {args.calls} calls (thread CPU time, 1 thread)\n")
    print(f"{'call':32} {'A us':>9} {'B us':>9} {'B/A':>6}")
    for name in got["a"]:
        a, b = statistics.median(got["a"][name]), statistics.median(got["b"][name])
        print(f"{name:32} {a:9.2f} {b:9.2f} {b / a:6.3f}")


if __name__ == "__main__":
    main()
