"""Every trnblas op with a kernel: its plan says exactly what the call does, kernel or torch.

The cases include calls the kernel cannot take (dtypes, shapes beyond its
SBUF plan, options) and calls the host splits into several kernel runs.
A new op with a kernel fails ``test_every_kernel_op_has_cases`` until it is
listed here.
"""

from __future__ import annotations

import pytest
import torch

import trnblas
import trnsci
from trnsci.testing import check_plan_case, kernel_ops, plan_cases

pytestmark = pytest.mark.simulator


def _t(*shape, dtype=torch.float32, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _tri(n, dtype=torch.float32):
    return (torch.eye(n) * 3 + _t(n, n).triu() * 0.1).to(dtype)


def _mp2(nocc, nvir, naux, dtype=torch.float32):
    return (_t(nocc, nvir, naux, dtype=torch.float64) * 0.1).to(dtype), -torch.ones(nocc), torch.ones(nvir)


F64 = torch.float64
CASES = {
    "trnblas.gemm": [
        (trnblas.gemm, (1.0, _t(20, 30), _t(30, 10))),
        (trnblas.gemm, (1.0, _t(20, 30, dtype=F64), _t(30, 10, dtype=F64))),  # dtype the kernel lacks
        (trnblas.gemm, (1.0, _t(4, 3900), _t(3900, 5))),  # K split on the host: two kernel runs, no closed form
        (trnblas.trmm, (1.0, _tri(6), _t(6, 4))),  # reaches GEMM through trmm
    ],
    "trnblas.gemm_fp64": [
        (trnblas.gemm, (1.0, _t(20, 30, dtype=F64), _t(30, 10, dtype=F64)), {"precision": "fp64"}),  # 7 launches
        (trnblas.gemm, (1.0, _t(4, 3900, dtype=F64), _t(3900, 5, dtype=F64)), {"precision": "fp64"}),  # K split
    ],
    "trnblas.batched_gemm": [
        (trnblas.batched_gemm, (1.0, _t(3, 5, 6), _t(3, 6, 7))),
        (trnblas.gemm, (1.0, _t(2, 5, 6, dtype=torch.complex64), _t(6, 7, dtype=torch.complex64))),
    ],
    "trnblas.gemm_ex": [
        (trnblas.gemm_ex, (1.0, _t(9, 8, dtype=torch.bfloat16), _t(8, 7, dtype=torch.bfloat16))),
        (trnblas.gemm_ex, (1.0, _t(9, 8), _t(8, 7)), {"compute_dtype": F64}),  # runs GEMM, on torch
        (trnblas.gemm_ex, (1.0, _t(9, 8, dtype=torch.float16), _t(8, 7, dtype=torch.float16))),
    ],
    "trnblas.syrk": [
        (trnblas.syrk, (1.0, _t(40, 30)), {"uplo": "lower"}),
        (trnblas.syrk, (1.0, _t(40, 30, dtype=F64))),
        (trnblas.herk, (1.0, _t(40, 30)), {"trans": "T"}),
    ],
    "trnblas.trsm": [
        (trnblas.trsm, (1.0, _tri(50), _t(50, 3))),
        (trnblas.trsm, (1.0, _tri(50, F64), _t(50, 3, dtype=F64))),
        # issue 7: under the simulator this planned "simulator" and then ran torch
        (trnblas.trsm, lambda: (1.0, torch.eye(8200), torch.ones(8200, 1))),  # built when run: 270 MB
    ],
    "trnblas.mp2_energy": [
        (trnblas.mp2_energy, _mp2(3, 20, 40)),
        (trnblas.mp2_energy, _mp2(3, 20, 40, F64)),
        (trnblas.mp2_energy, _mp2(2, 2000, 200)),  # beyond the kernel's SBUF plan
    ],
    # level 1 (Vector-Engine kernels): a ragged vector, a dtype the kernel lacks, a call it cannot take
    "trnblas.axpy": [(trnblas.axpy, (2.0, _t(300), _t(300, seed=1))),
                     (trnblas.axpy, (2.0, _t(300, dtype=F64), _t(300, dtype=F64))),
                     (trnblas.axpy, (2j, _t(30, dtype=torch.complex64), _t(30, dtype=torch.complex64)))],
    "trnblas.scal": [(trnblas.scal, (2.0, _t(300, dtype=torch.bfloat16))), (trnblas.scal, (2.0, _t(3, dtype=F64)))],
    "trnblas.copy": [(trnblas.copy, (_t(300),)), (trnblas.copy, (_t(30, dtype=torch.complex64),))],
    "trnblas.swap": [(trnblas.swap, (_t(300), _t(300, seed=1)))],
    "trnblas.rot": [(trnblas.rot, (_t(300), _t(300, seed=1), 0.6, 0.8))],
    "trnblas.dot": [(trnblas.dot, (_t(300), _t(300, seed=1))),
                    (trnblas.dot, (_t(30, dtype=torch.complex64), _t(30, dtype=torch.complex64)))],
    "trnblas.dotc": [(trnblas.dotc, (_t(300), _t(300, seed=1)))],
    "trnblas.nrm2": [(trnblas.nrm2, (_t(1300),)), (trnblas.nrm2, (_t(30, dtype=torch.complex64),))],
    "trnblas.asum": [(trnblas.asum, (_t(1300),))],
    "trnblas.iamax": [(trnblas.iamax, (_t(1300),)), (trnblas.iamax, (_t(30, dtype=torch.complex64),))],
    "trnblas.iamin": [(trnblas.iamin, (_t(1300),))],
    # level 2 (GEMV / rank-update / TRSM kernels)
    "trnblas.gemv": [(trnblas.gemv, (1.0, _t(130, 600), _t(600))),
                     (trnblas.gemv, (1.0, _t(130, 600), _t(130)), {"trans": True}),
                     (trnblas.gemv, (1.0, _t(13, 6, dtype=F64), _t(6, dtype=F64))),
                     (trnblas.gemv, (1.0, _t(13, 6, dtype=torch.complex64), _t(6, dtype=torch.complex64)))],
    "trnblas.symv": [(trnblas.symv, (1.0, _t(70, 70), _t(70))),
                     (trnblas.hemv, (1.0, _t(30, 30, dtype=torch.complex64), _t(30, dtype=torch.complex64)))],
    "trnblas.trmv": [(trnblas.trmv, (_tri(70), _t(70)))],
    "trnblas.trsv": [(trnblas.trsv, (_tri(70), _t(70))),
                     (trnblas.trsv, (_tri(70, torch.bfloat16), _t(70, dtype=torch.bfloat16)))],
    "trnblas.ger": [(trnblas.ger, (1.0, _t(70), _t(90), _t(70, 90))),
                    (trnblas.gerc, (1j, _t(7, dtype=torch.complex64), _t(9, dtype=torch.complex64)))],
    "trnblas.syr": [(trnblas.syr, (1.0, _t(70))), (trnblas.her, (1.0, _t(7, dtype=torch.complex64))),
                    (trnblas.syr, (1.0, _t(7, dtype=torch.complex128)))],
    "trnblas.syr2": [(trnblas.syr2, (1.0, _t(70), _t(70, seed=1), _t(70, 70)))],
    # level 3 on the new kernels
    "trnblas.syr2k": [(trnblas.syr2k, (1.0, _t(70, 30), _t(70, 30, seed=1)), {"uplo": "lower"}),
                      (trnblas.her2k, (1.0, _t(70, 30), _t(70, 30, seed=1))),
                      (trnblas.syr2k, (1.0, _t(7, 3, dtype=F64), _t(7, 3, dtype=F64)))],
    "trnblas.geam": [(trnblas.geam, (1.0, _t(30, 70), 2.0, _t(30, 70, seed=1))),
                     (trnblas.geam, (1.0, _t(30, 70), 2.0, _t(70, 30, seed=1)), {"transB": True}),
                     (trnblas.geam, (1j, _t(3, 7, dtype=torch.complex64), 0.0, _t(3, 7, dtype=torch.complex64)))],
    "trnblas.dgmm": [(trnblas.dgmm, (_t(130, 70), _t(130))), (trnblas.dgmm, (_t(13, 70), _t(70)), {"side": "R"}),
                     (trnblas.dgmm, (_t(13, 7, dtype=F64), _t(13, dtype=F64)))],
}


def test_every_kernel_op_has_cases():
    assert kernel_ops("trnblas") == set(CASES)


@pytest.mark.parametrize("backend", ["simulator", "torch"])
@pytest.mark.parametrize("op_name,case", plan_cases(CASES), ids=lambda x: x if isinstance(x, str) else "")
def test_plan_backend_is_what_ran(backend, op_name, case):
    check_plan_case(backend, op_name, case, also=("trnblas.gemm",))  # gemm_ex with a float64 compute dtype runs GEMM


def test_trsm_beyond_the_kernel_plans_torch_with_the_reason():
    with trnsci.use_backend("simulator"):
        p = trnblas.plan_trsm(torch.eye(8200), torch.ones(8200, 1))
    assert p.backend == "torch" and "8200" in p.reason and "SBUF" in p.reason
