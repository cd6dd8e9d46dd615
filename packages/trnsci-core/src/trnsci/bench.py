"""``trnsci bench``: every library against its peers in one process, and the report built from it.

Usage::

    trnsci bench [--lib LIB ...] [--quick] [--json F] [--md F] [--plots DIR]
                 [--budget S] [--rounds R] [--no-kernels] [--no-chem]

Cases come from each library's benchmark module, found through the entry
point group ``trnsci.bench`` (name = library, value = the module); a
module exposes ``cases(quick) -> iterable of Case`` and may expose
``accuracy(quick) -> iterable of (op, implementation, size, error)`` for
the error-vs-size figures. Cases with the same library and name are one
row: trnsci against every peer named (torch, NumPy, SciPy, opt_einsum,
PySCF). An ImportError in a case module is reported with the missing
package's name, never skipped silently.

Timing: each row times trnsci and its peers in ``rounds`` rounds, the
implementations interleaved in an order rotated per round, after one
warm-up call each; a round's time is the median of repeated samples,
each long enough (>= 50 us) for the clock; the row reports the median
over rounds, the spread (max - min) / median, and ``ratio = trnsci /
best peer``. Only ratios measured in the same run mean anything on a
shared machine; the load average is recorded with the results.

The kernel table runs every library's demo kernel cases (``<lib>.demo``)
on the NKI emulator: HBM bytes against the compulsory minimum (each
kernel input read once, each output written once), instructions per
engine, modeled time and modeled Tensor Engine utilisation on trn1 and
trn2 -- all *modeled*, none measured.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata as md
import json
import math
import os
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from trnsci import plugins
from trnsci._progress import Progress
from trnsci.backend import LIBRARIES

ENTRY_POINT_GROUP = "trnsci.bench"


@dataclass
class Case:
    """One comparison: trnsci's call and one peer's on the same data.

    ``library`` and ``name`` identify the row (cases sharing them are one
    row with several peers); ``run`` and ``reference`` are thunks. ``op``
    and ``size`` place the row on the time-vs-size figure (by default
    parsed from ``name``: the first ``AxBxC`` / ``N^k`` / number token is
    the size, the rest the op); ``note`` says why trnsci is slower, when
    it is.
    """

    library: str
    name: str
    run: Callable[[], object]
    reference_name: str
    reference: Callable[[], object]
    op: str | None = None
    size: float | None = None
    note: str = ""
    target: float | None = None  # a row's own target ratio (e.g. rfft <= 0.6x fft); else :func:`target_for`


@dataclass
class Row:
    library: str
    name: str
    run: Callable[[], object]
    peers: dict = field(default_factory=dict)
    op: str = ""
    size: float | None = None
    note: str = ""
    target: float | None = None


#: The page holding the measurements behind each row's one-line reason.
NOTES_PAGE = "perf-notes.md"


def why(anchor: str, reason: str) -> str:
    """A row's ``note``: one or two sentences of ``reason`` and a link to the measurement behind it.

    ``anchor`` names a section of ``docs/perf-notes.md`` (written there as
    ``{#anchor}``), where the timings that support the reason are recorded.
    """
    return f"{reason.rstrip('.')} ([measured]({NOTES_PAGE}#{anchor}))."


# ------------------------------------------------------------------ discovery

def case_modules(libraries: Iterable[str] | None = None) -> tuple[dict[str, object], dict[str, str]]:
    """``({name: module}, {name: error})`` of the benchmark case modules, ``None`` meaning all of them.

    The modules are the entry points of group ``trnsci.bench``
    (:mod:`trnsci.plugins`): each library's ``<lib>.bench`` and the
    umbrella's DF-MP2 cases (``chem``); the core imports none of them by
    name. A module that fails to import is returned as an error naming the
    missing package, never skipped in silence.
    """
    wanted = None if libraries is None else set(libraries)
    mods: dict[str, object] = {}
    errors: dict[str, str] = {}
    for p in plugins.load(ENTRY_POINT_GROUP):
        if wanted is not None and p.name not in wanted:
            continue
        if p.ok:
            mods[p.name] = p.module
        else:
            errors[p.name] = f"{p.name}: benchmark cases ({p.value}, from {p.dist}) {p.error}"
    return mods, errors


def _import_error_text(lib: str, exc: ImportError) -> str:
    missing = getattr(exc, "name", None)
    if missing:
        return f"{lib}: benchmark cases need the package '{missing.split('.')[0]}', which is not importable ({exc})"
    return f"{lib}: benchmark cases failed to import: {exc}"


_SIZE = re.compile(r"^(\d+(?:x\d+)*|\d+\^\d+)$")


def _op_and_size(name: str) -> tuple[str, float | None]:
    """``"fft 64x1024 complex64"`` -> ``("fft complex64", 65536.0)``."""
    words = name.split()
    for i, w in enumerate(words):
        m = _SIZE.match(w.rstrip(","))
        if m:
            tok = m.group(1)
            if "^" in tok:
                a, b = tok.split("^")
                size = float(int(a) ** int(b))
            else:
                size = float(math.prod(int(p) for p in tok.split("x")))
            return " ".join(words[:i] + words[i + 1:]), size
    return name, None


def collect(libraries: Iterable[str] | None, quick: bool) -> tuple[list[Row], dict[str, str], dict[str, object]]:
    """Rows (cases merged by library and name), import errors, and the modules."""
    mods, errors = case_modules(libraries)
    rows: dict[tuple[str, str], Row] = {}
    for lib, mod in mods.items():
        try:
            got = list(mod.cases(quick=quick))
        except ImportError as exc:  # a case generator importing a peer lazily
            errors[lib] = _import_error_text(lib, exc)
            continue
        for c in got:
            key = (c.library, c.name)
            row = rows.get(key)
            if row is None:
                op, size = _op_and_size(c.name)
                row = rows[key] = Row(c.library, c.name, c.run, {}, c.op or op,
                                      c.size if c.size is not None else size, c.note, c.target)
            row.peers[c.reference_name] = c.reference
            row.note = row.note or c.note
            row.target = row.target or c.target
    return list(rows.values()), errors, mods


# ------------------------------------------------------------------ timing

def _sample(fn: Callable[[], object], reps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps


def _reps_for(fn: Callable[[], object], sample_s: float) -> int:
    t0 = time.perf_counter()
    fn()  # warm-up: first-call costs (planning, caches, thread pools) stay out of the samples
    once = time.perf_counter() - t0
    return max(1, min(2000, int(sample_s / max(once, 1e-9))))


def time_row(impls: dict[str, Callable[[], object]], rounds: int = 3, budget_s: float = 0.2,
             pause_s: float = 0.05, sample_s: float = 50e-6) -> dict[str, dict]:
    """Per implementation ``{"median": s, "spread": rel, "rounds": [...]}``, interleaved.

    Each round gives every implementation ``budget_s / rounds`` seconds of
    samples (at least 3) in an order rotated per round; ``pause_s`` before
    each lets the other library's idle BLAS/OpenMP threads stop spinning.
    """
    names = list(impls)
    reps = {n: _reps_for(impls[n], sample_s) for n in names}
    per_round: dict[str, list[float]] = {n: [] for n in names}
    share = budget_s / max(1, rounds)
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for n in order:
            if pause_s:
                time.sleep(pause_s)
            fn, k = impls[n], reps[n]
            samples = []
            start = time.perf_counter()
            while len(samples) < 3 or (time.perf_counter() - start < share and len(samples) < 200):
                samples.append(_sample(fn, k))
            per_round[n].append(statistics.median(samples))
    out = {}
    for n, v in per_round.items():
        med = statistics.median(v)
        out[n] = {"median": med, "spread": (max(v) - min(v)) / med if med > 0 else 0.0, "rounds": v}
    return out


#: Spread ((max - min) / median over rounds) above which a row's timing is re-taken, and, if no
#: attempt is steadier, reported as unsteady rather than judged against its target.
UNSTEADY = 0.5
RETRIES = 2


def _spread(t: dict[str, dict]) -> float:
    return max(v["spread"] for v in t.values())


def _steadiest(impls: dict[str, Callable[[], object]], rounds: int, budget_s: float, pause_s: float) -> dict:
    """:func:`time_row`, re-taken up to :data:`RETRIES` times while a spread exceeds :data:`UNSTEADY`
    (another job took the CPU for part of the row); the attempt with the smallest spread is kept."""
    best = time_row(impls, rounds=rounds, budget_s=budget_s, pause_s=pause_s)
    for _ in range(RETRIES):
        if _spread(best) <= UNSTEADY:
            break
        again = time_row(impls, rounds=rounds, budget_s=budget_s, pause_s=pause_s)
        if _spread(again) < _spread(best):
            best = again
    return best


#: Seconds OpenBLAS's workers may keep spinning after a multi-threaded call: a pause this long lets the next
#: torch call find its cores free (docs/perf-notes.md#design-openblas-spin). See :mod:`trnsci.hostblas`.
OPENBLAS_SPIN_S = 0.25


def pause_for(budget_s: float, quick: bool) -> float:
    """The pause before each implementation's samples in a round.

    With torch at more than one thread it outlasts OpenBLAS's spinning
    workers: a NumPy/SciPy peer's workers would otherwise hold a core
    while the next implementation's multi-threaded torch call waits at its
    barrier -- a cost no user of either library alone pays. At one thread
    a short pause lets idle threads settle. A zero budget (a smoke run)
    does not pause.
    """
    import torch

    if budget_s == 0:
        return 0.0
    if torch.get_num_threads() > 1:
        return OPENBLAS_SPIN_S
    return 0.02 if quick else 0.1


def target_for(t_torch_path: float) -> float:
    """The issue-23 target ratio for a row whose trnsci call takes ``t_torch_path`` seconds."""
    return 1.1 if t_torch_path > 100e-6 else 1.2 + 1e-6 / max(t_torch_path, 1e-12)


def run(rows: list[Row], *, rounds: int = 3, budget_s: float = 0.2, pause_s: float = 0.05, echo=print,
        progress: Progress | None = None) -> list[dict]:
    """Time every row; returns result dicts (and prints the aligned table through ``echo``)."""
    results = []
    width = max([44] + [len(f"{r.library} {r.name}") for r in rows])
    echo(f"{'case':<{width}} {'trnsci':>10} {'best peer':<28} {'peer':>10} {'ratio':>6} {'spread':>6}")
    for row in rows:
        if progress is not None:
            progress.step(f"{row.library} {row.name}")
        impls = {"trnsci": row.run, **row.peers}
        try:
            t = _steadiest(impls, rounds, budget_s, pause_s)
        except Exception as exc:  # noqa: BLE001 -- one broken case must not lose the others' results
            results.append({"library": row.library, "case": row.name, "error": f"{type(exc).__name__}: {exc}"})
            if progress is not None:
                progress.done()
            echo(f"{row.library + ' ' + row.name:<{width}} failed: {type(exc).__name__}: {exc}")
            continue
        peers = {n: v for n, v in t.items() if n != "trnsci"}
        best = min(peers, key=lambda n: peers[n]["median"])
        mine = t["trnsci"]["median"]
        ratio = mine / peers[best]["median"] if peers[best]["median"] > 0 else float("nan")
        target = row.target if row.target is not None else target_for(mine)
        unsteady = _spread(t) > UNSTEADY
        res = {"library": row.library, "case": row.name, "op": row.op, "size": row.size, "unsteady": unsteady,
               "trnsci_s": mine, "trnsci_spread": t["trnsci"]["spread"],
               "peers": {n: {"median_s": v["median"], "spread": v["spread"]} for n, v in peers.items()},
               "best_peer": best, "best_peer_s": peers[best]["median"], "ratio": ratio,
               "target": target, "meets_target": bool(ratio <= target), "note": row.note}
        results.append(res)
        if progress is not None:
            progress.done()
        echo(f"{row.library + ' ' + row.name:<{width}} {_fmt_t(mine):>10} {best[:28]:<28} "
             f"{_fmt_t(peers[best]['median']):>10} {ratio:5.2f}x {max(v['spread'] for v in t.values()):5.0%}")
    return results


def _fmt_t(s: float) -> str:
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.1f} us"


# ------------------------------------------------------------------ accuracy

def accuracy(mods: dict[str, object], quick: bool, errors: dict[str, str]) -> list[dict]:
    """Error-vs-size points from the modules that have ``accuracy(quick)``."""
    out = []
    for lib, mod in mods.items():
        fn = getattr(mod, "accuracy", None)
        if fn is None:
            continue
        try:
            for op, impl, size, err in fn(quick=quick):
                out.append({"library": lib, "op": op, "impl": impl, "size": float(size), "error": float(err)})
        except ImportError as exc:
            errors[lib] = _import_error_text(lib, exc)
    return out


# ------------------------------------------------------------------ kernels (emulator, modeled)

def _retarget(prof, name: str) -> tuple[float, float]:
    """(modeled lower-bound time, TE utilisation) of a trn1 profile re-modeled for ``name``.

    The emulator's cycle counts per instruction do not depend on the
    target; only clocks, DMA rate and Tensor Engine peaks do. The
    utilisation is the ideal Tensor Engine time over the profile's timeline
    time scaled by the ratio of the two targets' lower bounds (the timeline's
    stall and DMA-efficiency figures are the same on both targets: see
    :mod:`trnsci.nki.emulator.profile`), so on the profile's own target it is
    :meth:`KernelProfile.tensor_engine_utilization`.
    """
    P = importlib.import_module("trnsci.nki.emulator.profile")  # the module (the package exports a function so named)
    src, dst = P.get_target(prof.target), P.get_target(name)
    times = {}
    for eng, t in prof.engine_time_s.items():
        if eng == "dma":
            hidden = prof.dma_transfers * P.DMA_LATENCY_S / P.DMA_QUEUES
            times[eng] = (t - hidden) * src.dma_bytes_per_s / dst.dma_bytes_per_s + hidden
        else:
            times[eng] = t * src.clock_hz[eng] / dst.clock_hz[eng]
    lower = max(times.values()) if times else 0.0
    ideal = prof.flops_bf16 / dst.te_flops_bf16 + prof.flops_fp32 / dst.te_flops_fp32
    src_lower = prof.modeled_time_lower_s
    timeline = prof.modeled_time_s * (lower / src_lower) if src_lower > 0 else lower
    return lower, (ideal / timeline if timeline > 0 else 0.0)


def kernel_table(libraries: Iterable[str] | None, echo=print, progress_stream=None) -> list[dict]:
    """Run every demo kernel case on the emulator (of ``libraries``; ``None``: all); the modeled figures per case."""
    from trnsci import demo, nki

    if nki.SOURCE != "emulator":
        echo(f"kernel table skipped: kernels come from {nki.SOURCE}, not the emulator")
        return []
    from trnsci.nki import emulator

    cases = []
    for lib, mod in demo.kernel_case_modules().items():
        if libraries is None or lib in libraries:
            cases.extend(mod.kernel_cases())
    rows = []
    inner = emulator.profile
    compulsory: list[int] = []

    def counting(kernel, *arrays, **constants):
        outs, prof = inner(kernel, *arrays, **constants)
        outs_t = outs if isinstance(outs, tuple) else (outs,)
        compulsory.append(sum(getattr(a, "nbytes", 0) for a in arrays) + sum(getattr(o, "nbytes", 0) for o in outs_t))
        return outs, prof

    progress = Progress(len(cases), progress_stream)
    emulator.profile = counting
    try:
        for case in cases:
            progress.step(f"kernel {case.library} {case.name}")
            compulsory.clear()
            r = demo.run_kernel_case(case)
            profs = r["profiles"]
            if not profs:
                rows.append({"library": case.library, "case": case.name, "shape": case.shape, "ok": r["ok"],
                             "kernels": r["kernels"]})
                continue
            instr: dict[str, int] = {}
            for p in profs:
                for k, v in p.instructions.items():
                    instr[k] = instr.get(k, 0) + v
            flops = sum(p.flops for p in profs)
            hbm = sum(p.hbm_bytes for p in profs)
            t1 = [_retarget(p, "trn1") for p in profs]
            t2 = [_retarget(p, "trn2") for p in profs]
            time1, time2 = sum(a for a, _ in t1), sum(a for a, _ in t2)
            P = importlib.import_module("trnsci.nki.emulator.profile")
            ideal1 = sum(p.flops_bf16 / P.TARGETS["trn1"].te_flops_bf16 + p.flops_fp32 / P.TARGETS["trn1"].te_flops_fp32
                         for p in profs)
            ideal2 = sum(p.flops_bf16 / P.TARGETS["trn2"].te_flops_bf16 + p.flops_fp32 / P.TARGETS["trn2"].te_flops_fp32
                         for p in profs)
            rows.append({
                "library": case.library, "case": case.name, "shape": case.shape, "ok": r["ok"], "err": r["err"],
                "kernels": sorted(set(r["kernels"])), "runs": len(profs),
                "hbm_bytes": hbm, "hbm_min_bytes": sum(compulsory), "instructions": instr, "flops": flops,
                "flops_fp32": sum(p.flops_fp32 for p in profs), "flops_bf16": sum(p.flops_bf16 for p in profs),
                "modeled_s": {"trn1": time1, "trn2": time2},
                "te_util": {"trn1": ideal1 / time1 if time1 else 0.0, "trn2": ideal2 / time2 if time2 else 0.0},
            })
    finally:
        emulator.profile = inner
        progress.done()
    return rows


def print_kernels(rows: list[dict], echo=print) -> None:
    echo("\nKernels on the NKI emulator [all times and utilisations modeled, not measured]")
    echo(f"{'case':<34} {'HBM B':>11} {'min B':>11} {'x min':>6} {'tensor':>7} {'vector':>7} {'scalar':>7} "
         f"{'gpsimd':>7} {'dma':>6} {'trn1 us':>8} {'TE% trn1':>8} {'trn2 us':>8} {'TE% trn2':>8}")
    for r in rows:
        if "hbm_bytes" not in r:
            echo(f"{r['library'] + ' ' + r['case']:<34} (no profile: kernels {r['kernels']})")
            continue
        i = r["instructions"]
        over = r["hbm_bytes"] / r["hbm_min_bytes"] if r["hbm_min_bytes"] else float("nan")
        echo(f"{r['library'] + ' ' + r['case']:<34} {r['hbm_bytes']:>11,} {r['hbm_min_bytes']:>11,} {over:6.2f} "
             f"{i.get('tensor', 0):>7} {i.get('vector', 0):>7} {i.get('scalar', 0):>7} {i.get('gpsimd', 0):>7} "
             f"{i.get('dma', 0):>6} {r['modeled_s']['trn1'] * 1e6:8.2f} {r['te_util']['trn1']:8.1%} "
             f"{r['modeled_s']['trn2'] * 1e6:8.2f} {r['te_util']['trn2']:8.1%}")


# ------------------------------------------------------------------ machine

def machine() -> dict:
    """What the numbers were measured on: CPU, cores, load, versions, torch's BLAS/FFT build."""
    info = {"platform": platform.platform(), "python": platform.python_version(), "cpu": platform.processor(),
            "logical_cpus": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        info["loadavg"] = list(os.getloadavg())
    except OSError:
        pass
    import torch

    info["torch_threads"] = torch.get_num_threads()
    info["thread_env"] = {k: os.environ[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
                          if k in os.environ}
    cfg = torch.__config__.show()
    for key in ("BLAS_INFO", "LAPACK_INFO", "USE_MKL", "USE_OPENMP"):
        m = re.search(rf"{key}=([^,\s]+)", cfg)
        if m:
            info[f"torch_{key.lower()}"] = m.group(1)
    info["torch_mkl"] = bool(torch.backends.mkl.is_available())
    for dist in ("trnsci-core", "trnsci", "torch", "numpy", "scipy", "opt_einsum", "pyscf"):
        try:
            info[f"version_{dist}"] = md.version(dist)
        except md.PackageNotFoundError:
            try:
                info[f"version_{dist}"] = getattr(importlib.import_module(dist), "__version__", "?")
            except ImportError:
                info[f"version_{dist}"] = "not installed"
    try:
        import scipy.linalg  # noqa: F401 -- its OpenBLAS too

        from trnsci import hostblas

        info["openblas_threads"] = [get() for get, _ in hostblas.pools()]
    except ImportError:
        pass
    try:
        import numpy as np

        blas = np.show_config(mode="dicts").get("Build Dependencies", {}).get("blas", {})
        info["numpy_blas"] = f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
    except Exception:  # noqa: BLE001 -- older NumPy: not worth failing a report for
        pass
    return info


# ------------------------------------------------------------------ chem (DF-MP2)

# ------------------------------------------------------------------ main

def _ratios(doc: dict) -> dict[str, float]:
    """``{"library|case": ratio}`` of a results document (for ``--compare``)."""
    return {f"{r['library']}|{r['case']}": r["ratio"] for r in doc.get("rows", []) if "ratio" in r}


def _verdicts(doc: dict) -> dict[str, dict]:
    """``{"library|case": {"ratio", "target", "meets_target", "unsteady"}}`` of a results document."""
    keep = ("ratio", "target", "meets_target", "unsteady")
    return {f"{r['library']}|{r['case']}": {k: r.get(k) for k in keep}
            for r in doc.get("rows", []) if "ratio" in r}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="trnsci bench", description=__doc__.split("\n")[0])
    parser.add_argument("--lib", action="append", choices=LIBRARIES, help="only these libraries (repeatable)")
    parser.add_argument("--quick", action="store_true", help="small sizes and short timing (CI)")
    parser.add_argument("--full", action="store_true", help=argparse.SUPPRESS)  # old spelling of "not --quick"
    parser.add_argument("--json", type=Path, help="write the results as JSON")
    parser.add_argument("--md", type=Path, help="write the report as Markdown (docs/benchmarks.md)")
    parser.add_argument("--plots", type=Path, help="write the figures (PNG) into this directory")
    parser.add_argument("--budget", type=float, default=None, help="seconds of timing per implementation per row")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds per row")
    parser.add_argument("--no-kernels", action="store_true", help="skip the emulator kernel table")
    parser.add_argument("--no-chem", action="store_true", help="skip DF-MP2 against PySCF")
    parser.add_argument("--no-accuracy", action="store_true", help="skip the error-vs-size sweeps")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads for the run")
    parser.add_argument("--from-json", type=Path, default=None,
                        help="no timing: rebuild --md/--plots from the JSON of an earlier run")
    parser.add_argument("--compare", type=Path, action="append", default=[],
                        help="JSON of another run (e.g. another thread count): its ratios become a column")
    args = parser.parse_args(argv or [])
    quick = args.quick
    budget = args.budget if args.budget is not None else (0.06 if quick else 0.4)
    rounds = args.rounds if args.rounds is not None else (3 if quick else 5)
    if budget < 0 or rounds < 1:
        parser.error("--budget must be >= 0 and --rounds >= 1")
    if args.from_json is not None:
        try:
            doc = json.loads(args.from_json.read_text())
        except (OSError, ValueError) as exc:
            parser.error(f"--from-json {args.from_json}: {exc}")
        _write_report(doc, args)
        return 0
    libs = args.lib or list(LIBRARIES)
    if args.threads is not None:
        if args.threads < 1:
            parser.error("--threads must be >= 1")
        import torch

        torch.set_num_threads(args.threads)
    others = []
    for f in args.compare:
        try:
            others.append(json.loads(f.read_text()))
        except (OSError, ValueError) as exc:
            parser.error(f"--compare {f}: {exc}")
    started = time.time()
    info = machine()
    if args.lib is None:  # every declared case module: the six libraries and the umbrella's DF-MP2 ("chem")
        libs = None if not args.no_chem else [p.name for p in plugins.load(ENTRY_POINT_GROUP) if p.name != "chem"]
    rows, errors, mods = collect(libs, quick)
    for err in errors.values():
        print(f"trnsci bench: {err}", file=sys.stderr)
    if args.lib:  # a library asked for by name that is not installed is said so, not folded into "no cases"
        have = {ep.name for ep in plugins.declared(ENTRY_POINT_GROUP)}
        for lib in dict.fromkeys(args.lib):
            if lib not in have:
                print(f"trnsci bench: --lib {lib}: not installed, or it declares no benchmark cases (entry point "
                      f"group {ENTRY_POINT_GROUP!r}): pip install {lib} --find-links WHEELHOUSE", file=sys.stderr)
    if not rows:
        which = f"for --lib {', '.join(dict.fromkeys(args.lib))}" if args.lib else "(no installed library ships any)"
        print(f"trnsci bench: no benchmark cases found {which}", file=sys.stderr)
        return 1
    print(f"trnsci bench{' --quick' if quick else ''}: {len(rows)} rows, {rounds} interleaved rounds, "
          f"{info['cpu']}, {info['logical_cpus']} logical CPUs, torch threads {info['torch_threads']}, "
          f"load {info.get('loadavg', ['?'])[0]}")
    print("median time per call; ratio = trnsci / best peer; spread = (max - min) / median over rounds")
    results = run(rows, rounds=rounds, budget_s=budget, pause_s=pause_for(budget, quick),
                  progress=Progress(len(rows)))
    acc = [] if args.no_accuracy else accuracy(mods, quick, errors)
    kern = []
    if not args.no_kernels:
        kern = kernel_table(libs)
        print_kernels(kern)
    try:
        info["loadavg_end"] = list(os.getloadavg())
    except OSError:
        pass
    info["seconds"] = round(time.time() - started, 1)
    info["command"] = "trnsci bench " + " ".join(argv or [])
    doc = {"machine": info, "quick": quick, "rows": results, "accuracy": acc, "kernels": kern,
           "errors": errors,
           "compare": [{"machine": o.get("machine", {}), "ratios": _ratios(o), "verdicts": _verdicts(o)}
                       for o in others]}
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    _write_report(doc, args)
    return 1 if errors else 0


def _write_report(doc: dict, args: argparse.Namespace) -> None:
    from trnsci import _report

    figures = _report.plots(doc, args.plots) if args.plots else {}
    if args.md:
        args.md.parent.mkdir(parents=True, exist_ok=True)
        args.md.write_text(_report.markdown(doc, figures, args.md.parent, args.plots))
