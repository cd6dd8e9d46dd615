"""trnsci.chem.scf(process_group=...) on 2 and 3 gloo ranks: the one-process energy to 1e-10 Eh.

Water (RHF) and the OH radical (UHF), cc-pVDZ with cc-pVDZ-JKFIT (116
auxiliary functions). Each rank integrates its auxiliary shells, one
all-gather shares the raw rows, and every J/K build sums the ranks' parts with
one all-reduce; the bytes each rank sent are asserted against the formulas in
trnsci.chem_distributed.scf_integrals_distributed. The one-process reference
is itself checked against PySCF in tests/test_chem_scf.py; DF-MP2 on the
distributed result is checked against PySCF's DFMP2 here (same orbitals).
"""

from __future__ import annotations

import pytest

from trnsci import distributed as D
from trnsci import testing

pytest.importorskip("pyscf")


def _checks():
    import torch.distributed as dist
    from pyscf import gto
    from pyscf.mp.dfmp2 import DFMP2

    from trnsci import chem
    from trnsci.chem_distributed import aux_shell_ranges

    P, r = dist.get_world_size(), dist.get_rank()
    out = testing.RankChecks()
    check = out.check
    for label, atoms, spin in (("water", "O 0 0 0.1173; H 0 0.7572 -0.4692; H 0 -0.7572 -0.4692", 0),
                               ("oh", "O 0 0 0; H 0 0 0.97", 1)):
        mol = gto.M(atom=atoms, basis="cc-pvdz", spin=spin, verbose=0)
        ref = chem.scf(mol, conv_tol=1e-11)
        res = chem.scf(mol, conv_tol=1e-11, process_group=dist.group.WORLD)
        check(f"{label} energy", res.converged and abs(res.e_tot - ref.e_tot) <= 1e-10, (res.e_tot, ref.e_tot))
        nao, naux = res.nao, res.naux
        npair = nao * (nao + 1) // 2
        _, _, p0, p1 = aux_shell_ranges(res.auxmol, P)[r]
        want_gather = (P - 1) * (p1 - p0) * npair * 8
        n = (1 + (1 if res.kind == "rhf" else 2)) * nao * nao
        c = D.shard_sizes(n, P)[r]
        builds = 1 + res.cycles + 1  # the initial guess, every cycle, the final diagonalisation
        want_jk = builds * (n - c + (P - 1) * c) * 8
        b = res.bytes_sent
        # ("status": the few bytes of trnsci.distributed.agree's error checks, not part of the algorithm)
        check(f"{label} bytes", b["all_gather"] == want_gather and b["jk"] == want_jk and res.ranks == P
              and set(b) <= {"all_gather", "jk", "status"},
              (b, want_gather, want_jk))
        if res.kind == "rhf":
            m = chem.df_mp2(res, progress=False)
            e_ref = float(DFMP2(res.to_pyscf()).kernel()[0])
            check(f"{label} mp2", abs(m.e_corr - e_ref) <= 1e-10 and naux == res.with_df._cderi.shape[0],
                  (m.e_corr, e_ref))
    return out


@pytest.mark.parametrize("P", [2, 3])
def test_chem_scf_distributed(P):
    results = D.spawn(_checks, P, timeout=300, collective_timeout=60)
    testing.assert_ranks_passed(results, count=5)
