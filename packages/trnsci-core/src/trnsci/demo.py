"""``trnsci demo``: the installed demo parts (DF-MP2 against PySCF), then every library's NKI kernels on the emulator.

The parts come from the floors above the core, found through entry points
of group ``trnsci.demo`` (:mod:`trnsci.plugins`); the core imports none of
them by name:

* a module with ``add_arguments(parser)`` and ``run(args, echo) -> bool``
  is a demo part: the umbrella's :mod:`trnsci.chem_demo` (DF-MP2 on real
  molecules with :func:`trnsci.chem.df_mp2` against PySCF's ``DFMP2``) is one;
* a module with ``kernel_cases()`` returning :class:`KernelCase` objects
  is a library's kernel part. Every case runs once on the torch path and once
  through backend ``"simulator"``; the demo prints the agreement and the
  emulator's modeled kernel profile.

Usage::

    trnsci demo [--quick] [--backend auto|torch|nki|simulator]
                [--no-kernels] [--kernels-only] [--profiles] [part options]

(``trnsci demo --help`` lists the options of the installed parts too.)
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from trnsci import plugins
from trnsci.backend import LIBRARIES


@dataclass
class KernelCase:
    """One demo kernel run: ``call()`` once on torch and once on the simulator.

    ``call`` returns a tensor (or anything ``torch.as_tensor`` takes), or a
    tuple/list of them (compared part by part). Each part's error is
    ``max|kernel - torch| / max(1, max|torch|)``, in complex128 for complex
    parts (so imaginary parts count) and float64 otherwise; ``err`` is the
    largest over the parts and must be ``<= tol`` (state why in the
    library's ``kernel_cases``). ``tol=0`` means bit-identical: every part
    must have the torch part's dtype and shape and be ``torch.equal`` to it
    (integer outputs are compared this way whatever ``tol``, since float64
    would round integers above 2**53). ``shape`` describes the problem;
    ``expect`` names kernels that must be among those run (a case whose
    call falls back to torch for some step then fails instead of agreeing
    trivially).
    """

    library: str
    name: str
    shape: str
    call: Callable[[], object]
    tol: float
    expect: tuple[str, ...] = ()


def demo_plugins() -> list[plugins.Plugin]:
    """Every module declared in entry point group ``trnsci.demo`` (loaded, or with the reason it failed)."""
    return plugins.load("trnsci.demo")


def kernel_case_modules() -> dict[str, object]:
    """``{name: module}`` for every installed demo module that has ``kernel_cases``."""
    return {p.name: p.module for p in demo_plugins() if p.ok and callable(getattr(p.module, "kernel_cases", None))}


def _parts(out) -> list[torch.Tensor]:
    """A case's result as a flat list of tensors (tuples/lists are taken apart, in order)."""
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _parts(o)]
    return [torch.as_tensor(out)]


def _exact(t: torch.Tensor) -> bool:
    return not (t.is_floating_point() or t.is_complex())


def _rel_err(r: torch.Tensor, g: torch.Tensor) -> float:
    """``max|g - r| / max(1, max|r|)`` in complex128 (complex parts) or float64; inf for NaN."""
    if not r.numel():
        return 0.0
    wide = torch.complex128 if r.is_complex() or g.is_complex() else torch.float64
    r64, g64 = r.to(wide), g.to(wide)
    e = float((g64 - r64).abs().max()) / max(1.0, float(r64.abs().max()))
    return e if e == e else float("inf")


def compare(ref, got, tol: float) -> tuple[float, bool]:
    """``(err, agrees)`` of a case's simulator result ``got`` against its torch result ``ref``.

    See :class:`KernelCase`: ``err`` is the largest part error; with
    ``tol == 0`` (or an integer part) agreement is dtype and bit equality.

    Examples
    --------
    >>> import torch
    >>> from trnsci.demo import compare
    >>> ref = torch.tensor([1.0, 2.0], dtype=torch.float64)
    >>> compare(ref, torch.tensor([1.0, 2.5], dtype=torch.float64), 0.3)  # 0.5 / max(1, 2)
    (0.25, True)
    >>> compare(ref, ref.float(), 0.0)  # equal values, but not the same bits (dtype)
    (inf, False)
    >>> compare(torch.tensor([1j]), torch.tensor([-1j]), 1.0)  # imaginary parts count
    (2.0, False)
    """
    refs, gots = _parts(ref), _parts(got)
    if len(refs) != len(gots) or any(r.shape != g.shape for r, g in zip(refs, gots)):
        return float("inf"), False
    err, ok = 0.0, True
    for r, g in zip(refs, gots):
        e = _rel_err(r, g)
        if tol == 0 or _exact(r) or _exact(g):
            same = r.dtype == g.dtype and torch.equal(r, g)
            if not same:
                ok, e = False, e or float("inf")  # equal values of another dtype still differ
        err = max(err, e)
    return err, ok and err <= tol


def run_kernel_case(case: KernelCase) -> dict:
    """Run a case on torch and on the simulator; agreement, kernel names and profile."""
    import trnsci
    from trnsci import nki

    with trnsci.use_backend("torch"):
        ref = case.call()
    with trnsci.use_backend("simulator"), nki.capture() as runs:
        got = case.call()
    err, agrees = compare(ref, got, case.tol)
    kernels = [r.kernel for r in runs]
    missing = [k for k in case.expect if k not in kernels]
    return {"case": case, "err": err, "ok": bool(runs) and agrees and not missing, "missing": missing,
            "kernels": kernels, "profiles": [r.profile for r in runs if r.profile is not None]}


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.3g}"


def _kernel_list(names: list[str]) -> str:
    """Kernel names in order of first run, with a count where one ran more than once."""
    counts: dict[str, int] = {}
    for k in names:
        counts[k] = counts.get(k, 0) + 1
    return ", ".join(k if c == 1 else f"{k} x{c}" for k, c in counts.items())


def kernel_row(r: dict, width: int = 44) -> str:
    """One table row of a :func:`run_kernel_case` result; ``width``: of the problem column."""
    case = r["case"]
    if case.tol == 0 and r["ok"]:
        agree = "ok  bit-identical"
    else:
        agree = f"{'ok ' if r['ok'] else 'BAD'} {r['err']:.1e} {'<=' if r['err'] <= case.tol else '> '} " \
                f"{'0 (exact)' if case.tol == 0 else f'{case.tol:.1e}'}"
    profs = r["profiles"]
    modeled = f"{_us(sum(p.modeled_time_s for p in profs))} us" if profs else "-"
    kern = _kernel_list(r["kernels"]) or "none ran (torch fallback)"
    if r["missing"]:
        kern += f"; expected, not run: {', '.join(r['missing'])}"
    return f"  {case.library:<10} {case.name:<16} {case.shape:<{width}} {agree:<26} {modeled:>15}  {kern}"


def kernel_part(echo=print, profiles: bool = False) -> bool:
    """Part 2: every library's demo kernel cases, one table row each. True when all ran and agreed.

    A row: the case, its problem, the agreement with the torch path
    (``max|kernel - torch| / max(1, max|torch|)`` against the case's bound,
    or bit equality for exact cases), the emulator's modeled time (its
    timeline) summed over the case's kernel runs and the
    kernels that ran. ``profiles=True`` adds each kernel's full profile (its
    first run in the case).
    """
    from trnsci import nki

    echo("\nNKI kernels on the emulator: each case runs once on the torch path and once with backend 'simulator'")
    echo("(rel err = max|kernel - torch| / max(1, max|torch|); times are the emulator's cost model for trn1, "
         "not measured)")
    if nki.EMULATOR_ERROR:
        echo(f"  emulator unavailable: {nki.EMULATOR_ERROR}")
        return False
    mods = kernel_case_modules()
    cases = {name: list(mod.kernel_cases()) for name, mod in mods.items()}
    # the problem column as wide as its longest entry, so that the columns right of it line up
    width = max([44] + [len(c.shape) for cs in cases.values() for c in cs])
    echo(f"  {'library':<10} {'case':<16} {'problem':<{width}} {'vs torch: rel err <= bound':<26} "
         f"{'modeled time':>15}  kernel runs  [modeled]")
    ok, n, bad = True, 0, 0
    for p in demo_plugins():
        if not p.ok:
            echo(f"  {p.name:<10} FAILED to load {p.value} (from {p.dist}): {p.error}")
            ok = False
    for name, cs in cases.items():
        for case in cs:
            n += 1
            try:
                r = run_kernel_case(case)
            except Exception as exc:  # a broken case must not hide the others
                echo(f"  {name:<10} {case.name:<16} {case.shape:<{width}} FAILED ({type(exc).__name__}: {exc})")
                ok, bad = False, bad + 1
                continue
            echo(kernel_row(r, width))
            if profiles:
                seen = set()
                for run_name, prof in zip(r["kernels"], r["profiles"]):
                    if run_name not in seen:
                        seen.add(run_name)
                        echo(f"      {run_name}: " + str(prof).replace("\n", "\n      "))
            ok &= r["ok"]
            bad += not r["ok"]
    for lib in LIBRARIES:  # after the rows, so that a one-library install shows its own cases first
        if lib not in mods:
            echo(f"  {lib:<10} no demo kernel cases (not installed, or it declares none in entry point group "
                 "'trnsci.demo')")
    echo(f"  {n - bad} of {n} kernel cases agree with torch" if n else "  no kernel cases found")
    return ok


# ------------------------------------------------------------------ the command

def main(argv: list[str] | None = None, echo=print) -> int:
    """``trnsci demo``: every installed demo part, then the kernel cases; 0 when all checks passed.

    ``trnsci demo --distributed [options]`` runs the umbrella's distributed demo instead (DF-MP2, a 3-D
    FFT and a GEMM over a process group: ``torchrun --nproc-per-node N -m trnsci demo --distributed``,
    or ``--nproc N`` to spawn loopback ranks), found through the ``trnsci.workflows`` entry point.
    """
    argv = list(argv or [])
    if "--distributed" in argv:
        argv.remove("--distributed")
        try:
            module = plugins.workflow("distributed_demo", "trnsci demo --distributed")
        except ImportError as exc:  # the umbrella is not installed: say what to install, no traceback
            echo(str(exc))
            return 2
        return module.main(argv)
    parts = [p for p in demo_plugins() if p.ok and callable(getattr(p.module, "run", None))]
    parser = argparse.ArgumentParser(prog="trnsci demo", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="the smallest problem of each part (a smoke test)")
    parser.add_argument("--backend", default=None, choices=("auto", "torch", "nki", "simulator"))
    parser.add_argument("--no-kernels", action="store_true", help="skip the NKI kernel part")
    parser.add_argument("--kernels-only", action="store_true", help="only the NKI kernel part")
    parser.add_argument("--profiles", action="store_true",
                        help="print each demo kernel's full emulator profile under its row")
    parser.add_argument("--distributed", action="store_true",
                        help="the distributed demo instead (under torchrun, or --nproc N; see --distributed --help)")
    for p in parts:
        if callable(getattr(p.module, "add_arguments", None)):
            p.module.add_arguments(parser.add_argument_group(f"{p.name} ({p.value}, from {p.dist})"))
    args = parser.parse_args(argv)
    ok = True
    t0 = time.perf_counter()
    if not args.kernels_only:
        if not parts:
            echo("No demo parts are installed besides the kernel cases: the DF-MP2 demo comes with the umbrella "
                 "distribution: " + plugins.umbrella_hint("trnsci[chem]"))
        for p in parts:
            ok &= bool(p.module.run(args, echo))
    if not args.no_kernels:
        ok &= kernel_part(echo=echo, profiles=args.profiles)
    echo(f"\ndone in {time.perf_counter() - t0:.1f} s: {'all checks passed' if ok else 'SOME CHECKS FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
