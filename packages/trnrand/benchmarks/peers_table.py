"""The uniform/normal peer table of docs/trnrand.md: trnrand's torch path against NumPy and torch.

Samples/s and time ratios of ``trnrand.uniform`` / ``trnrand.normal`` (float32 and float64) against
``numpy.random.Generator(Philox)`` (the target), ``default_rng()`` (PCG64) and ``torch.rand/randn``,
at n = 10**4 .. 10**7 on one thread. Two modes:

* same process (default): the four implementations interleaved, each time the best of 5 repeats of
  as many calls as fit a small budget (wall clock), for ``--rounds`` rounds; the ratio is best over best,
  and the spread of the per-round ratios is printed;
* ``--separate``: every (implementation, case, n) measured in a fresh interpreter (same best-of timing),
  the implementations alternating, ``--rounds`` times; best over best.

Run: ``OMP_NUM_THREADS=1 python packages/trnrand/benchmarks/peers_table.py [--separate] [--rounds R]``
(``--sizes 1e4,1e6`` and ``--cases uniform-f32,normal-f64`` narrow it; ``--json out.json`` saves it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

IMPLS = ("trnrand", "philox", "pcg64", "torch")
CASES = ("uniform-f32", "uniform-f64", "normal-f32", "normal-f64")


def _make(impl: str, case: str, n: int):
    import numpy as np
    import torch

    import trnrand

    kind, dt = case.split("-")
    tdt, ndt = (torch.float32, np.float32) if dt == "f32" else (torch.float64, np.float64)
    if impl == "trnrand":
        g = trnrand.Generator(seed=1)
        f = trnrand.uniform if kind == "uniform" else trnrand.normal
        return lambda: f(n, dtype=tdt, generator=g)
    if impl == "torch":
        tg = torch.Generator().manual_seed(1)
        f = torch.rand if kind == "uniform" else torch.randn
        return lambda: f(n, dtype=tdt, generator=tg)
    r = np.random.Generator(np.random.Philox(1) if impl == "philox" else np.random.PCG64(1))
    if kind == "uniform":
        return lambda: r.random(n, dtype=ndt)
    return lambda: r.standard_normal(n, dtype=ndt)


def _best(fn, budget: float) -> float:
    """Best of 5 repeats of k calls (k fills ``budget`` / 5), seconds per call."""
    fn()
    t0 = time.perf_counter()
    fn()
    k = max(1, int(budget / 5 / max(time.perf_counter() - t0, 1e-7)))
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(k):
            fn()
        best = min(best, (time.perf_counter() - t0) / k)
    return best


def _budget(n: int) -> float:
    return 0.4 if n >= 10**7 else 0.1


def _one_thread():
    import torch

    torch.set_num_threads(1)


def same_process(cases, sizes, rounds):
    _one_thread()
    res = {}
    for _ in range(rounds):
        for case in cases:
            for n in sizes:
                for impl in IMPLS:
                    res.setdefault((case, n, impl), []).append(_best(_make(impl, case, n), _budget(n)))
    return res


def separate(cases, sizes, rounds):
    res = {}
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    for r in range(rounds):
        for case in cases:
            for n in sizes:
                order = IMPLS if r % 2 == 0 else IMPLS[::-1]
                for impl in order:
                    out = subprocess.run([sys.executable, __file__, "--one", impl, case, str(n)], env=env,
                                         capture_output=True, text=True, check=True)
                    res.setdefault((case, n, impl), []).append(float(out.stdout.split()[-1]))
    return res


def table(res, cases, sizes) -> list[str]:
    lines = [f"{'case':12s} {'n':>9s} " + " ".join(f"{i:>10s}" for i in IMPLS)
             + "   trnrand time / philox [per-round range]  / pcg64  / torch"]
    for case in cases:
        for n in sizes:
            ts = {i: res[(case, n, i)] for i in IMPLS}
            per = [a / b for a, b in zip(ts["trnrand"], ts["philox"])]
            best = {i: min(v) for i, v in ts.items()}
            lines.append(
                f"{case:12s} {n:9d} " + " ".join(f"{n / best[i] / 1e6:7.0f}M/s" for i in IMPLS)
                + f"   {best['trnrand'] / best['philox']:.2f}x [{min(per):.2f}-{max(per):.2f}]"
                + f"  {best['trnrand'] / best['pcg64']:.2f}x  {best['trnrand'] / best['torch']:.2f}x")
    return lines


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--separate", action="store_true", help="one fresh process per measurement")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--sizes", default="1e4,1e5,1e6,1e7")
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--json", help="also write the raw seconds here")
    p.add_argument("--one", nargs=3, metavar=("IMPL", "CASE", "N"), help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.one:
        _one_thread()
        impl, case, n = a.one
        print(_best(_make(impl, case, int(n)), _budget(int(n))))
        return
    sizes = [int(float(s)) for s in a.sizes.split(",")]
    cases = a.cases.split(",")
    res = (separate if a.separate else same_process)(cases, sizes, a.rounds)
    print(f"threads: OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}, torch 1; "
          f"{'separate processes' if a.separate else 'same process, interleaved'}; best of {a.rounds} rounds")
    print("\n".join(table(res, cases, sizes)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({f"{c}|{n}|{i}": v for (c, n, i), v in res.items()}, f, indent=1)


if __name__ == "__main__":
    main()
