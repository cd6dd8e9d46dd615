"""Bad arguments give TypeError/ValueError that name the argument -- never AssertionError/IndexError."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trnblas

A = torch.ones(3, 4)
B = torch.ones(4, 2)
SQ = torch.ones(3, 3)
V3 = torch.ones(3)
META = torch.ones(4, 2, device="meta")


@pytest.mark.parametrize("call,exc,pattern", [
    # shapes: both arguments and their shapes are named
    (lambda: trnblas.gemm(1.0, A, torch.ones(3, 2)), ValueError, r"A has shape \(3, 4\).*B has shape \(3, 2\)"),
    (lambda: trnblas.gemm(1.0, A, B, 1.0, torch.ones(2, 2)), ValueError, r"C has shape \(2, 2\)"),
    (lambda: trnblas.gemm(1.0, torch.ones(4), B), ValueError, r"A must be a matrix"),
    (lambda: trnblas.gemm(1.0, torch.ones(2, 3, 4), torch.ones(3, 4, 2)), ValueError, r"batch dimensions"),
    (lambda: trnblas.batched_gemm(1.0, torch.ones(2, 3, 4), torch.ones(3, 4, 2)), ValueError, r"batch counts"),
    (lambda: trnblas.batched_gemm(1.0, [A, SQ], [B, B]), ValueError, r"A\[1\] has shape \(3, 3\)"),
    (lambda: trnblas.batched_gemm(1.0, [], []), ValueError, r"A must hold at least one"),
    (lambda: trnblas.batched_gemm(1.0, A, B), ValueError, r"A must be 3-D"),
    (lambda: trnblas.strided_batched_gemm(1.0, torch.ones(2, 3, 4), torch.ones(3, 4, 2)), ValueError, "batch"),
    (lambda: trnblas.strided_batched_gemm(1.0, [A], [B]), TypeError, r"A must be a 2-D or 3-D tensor"),
    (lambda: trnblas.symm(1.0, A, B), ValueError, r"A must be square"),
    (lambda: trnblas.symm(1.0, SQ, B), ValueError, r"A has shape \(3, 3\).*B has shape \(4, 2\)"),
    (lambda: trnblas.syrk(1.0, A, 1.0, SQ[:2]), ValueError, r"C has shape \(2, 3\)"),
    (lambda: trnblas.syr2k(1.0, A, B), ValueError, r"A and B must have one shape"),
    (lambda: trnblas.trsm(1.0, SQ, B), ValueError, r"A has shape \(3, 3\).*B has shape \(4, 2\)"),
    (lambda: trnblas.trmm(1.0, SQ, B, side="R"), ValueError, r"side='R'"),
    (lambda: trnblas.geam(1.0, A, 1.0, A, transB=True), ValueError, r"op\(A\) is 3x4"),
    (lambda: trnblas.dgmm(A, torch.ones(4)), ValueError, r"x has shape \(4,\)"),
    (lambda: trnblas.gemv(1.0, A, V3), ValueError, r"x must have 4 entries"),
    (lambda: trnblas.gemv(1.0, A, torch.ones(4), 1.0, torch.ones(4)), ValueError, r"y must have 3 entries"),
    (lambda: trnblas.symv(1.0, A, torch.ones(4)), ValueError, r"A must be square"),
    (lambda: trnblas.ger(1.0, V3, V3, A), ValueError, r"A must be \(3, 3\)"),
    (lambda: trnblas.syr2(1.0, V3, torch.ones(4)), ValueError, r"x and y must have one length"),
    (lambda: trnblas.trsv(SQ, torch.ones(4)), ValueError, r"x must have 3 entries"),
    (lambda: trnblas.dot(V3, torch.ones(4)), ValueError, r"x has shape \(3,\).*y has shape \(4,\)"),
    (lambda: trnblas.axpy(1.0, SQ, SQ), ValueError, r"x must be 1-D"),
    (lambda: trnblas.nrm2(SQ), ValueError, r"x must be 1-D"),
    # option strings
    (lambda: trnblas.syrk(1.0, A, uplo="middle"), ValueError, r"uplo must be one of"),
    (lambda: trnblas.trsm(1.0, SQ, SQ, side="up"), ValueError, r"side must be one of"),
    (lambda: trnblas.trsm(1.0, SQ, SQ, diag="maybe"), ValueError, r"diag must be one of"),
    (lambda: trnblas.gemm(1.0, A, B, transA="X"), ValueError, r"transA must be one of"),
    (lambda: trnblas.gemm(1.0, A, B, transB=1), ValueError, r"transB must be one of"),
    (lambda: trnblas.syrk(1.0, A, fill="half"), ValueError, r"fill must be None, 'full' or 'triangle'"),
    (lambda: trnblas.syrk(1.0, A.cfloat(), trans="C"), ValueError, r"trans='C' is not allowed for complex"),
    (lambda: trnblas.herk(1.0, A.cfloat(), trans="T"), ValueError, r"trans='T' is not allowed for complex"),
    (lambda: trnblas.plan("gemvv", A, B), ValueError, r"op_name must be one of"),  # "gemv" itself is plannable
    # dtypes
    (lambda: trnblas.gemm(1.0, A.long(), B.long()), TypeError, r"A has dtype int64"),
    (lambda: trnblas.gemm(1.0, A, B.int()), TypeError, r"B has dtype int32"),
    (lambda: trnblas.trsm(1.0, SQ.bool(), SQ), TypeError, r"A has dtype bool"),
    (lambda: trnblas.gemm(1.0, A, B.double()), TypeError, r"B has dtype float64 but A has float32"),
    (lambda: trnblas.gemm(1.0, A, B, 1.0, torch.ones(3, 2, dtype=torch.float64)), TypeError, r"C has dtype float64"),
    (lambda: trnblas.dot(V3, V3.cdouble()), TypeError, r"y has dtype complex128"),
    (lambda: trnblas.trsm(1.0, SQ.int(), SQ.int()), TypeError, r"A has dtype int32"),  # bf16/fp16 are accepted
    (lambda: trnblas.gemm(1j, A, B), TypeError, r"alpha must be real"),
    (lambda: trnblas.gemm(1.0, A, B, "2"), TypeError, r"beta must be a number"),
    (lambda: trnblas.herk(1j, A.cfloat()), TypeError, r"alpha must be real"),
    (lambda: trnblas.rot(V3, V3, 1j, 0.0), TypeError, r"c must be real"),
    (lambda: trnblas.gemm(1.0, [[1.0]], [[1.0]]), TypeError, r"A must be a torch.Tensor or numpy.ndarray, got list"),
    (lambda: trnblas.nrm2(np.array(["a", "b"])), TypeError, r"x must hold numbers"),
    (lambda: trnblas.rotg("a", 1.0), TypeError, r"a must be a number"),
    # devices
    (lambda: trnblas.gemm(1.0, A, META), ValueError, r"B is on meta but A is on cpu"),
    (lambda: trnblas.axpy(1.0, V3, torch.ones(3, device="meta")), ValueError, r"y is on meta"),
    (lambda: trnblas.trsm(1.0, SQ, torch.ones(3, 2, device="meta")), ValueError, r"B is on meta"),
    # out=
    (lambda: trnblas.gemm(1.0, A, B, out=torch.empty(2, 2)), ValueError, r"out must have shape \(3, 2\)"),
    (lambda: trnblas.gemm(1.0, A, B, out=torch.empty(3, 2, dtype=torch.float64)), TypeError, r"out has dtype"),
    (lambda: trnblas.gemm(1.0, A, B, out=[0.0]), TypeError, r"out must be a torch.Tensor"),
])
def test_bad_arguments(call, exc, pattern):
    with pytest.raises(exc, match=pattern) as info:
        call()
    assert type(info.value) is exc  # not a subclass surprise; never AssertionError/IndexError


def test_messages_name_the_function():
    with pytest.raises(ValueError, match=r"^trsm: "):
        trnblas.trsm(1.0, SQ, SQ, uplo="x")
    with pytest.raises(TypeError, match=r"^gemm_ex: "):
        trnblas.gemm_ex(1.0, A, B, compute_dtype="float32")


def test_numpy_integer_arrays_are_rejected():
    with pytest.raises(TypeError, match="A has dtype int64"):
        trnblas.gemm(1.0, np.ones((2, 2), dtype=np.int64), np.ones((2, 2), dtype=np.int64))
