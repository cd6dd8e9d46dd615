"""Quantum-chemistry screening vs NumPy (exact 0/1 masks)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trnsparse


def _diag(n=24, seed=0):
    rng = np.random.default_rng(seed)
    return 10.0 ** rng.uniform(-14, 0, n)  # (ii|ii)-like magnitudes spanning 14 decades


def test_screened_spmm_is_the_exactly_masked_product():
    d = _diag()
    thr = 1e-9
    rng = np.random.default_rng(1)
    A = rng.standard_normal((24, 24))
    B = rng.standard_normal((24, 5))
    # exact decision: the float64 product |d_i||d_j| vs the threshold, no square roots
    mask = np.abs(d)[:, None] * np.abs(d)[None, :] > thr
    assert 0 < mask.sum() < mask.size
    out = trnsparse.screened_spmm(A, d, B, thr)
    np.testing.assert_allclose(out, (A * mask) @ B, rtol=1e-13, atol=1e-13)
    At = torch.from_numpy(A).requires_grad_(True)
    torch.autograd.gradcheck(lambda a: trnsparse.screened_spmm(a, torch.from_numpy(d), torch.from_numpy(B), thr),
                             (At,))


def test_schwarz_and_pair_screens():
    d = _diag().reshape(4, 6)
    Q = trnsparse.schwarz_bounds(d)
    np.testing.assert_allclose(Q, np.sqrt(d), rtol=1e-15)
    m = trnsparse.screen_quartets(Q, threshold=1e-8)
    np.testing.assert_array_equal(m, Q.astype(np.float64) ** 2 > 1e-8)
    Qs = np.sqrt(np.outer(_diag(8), _diag(8)))
    P = np.random.default_rng(2).standard_normal((8, 8))
    ref = Qs * np.max(np.abs(P) * Qs) > 1e-6
    np.testing.assert_array_equal(trnsparse.density_screen(Qs, P, threshold=1e-6), ref)
    st = trnsparse.sparsity_stats(torch.from_numpy(Qs), threshold=1e-6)
    sig = int((Qs ** 2 > 1e-6).sum())
    assert st["significant_pairs"] == sig and st["total_pairs"] == 64
    assert st["significant_quartets_upper"] == sig * sig and st["pair_sparsity"] == 1 - sig / 64


@pytest.mark.parametrize("call,exc,pattern", [
    (lambda: trnsparse.screened_spmm(torch.ones(3, 3), torch.ones(2), torch.ones(3, 1), 1e-8), ValueError,
     r"diag_integrals has shape \(2,\)"),
    (lambda: trnsparse.screened_spmm(torch.ones(3, 3), torch.ones(3), torch.ones(3, 1), -1.0), ValueError,
     r"threshold must be finite"),
    (lambda: trnsparse.screened_spmm(torch.ones(3, 3), torch.ones(3), torch.ones(3, 1, dtype=torch.float64), 0.1),
     TypeError, r"B has dtype float64"),
    (lambda: trnsparse.screen_quartets(torch.ones(3, dtype=torch.complex64)), TypeError, r"Q has dtype complex64"),
    (lambda: trnsparse.density_screen(torch.ones(3, 3), torch.ones(2, 2)), ValueError, r"P has shape"),
])
def test_bad_screening_input(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()
