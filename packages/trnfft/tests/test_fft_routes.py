"""trnfft's measured torch routes (trnfft._host): choice, plan == run, the SciPy route, the per-call cache.

Route choices are driven by stated times (``trnsci.routes.measure``
replaced), never by wall-clock races. Results are compared with NumPy's
FFT (float64 reference): normwise relative error <= 1e-12 for float64
data, <= 8 u32 log2 n for float32 (the bound of test_fft_transforms).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import trnfft
from trnfft import _chirp, _host
from trnfft.basic import FFT
from trnsci import routes

U32 = 6e-8


def rel(y, ref):
    y = y.numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
    assert y.shape == ref.shape, (y.shape, ref.shape)
    return np.abs(y - ref).max() / np.abs(ref).max()


@pytest.fixture
def measuring(tmp_path, monkeypatch):
    """Measure mode with a private calibration file and stated times: yields the dict of times to return."""
    monkeypatch.setenv("TRNSCI_CALIBRATION_FILE", str(tmp_path / "cal.json"))
    monkeypatch.setenv("TRNSCI_ROUTES", "measure")
    stated: dict[str, float] = {}
    timed: list[list[str]] = []

    def fake_measure(candidates, **kw):
        timed.append(sorted(candidates))
        for f in candidates.values():  # every candidate runs (the warm-up of the real measure)
            f()
        t = {k: stated[k] for k in candidates}
        return t, {k: 0.0 for k in candidates}, t

    monkeypatch.setattr(routes, "measure", fake_measure)
    routes.forget()
    yield stated, timed
    routes.forget()


@pytest.fixture
def chirp_calls(monkeypatch):
    calls = []
    inner = _chirp.c2c_last

    def counted(*args, **kwargs):
        calls.append(args[1])
        return inner(*args, **kwargs)

    monkeypatch.setattr(_chirp, "c2c_last", counted)
    return calls


def test_measured_choice_runs_and_plan_says_so(measuring, chirp_calls):
    stated, timed = measuring
    stated.update(torch=2e-3, bluestein=1e-3, scipy=3e-3)
    x = np.random.default_rng(0).standard_normal((16, 4099)) + 0j  # 65584 points: timed
    y = trnfft.fft(torch.from_numpy(x))
    assert timed == [["bluestein", "scipy", "torch"]]
    assert rel(y, np.fft.fft(x)) <= 1e-12
    n_warm = len(chirp_calls)  # the timing ran each candidate once
    trnfft.fft(torch.from_numpy(x))
    assert len(chirp_calls) == n_warm + 1 and timed == [["bluestein", "scipy", "torch"]]  # settled: not re-timed
    p = repr(trnfft.create_plan((16, 4099), dtype=torch.complex128))
    assert "Bluestein on torch.fft" in p and "route bluestein (measured: bluestein 1,000.0 us" in p


def test_near_tie_keeps_torch_and_small_problems_are_not_timed(measuring, chirp_calls):
    stated, timed = measuring
    stated.update(torch=1.0e-3, bluestein=0.95e-3, scipy=0.97e-3)  # within the 10 % margin
    trnfft.fft(torch.randn(16, 4099, dtype=torch.complex128))
    trnfft.fft(torch.randn(2, 4099, dtype=torch.complex128))  # 8198 points: below MEASURE_MIN_POINTS
    assert len(timed) == 1
    n_warm = len(chirp_calls)
    trnfft.fft(torch.randn(16, 4099, dtype=torch.complex128))
    assert len(chirp_calls) == n_warm  # torch.fft ran


def test_choice_persists_for_a_second_process(measuring, tmp_path):
    stated, timed = measuring
    stated.update(torch=2e-3, bluestein=3e-3, scipy=1e-3)
    x = torch.randn(8, 7919, dtype=torch.complex64)
    trnfft.ifft(x)
    routes.forget()  # as a new process: the choice comes from the file
    c = _host.choice_for("ifft", (8, 7919), torch.complex64, "cpu", (7919,), (1,), "backward")
    assert c.route == "scipy" and c.origin.startswith("calibration:") and len(timed) == 1


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_scipy_route_all_kinds(dtype):
    r = np.random.default_rng(3)
    cdt, rdt = (np.complex128, np.float64) if dtype == "float64" else (np.complex64, np.float32)
    x = (r.standard_normal((3, 1009)) + 1j * r.standard_normal((3, 1009))).astype(cdt)
    xr = r.standard_normal((3, 1009)).astype(rdt)
    x3 = (r.standard_normal((2, 5, 1009)) + 1j * r.standard_normal((2, 5, 1009))).astype(cdt)
    bound = 1e-12 if dtype == "float64" else 8 * U32 * math.log2(5 * 1009)
    T = torch.from_numpy
    with routes.force("scipy"):
        for norm in ("backward", "ortho", "forward"):
            assert rel(trnfft.fft(T(x), norm=norm), np.fft.fft(x, norm=norm)) <= bound
            assert rel(trnfft.ifft(T(x), 2000, dim=1, norm=norm), np.fft.ifft(x, 2000, norm=norm)) <= bound
            assert rel(trnfft.rfft(T(xr), norm=norm), np.fft.rfft(xr, norm=norm)) <= bound
            assert rel(trnfft.irfft(T(x), 1009, norm=norm), np.fft.irfft(x, 1009, norm=norm)) <= bound
            assert rel(trnfft.hfft(T(x), 1009, norm=norm), np.fft.hfft(x, 1009, norm=norm)) <= bound
            assert rel(trnfft.ihfft(T(xr), norm=norm), np.fft.ihfft(xr, norm=norm)) <= bound
            assert rel(trnfft.fftn(T(x3), dim=(0, 2), norm=norm), np.fft.fftn(x3, axes=(0, 2), norm=norm)) <= bound
            assert rel(trnfft.ifft2(T(x3), norm=norm), np.fft.ifft2(x3, norm=norm)) <= bound
            assert rel(trnfft.rfftn(T(x3.real.copy())), np.fft.rfftn(x3.real)) <= bound
            assert rel(trnfft.irfftn(T(x3), s=(5, 1009)), np.fft.irfftn(x3, s=(5, 1009), axes=(1, 2))) <= bound


def test_scipy_route_is_taken_and_steps_aside_for_autograd(monkeypatch):
    import scipy.fft as sf

    seen = []
    real_fft = sf.fft
    monkeypatch.setattr(sf, "fft", lambda *a, **k: seen.append(1) or real_fft(*a, **k))
    with routes.force("scipy"):
        x = torch.randn(1009, dtype=torch.complex128)
        trnfft.fft(x)
        assert seen == [1]
        xg = x.clone().requires_grad_()
        (trnfft.fft(xg).abs() ** 2).sum().backward()  # Parseval: gradient 2 n x
        assert torch.allclose(xg.grad, 2 * 1009 * x, rtol=1e-10, atol=1e-8) and seen == [1]
        assert trnfft.fft(x.conj()).shape == (1009,) and seen == [1]  # a conjugate view: torch


def test_settled_signature_never_admits_bad_arguments():
    x = torch.randn(4, 8)
    trnfft.fft(x, n=8)
    trnfft.fft(x, dim=1)
    trnfft.fftn(x, s=(4, 8))
    with pytest.raises(TypeError, match="n"):
        trnfft.fft(x, n=8.0)
    with pytest.raises(TypeError, match="dim"):
        trnfft.fft(x, dim=True)
    with pytest.raises(TypeError, match="s"):
        trnfft.fftn(x, s=(4.0, 8))
    with pytest.raises(ValueError, match="norm"):
        trnfft.fft(x, norm="Backward!")
    assert torch.allclose(trnfft.fftn(x, s=[4, 8]), torch.fft.fftn(x))  # a list: validated, not cached


def test_settled_routes_follow_precision_and_lowering_changes():
    x = torch.randn(64, dtype=torch.complex64)
    fast = trnfft.fft(x)
    ref64 = torch.fft.fft(x.to(torch.complex128)).to(torch.complex64)
    with trnfft.use_precision("double"):
        assert torch.equal(trnfft.fft(x), ref64)
    assert torch.equal(trnfft.fft(x), fast)
    calls = []
    with FFT.override("torch", lambda *a: calls.append(a) or torch.zeros(64, dtype=torch.complex64)):
        trnfft.fft(x)
    assert len(calls) == 1
    assert torch.equal(trnfft.fft(x), fast)


def test_choice_beside_torch_threads_is_robust(measuring, monkeypatch):
    """With more than one torch thread a candidate whose slowest round stalled longer than torch's is not
    taken even when its median and best round are faster; at one thread the same times choose it."""
    def stalling(candidates, **kw):
        for f in candidates.values():
            f()
        med = {k: (0.5e-3 if k == "scipy" else 1e-3) for k in candidates}
        best = {k: (0.4e-3 if k == "scipy" else 1e-3) for k in candidates}
        spread = {k: (4.0 if k == "scipy" else 0.0) for k in candidates}  # scipy's slowest round: 2.4 ms
        return med, spread, best

    monkeypatch.setattr(routes, "measure", stalling)
    x = np.random.default_rng(1).standard_normal((16, 4096)) + 0j
    n = torch.get_num_threads()
    try:
        for threads, route in ((2, "torch"), (1, "scipy")):
            torch.set_num_threads(threads)
            y = trnfft.fft(torch.from_numpy(x))
            assert rel(y, np.fft.fft(x)) <= 1e-12
            c = _host.choice_for("fft", (16, 4096), torch.complex128, "cpu", (4096,), (1,), "backward")
            assert c.route == route, (threads, c)
    finally:
        torch.set_num_threads(n)
