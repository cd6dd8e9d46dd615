"""trnsci.chem.scf (density-fitted RHF/UHF) and DF-MP2 on its result, against PySCF.

References are PySCF's own density-fitted mean fields (``scf.RHF/UHF(mol).density_fit()``
with the same auxiliary basis) and PySCF's ``DFMP2``/``DFUMP2``. Tolerances: both
SCFs are run to ``conv_tol=1e-10`` (gradient ``1e-5``); the energy is stationary,
so its error is second order in the gradient (~1e-10 Eh) and the issue's 1e-8 Eh
bound is asserted (observed ~1e-13). MP2 on the *same* orbitals (``to_pyscf()``)
differs only by round-off: 1e-8 asserted (observed <= 1e-16). MP2 is not
stationary in the orbitals, so against PySCF's own orbitals 1e-7 is asserted.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("pyscf")

import trnsci  # noqa: E402
from trnsci import chem  # noqa: E402

WATER = "O 0 0 0.1173; H 0 0.7572 -0.4692; H 0 -0.7572 -0.4692"


def _mol(atom, basis="cc-pvdz", charge=0, spin=0):
    from pyscf import gto

    return gto.M(atom=atom, basis=basis, charge=charge, spin=spin, verbose=0)


def _pyscf_df(mol, kind):
    from pyscf import scf as pscf

    mf = (pscf.RHF if kind == "rhf" else pscf.UHF)(mol).density_fit()
    mf.conv_tol = 1e-10
    mf.kernel()
    assert mf.converged
    return mf


def _pyscf_mp2(mf, frozen=None):
    from pyscf.mp.dfmp2 import DFMP2
    from pyscf.mp.dfump2 import DFUMP2

    cls = DFMP2 if np.ndim(mf.mo_occ) == 1 else DFUMP2
    return float(cls(mf, frozen=frozen).kernel()[0])


def _random_geometry(seed):
    """A water molecule with bonds and angle drawn at random (a molecule no test names)."""
    rng = np.random.default_rng(seed)
    r1, r2 = 0.9 + 0.15 * rng.random(2)
    th = np.deg2rad(95 + 20 * rng.random())
    return f"O 0 0 0; H {r1} 0 0; H {r2 * np.cos(th)} {r2 * np.sin(th)} 0"


CASES = [  # (name, atoms, basis, charge, spin): singlet, radical, cation, triplet, cc-pVTZ
    ("water", WATER, "cc-pvdz", 0, 0),
    ("random water", _random_geometry(7), "cc-pvdz", 0, 0),
    ("OH radical", "O 0 0 0; H 0 0 0.97", "cc-pvdz", 0, 1),
    ("H2O+ cation", WATER, "cc-pvdz", 1, 1),
    ("CH2 triplet", "C 0 0 0.1; H 0 0.99 -0.5; H 0 -0.99 -0.5", "cc-pvdz", 0, 2),
    ("HF cc-pVTZ", "H 0 0 0; F 0 0 0.917", "cc-pvtz", 0, 0),
    ("OH cc-pVTZ", "O 0 0 0; H 0 0 0.97", "cc-pvtz", 0, 1),
]


@pytest.mark.parametrize("name, atoms, basis, charge, spin", CASES, ids=[c[0] for c in CASES])
def test_scf_and_mp2_match_pyscf(name, atoms, basis, charge, spin):
    mol = _mol(atoms, basis, charge, spin)
    with trnsci.use_backend("torch"):
        r = chem.scf(mol, conv_tol=1e-10)
    ref = _pyscf_df(mol, r.kind)
    assert r.kind == ("rhf" if spin == 0 else "uhf")
    assert r.converged
    assert abs(r.e_tot - ref.e_tot) <= 1e-8
    assert r.naux == ref.with_df.auxmol.nao_nr()
    np.testing.assert_allclose(r.mo_energy, ref.mo_energy, atol=1e-6)  # orbital energies: first order in |g|
    np.testing.assert_array_equal(r.mo_occ, ref.mo_occ)
    with trnsci.use_backend("torch"):
        m = chem.df_mp2(r, progress=False)
    assert m.kind == r.kind and m.backends["int3c"] == "cached (mf.with_df)"  # the SCF's integrals reused
    assert abs(m.e_corr - _pyscf_mp2(r.to_pyscf())) <= 1e-8
    assert abs(m.e_corr - _pyscf_mp2(ref)) <= 1e-7
    assert m.e_tot == pytest.approx(r.e_tot + m.e_corr, abs=1e-12)


def test_to_pyscf_energy_recomputed_by_pyscf():
    """PySCF evaluates the energy of the returned orbitals with its own DF J/K: the same e_tot."""
    mol = _mol("O 0 0 0; H 0 0 0.97", spin=1)
    r = chem.scf(mol, conv_tol=1e-10)
    mf = r.to_pyscf()
    assert type(mf).__name__.startswith("DFUHF") or "UHF" in type(mf).__name__
    assert mf.with_df._cderi is r.with_df._cderi
    assert abs(mf.energy_tot(mf.make_rdm1()) - r.e_tot) <= 1e-9
    S = mol.intor("int1e_ovlp")
    for s in range(2):  # orthonormal orbitals
        np.testing.assert_allclose(r.mo_coeff[s].T @ S @ r.mo_coeff[s], np.eye(r.mo_coeff.shape[2]), atol=1e-10)


def test_non_df_uhf_mean_field_and_frozen_core_match_dfump2():
    """df_mp2 on a conventional PySCF UHF takes the MP2-fit basis and evaluates the integrals itself."""
    from pyscf import scf as pscf

    mol = _mol("O 0 0 0; H 0 0 0.97", spin=1)
    mf = pscf.UHF(mol).run(conv_tol=1e-10)
    with trnsci.use_backend("torch"):
        m = chem.df_mp2(mf, frozen=1, progress=False)
    assert m.backends["int3c"] == "pyscf" and m.nocc == (4, 3)
    assert abs(m.e_corr - _pyscf_mp2(mf, frozen=1)) <= 1e-8
    assert m.e_corr == pytest.approx(m.e_ss + m.e_os, abs=1e-14)


def test_guesses_level_shift_and_no_diis_reach_the_same_energy():
    mol = _mol(WATER)
    e = chem.scf(mol, conv_tol=1e-10).e_tot
    for kw in ({"init_guess": "atom"}, {"init_guess": "1e"}, {"level_shift": 0.3, "max_cycle": 200},
               {"diis": False, "max_cycle": 200}):
        r = chem.scf(mol, conv_tol=1e-10, **kw)
        assert r.converged and abs(r.e_tot - e) <= 1e-8, kw


def test_progress_callback_and_timings():
    seen = []
    r = chem.scf(_mol("H 0 0 0; F 0 0 0.917"), progress=seen.append)
    assert [d["cycle"] for d in seen] == list(range(1, r.cycles + 1)) == [h["cycle"] for h in r.history]
    assert seen[-1]["grad_norm"] < 1e-4
    assert set(r.timings) == {*chem.SCF_STAGES, "total"} and set(r.backends) == set(chem.SCF_STAGES)
    assert r.backends["int3c"] == "pyscf" and r.backends["jk"] == "torch"
    assert "converged" in str(r)


def test_not_converged_warns_with_last_energy_and_gradient():
    with pytest.warns(chem.ConvergenceWarning, match=r"E_tot = -\d+\.\d+ Eh.*gradient norm"):
        r = chem.scf(_mol(WATER), max_cycle=2)
    assert r.converged is False and r.cycles == 2
    with pytest.raises(ValueError, match="not converged"):
        chem.df_mp2(r, progress=False)


def test_bad_input_is_named():
    from pyscf import gto

    with pytest.raises(ValueError, match="even number of electrons"):
        chem.scf(_mol("O 0 0 0; H 0 0 0.97", spin=1), kind="rhf")
    with pytest.raises(ValueError, match="auxbasis"):
        chem.scf(_mol("H 0 0 0; H 0 0 0.74"), auxbasis="no-such-basis")
    with pytest.raises(TypeError, match="mol"):
        chem.scf("H 0 0 0; H 0 0 0.74")
    with pytest.raises(ValueError, match="kind"):
        chem.scf(_mol("H 0 0 0; H 0 0 0.74"), kind="rohf")
    with pytest.raises(ValueError, match="init_guess"):
        chem.scf(_mol("H 0 0 0; H 0 0 0.74"), init_guess="nope")
    with pytest.raises(ValueError, match="conv_tol"):
        chem.scf(_mol("H 0 0 0; H 0 0 0.74"), conv_tol=-1)
    with pytest.raises(TypeError, match="max_cycle"):
        chem.scf(_mol("H 0 0 0; H 0 0 0.74"), max_cycle=1.5)
    with pytest.raises(TypeError, match="process_group"):
        chem.scf(_mol("H 0 0 0; H 0 0 0.74"), process_group="world")
    with pytest.raises(ValueError, match="precision"):
        chem.scf(_mol("H 0 0 0; H 0 0 0.74"), precision="fp16")
    with pytest.raises(Exception, match="[Bb]asis"):  # PySCF itself refuses a basis it lacks, naming it
        gto.M(atom="H 0 0 0; H 0 0 0.74", basis="no-such-basis", verbose=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert chem.scf(_mol("H 0 0 0; H 0 0 0.74")).converged


def test_demo_runs_the_whole_job_with_progress_per_cycle():
    import io

    import torch

    from trnsci import chem_demo

    lines, err = [], io.StringIO()
    report = chem_demo._cycle_reporter("oh", stream=err)
    ok = chem_demo.dfmp2_part([("oh", "O 0 0 0; H 0 0 0.97")], "cc-pvdz", None, torch.float64, False,
                              echo=lines.append, spin=1)
    assert ok, lines
    row = next(ln for ln in lines if ln.strip().startswith("oh"))
    assert " uhf " in row and "|dE| bound 1e-08 Eh: all within" in lines[-1]
    report({"cycle": 1, "e_tot": -75.0, "delta_e": -1.0, "grad_norm": 0.1})
    assert err.getvalue() == "oh: SCF cycle   1  E = -75.0000000000 Eh  dE = -1.0e+00  |g| = 1.0e-01\n"


# ------------------------------------------------------------ device path (NKI kernels on the emulator)

@pytest.mark.simulator
def test_device_path_runs_jk_on_kernels_and_refines_to_fp64():
    """J/K of the cycles on trnblas's float32 GEMM/SYRK kernels, then float64 refinement on the host.

    Bounds from the issue: 1e-6 Eh (default) and 1e-8 Eh (precision="fp64") from the host float64 run;
    observed ~1e-12 for both (the refined energy is stationary: its error is second order in the
    float32 cycles' ~1e-6)."""
    import torch

    from trnsci import nki

    if nki.EMULATOR_ERROR is not None:
        pytest.skip("NKI emulator unavailable")
    mol = _mol("O 0 0 0; H 0 0 0.97", spin=1)  # UHF: two K builds per cycle (RHF is the one-spin case)
    host = chem.scf(mol, conv_tol=1e-10, backend="torch")
    for precision, bound in (("default", 1e-6), ("fp64", 1e-8)):
        with nki.capture() as runs:
            r = chem.scf(mol, conv_tol=1e-10, backend="simulator", precision=precision)
        assert r.converged and abs(r.e_tot - host.e_tot) <= bound, (precision, r.e_tot - host.e_tot)
        assert r.backends["jk"].startswith("simulator:") and "gemm" in r.backends["jk"]
        assert "syrk" in r.backends["jk"] and r.backends["refine"] == "torch"
        assert {x.kernel for x in runs} >= {"gemm_kernel", "syrk_kernel"}
        # the float32 cycles alone are off by far more than the refined result: the refinement matters
        assert max(abs(h["e_tot"] - host.e_tot) for h in r.history[-3:-1]) > 1e-9
    # MP2 on the kernels: AO->MO and the (ia|jb) blocks as float32 GEMMs; 1e-6 Eh bound (observed ~5e-9)
    e64 = chem.df_mp2(host, progress=False, backend="torch").e_corr
    with nki.capture() as runs:
        m = chem.df_mp2(r, dtype=torch.float32, backend="simulator", progress=False)
    assert m.backends["ao2mo"] == "simulator:gemm_kernel" and m.backends["energy"] == "simulator:gemm_kernel"
    assert abs(m.e_corr - e64) <= 1e-6 and abs(_pyscf_mp2(host.to_pyscf()) - e64) <= 1e-8


def test_small_max_memory_blocks_the_integrals_and_k_to_the_same_energy():
    """0.3 MiB: one auxiliary shell per int3c block and K from unpacked blocks per build; same energy to 1e-10."""
    mol = _mol("H 0 0 0; F 0 0 0.917")
    whole = chem.scf(mol, conv_tol=1e-10)
    blocked = chem.scf(mol, conv_tol=1e-10, max_memory=0.3)
    assert abs(blocked.e_tot - whole.e_tot) <= 1e-10
    np.testing.assert_array_equal(blocked.with_df._cderi, whole.with_df._cderi)


def test_mp2_on_scf_result_with_another_auxbasis_evaluates_its_integrals():
    """auxbasis given: the SCF's JK-fit integrals are not reused; PySCF's DFUMP2 with that basis agrees."""
    from pyscf import df
    from pyscf.mp.dfump2 import DFUMP2

    mol = _mol("O 0 0 0; H 0 0 0.97", spin=1)
    r = chem.scf(mol, conv_tol=1e-10)
    m = chem.df_mp2(r, auxbasis="cc-pvdz-ri", progress=False)
    mp = DFUMP2(r.to_pyscf())
    mp.with_df = df.DF(mol, auxbasis="cc-pvdz-ri")
    assert m.backends["int3c"] == "pyscf" and m.naux == mp.with_df.get_naoaux() != r.naux
    assert abs(m.e_corr - float(mp.kernel()[0])) <= 1e-8


@pytest.mark.simulator
@pytest.mark.parametrize("atoms, spin", [(WATER, 0), ("O 0 0 0; H 0 0 0.97", 1)], ids=["water", "OH radical"])
def test_mp2_fp64_mode_on_the_kernels_matches_pyscf_to_1e8(atoms, spin):
    """df_mp2(precision="fp64") on the simulator: AO->MO and the (ia|jb) blocks on the float32 GEMM kernel
    through exact integer slices, float64 accumulation on the host. Bound from the issue: 1e-8 Eh from
    PySCF's DFMP2/DFUMP2 (observed ~1e-16 Eh, docs/chem.md); the float32 kernel path misses it."""
    import torch
    from pyscf import scf as pscf

    from trnsci import nki

    if nki.EMULATOR_ERROR is not None:
        pytest.skip("NKI emulator unavailable")
    mol = _mol(atoms, spin=spin)
    mf = (pscf.RHF if spin == 0 else pscf.UHF)(mol)  # not density-fitted: metric, int3c and fit run too
    mf.conv_tol = 1e-10
    mf.kernel()
    ref = _pyscf_mp2(mf)
    with nki.capture() as runs:
        r = chem.df_mp2(mf, backend="simulator", progress=False, precision="fp64")
    assert abs(r.e_corr - ref) <= 1e-8, r.e_corr - ref
    assert r.backends["ao2mo"] == "simulator:gemm_kernel" and r.backends["energy"] == "simulator:gemm_kernel"
    assert runs and {x.kernel for x in runs} == {"gemm_kernel"}
    if spin == 0:  # the float32 kernel path is off by more than the bound: the fp64 mode is what meets it
        f32 = chem.df_mp2(mf, backend="simulator", progress=False, dtype=torch.float32)
        assert abs(f32.e_corr - ref) > 1e-8
    with pytest.raises(ValueError, match="precision='fp64'.*float64"):
        chem.df_mp2(mf, precision="fp64", dtype=torch.float32, progress=False)
    with pytest.raises(ValueError, match="precision"):
        chem.df_mp2(mf, precision="fp32", progress=False)


# ------------------------------------------------------------ resident factors on the stand-in neuron device

def test_device_neuron_runs_jk_ao2mo_and_mp2_on_resident_kernels():
    """scf/df_mp2(device="neuron") inside trnsci.testing.neuron_device(), backend "auto".

    The float32 factors live on the device; J/K (GEMM, SYRK), AO->MO (GEMM) and the pair energies
    (mp2_energy_kernel) launch on them. Bounds: the documented device tolerance 1e-6 Eh from
    PySCF for both energies (observed ~1e-12 for the refined SCF, ~4e-8 for the float32 MP2).
    Host transfers: 2 to place the factors (packed and unpacked), then per device J/K build
    2 + 2 * spins (the density vector and occupied orbitals there, J and K back): 4 for RHF.
    MP2: C_occ, C_vir, the factors, the triangle indices, eps_occ, eps_vir there; the energy
    kernel's two input checks and the energy sum read back: 9."""
    import torch
    from pyscf.mp.dfmp2 import DFMP2

    from trnsci.testing import neuron_device

    mol = _mol(WATER)
    ref = _pyscf_df(mol, "rhf")
    e_ref = float(DFMP2(ref).kernel()[0])
    with neuron_device() as dev:
        dev.reset()
        r = chem.scf(mol, conv_tol=1e-10, device="neuron")
        kernels, moved = list(dev.kernels), dev.host_transfers
        dev.reset()
        m = chem.df_mp2(r, dtype=torch.float32, device="neuron", progress=False)
        mp2_kernels, mp2_moved = list(dev.kernels), dev.host_transfers
    assert r.converged and abs(r.e_tot - ref.e_tot) <= 1e-6, r.e_tot - ref.e_tot
    assert r.backends["jk"] == "nki:gemm_kernel,syrk_kernel" and r.backends["refine"] == "torch"
    builds = len(r.history) + 1  # the initial guess's and one per float32 cycle; the refinement is on the host
    assert kernels == ["gemm_kernel", "gemm_kernel", "gemm_kernel", "syrk_kernel"] * builds, kernels
    assert moved == 2 + 4 * builds
    # the float32 cycles stop at the device tolerance, well before conv_tol: the host refinement matters
    assert abs(r.history[-1]["e_tot"] - ref.e_tot) > 1e-9
    assert m.backends["ao2mo"] == "nki:gemm_kernel" and m.backends["energy"] == "nki:mp2_energy_kernel"
    assert mp2_kernels.count("mp2_energy_kernel") >= 1 and "gemm_kernel" in mp2_kernels
    assert mp2_moved == 9, mp2_moved
    assert abs(m.e_corr - e_ref) <= 1e-6, m.e_corr - e_ref


def test_device_keyword_bad_values_are_named():
    import torch

    mol = _mol("H 0 0 0; H 0 0 0.74")
    with pytest.raises(TypeError, match="device"):
        chem.scf(mol, device=3)
    with pytest.raises(ValueError, match="device"):
        chem.scf(mol, device="nosuchdevice")
    r = chem.scf(mol, device="cpu")  # the host path
    assert r.converged and r.backends["refine"] == "-"
    with pytest.raises(ValueError, match="device"):
        chem.df_mp2(r, device="nosuchdevice", progress=False)
    assert chem.df_mp2(r, device=torch.device("cpu"), progress=False).e_corr < 0  # "cpu": the host path


def test_device_neuron_mp2_of_a_plain_mean_field_sends_ao2mo_blocks():
    """A non-DF PySCF RHF has no fitted factors to reuse: each AO->MO block goes to the device for its
    GEMMs and comes back for the float64 fit on the host; B then goes over once for the energy kernel.
    Bound: the device tolerance 1e-6 Eh from PySCF's DFMP2 (observed ~8e-8)."""
    import torch
    from pyscf import scf as pscf
    from pyscf.mp.dfmp2 import DFMP2

    from trnsci.testing import neuron_device

    mf = pscf.RHF(_mol(WATER)).run(conv_tol=1e-10)
    e_ref = float(DFMP2(mf).kernel()[0])
    with neuron_device() as dev:
        m = chem.df_mp2(mf, dtype=torch.float32, device="neuron", progress=False, pair_energies=True)
        kernels = set(dev.kernels)
    assert kernels == {"gemm_kernel", "mp2_energy_kernel"}, kernels
    assert m.backends["fit"] == "torch" and m.backends["energy"] == "nki:mp2_energy_kernel"
    assert m.pair_energies.device.type == "cpu"  # results on the input's (host) side
    assert abs(m.e_corr - e_ref) <= 1e-6, m.e_corr - e_ref
