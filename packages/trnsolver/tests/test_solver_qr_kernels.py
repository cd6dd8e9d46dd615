"""Householder QR (panel kernel + compact WY on GEMM/TRSM kernels) and lstsq, through the simulator.

References: ``numpy.linalg.qr`` / ``numpy.linalg.lstsq`` in float64. QR is
unique up to the signs of R's rows (Q's columns), so R is compared in
absolute value and Q by orthogonality and ``Q R = A``.

Tolerances: Householder QR is backward stable, ``|Q R - A| <= c m n eps32 |A|``
and ``|Q^T Q - I| <= c m eps32``; with c m ~ 260 here we allow ``1e-5 m`` for
orthogonality and ``1e-5 m max|A|`` for the rest (observed at 260 x 130:
7e-7 and 4e-6). lstsq on a Gaussian 140 x 30 matrix (cond ~ 2): ``1e-4``
relative to the largest entry.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trnsolver
from trnsci.backend import use_backend
from trnsci.dispatch import plan_call
from trnsci.nki import emulator
from trnsci.testing import assert_counts, assert_plan_matches_run
from trnsolver.kernels.qr_panel import qr_panel_counts, qr_panel_kernel

pytestmark = pytest.mark.simulator


def _mat(m, n, seed=None):
    return np.random.default_rng(m * 1000 + n if seed is None else seed).standard_normal((m, n)).astype(np.float32)


@pytest.mark.parametrize("w,b", [(1, 1), (37, 20), (600, 9)])  # 600: two 512-column PSUM chunks
def test_qr_panel_kernel_reflectors_and_counters(w, b):
    A = _mat(w, b)
    if b > 3:
        A[:, 2] = 0.0  # a zero column: tau = 2, v = e_j (still orthogonal)
    (qt, tau), prof = emulator.profile(qr_panel_kernel, np.ascontiguousarray(A.T), target="trn1")
    want = qr_panel_counts(w, b)
    want.pop("kernel")
    assert_counts(prof, want)
    F = qt.T.astype(np.float64)
    Q = np.eye(w)
    for j in range(b):
        v = np.zeros(w)
        v[j] = 1.0
        v[j + 1:] = F[j + 1:, j]
        Q = Q @ (np.eye(w) - tau[j, 0] * np.outer(v, v))
    R = np.triu(F[:b, :b])
    assert np.abs(Q.T @ Q - np.eye(w)).max() <= 1e-5 * w
    assert np.abs(Q[:, :b] @ R - A).max() <= 1e-5 * w * max(np.abs(A).max(), 1)
    np.testing.assert_allclose(np.abs(R), np.abs(np.linalg.qr(A.astype(np.float64), mode="r")), rtol=0,
                               atol=1e-5 * w * np.abs(A).max())


@pytest.mark.parametrize("m,n,mode", [(37, 20, "reduced"), (20, 37, "complete"), (260, 130, "reduced"),
                                      (260, 130, "r")])
def test_qr_vs_numpy_up_to_signs_and_plan_equals_run(m, n, mode):
    A = _mat(m, n)
    with use_backend("simulator"):
        plan, (Q, R), runs = assert_plan_matches_run(trnsolver.qr, torch.from_numpy(A), mode=mode)
    assert "qr_panel_kernel" in plan.kernel["kernels"]
    ref = np.linalg.qr(A.astype(np.float64), mode=mode)
    Rref = ref if mode == "r" else ref[1]
    tol = 1e-5 * m * np.abs(A).max()
    assert R.shape == Rref.shape
    np.testing.assert_allclose(np.abs(R.numpy()), np.abs(Rref), rtol=0, atol=tol)
    if mode != "r":
        Qn = Q.numpy().astype(np.float64)
        assert Qn.shape == ref[0].shape
        assert np.abs(Qn.T @ Qn - np.eye(Qn.shape[1])).max() <= 1e-5 * m
        assert np.abs(Qn @ R.numpy() - A).max() <= tol
    else:
        assert Q.numel() == 0


def test_lstsq_on_the_device_vs_numpy():
    A = _mat(140, 30)
    b = _mat(140, 1)[:, 0]
    with use_backend("simulator"):
        plan, (x, res, rank, s), runs = assert_plan_matches_run(trnsolver.lstsq, torch.from_numpy(A),
                                                                torch.from_numpy(b))
    assert plan.backend == "simulator"
    xr, rr, rk, _ = np.linalg.lstsq(A.astype(np.float64), b.astype(np.float64), rcond=None)
    np.testing.assert_allclose(x.numpy(), xr, rtol=0, atol=1e-4 * np.abs(xr).max())
    np.testing.assert_allclose(float(res), rr[0], rtol=1e-4)
    assert int(rank) == rk == 30 and s.numel() == 0  # the QR path reports no singular values (as gels)


def test_lstsq_rank_deficient_gets_the_minimum_norm_solution():
    A = np.random.default_rng(2).integers(-5, 6, (20, 6)).astype(np.float32)
    A[:, 5] = A[:, 0] + A[:, 1]  # exactly dependent (small integers add exactly)
    b = _mat(20, 1, seed=3)[:, 0]
    with use_backend("simulator"):
        x, res, rank, s = trnsolver.lstsq(torch.from_numpy(A), torch.from_numpy(b))
    xr, _, rk, _ = np.linalg.lstsq(A.astype(np.float64), b.astype(np.float64), rcond=None)
    assert int(rank) == rk == 5
    np.testing.assert_allclose(x.numpy(), xr, rtol=0, atol=1e-4 * np.abs(xr).max())


def test_what_the_qr_path_does_not_take_says_why():
    with use_backend("simulator"):
        assert "m=3 < n=5" in plan_call(trnsolver.lstsq, torch.ones(3, 5), torch.ones(3)).reason
        assert "float64" in plan_call(trnsolver.qr, torch.ones(4, 4, dtype=torch.float64)).reason
        assert "empty" in plan_call(trnsolver.qr, torch.ones(0, 4)).reason
