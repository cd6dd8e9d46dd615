"""The measured host routes of trnblas's torch lowerings (trnblas._host): NumPy's matmul and SciPy's
?gemm for GEMM, SciPy's ?syrk for SYRK, forced with trnsci.routes.force, against float64 NumPy references.

Tolerances: float64 results within 1e-12 relative to the largest |entry| of the reference (k <= 40 terms,
each rounding 2^-53); float32 within 2e-5 (k terms of 2^-24 relative rounding, k <= 40: k 2^-24 = 2.4e-6,
with a factor 8 of headroom for differently blocked accumulations).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trnblas
from trnblas import _host
from trnsci import hostblas, routes

TOL = {torch.float32: 2e-5, torch.float64: 1e-12}


def _close(R, ref, dtype):
    R = np.asarray(R, dtype=np.float64)
    scale = max(1.0, float(np.abs(ref).max()))
    assert np.abs(R - ref).max() <= TOL[dtype] * scale


def _rand(g, *shape, dtype):
    return torch.randn(*shape, generator=g, dtype=dtype)


@pytest.mark.parametrize("route", ["numpy", "scipy"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("transA,transB", [(False, False), (True, False), (False, True), (True, True)])
def test_gemm_host_routes_match_numpy_float64(route, dtype, transA, transB):
    g = torch.Generator().manual_seed(3)
    m, n, k = 37, 29, 41  # ragged
    A = _rand(g, *((k, m) if transA else (m, k)), dtype=dtype)
    B = _rand(g, *((n, k) if transB else (k, n)), dtype=dtype)
    C = _rand(g, m, n, dtype=dtype)
    a = A.numpy().astype(np.float64)
    b = B.numpy().astype(np.float64)
    ref = (a.T if transA else a) @ (b.T if transB else b)
    with routes.force(route):
        assert _host.gemm_route(A.mT if transA else A, B.mT if transB else B) == route
        R = trnblas.gemm(0.5, A, B, transA=transA, transB=transB)  # alpha: in BLAS (scipy) or after (numpy)
        R2 = trnblas.gemm(1.0, A, B, 2.0, C, transA=transA, transB=transB)  # with C: torch's addmm
    assert R.dtype == dtype and R.shape == (m, n) and R.is_contiguous()
    _close(R, 0.5 * ref, dtype)
    _close(R2, ref + 2.0 * C.numpy().astype(np.float64), dtype)


def test_gemm_host_routes_only_for_plain_cpu_real_tensors():
    A = torch.randn(5, 4, requires_grad=True)
    B = torch.randn(4, 3)
    with routes.force("numpy"):
        assert _host.gemm_route(A, B) == "torch"  # autograd stays on torch
        R = trnblas.gemm(1.0, A, B)
        assert R.requires_grad
        Z = torch.ones(3, 3, dtype=torch.complex64)
        assert _host.gemm_route(Z, Z) == "torch"
        assert _host.gemm_route(torch.ones(3, 3)._neg_view(), torch.ones(3, 3)) == "torch"
        assert _host.gemm_route(A.detach(), B) == "numpy"
    np.testing.assert_allclose(R.detach().numpy(), A.detach().numpy().astype(np.float64) @ B.numpy(), rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("uplo", ["upper", "lower"])
def test_syrk_blas_route_matches_numpy_float64(dtype, trans, uplo):
    g = torch.Generator().manual_seed(5)
    n, k = 33, 19  # ragged
    A = _rand(g, *((k, n) if trans else (n, k)), dtype=dtype)
    C = _rand(g, n, n, dtype=dtype)
    a = A.numpy().astype(np.float64)
    P = a.T @ a if trans else a @ a.T
    c = C.numpy().astype(np.float64)
    tri = np.triu if uplo == "upper" else np.tril
    other = (lambda X: np.tril(X, -1)) if uplo == "upper" else (lambda X: np.triu(X, 1))
    C0 = C.clone()
    with routes.force("blas"):
        assert _host.syrk_uses_blas(A.mT if trans else A, None, uplo == "upper", lambda: None)
        Rt = trnblas.syrk(0.75, A, trans=trans, uplo=uplo, fill="triangle")
        Rc = trnblas.syrk(0.75, A, 0.5, C, trans=trans, uplo=uplo)  # BLAS: C's other triangle kept
        Rz = trnblas.syrk(0.75, A, 0.0, C, trans=trans, uplo=uplo)  # beta = 0: C's triangle unread
        Rf = trnblas.syrk(0.75, A, trans=trans, uplo=uplo)  # fill=None without C: the whole matrix
    assert torch.equal(C, C0)  # C not modified
    for R in (Rt, Rc, Rz, Rf):
        assert R.dtype == dtype and R.shape == (n, n) and R.is_contiguous()
    _close(Rt, tri(0.75 * P), dtype)
    assert not np.any(other(Rt.numpy()))
    _close(Rc, tri(0.75 * P + 0.5 * c) + other(c), dtype)
    _close(Rz, tri(0.75 * P) + other(c), dtype)
    _close(Rf, 0.75 * P, dtype)
    assert torch.equal(Rf, Rf.mT)


def test_host_routes_on_a_strided_view_and_estimate_mode_keeps_torch():
    g = torch.Generator().manual_seed(6)
    A = _rand(g, 40, 30, dtype=torch.float64)[::2, 1:]  # neither C- nor F-contiguous
    ref = A.numpy() @ A.numpy().T
    with routes.force("blas"):
        R = trnblas.syrk(1.0, A, fill="triangle")
    _close(R, np.triu(ref), torch.float64)
    with routes.force("scipy"):  # ?gemm on a strided operand: the wrapper copies, the answer holds
        _close(trnblas.gemm(2.0, A, A, transB=True), 2.0 * ref, torch.float64)
    with routes.mode("estimate"):
        assert not _host.syrk_uses_blas(A, None, True, lambda: None)
        assert _host.gemm_route(A, A.mT) == "torch"


def test_measured_choice_is_made_once_and_cleared_with_the_routes(monkeypatch):
    calls = []
    real = routes.choose

    def spy(family, cls, cands, **kw):
        calls.append((family, cls))
        return routes.Choice("k", "numpy", "measured", {"torch": 2.0, "numpy": 1.0}, {}, "torch")

    monkeypatch.setattr(routes, "choose", spy)
    _host.clear()
    A, B = torch.randn(20, 12), torch.randn(12, 9)
    for _ in range(3):
        R = trnblas.gemm(1.0, A, B)
    assert calls == [("trnblas.gemm", ("float32", 32, 16, 16))]
    np.testing.assert_allclose(R.numpy(), A.numpy().astype(np.float64) @ B.numpy(), rtol=1e-5, atol=1e-5)
    routes.forget()  # a cache never outlives what it caches
    monkeypatch.setattr(routes, "choose", real)
    assert _host.gemm_route(A, B) == "torch"  # estimate mode (the suite): torch


@pytest.mark.parametrize("uplo", ["upper", "lower"])
def test_syr2k_whole_matrix_comes_from_the_lowering_exactly_symmetric(uplo):
    """fill=None without C (the whole matrix) skips every triangle pass on torch: P + P^T is already
    symmetric; with C and fill="full" the uplo triangle of alpha (P + P^T) + beta C is mirrored."""
    g = torch.Generator().manual_seed(8)
    n, k = 45, 17
    f64 = torch.float64
    A, B, C = _rand(g, n, k, dtype=f64), _rand(g, n, k, dtype=f64), _rand(g, n, n, dtype=f64)
    a, b, c = A.numpy(), B.numpy(), C.numpy()
    S = a @ b.T + b @ a.T
    R = trnblas.syr2k(1.5, A, B, uplo=uplo)
    _close(R, 1.5 * S, torch.float64)
    assert torch.equal(R, R.mT)
    Rf = trnblas.syr2k(1.5, A, B, 0.5, C, uplo=uplo, fill="full")
    tri = np.triu if uplo == "upper" else np.tril
    T = tri(1.5 * S + 0.5 * c)
    _close(Rf, T + T.T - np.diag(np.diag(T)), torch.float64)
    assert torch.equal(Rf, Rf.mT)


def test_settled_gemm_calls_keep_the_host_route_and_lose_it_with_the_choice(monkeypatch):
    """A settled gemm goes straight to torch.mm only where the host route is torch; a route change
    (force/forget/mode) drops the settled routes."""
    ran = []
    real = _host.gemm_host
    monkeypatch.setattr(_host, "gemm_host", lambda *a: ran.append(a[0]) or real(*a))
    A, B = torch.randn(9, 7), torch.randn(7, 5)
    ref = A.numpy().astype(np.float64) @ B.numpy()
    with routes.force("scipy"):
        for _ in range(3):  # the first call settles, the next two take the settled route
            _close(trnblas.gemm(1.0, A, B), ref, torch.float32)
    assert ran == ["scipy"] * 3
    for _ in range(2):  # estimate mode again (the force block dropped the routes): torch
        _close(trnblas.gemm(1.0, A, B), ref, torch.float32)
    assert ran == ["scipy"] * 3
    B2 = torch.randn(7, 6)  # a new signature, settled on torch.mm (estimate mode)
    ref2 = A.numpy().astype(np.float64) @ B2.numpy()
    for _ in range(2):
        _close(trnblas.gemm(1.0, A, B2), ref2, torch.float32)
    with routes.force("numpy"):  # the settled torch.mm route must not outlive the choice it embodied
        _close(trnblas.gemm(1.0, A, B2), ref2, torch.float32)
    assert ran == ["scipy"] * 3 + ["numpy"]


def test_routes_are_timed_in_cpu_time_only_when_every_candidate_runs_on_the_calling_thread(monkeypatch):
    import time

    assert _host.clock(1, 64 ** 3) is time.thread_time  # below OpenBLAS's threading threshold
    assert _host.clock(2, 64 ** 3) is time.perf_counter  # torch's own threads: wall time
    monkeypatch.setattr(hostblas, "OPENBLAS_ONE", False)
    assert _host.clock(1, 256 ** 3) is time.perf_counter  # OpenBLAS may use helper threads
    # helper threads (either library's) may stall at a barrier under load: the choice compares slowest rounds
    assert _host._robust(_host.clock(1, 256 ** 3)) and _host._robust(_host.clock(2, 64 ** 3))
    assert not _host._robust(_host.clock(1, 64 ** 3))
    monkeypatch.setattr(hostblas, "OPENBLAS_ONE", True)
    assert _host.clock(1, 256 ** 3) is time.thread_time
    for var, value, one in (("OPENBLAS_NUM_THREADS", "1", True), ("OPENBLAS_NUM_THREADS", "2", False)):
        monkeypatch.setenv(var, value)
        assert hostblas.openblas_one_thread() is one


def test_host_routes_and_their_timed_candidates_run_through_hostblas(monkeypatch):
    """Every call into NumPy's/SciPy's BLAS goes through trnsci.hostblas.call (OpenBLAS held at one
    thread beside torch's threads), the candidates routes.choose times included; a 2-thread class above
    OpenBLAS's threading threshold is a measured candidate too (its host route runs single-threaded)."""
    from trnsci import hostblas

    through = []
    real_call = hostblas.call

    def spy_call(fn, *args, **kw):
        through.append(getattr(fn, "__name__", repr(fn)))
        return real_call(fn, *args, **kw)

    monkeypatch.setattr(hostblas, "call", spy_call)
    g = torch.Generator().manual_seed(21)
    A, B = _rand(g, 30, 20, dtype=torch.float64), _rand(g, 20, 10, dtype=torch.float64)
    ref = A.numpy() @ B.numpy()
    for route in ("numpy", "scipy"):
        through.clear()
        _close(_host.gemm_host(route, 1.0, A, B), ref, torch.float64)
        assert len(through) == 1
    through.clear()
    R = _host.syrk_blas(1.0, A, 0.0, None, True)
    _close(np.triu(R.numpy()), np.triu(A.numpy() @ A.numpy().T), torch.float64)
    assert len(through) == 1

    timed = {}

    def spy_choose(family, cls, cands, **kw):
        for name, thunk in cands.items():  # run every candidate once, as the timing would
            through.clear()
            thunk()
            timed[name] = len(through)
        return routes.Choice("k", "torch", "measured", {}, {}, "torch")

    monkeypatch.setattr(routes, "choose", spy_choose)
    monkeypatch.setattr(_host, "_threads", lambda: 2)
    _host.clear()
    big = _rand(g, 128, 128, dtype=torch.float64)  # 128^3 = 2^21 > OpenBLAS's one-thread threshold
    assert _host.gemm_route(big, big) == "torch"
    assert timed == {"torch": 0, "numpy": 1, "scipy": 1}
    _host.clear()
