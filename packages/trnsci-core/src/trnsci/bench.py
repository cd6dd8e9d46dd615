"""``trnsci bench``: quick speed ratios against reference libraries, in one run.

Each library may ship a ``<lib>.bench`` module with ``cases(quick: bool)``
yielding :class:`Case` objects: a trnsci callable and the reference it
stands in for (torch, SciPy, NumPy), on the same inputs. Both are timed in
this process, interleaved, and the ratio trnsci/reference is reported -- a
ratio, not an absolute time, because only a ratio measured in the same run
means anything on a shared machine. The pytest-benchmark suites under
``benchmarks/`` and ``packages/*/benchmarks`` are the thorough version.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from trnsci.backend import LIBRARIES


@dataclass
class Case:
    """One comparison: ``name`` (e.g. ``"gemm 256^3 float32"``), two thunks."""

    library: str
    name: str
    run: Callable[[], object]
    reference_name: str
    reference: Callable[[], object]


def _median_time(fn: Callable[[], object], budget_s: float, min_runs: int = 5, sample_s: float = 50e-6) -> float:
    """Median seconds per call of ``fn``; each sample times enough calls to last ``sample_s``
    (a few-microsecond call timed alone would be mostly clock overhead)."""
    t0 = time.perf_counter()
    fn()  # warm-up, and a first estimate of the call's time
    once = time.perf_counter() - t0
    reps = max(1, min(1000, int(sample_s / max(once, 1e-9))))
    times = []
    start = time.perf_counter()
    while len(times) < min_runs or (time.perf_counter() - start < budget_s and len(times) < 1000):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        times.append((time.perf_counter() - t0) / reps)
    return statistics.median(times)


def _compare(case: Case, budget_s: float, rounds: int = 3, pause_s: float = 0.3) -> tuple[float, float]:
    """Best-of-rounds medians of (trnsci, reference), the two sides alternating.

    torch and NumPy/SciPy keep separate BLAS thread pools whose idle threads
    spin for a while after each call; on a small machine a pool still
    spinning slows the other one severalfold. A pause before each side
    lets the other pool go to sleep, so neither side pays for the other.
    """
    best_trn = best_ref = float("inf")
    for _ in range(rounds):
        time.sleep(pause_s)
        best_ref = min(best_ref, _median_time(case.reference, budget_s / rounds))
        time.sleep(pause_s)
        best_trn = min(best_trn, _median_time(case.run, budget_s / rounds))
    return best_trn, best_ref


def collect(libraries: Iterable[str], quick: bool) -> list[Case]:
    """Cases of the wanted libraries, found through ``trnsci.bench`` entry points (:mod:`trnsci.plugins`).

    A declared case module that fails to import raises, naming what is missing.
    """
    from trnsci import plugins

    cases: list[Case] = []
    wanted = set(libraries)
    for p in plugins.load("trnsci.bench"):
        if p.name not in wanted:
            continue
        if not p.ok:
            raise ImportError(f"trnsci bench: the {p.name} cases ({p.value}, from {p.dist}) {p.error}")
        cases.extend(p.module.cases(quick=quick))
    return cases


def run(cases: list[Case], budget_s: float = 0.3, echo=print, pause_s: float = 0.3) -> list[dict]:
    """Time every case; returns rows with both medians and the ratio."""
    rows = []
    echo(f"{'case':<40} {'trnsci':>11} {'reference':>22} {'ratio':>7}")
    for c in cases:
        t_trn, t_ref = _compare(c, budget_s, pause_s=pause_s)
        row = {"library": c.library, "case": c.name, "trnsci_s": t_trn, "reference": c.reference_name,
               "reference_s": t_ref, "ratio": t_trn / t_ref if t_ref > 0 else float("nan")}
        rows.append(row)
        echo(f"{c.library + ' ' + c.name:<40} {t_trn * 1e6:9.1f}us {c.reference_name:>11} {t_ref * 1e6:8.1f}us "
             f"{row['ratio']:6.2f}x")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="trnsci bench", description=__doc__.split("\n")[0])
    parser.add_argument("--lib", action="append", choices=LIBRARIES, help="only these libraries (repeatable)")
    parser.add_argument("--full", action="store_true", help="larger sizes (slower)")
    parser.add_argument("--budget", type=float, default=0.3, help="seconds of timing per side per case")
    args = parser.parse_args(argv or [])
    try:
        cases = collect(args.lib or LIBRARIES, quick=not args.full)
    except ImportError as exc:
        print(exc)
        return 1
    if not cases:
        print("trnsci bench: no installed library declares benchmark cases (entry point group 'trnsci.bench')")
        return 1
    print("Medians on this machine, torch backend as selected by the current settings; ratio = trnsci / reference.")
    run(cases, args.budget)
    return 0
