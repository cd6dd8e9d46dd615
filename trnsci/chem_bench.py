"""The chemistry rows of ``trnsci bench``: DF-MP2, density-fitted SCF, and the whole job, each against PySCF.

``df_mp2 <mol>``: :func:`trnsci.chem.df_mp2` against PySCF's ``DFMP2`` on the
same RHF. ``scf <mol>``, ``mp2 on scf <mol>`` and ``scf+mp2 <mol>``: the stages
of the whole job -- :func:`trnsci.chem.scf` against PySCF's
``scf.RHF(mol).density_fit()``, DF-MP2 on each side's own density-fitted mean
field (both reuse the SCF's fitted integrals), and the two together.

The umbrella declares this module in entry point group ``trnsci.bench``
(name ``chem``); the core's ``trnsci bench`` finds it there. Needs PySCF
(``pip install 'trnsci[chem]'``): without it, ``cases`` raises the
ImportError that ``trnsci bench`` reports with the package's name.
"""

from __future__ import annotations

from trnblas.demo import MOLECULES
from trnsci.bench import Case


def cases(quick: bool = True) -> list[Case]:
    """One row per molecule (h2o; also nh3 without ``quick``), cc-pVDZ, integrals included on both sides."""
    from pyscf import gto, scf
    from pyscf.mp.dfmp2 import DFMP2

    from trnsci import chem

    out = []
    for name, basis in (("h2o", "cc-pvdz"),) if quick else (("h2o", "cc-pvdz"), ("benzene", "cc-pvtz")):
        out.extend(_whole_job_cases(MOLECULES[name], name, basis))
    for name in ("h2o",) if quick else ("h2o", "nh3"):
        mol = gto.M(atom=MOLECULES[name], basis="cc-pvdz", verbose=0)
        mf = scf.RHF(mol).run()
        out.append(Case("trnsci.chem", f"df_mp2 {name} cc-pvdz", lambda mf=mf: chem.df_mp2(mf, progress=False),
                        "pyscf DFMP2", lambda mf=mf: DFMP2(mf).kernel(), op="df_mp2", size=float(mol.nao),
                        note="includes the three-centre integrals from PySCF on both sides"))
    return out


def _whole_job_cases(atoms: str, name: str, basis: str) -> list[Case]:
    """Rows ``scf``, ``mp2 on scf`` and ``scf+mp2`` for one molecule (RHF, PySCF's JK-fit basis on both sides)."""
    from pyscf import gto, scf
    from pyscf.mp.dfmp2 import DFMP2

    from trnsci import chem

    mol = gto.M(atom=atoms, basis=basis, verbose=0)
    ours = chem.scf(mol)  # converged once for the MP2-only rows
    theirs = scf.RHF(mol).density_fit().run()

    def pyscf_scf():
        return scf.RHF(mol).density_fit().run()

    def pyscf_whole():
        return DFMP2(pyscf_scf()).kernel()

    def trnsci_whole():
        return chem.df_mp2(chem.scf(mol), progress=False)

    size = float(mol.nao)
    note = "PySCF integrals (int1e, int3c2e, int2c2e) on both sides; J/K, fit, diagonalisation and MP2 are the suite's"
    return [
        Case("trnsci.chem", f"scf {name} {basis}", lambda: chem.scf(mol), "pyscf density_fit RHF", pyscf_scf,
             op="scf", size=size, note=note),
        Case("trnsci.chem", f"mp2 on scf {name} {basis}", lambda: chem.df_mp2(ours, progress=False),
             "pyscf DFMP2 on DF-RHF", lambda: DFMP2(theirs).kernel(), op="mp2 on scf", size=size,
             note="both reuse their SCF's fitted integrals"),
        Case("trnsci.chem", f"scf+mp2 {name} {basis}", trnsci_whole, "pyscf DF-RHF + DFMP2", pyscf_whole,
             op="scf+mp2", size=size, note=note, target=0.8),
    ]
