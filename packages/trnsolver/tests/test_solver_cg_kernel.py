"""CG, BiCGSTAB, MINRES and GMRES with their iterations on the device (cg_step_kernel,
bicgstab_step_kernel, minres_step_kernel, gmres_arnoldi_kernel), through the simulator.

References: ``numpy.linalg.solve`` and ``scipy.sparse.linalg.cg`` in float64.
The kernel's dots are float32 all-reduces, so its residual history follows
float64 CG to ~1e-6 relative; on this well-conditioned system (cond ~ 5) the
iteration count equals SciPy's (allowed: +-1, for a residual landing within
rounding of the tolerance), and ``x`` is within ``cond * tol`` of the solution.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse.linalg as ssl
import torch

import trnsolver
from trnsci.backend import use_backend
from trnsci.dispatch import plan_call
from trnsci.nki import emulator
from trnsci.testing import assert_counts, kernel_ran
from trnsolver.kernels.bicgstab_step import bicgstab_step_counts, bicgstab_step_kernel
from trnsolver.kernels.cg_step import cg_step_counts, cg_step_kernel
from trnsolver.kernels.gmres_arnoldi import gmres_arnoldi_counts, gmres_arnoldi_kernel
from trnsolver.kernels.minres_step import minres_step_counts, minres_step_kernel

pytestmark = pytest.mark.simulator


def _system(n, seed=0):
    X = np.random.default_rng(seed).standard_normal((n, n))
    A = (X @ X.T / n + np.eye(n)).astype(np.float32)
    b = np.random.default_rng(seed + 1).standard_normal(n).astype(np.float32)
    return A, b


@pytest.mark.parametrize("n", [5, 300])  # 300: three row tiles, ragged
def test_cg_step_kernel_is_one_cg_iteration_and_counters(n):
    A, b = _system(n)
    A64 = A.astype(np.float64)
    x, r, p = np.zeros((n, 1), np.float32), b[:, None].copy(), np.zeros((n, 1), np.float32)
    rz = np.ones((128, 1), np.float32)
    for _step in range(2):
        (x, r, p, rz, stats), prof = emulator.profile(cg_step_kernel, A, x, r, p, rz, target="trn1")
    want = cg_step_counts(n)
    want.pop("kernel")
    assert_counts(prof, want)
    # two float64 CG steps from x = 0
    xr, rr = np.zeros(n), b.astype(np.float64)
    pr, rzr = None, None
    for _ in range(2):
        rzn = rr @ rr
        pr = rr.copy() if pr is None else rr + rzn / rzr * pr
        rzr = rzn
        Ap = A64 @ pr
        al = rzn / (pr @ Ap)
        xr, rr = xr + al * pr, rr - al * Ap
    np.testing.assert_allclose(x[:, 0], xr, rtol=0, atol=1e-5 * np.abs(xr).max())
    np.testing.assert_allclose(stats[0, 0], rr @ rr, rtol=1e-4)


def test_cg_on_the_device_vs_scipy():
    A, b = _system(130)
    seen = []
    with kernel_ran() as runs:
        x, it, rel = trnsolver.cg(torch.from_numpy(A), torch.from_numpy(b), tol=1e-5, callback=seen.append)
    assert {r.kernel for r in runs} == {"cg_step_kernel"} and len(runs) == it == len(seen)
    count = [0]
    xs, info = ssl.cg(A.astype(np.float64), b.astype(np.float64), rtol=1e-5,
                      callback=lambda xk: count.__setitem__(0, count[0] + 1))
    assert info == 0 and abs(it - count[0]) <= 1
    ref = np.linalg.solve(A.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(x.numpy(), ref, rtol=0, atol=5 * 1e-5 * np.abs(ref).max())
    assert rel <= 1e-5 * 1.01


def test_jacobi_preconditioned_cg_on_the_device_vs_scipy_and_counters():
    n = 130
    X = np.random.default_rng(4).standard_normal((n, n))
    A = (X @ X.T / n + np.diag(np.linspace(1, 50, n))).astype(np.float32)  # a diagonal that Jacobi evens out
    b = np.random.default_rng(5).standard_normal(n).astype(np.float32)
    M = trnsolver.jacobi_preconditioner(torch.from_numpy(A))
    with kernel_ran() as runs:
        x, it, rel = trnsolver.cg(torch.from_numpy(A), torch.from_numpy(b), tol=1e-5, M=M)
    assert {r.kernel for r in runs} == {"cg_step_kernel"} and len(runs) == it
    want = cg_step_counts(n, jacobi=True)
    want.pop("kernel")
    assert_counts(runs[0].profile, want)
    count = [0]
    A64 = A.astype(np.float64)
    ssl.cg(A64, b.astype(np.float64), rtol=1e-5, M=np.diag(1 / np.diag(A64)),
           callback=lambda xk: count.__setitem__(0, count[0] + 1))
    assert abs(it - count[0]) <= 1
    ref = np.linalg.solve(A64, b.astype(np.float64))
    np.testing.assert_allclose(x.numpy(), ref, rtol=0, atol=50 * 1e-5 * np.abs(ref).max())  # cond ~ 50


def test_cg_device_with_x0_starts_from_its_residual():
    A, b = _system(40, seed=3)
    ref = np.linalg.solve(A.astype(np.float64), b.astype(np.float64))
    x0 = torch.from_numpy((ref * 0.9).astype(np.float32))
    with kernel_ran() as runs:
        x, it, rel = trnsolver.cg(torch.from_numpy(A), torch.from_numpy(b), x0=x0, tol=1e-5)
    assert "gemm_kernel" in {r.kernel for r in runs}  # b - A x0 on the GEMM kernel
    np.testing.assert_allclose(x.numpy(), ref, rtol=0, atol=5e-5 * np.abs(ref).max())


def test_what_cg_keeps_on_torch_says_why():
    A, b = _system(8)
    At, bt = torch.from_numpy(A), torch.from_numpy(b)
    with use_backend("simulator"):
        assert "preconditioner" in plan_call(trnsolver.cg, At, bt, M=torch.eye(8)).reason
        assert "dense" in plan_call(trnsolver.cg, lambda v: At @ v, bt).reason
        assert "float32" in plan_call(trnsolver.cg, At.double(), bt.double()).reason


def _nonsym(n, seed=3):
    rng = np.random.default_rng(seed)
    A = (rng.standard_normal((n, n)) / np.sqrt(n) + 2 * np.eye(n)).astype(np.float32)
    return A, rng.standard_normal(n).astype(np.float32)


def test_bicgstab_step_kernel_is_one_iteration_and_counters():
    n = 300
    A, b = _nonsym(n, seed=n)
    A64 = A.astype(np.float64)
    z = np.zeros((n, 1), np.float32)
    args = [z, b[:, None].copy(), b[:, None].copy(), z, z, np.ones((128, 3), np.float32)]
    (xf, xh, r, p, v, sc, st), prof = emulator.profile(bicgstab_step_kernel, np.ascontiguousarray(A.T), *args,
                                                       target="trn1")
    want = bicgstab_step_counts(n)
    want.pop("kernel")
    assert_counts(prof, want)
    # one float64 BiCGSTAB iteration from x = 0 (p = r, rhat = r)
    r0 = b.astype(np.float64)
    v0 = A64 @ r0
    al = (r0 @ r0) / (r0 @ v0)
    s_ = r0 - al * v0
    t = A64 @ s_
    om = (t @ s_) / (t @ t)
    np.testing.assert_allclose(xh[:, 0], al * r0, rtol=0, atol=1e-5 * np.abs(al * r0).max())
    np.testing.assert_allclose(xf[:, 0], al * r0 + om * s_, rtol=0, atol=1e-5 * np.abs(al * r0).max())
    np.testing.assert_allclose(st[0, 3], (s_ - om * t) @ (s_ - om * t), rtol=1e-4)


def test_bicgstab_on_the_device_vs_scipy():
    A, b = _nonsym(130)
    with kernel_ran() as runs:
        x, it, rel = trnsolver.bicgstab(torch.from_numpy(A), torch.from_numpy(b), tol=1e-5)
    assert {r.kernel for r in runs} == {"bicgstab_step_kernel"} and len(runs) == it
    count = [0]
    ssl.bicgstab(A.astype(np.float64), b.astype(np.float64), rtol=1e-5,
                 callback=lambda xk: count.__setitem__(0, count[0] + 1))
    assert abs(it - count[0]) <= 1  # float32 dots vs SciPy's float64: the last step can land either side
    ref = np.linalg.solve(A.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(x.numpy(), ref, rtol=0, atol=10 * 1e-5 * np.abs(ref).max())
    with use_backend("simulator"):
        assert "preconditioner" in plan_call(trnsolver.bicgstab, torch.from_numpy(A), torch.from_numpy(b),
                                             M=torch.eye(130)).reason


def _indefinite(n, seed=3):
    import scipy.linalg as sl

    rng = np.random.default_rng(seed)
    Q = sl.qr(rng.standard_normal((n, n)))[0]
    lam = np.concatenate([-np.linspace(1, 3, n // 2), np.linspace(1, 3, n - n // 2)])  # cond 3, indefinite
    return ((Q * lam) @ Q.T).astype(np.float32), rng.standard_normal(n).astype(np.float32)


def test_minres_step_kernel_follows_the_paige_saunders_recurrence_and_counters():
    import math

    n = 300
    A, b = _indefinite(n, seed=1)
    A64 = A.astype(np.float64)
    beta1 = float(np.linalg.norm(b.astype(np.float64)))
    z = np.zeros((n, 1), np.float32)
    sc = np.zeros((128, 8), np.float32)
    sc[:, 1] = sc[:, 4] = beta1
    sc[:, 5], sc[:, 7] = -1.0, 1.0
    state = [z, b[:, None].copy(), b[:, None].copy(), z, z, sc]
    # float64 reference (Paige & Saunders' MINRES, unpreconditioned), three iterations
    xr, r1, r2, y = np.zeros(n), b.astype(np.float64), b.astype(np.float64), b.astype(np.float64)
    oldb, be, dbar, eps_, phib, cs, sn = 0.0, beta1, 0.0, 0.0, beta1, -1.0, 0.0
    w, w2 = np.zeros(n), np.zeros(n)
    for it in range(1, 4):
        (*state, st), prof = emulator.profile(minres_step_kernel, np.ascontiguousarray(A.T), *state, target="trn1")
        v = y / be
        y = A64 @ v - ((be / oldb) * r1 if it >= 2 else 0.0)
        al = v @ y
        y = y - (al / be) * r2
        r1, r2 = r2, y
        oldb, be = be, math.sqrt(y @ y)
        oe, de, gb = eps_, cs * dbar + sn * al, sn * dbar - cs * al
        eps_, dbar = sn * be, -cs * be
        ga = max(math.hypot(gb, be), 1.2e-7)
        cs, sn = gb / ga, be / ga
        ph, phib = cs * phib, sn * phib
        w2, w = w, (v - oe * w2 - de * w) / ga
        xr = xr + ph * w
    want = minres_step_counts(n)
    want.pop("kernel")
    assert_counts(prof, want)
    np.testing.assert_allclose(state[0][:, 0], xr, rtol=0, atol=1e-5 * np.abs(xr).max())
    np.testing.assert_allclose(st[0], [al, be, phib], rtol=1e-4)


def test_minres_on_the_device_vs_the_torch_path_and_numpy():
    A, b = _indefinite(130)
    At, bt = torch.from_numpy(A), torch.from_numpy(b)
    with kernel_ran() as runs:
        x, it, rel = trnsolver.minres(At, bt, tol=1e-5)
    assert {r.kernel for r in runs} == {"minres_step_kernel", "gemm_kernel"}  # GEMM: the true-residual check
    assert sum(r.kernel == "minres_step_kernel" for r in runs) == it
    _, it_torch, _ = trnsolver.minres(At, bt, tol=1e-5)
    assert abs(it - it_torch) <= 1  # float32 dots on both paths; the last step can land either side
    ref = np.linalg.solve(A.astype(np.float64), b.astype(np.float64))
    # residual <= tol ||b||, cond = 3: the error is within ~3 tol ||x||; 10x margin for float32
    np.testing.assert_allclose(x.numpy(), ref, rtol=0, atol=3e-4 * np.abs(ref).max())
    assert rel <= 1e-5


@pytest.mark.parametrize("n,k", [(5, 1), (300, 4)])
def test_arnoldi_kernel_orthogonalizes_against_the_basis_and_counters(n, k):
    A, _ = _nonsym(n, seed=n)
    Q = np.linalg.qr(np.random.default_rng(k).standard_normal((n, k)))[0].astype(np.float32)
    (vn, h, hn), prof = emulator.profile(gmres_arnoldi_kernel, np.ascontiguousarray(A.T), Q,
                                         np.ascontiguousarray(Q.T), target="trn1")
    want = gmres_arnoldi_counts(n, k)
    want.pop("kernel")
    assert_counts(prof, want)
    Q64 = Q.astype(np.float64)
    w = A.astype(np.float64) @ Q64[:, -1]
    h1 = Q64.T @ w
    w = w - Q64 @ h1
    h2 = Q64.T @ w
    w = w - Q64 @ h2
    np.testing.assert_allclose(h[:, 0], h1 + h2, rtol=0, atol=1e-5)
    np.testing.assert_allclose(hn[0, 0], np.linalg.norm(w), rtol=1e-5)
    np.testing.assert_allclose(vn[:, 0], w / np.linalg.norm(w), rtol=0, atol=1e-5)


def test_gmres_on_the_device_vs_the_torch_path_and_numpy():
    A, b = _nonsym(130)
    At, bt = torch.from_numpy(A), torch.from_numpy(b)
    with kernel_ran() as runs:
        x, it, rel = trnsolver.gmres(At, bt, tol=1e-5, restart=8)  # two restarts
    assert {r.kernel for r in runs} == {"gmres_arnoldi_kernel", "gemm_kernel"}
    assert sum(r.kernel == "gmres_arnoldi_kernel" for r in runs) == it
    _, it_torch, _ = trnsolver.gmres(At, bt, tol=1e-5, restart=8)
    assert abs(it - it_torch) <= 1
    ref = np.linalg.solve(A.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(x.numpy(), ref, rtol=0, atol=1e-4 * np.abs(ref).max())  # cond ~ 3, tol 1e-5
    assert rel <= 1e-5
    with use_backend("simulator"):
        assert "restart=200" in plan_call(trnsolver.gmres, At, bt, restart=200).reason
