"""The ratio table of docs/trntensor.md: trntensor.einsum over its best peer, per thread count and dtype.

Every contraction of ``trntensor.bench.contractions(quick=True)`` is timed
with ``trntensor.einsum`` and its three peers (``torch.einsum``,
``numpy.einsum(optimize=True)``, ``opt_einsum.contract`` with the torch
backend and a pre-built expression) on the same data, interleaved in one
process: each round times every implementation once (``reps`` calls, the
mean per call, after one untimed call), in a rotating order, after a short
pause so that a BLAS thread pool still spinning from the previous
implementation does not slow the next; the figure kept is the best round.
trntensor's plans are tuned by the warm-up calls and the first round (see
``trntensor.set_autotune``), as a user's would be. One process per thread count
(``OMP_NUM_THREADS`` is read by OpenBLAS when NumPy loads; torch gets
``torch.set_num_threads``).

On a shared machine ``--quiet 0.9`` makes each round wait (up to 30 s)
until 90% of the CPU time is idle, so that the best round is a quiet one
for every implementation.

Run: ``python packages/trntensor/benchmarks/peer_table.py [--threads 1 2]
[--dtypes float32 float64] [--rounds 9] [--quiet 0.9] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

IMPLS = ["trntensor", "torch.einsum", "numpy.einsum", "opt_einsum"]


def _idle(interval=0.25):
    """Fraction of the machine's CPU time idle over ``interval`` seconds (Linux /proc/stat; 1.0 elsewhere)."""
    def read():
        with open("/proc/stat") as fh:
            v = [int(x) for x in fh.readline().split()[1:9]]
        return sum(v), v[3] + v[4]
    try:
        t1, i1 = read()
        time.sleep(interval)
        t2, i2 = read()
    except OSError:
        return 1.0
    return (i2 - i1) / max(t2 - t1, 1)


def _wait_quiet(threshold, patience=30.0):
    """Wait (up to ``patience`` s) until the machine is at least ``threshold`` idle; whether it was."""
    end = time.time() + patience
    while time.time() < end:
        if _idle() >= threshold:
            return True
    return False


def _time(fn, reps):
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t) / reps


def _child(dtypes, rounds, pause, quiet):
    import torch

    import trnsci
    import trntensor
    from trntensor import plan as P
    from trntensor.bench import contractions, operands, peers

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    rows = []
    with trnsci.use_backend("torch"):
        for dt in dtypes:
            dtype = getattr(torch, dt)
            for name, eq, shapes in contractions(quick=True):
                ts = operands(shapes, dtype=dtype)
                fns = dict(peers(eq, ts))
                fns["trntensor"] = lambda eq=eq, ts=ts: trntensor.einsum(eq, *ts)
                for f in fns.values():
                    f()
                t0 = time.perf_counter()
                fns["torch.einsum"]()
                reps = max(3, min(200, int(0.02 / max(time.perf_counter() - t0, 1e-7))))
                best = {k: float("inf") for k in IMPLS}
                calm = 0
                for r in range(rounds):
                    if quiet:
                        calm += _wait_quiet(quiet)
                    order = IMPLS[r % len(IMPLS):] + IMPLS[:r % len(IMPLS)]
                    for k in order:
                        time.sleep(pause)
                        fns[k]()  # wakes the thread pools a pause put to sleep
                        best[k] = min(best[k], _time(fns[k], reps))
                peer = min((k for k in IMPLS[1:]), key=best.get)
                key = tuple(tuple(t.shape) for t in ts)
                P._plan(eq, key, dtype, ts[0].device, "fast", "auto", None, "einsum")
                plan_s = min(_time(lambda eq=eq, key=key, dtype=dtype, dev=ts[0].device:
                                   P._plan(eq, key, dtype, dev, "fast", "auto", None, "einsum"), 2000)
                             for _ in range(5))
                steps = trntensor.plan_contraction(eq, *ts).steps
                row = dict(threads=torch.get_num_threads(), dtype=dt, case=name, peer=peer, quiet_rounds=calm,
                           ratio=best["trntensor"] / best[peer], plan_us=plan_s * 1e6,
                           backends=[s.backend for s in steps], **{k: best[k] * 1e6 for k in IMPLS})
                rows.append(row)
                print(f"t={row['threads']} {dt:8s} {name:18s} trntensor {row['trntensor']:9.1f} us  "
                      f"best peer {peer:13s} {row[peer]:9.1f} us  ratio {row['ratio']:5.2f}  "
                      f"plan {row['plan_us']:4.2f} us  {'/'.join(row['backends'])}  quiet {calm}/{rounds}",
                      file=sys.stderr, flush=True)
    json.dump(rows, sys.stdout)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--dtypes", nargs="+", default=["float32", "float64"])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--pause", type=float, default=0.05)
    ap.add_argument("--quiet", type=float, default=0.0,
                    help="before each round wait (<= 30 s) until this fraction of the CPUs is idle (shared machines)")
    ap.add_argument("--json")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        return _child(a.dtypes, a.rounds, a.pause, a.quiet)
    rows = []
    for t in a.threads:
        env = dict(os.environ, OMP_NUM_THREADS=str(t))
        out = subprocess.run([sys.executable, __file__, "--child", "--rounds", str(a.rounds), "--pause", str(a.pause),
                              "--quiet", str(a.quiet), "--dtypes", *a.dtypes],
                             env=env, check=True, stdout=subprocess.PIPE, text=True).stdout
        rows += json.loads(out)
    heads = " | ".join(f"{t} thread" + ("s" if t > 1 else "") for t in a.threads)
    print(f"\n| contraction | dtype | {heads} |")
    print("|---|---|" + "---:|" * len(a.threads))
    for dt in a.dtypes:
        for case in dict.fromkeys(r["case"] for r in rows):
            cells = []
            for t in a.threads:
                r = next(r for r in rows if r["case"] == case and r["dtype"] == dt and r["threads"] == t)
                cells.append(f"{r['ratio']:.2f} ({r['trntensor']:.0f} / {r['peer']} {r[r['peer']]:.0f} us)")
            print(f"| {case} | {dt} | {' | '.join(cells)} |")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
