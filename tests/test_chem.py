"""trnsci.chem: the DF-MP2 pipeline against PySCF's DFMP2 and an independent einsum reference.

Tolerances: float64 runs the same integrals, metric and fit as PySCF, so
only round-off separates the energies (observed <= 1e-15 Eh; asserted
1e-8 Eh, the issue's bound). float32 ``B`` in the energy stage: fp32
products summed over ~1e4-1e6 terms give ~1e-8 Eh observed on these small
molecules; asserted 1e-6 Eh (docs/chem.md states the bound).
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

import trnsci
from trnsci import chem
from trnsci.chem_demo import MOLECULES, _rhf


def _reference_energy(B, eo, ev):
    """Plain NumPy pair energies: build (ia|jb), no blocking, no symmetry."""
    B, eo, ev = (np.asarray(x, dtype=np.float64) for x in (B, eo, ev))
    ovov = np.einsum("iaQ,jbQ->iajb", B, B)
    d = eo[:, None, None, None] - ev[None, :, None, None] + eo[None, None, :, None] - ev[None, None, None, :]
    return np.einsum("iajb,iajb->ij", ovov / d, 2 * ovov - ovov.transpose(0, 3, 2, 1))  # pair energies


def _random_problem(nocc=7, nvir=13, naux=29, seed=1, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    B = 0.1 * torch.randn(nocc, nvir, naux, generator=g, dtype=torch.float64)
    eo = -2.0 + torch.rand(nocc, generator=g, dtype=torch.float64)
    ev = 0.2 + 3 * torch.rand(nvir, generator=g, dtype=torch.float64)
    return B.to(dtype), eo, ev


# ------------------------------------------------------------ from tensors

def test_from_tensors_matches_numpy_reference_and_pairs():
    B, eo, ev = _random_problem()
    with trnsci.use_backend("torch"):
        r = chem.df_mp2_from_tensors(B, eo, ev, pair_energies=True)
    ref = _reference_energy(B, eo, ev)
    assert r.e_corr == pytest.approx(ref.sum(), abs=1e-13)
    np.testing.assert_allclose(r.pair_energies.numpy(), ref, atol=1e-14)
    assert (r.nocc, r.nvir, r.naux) == (7, 13, 29) and r.e_tot is None
    assert r.backends == {"energy": "torch"} and set(r.timings) == {"energy", "total"}


def test_from_tensors_numpy_inputs_and_no_mutation():
    B, eo, ev = _random_problem(nocc=3, nvir=4, naux=5)
    Bn, eon, evn = B.numpy().copy(), eo.numpy().copy(), ev.numpy().copy()
    r = chem.df_mp2_from_tensors(Bn, eon, evn)
    assert r.e_corr == pytest.approx(_reference_energy(Bn, eon, evn).sum(), abs=1e-14)
    assert np.array_equal(Bn, B.numpy()) and np.array_equal(eon, eo.numpy())


def test_from_tensors_chunked_equals_unchunked():
    """Tiny max_memory forces one occupied row per block: same energy to 1e-12."""
    B, eo, ev = _random_problem(nocc=13, nvir=11, naux=17)
    with trnsci.use_backend("torch"):
        whole = chem.df_mp2_from_tensors(B, eo, ev, max_memory=1e4, pair_energies=True)
        chunked = chem.df_mp2_from_tensors(B, eo, ev, max_memory=1e-3, pair_energies=True)
    assert abs(whole.e_corr - chunked.e_corr) <= 1e-12
    assert torch.allclose(whole.pair_energies, chunked.pair_energies, rtol=0, atol=1e-14)


@pytest.mark.parametrize("args, name", [
    ((torch.zeros(3, 4), torch.zeros(3), torch.ones(4)), "B"),                         # 2-D B
    ((torch.zeros(3, 4, 5, dtype=torch.float64), -torch.ones(2, dtype=torch.float64),
      torch.ones(4, dtype=torch.float64)), "eps_occ"),                                 # nocc mismatch
    ((torch.zeros(3, 4, 5, dtype=torch.float64), -torch.ones(3, dtype=torch.float64),
      torch.ones(5, dtype=torch.float64)), "eps_vir"),                                 # nvir mismatch
    ((torch.zeros(3, 4, 5, dtype=torch.float64), -torch.ones(3, 1, dtype=torch.float64),
      torch.ones(4, dtype=torch.float64)), "eps_occ"),                                 # 2-D eps_occ
])
def test_from_tensors_wrong_shapes_name_the_argument(args, name):
    with pytest.raises(ValueError, match=name):
        chem.df_mp2_from_tensors(*args)


def test_from_tensors_bad_types():
    B, eo, ev = _random_problem(nocc=2, nvir=3, naux=4)
    with pytest.raises(TypeError, match="B"):
        chem.df_mp2_from_tensors([[1.0]], eo, ev)
    with pytest.raises(TypeError, match="dtype"):
        chem.df_mp2_from_tensors(B, eo, ev, dtype=torch.int32)
    with pytest.raises(ValueError, match="max_memory"):
        chem.df_mp2_from_tensors(B, eo, ev, max_memory=-1)
    with pytest.raises(ValueError, match="above"):
        chem.df_mp2_from_tensors(B, ev[:2], eo.new_ones(3) * -5)


# ------------------------------------------------------------ with PySCF

@pytest.fixture(scope="module")
def water():
    pytest.importorskip("pyscf")
    from pyscf import gto, scf

    mol = gto.M(atom=MOLECULES["h2o"], basis="cc-pvdz", verbose=0)
    return scf.RHF(mol).run()


def _pyscf_dfmp2(mf, frozen=None):
    from pyscf.mp.dfmp2 import DFMP2

    return float(DFMP2(mf, frozen=frozen).kernel()[0])


def test_water_matches_pyscf_all_electron_frozen_and_float32(water):
    with trnsci.use_backend("torch"):
        r = chem.df_mp2(water, progress=False)
        r1 = chem.df_mp2(water, frozen=1, progress=False)
        r32 = chem.df_mp2(water, frozen=1, dtype=torch.float32, progress=False)
    assert abs(r.e_corr - _pyscf_dfmp2(water)) <= 1e-8
    e1 = _pyscf_dfmp2(water, frozen=1)
    assert abs(r1.e_corr - e1) <= 1e-8
    assert abs(r32.e_corr - e1) <= 1e-6
    assert r.e_tot == pytest.approx(water.e_tot + r.e_corr, abs=1e-12)
    assert (r.nao, r.naux, r.nocc, r.nvir, r1.nocc, r1.nfrozen) == (24, 84, 5, 19, 4, 1)
    assert r.auxbasis == {"O": "cc-pvdz-ri", "H": "cc-pvdz-ri"}  # PySCF's MP2-fit choice
    assert list(r.timings) == [*chem.STAGES, "total"] and r.backends["int3c"] == "pyscf"
    assert r.backends["energy"] == "torch" and r32.dtype == torch.float32


def test_auxmol_cache_never_outlives_the_molecule():
    """The built auxiliary molecule is reused per molecule content: a geometry moved in place, another
    basis or another fitting basis must each give PySCF's energy for what the molecule is now."""
    pytest.importorskip("pyscf")
    from pyscf import gto, scf

    mol = gto.M(atom=MOLECULES["h2o"], basis="cc-pvdz", verbose=0)
    mf = scf.RHF(mol).run()
    first = chem.df_mp2(mf, progress=False)
    assert abs(first.e_corr - _pyscf_dfmp2(mf)) <= 1e-8
    mol.set_geom_(mol.atom_coords() * 1.05, unit="Bohr")  # same object, moved atoms
    mf = scf.RHF(mol).run()
    moved = chem.df_mp2(mf, progress=False)
    assert abs(moved.e_corr - first.e_corr) > 1e-4 and abs(moved.e_corr - _pyscf_dfmp2(mf)) <= 1e-8
    etb = chem.df_mp2(mf, auxbasis="weigend", progress=False)
    from pyscf.mp.dfmp2 import DFMP2

    ref = DFMP2(mf)
    ref.with_df.auxbasis = "weigend"
    assert abs(etb.e_corr - float(ref.kernel()[0])) <= 1e-8 and etb.naux != moved.naux


def test_water_chunked_equals_unchunked(water):
    """max_memory small enough for one auxiliary shell per block (and one row per energy block)."""
    with trnsci.use_backend("torch"):
        whole = chem.df_mp2(water, max_memory=float("inf"), progress=False, pair_energies=True)
        chunked = chem.df_mp2(water, max_memory=0.05, progress=False, pair_energies=True)
    assert abs(whole.e_corr - chunked.e_corr) <= 1e-12
    assert torch.allclose(whole.pair_energies, chunked.pair_energies, rtol=0, atol=1e-13)


def test_df_factors_reproduce_pyscf_ovov(water):
    """B B^T equals PySCF's own DF (ia|jb) (with_df.ao2mo on the same RI basis)."""
    from pyscf import df

    B, eo, ev = chem.df_factors(water)
    nocc = eo.shape[0]
    c = water.mo_coeff
    mydf = df.DF(water.mol, auxbasis="cc-pvdz-ri")
    ovov = mydf.ao2mo((c[:, :nocc], c[:, nocc:], c[:, :nocc], c[:, nocc:]), compact=False)
    Bf = B.reshape(nocc * ev.shape[0], -1)
    np.testing.assert_allclose((Bf @ Bf.T).numpy(), ovov, atol=1e-10)


def test_density_fitted_mean_field_uses_its_own_basis():
    pytest.importorskip("pyscf")
    from pyscf import gto, scf

    mol = gto.M(atom=MOLECULES["hf"], basis="cc-pvdz", verbose=0)
    mf = scf.RHF(mol).density_fit(auxbasis="def2-universal-jkfit").run()
    r = chem.df_mp2(mf, progress=False)
    assert r.auxbasis == "def2-universal-jkfit"
    assert r.backends["int3c"] == "cached (mf.with_df)"  # the SCF's fitted integrals, as PySCF reuses them
    assert abs(r.e_corr - _pyscf_dfmp2(mf)) <= 1e-8
    r2 = chem.df_mp2(mf, auxbasis="cc-pvdz-ri", progress=False)  # explicit auxbasis wins
    assert abs(r2.e_corr - r.e_corr) > 1e-7


def test_bad_mean_fields():
    pytest.importorskip("pyscf")
    from pyscf import gto, scf

    mol = gto.M(atom=MOLECULES["hf"], basis="sto-3g", verbose=0)
    mf = scf.RHF(mol)
    with pytest.raises(TypeError, match="after mf.kernel"):
        chem.df_mp2(mf)  # never run
    mf.max_cycle = 1
    mf.kernel()
    assert not mf.converged
    with pytest.raises(ValueError, match="not converged"):
        chem.df_mp2(mf)
    uhf = scf.UHF(gto.M(atom="H 0 0 0", basis="cc-pvdz", spin=1, verbose=0)).run()
    assert chem.df_mp2(uhf, progress=False).e_corr == 0.0  # one electron: no pair (open shells: tests/test_chem_scf.py)
    rohf = scf.ROHF(gto.M(atom="O 0 0 0; H 0 0 0.97", basis="sto-3g", spin=1, verbose=0)).run()
    with pytest.raises(ValueError, match="ROHF"):
        chem.df_mp2(rohf)
    mf = scf.RHF(mol).run()
    with pytest.raises(ValueError, match="frozen must be below nocc=5"):
        chem.df_mp2(mf, frozen=5)
    with pytest.raises(TypeError, match="frozen"):
        chem.df_mp2(mf, frozen="core")
    with pytest.raises(TypeError, match="dtype"):
        chem.df_mp2(mf, dtype=torch.int64)


def test_missing_pyscf_is_a_clear_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyscf", None)
    with pytest.raises(ImportError, match=r"trnsci\[chem\]"):
        chem.df_mp2(object())


def test_trnblas_wrappers_delegate(water):
    import trnblas

    with trnsci.use_backend("torch"):
        e = trnblas.dfmp2(water, frozen=1)
        r = chem.df_mp2(water, frozen=1, progress=False)
    assert e == r.e_corr


# ------------------------------------------------- the molecule set (slow)

CASES = [("nh3", "cc-pvdz", None), ("ch4", "cc-pvdz", None), ("hf", "cc-pvdz", None),
         ("n2", "cc-pvdz", None), ("c2h4", "cc-pvdz", None), ("c2h4", "def2-svp", None),
         ("nh3", "def2-svp", "core"), ("benzene", "cc-pvdz", "core")]


@pytest.mark.slow
@pytest.mark.parametrize("name, basis, frozen", CASES, ids=[f"{n}-{b}-{f or 'all'}" for n, b, f in CASES])
def test_molecule_set_matches_pyscf(name, basis, frozen):
    """|dE| <= 1e-8 Eh in float64 and <= 1e-6 Eh in float32 on the issue's molecule set."""
    pytest.importorskip("pyscf")
    from pyscf import gto
    from pyscf.data import elements

    mol = gto.M(atom=MOLECULES[name], basis=basis, verbose=0)
    mf = _rhf(mol)  # DF-SCF orbitals held by a conventional RHF object (fast; same for both codes)
    nf = int(elements.chemcore(mol)) if frozen == "core" else None
    e_ref = _pyscf_dfmp2(mf, frozen=nf)
    with trnsci.use_backend("torch"):
        r = chem.df_mp2(mf, frozen=nf, progress=False)
        r32 = chem.df_mp2(mf, frozen=nf, dtype=torch.float32, progress=False)
    assert abs(r.e_corr - e_ref) <= 1e-8
    assert abs(r32.e_corr - e_ref) <= 1e-6


# ------------------------------------------------------------ the demo (its kernel part: tests/test_demo.py)

def test_demo_without_pyscf_says_how_to_install(monkeypatch, capsys):
    from trnsci import demo

    monkeypatch.setitem(sys.modules, "pyscf", None)
    assert demo.main(["--no-kernels"]) == 0
    assert "pip install 'trnsci[chem]'" in capsys.readouterr().out
