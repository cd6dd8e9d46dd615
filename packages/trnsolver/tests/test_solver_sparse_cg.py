"""CG on a trnsparse CSR matrix with its iteration on the device: per iteration one
``csr_spmv_kernel`` launch (trnsparse's, reached through ``CSRMatrix.__trnsci_spmv__``)
and one ``cg_update_kernel`` launch, through the simulator.

References: ``scipy.sparse.linalg.cg`` (float64) for the iteration count, and the
exact solution of the 2-D Poisson system (``scipy.sparse.linalg.spsolve``, float64)
for the answer. The bound on the answer: ``||x - x*|| / ||x*|| <= cond(A) * relres``
with ``relres`` the true residual the call reports and ``cond(A)`` from the Poisson
matrix's known eigenvalues ``4 sin^2(i pi / 2(nx+1)) + 4 sin^2(j pi / 2(ny+1))``.
The device dots are float32 all-reduces; on this grid the recursive residual stays
far enough from the tolerance at every step that the count equals SciPy's exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as ssl
import torch

import trnsolver
from trnsci.backend import use_backend
from trnsci.dispatch import plan_call
from trnsci.nki import emulator
from trnsci.testing import assert_counts, kernel_ran
from trnsolver.kernels.cg_update import cg_update_counts, cg_update_kernel

trnsparse = pytest.importorskip("trnsparse")

pytestmark = pytest.mark.simulator

NX, NY = 23, 19  # 437 unknowns: four row tiles, the last ragged
TOL = 1e-5


def _poisson(nx=NX, ny=NY):
    def lap(k):
        return sp.diags([-np.ones(k - 1), 2 * np.ones(k), -np.ones(k - 1)], [-1, 0, 1])
    S = (sp.kron(sp.eye(ny), lap(nx)) + sp.kron(lap(ny), sp.eye(nx))).tocsr().astype(np.float32)
    i, j = np.arange(1, nx + 1), np.arange(1, ny + 1)
    lam = (4 * np.sin(i * np.pi / (2 * (nx + 1))) ** 2)[:, None] + (4 * np.sin(j * np.pi / (2 * (ny + 1))) ** 2)
    return S, float(lam.max() / lam.min())


def _csr(S):
    return trnsparse.CSRMatrix(torch.from_numpy(S.data), torch.from_numpy(S.indices.astype(np.int64)),
                               torch.from_numpy(S.indptr.astype(np.int64)), S.shape)


def _rhs(n, seed=0):
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


@pytest.mark.parametrize("n", [5, 256, 437])  # tail only, no tail, both
def test_cg_update_kernel_is_the_vector_half_of_a_cg_step_and_counters(n):
    rng = np.random.default_rng(n)
    x, r, p, ap = (rng.standard_normal(n).astype(np.float32) for _ in range(4))
    rz0 = float((r.astype(np.float64) ** 2).sum())
    rz = np.full((128, 1), rz0, np.float32)
    (xo, ro, po, rzo, st), prof = emulator.profile(cg_update_kernel, x, r, p, ap, rz, target="trn1")
    want = cg_update_counts(n)
    want.pop("kernel")
    assert_counts(prof, want)
    x64, r64, p64, ap64 = (t.astype(np.float64) for t in (x, r, p, ap))
    pap = p64 @ ap64
    al = rz0 / pap
    xr, rr = x64 + al * p64, r64 - al * ap64
    rzr = rr @ rr
    pr = rr + rzr / rz0 * p64
    # float32 throughout: dots of n terms carry ~n * 2^-24 relative error; 1e-4 covers n = 437 with margin
    for got, ref in ((xo, xr), (ro, rr), (po, pr)):
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-4 * np.abs(ref).max())
    np.testing.assert_allclose(st[0], [rzr, pap], rtol=1e-4)
    np.testing.assert_allclose(rzo[:, 0], np.full(128, rzr), rtol=1e-4)


def test_sparse_cg_on_the_device_vs_scipy_and_plan_equals_run():
    S, cond = _poisson()
    n = S.shape[0]
    A, b = _csr(S), _rhs(n)
    bt = torch.from_numpy(b)
    with use_backend("simulator"):
        plan = plan_call(trnsolver.cg, A, bt, tol=TOL)
    assert plan.backend == "simulator" and plan.kernel["kernels"] == ["csr_spmv_kernel", "cg_update_kernel"]
    seen = []
    with kernel_ran() as runs:
        x, it, rel = trnsolver.cg(A, bt, tol=TOL, callback=seen.append)
    # per iteration SpMV then update; the final true-residual check (b - A x) is one more SpMV
    names = [r.kernel for r in runs]
    assert names == plan.kernel["kernels"] * it + ["csr_spmv_kernel"] and len(seen) == it
    figures = {k: v for k, v in plan.kernel.items() if k not in ("name", "kernels")}
    for k in range(0, 2 * it, 2 * max(1, it // 3)):  # a few iterations' summed counters
        pair = [runs[k].profile, runs[k + 1].profile]
        summed = {key: pair[0].instructions.get(key, 0) + pair[1].instructions.get(key, 0)
                  for key in ("dma", "tensor", "vector", "scalar", "gpsimd")}
        summed["hbm_read_bytes"] = pair[0].hbm_read_bytes + pair[1].hbm_read_bytes
        summed["hbm_write_bytes"] = pair[0].hbm_write_bytes + pair[1].hbm_write_bytes
        assert {key: summed[key] for key in figures if key in summed} == \
            {key: v for key, v in figures.items() if key in summed}
    count = [0]
    _, info = ssl.cg(S.astype(np.float64), b.astype(np.float64), rtol=TOL,
                     callback=lambda xk: count.__setitem__(0, count[0] + 1))
    assert info == 0 and it == count[0]
    with use_backend("torch"):
        _, it_torch, _ = trnsolver.cg(A, bt, tol=TOL)
    assert it_torch == it
    ref = ssl.spsolve(S.astype(np.float64).tocsc(), b.astype(np.float64))
    assert rel < TOL
    err = np.linalg.norm(x.numpy().astype(np.float64) - ref) / np.linalg.norm(ref)
    assert err <= cond * rel, (err, cond, rel)


def test_sparse_cg_with_x0_starts_from_a_device_residual():
    S, _ = _poisson(7, 5)
    n = S.shape[0]
    A, b = _csr(S), _rhs(n, seed=2)
    ref = ssl.spsolve(S.astype(np.float64).tocsc(), b.astype(np.float64))
    x0 = torch.from_numpy((0.9 * ref).astype(np.float32))
    with kernel_ran() as runs:
        x, it, rel = trnsolver.cg(A, torch.from_numpy(b), x0=x0, tol=TOL)
    names = [r.kernel for r in runs]
    assert names == ["csr_spmv_kernel"] + ["csr_spmv_kernel", "cg_update_kernel"] * it + ["csr_spmv_kernel"]
    np.testing.assert_allclose(x.numpy(), ref, rtol=0, atol=1e-4 * np.abs(ref).max())  # cond ~ 18, tol 1e-5


def test_what_sparse_cg_keeps_on_torch_says_why():
    S, _ = _poisson(5, 4)
    A, b = _csr(S), torch.from_numpy(_rhs(S.shape[0]))
    with use_backend("simulator"):
        assert "preconditioner" in plan_call(trnsolver.cg, A, b, M=torch.eye(S.shape[0])).reason
        assert "float32" in plan_call(trnsolver.cg, _csr(S.astype(np.float64)), b.double()).reason
    assert isinstance(A.__trnsci_spmv__(), object) and not isinstance(A.__trnsci_spmv__(), str)
    assert "square" in trnsparse.CSRMatrix(torch.ones(1), torch.zeros(1, dtype=torch.int64),
                                           torch.tensor([0, 1, 1]), (2, 3)).__trnsci_spmv__()
