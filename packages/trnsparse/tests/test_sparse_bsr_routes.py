"""BSR SpMM's host routes (trnsci.routes family ``trnsparse.bsr_spmm``: a batch of tile products, one
GEMM per block row, or one GEMM on the dense form at high block density) against SciPy's CSR product,
on ragged shapes with empty block rows.

Tolerance: sums of up to ~40 products of standard-normal values: 1e-5 (float32) / 1e-12 (float64)
relative to the largest |A| |B| entry."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import trnsparse
from trnsci import routes
from trnsparse import ops


def _case(dtype, m=45, n=38, b=4, seed=0):
    rng = np.random.default_rng(seed)
    keep = rng.random((-(-m // b), -(-n // b))) < 0.45
    keep[2, :] = False  # an empty block row
    keep[5, :] = True   # a full one
    D = rng.standard_normal((m, n)) * np.kron(keep, np.ones((b, b)))[:m, :n]
    if np.dtype(dtype).kind == "c":
        D = D + 1j * D[::-1] * (D != 0)
    D = D.astype(dtype)
    return D, trnsparse.BSRMatrix.from_dense(torch.from_numpy(D), block_size=b)


@pytest.mark.parametrize("route", ["tiles", "row_gemm", "dense"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
@pytest.mark.parametrize("piece", [None, 2])
def test_each_route_matches_scipy(route, dtype, piece, monkeypatch):
    D, A = _case(dtype)
    if piece:  # rows of more tiles than one gather may hold are summed in pieces
        monkeypatch.setattr(ops, "_BSR_GATHER", piece * 4 * 11)
    rng = np.random.default_rng(1)
    X = rng.standard_normal((38, 11)).astype(dtype)
    ref = sp.csr_array(D) @ X  # (SciPy's BSR needs shapes divisible by the block)
    tol = (1e-5 if dtype == np.float32 else 1e-12) * float((np.abs(D) @ np.abs(X)).max())
    used = []
    real, real_dense = ops._bsr_row_gemm, ops._bsr_dense_form
    monkeypatch.setattr(ops, "_bsr_row_gemm", lambda *a: used.append("row_gemm") or real(*a))
    monkeypatch.setattr(ops, "_bsr_dense_form", lambda *a: used.append("dense") or real_dense(*a))
    with routes.force(route):
        C = trnsparse.bsr_spmm(A, torch.from_numpy(X))
        Cn = trnsparse.bsr_spmm(A, X[:, 1:].T.copy().T)  # NumPy, non-contiguous columns
    assert set(used) == ({route} - {"tiles"})
    assert np.abs(C.numpy() - ref).max() <= tol
    assert np.abs(Cn - ref[:, 1:]).max() <= tol


def test_autograd_takes_the_tile_batch():
    D, A = _case(np.float64)
    blocks = A.blocks.clone().requires_grad_()
    X = torch.randn(38, 11, dtype=torch.float64, requires_grad=True)
    with routes.force("row_gemm"):
        C = trnsparse.bsr_spmm(trnsparse.BSRMatrix._make(blocks, A.block_col_indices, A.block_row_ptrs, A.shape, 4),
                               X)
    C.sum().backward()
    np.testing.assert_allclose(X.grad.numpy(), D.T @ np.ones((45, 11)), rtol=1e-12, atol=1e-12)


def test_measure_mode_times_both_routes(monkeypatch):
    monkeypatch.setenv("TRNSCI_ROUTES", "measure")
    monkeypatch.setattr(ops, "BSR_MEASURE_MIN_FLOPS", 0)
    routes.forget()
    D, A = _case(np.float64)
    X = np.random.default_rng(2).standard_normal((38, 11))
    ref = sp.csr_array(D) @ X
    for _ in range(2):
        np.testing.assert_allclose(trnsparse.bsr_spmm(A, X), ref, rtol=1e-12, atol=1e-12)
    (choice,) = [c for k, c in routes.remembered().items() if k.startswith("trnsparse.bsr_spmm|")]
    # the case holds ~half its tiles: the dense form (at most 4x the tiles) is a candidate too
    assert choice.origin == "measured" and set(choice.times) == {"tiles", "row_gemm", "dense"}
    routes.forget()


def test_dense_form_is_not_a_candidate_for_sparse_tilings_and_does_not_outlive_the_tiles():
    # 2 of 16 tiles: the dense form would be 8x the tiles -- never built, whatever is forced
    D = np.zeros((16, 16))
    D[:4, :4], D[12:, 8:12] = 1.0, 2.0
    A = trnsparse.BSRMatrix.from_dense(torch.from_numpy(D), block_size=4)
    X = np.arange(32.0).reshape(16, 2) + 1
    with routes.force("dense"):
        np.testing.assert_allclose(trnsparse.bsr_spmm(A, X), D @ X, rtol=1e-12)
    assert "_bsr_dense_form" not in A.__dict__
    # a dense tiling: the form is kept on the matrix, and rebuilt after the tiles change in place
    D2, A2 = _case(np.float64)
    X2 = np.random.default_rng(3).standard_normal((38, 5)).astype(np.float64)
    X2 = np.repeat(X2, 2, axis=1)  # k = 10 > 8: past SciPy's few-right-hand-sides kernel
    with routes.force("dense"):
        np.testing.assert_allclose(trnsparse.bsr_spmm(A2, X2), D2 @ X2, rtol=1e-12, atol=1e-12)
        assert "_bsr_dense_form" in A2.__dict__
        A2.blocks.mul_(2.0)
        np.testing.assert_allclose(trnsparse.bsr_spmm(A2, X2), 2 * D2 @ X2, rtol=1e-12, atol=1e-12)


def test_row_form_kept_on_the_matrix_follows_its_tiles():
    """The side-by-side form of the tiles is kept on the matrix and rebuilt when the tiles change in place."""
    D, A = _case(np.float64)
    X = np.random.default_rng(3).standard_normal((38, 5 + 6))
    with routes.force("row_gemm"):
        np.testing.assert_allclose(trnsparse.bsr_spmm(A, X), sp.csr_array(D) @ X, rtol=1e-12, atol=1e-12)
        kept = A.__dict__["_bsr_row_form"][1]
        np.testing.assert_allclose(trnsparse.bsr_spmm(A, X), sp.csr_array(D) @ X, rtol=1e-12, atol=1e-12)
        assert A.__dict__["_bsr_row_form"][1] is kept
        with torch.no_grad():
            A.blocks.mul_(-2.0)
        np.testing.assert_allclose(trnsparse.bsr_spmm(A, X), sp.csr_array(-2.0 * D) @ X, rtol=1e-12, atol=1e-12)
        assert A.__dict__["_bsr_row_form"][1] is not kept
