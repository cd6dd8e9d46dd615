"""Formats and conversions vs scipy.sparse and dense NumPy."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from sparse_cases import CASES, DTYPES, all_formats, dense_case

import trnsparse
from trnsparse import BSRMatrix, COOMatrix, CSCMatrix, CSRMatrix


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", CASES)
def test_every_format_round_trips_to_dense(name, dtype):
    D = dense_case(name, dtype)
    for fmt, A in all_formats(D).items():
        assert A.shape == D.shape and A.dtype == torch.from_numpy(D).dtype, fmt
        assert A.device.type == "cpu"
        np.testing.assert_array_equal(A.to_dense().numpy(), D, err_msg=fmt)
        for conv in ("to_csr", "to_coo", "to_csc"):
            np.testing.assert_array_equal(getattr(A, conv)().to_dense().numpy(), D, err_msg=f"{fmt}.{conv}")
        np.testing.assert_array_equal(A.to_bsr(2).to_dense().numpy(), D, err_msg=f"{fmt}.to_bsr")
        np.testing.assert_array_equal(A.to_scipy().toarray(), D, err_msg=f"{fmt}.to_scipy")
        assert A.to_scipy().dtype == D.dtype
        if fmt != "bsr":
            assert A.nnz == np.count_nonzero(D), fmt
            assert A.density == (np.count_nonzero(D) / D.size if D.size else 0.0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_from_dense_and_from_scipy_match_scipy_arrays(dtype):
    D = dense_case("big", dtype)
    S = sp.csr_array(D)
    A = trnsparse.from_dense(torch.from_numpy(D))
    np.testing.assert_array_equal(A.row_ptrs.numpy(), S.indptr)
    np.testing.assert_array_equal(A.col_indices.numpy(), S.indices)
    np.testing.assert_array_equal(A.values.numpy(), S.data)
    for fmt in ("csr", "csc", "coo", "bsr"):
        B = trnsparse.from_scipy(S, format=fmt)
        assert B.format == fmt and B.dtype == torch.from_numpy(D).dtype  # never a silent downcast
        np.testing.assert_array_equal(B.to_dense().numpy(), D)


def test_from_scipy_keeps_float32_and_widens_integers():
    S = sp.random(20, 30, density=0.2, format="coo", dtype=np.float32, random_state=1)
    assert trnsparse.from_scipy(S).dtype == torch.float32
    Si = sp.csr_array(np.array([[1, 0], [0, 3]], dtype=np.int64))
    A = trnsparse.from_scipy(Si)
    assert A.dtype == torch.float64 and A.to_dense().tolist() == [[1.0, 0.0], [0.0, 3.0]]
    Sb = sp.bsr_array(dense_case("square"), blocksize=(2, 2))
    B = trnsparse.from_scipy(Sb, format="bsr")
    assert B.block_size == 2
    np.testing.assert_array_equal(B.to_dense().numpy(), Sb.toarray())
    with pytest.raises(TypeError, match="sp_matrix"):
        trnsparse.from_scipy(np.eye(2))


def test_from_dense_threshold_keeps_nan_and_drops_small():
    D = torch.tensor([[1e-9, np.nan], [-2.0, 1e-3]], dtype=torch.float64)
    A = trnsparse.from_dense(D, threshold=1e-6)
    # |1e-9| <= 1e-6 dropped; NaN kept (never silently lost); 1e-3 kept
    assert A.nnz == 3 and torch.isnan(A.values).sum() == 1
    assert A.col_indices.tolist() == [1, 0, 1]


def test_coo_duplicates_are_summed_everywhere():
    vals = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0], dtype=torch.float64)
    r = torch.tensor([2, 0, 2, 1, 0])
    c = torch.tensor([1, 0, 1, 3, 0])
    A = COOMatrix(vals, r, c, (3, 4))
    ref = sp.coo_array((vals.numpy(), (r.numpy(), c.numpy())), shape=(3, 4))  # SciPy sums duplicates
    assert A.nnz == 5 and not A.has_canonical_format
    S = A.sum_duplicates()
    assert S.nnz == 3 and S.has_canonical_format
    assert S.row_indices.tolist() == [0, 1, 2] and S.col_indices.tolist() == [0, 3, 1]
    for M in (A, S, A.to_csr(), A.to_csc(), A.to_bsr(2)):
        np.testing.assert_array_equal(M.to_dense().numpy(), ref.toarray())
    x = torch.arange(4, dtype=torch.float64)
    np.testing.assert_allclose((A @ x).numpy(), ref @ x.numpy())
    np.testing.assert_array_equal(A.to_scipy().toarray(), ref.toarray())
    np.testing.assert_array_equal(trnsparse.nnz_per_row(A).numpy(), [1, 1, 1])
    assert A.values.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]  # input untouched


def test_csr_with_unsorted_and_repeated_columns_is_canonicalised_without_touching_inputs():
    vals = torch.tensor([1.0, 2.0, 3.0, 4.0])
    cols = torch.tensor([2, 0, 2, 1])
    ptrs = torch.tensor([0, 3, 4])
    A = CSRMatrix(vals, cols, ptrs, (2, 3))
    ref = sp.csr_array((vals.numpy(), cols.numpy(), ptrs.numpy()), shape=(2, 3))
    np.testing.assert_array_equal(A.to_dense().numpy(), ref.toarray())
    assert A.col_indices.tolist() == [0, 2, 1] and A.values.tolist() == [2.0, 4.0, 4.0]
    assert cols.tolist() == [2, 0, 2, 1] and vals.tolist() == [1.0, 2.0, 3.0, 4.0]
    Cc = CSCMatrix(vals, cols, ptrs, (3, 2))  # same arrays read as CSC
    np.testing.assert_array_equal(Cc.to_dense().numpy(),
                                  sp.csc_array((vals.numpy(), cols.numpy(), ptrs.numpy()), shape=(3, 2)).toarray())


def test_bsr_layout_is_kernel_friendly_and_ragged_edges_are_zero_padded():
    D = torch.from_numpy(dense_case("big"))  # 37 x 29, block 8 -> 5 x 4 tiles, ragged on both edges
    B = BSRMatrix.from_dense(D, block_size=8)
    assert B.blocks.shape[1:] == (8, 8) and B.blocks.is_contiguous()
    assert B.padded_shape == (40, 32) and B.n_block_rows == 5 and B.n_block_cols == 4
    assert B.block_row_ptrs.numel() == 6 and B.nnz == B.n_blocks * 64
    ref = sp.bsr_array(np.pad(D.numpy(), ((0, 3), (0, 3))), blocksize=(8, 8))
    ref.eliminate_zeros()  # drops all-zero blocks
    assert B.n_blocks == ref.indices.size
    np.testing.assert_array_equal(B.block_col_indices.numpy(), ref.indices)
    np.testing.assert_array_equal(B.block_row_ptrs.numpy(), ref.indptr)
    np.testing.assert_array_equal(B.blocks.numpy(), ref.data)
    assert B.block_row_indices.tolist() == np.repeat(np.arange(5), np.diff(ref.indptr)).tolist()
    C = BSRMatrix.from_csr(trnsparse.from_dense(D), block_size=8)
    np.testing.assert_array_equal(C.blocks.numpy(), B.blocks.numpy())
    # a threshold drops tiles whose entries are all small, keeps the others exactly
    E = D.clone()
    E[:8, :8] = 1e-12 * torch.sign(E[:8, :8])
    T = BSRMatrix.from_dense(E, block_size=8, threshold=1e-9)
    assert T.n_blocks == B.n_blocks - 1 and 0 not in [k for k, j in zip(T.block_row_indices.tolist(),
                                                                           T.block_col_indices.tolist()) if j == 0]
    # the constructor accepts the same arrays and rejects padding that is not zero
    BSRMatrix(B.blocks, B.block_col_indices, B.block_row_ptrs, (37, 29), block_size=8)
    bad = B.blocks.clone()
    bad[-1, -1, -1] = 1.0
    with pytest.raises(ValueError, match="outside shape"):
        BSRMatrix(bad, B.block_col_indices, B.block_row_ptrs, (37, 29), block_size=8)


def test_bsr_constructor_sorts_and_sums_duplicate_blocks():
    blocks = torch.arange(12.0).reshape(3, 2, 2)
    A = BSRMatrix(blocks, torch.tensor([1, 0, 1]), torch.tensor([0, 3]), (2, 4), block_size=2)
    assert A.n_blocks == 2 and A.block_col_indices.tolist() == [0, 1]
    ref = np.zeros((2, 4))
    ref[:, 2:] = blocks[0].numpy() + blocks[2].numpy()
    ref[:, :2] = blocks[1].numpy()
    np.testing.assert_array_equal(A.to_dense().numpy(), ref)


def test_torch_sparse_round_trip():
    D = torch.from_numpy(dense_case("rect"))
    for t in (D.to_sparse(), D.to_sparse_csr(), D.to_sparse_csc(), torch.zeros(6, 4).to_sparse_bsr(2)):
        A = trnsparse.from_torch(t)
        np.testing.assert_array_equal(A.to_dense().numpy(), t.to_dense().numpy())
        np.testing.assert_array_equal(A.to_torch().to_dense().numpy(), t.to_dense().numpy())
    assert trnsparse.from_torch(D.to_sparse_csr()).to_torch().layout == torch.sparse_csr


def test_eye_and_random_sparse():
    I = trnsparse.eye_sparse(4, dtype=torch.float64)
    np.testing.assert_array_equal(I.to_dense().numpy(), np.eye(4))
    A = trnsparse.random_sparse(50, 40, density=0.05, dtype=torch.complex64, seed=3)
    assert A.nnz == 100 and A.dtype == torch.complex64
    B = trnsparse.random_sparse(50, 40, density=0.05, dtype=torch.complex64, seed=3)
    assert torch.equal(A.values, B.values) and torch.equal(A.col_indices, B.col_indices)
    assert np.count_nonzero(A.to_dense().numpy()) == 100  # distinct positions, nonzero values
    full = trnsparse.random_sparse(6, 5, density=1.0, seed=0, format="coo")
    assert full.nnz == 30 and full.has_canonical_format
    assert trnsparse.random_sparse(0, 5, seed=0).nnz == 0


@pytest.mark.parametrize("call,exc,pattern", [
    (lambda: CSRMatrix(torch.ones(2), torch.tensor([0, 5]), torch.tensor([0, 1, 2]), (2, 3)), ValueError,
     r"col_indices out of range: 5"),
    (lambda: CSRMatrix(torch.ones(2), torch.tensor([0, 1]), torch.tensor([0, 2, 1, 2]), (3, 3)), ValueError,
     r"row_ptrs must be non-decreasing"),
    (lambda: CSRMatrix(torch.ones(2), torch.tensor([0, 1]), torch.tensor([0, 2]), (2, 3)), ValueError,
     r"row_ptrs must have 3 entries"),
    (lambda: CSRMatrix(torch.ones(2), torch.tensor([0, 1]), torch.tensor([0, 1, 3]), (2, 3)), ValueError,
     r"row_ptrs\[-1\] must equal"),
    (lambda: CSRMatrix(torch.ones(3), torch.tensor([0, 1]), torch.tensor([0, 1, 2]), (2, 3)), ValueError,
     r"col_indices has 2 entries but values has 3"),
    (lambda: CSRMatrix(torch.ones(2, dtype=torch.int64), torch.tensor([0, 1]), torch.tensor([0, 1, 2]), (2, 3)),
     TypeError, r"values has dtype int64"),
    (lambda: CSRMatrix(torch.ones(2), torch.tensor([0.0, 1.0]), torch.tensor([0, 1, 2]), (2, 3)), TypeError,
     r"col_indices must hold integers"),
    (lambda: CSRMatrix(torch.ones(2), torch.tensor([0, 1]), torch.tensor([0, 1, 2]), (2, -3)), ValueError,
     r"shape\[1\] must be >= 0"),
    (lambda: CSRMatrix(torch.ones(2), torch.tensor([0, 1]), torch.tensor([0, 1, 2]), 3), ValueError,
     r"shape must be a pair"),
    (lambda: CSRMatrix(None, torch.tensor([0, 1]), torch.tensor([0, 1, 2]), (2, 3)), TypeError, r"values must be"),
    (lambda: COOMatrix(torch.ones(1), torch.tensor([-1]), torch.tensor([0]), (2, 2)), ValueError,
     r"row_indices out of range: -1"),
    (lambda: COOMatrix(torch.ones(1), torch.tensor([0]), torch.tensor([2]), (2, 2)), ValueError,
     r"col_indices out of range: 2"),
    (lambda: CSCMatrix(torch.ones(1), torch.tensor([3]), torch.tensor([0, 1]), (2, 1)), ValueError,
     r"row_indices out of range"),
    (lambda: CSCMatrix(torch.ones(1), torch.tensor([0]), torch.tensor([1, 1]), (2, 1)), ValueError,
     r"col_ptrs\[0\] must be 0"),
    (lambda: BSRMatrix(torch.ones(1, 2, 2), torch.tensor([0]), torch.tensor([0, 1]), (2, 2), block_size=3),
     ValueError, r"blocks must have shape \(n_blocks, 3, 3\)"),
    (lambda: BSRMatrix(torch.ones(1, 2, 2), torch.tensor([2]), torch.tensor([0, 1]), (2, 4), block_size=2),
     ValueError, r"block_col_indices out of range"),
    (lambda: BSRMatrix(torch.ones(1, 2, 2), torch.tensor([0]), torch.tensor([1, 1]), (2, 2), block_size=2),
     ValueError, r"block_row_ptrs\[0\] must be 0"),
    (lambda: BSRMatrix.from_dense(torch.ones(3, 3), block_size=0), ValueError, r"block_size must be >= 1"),
    (lambda: trnsparse.from_dense(torch.ones(3)), ValueError, r"A must be 2-D"),
    (lambda: trnsparse.from_dense(torch.ones(3, 3), threshold=-1.0), ValueError, r"threshold must be finite"),
    (lambda: trnsparse.random_sparse(3, 3, density=2.0), ValueError, r"density must be in \[0, 1\]"),
    (lambda: trnsparse.eye_sparse(3, dtype=torch.int32), TypeError, r"dtype must be one of"),
    (lambda: trnsparse.from_torch(torch.ones(2, 2, dtype=torch.int64).to_sparse()), TypeError, r"t has dtype"),
])
def test_bad_format_input_names_the_problem(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


# ---- issue 19: assigning an array never leaves a stale cache behind (reference: scipy.sparse)

def test_assigning_csr_indices_after_use_gives_the_new_matrix_product():
    A = trnsparse.from_dense(torch.eye(3, dtype=torch.float64))
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    A @ x  # builds the cached int32 host indices
    A.sorted_indices()
    A.col_indices = torch.tensor([2, 0, 1])
    ref = sp.csr_array((np.ones(3), [2, 0, 1], [0, 1, 2, 3]), shape=(3, 3))
    np.testing.assert_array_equal((A @ x).numpy(), ref @ x.numpy())  # [3, 1, 2], not the old [1, 2, 3]
    np.testing.assert_array_equal((A @ A).to_dense().numpy(), (ref @ ref).toarray())
    A.row_ptrs = torch.tensor([0, 0, 2, 3])  # row 0 empty, row 1 holds two entries
    ref = sp.csr_array((np.ones(3), [2, 0, 1], [0, 0, 2, 3]), shape=(3, 3))
    np.testing.assert_array_equal((A @ x).numpy(), ref @ x.numpy())
    assert A.has_sorted_indices and A.col_indices.tolist() == [0, 2, 1]  # re-canonicalised as the constructor does
    A.values = torch.tensor([5.0, 6.0, 7.0], dtype=torch.float64)
    ref = sp.csr_array(([5.0, 6.0, 7.0], [0, 2, 1], [0, 0, 2, 3]), shape=(3, 3))
    np.testing.assert_array_equal((A @ x).numpy(), ref @ x.numpy())
    np.testing.assert_array_equal(A.to_dense().numpy(), ref.toarray())
    with pytest.raises(ValueError, match="col_indices out of range"):
        A.col_indices = torch.tensor([0, 5, 1])
    with pytest.raises(ValueError, match="col_indices has 2 entries"):
        A.col_indices = torch.tensor([0, 1])
    np.testing.assert_array_equal(A.to_dense().numpy(), ref.toarray())  # a refused assignment changes nothing


def test_assigning_an_spgemm_results_values_drops_its_sorted_copy():
    rng = np.random.default_rng(0)
    D = (rng.random((6, 6)) < 0.4) * rng.standard_normal((6, 6))
    A = trnsparse.from_dense(torch.from_numpy(D))
    C = A @ A
    C.sorted_indices()  # cached when the product's columns are unsorted
    C.values = C.values * 2
    np.testing.assert_allclose(C.sorted_indices().to_dense().numpy(), 2 * (D @ D), rtol=1e-13, atol=1e-13)


def test_assigning_coo_indices_drops_the_canonical_flag():
    A = COOMatrix(torch.tensor([1.0, 2.0]), torch.tensor([0, 1]), torch.tensor([0, 1]), (2, 2))
    assert A.has_canonical_format  # cached True
    A.row_indices = torch.tensor([1, 1])
    A.col_indices = torch.tensor([1, 1])  # now a duplicate entry that must be summed
    ref = sp.coo_array(([1.0, 2.0], ([1, 1], [1, 1])), shape=(2, 2))
    assert not A.has_canonical_format
    np.testing.assert_array_equal(A.to_csr().to_dense().numpy(), ref.toarray())
    np.testing.assert_array_equal((A @ torch.ones(2)).numpy(), ref @ np.ones(2))


def test_assigning_csc_and_bsr_arrays_is_checked_like_the_constructor():
    A = trnsparse.from_dense(torch.eye(3)).to_csc()
    A.row_indices = torch.tensor([1, 2, 0])
    ref = sp.csc_array((np.ones(3), [1, 2, 0], [0, 1, 2, 3]), shape=(3, 3))
    np.testing.assert_array_equal(A.to_dense().numpy(), ref.toarray())
    B = BSRMatrix.from_dense(torch.eye(4), block_size=2)
    with pytest.raises(ValueError, match="block_col_indices out of range"):
        B.block_col_indices = torch.tensor([0, 2])
    B.block_col_indices = torch.tensor([1, 0])
    np.testing.assert_array_equal(B.to_dense().numpy(), np.kron([[0, 1], [1, 0]], np.eye(2)))


def test_bsr_of_a_ragged_shape_converts_to_torch_without_the_padding():
    D = torch.ones(8, 5)  # 5 is not a multiple of the block size 2
    B = BSRMatrix.from_dense(D, block_size=2)
    t = B.to_torch()
    assert tuple(t.shape) == (8, 5) and tuple(B.to_dense().shape) == (8, 5)
    np.testing.assert_array_equal(t.to_dense().numpy(), np.ones((8, 5)))
    np.testing.assert_array_equal(trnsparse.from_torch(t).to_dense().numpy(), np.ones((8, 5)))
    assert BSRMatrix.from_dense(torch.ones(8, 6), block_size=2).to_torch().layout == torch.sparse_bsr
