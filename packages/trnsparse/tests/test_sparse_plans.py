"""Every trnsparse op with a kernel: its plan says exactly what the call does, kernel or torch.

The cases include calls the kernels cannot take (float64, block sizes other than 128, autograd,
entry-level attention masks, non-finite Schwarz factors). A new op with a kernel fails
``test_every_kernel_op_has_cases`` until it is listed here. Shapes are small (one or two tiles).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trnsci
import trnsparse
from trnsci import dispatch
from trnsci.testing import check_plan_case, kernel_ops, plan_cases

pytestmark = pytest.mark.simulator

F64 = torch.float64


def _t(*shape, dtype=torch.float32, seed=0, grad=False):
    t = torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)
    return t.requires_grad_() if grad else t


def _bsr(m, n, dtype=torch.float32, block_size=128):
    D = _t(m, n, dtype=dtype)
    D[: min(m, 128), 128:] = 0  # one tile of the top block row left out
    return trnsparse.BSRMatrix.from_dense(D, block_size=block_size)


def _d(n, bad=False):
    d = 10.0 ** torch.linspace(-8, 0, n)
    if bad:
        d[3] = float("nan")
    return d


_partial = trnsparse.BSRMatrix.from_dense((torch.rand(150, 150, generator=torch.Generator().manual_seed(1)) > 0.5)
                                          .float(), block_size=128)

def _csr(m, n, dtype=torch.float32, fmt="csr", seed=3):
    A = trnsparse.random_sparse(m, n, density=0.05, dtype=dtype, seed=seed)
    return A.to_csc() if fmt == "csc" else A


def _very_sparse(m, n):
    return trnsparse.random_sparse(m, n, density=0.002, seed=6)


def _dense_csr(m, n, dtype=torch.float32):
    return trnsparse.random_sparse(m, n, density=0.5, dtype=dtype, seed=5)


def _tri(n, dtype=torch.float32, fmt="csr"):
    keep = torch.rand(n, n, generator=torch.Generator().manual_seed(2)) < 0.05
    A = trnsparse.from_dense(_t(n, n, dtype=dtype) * keep + 4 * torch.eye(n, dtype=dtype))
    return A.to_csc() if fmt == "csc" else A


CASES = {
    "trnsparse.spmv": [
        (trnsparse.spmv, (_csr(150, 140), _t(140))),
        (trnsparse.spmv, (_csr(150, 140, F64), _t(140, dtype=F64))),  # dtype the kernel lacks
        (trnsparse.spmv, (_csr(150, 140), _t(140, grad=True))),  # autograd
        (trnsparse.spmv, (_csr(0, 140), _t(140))),  # no rows
    ],
    "trnsparse.spmm": [
        (trnsparse.spmm, (_csr(150, 140, fmt="csc"), _t(140, 3)), {"alpha": 2.0}),  # CSC through CSR form
        (trnsparse.spmm, (_csr(150, 140), _t(140, 3, grad=True))),  # autograd
    ],
    "trnsparse.bsr_spmm": [
        (trnsparse.bsr_spmm, (_bsr(150, 200), _t(200, 7))),
        (trnsparse.spmm, (_bsr(150, 200), _t(200, 7))),  # reaches BSR SpMM through spmm
        (trnsparse.bsr_spmm, (_bsr(150, 200, F64), _t(200, 7, dtype=F64))),  # dtype the kernel lacks
        (trnsparse.bsr_spmm, (_bsr(20, 30, block_size=8), _t(30, 2))),  # block size 8
        (trnsparse.bsr_spmm, (_bsr(150, 200), _t(200, 3, grad=True))),  # autograd
    ],
    "trnsparse.spmv_symmetric": [
        (trnsparse.spmv_symmetric, (_csr(150, 150), _t(150))),
        (trnsparse.spmv_symmetric, (_csr(150, 150, fmt="csc"), _t(150, 4)), {"uplo": "lower"}),
        (trnsparse.spmv_symmetric, (_csr(150, 150, F64), _t(150, dtype=F64))),
    ],
    "trnsparse.spsv": [
        (trnsparse.spsv, (_tri(150), _t(150))),
        (trnsparse.spsm, (_tri(150, fmt="csc"), _t(150, 3)), {"lower": False, "trans": True}),
        (trnsparse.spsv, (_tri(150, F64), _t(150, dtype=F64))),
        (trnsparse.spsv, (_tri(150), _t(150, grad=True))),  # autograd
    ],
    "trnsparse.sddmm": [
        (trnsparse.sddmm, (_csr(150, 140), _t(150, 5), _t(5, 140)), {"alpha": 2.0, "beta": 0.5}),
        (trnsparse.sddmm, (_csr(150, 140, F64), _t(150, 5, dtype=F64), _t(5, 140, dtype=F64))),
        (trnsparse.sddmm, (_csr(150, 140), _t(150, 5, grad=True), _t(5, 140))),  # autograd
    ],
    "trnsparse.bsr_sddmm": [
        (trnsparse.sddmm, (_bsr(150, 200), _t(150, 5), _t(5, 200))),
        (trnsparse.sddmm, (_bsr(150, 200, F64), _t(150, 5, dtype=F64), _t(5, 200, dtype=F64))),
        (trnsparse.sddmm, (_bsr(150, 200), _t(150, 5, grad=True), _t(5, 200))),
    ],
    "trnsparse.bsr_spgemm": [
        (trnsparse.bsr_spgemm, (_bsr(150, 200), _bsr(200, 140))),
        (trnsparse.bsr_spgemm, (_bsr(150, 200, F64), _bsr(200, 140, F64))),  # dtype the kernel lacks
        (trnsparse.bsr_spgemm, (_bsr(20, 30, block_size=8), _bsr(30, 12, block_size=8))),  # block size 8
    ],
    "trnsparse.spgemm": [
        (trnsparse.spgemm, (_dense_csr(150, 140), _dense_csr(140, 130))),  # full tiles: the kernel
        (trnsparse.spgemm, (_csr(150, 140), _csr(140, 130))),  # 5% dense: still pays at this size
        (trnsparse.spgemm, (_very_sparse(300, 280), _very_sparse(280, 290))),  # too little work: host merge
        (trnsparse.spgemm, (_dense_csr(150, 140, F64), _dense_csr(140, 130, F64))),  # dtype the kernel lacks
    ],
    "trnsparse.sparse_add": [
        (trnsparse.sparse_add, (_csr(150, 140), _csr(150, 140, seed=4)), {"alpha": 2.0, "beta": -0.5}),
        (trnsparse.sparse_add, (_csr(150, 140, fmt="csc"), _csr(150, 140, seed=4))),  # CSC through CSR form
        (trnsparse.sparse_add, (_csr(150, 140, F64), _csr(150, 140, F64, seed=4))),  # dtype the kernel lacks
    ],
    "trnsparse.screened_spmm": [
        (trnsparse.screened_spmm, (_t(140, 140), _d(140), _t(140, 6), 1e-8)),
        (trnsparse.screened_spmm, (_t(140, 140, dtype=F64), _d(140), _t(140, 6, dtype=F64), 1e-8)),
        (trnsparse.screened_spmm, (_t(140, 140), _d(140, bad=True), _t(140, 6), 1e-8)),
    ],
    "trnsparse.block_sparse_attention": [
        (trnsparse.block_sparse_attention, (_t(150, 8), _t(150, 8), _t(150, 8),
                                            trnsparse.local_window_mask(150, 1, block_size=128)), {"causal": True}),
        (trnsparse.block_sparse_attention_tiled, (_t(150, 8), _t(150, 8), _t(150, 8),
                                                  trnsparse.causal_mask(150, block_size=128))),
        (trnsparse.block_sparse_attention, (_t(150, 8), _t(150, 8), _t(150, 8), _partial)),  # entry-level mask
        (trnsparse.block_sparse_attention, (_t(150, 8).index_fill(0, torch.tensor([3]), float("nan")), _t(150, 8),
                                            _t(150, 8), trnsparse.causal_mask(150, block_size=128))),  # NaN in Q
        (trnsparse.block_sparse_attention, (_t(150, 8, dtype=F64), _t(150, 8, dtype=F64), _t(150, 8, dtype=F64),
                                            trnsparse.causal_mask(150, block_size=128))),
        (trnsparse.block_sparse_attention, (_t(150, 8), _t(150, 8), _t(150, 8),
                                            trnsparse.causal_mask(150, block_size=64))),  # block size 64
        (trnsparse.block_sparse_attention, (_t(150, 192), _t(150, 192), _t(150, 192),
                                            trnsparse.causal_mask(150, block_size=128))),  # head_dim > 128: K tiles
        (trnsparse.block_sparse_attention, (_t(130, 4), _t(130, 4), _t(130, 16000),
                                            trnsparse.causal_mask(130, block_size=128))),  # dv too wide for SBUF
    ],
}


def test_every_kernel_op_has_cases():
    assert kernel_ops("trnsparse") == set(CASES)


@pytest.mark.parametrize("backend", ["simulator", "torch"])
@pytest.mark.parametrize("op_name,case", plan_cases(CASES), ids=lambda x: x if isinstance(x, str) else "")
def test_plan_backend_is_what_ran(backend, op_name, case):
    check_plan_case(backend, op_name, case)


def test_plans_name_the_reason_the_kernel_cannot_take_a_call():
    with trnsci.use_backend("simulator"):
        p = dispatch.plan_call(trnsparse.bsr_spmm, _bsr(20, 30, block_size=8), _t(30, 2))
        q = dispatch.plan_call(trnsparse.block_sparse_attention, _t(150, 8), _t(150, 8), _t(150, 8), _partial)
        r = dispatch.plan_call(trnsparse.screened_spmm, _t(140, 140), _d(140, bad=True), _t(140, 6), 1e-8)
        k = dispatch.plan_call(trnsparse.bsr_spmm, _bsr(150, 200), _t(200, 7))
        w = dispatch.plan_call(trnsparse.block_sparse_attention, _t(130, 4), _t(130, 4), _t(130, 16000),
                               trnsparse.causal_mask(130, block_size=128))
    assert p.backend == "torch" and "block_size 8" in p.reason
    assert q.backend == "torch" and "entry-level" in q.reason
    assert r.backend == "torch" and "non-finite" in r.reason
    assert k.backend == "simulator" and k.kernel["name"] == "bsr_spmm_kernel"
    assert w.backend == "torch" and "SBUF" in w.reason
    assert np.isfinite(k.size)


def test_csr_spgemm_plan_says_when_the_tiles_do_not_pay():
    with trnsci.use_backend("simulator"):
        p = dispatch.plan_call(trnsparse.spgemm, _very_sparse(300, 280), _very_sparse(280, 290))
        k = dispatch.plan_call(trnsparse.spgemm, _dense_csr(150, 140), _dense_csr(140, 130))
    assert p.backend == "torch" and "exceeds the host row merge" in p.reason
    assert k.backend == "simulator" and k.kernel["name"] == "bsr_spgemm_kernel"
