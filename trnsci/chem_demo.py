"""The chemistry part of ``trnsci demo``: the whole job -- SCF then DF-MP2 -- on real molecules against PySCF.

Needs PySCF (``pip install 'trnsci[chem]'``). For each molecule:
:func:`trnsci.chem.scf` (one status line per SCF cycle on stderr) then
:func:`trnsci.chem.df_mp2` on its result, and PySCF's density-fitted SCF then
``DFMP2``/``DFUMP2`` with the same auxiliary basis, timed in this run, and a
table. The umbrella
distribution declares this module in entry point group ``trnsci.demo``; the
core's ``trnsci demo`` finds it there (:mod:`trnsci.demo`).

Options (besides the core's ``--quick``, ``--backend``, ...)::

    --molecule NAME ... --xyz FILE ... --basis cc-pvdz --dtype float64|float32 --frozen-core
    --charge N --spin 2S
"""

from __future__ import annotations

import sys
import time

import torch

from trnblas.demo import MOLECULES

DEFAULT_MOLECULES = ("h2o", "nh3", "benzene")
QUICK_MOLECULES = ("h2o",)

INSTALL_HINT = "pip install 'trnsci[chem]'   (or: pip install pyscf)"


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


def _grouped(b: dict) -> str:
    """``where: stage,stage; where: ...`` -- stages grouped by where they ran."""
    by: dict = {}
    for k, v in b.items():
        if v != "-":  # a stage that did not run (scf's "refine" off the device path)
            by.setdefault(v, []).append(k)
    return "; ".join(f"{v}: {','.join(ks)}" for v, ks in by.items()) if len(by) > 1 else next(iter(by), "")


def _cycle_reporter(name: str, stream=None):
    """A ``progress`` callable for :func:`trnsci.chem.scf`: one status per SCF cycle (redrawn on a terminal)."""
    stream = stream if stream is not None else sys.stderr
    tty = bool(getattr(stream, "isatty", lambda: False)())

    def report(info):
        text = (f"{name}: SCF cycle {info['cycle']:3d}  E = {info['e_tot']:.10f} Eh  "
                f"dE = {info['delta_e']:+.1e}  |g| = {info['grad_norm']:.1e}")
        stream.write(("\r" + text + "   ") if tty else text + "\n")
        stream.flush()

    def close():
        if tty:
            stream.write("\r" + " " * 100 + "\r")
            stream.flush()

    report.close = close
    return report


def dfmp2_part(molecules, basis, backend, dtype, frozen_core, echo=print, charge=0, spin=0) -> bool:
    """Part 1: the whole job -- :func:`trnsci.chem.scf` then :func:`trnsci.chem.df_mp2` -- against PySCF's
    density-fitted SCF then ``DFMP2``/``DFUMP2`` (same JK-fit auxiliary basis). True when every |dE| is in bound."""
    from pyscf import gto
    from pyscf import scf as pscf
    from pyscf.mp.dfmp2 import DFMP2
    from pyscf.mp.dfump2 import DFUMP2

    import trnblas  # noqa: F401  (imported up front: not part of the timed call)
    import trnsolver  # noqa: F401
    from trnsci import chem

    bound = 1e-8 if dtype == torch.float64 else 1e-5
    echo(f"SCF + DF-MP2 with trnsci.chem.scf/df_mp2 vs PySCF density_fit() SCF + DFMP2 ({basis}, "
         f"B in {str(dtype).replace('torch.', '')}, {'frozen core' if frozen_core else 'all electrons'}"
         f"{f', charge {charge}' if charge else ''}{f', spin {spin}' if spin else ''}; same auxiliary basis)")
    head = (f"  {'molecule':<12} {'kind':<4} {'nbf/naux':>9} {'E_tot SCF trnsci':>18} {'|dE SCF|':>8} "
            f"{'E_corr trnsci':>15} {'E_corr PySCF':>15} {'|dE|':>8} {'t trnsci':>9} {'t PySCF':>8}  backends")
    echo(head)
    ok = True
    for name, atoms in molecules:
        mol = gto.M(atom=atoms, basis=basis, charge=charge, spin=spin, verbose=0)
        ncore = _ncore(mol) if frozen_core else None
        report = _cycle_reporter(name)
        t = time.perf_counter()
        try:
            r = chem.scf(mol, conv_tol=1e-10, backend=backend, progress=report)
        finally:
            report.close()
        m = chem.df_mp2(r, frozen=ncore, dtype=dtype, backend=backend, progress=False)
        t_ours = time.perf_counter() - t
        t = time.perf_counter()
        mf = (pscf.RHF if r.kind == "rhf" else pscf.UHF)(mol).density_fit()
        mf.conv_tol = 1e-10
        mf.kernel()
        e_ref = float((DFMP2 if r.kind == "rhf" else DFUMP2)(mf, frozen=ncore).kernel()[0])
        t_ref = time.perf_counter() - t
        # MP2 on the same orbitals: only round-off (and the B dtype) between the two codes
        e_same = float((DFMP2 if r.kind == "rhf" else DFUMP2)(r.to_pyscf(), frozen=ncore).kernel()[0])
        de_scf, de = abs(r.e_tot - mf.e_tot), abs(m.e_corr - e_same)
        ok &= de_scf <= 1e-8 and de <= bound and r.converged
        echo(f"  {name:<12} {r.kind:<4} {f'{r.nao}/{r.naux}':>9} {r.e_tot:18.10f} {de_scf:8.1e} "
             f"{m.e_corr:15.10f} {e_ref:15.10f} {de:8.1e} {t_ours:8.2f}s {t_ref:7.2f}s  "
             f"SCF {_grouped(r.backends)}; MP2 {_grouped(m.backends)}")
    echo(f"  |dE| bound {bound:.0e} Eh: {'all within' if ok else 'EXCEEDED'} (SCF against PySCF's: 1e-08 Eh; MP2 on "
         "the same orbitals). Times are one run each on this machine (SCF, integrals and MP2 on both sides); "
         "`python benchmarks/bench_chem_scf.py` repeats and interleaves them.")
    return ok


def _ncore(mol) -> int:
    from pyscf.data import elements

    return int(elements.chemcore(mol))


def add_arguments(group) -> None:
    """This part's options, in its own group of ``trnsci demo``'s parser."""
    group.add_argument("--molecule", action="append", choices=sorted(MOLECULES), metavar="NAME",
                       help=f"built-in molecule (repeatable; one of {', '.join(sorted(MOLECULES))}); "
                            f"default {' '.join(DEFAULT_MOLECULES)} ({' '.join(QUICK_MOLECULES)} with --quick)")
    group.add_argument("--xyz", action="append", metavar="FILE", help="molecule from an .xyz file (repeatable)")
    group.add_argument("--basis", default="cc-pvdz")
    group.add_argument("--dtype", default="float64", choices=("float64", "float32"))
    group.add_argument("--frozen-core", action="store_true", help="freeze the chemical core")
    group.add_argument("--charge", type=int, default=0, help="molecular charge (every molecule)")
    group.add_argument("--spin", type=int, default=0,
                       help="2S, unpaired electrons (every molecule); non-zero runs UHF and DF-UMP2")


def run(args, echo=print) -> bool:
    """The DF-MP2 table for the molecules ``args`` names; True when every |dE| is within its bound."""
    molecules = [(m, MOLECULES[m]) for m in (args.molecule or ())]
    for path in args.xyz or ():
        try:
            molecules.append((path.rsplit("/", 1)[-1].removesuffix(".xyz"), _read_xyz(path)))
        except OSError as exc:
            echo(f"DF-MP2 part: --xyz {path}: {exc.strerror}")
            return False
    if not molecules:
        molecules = [(m, MOLECULES[m]) for m in (QUICK_MOLECULES if args.quick else DEFAULT_MOLECULES)]
    try:
        import pyscf  # noqa: F401
    except ImportError:
        echo(f"DF-MP2 part skipped: it needs PySCF for the integrals and the reference.\n  {INSTALL_HINT}")
        return True
    return dfmp2_part(molecules, args.basis, args.backend, getattr(torch, args.dtype), args.frozen_core, echo=echo,
                      charge=getattr(args, "charge", 0), spin=getattr(args, "spin", 0))


def main(argv: list[str] | None = None) -> int:
    """``python -m trnsci.chem_demo``: the same as ``trnsci demo --no-kernels``."""
    from trnsci import demo

    return demo.main([*(argv or []), "--no-kernels"])


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main(sys.argv[1:]))
