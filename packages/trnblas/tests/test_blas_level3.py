"""trnblas level 3 against reference BLAS (scipy.linalg.blas) and NumPy.

Tolerances: a length-k dot product in floating point has error at most
about k * eps * sum|a_i b_i| (Higham, ch. 3). Entries here are O(1) and
k <= 8, so ``tol(dtype, k) = 16 (k + 1) eps`` relative to the result's
magnitude leaves a wide margin for rounding-order differences between torch
and the reference BLAS while a wrong answer (an error of O(1)) still fails.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.linalg.blas as sb
import torch

import trnblas
import trnsci
from trnsci.testing import NUMPY_DTYPES, assert_close
from trnsci.testing import random as rand

DTYPES = [torch.float32, torch.float64, torch.complex64, torch.complex128]
NP = NUMPY_DTYPES
TRANS = ["N", "T", "C"]
SCIPY_TRANS = {"N": 0, "T": 1, "C": 2}
NAN = float("nan")




def blas(name, dtype):
    return sb.get_blas_funcs(name, dtype=NP[dtype])




def close(got, want, dtype, k=1):
    """Within ``16 (k + 1) eps`` of the reference, relative to its largest entry (see the module docstring)."""
    assert_close(got, want, dtype=dtype, k=k)


def scalars(dtype):
    cases = [(1.0, 0.0), (0.5, 2.0), (-1.5, 1.0)]
    if dtype.is_complex:
        cases.append((1 + 2j, 0.5 - 1j))
    return cases


def op_np(a, t):
    return a if t == "N" else (a.T if t == "T" else a.conj().T)


# ---------------------------------------------------------------- gemm

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tA,tB", list(itertools.product(TRANS, TRANS)))
def test_gemm_matches_blas(dtype, tA, tB):
    m, n, k = 5, 4, 3
    A = rand((m, k) if tA == "N" else (k, m), dtype, 1)
    B = rand((k, n) if tB == "N" else (n, k), dtype, 2)
    C = rand((m, n), dtype, 3)
    f = blas("gemm", dtype)
    for alpha, beta in scalars(dtype):
        want = f(alpha, A, B, beta=beta, c=C.copy(), trans_a=SCIPY_TRANS[tA], trans_b=SCIPY_TRANS[tB])
        got = trnblas.gemm(alpha, torch.from_numpy(A), torch.from_numpy(B), beta, torch.from_numpy(C), tA, tB)
        close(got, want, dtype, k)


@pytest.mark.parametrize("spelling,code", [(False, "N"), (True, "T"), ("n", "N"), ("t", "T"), ("c", "C")])
def test_gemm_trans_spellings(spelling, code):
    A, B = rand((3, 3), torch.complex128, 1), rand((3, 3), torch.complex128, 2)
    want = op_np(A, code) @ B
    close(trnblas.gemm(1.0, torch.from_numpy(A), torch.from_numpy(B), transA=spelling), want, torch.complex128, 3)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gemm_beta_zero_never_reads_C(dtype):
    A, B = torch.from_numpy(rand((4, 3), dtype)), torch.from_numpy(rand((3, 2), dtype, 1))
    C = torch.full((4, 2), NAN, dtype=dtype)
    R = trnblas.gemm(2.0, A, B, 0.0, C)
    assert not R.isnan().any()
    close(R, 2 * (A @ B).numpy(), dtype, 3)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gemm_alpha_zero_never_reads_A_B(dtype):
    A = torch.full((4, 3), NAN, dtype=dtype)
    B = torch.full((3, 2), float("inf"), dtype=dtype)
    C = torch.from_numpy(rand((4, 2), dtype))
    close(trnblas.gemm(0.0, A, B, 3.0, C), 3 * C.numpy(), dtype)
    assert torch.equal(trnblas.gemm(0.0, A, B), torch.zeros(4, 2, dtype=dtype))


@pytest.mark.parametrize("m,n,k", [(0, 3, 2), (3, 0, 2), (3, 2, 0), (0, 0, 0), (1, 1, 1), (7, 1, 5), (1, 6, 2)])
def test_gemm_ragged_and_empty(m, n, k):
    dtype = torch.float64
    A, B, C = rand((m, k), dtype, 1), rand((k, n), dtype, 2), rand((m, n), dtype, 3)
    got = trnblas.gemm(1.5, torch.from_numpy(A), torch.from_numpy(B), 0.5, torch.from_numpy(C))
    close(got, 1.5 * A @ B + 0.5 * C, dtype, k)  # k == 0: exactly beta * C


def test_gemm_batch_dims_broadcast():
    dtype = torch.float64
    A = rand((2, 1, 4, 3), dtype, 1)
    B = rand((1, 3, 3, 5), dtype, 2)
    C = rand((3, 4, 5), dtype, 3)  # broadcasts over the leading 2
    got = trnblas.gemm(2.0, torch.from_numpy(A), torch.from_numpy(B), -1.0, torch.from_numpy(C))
    close(got, 2.0 * np.matmul(A, B) - C, dtype, 3)
    got = trnblas.gemm(1.0, torch.from_numpy(A), torch.from_numpy(rand((5, 3), dtype)), transB="T")
    close(got, np.matmul(A, rand((5, 3), dtype).T), dtype, 3)


def test_gemm_batched_beta_zero_and_empty_batch():
    A = torch.ones(2, 3, 4)
    B = torch.ones(4, 5)
    R = trnblas.gemm(1.0, A, B, 0.0, torch.full((2, 3, 5), NAN))
    assert torch.equal(R, torch.full((2, 3, 5), 4.0))
    assert trnblas.gemm(1.0, torch.ones(0, 3, 4), B).shape == (0, 3, 5)


def test_gemm_numpy_in_numpy_out():
    A, B, C = rand((3, 4), torch.float64), rand((4, 2), torch.float64, 1), rand((3, 2), torch.float64, 2)
    R = trnblas.gemm(1.0, A, B, 1.0, C)
    assert isinstance(R, np.ndarray)
    close(R, A @ B + C, torch.float64, 4)
    assert np.array_equal(C, rand((3, 2), torch.float64, 2))  # C untouched


def test_gemm_out_writes_in_place():
    A, B = torch.ones(2, 3), torch.ones(3, 2)
    out = torch.empty(2, 2)
    R = trnblas.gemm(1.0, A, B, out=out)
    assert R is out and torch.equal(out, torch.full((2, 2), 3.0))
    outn = np.empty((2, 2))
    R = trnblas.gemm(1.0, np.ones((2, 3)), np.ones((3, 2)), out=outn)
    assert R is not None and np.array_equal(outn, np.full((2, 2), 3.0))


def test_gemm_lowprecision_dtypes():
    A, B = rand((4, 3), torch.float32), rand((3, 5), torch.float32, 1)
    for dt in (torch.bfloat16, torch.float16):
        R = trnblas.gemm(1.0, torch.from_numpy(A).to(dt), torch.from_numpy(B).to(dt))
        assert R.dtype == dt
        # inputs rounded to 8 (bf16) / 11 (fp16) bits: relative error ~ 2^-7
        np.testing.assert_allclose(R.float().numpy(), A @ B, rtol=5e-2, atol=5e-2)


# ---------------------------------------------------------------- batched

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tA,tB", [("N", "N"), ("T", "N"), ("N", "C"), ("C", "T")])
def test_batched_gemm_matches_blas_per_matrix(dtype, tA, tB):
    b, m, n, k = 3, 4, 2, 5
    A = rand((b, m, k) if tA == "N" else (b, k, m), dtype, 1)
    B = rand((b, k, n) if tB == "N" else (b, n, k), dtype, 2)
    C = rand((b, m, n), dtype, 3)
    f = blas("gemm", dtype)
    alpha, beta = scalars(dtype)[-1]
    want = np.stack([f(alpha, A[i], B[i], beta=beta, c=C[i].copy(), trans_a=SCIPY_TRANS[tA],
                       trans_b=SCIPY_TRANS[tB]) for i in range(b)])
    got = trnblas.batched_gemm(alpha, torch.from_numpy(A), torch.from_numpy(B), beta, torch.from_numpy(C), tA, tB)
    close(got, want, dtype, k)
    got_list = trnblas.batched_gemm(alpha, list(torch.from_numpy(A)), list(torch.from_numpy(B)), beta,
                                    list(torch.from_numpy(C)), tA, tB)
    close(got_list, want, dtype, k)


def test_batched_gemm_beta_zero_nan_and_empty():
    A, B = torch.ones(2, 3, 4), torch.ones(2, 4, 5)
    R = trnblas.batched_gemm(1.0, A, B, 0.0, torch.full((2, 3, 5), NAN))
    assert torch.equal(R, torch.full((2, 3, 5), 4.0))
    assert trnblas.batched_gemm(1.0, torch.ones(0, 3, 4), torch.ones(0, 4, 5)).shape == (0, 3, 5)
    C = torch.ones(2, 3, 5)
    assert torch.equal(trnblas.batched_gemm(1.0, torch.ones(2, 3, 0), torch.ones(2, 0, 5), 2.0, C), 2 * C)


def test_strided_batched_gemm_shared_and_column_major():
    dtype = torch.float64
    A = rand((3, 4), dtype, 1)  # strideA = 0
    B = rand((5, 4, 2), dtype, 2)
    close(trnblas.strided_batched_gemm(1.0, torch.from_numpy(A), torch.from_numpy(B)), np.matmul(A, B), dtype, 4)
    # cuBLAS layout: column-major m x k matrices, leading dimension lda, batch stride strideA
    batch, m, k, lda, strideA = 3, 2, 4, 5, 23
    buf = torch.arange(batch * strideA, dtype=dtype)
    Acm = torch.as_strided(buf, (batch, m, k), (strideA, 1, lda))
    Bt = torch.from_numpy(rand((1, k, 3), dtype, 3))  # a batch of one broadcasts
    want = np.stack([Acm[i].numpy() @ Bt[0].numpy() for i in range(batch)])
    close(trnblas.strided_batched_gemm(1.0, Acm, Bt), want, dtype, k)


# ---------------------------------------------------------------- gemm_ex

def test_gemm_ex_bf16_inputs_fp32_compute():
    A = torch.from_numpy(rand((6, 8), torch.float32)).bfloat16()
    B = torch.from_numpy(rand((8, 5), torch.float32, 1)).bfloat16()
    exact = A.double().numpy() @ B.double().numpy()  # the bf16 values are exact in fp64
    R = trnblas.gemm_ex(1.0, A, B, out_dtype=torch.float32)
    assert R.dtype == torch.float32
    close(R, exact, torch.float32, 8)  # fp32 accumulation of exact products
    assert trnblas.gemm_ex(1.0, A, B).dtype == torch.bfloat16  # default: A's dtype
    C = torch.ones(6, 5, dtype=torch.float32)
    R = trnblas.gemm_ex(2.0, A, B, 1.0, C)
    assert R.dtype == torch.float32  # default with C: C's dtype
    close(R, 2 * exact + 1, torch.float32, 8)
    R = trnblas.gemm_ex(1.0, A, B, 0.0, torch.full((6, 5), NAN), compute_dtype=torch.float64)
    close(R, exact, torch.float32, 8)


def test_gemm_ex_rejects_bad_compute_dtype():
    A = torch.ones(2, 2)
    with pytest.raises(TypeError, match="compute_dtype"):
        trnblas.gemm_ex(1.0, A, A, compute_dtype=torch.complex64)
    with pytest.raises(TypeError, match="compute_dtype"):
        trnblas.gemm_ex(1.0, A, A, compute_dtype=torch.int32)
    with pytest.raises(TypeError, match="B"):
        trnblas.gemm_ex(1.0, A, A.double())


# ---------------------------------------------------------------- symm / hemm

def garbage_other_triangle(A, uplo, diag_imag=False):
    """NaN in the triangle that must not be read (and imaginary junk on the diagonal)."""
    A = A.copy()
    n = A.shape[0]
    mask = np.tril(np.ones((n, n), bool), -1) if uplo == "U" else np.triu(np.ones((n, n), bool), 1)
    A[mask] = np.nan
    if diag_imag:
        A[np.diag_indices(n)] += 7j
    return A


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("side", ["L", "R"])
@pytest.mark.parametrize("uplo", ["U", "L"])
@pytest.mark.parametrize("herm", [False, True])
def test_symm_hemm_match_blas(dtype, side, uplo, herm):
    m, n = 4, 3
    na = m if side == "L" else n
    A = garbage_other_triangle(rand((na, na), dtype, 1), uplo, diag_imag=herm and dtype.is_complex)
    B, C = rand((m, n), dtype, 2), rand((m, n), dtype, 3)
    name = "hemm" if herm and dtype.is_complex else "symm"
    f = blas(name, dtype)
    fn = trnblas.hemm if herm else trnblas.symm
    for alpha, beta in scalars(dtype):
        want = f(alpha, A, B, beta=beta, c=C.copy(), side=int(side == "R"), lower=int(uplo == "L"))
        got = fn(alpha, torch.from_numpy(A), torch.from_numpy(B), beta, torch.from_numpy(C),
                 side={"L": "left", "R": "right"}[side], uplo={"U": "upper", "L": "lower"}[uplo])
        close(got, want, dtype, na)


# ---------------------------------------------------------------- syrk family

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("trans", ["N", "T"])
@pytest.mark.parametrize("uplo", ["U", "L"])
def test_syrk_matches_blas_including_untouched_triangle(dtype, trans, uplo):
    n, k = 4, 3
    A = rand((n, k) if trans == "N" else (k, n), dtype, 1)
    C = rand((n, n), dtype, 2)
    f = blas("syrk", dtype)
    for alpha, beta in scalars(dtype):
        want = f(alpha, A, beta=beta, c=C.copy(), trans=int(trans == "T"), lower=int(uplo == "L"))
        got = trnblas.syrk(alpha, torch.from_numpy(A), beta, torch.from_numpy(C), trans=trans, uplo=uplo)
        close(got, want, dtype, k)  # the whole matrix: the other triangle is C's


@pytest.mark.parametrize("uplo", ["U", "L"])
def test_syrk_without_C_and_fill(uplo):
    """Without C: the whole A A^T (nothing to preserve; the published trnblas's result);
    fill="triangle" asks for the BLAS triangle explicitly."""
    A = rand((4, 3), torch.float64)
    full = A @ A.T
    close(trnblas.syrk(1.0, torch.from_numpy(A), uplo=uplo), full, torch.float64, 3)
    got = trnblas.syrk(1.0, torch.from_numpy(A), uplo=uplo, fill="triangle")
    want = np.triu(full) if uplo == "U" else np.tril(full)
    close(got, want, torch.float64, 3)
    close(trnblas.syrk(1.0, torch.from_numpy(A), uplo=uplo, fill="full"), full, torch.float64, 3)


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
@pytest.mark.parametrize("uplo", ["U", "L"])
def test_rank_k_family_without_C_is_whole_matrix(dtype, uplo):
    """Issue 25: herk/syr2k/her2k (and symm, whose result is always whole) without C
    return the whole symmetric/Hermitian matrix, checked against NumPy."""
    A, B = (rand((4, 3), dtype) for _ in range(2))
    tA, tB = torch.from_numpy(A), torch.from_numpy(B)
    close(trnblas.herk(1.0, tA, uplo=uplo), A @ A.conj().T, dtype, 3)
    close(trnblas.syr2k(2.0, tA, tB, uplo=uplo), 2.0 * (A @ B.T + B @ A.T), dtype, 6)
    close(trnblas.her2k(2.0, tA, tB, uplo=uplo), 2.0 * (A @ B.conj().T + B @ A.conj().T), dtype, 6)
    S = rand((4, 4), dtype)
    full = np.triu(S) + np.triu(S, 1).T if uplo == "U" else np.tril(S) + np.tril(S, -1).T
    close(trnblas.symm(1.0, torch.from_numpy(S), tA, uplo=uplo), full @ A, dtype, 4)
    # one triangle, on request
    tri = trnblas.her2k(2.0, tA, tB, uplo=uplo, fill="triangle").numpy()
    assert not (np.tril(tri, -1) if uplo == "U" else np.triu(tri, 1)).any()


@pytest.mark.parametrize("uplo", ["U", "L"])
def test_syrk_beta_zero_keeps_other_triangle_and_ignores_own(uplo):
    A = torch.from_numpy(rand((4, 2), torch.float32))
    C = torch.full((4, 4), NAN)
    R = trnblas.syrk(1.0, A, 0.0, C, uplo=uplo)
    tri = torch.ones(4, 4, dtype=torch.bool).triu() if uplo == "U" else torch.ones(4, 4, dtype=torch.bool).tril()
    assert not R[tri].isnan().any()
    assert R[~tri].isnan().all()  # left as given
    assert not trnblas.syrk(1.0, A, 0.0, C, uplo=uplo, fill="full").isnan().any()


def test_syrk_alpha_zero_and_k_zero_quick_return():
    C = torch.from_numpy(rand((3, 3), torch.float64))
    A = torch.full((3, 2), NAN, dtype=torch.float64)
    assert torch.equal(trnblas.syrk(0.0, A, 1.0, C), C)
    R = trnblas.syrk(0.0, A, 2.0, C)
    close(R, np.triu(2 * C.numpy()) + np.tril(C.numpy(), -1), torch.float64)
    R = trnblas.syrk(1.0, torch.ones(3, 0, dtype=torch.float64), 2.0, C, uplo="L")
    close(R, np.tril(2 * C.numpy()) + np.triu(C.numpy(), 1), torch.float64)
    assert trnblas.syrk(1.0, torch.ones(0, 4)).shape == (0, 0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("trans", ["N", "C"])
@pytest.mark.parametrize("uplo", ["U", "L"])
def test_herk_matches_blas(dtype, trans, uplo):
    n, k = 4, 3
    A = rand((n, k) if trans == "N" else (k, n), dtype, 1)
    C = rand((n, n), dtype, 2)
    if dtype.is_complex:
        f, t = blas("herk", dtype), SCIPY_TRANS[trans]
    else:
        f, t = blas("syrk", dtype), int(trans != "N")
    for alpha, beta in [(1.0, 0.0), (0.5, 2.0), (0.0, 1.0), (0.0, 0.5), (-1.0, 1.0)]:
        want = f(alpha, A, beta=beta, c=C.copy(), trans=t, lower=int(uplo == "L"))
        got = trnblas.herk(alpha, torch.from_numpy(A), beta, torch.from_numpy(C), trans=trans, uplo=uplo)
        close(got, want, dtype, k)


def test_herk_fill_full_is_hermitian():
    A = rand((3, 5), torch.complex128)
    R = trnblas.herk(1.0, torch.from_numpy(A), fill="full").numpy()
    close(R, A @ A.conj().T, torch.complex128, 5)
    assert np.all(R.diagonal().imag == 0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("trans", ["N", "T"])
@pytest.mark.parametrize("uplo", ["U", "L"])
def test_syr2k_matches_blas(dtype, trans, uplo):
    n, k = 4, 3
    shape = (n, k) if trans == "N" else (k, n)
    A, B, C = rand(shape, dtype, 1), rand(shape, dtype, 2), rand((n, n), dtype, 3)
    f = blas("syr2k", dtype)
    for alpha, beta in scalars(dtype):
        want = f(alpha, A, B, beta=beta, c=C.copy(), trans=int(trans == "T"), lower=int(uplo == "L"))
        got = trnblas.syr2k(alpha, torch.from_numpy(A), torch.from_numpy(B), beta, torch.from_numpy(C),
                            trans=trans, uplo=uplo)
        close(got, want, dtype, 2 * k)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("trans", ["N", "C"])
@pytest.mark.parametrize("uplo", ["U", "L"])
def test_her2k_matches_blas(dtype, trans, uplo):
    n, k = 4, 3
    shape = (n, k) if trans == "N" else (k, n)
    A, B, C = rand(shape, dtype, 1), rand(shape, dtype, 2), rand((n, n), dtype, 3)
    f = blas("her2k", dtype)
    for alpha, beta in [(1.0, 0.0), (1 + 2j, 0.5), (0.0, 2.0)]:
        want = f(alpha, A, B, beta=beta, c=C.copy(), trans=SCIPY_TRANS[trans], lower=int(uplo == "L"))
        got = trnblas.her2k(alpha, torch.from_numpy(A), torch.from_numpy(B), beta, torch.from_numpy(C),
                            trans=trans, uplo=uplo)
        close(got, want, dtype, 2 * k)


# ---------------------------------------------------------------- trmm / trsm

TRI_CASES = list(itertools.product(["L", "R"], ["U", "L"], TRANS, ["N", "U"]))


def triangular(n, dtype, uplo, diag, seed=1):
    """A well-conditioned triangular matrix with NaN where it must not be read."""
    A = rand((n, n), dtype, seed) * 0.3
    A[np.diag_indices(n)] = 2.0 + np.arange(n)
    A = garbage_other_triangle(A, uplo)
    if diag == "U":
        A[np.diag_indices(n)] = np.nan
    return A


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("side,uplo,trans,diag", TRI_CASES)
def test_trmm_matches_blas(dtype, side, uplo, trans, diag):
    m, n = 4, 3
    A = triangular(m if side == "L" else n, dtype, uplo, diag)
    B = rand((m, n), dtype, 2)
    alpha = 1.5 - 0.5j if dtype.is_complex else 1.5
    want = blas("trmm", dtype)(alpha, A, B, side=int(side == "R"), lower=int(uplo == "L"),
                               trans_a=SCIPY_TRANS[trans], diag=int(diag == "U"))
    got = trnblas.trmm(alpha, torch.from_numpy(A), torch.from_numpy(B), side=side, uplo=uplo, trans=trans, diag=diag)
    close(got, want, dtype, max(m, n))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("side,uplo,trans,diag", TRI_CASES)
def test_trsm_matches_blas(dtype, side, uplo, trans, diag):
    m, n = 4, 3
    A = triangular(m if side == "L" else n, dtype, uplo, diag)
    B = rand((m, n), dtype, 2)
    alpha = 1.5 - 0.5j if dtype.is_complex else 1.5
    want = blas("trsm", dtype)(alpha, A, B, side=int(side == "R"), lower=int(uplo == "L"),
                               trans_a=SCIPY_TRANS[trans], diag=int(diag == "U"))
    got = trnblas.trsm(alpha, torch.from_numpy(A), torch.from_numpy(B), side=side, uplo=uplo, trans=trans, diag=diag)
    # diagonal >= 2, off-diagonal 0.3 N(0,1): condition number O(1), so the
    # forward error stays within the same k * eps bound
    close(got, want, dtype, max(m, n))


def test_trsm_long_option_names_and_quick_returns():
    A = torch.from_numpy(triangular(3, torch.float64, "L", "N"))
    B = torch.from_numpy(rand((3, 2), torch.float64))
    got = trnblas.trsm(1.0, A, B, side="LEFT", uplo="Lower", trans=True, diag="NonUnit")
    want = sb.dtrsm(1.0, A.numpy(), B.numpy(), lower=1, trans_a=1)
    close(got, want, torch.float64, 3)
    nanA = torch.full((3, 3), NAN, dtype=torch.float64)
    assert torch.equal(trnblas.trsm(0.0, nanA, B), torch.zeros(3, 2, dtype=torch.float64))
    assert torch.equal(trnblas.trmm(0.0, nanA, B), torch.zeros(3, 2, dtype=torch.float64))
    assert trnblas.trsm(1.0, torch.ones(0, 0), torch.ones(0, 5)).shape == (0, 5)


# ---------------------------------------------------------------- geam / dgmm

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tA,tB", [("N", "N"), ("T", "N"), ("N", "C"), ("C", "T")])
def test_geam_matches_numpy(dtype, tA, tB):
    A = rand((3, 4) if tA == "N" else (4, 3), dtype, 1)
    B = rand((3, 4) if tB == "N" else (4, 3), dtype, 2)
    for alpha, beta in scalars(dtype) + [(0.0, 2.0), (1.0, 1.0)]:
        got = trnblas.geam(alpha, torch.from_numpy(A), beta, torch.from_numpy(B), tA, tB)
        close(got, alpha * op_np(A, tA) + beta * op_np(B, tB), dtype)


def test_geam_zero_coefficients_never_read():
    nan = torch.full((2, 2), NAN)
    one = torch.ones(2, 2)
    assert torch.equal(trnblas.geam(0.0, nan, 2.0, one), 2 * one)
    assert torch.equal(trnblas.geam(3.0, one, 0.0, nan), 3 * one)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("side", ["left", "right", "L", "r"])
def test_dgmm_matches_numpy(dtype, side):
    A = rand((3, 4), dtype)
    left = side.lower().startswith("l")
    x = rand((3,) if left else (4,), dtype, 1)
    want = np.diag(x) @ A if left else A @ np.diag(x)
    close(trnblas.dgmm(torch.from_numpy(A), torch.from_numpy(x), side=side), want, dtype)


@pytest.mark.parametrize("uplo", ["upper", "lower"])
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("beta", [0.0, 0.5])
def test_syrk_blocked_torch_path_large_n(uplo, trans, beta):
    """n >= 2048 takes the block-row torch path (ragged last block here); checked against dsyrk,
    including that the other triangle of C is left as given."""
    n, k = 2100, 3
    rng = np.random.default_rng(11)
    A = rng.standard_normal((n, k) if not trans else (k, n))
    C = rng.standard_normal((n, n))
    want = sb.dsyrk(1.5, A, beta=beta, c=C, trans=int(trans), lower=int(uplo == "lower"))
    with trnsci.use_backend("torch"):
        got = trnblas.syrk(1.5, torch.from_numpy(A), beta, torch.from_numpy(C), trans=trans, uplo=uplo)
    # float64, k = 3 terms: a few ulps of |A|^2-sized values
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-13, atol=1e-13)
