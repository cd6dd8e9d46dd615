"""bfloat16/float16 inputs across trnsolver: computed in float32, returned in the input dtype.

Reference: NumPy/SciPy in float64 on the *rounded* inputs (what the routine
was given). Bound (trnsci.precision.computes_in): float32 algorithm error (negligible
here, n = 6, cond ~ 3) plus one rounding of each result to the input dtype,
relative 2^-8 (bf16) / 2^-11 (fp16) of the result's largest entry; we allow
4x that.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sl
import torch

import trnsolver
from trnsci.backend import use_backend

N = 6
EPS = {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}


def _spd(dtype):
    X = np.random.default_rng(0).standard_normal((N, N))
    return torch.from_numpy(X @ X.T / N + np.eye(N)).to(dtype)


def _close(got, ref, dtype):
    assert got.dtype == dtype
    ref = np.asarray(ref, dtype=np.float64)
    np.testing.assert_allclose(got.double().numpy(), ref, rtol=0, atol=4 * EPS[dtype] * max(np.abs(ref).max(), 1e-30))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_dense_routines_take_half_precision(dtype):
    A = _spd(dtype)
    b = torch.arange(1, N + 1).to(dtype)
    A64, b64 = A.double().numpy(), b.double().numpy()
    _close(trnsolver.solve(A, b), np.linalg.solve(A64, b64), dtype)
    _close(trnsolver.solve_spd(A, b), np.linalg.solve(A64, b64), dtype)
    _close(trnsolver.cholesky(A), np.linalg.cholesky(A64), dtype)
    _close(trnsolver.inv(A), np.linalg.inv(A64), dtype)
    _close(trnsolver.inv_spd(A), np.linalg.inv(A64), dtype)
    _close(trnsolver.det(A), np.linalg.det(A64), dtype)
    _close(trnsolver.eigvalsh(A), np.linalg.eigvalsh(A64), dtype)
    _close(trnsolver.svd(A)[1], sl.svdvals(A64), dtype)
    _close(trnsolver.pinv(A), np.linalg.pinv(A64), dtype)
    _close(trnsolver.lstsq(A, b)[0], np.linalg.lstsq(A64, b64, rcond=None)[0], dtype)
    lu, piv = trnsolver.lu_factor(A)
    assert piv.dtype == torch.int32
    _close(trnsolver.lu_solve((lu, piv), b), np.linalg.solve(A64, b64), dtype)
    Q, R = trnsolver.qr(A)
    _close(Q @ R, A64, dtype)
    w, V = sl.eigh(A64)
    _close(trnsolver.inv_sqrt_spd(A), (V / np.sqrt(w)) @ V.T, dtype)
    x, iters, res = trnsolver.cg(A, b, tol=1e-5)
    _close(x, np.linalg.solve(A64, b64), dtype)


@pytest.mark.simulator
def test_half_precision_reaches_the_kernels_in_float32():
    A = _spd(torch.bfloat16)
    with use_backend("simulator"):
        X = trnsolver.inv(A)
    _close(X, np.linalg.inv(A.double().numpy()), torch.bfloat16)


def test_numpy_float16_and_bad_dtypes():
    A = _spd(torch.float16).numpy()
    x = trnsolver.solve(A, np.ones(N, np.float16))
    assert isinstance(x, np.ndarray) and x.dtype == np.float16
    with pytest.raises(TypeError, match="mix dtypes"):
        trnsolver.solve(_spd(torch.bfloat16), torch.ones(N))
    for bad in (torch.int32, torch.bool):
        with pytest.raises(TypeError, match="dtype"):
            trnsolver.cholesky(torch.eye(N, dtype=bad))


def test_public_names_are_the_family_modules_functions():
    # the half-precision handling is declared where each routine is defined (trnsci.precision.computes_in),
    # so trnsolver re-exports the family modules' functions themselves, not replacements made at import
    import inspect

    from trnsolver import eigen, factor, iterative

    checked = 0
    for name in trnsolver.__all__:
        obj = getattr(trnsolver, name)
        if not inspect.isfunction(obj) or name in ("set_backend", "get_backend", "use_backend", "plan"):
            continue
        home = next((m for m in (eigen, factor, iterative) if name in vars(m)), None)
        assert home is not None, name
        assert obj is getattr(home, name), name
        checked += 1
    assert checked == 29  # every public routine (the 28 that take half precision, and schur)
    assert trnsolver.lu is factor.lu and trnsolver.cg is iterative.cg and trnsolver.eigh is eigen.eigh
