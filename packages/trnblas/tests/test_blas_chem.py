"""DF-MP2: torch path and fused kernel vs an explicit NumPy loop and vs PySCF."""

import numpy as np
import pytest
import torch

import trnblas
import trnsci
from trnblas.chem import mp2_energy, mp2_pair_energies
from trnblas.kernels.mp2_energy import mp2_energy_counts, mp2_energy_kernel
from trnsci import nki


def _random_system(nocc, nvir, naux, seed=0):
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((nocc, nvir, naux)) * 0.1
    eo = -1.0 - rng.random(nocc)
    ev = 0.2 + rng.random(nvir)
    return B, eo, ev


def _loop_reference(B, eo, ev):
    """The textbook definition, one pair at a time (float64)."""
    nocc = B.shape[0]
    e = np.zeros((nocc, nocc))
    for i in range(nocc):
        for j in range(nocc):
            T = B[i] @ B[j].T
            D = eo[i] + eo[j] - ev[:, None] - ev[None, :]
            e[i, j] = np.sum(T * (2 * T - T.T) / D)
    return e


def _kernel_layout(B, eo, ev, dtype=np.float32):
    nocc, nvir, naux = B.shape
    L = np.ascontiguousarray(B.transpose(2, 0, 1).reshape(naux, nocc * nvir)).astype(dtype)
    return L, eo[None, :].astype(np.float32), ev[None, :].astype(np.float32)


# ----------------------------------------------------------------- torch path

@pytest.mark.parametrize("max_memory", [None, 0.002])  # 0.002 MiB forces ragged occupied blocks
def test_torch_pairs_match_loop(max_memory):
    B, eo, ev = _random_system(7, 11, 13)
    ref = _loop_reference(B, eo, ev)
    with trnsci.use_backend("torch"):
        e = mp2_pair_energies(B, eo, ev, max_memory=max_memory)
        E = mp2_energy(torch.from_numpy(B), torch.from_numpy(eo), torch.from_numpy(ev), max_memory=max_memory)
    assert isinstance(e, np.ndarray) and e.dtype == np.float64
    np.testing.assert_allclose(e, ref, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(e, e.T, rtol=1e-12)
    assert E.dim() == 0 and float(E) == pytest.approx(ref.sum(), rel=1e-12)
    assert float(E) < 0


def test_torch_float32_and_bfloat16_inputs():
    B, eo, ev = _random_system(4, 9, 10, seed=1)
    ref = _loop_reference(B, eo, ev).sum()
    with trnsci.use_backend("torch"):
        e32 = mp2_energy(torch.from_numpy(B).float(), torch.from_numpy(eo).float(), torch.from_numpy(ev).float())
        e16 = mp2_energy(torch.from_numpy(B).bfloat16(), torch.from_numpy(eo), torch.from_numpy(ev))
    assert e32.dtype == torch.float32 and float(e32) == pytest.approx(ref, rel=1e-5)
    assert e16.dtype == torch.float32 and float(e16) == pytest.approx(ref, rel=3e-2)  # bf16 integrals


def test_public_names_exported():
    assert trnblas.mp2_energy is mp2_energy
    assert trnblas.mp2_pair_energies is mp2_pair_energies


# ----------------------------------------------------------------- validation

def test_validation_errors():
    B, eo, ev = _random_system(3, 4, 5)
    with pytest.raises(ValueError, match="B must be 3-D"):
        mp2_energy(B[0], eo, ev)
    with pytest.raises(ValueError, match="eps_occ has 2 entries but B has nocc=3"):
        mp2_energy(B, eo[:2], ev)
    with pytest.raises(ValueError, match="eps_vir has 5 entries but B has nvir=4"):
        mp2_energy(B, eo, np.append(ev, 1.0))
    with pytest.raises(ValueError, match="eps_vir must be 1-D"):
        mp2_energy(B, eo, ev[:, None])
    with pytest.raises(ValueError, match="lowest virtual orbital energy"):
        mp2_energy(B, eo, ev - 2.0)
    with pytest.raises(ValueError, match="nonzero"):
        mp2_energy(B[:, :0], eo, ev[:0])
    with pytest.raises(ValueError, match="max_memory"):
        mp2_energy(B, eo, ev, max_memory=0)
    with pytest.raises(TypeError, match="B must be a torch.Tensor"):
        mp2_energy(B.tolist(), eo, ev)
    with pytest.raises(TypeError, match="B has dtype int64"):
        mp2_energy(torch.ones(3, 4, 5, dtype=torch.int64), eo, ev)


# ----------------------------------------------------------------- fused kernel

@pytest.mark.simulator
@pytest.mark.parametrize("shape,bo", [((5, 19, 84), None), ((3, 130, 200), None), ((4, 600, 50), None),
                                      ((5, 19, 84), 2), ((7, 140, 140), 3)])
def test_kernel_counters_match_closed_form(shape, bo):
    B, eo, ev = _random_system(*shape, seed=sum(shape))
    L, eo_row, ev_row = _kernel_layout(B, eo, ev)
    out, prof = nki.profile(mp2_energy_kernel, L, eo_row, ev_row, nocc=shape[0], bo=bo)
    low = np.tril(out)
    e = low + np.tril(low, -1).T
    ref = _loop_reference(L.reshape(shape[2], shape[0], shape[1]).transpose(1, 2, 0).astype(np.float64), eo, ev)
    np.testing.assert_allclose(e, ref, rtol=1e-5, atol=1e-6 * np.abs(ref).max())
    want = mp2_energy_counts(*shape, 4, bo)
    assert prof.hbm_read_bytes == want["hbm_read_bytes"]
    assert prof.hbm_write_bytes == want["hbm_write_bytes"]
    assert prof.instructions["tensor"] == want["tensor"]
    assert prof.instructions["scalar"] == want["scalar"]
    if bo is None:  # one occupied block: the minimum traffic, T never in HBM
        nocc, nvir, naux = shape
        assert prof.hbm_read_bytes == L.nbytes + 4 * (nocc + nvir)
        assert prof.hbm_write_bytes == 4 * nocc * nocc


@pytest.mark.simulator
def test_simulator_matches_torch_path():
    B, eo, ev = _random_system(6, 21, 40, seed=3)
    Bt, eot, evt = torch.from_numpy(B).float(), torch.from_numpy(eo), torch.from_numpy(ev)
    with trnsci.use_backend("torch"):
        ref = mp2_pair_energies(Bt, eot, evt)
    with trnsci.use_backend("simulator"), nki.capture() as runs:
        got = mp2_pair_energies(Bt, eot, evt)
        E = mp2_energy(Bt, eot, evt)
    assert [r.kernel for r in runs] == ["mp2_energy_kernel"] * 2
    assert all(r.backend == "simulator" for r in runs)
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-7)
    assert float(E) == pytest.approx(float(ref.sum()), rel=1e-5)


@pytest.mark.simulator
def _rounded_products_reference(B, eo, ev):
    """:func:`_loop_reference` with every bf16 x bf16 product of T rounded to bf16 (round to nearest even)
    before the sum, as the Tensor Engine of trn1/trn2 does (the emulator's default, docs/emulator.md)."""
    import ml_dtypes

    nocc = B.shape[0]
    e = np.zeros((nocc, nocc))
    for i in range(nocc):
        for j in range(nocc):
            P = B[i][:, None, :] * B[j][None, :, :]  # exact in float64: 8-bit x 8-bit significands
            T = P.astype(ml_dtypes.bfloat16).astype(np.float64).sum(-1)
            D = eo[i] + eo[j] - ev[:, None] - ev[None, :]
            e[i, j] = np.sum(T * (2 * T - T.T) / D)
    return e


@pytest.mark.parametrize("products", ["rounded", "exact"])
def test_simulator_bfloat16_integrals(products):
    from trnsci.nki.emulator import numerics

    B, eo, ev = _random_system(4, 30, 20, seed=4)
    Bb = torch.from_numpy(B).bfloat16()
    Bd = Bb.double().numpy()  # same rounded integrals
    ref = (_rounded_products_reference if products == "rounded" else _loop_reference)(Bd, eo, ev).sum()
    with trnsci.use_backend("simulator"), nki.capture() as runs, numerics.bf16_products(products):
        E = mp2_energy(Bb, torch.from_numpy(eo), torch.from_numpy(ev))
    assert len(runs) == 1
    # the same products as the reference, summed in fp32 over 20 auxiliary entries: 1e-5 relative is
    # ~100x that accumulation's error; the two references differ by ~1e-4 relative, so each mode is told apart
    assert float(E) == pytest.approx(ref, rel=1e-5)


@pytest.mark.simulator
def test_float64_runs_on_torch_even_under_simulator():
    B, eo, ev = _random_system(3, 5, 6)
    with trnsci.use_backend("simulator"), nki.capture() as runs:
        E = mp2_energy(B, eo, ev)
    assert runs == []
    assert float(E) == pytest.approx(_loop_reference(B, eo, ev).sum(), rel=1e-12)


# ----------------------------------------------------------------- PySCF

@pytest.fixture(scope="module")
def water():
    pytest.importorskip("pyscf")
    from pyscf import gto, mp, scf

    from trnblas.demo import MOLECULES, df_integrals

    mol = gto.M(atom=MOLECULES["water"], basis="cc-pvdz", verbose=0)
    mf = scf.RHF(mol).run()
    B, eo, ev = df_integrals(mf, "cc-pvdz-ri")
    e_ref = mp.MP2(mf).density_fit(auxbasis="cc-pvdz-ri").kernel()[0]
    return B, eo, ev, e_ref


def test_water_ccpvdz_matches_pyscf_dfmp2(water):
    B, eo, ev, e_ref = water
    assert B.shape == (5, 19, 84)
    with trnsci.use_backend("torch"):
        e = float(mp2_energy(B, eo, ev))
    assert e == pytest.approx(e_ref, abs=1e-10)


@pytest.mark.simulator
def test_water_ccpvdz_kernel_matches_pyscf(water):
    B, eo, ev, e_ref = water
    with trnsci.use_backend("simulator"), nki.capture() as runs:
        e = float(mp2_energy(torch.from_numpy(B).float(), torch.from_numpy(eo), torch.from_numpy(ev)))
    assert len(runs) == 1
    assert e == pytest.approx(e_ref, abs=1e-6)  # fp32 integrals and accumulation: ~1e-8 Eh observed


@pytest.mark.simulator
def test_kernel_rejects_what_does_not_fit_sbuf():
    from trnblas.kernels.mp2_energy import occ_block

    with pytest.raises(ValueError, match="do not fit SBUF"):
        occ_block(10, 2000, 4000, 4)
    assert occ_block(10, 19, 84, 2) == 10


@pytest.mark.slow
def test_dfmp2_from_pyscf_with_frozen_core_and_default_auxbasis():
    """trnblas.dfmp2(mf) equals PySCF's DF-MP2 with the same frozen core and default RI basis."""
    pytest.importorskip("pyscf")
    from pyscf import gto, scf
    from pyscf.mp.dfmp2 import DFMP2

    from trnblas.demo import MOLECULES

    mol = gto.M(atom=MOLECULES["ammonia"], basis="cc-pvdz", verbose=0)
    mf = scf.RHF(mol).run()
    # DFMP2(mf) takes PySCF's MP2-fit basis (cc-pVDZ-RI here). Beware: mp.MP2(mf).density_fit()
    # with no auxbasis resets it to the JK-fit default, which differs by ~1e-5 Eh.
    for frozen in (0, 1):
        e_ref = DFMP2(mf, frozen=frozen).kernel()[0]
        with trnsci.use_backend("torch"):
            e = trnblas.dfmp2(mf, frozen=frozen)
        # same integrals and metric, float64 throughout: agreement to round-off
        assert e == pytest.approx(e_ref, abs=1e-9)
    B, eo, ev = trnblas.df_factors(mf, frozen=1)
    assert B.shape[0] == eo.shape[0] == 4 and B.dtype == torch.float64
    with pytest.raises(ValueError, match="frozen must be below nocc=5"):
        trnblas.df_factors(mf, frozen=5)
    with trnsci.use_backend("simulator"), nki.capture() as runs:
        e32 = trnblas.dfmp2(mf, frozen=1, dtype=torch.float32)
    # the AO->MO transform on the GEMM kernel, then the fused pair-energy kernel
    kernels = [r.kernel for r in runs]
    assert kernels[-1] == "mp2_energy_kernel" and set(kernels[:-1]) == {"gemm_kernel"}
    assert e32 == pytest.approx(DFMP2(mf, frozen=1).kernel()[0], abs=1e-6)  # fp32 kernel


def test_df_factors_rejects_open_shell():
    pytest.importorskip("pyscf")
    from pyscf import gto, scf

    mf = scf.UHF(gto.M(atom="H 0 0 0", basis="sto-3g", spin=1, verbose=0)).run()
    with pytest.raises(ValueError, match="closed-shell"):
        trnblas.df_factors(mf)


@pytest.mark.parametrize("route", ["pool", "serial"])
def test_mp2_both_multithread_routes_match_the_loop_reference(route, monkeypatch):
    """With several torch threads the energy runs in a pool of single-threaded workers or block after
    block, as measured per shape class (trnsci.routes, family trnblas.mp2): both give the reference
    within 1e-12 relative (float64, naux = 20 terms per integral)."""
    from trnblas import chem
    from trnsci import routes

    B, eo, ev = _random_system(13, 9, 20, seed=5)
    ref = _loop_reference(B, eo, ev)
    asked = []
    real = routes.choose

    def spy(family, cls, cands, **kw):
        asked.append((family, sorted(cands), kw.get("default")))
        return real(family, cls, cands, **kw)

    monkeypatch.setattr(routes, "choose", spy)
    ran = []
    for name in ("_pairs_pool", "_pairs_serial"):
        fn = getattr(chem, name)
        monkeypatch.setattr(chem, name, lambda *a, fn=fn, name=name: ran.append(name) or fn(*a))
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with routes.force(route):
            e = mp2_pair_energies(torch.from_numpy(B), torch.from_numpy(eo), torch.from_numpy(ev))
    finally:
        torch.set_num_threads(threads)
    assert asked == [("trnblas.mp2", ["pool", "serial"], "pool")]
    assert ran == ["_pairs_" + route]
    np.testing.assert_allclose(e.numpy(), ref, rtol=1e-12, atol=1e-12 * np.abs(ref).max())
