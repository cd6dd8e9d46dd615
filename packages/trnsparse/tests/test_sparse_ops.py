"""Sparse ops vs scipy.sparse and dense NumPy, every format, real and complex."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla
import torch
from sparse_cases import CASES, DTYPES, all_formats, dense_case, tol

import trnsparse


def _rhs(n, k, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, k) if k else n)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(x.shape)
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", CASES)
def test_spmv_spmm_every_format(name, dtype):
    D = dense_case(name, dtype)
    m, n = D.shape
    x, X = _rhs(n, 0, dtype), _rhs(n, 3, dtype, 1)
    y, Y = _rhs(m, 0, dtype, 2), _rhs(m, 3, dtype, 3)
    S = sp.csr_array(D)
    t = tol(dtype)
    for fmt, A in all_formats(D).items():
        np.testing.assert_allclose(trnsparse.spmv(A, x, alpha=2.0, y=y, beta=-0.5), 2 * (S @ x) - 0.5 * y,
                                   rtol=t, atol=t, err_msg=fmt)
        np.testing.assert_allclose(trnsparse.spmm(A, X, alpha=0.5, C=Y, beta=2.0), 0.5 * (S @ X) + 2 * Y,
                                   rtol=t, atol=t, err_msg=fmt)
        xt = torch.from_numpy(x)
        np.testing.assert_allclose((A @ xt).numpy(), D @ x, rtol=t, atol=t, err_msg=fmt)  # operator
        np.testing.assert_allclose(A.matvec(torch.from_numpy(X)).numpy(), D @ X, rtol=t, atol=t, err_msg=fmt)
        np.testing.assert_allclose(A @ X, D @ X, rtol=t, atol=t, err_msg=fmt)  # NumPy in -> NumPy out
        np.testing.assert_allclose(trnsparse.bsr_spmm(A.to_bsr(4), X), D @ X, rtol=t, atol=t, err_msg=fmt)


def test_spmv_with_autograd_matches_dense_gradient():
    D = torch.from_numpy(dense_case("rect"))
    A = trnsparse.from_dense(D)
    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    vals = A.values.clone().requires_grad_(True)
    Ag = trnsparse.CSRMatrix(vals, A.col_indices, A.row_ptrs, A.shape)
    torch.autograd.gradcheck(lambda v, x: trnsparse.spmv(trnsparse.CSRMatrix(v, A.col_indices, A.row_ptrs, A.shape),
                                                         x), (vals, x))
    (Ag @ x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), D.sum(0).numpy(), atol=1e-12)
    B = trnsparse.BSRMatrix.from_dense(D, block_size=4)
    blocks = B.blocks.clone().requires_grad_(True)
    X = torch.randn(5, 2, dtype=torch.float64, requires_grad=True)
    torch.autograd.gradcheck(lambda bl, X: trnsparse.bsr_spmm(trnsparse.BSRMatrix._make(
        bl, B.block_col_indices, B.block_row_ptrs, B.shape, 4), X), (blocks, X))


@pytest.mark.parametrize("dtype", DTYPES)
def test_spgemm_add_scale_transpose(dtype):
    A = dense_case("big", dtype)
    B = dense_case("big", dtype).T.copy() * 0.5 + 0
    Sa, Sb = sp.csr_array(A), sp.csr_array(B)
    t = tol(dtype)
    for fa, TA in all_formats(A).items():
        for fb, TB in all_formats(B).items():
            C = trnsparse.spgemm(TA, TB)
            assert isinstance(C, trnsparse.CSRMatrix)
            np.testing.assert_allclose(C.to_dense().numpy(), (Sa @ Sb).toarray(), rtol=t, atol=t,
                                       err_msg=f"{fa}@{fb}")
        np.testing.assert_allclose((TA @ TA.T).to_dense().numpy(), A @ A.T, rtol=t, atol=t)
        np.testing.assert_array_equal(TA.T.to_dense().numpy(), A.T)
        assert TA.T.format == TA.format
        np.testing.assert_array_equal(trnsparse.sparse_transpose(TA).to_dense().numpy(), A.T)
        np.testing.assert_allclose(trnsparse.sparse_scale(TA, 3.0).to_dense().numpy(), 3 * A, rtol=t)
        np.testing.assert_allclose((-TA * 2).to_dense().numpy(), -2 * A, rtol=t)
        np.testing.assert_allclose(trnsparse.sparse_add(TA, TA.T.T, alpha=2.0, beta=-0.5).to_dense().numpy(),
                                   1.5 * A, rtol=t, atol=t)
        np.testing.assert_allclose((TA + TA).to_dense().numpy(), 2 * A, rtol=t)
        np.testing.assert_allclose((TA - TA).to_dense().numpy(), 0 * A, atol=t)
        np.testing.assert_array_equal(trnsparse.nnz_per_row(TA).numpy(), np.diff(Sa.indptr))
    C = trnsparse.spgemm(trnsparse.from_scipy(Sa), trnsparse.from_scipy(Sb)).sorted_indices()
    assert C.has_sorted_indices and C.to_coo().has_canonical_format
    R = Sa @ Sb
    R.sort_indices()
    np.testing.assert_array_equal(C.col_indices.numpy(), R.indices)  # the same canonical pattern as SciPy
    np.testing.assert_array_equal(C.row_ptrs.numpy(), R.indptr)


def test_spgemm_torch_route_matches_scipy():
    """The pure-torch SpGEMM (used under autograd / off CPU) against SciPy."""
    from trnsparse.ops import _spgemm_torch

    A = trnsparse.from_dense(torch.from_numpy(dense_case("big")))
    B = trnsparse.from_dense(torch.from_numpy(dense_case("big").T.copy()))
    with torch.enable_grad():
        va = A.values.clone().requires_grad_(True)
        vals, cols, ptrs, is_sorted = _spgemm_torch(va, A.col_indices, A.row_ptrs, A.shape, B.values, B.col_indices,
                                         B.row_ptrs, B.shape)
    R = (A.to_scipy() @ B.to_scipy())
    R.sort_indices()
    assert is_sorted
    np.testing.assert_array_equal(cols.numpy(), R.indices)
    np.testing.assert_allclose(vals.detach().numpy(), R.data, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sddmm(dtype):
    P = dense_case("rect", dtype)
    X, Y = _rhs(7, 4, dtype, 5), _rhs(4, 5, dtype, 6).astype(dtype)
    A = trnsparse.from_dense(torch.from_numpy(P))
    out = trnsparse.sddmm(A, torch.from_numpy(X), torch.from_numpy(Y), alpha=2.0, beta=1.0)
    ref = np.where(P != 0, 2 * (X @ Y) + P, 0)
    np.testing.assert_allclose(out.to_dense().numpy(), ref, rtol=tol(dtype), atol=tol(dtype))
    assert torch.equal(out.col_indices, A.col_indices)


def test_sddmm_gradcheck():
    A = trnsparse.from_dense(torch.from_numpy(dense_case("rect")))
    X = torch.randn(7, 3, dtype=torch.float64, requires_grad=True)
    Y = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    torch.autograd.gradcheck(lambda X, Y: trnsparse.sddmm(A, X, Y).values, (X, Y))


@pytest.mark.parametrize("uplo", ["upper", "lower", "U", "L"])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128, np.float32])
def test_spmv_symmetric_reads_only_its_triangle(uplo, dtype):
    D = dense_case("square", dtype) + 3 * np.eye(10, dtype=dtype)
    T = np.triu(D) if uplo[0].lower() == "u" else np.tril(D)
    S = T + T.T - np.diag(np.diag(T))  # complex symmetric, not Hermitian
    x = _rhs(10, 0, dtype)
    A = trnsparse.from_dense(torch.from_numpy(D))  # both triangles stored: the other one must be ignored
    np.testing.assert_allclose(trnsparse.spmv_symmetric(A, x, alpha=2.0, uplo=uplo), 2 * S @ x,
                               rtol=tol(dtype), atol=tol(dtype))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
@pytest.mark.parametrize("n", [1, 7, 300])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("unit", [False, True])
def test_spsv_matches_spsolve_triangular(dtype, n, lower, unit):
    rng = np.random.default_rng(n)
    D = np.where(rng.random((n, n)) < 0.05, rng.standard_normal((n, n)), 0)
    if np.dtype(dtype).kind == "c":
        D = D + 1j * np.where(D != 0, rng.standard_normal((n, n)), 0)
    T = (np.tril(D) if lower else np.triu(D)) + np.diag(2 + rng.random(n))
    T = T.astype(dtype)
    S = sp.csr_array(T)
    b = _rhs(n, 0, dtype, 1)
    B = _rhs(n, 3, dtype, 2)
    ref = spla.spsolve_triangular(S, b, lower=lower, unit_diagonal=unit)
    refB = spla.spsolve_triangular(S, B, lower=lower, unit_diagonal=unit)
    # Diagonally dominant-ish triangular factor, n <= 300: error ~ n * eps * cond, cond <~ 1e2.
    t = 2e-3 if np.dtype(dtype) == np.float32 else 1e-9
    A = trnsparse.from_scipy(S)
    np.testing.assert_allclose(trnsparse.spsv(A, b, lower=lower, unit_diagonal=unit), ref, rtol=t, atol=t)
    np.testing.assert_allclose(trnsparse.spsm(A, B, lower=lower, unit_diagonal=unit), refB, rtol=t, atol=t)
    refT = spla.spsolve_triangular(sp.csr_array(T.T), b, lower=not lower, unit_diagonal=unit)
    np.testing.assert_allclose(trnsparse.spsv(A, b, lower=lower, unit_diagonal=unit, trans=True), refT,
                               rtol=t, atol=t)


def test_spsv_singular_and_gradcheck():
    L = trnsparse.from_dense(torch.tensor([[1.0, 0.0], [1.0, 0.0]], dtype=torch.float64))
    with pytest.raises(np.linalg.LinAlgError, match="singular: the diagonal entry of row 1"):
        trnsparse.spsv(L, torch.ones(2, dtype=torch.float64))
    assert issubclass(np.linalg.LinAlgError, ValueError)
    D = torch.tensor([[2.0, 0, 0], [1.0, 3.0, 0], [0.5, -1.0, 4.0]], dtype=torch.float64)
    A = trnsparse.from_dense(D)
    b = torch.randn(3, dtype=torch.float64, requires_grad=True)
    torch.autograd.gradcheck(lambda b: trnsparse.spsv(A, b), (b,))


@pytest.mark.parametrize("call,exc,pattern", [
    (lambda A: trnsparse.spmv(A, torch.ones(4)), ValueError, r"spmv: x must have 5 entries"),
    (lambda A: trnsparse.spmv(A, torch.ones(5, dtype=torch.float64)), TypeError, r"x has dtype float64"),
    (lambda A: trnsparse.spmv(A, torch.ones(5), y=torch.ones(3)), ValueError, r"y must have 7 entries"),
    (lambda A: trnsparse.spmv(A, torch.ones(5), alpha="a"), TypeError, r"alpha must be a number"),
    (lambda A: trnsparse.spmv(A, torch.ones(5), alpha=1j), TypeError, r"alpha must be real"),
    (lambda A: trnsparse.spmv(torch.ones(7, 5), torch.ones(5)), TypeError, r"A must be a trnsparse matrix"),
    (lambda A: trnsparse.spmm(A, torch.ones(4, 2)), ValueError, r"B must have 5 rows"),
    (lambda A: trnsparse.spmm(A, torch.ones(5, 2), C=torch.ones(7, 3)), ValueError, r"C must have shape \(7, 2\)"),
    (lambda A: trnsparse.spgemm(A, A), ValueError, r"inner dimensions differ"),
    (lambda A: trnsparse.sparse_add(A, A.T), ValueError, r"A has shape \(7, 5\) but B has shape \(5, 7\)"),
    (lambda A: trnsparse.spsv(A, torch.ones(7)), ValueError, r"A must be square"),
    (lambda A: trnsparse.spsv(trnsparse.eye_sparse(3), torch.ones(3), lower="yes"), TypeError,
     r"lower must be True or False"),
    (lambda A: trnsparse.spmv_symmetric(trnsparse.eye_sparse(3), torch.ones(3), uplo="middle"), ValueError,
     r"uplo must be one of"),
    (lambda A: trnsparse.sddmm(A, torch.ones(7, 2), torch.ones(3, 5)), ValueError, r"X has shape \(7, 2\)"),
    (lambda A: trnsparse.bsr_spmm(A, torch.ones(3, 2)), ValueError, r"B must have 5 rows"),
])
def test_bad_op_input_names_the_problem(call, exc, pattern):
    A = trnsparse.from_dense(torch.from_numpy(dense_case("rect", np.float32)))
    with pytest.raises(exc, match=pattern):
        call(A)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
def test_sparse_add_host_merge_keeps_the_union_pattern(dtype, monkeypatch):
    """The host's linear merge (SciPy on position codes) vs SciPy's own sum: same values, and the union
    pattern kept where entries cancel (SciPy drops those); an unsorted operand takes the sorting path."""
    rng = np.random.default_rng(3)
    Sa = sp.random(60, 50, 0.1, format="csr", random_state=1).astype(dtype)
    Sb = sp.random(60, 50, 0.08, format="csr", random_state=2).astype(dtype)
    Sb = (Sb + Sa.multiply(sp.csr_array(rng.random(Sa.shape) < 0.3)) * 2).tocsr()  # some cancel below
    Sb.sort_indices()
    A, B = trnsparse.from_scipy(Sa), trnsparse.from_scipy(Sb)
    from trnsparse import arrays

    merged = []
    real = arrays.union_add
    monkeypatch.setattr(arrays, "union_add", lambda *a: merged.append(real(*a)) or merged[-1])
    with trnsparse.use_backend("torch"):
        C = trnsparse.sparse_add(A, B, alpha=2.0, beta=-1.0)
    assert merged and merged[0] is not None  # the linear merge ran
    union = (abs(Sa) + abs(Sb)).tocsr()
    union.sort_indices()
    np.testing.assert_array_equal(C.row_ptrs.numpy(), union.indptr)
    np.testing.assert_array_equal(C.col_indices.numpy(), union.indices)
    np.testing.assert_allclose(C.to_dense().numpy(), (2.0 * Sa - Sb).toarray(), rtol=0, atol=1e-6)
    assert C.nnz > (2.0 * Sa - Sb).nnz  # cancelled entries stay stored (as explicit zeros)
    # an unsorted B (SciPy's SpGEMM output order): same result through the sorting path
    perm = []
    for r in range(Sb.shape[0]):
        perm += list(range(Sb.indptr[r + 1] - 1, Sb.indptr[r] - 1, -1))
    perm = np.asarray(perm, np.int64)
    Bu = trnsparse.CSRMatrix._make(B.values[perm], B.col_indices[perm], B.row_ptrs, B.shape, False)
    with trnsparse.use_backend("torch"):
        Cu = trnsparse.sparse_add(A, Bu, alpha=2.0, beta=-1.0)
    assert merged[-1] is None  # not canonical: the sorting path
    np.testing.assert_array_equal(Cu.col_indices.numpy(), union.indices)
    np.testing.assert_allclose(Cu.values.numpy(), C.values.numpy(), rtol=0, atol=1e-6)
