"""Module paths and parameter names of the published trnsci packages stay importable (thin aliases)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch

import trnsci

LIBRARIES = ("trnblas", "trnfft", "trnsparse", "trnsolver", "trnrand", "trntensor")


@pytest.mark.parametrize("lib", LIBRARIES)
@pytest.mark.parametrize("path", ["nki", "nki.dispatch"])
def test_backend_switches_at_the_published_path(lib, path):
    mod = importlib.import_module(f"{lib}.{path}")
    top = importlib.import_module(lib)
    assert mod.HAS_NKI is trnsci.nki.HAS_NKI
    assert mod.set_backend is top.set_backend and mod.get_backend is top.get_backend
    mod.set_backend("pytorch")  # the published spelling
    try:
        assert top.get_backend() == "torch"
    finally:
        top.set_backend("auto")


def test_trnfft_nki_complex_helpers_against_numpy():
    from trnfft import ComplexTensor
    from trnfft.nki import complex_gemm, complex_linear, complex_mask_apply

    g = np.random.default_rng(3)
    a = g.standard_normal((5, 4)) + 1j * g.standard_normal((5, 4))
    b = g.standard_normal((4, 3)) + 1j * g.standard_normal((4, 3))
    m = g.standard_normal((5, 4)) + 1j * g.standard_normal((5, 4))

    def ct(z):
        return ComplexTensor(torch.from_numpy(z.real.copy()), torch.from_numpy(z.imag.copy()))

    def back(c):
        return c.real.numpy() + 1j * c.imag.numpy()

    np.testing.assert_allclose(back(complex_gemm(ct(a), ct(b))), a @ b, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(back(complex_mask_apply(ct(m), ct(a))), m * a, rtol=1e-12, atol=1e-12)
    w = b.T  # (out=3, in=4)
    got = complex_linear(ct(a), torch.from_numpy(w.real.copy()), torch.from_numpy(w.imag.copy()))
    np.testing.assert_allclose(back(got), a @ w.T, rtol=1e-12, atol=1e-12)


def test_complex_linear_loads_a_published_checkpoint():
    """A state dict with the published names (W_re.weight, bias_re, ...) loads; y = W x + b as NumPy computes it."""
    from trnfft.nn import ComplexLinear

    g = np.random.default_rng(5)
    wr, wi = g.standard_normal((3, 4)), g.standard_normal((3, 4))
    br, bi = g.standard_normal(3), g.standard_normal(3)
    published = {"W_re.weight": wr, "W_im.weight": wi, "bias_re": br, "bias_im": bi}
    layer = ComplexLinear(4, 3).double()
    layer.load_state_dict({k: torch.from_numpy(v) for k, v in published.items()})
    assert layer.W_re.weight is layer.weight_real and layer.bias_im is layer.bias_imag
    x = g.standard_normal((2, 4)) + 1j * g.standard_normal((2, 4))
    with torch.no_grad():
        y = layer(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(y, x @ (wr + 1j * wi).T + (br + 1j * bi), rtol=1e-12, atol=1e-12)
    # the present names still load, and a wrong key is still an error
    layer.load_state_dict(layer.state_dict())
    with pytest.raises(RuntimeError, match="W_rx"):
        layer.load_state_dict({"W_rx.weight": torch.zeros(3, 4)})


def test_complex_conv1d_loads_a_published_checkpoint():
    from trnfft.nn import ComplexConv1d

    g = np.random.default_rng(6)
    wr, wi = g.standard_normal((2, 1, 3)), g.standard_normal((2, 1, 3))
    conv = ComplexConv1d(1, 2, 3, bias=False).double()
    conv.load_state_dict({"conv_re.weight": torch.from_numpy(wr), "conv_im.weight": torch.from_numpy(wi)})
    assert conv.conv_im.weight is conv.weight_imag
    x = g.standard_normal(6) + 1j * g.standard_normal(6)
    with torch.no_grad():
        y = conv(torch.from_numpy(x).reshape(1, 1, 6)).numpy()[0]
    w = wr[:, 0] + 1j * wi[:, 0]
    want = np.stack([np.correlate(x, np.conj(w[c]), mode="valid") for c in range(2)])  # correlate conjugates v
    np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12)


def test_has_nki_means_the_same_in_every_library():
    """``<lib>.HAS_NKI`` is one fact -- the Neuron SDK's NKI is importable -- in all six libraries and their
    published ``<lib>.nki.dispatch`` paths, not whether a library's lowerings registered."""
    import importlib

    from trnsci import nki

    for lib in ("trnblas", "trnfft", "trnsparse", "trnsolver", "trnrand", "trntensor"):
        mod = importlib.import_module(lib)
        assert mod.HAS_NKI is nki.HAS_NKI, lib
        assert importlib.import_module(f"{lib}.nki.dispatch").HAS_NKI is nki.HAS_NKI, lib
