"""The torch path's Bluestein route (trnfft._chirp), forced, against scipy.fft.

Lengths here have a prime factor >= MIN_PRIME (4001, 4099, 2 * 4099), so
Bluestein is a candidate route; under ``trnsci.routes.force("bluestein")``
every call below must take it (the n-D real transforms: along odd real
axes) -- checked by counting the calls of the route's core. Which route
runs unforced is measured (test_fft_routes). Error measure and bounds as in test_fft_transforms:
normwise relative error, float64 <= 1e-12, float32 <= 8 u32 log2 n
(Bluestein's error is that of its length-m FFTs, m < 4n; measured 2e-7 to
3.5e-7 at these sizes).
"""

import math

import numpy as np
import pytest
import scipy.fft as sf
import torch

import trnfft
from trnfft import _chirp
from trnsci import routes

U32 = 6e-8


def rel(y, ref):
    y = y.numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
    assert y.shape == ref.shape, (y.shape, ref.shape)
    return np.abs(y - ref).max() / np.abs(ref).max()


@pytest.fixture
def chirp_calls(monkeypatch):
    calls = []
    inner = _chirp.c2c_last

    def counted(*args, **kwargs):
        calls.append(args[1])
        return inner(*args, **kwargs)

    monkeypatch.setattr(_chirp, "c2c_last", counted)
    with routes.force("bluestein"):
        yield calls


def test_candidate_length_rule():
    assert _chirp.MIN_PRIME == 1000
    assert [_chirp.slow(n) for n in (997, 3001, 4096, 4099, 2 * 4099, 3 * 1009, 7 * 997, 2**20, 65537, 0, -4)] == \
        [False, True, False, True, True, True, False, False, True, False, False]
    assert [_chirp.slow_real(n) for n in (4099, 2 * 4099, 3 * 4099, 4096)] == [True, False, True, False]
    # the convolution length: >= 2n - 1, 7-smooth, at least three factors of 2
    for n in (4001, 4099, 65537):
        m = _chirp._smooth_length(2 * n - 1)
        k = m
        for p in (2, 3, 5, 7):
            while k % p == 0:
                k //= p
        assert m >= 2 * n - 1 and k == 1 and m % 8 == 0 and m <= 1 << (2 * n - 2).bit_length()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("n", [4001, 4099, 2 * 4099])
def test_1d_functions_all_norms(n, dtype, chirp_calls):
    r = np.random.default_rng(n)
    x = (r.standard_normal((2, n)) + 1j * r.standard_normal((2, n))).astype(np.complex128)
    xr = r.standard_normal((2, n))
    h = sf.rfft(xr)
    h[:, 0] += 3j  # NumPy ignores the imaginary parts of X[0] and X[n/2] in irfft
    if n % 2 == 0:
        h[:, -1] -= 2j
    bound = 1e-12 if dtype == "float64" else 8 * U32 * math.log2(n)
    cdt = np.complex128 if dtype == "float64" else np.complex64
    rdt = np.float64 if dtype == "float64" else np.float32
    t = lambda a, d: torch.from_numpy(a.astype(d))  # noqa: E731
    for norm in (None, "backward", "ortho", "forward"):
        assert rel(trnfft.fft(t(x, cdt), norm=norm), sf.fft(x, norm=norm)) <= bound
        assert rel(trnfft.ifft(t(x, cdt), norm=norm), sf.ifft(x, norm=norm)) <= bound
        assert rel(trnfft.rfft(t(xr, rdt), norm=norm), sf.rfft(xr, norm=norm)) <= bound
        assert rel(trnfft.ihfft(t(xr, rdt), norm=norm), sf.ihfft(xr, norm=norm)) <= bound
        assert rel(trnfft.irfft(t(h, cdt), n, norm=norm), sf.irfft(h, n, norm=norm)) <= bound
        assert rel(trnfft.hfft(t(h, cdt), n, norm=norm), sf.hfft(h, n, norm=norm)) <= bound
    assert len(chirp_calls) == 4 * 6 and set(chirp_calls) == {n}


def test_default_calls_dims_padding_and_numpy_input(chirp_calls):
    r = np.random.default_rng(1)
    x = r.standard_normal((4099, 3)) + 1j * r.standard_normal((4099, 3))
    assert rel(trnfft.fft(torch.from_numpy(x), dim=0), sf.fft(x, axis=0)) <= 1e-12
    assert rel(trnfft.fft(x, axis=0), sf.fft(x, axis=0)) <= 1e-12  # NumPy in, NumPy out
    y = r.standard_normal((3, 4000)) + 1j * r.standard_normal((3, 4000))
    assert rel(trnfft.fft(torch.from_numpy(y), n=4099), sf.fft(y, n=4099)) <= 1e-12  # zero-padded
    assert rel(trnfft.fft(torch.from_numpy(x.T.copy()), n=4001), sf.fft(x.T, n=4001)) <= 1e-12  # cropped
    xr = r.standard_normal((2, 4099))
    assert rel(trnfft.rfft(torch.from_numpy(xr)), sf.rfft(xr)) <= 1e-12  # the inlined default call
    h = sf.rfft(r.standard_normal((2, 2 * 4099)))
    assert rel(trnfft.irfft(torch.from_numpy(h)), sf.irfft(h)) <= 1e-12  # default n = 2 (m - 1) = 2 * 4099
    assert rel(trnfft.irfft(torch.from_numpy(h), 4099), sf.irfft(h, 4099)) <= 1e-12
    assert len(chirp_calls) == 7


@pytest.mark.parametrize("name", ["fftn", "ifftn", "fft2", "ifft2", "rfftn", "irfftn", "rfft2", "irfft2"])
def test_nd_with_a_slow_axis(name, chirp_calls):
    r = np.random.default_rng(2)
    real_in = name.startswith("rfft")
    shape = (3, 4001, 4)
    x = r.standard_normal(shape) if real_in else r.standard_normal(shape) + 1j * r.standard_normal(shape)
    fn, ref = getattr(trnfft, name), getattr(sf, name)
    for kw in ({"axes": (1, 2)}, {"axes": (2, 1)}, {"s": (4001, 6), "axes": (1, 2)}):
        if name.endswith("2") and kw.get("axes") == (2, 1):
            continue
        tk = {("dim" if k == "axes" else k): v for k, v in kw.items()}
        assert rel(fn(torch.from_numpy(x), **tk, norm="ortho"), ref(x, **kw, norm="ortho")) <= 1e-12, kw
    assert set(chirp_calls) == {4001}  # the 4001 axis went through Bluestein


def test_autograd_through_the_route(chirp_calls):
    x = torch.randn(4001, dtype=torch.complex128, requires_grad=True)
    y = trnfft.fft(x)
    assert chirp_calls == [4001]
    (y.abs() ** 2).sum().backward()
    # Parseval: sum |X|^2 = n sum |x|^2, so the gradient is 2 n x
    assert torch.allclose(x.grad, 2 * 4001 * x.detach(), rtol=1e-10, atol=1e-8)


def test_plan_says_which_route_computes():
    with trnfft.use_backend("torch"), routes.force("bluestein"):
        assert "Bluestein on torch.fft" in repr(trnfft.create_plan((2, 4099)))
        assert "Bluestein on torch.fft" in repr(trnfft.create_plan((2, 4099), kind="rfft"))
        assert "computed by torch.fft" in repr(trnfft.create_plan((2, 4096)))  # not a candidate there
    with trnfft.use_backend("torch"):  # the suite runs with TRNSCI_ROUTES=estimate: torch.fft untimed
        assert "computed by torch.fft" in repr(trnfft.create_plan((2, 4099)))
