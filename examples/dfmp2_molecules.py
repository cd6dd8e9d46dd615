"""DF-MP2 correlation energies of small molecules with ``trnsci.chem``, checked against PySCF.

For each molecule: RHF with PySCF, then :func:`trnsci.chem.df_mp2` (frozen
core; PySCF's MP2-fit auxiliary basis, as its ``DFMP2`` picks it) on the
backend the current settings choose, and PySCF's own ``DFMP2`` on the same
mean field. Prints both energies, the difference, the wall time of each,
and where each stage of trnsci's pipeline ran.

Run: ``python examples/dfmp2_molecules.py [--basis cc-pvdz] [--large]`` (needs
``pip install "trnsci[chem]"``). With ``TRNSCI_BACKEND=simulator`` the energy
stage runs the fused NKI kernel in the emulator on float32 factors.
"""

from __future__ import annotations

import argparse
import time

import torch
from pyscf import gto, scf
from pyscf.data import elements
from pyscf.mp.dfmp2 import DFMP2

import trnsci
from trnsci import chem
from trnsci.chem_demo import MOLECULES


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--basis", default="cc-pvdz")
    parser.add_argument("--large", action="store_true", help="also benzene")
    args = parser.parse_args(argv)
    names = ["h2o", "nh3", "ch4", "hf"] + (["benzene"] if args.large else [])
    dtype = torch.float32 if trnsci.get_backend("trnblas") == "simulator" else torch.float64
    print(f"{'molecule':<10} {'trnsci (Eh)':>16} {'PySCF (Eh)':>16} {'diff':>10} {'trnsci s':>9} "
          f"{'PySCF s':>8}  stages")
    worst = 0.0
    for name in names:
        mol = gto.M(atom=MOLECULES[name], basis=args.basis, verbose=0)
        mf = scf.RHF(mol).run()
        ncore = int(elements.chemcore(mol))  # the chemical core (1s of first-row atoms)
        r = chem.df_mp2(mf, frozen=ncore, dtype=dtype, progress=False)
        t0 = time.perf_counter()
        e_ref = DFMP2(mf, frozen=ncore).kernel()[0]
        t_ref = time.perf_counter() - t0
        worst = max(worst, abs(r.e_corr - e_ref))
        where = " ".join(f"{k}={v}" for k, v in r.backends.items())
        print(f"{name:<10} {r.e_corr:16.10f} {e_ref:16.10f} {r.e_corr - e_ref:10.2e} "
              f"{r.timings['total']:9.3f} {t_ref:8.3f}  {where}")
    tol = 1e-6 if dtype == torch.float32 else 1e-8
    print(f"largest difference {worst:.2e} Eh ({'within' if worst < tol else 'OUTSIDE'} {tol:g} Eh for {dtype})")
    return 0 if worst < tol else 1


if __name__ == "__main__":
    raise SystemExit(main())
