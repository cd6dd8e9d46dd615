"""Routines with ``uplo``/``lower``/``upper`` read only the triangle they name (issue 19).

Each call gets a matrix whose other triangle holds garbage (~100x the entries
that matter) and is compared with NumPy on the clean symmetric/triangular
matrix. float64, n = 5, cond ~ 3: 1e-12 relative is ~1e4 ulp of margin while
a read of the wrong triangle is off by O(1). trnsolver's routines have the
same check in packages/trnsolver/tests/test_solver_dense.py (2-D and batched)
and test_solver_kernels.py (kernel path).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trnblas
import trnsparse

N = 5


def _case(uplo):
    rng = np.random.default_rng(0 if uplo == "upper" else 1)
    S = rng.standard_normal((N, N))
    S = S + S.T + 2 * N * np.eye(N)
    G = 100 * rng.standard_normal((N, N))
    T = np.triu(S) if uplo == "upper" else np.tril(S)
    other = np.tril(G, -1) if uplo == "upper" else np.triu(G, 1)
    return S, T, T + other, rng  # the named triangle of S (T), garbage in the other one


def _close(got, ref):
    got = np.asarray(got)
    assert np.abs(got - ref).max() <= 1e-12 * np.abs(ref).max()


@pytest.mark.parametrize("uplo", ["upper", "lower"])
def test_blas_and_sparse_read_only_the_named_triangle(uplo):
    S, T, Sg, rng = _case(uplo)
    Tg = Sg  # as a triangular matrix: T plus garbage in the triangle that must not be read
    x, B, A = rng.standard_normal(N), rng.standard_normal((N, 3)), rng.standard_normal((N, 3))
    t = torch.from_numpy
    _close(trnblas.symv(1.0, t(Sg), t(x), uplo=uplo), S @ x)
    _close(trnblas.symm(1.0, t(Sg), t(B), uplo=uplo), S @ B)
    _close(trnblas.trmv(t(Tg), t(x), uplo=uplo), T @ x)
    _close(trnblas.trsv(t(Tg), t(x), uplo=uplo), np.linalg.solve(T, x))
    _close(trnblas.trmm(1.0, t(Tg), t(B), uplo=uplo), T @ B)
    _close(trnblas.trsm(1.0, t(Tg), t(B), uplo=uplo), np.linalg.solve(T, B))
    keep = np.triu(np.ones((N, N), bool)) if uplo == "upper" else np.tril(np.ones((N, N), bool))
    R = np.asarray(trnblas.syrk(1.0, t(A), 1.0, t(Sg.copy()), uplo=uplo))
    _close(R[keep], (A @ A.T + S)[keep])  # BLAS: C's uplo triangle is read and written
    _close(trnsparse.spmv_symmetric(trnsparse.from_dense(t(Sg)), t(x), uplo=uplo), S @ x)
    _close(trnsparse.spsv(trnsparse.from_dense(t(Tg)), t(x), lower=uplo == "lower"), np.linalg.solve(T, x))
