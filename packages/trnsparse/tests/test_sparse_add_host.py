"""sparse_add's host merge (SciPy's csr_plus_csr on the values, union size cached per pattern pair)
against scipy.sparse: the union pattern is kept -- explicit zeros and cancellations stay stored,
which SciPy's own sum drops -- also when the cached union size meets values that now cancel."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import trnsparse
from trnsparse import arrays


def _pair(dtype, seed=0):
    Sa = sp.random(70, 53, 0.12, format="csr", random_state=seed + 1).astype(dtype)
    Sb = sp.random(70, 53, 0.07, format="csr", random_state=seed + 2).astype(dtype)
    if np.dtype(dtype).kind == "c":
        Sa = Sa + 1j * sp.random(70, 53, 0.12, format="csr", random_state=seed + 1).astype(dtype)
    Sa.sort_indices()
    Sb.sort_indices()
    return Sa, Sb


def _union(Sa, Sb):
    U = (abs(Sa) + abs(Sb)).tocsr()  # nonnegative: nothing cancels, every position of A or B
    U.sort_indices()
    return U


def _check(C, Sa, Sb, alpha, beta, dtype):
    U = _union(Sa, Sb)
    np.testing.assert_array_equal(C.row_ptrs.numpy(), U.indptr)
    np.testing.assert_array_equal(C.col_indices.numpy(), U.indices)
    ref = (alpha * Sa.toarray() + beta * Sb.toarray())
    # one rounding of alpha a + beta b per entry: a few ulps of the dtype
    tol = 4 * np.finfo(dtype).eps
    np.testing.assert_allclose(C.to_dense().numpy(), ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_repeated_sum_matches_scipy_and_caches_the_union_size(dtype, monkeypatch):
    Sa, Sb = _pair(dtype)
    A, B = trnsparse.from_scipy(Sa), trnsparse.from_scipy(Sb)
    calls = []
    real = arrays.union_nnz
    monkeypatch.setattr(arrays, "union_nnz", lambda *a: calls.append(1) or real(*a))
    with trnsparse.use_backend("torch"):
        C1 = trnsparse.sparse_add(A, B, 2.0, -0.5)
        C2 = trnsparse.sparse_add(A, B, -1.0, 3.0)
    assert len(calls) == 1  # the second sum reused the union size cached on A
    _check(C1, Sa, Sb, 2.0, -0.5, dtype)
    _check(C2, Sa, Sb, -1.0, 3.0, dtype)


def test_cancellation_after_the_union_size_is_cached_keeps_the_pattern():
    """Values changed in place (same index tensors: the cached size still holds) so that entries
    cancel: SciPy's merge drops them; the result must still store them as zeros."""
    Sa, Sb = _pair(np.float64, seed=3)
    A, B = trnsparse.from_scipy(Sa), trnsparse.from_scipy(Sb)
    with trnsparse.use_backend("torch"):
        trnsparse.sparse_add(A, B)  # caches the union size
        # make B equal to -A wherever both store an entry
        Da = Sa.toarray()
        rows = arrays.row_indices(B.row_ptrs, B.nnz).numpy()
        cols = B.col_indices.numpy()
        hit = Da[rows, cols] != 0
        assert hit.sum() >= 3  # the test needs overlapping positions
        vals = B.values.clone()
        vals[torch.from_numpy(hit)] = -torch.from_numpy(Da[rows, cols][hit])
        B.values = vals  # re-validated matrix, same pattern
        Sb2 = sp.csr_array((vals.numpy(), Sb.indices, Sb.indptr), shape=Sb.shape)
        C = trnsparse.sparse_add(A, B)
    assert (C.values == 0).sum() >= hit.sum()  # the cancelled positions are stored
    _check(C, Sa, Sb2, 1.0, 1.0, np.float64)
    assert (Sa + Sb2).nnz < C.nnz  # SciPy's own sum drops them


@pytest.mark.parametrize("alpha, beta", [(0.0, 1.0), (1.0, 0.0), (0.0, 0.0)])
def test_zero_scale_keeps_the_union_pattern(alpha, beta):
    Sa, Sb = _pair(np.float64, seed=5)
    A, B = trnsparse.from_scipy(Sa), trnsparse.from_scipy(Sb)
    with trnsparse.use_backend("torch"):
        trnsparse.sparse_add(A, B)
        C = trnsparse.sparse_add(A, B, alpha, beta)
    _check(C, Sa, Sb, alpha, beta, np.float64)


def test_union_size_cache_follows_the_index_arrays():
    """Another B (new index tensors), then the first again, then A's pattern replaced: the cached
    size is rebuilt each time, never reused for another pattern pair."""
    Sa, Sb = _pair(np.float64, seed=7)
    _, Sb2 = _pair(np.float64, seed=8)
    A, B, B2 = trnsparse.from_scipy(Sa), trnsparse.from_scipy(Sb), trnsparse.from_scipy(Sb2)
    with trnsparse.use_backend("torch"):
        _check(trnsparse.sparse_add(A, B), Sa, Sb, 1.0, 1.0, np.float64)
        _check(trnsparse.sparse_add(A, B2), Sa, Sb2, 1.0, 1.0, np.float64)
        _check(trnsparse.sparse_add(A, B, 1.0, -1.0), Sa, Sb, 1.0, -1.0, np.float64)
        A.col_indices = (A.col_indices + 1) % Sa.shape[1]  # same nnz, another pattern (re-canonicalized)
        Sa3 = sp.csr_array((A.values.numpy(), A.col_indices.numpy(), A.row_ptrs.numpy()), shape=Sa.shape)
        assert (Sa3 != Sa).nnz
        _check(trnsparse.sparse_add(A, B), Sa3, Sb, 1.0, 1.0, np.float64)
