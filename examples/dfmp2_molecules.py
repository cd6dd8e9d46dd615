"""DF-MP2 correlation energies of small molecules with trnblas, checked against PySCF.

For each molecule: RHF with PySCF, then ``trnblas.dfmp2`` (frozen core,
PySCF's MP2-fit auxiliary basis) on the backend the current settings pick,
and PySCF's own DF-MP2 on the same mean field. Prints both energies, their
difference and the wall time of each correlation step.

Run: ``python examples/dfmp2_molecules.py [--basis cc-pvdz] [--large]`` (needs
``pip install "trnsci[chem]"``). With ``TRNSCI_BACKEND=simulator`` the fused
NKI kernel runs in the emulator on float32 factors.
"""

from __future__ import annotations

import argparse
import time

import torch
from pyscf import gto, scf
from pyscf.mp.dfmp2 import DFMP2

import trnblas
import trnsci
from trnblas.demo import MOLECULES

BENZENE = ("C 0 1.3970 0; C 1.2098 0.6985 0; C 1.2098 -0.6985 0; C 0 -1.3970 0; C -1.2098 -0.6985 0; "
           "C -1.2098 0.6985 0; H 0 2.4810 0; H 2.1486 1.2405 0; H 2.1486 -1.2405 0; H 0 -2.4810 0; "
           "H -2.1486 -1.2405 0; H -2.1486 1.2405 0")
HEAVY_ATOMS = {"water": 1, "ammonia": 1, "methane": 1, "benzene": 6}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--basis", default="cc-pvdz")
    parser.add_argument("--large", action="store_true", help="also benzene (RHF takes a few seconds)")
    args = parser.parse_args(argv)
    molecules = dict(MOLECULES, **({"benzene": BENZENE} if args.large else {}))
    dtype = torch.float32 if trnsci.get_backend("trnblas") == "simulator" else torch.float64
    print(f"{'molecule':<10} {'trnblas (Eh)':>16} {'PySCF (Eh)':>16} {'diff':>10} {'trnblas s':>10} {'PySCF s':>8}")
    worst = 0.0
    for name, atoms in molecules.items():
        mf = scf.RHF(gto.M(atom=atoms, basis=args.basis, verbose=0)).run()
        ncore = HEAVY_ATOMS[name]  # freeze the 1s core of each first-row heavy atom
        t0 = time.perf_counter()
        e = trnblas.dfmp2(mf, frozen=ncore, dtype=dtype)
        t1 = time.perf_counter()
        e_ref = DFMP2(mf, frozen=ncore).kernel()[0]
        t2 = time.perf_counter()
        worst = max(worst, abs(e - e_ref))
        print(f"{name:<10} {e:16.10f} {e_ref:16.10f} {e - e_ref:10.2e} {t1 - t0:10.3f} {t2 - t1:8.3f}")
    tol = 1e-6 if dtype == torch.float32 else 1e-9
    print(f"largest difference {worst:.2e} Eh ({'within' if worst < tol else 'OUTSIDE'} {tol:g} Eh for {dtype})")
    return 0 if worst < tol else 1


if __name__ == "__main__":
    raise SystemExit(main())
