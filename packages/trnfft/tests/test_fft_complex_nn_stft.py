"""ComplexTensor vs NumPy complex arithmetic, nn layers (gradcheck, whitening), stft/istft vs
an independent NumPy framing reference and vs torch.stft/istft.

Tolerances: float64 throughout; 1e-12 relative for O(1) data (a few
roundings of short sums), gradcheck's defaults (finite differences in float64).
"""

import numpy as np
import pytest
import scipy.signal
import torch

import trnfft
from trnfft import ComplexTensor
from trnfft import nn as cnn


def z(shape, seed=0):
    r = np.random.default_rng(seed)
    return r.standard_normal(shape) + 1j * r.standard_normal(shape)


def ct(a):
    return ComplexTensor(torch.from_numpy(a.real.copy()), torch.from_numpy(a.imag.copy()))


def close(c, ref, tol=1e-12):
    got = c.to_torch().numpy() if isinstance(c, ComplexTensor) else np.asarray(c)
    return np.allclose(got, ref, rtol=tol, atol=tol * np.abs(ref).max())


def test_complex_tensor_arithmetic_against_numpy():
    a, b = z((3, 4), 1), z((3, 4), 2)
    A, B = ct(a), ct(b)
    assert close(A + B, a + b) and close(A - B, a - b) and close(A * B, a * b) and close(A / B, a / b)
    assert close(-A, -a) and close(A.conj(), a.conj())
    assert close(A * 2.5, a * 2.5) and close(2.5 - A, 2.5 - a) and close(A + (1 + 2j), a + (1 + 2j))
    assert close(1 / A, 1 / a) and close(A * torch.from_numpy(b.real), a * b.real)
    assert np.allclose(A.abs().numpy(), np.abs(a)) and np.allclose(A.angle().numpy(), np.angle(a))
    assert close(A[1:, ::2], a[1:, ::2]) and close(A.reshape(4, 3), a.reshape(4, 3))
    assert close(A.transpose(0, 1), a.T) and close(A.unsqueeze(0).squeeze(0), a)
    m = z((4, 5), 3)
    assert close(A @ ct(m), a @ m) and close(trnfft.complex_matmul(A, torch.from_numpy(m.real)), a @ m.real)
    assert close(trnfft.complex_matmul(torch.from_numpy(a), torch.from_numpy(m)), a @ m)
    assert close(ComplexTensor.from_torch(torch.from_numpy(a)), a) and close(ComplexTensor(torch.from_numpy(a)), a)
    C = A.clone()
    C[0] = ct(b)[0]
    assert close(C[0], b[0]) and close(A, a)  # clone is independent
    assert A.shape == (3, 4) and A.dtype == torch.float64 and "ComplexTensor" in repr(A)
    big = ComplexTensor(torch.tensor([3e200], dtype=torch.float64), torch.tensor([4e200], dtype=torch.float64))
    assert torch.isfinite(big.abs()).all()  # hypot: no overflow


def test_complex_tensor_bad_input():
    with pytest.raises(ValueError, match="shape"):
        ComplexTensor(torch.zeros(2), torch.zeros(3))
    with pytest.raises(TypeError, match="dtype"):
        ComplexTensor(torch.zeros(2), torch.zeros(2, dtype=torch.float64))
    with pytest.raises(TypeError, match="real"):
        ComplexTensor(torch.zeros(2, dtype=torch.int64))
    with pytest.raises(TypeError):
        ComplexTensor("abc")
    with pytest.raises(ValueError, match="multiply"):
        trnfft.complex_matmul(ct(z((2, 3))), ct(z((2, 3))))


def test_nn_layers_against_complex_reference_and_gradcheck():
    torch.manual_seed(0)
    lin = cnn.ComplexLinear(4, 3).double()
    x = torch.from_numpy(z((5, 4), 4))
    W = (lin.weight_real + 1j * lin.weight_imag).detach().numpy()
    b = (lin.bias_real + 1j * lin.bias_imag).detach().numpy()
    with torch.no_grad():
        lin.bias_real.normal_()
        lin.bias_imag.normal_()
    b = (lin.bias_real + 1j * lin.bias_imag).detach().numpy()
    assert np.allclose(lin(x).detach().numpy(), x.numpy() @ W.T + b)
    assert isinstance(lin(ct(x.numpy())), ComplexTensor)
    conv = cnn.ComplexConv1d(2, 3, 3, padding=1).double()
    xc = torch.from_numpy(z((2, 2, 9), 5))
    Wc = (conv.weight_real + 1j * conv.weight_imag).detach().numpy()
    ref = np.zeros((2, 3, 9), complex)
    xp = np.pad(xc.numpy(), ((0, 0), (0, 0), (1, 1)))
    for o in range(3):
        for t in range(9):
            ref[:, o, t] = (xp[:, :, t:t + 3] * Wc[o]).sum((1, 2))
    assert np.allclose(conv(xc).detach().numpy(), ref)
    act = cnn.ComplexModReLU(2).double()
    with torch.no_grad():
        act.bias.copy_(torch.tensor([-1.0, 0.5]))
    v = torch.tensor([[0.5 + 0j, 3 + 4j]], dtype=torch.complex128)
    out = act(v).detach().numpy()
    assert np.allclose(out, [[0, (5.5 / 5) * (3 + 4j)]])
    bn = cnn.ComplexBatchNorm1d(3).double()
    cases = ((lin, x), (conv, xc), (act, torch.from_numpy(z((4, 2, 3), 6))), (bn, torch.from_numpy(z((6, 3), 7))))
    for layer, inp in cases:
        inp = inp.clone().requires_grad_()
        assert torch.autograd.gradcheck(lambda t: layer(t), (inp,)), type(layer).__name__  # noqa: B023
        params = [p for p in layer.parameters()]
        assert torch.autograd.gradcheck(lambda *ps: layer(inp.detach()).abs().sum(), tuple(params))  # noqa: B023


def test_complex_batchnorm_whitens():
    torch.manual_seed(1)
    bn = cnn.ComplexBatchNorm1d(2, affine=False).double()
    r = np.random.default_rng(8)
    a = r.standard_normal((4000, 2))
    b = r.standard_normal((4000, 2))
    x = torch.from_numpy((3 * a + 1.0) + 1j * (a + 0.5 * b - 2.0))  # correlated real/imag
    y = bn(x).detach().numpy()
    for c in range(2):
        cov = np.cov(np.stack((y[:, c].real, y[:, c].imag)), bias=True)
        assert np.allclose(cov, np.eye(2), atol=1e-3) and abs(y[:, c].mean()) < 1e-12
    bn.eval()
    y2 = bn(x).detach().numpy()  # running stats after one step: momentum 0.1 towards batch stats
    assert np.isfinite(y2).all()


def _stft_ref(x, n_fft, hop, win, center):
    """Independent framing + numpy.fft (no torch)."""
    if center:
        x = np.pad(x, n_fft // 2, mode="reflect")
    nfr = 1 + (len(x) - n_fft) // hop
    frames = np.stack([x[t * hop:t * hop + n_fft] * win for t in range(nfr)])
    return np.fft.rfft(frames, axis=-1).T


@pytest.mark.parametrize("n_fft,hop,wl,center", [(16, 4, 16, True), (32, 8, 20, True), (15, 5, 15, False)])
def test_stft_against_numpy_reference_and_istft_round_trip(n_fft, hop, wl, center):
    r = np.random.default_rng(n_fft)
    x = r.standard_normal(200)
    w = scipy.signal.get_window("hann", wl, fftbins=True)
    wpad = np.zeros(n_fft)
    wpad[(n_fft - wl) // 2:(n_fft - wl) // 2 + wl] = w
    S = trnfft.stft(torch.from_numpy(x), n_fft, hop, wl, torch.from_numpy(w), center=center)
    ref = _stft_ref(x, n_fft, hop, wpad, center)
    assert S.shape == ref.shape and np.allclose(S.numpy(), ref, rtol=1e-12, atol=1e-12)
    Sn = trnfft.stft(x, n_fft, hop, wl, w, center=center)
    assert isinstance(Sn, np.ndarray) and np.allclose(Sn, ref, atol=1e-12)
    tw = torch.from_numpy(w)
    assert torch.allclose(S, torch.stft(torch.from_numpy(x), n_fft, hop, wl, tw, center, return_complex=True))
    if center:
        y = trnfft.istft(S, n_fft, hop, wl, tw, length=200)
        assert torch.allclose(y, torch.from_numpy(x), atol=1e-12)
        y2 = torch.istft(S, n_fft, hop, wl, tw, length=200)
        assert torch.allclose(y, y2, atol=1e-14)
    Sc = trnfft.stft(ct(np.stack((x, x)) + 0j), n_fft, hop, wl, tw, center=center, onesided=False)
    assert isinstance(Sc, ComplexTensor) and Sc.shape == (2, n_fft, ref.shape[1])


@pytest.mark.parametrize("n_fft,hop", [(64, 32), (50, 20)])
def test_stft_default_window_is_hann_as_scipy_and_published(n_fft, hop):
    """Issue 25: window=None is the periodic Hann window (published trnfft, scipy.signal.stft).

    scipy's ``scaling='spectrum'`` divides by sum(window) and, with
    ``boundary='zeros'``, pads n_fft // 2 zeros each side: our
    ``center=True, pad_mode='constant'`` frames. float64, so 1e-12.
    """
    x = np.random.default_rng(n_fft).standard_normal(333)
    S = trnfft.stft(x, n_fft=n_fft, hop_length=hop, pad_mode="constant")
    w = scipy.signal.get_window("hann", n_fft)
    _, _, Z = scipy.signal.stft(x, window="hann", nperseg=n_fft, noverlap=n_fft - hop, boundary="zeros",
                                padded=False, scaling="spectrum")
    Z = Z * w.sum()
    assert S.shape == Z.shape
    np.testing.assert_allclose(S, Z, rtol=1e-12, atol=1e-12)
    # the name, and the round trip with istft's matching default (what the published quickstart does)
    np.testing.assert_allclose(trnfft.stft(x, n_fft, hop, window="hann", pad_mode="constant"), S, atol=0)
    y = trnfft.istft(trnfft.stft(x, n_fft, hop), n_fft, hop, length=333)
    np.testing.assert_allclose(y, x, atol=1e-12)
    # torch's rectangular default stays one argument away
    R = trnfft.stft(torch.from_numpy(x), n_fft, hop, window="boxcar")
    ref = torch.stft(torch.from_numpy(x), n_fft, hop, window=torch.ones(n_fft, dtype=torch.float64),
                     return_complex=True)
    assert torch.allclose(R, ref, atol=1e-12)
    with pytest.raises(ValueError, match="window must be a tensor or one of"):
        trnfft.stft(x, n_fft, window="kaiser-ish")


def test_stft_bad_input():
    x = torch.randn(100)
    with pytest.raises(ValueError, match="win_length"):
        trnfft.stft(x, 16, 4, 32)
    with pytest.raises(ValueError, match="n_fft"):
        trnfft.stft(x, 0)
    with pytest.raises(ValueError, match="reflect"):
        trnfft.stft(torch.randn(5), 16)
    with pytest.raises(ValueError, match="window"):
        trnfft.stft(x, 16, 4, window=torch.ones(8))
    with pytest.raises(ValueError, match="pad_mode"):
        trnfft.stft(x, 16, pad_mode="mirror")
    with pytest.raises(ValueError, match="onesided"):
        trnfft.stft(x + 0j, 16, onesided=True)
    with pytest.raises(TypeError, match="complex"):
        trnfft.istft(x.reshape(10, 10), 18)
    with pytest.raises(ValueError, match="bins"):
        trnfft.istft(torch.zeros(10, 10, dtype=torch.complex64), 16)
    with pytest.raises(ValueError):  # NOLA violated: a window of zeros
        trnfft.istft(torch.ones(9, 5, dtype=torch.complex64), 16, 4, window=torch.zeros(16))


def test_stft_settled_route_reads_the_window_on_every_call():
    """The second call of a signature runs the settled torch route (no checks): it must still use the
    window the caller passes now, build a named window once, and key bool flags apart from ints."""
    import sys

    import numpy as np
    import pytest
    import torch

    import trnfft

    S = sys.modules["trnfft.stft"]
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 200))
    n, hop = 32, 8

    def ref(w):  # frames times window, NumPy's rfft; (B, freq, frames)
        fr = np.lib.stride_tricks.sliding_window_view(x, n, axis=-1)[:, ::hop, :] * w
        return np.fft.rfft(fr, axis=-1).transpose(0, 2, 1)

    S.STFT.settled.clear()
    xt = torch.from_numpy(x)
    for _ in range(2):  # the same signature: validated and settled, then the settled route
        w = rng.standard_normal(n)
        got = trnfft.stft(xt, n, hop, window=torch.from_numpy(w), center=False)
        np.testing.assert_allclose(got.numpy(), ref(w), rtol=1e-12, atol=1e-12)  # float64: rounding only
    assert len(S.STFT.settled.get(trnfft.stft, {})) == 1
    hann = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n) / n)  # periodic Hann
    for _ in range(2):
        np.testing.assert_allclose(trnfft.stft(xt, n, hop, center=False).numpy(), ref(hann), rtol=1e-12, atol=1e-12)
    assert len(S.STFT.settled.get(trnfft.stft, {})) == 2
    with pytest.raises(TypeError, match="center"):  # center=0 is not center=False's settled route
        trnfft.stft(xt, n, hop, center=0)
