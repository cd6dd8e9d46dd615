"""The DF-MP2 rows of ``trnsci bench``: :func:`trnsci.chem.df_mp2` against PySCF's ``DFMP2`` on the same RHF.

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
    for name in ("h2o",) if quick else ("h2o", "nh3"):
        mol = gto.M(atom=MOLECULES[name], basis="cc-pvdz", verbose=0)
        mf = scf.RHF(mol).run()
        out.append(Case("trnsci.chem", f"df_mp2 {name} cc-pvdz", lambda mf=mf: chem.df_mp2(mf, progress=False),
                        "pyscf DFMP2", lambda mf=mf: DFMP2(mf).kernel(), op="df_mp2", size=float(mol.nao),
                        note="includes the three-centre integrals from PySCF on both sides"))
    return out
