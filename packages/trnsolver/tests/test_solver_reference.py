"""The private torch references the NKI kernels will mirror, vs LAPACK/SciPy:
parallel Brent-Luk Jacobi (scalar and block), Newton-Schulz (public, on
trnblas.gemm) and blocked Cholesky on trnblas TRSM/SYRK/GEMM.

Jacobi bounds: eigenvalues within c n eps ||A|| of scipy's (Jacobi is at
least as accurate as QR-based solvers); ||A V - V diag(w)||, ||V^T V - I||
within c n eps (c = 50). Sizes are small: the reference is a Python loop
over rounds.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sl
import torch

from trnsolver._nki.eigen_jacobi import _block_jacobi_eigh_torch, _jacobi_eigh_torch, round_robin
from trnsolver._nki.factor_blocked import _blocked_cholesky_torch


def sym(n, dt, seed=0, batch=()):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(batch + (n, n), generator=g, dtype=dt)
    return X + X.mT


def check(A, w, V, dt, c=50):
    n = A.shape[-1]
    e = torch.finfo(dt).eps
    nA = float(torch.linalg.matrix_norm(A, 2).max())
    ws = np.linalg.eigvalsh(A.double().numpy())
    np.testing.assert_allclose(w.double().numpy(), ws, atol=c * n * e * nA)
    assert float((A @ V - V * w.unsqueeze(-2)).abs().max()) <= c * n * e * nA
    assert float((V.mT @ V - torch.eye(n, dtype=dt)).abs().max()) <= c * n * e


def test_round_robin_covers_every_pair_once():
    for n in (2, 4, 10):
        top, bot = round_robin(n)
        pairs = {tuple(sorted(p)) for r in range(n - 1) for p in zip(top[r].tolist(), bot[r].tolist())}
        assert len(pairs) == n * (n - 1) // 2
        for r in range(n - 1):
            assert sorted(top[r].tolist() + bot[r].tolist()) == list(range(n))


@pytest.mark.parametrize("dt", [torch.float32, torch.float64])
@pytest.mark.parametrize("n", [1, 2, 5, 16])
def test_scalar_jacobi(dt, n):
    A = sym(n, dt, n)
    tol = 4 * n * float(torch.finfo(dt).eps)   # off(A) stagnates near eps ||A|| sqrt(n)
    w, V, sweeps = _jacobi_eigh_torch(A, tol, 30)
    check(A, w, V, dt)
    assert sweeps <= 12   # quadratic convergence: ~log2(n) + few sweeps


def test_scalar_jacobi_batched_and_repeated():
    n = 8
    Q, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((n, n)))
    A = torch.from_numpy(np.stack([(Q * np.array([1, 1, 1, 2, 2, 3, 3, 3.0])) @ Q.T, sym(n, torch.float64).numpy()]))
    w, V, _ = _jacobi_eigh_torch(A, 1e-15, 30)
    check(A, w, V, torch.float64)


def test_block_jacobi_beyond_one_tile():
    # block=4 stands in for the device's 64 (2 blocks = one 128 tile) so the test stays small
    A = sym(22, torch.float64, 3)
    w, V, sweeps = _block_jacobi_eigh_torch(A, 1e-14, 40, block=4)
    check(A, w, V, torch.float64)
    assert 1 <= sweeps < 40


def test_block_jacobi_fp32():
    A = sym(20, torch.float32, 4)
    w, V, _ = _block_jacobi_eigh_torch(A, 1e-6, 40, block=4)
    check(A, w, V, torch.float32)


@pytest.mark.parametrize("n,nb", [(1, 4), (9, 4), (23, 8), (16, 16)])
def test_blocked_cholesky_vs_scipy(n, nb):
    g = torch.Generator().manual_seed(n)
    X = torch.randn(n, n, generator=g, dtype=torch.float64)
    A = X @ X.T + n * torch.eye(n, dtype=torch.float64)
    A0 = A.clone()
    L, info = _blocked_cholesky_torch(A, nb)
    assert info == 0 and torch.equal(A, A0)
    np.testing.assert_allclose(L.numpy(), sl.cholesky(A.numpy(), lower=True), atol=1e-12 * n)


def test_blocked_cholesky_reports_global_minor():
    A = torch.eye(20, dtype=torch.float64)
    A[13, 13] = -1.0
    assert _blocked_cholesky_torch(A, 4)[1] == 14
