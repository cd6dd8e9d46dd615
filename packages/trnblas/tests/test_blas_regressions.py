"""Regressions from the outside sweep of issue 7 (section 4), one test per defect.

References are independent: exact values computed with Python's ``math`` in
float64 (or by hand), and the messages the public API promises.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import trnblas


@pytest.mark.parametrize("values,dtype", [
    ([1e-40 + 1e-40j, 0], torch.complex64),  # largest entry subnormal in float32
    ([1e-310 + 0j], torch.complex128),  # subnormal in float64
    ([3e-39 + 4e-39j, 1e-45j], torch.complex64),
])
def test_nrm2_complex_subnormal_entries(values, dtype):
    x = torch.tensor(values, dtype=dtype)
    got = float(trnblas.nrm2(x))
    xs = x.numpy().astype(np.complex128)  # the stored (rounded) entries, exactly, in float64
    s = max(abs(complex(v)) for v in xs)  # scale first, as reference BLAS does: no underflow in float64
    want = s * math.sqrt(sum((abs(complex(v)) / s) ** 2 for v in xs))
    assert math.isfinite(got)
    # A norm of subnormal inputs keeps only the precision of the subnormals: relative 2^-10 covers
    # float32 subnormals near 1e-40 (about 13 significant bits) and is far below any O(1) error.
    assert want > 0 and got == pytest.approx(want, rel=2.0**-10, abs=0)


@pytest.mark.parametrize("call", [
    lambda: trnblas.ger(1.0, torch.ones(2), None),
    lambda: trnblas.geru(1.0, torch.ones(2), None),
    lambda: trnblas.gerc(1.0, torch.ones(2), None),
])
def test_ger_needs_y(call):
    with pytest.raises(TypeError, match=r"y must be a torch.Tensor"):
        call()


@pytest.mark.parametrize("fn", [trnblas.syr2k, trnblas.her2k])
def test_rank_2k_needs_b(fn):
    with pytest.raises(TypeError, match=r"B must be a torch.Tensor"):
        fn(1.0, torch.ones(2, 2), None)


def test_ger_conj_must_be_a_bool():
    x = torch.tensor([1j], dtype=torch.complex64)
    with pytest.raises(TypeError, match="conj must be True or False"):
        trnblas.ger(1.0, x, x, conj="no")
    assert complex(trnblas.ger(1.0, x, x, conj=False)[0, 0]) == -1  # 1j * 1j, unconjugated


def test_python_ints_beyond_int64_as_scalars():
    big = 2**70  # exactly representable as a float
    assert trnblas.axpy(big, torch.ones(2, dtype=torch.float64), torch.zeros(2, dtype=torch.float64)).tolist() == [
        float(big)] * 2
    xr, yr = trnblas.rot(torch.ones(1, dtype=torch.float64), torch.zeros(1, dtype=torch.float64), 2**64, 2**65)
    assert (xr.item(), yr.item()) == (2.0**64, -(2.0**65))
    R = trnblas.gemm(2**64, torch.eye(2, dtype=torch.float64), torch.eye(2, dtype=torch.float64), beta=-(2**64))
    assert R.tolist() == [[2.0**64, 0.0], [0.0, 2.0**64]]
    with pytest.raises(ValueError, match="alpha .* too large for floating point"):
        trnblas.scal(10**400, torch.ones(2))


@pytest.mark.parametrize("out,match", [
    (torch.zeros(2, 1).expand(2, 2), "overlapping memory"),
    (torch.zeros(2, 2, requires_grad=True), "requires grad"),
    (torch.zeros(2, 2).to_sparse(), "sparse"),
])
def test_out_torch_cannot_write(out, match):
    with pytest.raises((ValueError, TypeError), match=f"gemm: out .*{match}"):
        trnblas.gemm(1.0, torch.eye(2), torch.eye(2), out=out)


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_sparse_inputs_are_named(layout):
    A = torch.eye(3)
    S = A.to_sparse() if layout == "coo" else A.to_sparse_csr()
    with pytest.raises(TypeError, match=r"gemm: A is a sparse tensor .*to_dense"):
        trnblas.gemm(1.0, S, A)
    with pytest.raises(TypeError, match=r"dgmm: A is a sparse tensor"):
        trnblas.dgmm(S, torch.ones(3))
    with pytest.raises(TypeError, match=r"nrm2: x is a sparse tensor"):
        trnblas.nrm2(torch.ones(3).to_sparse())


def test_numpy_negative_strides():
    A = np.arange(9.0).reshape(3, 3)
    B = np.arange(6.0).reshape(3, 2)
    got = trnblas.gemm(1.0, A[::-1], B[:, ::-1])
    np.testing.assert_array_equal(got, A[::-1] @ B[:, ::-1])  # small integers: exact in float64
    out = np.zeros((3, 2))[::-1]
    with pytest.raises(ValueError, match="out must be a writeable NumPy array with non-negative strides"):
        trnblas.gemm(1.0, A, B, out=out)


def _mp2_inputs():
    g = torch.Generator().manual_seed(0)
    B = torch.randn(2, 3, 4, generator=g, dtype=torch.float64) * 0.1
    return B, -torch.ones(2, dtype=torch.float64), torch.ones(3, dtype=torch.float64)


@pytest.mark.parametrize("max_memory", [float("inf"), np.float64(1.0), np.float32(0.5), np.int64(3), 10**30])
def test_mp2_max_memory_any_positive_real(max_memory):
    B, eo, ev = _mp2_inputs()
    ref = trnblas.mp2_energy(B, eo, ev)  # default max_memory
    assert float(trnblas.mp2_energy(B, eo, ev, max_memory=max_memory)) == pytest.approx(float(ref), rel=1e-14)


@pytest.mark.parametrize("max_memory,err", [(float("nan"), ValueError), (-1.0, ValueError), ("1", TypeError),
                                            (True, TypeError)])
def test_mp2_max_memory_rejects(max_memory, err):
    with pytest.raises(err, match="max_memory"):
        trnblas.mp2_energy(*_mp2_inputs(), max_memory=max_memory)
