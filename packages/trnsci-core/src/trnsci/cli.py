"""The ``trnsci`` command: ``info``, ``demo``, ``bench``, ``calibrate``."""

from __future__ import annotations

import argparse
import importlib.metadata as md
import platform
import sys
import time
from collections.abc import Callable

from trnsci import backend, dispatch, nki, plugins, runtime
from trnsci._version import __version__

# distributions: the core, the six libraries, the umbrella
PACKAGES = ("trnsci-core", *backend.LIBRARIES, "trnsci")


def _version(dist: str) -> str:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return "not installed"


def _import_libraries() -> dict[str, str]:
    """Import every installed library (which registers its ops); name -> status.

    Libraries are found through their ``trnsci.libraries`` entry points
    (:mod:`trnsci.plugins`): the core never imports a library by name.
    """
    status = {lib: "not installed" for lib in backend.LIBRARIES}
    for p in plugins.load("trnsci.libraries"):
        status[p.name] = getattr(p.module, "__version__", "?") if p.ok else f"not importable ({p.error})"
    return status


def cmd_info(args: argparse.Namespace) -> int:
    libs = _import_libraries()
    out = []
    out.append(f"trnsci {__version__}  (Python {platform.python_version()}, {platform.machine()})")
    out.append("\npackages")
    for dist in PACKAGES:
        imported = libs.get(dist, __version__ if dist == "trnsci-core" else "")
        out.append(f"  {dist:<11} {_version(dist):<14} {'imported: ' + imported if imported else ''}".rstrip())
    for dist in ("torch", "numpy", "scipy", "ml_dtypes", "opt_einsum", "pyscf"):
        out.append(f"  {dist:<11} {_version(dist)}")
    out.append("\nkernels")
    broken = f"  (emulator unavailable: {nki.EMULATOR_ERROR})" if nki.EMULATOR_ERROR else ""
    out.append(f"  NKI source      {nki.SOURCE}{broken}")
    rt = runtime.detect(refresh=True)
    out.extend(line for line in rt.lines() if not line.lstrip().startswith("NeuronCore"))
    out.append(f"  NeuronCore      {'present' if nki.has_neuron_device() else 'absent'}")
    out.append(f"  REQUIRE_NKI     {'on' if dispatch.require_nki() else 'off'}")
    out.append("\nbackend (effective, origin)")
    suite = backend.resolve(None)
    out.append(f"  {'suite':<10} {suite.name:<10} {suite.origin}")
    for lib in backend.LIBRARIES:
        s = backend.resolve(lib)
        out.append(f"  {lib:<10} {s.name:<10} {s.origin}")
    out.append("\nNKI thresholds under 'auto' (op, metric >= value, origin)")
    reg = dispatch.registry()
    if not reg:
        out.append("  (no operations registered)")
    for op in sorted(reg):
        value, origin = dispatch.threshold(op)
        out.append(f"  {op:<32} {reg[op].metric:<8} {value:<12g} {origin}")
    out.append(f"  calibration file: {dispatch.calibration_path()}")
    print("\n".join(out))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from trnsci import demo

    return demo.main(args.rest)


def cmd_bench(args: argparse.Namespace) -> int:
    from trnsci import bench

    return bench.main(args.rest)


def calibrate(path=None, sizes=(64, 128, 256, 512, 1024, 2048, 4096), repeats: int = 3, echo=print) -> dict[str, float]:
    """Time torch against NKI for every op with a probe; write the break-even sizes.

    For each size scale ``n`` the op's probe builds one problem; the
    threshold is the smallest size metric at which the kernel was faster,
    or infinity (never NKI) when it never was. Needs a NeuronCore.
    """
    if not nki.has_neuron_device():
        raise RuntimeError(
            "there is nothing to calibrate on this machine: no NeuronCore with the Neuron SDK was found. "
            "Thresholds stay at their defaults; `trnsci info` lists them."
        )
    found: dict[str, float] = {}
    for op, entry in sorted(dispatch.registry().items()):
        if entry.probe is None:
            continue
        best = float("inf")
        for n in sizes:
            size, torch_thunk, nki_thunk = entry.probe(n)
            t_torch = _best_time(torch_thunk, repeats)
            t_nki = _best_time(nki_thunk, repeats)
            echo(f"  {op:<28} n={n:<6} torch {t_torch * 1e3:9.3f} ms   nki {t_nki * 1e3:9.3f} ms")
            if t_nki < t_torch:
                best = size
                break
        found[op] = best
    dispatch.write_calibration(found, path, measured_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    return found


def _best_time(thunk: Callable, repeats: int) -> float:
    thunk()  # warm-up: compile and place operands
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        thunk()
        best = min(best, time.perf_counter() - t0)
    return best


def cmd_calibrate(args: argparse.Namespace) -> int:
    _import_libraries()
    try:
        found = calibrate(path=args.output)
    except RuntimeError as exc:
        print(f"trnsci calibrate: {exc}")
        return 2
    path = args.output or dispatch.calibration_path()
    print(f"wrote {len(found)} thresholds to {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="trnsci", description="The scientific-computing suite for AWS Trainium.")
    parser.add_argument("--version", action="version", version=f"trnsci {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="versions, kernel source, backends and thresholds").set_defaults(fn=cmd_info)
    p = sub.add_parser("demo", help="DF-MP2 on real molecules vs PySCF, then each library's NKI kernels (emulator)")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(fn=cmd_demo)
    p = sub.add_parser("bench", help="quick speed ratios against the reference libraries")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(fn=cmd_bench)
    p = sub.add_parser("calibrate", help="measure NKI break-even sizes on this machine's NeuronCore")
    p.add_argument("--output", type=__import__("pathlib").Path, default=None, help="calibration file to write")
    p.set_defaults(fn=cmd_calibrate)
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("demo", "bench"):
        # their options, --help included, belong to the subcommand's own parser
        args = parser.parse_args(argv[:1])
        args.rest = argv[1:]
    else:
        args = parser.parse_args(argv)
    try:
        return args.fn(args)
    except ValueError as exc:  # e.g. a bad TRNSCI_BACKEND value
        print(f"trnsci {args.command}: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `trnsci info | head`: the reader left; end quietly, as other tools do
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the interpreter's final flush too
        return 141  # 128 + SIGPIPE, the status a shell reports for a command killed by the closed pipe


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
