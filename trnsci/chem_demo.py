"""The DF-MP2 part of ``trnsci demo``: :func:`trnsci.chem.df_mp2` on real molecules against PySCF.

Needs PySCF (``pip install 'trnsci[chem]'``). For each molecule: RHF with
PySCF, then :func:`trnsci.chem.df_mp2` and PySCF's own ``DFMP2`` on the same
orbitals and auxiliary basis, timed in this run, and a table. The umbrella
distribution declares this module in entry point group ``trnsci.demo``; the
core's ``trnsci demo`` finds it there (:mod:`trnsci.demo`).

Options (besides the core's ``--quick``, ``--backend``, ...)::

    --molecule NAME ... --xyz FILE ... --basis cc-pvdz --dtype float64|float32 --frozen-core
"""

from __future__ import annotations

import sys
import time

import torch

from trnblas.demo import MOLECULES
from trnsci._progress import Progress

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
        r = chem.df_mp2(mf, frozen=ncore, dtype=dtype, backend=backend, progress=progress.tty)
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


def add_arguments(group) -> None:
    """This part's options, in its own group of ``trnsci demo``'s parser."""
    group.add_argument("--molecule", action="append", choices=sorted(MOLECULES), metavar="NAME",
                       help=f"built-in molecule (repeatable; one of {', '.join(sorted(MOLECULES))}); "
                            f"default {' '.join(DEFAULT_MOLECULES)} ({' '.join(QUICK_MOLECULES)} with --quick)")
    group.add_argument("--xyz", action="append", metavar="FILE", help="molecule from an .xyz file (repeatable)")
    group.add_argument("--basis", default="cc-pvdz")
    group.add_argument("--dtype", default="float64", choices=("float64", "float32"))
    group.add_argument("--frozen-core", action="store_true", help="freeze the chemical core")


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
    return dfmp2_part(molecules, args.basis, args.backend, getattr(torch, args.dtype), args.frozen_core, echo=echo)


def main(argv: list[str] | None = None) -> int:
    """``python -m trnsci.chem_demo``: the same as ``trnsci demo --no-kernels``."""
    from trnsci import demo

    return demo.main([*(argv or []), "--no-kernels"])


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main(sys.argv[1:]))
