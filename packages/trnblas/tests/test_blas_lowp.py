"""bfloat16/float16 in every trnblas routine: accepted, computed in float32, returned in the input dtype.

Reference: NumPy float64 on the *rounded* inputs (bf16/fp16 values are exact
in float64). Bound per entry: one rounding of the result to the input dtype
(``u`` = 2^-8 bf16, 2^-11 fp16, relative) plus fp32 accumulation of ``k``
terms (``(k + 2) 2^-24 * sum |terms|``); the tests use ``2 u |ref| +
(k + 2) 2^-24 * mag + tiny`` with ``mag`` the same formula on absolute values.
Both the torch path and the simulator (kernel, or the torch fallback the
plan names) are held to it. On the simulator, bf16 adds ``u * mag``: the
Tensor Engine of trn1/trn2 rounds every bf16 x bf16 product to bf16 before
fp32 accumulation (trnfft's hardware measurement, modeled by the emulator:
``trnsci.nki.emulator.numerics``), which is one more rounding of each term.
Integer and bool inputs stay TypeErrors.
"""

import numpy as np
import pytest
import torch

import trnblas

pytestmark = pytest.mark.simulator

U = {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}


def _r(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _np(t):
    return t.double().numpy()


def _sym(a, lower=False):
    t = np.tril(a) if lower else np.triu(a)
    return t + t.T - np.diag(np.diag(a))


# name -> (call(dtype) -> (result, reference float64, magnitude float64, k))
def _cases():
    def c_axpy(d):
        x, y = _r(300, seed=1, dtype=d), _r(300, seed=2, dtype=d)
        return trnblas.axpy(1.5, x, y), 1.5 * _np(x) + _np(y), 1.5 * abs(_np(x)) + abs(_np(y)), 1

    def c_dot(d):
        x, y = _r(300, seed=1, dtype=d), _r(300, seed=2, dtype=d)
        return trnblas.dot(x, y), _np(x) @ _np(y), abs(_np(x)) @ abs(_np(y)), 300

    def c_nrm2(d):
        x = _r(300, seed=3, dtype=d)
        return trnblas.nrm2(x), np.linalg.norm(_np(x)), np.linalg.norm(_np(x)), 300

    def c_asum(d):
        x = _r(300, seed=3, dtype=d)
        return trnblas.asum(x), abs(_np(x)).sum(), abs(_np(x)).sum(), 300

    def c_gemv(d):
        A, x = _r(40, 70, seed=4, dtype=d), _r(70, seed=5, dtype=d)
        return trnblas.gemv(1.0, A, x), _np(A) @ _np(x), abs(_np(A)) @ abs(_np(x)), 70

    def c_symv(d):
        A, x = _r(40, 40, seed=4, dtype=d), _r(40, seed=5, dtype=d)
        S = _sym(_np(A))
        return trnblas.symv(1.0, A, x), S @ _np(x), abs(S) @ abs(_np(x)), 40

    def c_trmv(d):
        A, x = _r(40, 40, seed=4, dtype=d), _r(40, seed=5, dtype=d)
        T = np.triu(_np(A))
        return trnblas.trmv(A, x), T @ _np(x), abs(T) @ abs(_np(x)), 40

    def c_trsv(d):
        A = (torch.eye(30) * 4 + torch.triu(_r(30, 30, seed=6)) * 0.1).to(d)
        x = _r(30, seed=7, dtype=d)
        z = np.linalg.solve(np.triu(_np(A)), _np(x))
        return trnblas.trsv(A, x), z, abs(z) * 30, 30

    def c_ger(d):
        x, y, A = _r(40, seed=1, dtype=d), _r(50, seed=2, dtype=d), _r(40, 50, seed=3, dtype=d)
        return trnblas.ger(2.0, x, y, A), _np(A) + 2 * np.outer(_np(x), _np(y)), \
            abs(_np(A)) + 2 * abs(np.outer(_np(x), _np(y))), 2

    def c_syr2(d):
        x, y = _r(40, seed=1, dtype=d), _r(40, seed=2, dtype=d)
        P = np.outer(_np(x), _np(y))
        return trnblas.syr2(1.0, x, y, fill="full"), P + P.T, abs(P) + abs(P.T), 2

    def c_gemm(d):
        A, B = _r(30, 60, seed=1, dtype=d), _r(60, 20, seed=2, dtype=d)
        return trnblas.gemm(1.0, A, B), _np(A) @ _np(B), abs(_np(A)) @ abs(_np(B)), 60

    def c_symm(d):
        A, B = _r(30, 30, seed=1, dtype=d), _r(30, 20, seed=2, dtype=d)
        S = _sym(_np(A))
        return trnblas.symm(1.0, A, B), S @ _np(B), abs(S) @ abs(_np(B)), 30

    def c_syrk(d):
        A = _r(30, 50, seed=1, dtype=d)
        a = _np(A)
        return trnblas.syrk(1.0, A, fill="full"), a @ a.T, abs(a) @ abs(a.T), 50

    def c_syr2k(d):
        A, B = _r(30, 50, seed=1, dtype=d), _r(30, 50, seed=2, dtype=d)
        a, b = _np(A), _np(B)
        return trnblas.syr2k(1.0, A, B, fill="full"), a @ b.T + b @ a.T, 2 * abs(a) @ abs(b.T), 100

    def c_trmm(d):
        A, B = _r(30, 30, seed=1, dtype=d), _r(30, 20, seed=2, dtype=d)
        T = np.triu(_np(A))
        return trnblas.trmm(1.0, A, B), T @ _np(B), abs(T) @ abs(_np(B)), 30

    def c_trsm(d):
        A = (torch.eye(30) * 4 + torch.triu(_r(30, 30, seed=6)) * 0.1).to(d)
        B = _r(30, 5, seed=7, dtype=d)
        X = np.linalg.solve(np.triu(_np(A)), _np(B))
        return trnblas.trsm(1.0, A, B), X, abs(X) * 30, 30

    def c_geam(d):
        A, B = _r(30, 20, seed=1, dtype=d), _r(20, 30, seed=2, dtype=d)
        return trnblas.geam(2.0, A, -1.0, B, transB=True), 2 * _np(A) - _np(B).T, 2 * abs(_np(A)) + abs(_np(B).T), 1

    def c_dgmm(d):
        A, x = _r(30, 20, seed=1, dtype=d), _r(30, seed=2, dtype=d)
        return trnblas.dgmm(A, x), _np(A) * _np(x)[:, None], abs(_np(A) * _np(x)[:, None]), 1

    return {k[2:]: f for k, f in locals().items() if k.startswith("c_")}


CASES = _cases()


@pytest.mark.parametrize("backend", ["torch", "simulator"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_low_precision_within_the_stated_bound(name, dtype, backend):
    with trnblas.use_backend(backend):
        R, ref, mag, k = CASES[name](dtype)
    assert R.dtype is dtype
    err = np.abs(_np(R) - ref)
    bound = 2 * U[dtype] * np.abs(ref) + (k + 2) * 2.0 ** -24 * mag + 1e-30
    if backend == "simulator" and dtype is torch.bfloat16:  # each product rounded to bf16 (module doc)
        bound = bound + U[dtype] * mag
    if name in ("trsv", "trsm"):  # a solve: the backward-stable bound, n u_fp32 cond ~ 30 * 2^-24 * |x| * 30
        bound = bound + 30 * 2.0 ** -24 * mag
    assert np.all(err <= bound), f"max excess {(err - bound).max():.3g}"


@pytest.mark.parametrize("call", [
    lambda d: trnblas.axpy(1.0, torch.ones(3, dtype=d), torch.ones(3, dtype=d)),
    lambda d: trnblas.gemv(1.0, torch.ones(2, 3, dtype=d), torch.ones(3, dtype=d)),
    lambda d: trnblas.syrk(1.0, torch.ones(2, 3, dtype=d)),
    lambda d: trnblas.trsm(1.0, torch.ones(2, 2, dtype=d), torch.ones(2, 1, dtype=d)),
    lambda d: trnblas.dgmm(torch.ones(2, 2, dtype=d), torch.ones(2, dtype=d)),
])
@pytest.mark.parametrize("dtype", [torch.int32, torch.bool])
def test_integer_and_bool_stay_type_errors(call, dtype):
    with pytest.raises(TypeError, match="has dtype"):
        call(dtype)
