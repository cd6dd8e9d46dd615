"""geam and dgmm settle their torch route per call signature (trnsci.settled, #23): the settled call
gives what the full call gave, and every argument the key does not fix still reaches the checks.

References: NumPy float64 on the same float32 data; one multiply (dgmm) or two products and a sum
(geam) per entry, so 1e-6 relative to the largest |entry| covers float32 rounding (2^-24 per step).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trnblas
from trnblas import level3_gemm as L


def _close(R, ref):
    R = R.numpy().astype(np.float64)
    assert np.abs(R - ref).max() <= 1e-6 * max(1.0, np.abs(ref).max())


def test_dgmm_settles_and_still_checks():
    g = torch.Generator().manual_seed(11)
    A, x, y = torch.randn(37, 23, generator=g), torch.randn(37, generator=g), torch.randn(23, generator=g)
    first = trnblas.dgmm(A, x)
    assert len(L.DGMM.settled.get(trnblas.dgmm, {})) >= 1
    again = trnblas.dgmm(A, x)
    assert torch.equal(first, again)
    _close(again, A.numpy().astype(np.float64) * x.numpy()[:, None])
    _close(trnblas.dgmm(A, y, "right"), A.numpy().astype(np.float64) * y.numpy())
    _close(trnblas.dgmm(A, y, "R"), A.numpy().astype(np.float64) * y.numpy())
    with pytest.raises(ValueError, match="side='L' needs x to have 37 entries"):
        trnblas.dgmm(A, y)
    with pytest.raises(ValueError, match="side"):
        trnblas.dgmm(A, x, "middle")
    with pytest.raises(TypeError, match="dgmm"):
        trnblas.dgmm(A, x.double())


def test_geam_settles_and_keeps_the_blas_quick_returns():
    g = torch.Generator().manual_seed(12)
    A, B = torch.randn(29, 31, generator=g), torch.randn(29, 31, generator=g)
    a, b = A.numpy().astype(np.float64), B.numpy().astype(np.float64)
    first = trnblas.geam(2.0, A, 3.0, B)
    assert len(L.GEAM.settled.get(trnblas.geam, {})) >= 1
    again = trnblas.geam(2.0, A, 3.0, B)
    assert torch.equal(first, again)
    _close(again, 2.0 * a + 3.0 * b)
    nan = torch.full_like(B, float("nan"))
    _close(trnblas.geam(2.0, A, 0.0, nan), 2.0 * a)  # beta == 0: B unread, on its own key
    _close(trnblas.geam(0.0, nan, 3.0, B), 3.0 * b)  # alpha == 0: A unread
    Bt = B.mT.contiguous()
    R = trnblas.geam(2.0, A, 3.0, Bt, False, True)
    assert R.is_contiguous()
    _close(R, 2.0 * a + 3.0 * b)
    R = trnblas.geam(1.0, Bt, 1.0, A, True, False)  # op(A) transposed: the result is still C-ordered
    assert R.is_contiguous()
    _close(R, a + b)
    with pytest.raises(ValueError, match="geam"):
        trnblas.geam(2.0, A, 3.0, Bt)
    with pytest.raises(TypeError, match="geam"):
        trnblas.geam(2.0, A, 1j, B)


def test_batched_gemm_settles_and_still_checks():
    g = torch.Generator().manual_seed(13)
    A, B, C = torch.randn(5, 7, 3, generator=g), torch.randn(5, 3, 6, generator=g), torch.randn(5, 7, 6, generator=g)
    a, b, c = (t.numpy().astype(np.float64) for t in (A, B, C))
    first = trnblas.batched_gemm(2.0, A, B)
    assert len(L.BATCHED_GEMM.settled.get(trnblas.batched_gemm, {})) >= 1
    again = trnblas.batched_gemm(2.0, A, B)
    assert torch.equal(first, again)
    _close(again, 2.0 * a @ b)
    _close(trnblas.batched_gemm(1.0, A, B, 0.5, C), a @ b + 0.5 * c)
    _close(trnblas.batched_gemm(1.0, list(A), list(B)), a @ b)  # lists: the full path
    with pytest.raises(ValueError, match="batch counts differ"):
        trnblas.batched_gemm(2.0, A, B[:4])
    with pytest.raises(ValueError, match="inner dimensions"):
        trnblas.batched_gemm(2.0, A, B, transB=True)
