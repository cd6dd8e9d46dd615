"""trnblas level 2 against reference BLAS (scipy.linalg.blas).

Tolerances: each entry is a length-n dot product (n <= 5) of O(1) values,
whose rounding error is at most about n * eps * sum|a_i x_i|; ``16 (n + 1)
eps`` relative to the result's magnitude covers rounding-order differences
with the reference BLAS and still fails any O(1) mistake.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.linalg.blas as sb
import torch

import trnblas
from trnsci.testing import NUMPY_DTYPES, assert_close
from trnsci.testing import random as rand

DTYPES = [torch.float32, torch.float64, torch.complex64, torch.complex128]
NP = NUMPY_DTYPES
T = {"N": 0, "T": 1, "C": 2}
NAN = float("nan")




def blas(name, dtype):
    return sb.get_blas_funcs(name, dtype=NP[dtype])


def close(got, want, dtype, k=1):
    """Within ``16 (k + 1) eps`` of the reference, relative to its largest entry (see the module docstring)."""
    assert_close(got, want, dtype=dtype, k=k)


def t(a):
    return torch.from_numpy(a)


def scalars(dtype):
    s = [(1.0, 0.0), (0.5, 2.0), (0.0, 1.5)]
    return s + [(1 - 2j, 0.5 + 1j)] if dtype.is_complex else s


def poison(A, uplo, diag_imag=False):
    """NaN in the triangle that must not be read; imaginary junk on the diagonal."""
    A = A.copy()
    n = A.shape[0]
    A[np.tril(np.ones((n, n), bool), -1) if uplo == "U" else np.triu(np.ones((n, n), bool), 1)] = np.nan
    if diag_imag:
        A[np.diag_indices(n)] += 5j
    return A


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("trans", ["N", "T", "C"])
def test_gemv_matches_blas(dtype, trans):
    m, n = 5, 3
    A = rand((m, n), dtype, 1)
    rows, cols = (m, n) if trans == "N" else (n, m)
    x, y = rand(cols, dtype, 2), rand(rows, dtype, 3)
    for alpha, beta in scalars(dtype):
        want = blas("gemv", dtype)(alpha, A, x, beta=beta, y=y.copy(), trans=T[trans])
        close(trnblas.gemv(alpha, t(A), t(x), beta, t(y), trans=trans), want, dtype, cols)


def test_gemv_beta_zero_alpha_zero_and_empty():
    A, x = torch.ones(3, 2), torch.ones(2)
    assert torch.equal(trnblas.gemv(1.0, A, x, 0.0, torch.full((3,), NAN)), torch.full((3,), 2.0))
    y = torch.arange(3.0)
    assert torch.equal(trnblas.gemv(0.0, torch.full((3, 2), NAN), x, 2.0, y), 2 * y)
    assert torch.equal(trnblas.gemv(1.0, torch.ones(3, 0), torch.ones(0), 1.0, y), y)
    assert trnblas.gemv(1.0, torch.ones(0, 4), torch.ones(4)).shape == (0,)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("uplo", ["U", "L"])
@pytest.mark.parametrize("herm", [False, True])
def test_symv_hemv_read_one_triangle(dtype, uplo, herm):
    n = 4
    A = poison(rand((n, n), dtype, 1), uplo, diag_imag=herm and dtype.is_complex)
    x, y = rand(n, dtype, 2), rand(n, dtype, 3)
    if herm and dtype.is_complex:
        ref = blas("hemv", dtype)
    elif not dtype.is_complex:
        ref = blas("symv", dtype)
    else:  # reference BLAS has no complex symv: build the matrix from its triangle
        full = np.triu(np.nan_to_num(A)) if uplo == "U" else np.tril(np.nan_to_num(A))
        full = full + full.T - np.diag(full.diagonal())

        def ref(alpha, A_, x_, beta, y, lower):
            return alpha * full @ x_ + beta * y
    fn = trnblas.hemv if herm else trnblas.symv
    for alpha, beta in scalars(dtype):
        want = ref(alpha, A, x, beta=beta, y=y.copy(), lower=int(uplo == "L"))
        close(fn(alpha, t(A), t(x), beta, t(y), uplo=uplo.lower()), want, dtype, n)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("variant", ["ger", "geru", "gerc", "conj"])
def test_ger_matches_blas(dtype, variant):
    m, n = 4, 3
    x, y, A = rand(m, dtype, 1), rand(n, dtype, 2), rand((m, n), dtype, 3)
    conj = variant in ("gerc", "conj") and dtype.is_complex
    name = "ger" if not dtype.is_complex else ("gerc" if conj else "geru")
    for alpha in [1.0, -0.5, 0.0] + ([2 - 1j] if dtype.is_complex else []):
        want = blas(name, dtype)(alpha, x, y, a=A.copy())
        if variant == "conj":
            got = trnblas.ger(alpha, t(x), t(y), t(A), conj=True)
        else:
            got = getattr(trnblas, variant)(alpha, t(x), t(y), t(A))
        close(got, want, dtype)
    close(trnblas.ger(2.0, t(x), t(y)), 2 * np.outer(x, y), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("uplo", ["U", "L"])
def test_syr_updates_one_triangle(dtype, uplo):
    n = 4
    x, A = rand(n, dtype, 1), rand((n, n), dtype, 2)
    for alpha in [1.0, 0.75, 0.0] + ([1 + 1j] if dtype.is_complex else []):
        want = blas("syr", dtype)(alpha, x, lower=int(uplo == "L"), a=A.copy())
        close(trnblas.syr(alpha, t(x), t(A), uplo=uplo), want, dtype)
    full = trnblas.syr(1.0, t(x), fill="full").numpy()
    close(full, np.outer(x, x), dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("uplo", ["U", "L"])
def test_syr2_matches_blas(dtype, uplo):
    n = 4
    x, y, A = rand(n, dtype, 1), rand(n, dtype, 2), rand((n, n), dtype, 3)
    for alpha in [1.0, -2.0, 0.0]:
        want = blas("syr2", dtype)(alpha, x, y, lower=int(uplo == "L"), a=A.copy())
        close(trnblas.syr2(alpha, t(x), t(y), t(A), uplo=uplo), want, dtype, 2)


def test_syr2_complex_against_numpy():
    dtype = torch.complex128
    x, y, A = rand(3, dtype, 1), rand(3, dtype, 2), rand((3, 3), dtype, 3)
    alpha = 0.5 + 1j
    full = A + alpha * (np.outer(x, y) + np.outer(y, x))
    want = np.triu(full) + np.tril(A, -1)
    close(trnblas.syr2(alpha, t(x), t(y), t(A)), want, dtype, 2)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("uplo", ["U", "L"])
def test_her_her2_match_blas(dtype, uplo):
    n = 4
    x, y = rand(n, dtype, 1), rand(n, dtype, 2)
    A = rand((n, n), dtype, 3)  # complex diagonal: BLAS drops its imaginary part
    lower = int(uplo == "L")
    for alpha in [1.0, -0.5, 0.0]:
        want = blas("her", dtype)(alpha, x, lower=lower, a=A.copy())
        close(trnblas.her(alpha, t(x), t(A), uplo=uplo), want, dtype)
    for alpha in [1.0, 0.5 - 2j, 0.0]:
        want = blas("her2", dtype)(alpha, x, y, lower=lower, a=A.copy())
        close(trnblas.her2(alpha, t(x), t(y), t(A), uplo=uplo), want, dtype, 2)
    with pytest.raises(TypeError, match="alpha"):
        trnblas.her(1j, t(x), t(A))


TRI = list(itertools.product(["U", "L"], ["N", "T", "C"], ["N", "U"]))


def triangular(n, dtype, uplo, diag):
    A = rand((n, n), dtype, 1) * 0.3
    A[np.diag_indices(n)] = 2.0 + np.arange(n)  # well conditioned
    A = poison(A, uplo)
    if diag == "U":
        A[np.diag_indices(n)] = np.nan  # unit diagonal: must not be read
    return A


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("uplo,trans,diag", TRI)
def test_trmv_trsv_match_blas(dtype, uplo, trans, diag):
    n = 5
    A, x = triangular(n, dtype, uplo, diag), rand(n, dtype, 2)
    kw = dict(lower=int(uplo == "L"), trans=T[trans], diag=int(diag == "U"))
    close(trnblas.trmv(t(A), t(x), uplo=uplo, trans=trans, diag=diag), blas("trmv", dtype)(A, x, **kw), dtype, n)
    close(trnblas.trsv(t(A), t(x), uplo=uplo, trans=trans, diag=diag), blas("trsv", dtype)(A, x, **kw), dtype, n)


def test_level2_numpy_io_and_out():
    A, x = np.eye(3), np.arange(3.0)
    r = trnblas.gemv(2.0, A, x)
    assert isinstance(r, np.ndarray) and np.array_equal(r, 2 * x)
    out = torch.empty(3, dtype=torch.float64)
    assert trnblas.trsv(torch.eye(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64), out=out) is out
    assert torch.equal(out, torch.ones(3, dtype=torch.float64))
    assert trnblas.trmv(torch.ones(0, 0), torch.ones(0)).shape == (0,)
