"""trntensor's fused AO->MO kernel: results vs an explicit float64 NumPy einsum and the torch path,
the emulator's counters vs the kernel's closed forms.

Every public-API test records kernel runs (``kernel_ran``): a silent torch
fallback fails, and NkiFallbackWarning is an error in the pytest config.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trntensor
from trnsci import nki
from trnsci.testing import assert_counts, kernel_ran
from trntensor.chem import _ao_to_mo_torch
from trntensor.kernels.ao_to_mo import SBUF_BUDGET, _sbuf_bytes, ao_to_mo_counts, ao_to_mo_kernel, chunking

pytestmark = pytest.mark.simulator

U32 = 2.0**-24  # float32 unit roundoff


def _problem(nao, nocc, nvir, naux, seed=0):
    rng = np.random.default_rng(seed)
    eri3 = rng.standard_normal((nao, nao, naux)).astype(np.float32)
    c_occ = rng.standard_normal((nao, nocc)).astype(np.float32)
    c_vir = rng.standard_normal((nao, nvir)).astype(np.float32)
    return eri3, c_occ, c_vir


def _reference(eri3, c_occ, c_vir):
    """Explicit float64 einsum (no planner) and the float32 error bound of two length-nao sums.

    Each output element is two nested dot products of length nao; with fp32
    products and fp32 (PSUM) accumulation the error is at most
    ``(2 nao + 2) u`` times the same contraction of absolute values (the
    standard bound for nested summation, u = 2^-24); the inputs are exact fp32.
    """
    f = lambda x: x.astype(np.float64)  # noqa: E731
    ref = np.einsum("mi,mnP,na->iaP", f(c_occ), f(eri3), f(c_vir), optimize=False)
    nao = eri3.shape[0]
    absref = np.einsum("mi,mnP,na->iaP", np.abs(f(c_occ)), np.abs(f(eri3)), np.abs(f(c_vir)), optimize=True)
    return ref, (2 * nao + 2) * U32 * absref


# ragged on every axis: nao spans two 128-row tiles, naux several P-blocks, nvir two a-tiles
SHAPES = [(130, 5, 131, 515), (7, 3, 4, 9), (20, 600, 3, 2), (129, 1, 1, 1)]


@pytest.mark.parametrize("nao,nocc,nvir,naux", SHAPES)
def test_kernel_matches_einsum_counts_match_closed_form_intermediate_stays_on_chip(nao, nocc, nvir, naux):
    eri3, c_occ, c_vir = _problem(nao, nocc, nvir, naux)
    out, prof = nki.profile(ao_to_mo_kernel, eri3.reshape(nao, nao * naux), c_occ, c_vir)
    B = out.reshape(nvir, naux, nocc).transpose(2, 0, 1)
    ref, bound = _reference(eri3, c_occ, c_vir)
    assert np.all(np.abs(B - ref) <= bound)
    expected = ao_to_mo_counts(nao, nocc, nvir, naux)
    assert_counts(prof, expected)
    assert prof.dma_transfers == expected["dma"]
    ci, pb, _ = chunking(nao, nocc, nvir, naux)
    if ci == nocc:
        # the intermediate never reaches HBM: writes are exactly B; reads are eri3 once, c_occ once and
        # c_vir once per column chunk -- no nocc*nao*naux term (the two-GEMM path moves X twice)
        assert prof.hbm_write_bytes == 4 * nocc * nvir * naux
        chunks = -(-naux // pb)
        assert prof.hbm_read_bytes == 4 * (nao * nao * naux + nao * nocc + chunks * nao * nvir)


def test_occupied_chunks_reread_eri3():
    # nocc beyond one 512-wide chunk: eri3 is read once per occupied chunk (closed form above)
    nao, nocc, nvir, naux = 20, 600, 3, 2
    assert chunking(nao, nocc, nvir, naux) == (512, 1, 3)
    assert ao_to_mo_counts(nao, nocc, nvir, naux)["hbm_read_bytes"] == 4 * (
        2 * nao * nao * naux + nao * nocc + 2 * 2 * nao * nvir)


def test_chunk_narrows_for_large_nao_and_only_memory_limits_it():
    wide = chunking(1000, 40, 300, 2000)
    assert wide[0] * wide[1] == 480 and wide[2] == 128 and _sbuf_bytes(1000, *wide) <= SBUF_BUDGET
    ci, pb, aw = chunking(30000, 40, 300, 2000)  # X of all 235 n-tiles must fit: chunk and a-tile narrow
    assert ci * pb < 480 and aw < 128 and _sbuf_bytes(30000, ci, pb, aw) <= SBUF_BUDGET
    assert chunking(10**8, 4, 4, 4) is None  # not one column fits: the plan says torch (test_tensor_plans)


@pytest.mark.parametrize("nao,nocc,nvir,naux", [(130, 5, 131, 67), (9, 2, 3, 4)])
def test_public_api_runs_the_kernel(nao, nocc, nvir, naux):
    eri3, c_occ, c_vir = _problem(nao, nocc, nvir, naux, seed=2)
    copies = [x.copy() for x in (eri3, c_occ, c_vir)]
    with kernel_ran("ao_to_mo_kernel") as runs:
        B = trntensor.ao_to_mo_transform(eri3, c_occ, c_vir)  # NumPy in, NumPy out
    assert isinstance(B, np.ndarray) and B.dtype == np.float32 and B.shape == (nocc, nvir, naux)
    ref, bound = _reference(eri3, c_occ, c_vir)
    assert np.all(np.abs(B - ref) <= bound)
    # the torch path (two trnblas GEMMs) agrees within the sum of both bounds
    T = _ao_to_mo_torch(*(torch.from_numpy(x) for x in (eri3, c_occ, c_vir))).numpy()
    assert np.all(np.abs(B - T) <= 2 * bound)
    assert all(np.array_equal(a, b) for a, b in zip(copies, (eri3, c_occ, c_vir)))  # inputs untouched
    assert_counts(runs[0].profile, ao_to_mo_counts(nao, nocc, nvir, naux))


def test_public_api_noncontiguous_torch_inputs():
    eri3, c_occ, c_vir = _problem(11, 3, 5, 7, seed=3)
    E = torch.from_numpy(eri3).transpose(0, 1)  # a view: eri3[n, m, P]
    Co = torch.from_numpy(np.asfortranarray(c_occ))
    with kernel_ran("ao_to_mo_kernel"):
        B = trntensor.ao_to_mo_transform(E, Co, torch.from_numpy(c_vir))
    ref, bound = _reference(np.ascontiguousarray(eri3.transpose(1, 0, 2)), c_occ, c_vir)
    assert np.all(np.abs(B.numpy() - ref) <= bound)
