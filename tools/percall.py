"""Per-call eager overhead of the smallest public calls, two checkouts against each other, interleaved.

    python tools/percall.py A_CHECKOUT B_CHECKOUT [--rounds 15] [--best 5] [--calls 200] [--only NAME ...]

Each checkout runs the benchmarks with its own ``.venv/bin/python`` (its own installed packages) in one
long-lived subprocess; the two are asked in turn (A, B, then B, A, ...) to time the same benchmark, so
each pair of timings sees the same machine load. One timing is the best of ``--best`` runs of
``--calls`` calls (thread CPU time, one torch thread). The table gives, per benchmark, the median over
``--rounds`` pairs of each side's microseconds per call and the median of the pairs' ratios B / A with
their quartiles (the spread of the pairs), and the median difference B - A in nanoseconds.
The environment is passed through unchanged, so ``TRNSCI_BACKEND=torch python tools/percall.py ...``
measures both under that setting.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess

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
    cases[f"trnblas.nrm2 64 {tag}"] = (lambda x=x: trnblas.nrm2(x))
    cases[f"trnblas.ger 64 {tag}"] = (lambda x=x, y=y: trnblas.ger(1.0, x, y))
    cases[f"trnblas.gemm transB= 64 {tag}"] = (lambda A=A, B=B: trnblas.gemm(1.0, A, B, transB=True))
z = torch.randn(64, generator=g, dtype=torch.complex64)
cases["trnfft.fft 64 c64"] = lambda: trnfft.fft(z)
r = torch.randn(64, generator=g, dtype=torch.float32)
cases["trnfft.rfft 64 f32"] = lambda: trnfft.rfft(r)
z2 = torch.randn(64, generator=g, dtype=torch.complex64)
cases["trnfft.ifft 64 n=128 ortho c64"] = lambda: trnfft.ifft(z2, n=128, norm="ortho")
M = torch.randn(64, 64, generator=g, dtype=torch.float64)
S = M @ M.T + 64 * torch.eye(64, dtype=torch.float64)
rhs = torch.randn(64, generator=g, dtype=torch.float64)
cases["trnsolver.cholesky 64 f64"] = lambda: trnsolver.cholesky(S)
cases["trnsolver.solve 64 f64"] = lambda: trnsolver.solve(S, rhs)
cases["trnrand.uniform 1000"] = lambda: trnrand.uniform(1000)
cases["trnrand.normal 1000"] = lambda: trnrand.normal(1000)
rng = np.random.default_rng(0)
D = torch.from_numpy(np.where(rng.random((64, 64)) < 0.05, rng.standard_normal((64, 64)), 0.0).astype(np.float32))
Acsr = trnsparse.from_dense(D)
v = torch.randn(64, generator=g)
cases["trnsparse.spmv 64 5% f32"] = lambda: trnsparse.spmv(Acsr, v)
E1, E2 = torch.randn(64, 64, generator=g), torch.randn(64, 64, generator=g)
cases["trntensor.einsum ij,jk 64 f32"] = lambda: trntensor.einsum("ij,jk->ik", E1, E2)

names = [n for n in cases if not only or any(o in n for o in only)]
for name in names:
    for _ in range(20):  # warm: settles routes, fills caches
        cases[name]()
print(json.dumps(names), flush=True)
for line in sys.stdin:  # one benchmark name per line: reply with its time
    f = cases[line.strip()]
    ts = []
    for _ in range(best):
        t0 = time.thread_time_ns()
        for _ in range(calls):
            f()
        ts.append((time.thread_time_ns() - t0) / calls / 1e3)
    print(min(ts), flush=True)
'''


def start(checkout: str, best: int, calls: int, only: list[str]):
    py = os.path.join(checkout, ".venv", "bin", "python")
    p = subprocess.Popen([py, "-c", CHILD, str(best), str(calls), *only], cwd=checkout, text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"})
    names = json.loads(p.stdout.readline())
    return p, names


def ask(p, name: str) -> float:
    p.stdin.write(name + "\n")
    p.stdin.flush()
    return float(p.stdout.readline())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", help="checkout A (the reference, e.g. a worktree of main)")
    ap.add_argument("b", help="checkout B (the change)")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--best", type=int, default=5)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--only", nargs="*", default=[], help="benchmarks whose name contains one of these")
    args = ap.parse_args()
    (pa, names), (pb, _) = start(args.a, args.best, args.calls, args.only), start(args.b, args.best, args.calls,
                                                                                 args.only)
    got = {n: ([], []) for n in names}
    for r in range(args.rounds):
        for name in names:
            if r % 2 == 0:
                ta = ask(pa, name)
                tb = ask(pb, name)
            else:
                tb = ask(pb, name)
                ta = ask(pa, name)
            got[name][0].append(ta)
            got[name][1].append(tb)
    for p in (pa, pb):
        p.stdin.close()
        p.wait()
    env = os.environ.get("TRNSCI_BACKEND")
    print(f"A = {args.a}\nB = {args.b}\nTRNSCI_BACKEND={env!r}; {args.rounds} pairs per call, each timing the best of "
          f"{args.best} x {args.calls} calls (thread CPU time, 1 thread); medians\n")
    print(f"{'call':34} {'A us':>8} {'B us':>8} {'B/A':>6} {'B/A q1..q3':>13} {'B-A ns':>7}")
    for name in names:
        a, b = got[name]
        ratios = [y / x for x, y in zip(a, b)]
        q1, med, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
        diff = statistics.median((y - x) * 1e3 for x, y in zip(a, b))
        print(f"{name:34} {statistics.median(a):8.2f} {statistics.median(b):8.2f} {med:6.3f} "
              f"{q1:6.3f}..{q3:5.3f} {diff:7.0f}")


if __name__ == "__main__":
    main()
