"""``trnsci demo``: DF-MP2 on real molecules against PySCF, then every library's NKI kernels on the emulator.

Part 1 (needs PySCF, ``pip install 'trnsci[chem]'``): for each molecule, RHF
with PySCF, then :func:`trnsci.chem.df_mp2` and PySCF's own ``DFMP2`` on the
same orbitals and auxiliary basis, timed in this run, and a table.

Part 2: each library's demo kernel cases. A library takes part by shipping a
module ``<lib>.demo`` with a function ``kernel_cases()`` returning
:class:`KernelCase` objects (found by name, like ``<lib>.bench``). Every
case runs once on the torch path and once through backend ``"simulator"``;
the demo prints the agreement and the emulator's modeled kernel profile.

Usage::

    trnsci demo [--molecule NAME ...] [--xyz FILE] [--basis cc-pvdz]
                [--backend auto|torch|nki|simulator] [--dtype float64|float32]
                [--no-kernels] [--kernels-only] [--profiles] [--frozen-core]
"""

from __future__ import annotations

import argparse
import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from trnsci._progress import Progress
from trnsci.backend import LIBRARIES

# Geometries in Angstrom (experimental / standard reference structures).
MOLECULES = {
    "h2o": "O 0 0 0.1173; H 0 0.7572 -0.4692; H 0 -0.7572 -0.4692",
    "nh3": "N 0 0 0.1162; H 0 0.9397 -0.2711; H 0.8138 -0.4699 -0.2711; H -0.8138 -0.4699 -0.2711",
    "ch4": "C 0 0 0; H 0.6291 0.6291 0.6291; H -0.6291 -0.6291 0.6291; H -0.6291 0.6291 -0.6291; "
           "H 0.6291 -0.6291 -0.6291",
    "hf": "H 0 0 0; F 0 0 0.917",
    "n2": "N 0 0 0; N 0 0 1.0977",
    "c2h4": "C 0 0 0.6695; C 0 0 -0.6695; H 0 0.9289 1.2321; H 0 -0.9289 1.2321; H 0 0.9289 -1.2321; "
            "H 0 -0.9289 -1.2321",
    "benzene": "C 0 1.3970 0; C 1.2098 0.6985 0; C 1.2098 -0.6985 0; C 0 -1.3970 0; C -1.2098 -0.6985 0; "
               "C -1.2098 0.6985 0; H 0 2.4810 0; H 2.1486 1.2405 0; H 2.1486 -1.2405 0; H 0 -2.4810 0; "
               "H -2.1486 -1.2405 0; H -2.1486 1.2405 0",
    "naphthalene": "C 0 0.7140 0; C 0 -0.7140 0; C 1.2430 1.4010 0; C -1.2430 1.4010 0; C 1.2430 -1.4010 0; "
                   "C -1.2430 -1.4010 0; C 2.4330 0.7050 0; C -2.4330 0.7050 0; C 2.4330 -0.7050 0; "
                   "C -2.4330 -0.7050 0; H 1.2440 2.4870 0; H -1.2440 2.4870 0; H 1.2440 -2.4870 0; "
                   "H -1.2440 -2.4870 0; H 3.3780 1.2450 0; H -3.3780 1.2450 0; H 3.3780 -1.2450 0; "
                   "H -3.3780 -1.2450 0",
}
MOLECULES["water"], MOLECULES["ammonia"], MOLECULES["methane"] = MOLECULES["h2o"], MOLECULES["nh3"], MOLECULES["ch4"]
DEFAULT_MOLECULES = ("h2o", "nh3", "benzene")

INSTALL_HINT = "pip install 'trnsci[chem]'   (or: pip install pyscf)"


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


def kernel_case_modules() -> dict[str, object]:
    """``{library: module}`` for every installed ``<lib>.demo`` that has ``kernel_cases``."""
    found = {}
    for lib in LIBRARIES:
        try:
            mod = importlib.import_module(f"{lib}.demo")
        except ImportError:
            continue
        if callable(getattr(mod, "kernel_cases", None)):
            found[lib] = mod
    return found


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


def kernel_row(r: dict) -> str:
    """One table row of a :func:`run_kernel_case` result."""
    case = r["case"]
    if case.tol == 0 and r["ok"]:
        agree = "ok  bit-identical"
    else:
        agree = f"{'ok ' if r['ok'] else 'BAD'} {r['err']:.1e} {'<=' if r['err'] <= case.tol else '> '} " \
                f"{'0 (exact)' if case.tol == 0 else f'{case.tol:.1e}'}"
    profs = r["profiles"]
    lo = sum(p.modeled_time_lower_s for p in profs)
    hi = sum(p.modeled_time_upper_s for p in profs)
    modeled = f"{_us(lo)}-{_us(hi)} us" if profs else "-"
    kern = _kernel_list(r["kernels"]) or "none ran (torch fallback)"
    if r["missing"]:
        kern += f"; expected, not run: {', '.join(r['missing'])}"
    return f"  {case.library:<10} {case.name:<16} {case.shape:<44} {agree:<26} {modeled:>15}  {kern}"


def kernel_part(echo=print, profiles: bool = False) -> bool:
    """Part 2: every library's demo kernel cases, one table row each. True when all ran and agreed.

    A row: the case, its problem, the agreement with the torch path
    (``max|kernel - torch| / max(1, max|torch|)`` against the case's bound,
    or bit equality for exact cases), the emulator's modeled time summed
    over the case's kernel runs (all engines overlapped .. serial) and the
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
    echo(f"  {'library':<10} {'case':<16} {'problem':<44} {'vs torch: rel err <= bound':<26} "
         f"{'modeled time':>15}  kernel runs  [modeled]")
    mods = kernel_case_modules()
    ok, n, bad = True, 0, 0
    for lib in LIBRARIES:
        if lib not in mods:
            echo(f"  {lib:<10} no demo kernel cases yet (a library adds them in {lib}/demo.py: kernel_cases())")
            continue
        for case in mods[lib].kernel_cases():
            n += 1
            try:
                r = run_kernel_case(case)
            except Exception as exc:  # a broken case must not hide the others
                echo(f"  {lib:<10} {case.name:<16} {case.shape:<44} FAILED ({type(exc).__name__}: {exc})")
                ok, bad = False, bad + 1
                continue
            echo(kernel_row(r))
            if profiles:
                seen = set()
                for run_name, prof in zip(r["kernels"], r["profiles"]):
                    if run_name not in seen:
                        seen.add(run_name)
                        echo(f"      {run_name}: " + str(prof).replace("\n", "\n      "))
            ok &= r["ok"]
            bad += not r["ok"]
    echo(f"  {n - bad} of {n} kernel cases agree with torch" if n else "  no kernel cases found")
    return ok


# ------------------------------------------------------------------ DF-MP2

def _read_xyz(path: str) -> str:
    """Atoms of an .xyz file (count line, comment line, then 'El x y z' in Angstrom)."""
    with open(path) as fh:
        lines = [ln.strip() for ln in fh if ln.strip()]
    if lines and lines[0].split()[0].isdigit():
        lines = lines[2:]
    return "; ".join(" ".join(ln.split()[:4]) for ln in lines)


def _rhf(mol):
    """A converged RHF: density-fitted SCF for speed, then one conventional-RHF object holding its orbitals.

    Both DF-MP2 codes then see a plain (not density-fitted) RHF and take the
    MP2-fit auxiliary basis, so the comparison covers their whole pipelines.
    """
    from pyscf import scf

    dfmf = scf.RHF(mol).density_fit()
    dfmf.conv_tol = 1e-10
    dfmf.kernel()
    mf = scf.RHF(mol)
    mf.mo_coeff, mf.mo_occ, mf.mo_energy = dfmf.mo_coeff, dfmf.mo_occ, dfmf.mo_energy
    mf.e_tot, mf.converged = dfmf.e_tot, dfmf.converged
    return mf


def _short_backends(b: dict) -> str:
    vals = set(b.values())
    if len(vals) == 1:
        return vals.pop()
    return " ".join(f"{k}={v}" for k, v in b.items())


def dfmp2_part(molecules, basis, backend, dtype, frozen_core, echo=print) -> bool:
    """Part 1: the DF-MP2 table. True when every |dE| is within the dtype's bound."""
    from pyscf import gto
    from pyscf.mp.dfmp2 import DFMP2

    import trnblas  # noqa: F401  (imported up front: not part of the timed call)
    import trnsolver  # noqa: F401
    from trnsci import chem

    bound = 1e-8 if dtype == torch.float64 else 1e-5
    echo(f"DF-MP2 with trnsci.chem.df_mp2 vs PySCF DFMP2 ({basis}, B in {str(dtype).replace('torch.', '')}, "
         f"{'frozen core' if frozen_core else 'all electrons'}; same orbitals and auxiliary basis)")
    head = (f"  {'molecule':<12} {'nbf/naux/nocc':>14} {'E_corr trnsci':>16} {'E_corr PySCF':>16} {'|dE|':>8} "
            f"{'t trnsci':>9} {'t PySCF':>8}  backends")
    echo(head)
    ok = True
    progress = Progress(2 * len(molecules))  # a bar on a terminal, one line per step in a log
    for name, atoms in molecules:
        progress.step(f"{name}: SCF")
        mol = gto.M(atom=atoms, basis=basis, verbose=0)
        mf = _rhf(mol)
        ncore = _ncore(mol) if frozen_core else None
        progress.step(f"{name}: DF-MP2")
        r = chem.df_mp2(mf, frozen=ncore, dtype=dtype, backend=backend, progress=True)
        t = time.perf_counter()
        e_ref = float(DFMP2(mf, frozen=ncore).kernel()[0])
        t_ref = time.perf_counter() - t
        progress.done()
        de = abs(r.e_corr - e_ref)
        ok &= de <= bound
        echo(f"  {name:<12} {f'{r.nao}/{r.naux}/{r.nocc}':>14} {r.e_corr:16.10f} {e_ref:16.10f} {de:8.1e} "
             f"{r.timings['total']:8.2f}s {t_ref:7.2f}s  {_short_backends(r.backends)}")
    echo(f"  |dE| bound {bound:.0e} Eh: {'all within' if ok else 'EXCEEDED'}. Times are one run each on this "
         "machine (integrals included); `python benchmarks/bench_chem.py` repeats and interleaves them.")
    return ok


def _ncore(mol) -> int:
    from pyscf.data import elements

    return int(elements.chemcore(mol))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="trnsci demo", description=__doc__.split("\n")[0])
    parser.add_argument("--molecule", action="append", choices=sorted(MOLECULES), metavar="NAME",
                        help=f"built-in molecule (repeatable; one of {', '.join(sorted(MOLECULES))}); "
                             f"default {' '.join(DEFAULT_MOLECULES)}")
    parser.add_argument("--xyz", action="append", metavar="FILE", help="molecule from an .xyz file (repeatable)")
    parser.add_argument("--basis", default="cc-pvdz")
    parser.add_argument("--backend", default=None, choices=("auto", "torch", "nki", "simulator"))
    parser.add_argument("--dtype", default="float64", choices=("float64", "float32"))
    parser.add_argument("--frozen-core", action="store_true", help="freeze the chemical core")
    parser.add_argument("--no-kernels", action="store_true", help="skip the NKI kernel part")
    parser.add_argument("--kernels-only", action="store_true", help="only the NKI kernel part")
    parser.add_argument("--profiles", action="store_true",
                        help="print each demo kernel's full emulator profile under its row")
    args = parser.parse_args(argv or [])
    molecules = [(m, MOLECULES[m]) for m in (args.molecule or ())]
    for path in args.xyz or ():
        try:
            molecules.append((path.rsplit("/", 1)[-1].removesuffix(".xyz"), _read_xyz(path)))
        except OSError as exc:
            parser.error(f"--xyz {path}: {exc.strerror}")
    if not molecules:
        molecules = [(m, MOLECULES[m]) for m in DEFAULT_MOLECULES]
    ok = True
    t0 = time.perf_counter()
    if not args.kernels_only:
        try:
            import pyscf  # noqa: F401
        except ImportError:
            print(f"DF-MP2 part skipped: it needs PySCF for the integrals and the reference.\n  {INSTALL_HINT}")
        else:
            ok &= dfmp2_part(molecules, args.basis, args.backend, getattr(torch, args.dtype), args.frozen_core)
    if not args.no_kernels:
        ok &= kernel_part(profiles=args.profiles)
    print(f"\ndone in {time.perf_counter() - t0:.1f} s: {'all checks passed' if ok else 'SOME CHECKS FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
