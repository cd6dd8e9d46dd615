"""trnfft transforms against scipy.fft / numpy.fft (independent pocketfft builds in float64).

Error measure: ``max|y - ref| / max|ref|`` over the whole output (normwise;
elementwise relative error is meaningless at spectral zeros). float64
tolerance 1e-12: an FFT's error grows like ``u log2 n`` (u = 1.1e-16), i.e.
< 1e-14 at the largest size here, so 1e-12 leaves two orders of margin but
still catches any wrong twiddle, index or scale. float32 ("fast", torch.fft)
tolerance ``8 u32 log2 n`` with ``u32 = 6e-8`` (Higham Thm 24.2, see
trnfft.algorithms).
"""

import math

import numpy as np
import pytest
import scipy.fft as sf
import torch

import trnfft

SIZES = [1, 2, 3, 5, 7, 16, 17, 64, 97, 100, 128, 360, 1000, 1024, 4096, 4099, 8192, 10007]
NORMS = ["backward", "ortho", "forward"]


def rel(y, ref):
    y = y.numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
    ref = np.asarray(ref)
    assert y.shape == ref.shape, (y.shape, ref.shape)
    return np.abs(y - ref).max() / max(np.abs(ref).max(), 1e-300)


def rng_c(shape, seed=0):
    r = np.random.default_rng(seed)
    return r.standard_normal(shape) + 1j * r.standard_normal(shape)


@pytest.mark.parametrize("n", SIZES)
def test_1d_all_functions_all_norms_float64(n):
    r = np.random.default_rng(n)
    x = r.standard_normal((2, n)) + 1j * r.standard_normal((2, n))
    xr = r.standard_normal((2, n))
    for norm in NORMS:
        assert rel(trnfft.fft(torch.from_numpy(x), norm=norm), sf.fft(x, norm=norm)) <= 1e-12
        assert rel(trnfft.ifft(torch.from_numpy(x), norm=norm), sf.ifft(x, norm=norm)) <= 1e-12
        assert rel(trnfft.rfft(torch.from_numpy(xr), norm=norm), sf.rfft(xr, norm=norm)) <= 1e-12
        assert rel(trnfft.ihfft(torch.from_numpy(xr), norm=norm), sf.ihfft(xr, norm=norm)) <= 1e-12
        h = sf.rfft(xr)  # a half spectrum of length n//2+1
        assert rel(trnfft.irfft(torch.from_numpy(h), n, norm=norm), sf.irfft(h, n, norm=norm)) <= 1e-12
        assert rel(trnfft.hfft(torch.from_numpy(h), n, norm=norm), sf.hfft(h, n, norm=norm)) <= 1e-12


@pytest.mark.parametrize("n", [5, 64, 97, 1000, 4096, 4099])
def test_1d_float32_fast_within_bound(n):
    x = rng_c((3, n), n)
    bound = 8 * 2.0**-24 * max(1, math.log2(n)) * 4  # x4: torch.fft's float32 twiddles/radices, see module doc
    y = trnfft.fft(torch.from_numpy(x.astype(np.complex64)))
    assert y.dtype == torch.complex64
    assert rel(y.to(torch.complex128), sf.fft(x.astype(np.complex64).astype(np.complex128))) <= bound


@pytest.mark.parametrize("n,m", [(8, 5), (5, 8), (97, 97), (1, 7), (100, 1)])
def test_n_argument_pads_and_truncates(n, m):
    x = rng_c((3, n))
    assert rel(trnfft.fft(torch.from_numpy(x), m), sf.fft(x, m)) <= 1e-12
    xr = x.real.copy()
    assert rel(trnfft.rfft(torch.from_numpy(xr), m), sf.rfft(xr, m)) <= 1e-12
    assert rel(trnfft.irfft(torch.from_numpy(x), m), sf.irfft(x, m)) <= 1e-12


@pytest.mark.parametrize("shape,axes", [((6, 7), None), ((5, 9, 4), (0, 2)), ((3, 17, 8), (2, 0)),
                                        ((4, 3, 5, 6), (1, 2, 3)), ((97, 10), (-1,))])
def test_nd_mixed_sizes(shape, axes):
    x = rng_c(shape, len(shape))
    xr = x.real.copy()
    t, tr = torch.from_numpy(x), torch.from_numpy(xr)
    for norm in NORMS:
        assert rel(trnfft.fftn(t, dim=axes, norm=norm), sf.fftn(x, axes=axes, norm=norm)) <= 1e-12
        assert rel(trnfft.ifftn(t, axes=axes, norm=norm), sf.ifftn(x, axes=axes, norm=norm)) <= 1e-12
        assert rel(trnfft.rfftn(tr, dim=axes, norm=norm), sf.rfftn(xr, axes=axes, norm=norm)) <= 1e-12
        h = sf.rfftn(xr, axes=axes)
        s = [shape[a] for a in (axes if axes is not None else range(len(shape)))]
        assert rel(trnfft.irfftn(torch.from_numpy(h), s=s, dim=axes, norm=norm),
                   sf.irfftn(h, s=s, axes=axes, norm=norm)) <= 1e-12


@pytest.mark.parametrize("shape", [(6, 7), (2, 9, 16), (3, 5, 97)])
def test_2d_functions(shape):
    x = rng_c(shape, 3)
    xr = x.real.copy()
    for norm in NORMS:
        assert rel(trnfft.fft2(torch.from_numpy(x), norm=norm), sf.fft2(x, norm=norm)) <= 1e-12
        assert rel(trnfft.ifft2(torch.from_numpy(x), norm=norm), sf.ifft2(x, norm=norm)) <= 1e-12
        assert rel(trnfft.rfft2(torch.from_numpy(xr), norm=norm), sf.rfft2(xr, norm=norm)) <= 1e-12
        h = sf.rfft2(xr)
        assert rel(trnfft.irfft2(torch.from_numpy(h), s=shape[-2:], norm=norm),
                   sf.irfft2(h, s=shape[-2:], norm=norm)) <= 1e-12
    assert rel(trnfft.fft2(torch.from_numpy(x), s=(4, 20), axes=(0, -1)), sf.fft2(x, s=(4, 20), axes=(0, -1))) <= 1e-12
    # irfftn default s: last length 2*(m-1)
    assert rel(trnfft.irfftn(torch.from_numpy(x)), sf.irfftn(x)) <= 1e-12


@pytest.mark.parametrize("n", [1, 7, 64, 97, 1000, 4099])
def test_round_trips_and_parseval(n):
    x = torch.from_numpy(rng_c((2, n), 5))
    xr = x.real.contiguous()
    assert rel(trnfft.ifft(trnfft.fft(x)), x.numpy()) <= 1e-12
    for norm in NORMS:
        assert rel(trnfft.irfft(trnfft.rfft(xr, norm=norm), n, norm=norm), xr.numpy()) <= 1e-12
        assert rel(trnfft.hfft(trnfft.ihfft(xr, norm=norm), n, norm=norm), xr.numpy()) <= 1e-12
    X = trnfft.fft(x, norm="ortho")  # unitary: energy preserved
    e_t = (x.abs() ** 2).sum(-1)
    e_f = (X.abs() ** 2).sum(-1)
    assert torch.allclose(e_t, e_f, rtol=1e-12, atol=0)


def test_input_kinds_return_matching_kind():
    x = rng_c((4, 16))
    ref = sf.fft(x)
    y_np = trnfft.fft(x)
    assert isinstance(y_np, np.ndarray) and y_np.dtype == np.complex128 and rel(y_np, ref) <= 1e-12
    y32 = trnfft.fft(x.astype(np.complex64))
    assert y32.dtype == np.complex64
    assert trnfft.rfft(x.real.astype(np.float32)).dtype == np.complex64
    ct = trnfft.ComplexTensor(torch.from_numpy(x.real.copy()), torch.from_numpy(x.imag.copy()))
    y_ct = trnfft.fft(ct)
    assert isinstance(y_ct, trnfft.ComplexTensor)
    assert rel(y_ct.to_torch(), ref) <= 1e-12
    r = trnfft.irfft(ct)  # real result stays a real tensor
    assert isinstance(r, torch.Tensor) and not r.is_complex()
    y_real = trnfft.fft(torch.from_numpy(x.real.copy()))
    assert y_real.dtype == torch.complex128 and rel(y_real, sf.fft(x.real)) <= 1e-12
    y_bf = trnfft.fft(torch.ones(8, dtype=torch.bfloat16))
    assert y_bf.dtype == torch.complex64 and y_bf[0].real == 8


def test_dim_and_axis_aliases_and_batching():
    x = rng_c((3, 5, 7))
    t = torch.from_numpy(x)
    assert rel(trnfft.fft(t, dim=1), sf.fft(x, axis=1)) <= 1e-12
    assert rel(trnfft.fft(t, axis=0), sf.fft(x, axis=0)) <= 1e-12
    assert rel(trnfft.rfft(t.real.contiguous(), axis=-2), sf.rfft(x.real, axis=-2)) <= 1e-12
    assert rel(trnfft.fftn(t, axes=[2, 0]), sf.fftn(x, axes=[2, 0])) <= 1e-12
    with pytest.raises(TypeError, match="not both"):
        trnfft.fft(t, dim=0, axis=1)


def test_empty_batch_and_noncontiguous():
    x = torch.zeros(0, 8, dtype=torch.complex128)
    assert trnfft.fft(x).shape == (0, 8)
    y = torch.from_numpy(rng_c((8, 6))).T  # non-contiguous view
    assert rel(trnfft.fft(y), sf.fft(y.numpy())) <= 1e-12


def test_helpers_against_numpy():
    for n in [1, 2, 5, 8, 97]:
        for d in [1.0, 0.25]:
            assert np.allclose(trnfft.fftfreq(n, d, dtype=torch.float64).numpy(), np.fft.fftfreq(n, d), rtol=1e-15)
            assert np.allclose(trnfft.rfftfreq(n, d, dtype=torch.float64).numpy(), np.fft.rfftfreq(n, d),
                               rtol=1e-15)
    a = np.arange(35.0).reshape(5, 7)
    for axes in [None, 0, (1,), (0, 1)]:
        assert np.array_equal(trnfft.fftshift(a, axes), np.fft.fftshift(a, axes))
        assert np.array_equal(trnfft.ifftshift(a, axes=axes), np.fft.ifftshift(a, axes=axes))
    ct = trnfft.ComplexTensor(torch.from_numpy(a), torch.from_numpy(-a))
    assert np.array_equal(trnfft.fftshift(ct).to_torch().numpy(), np.fft.fftshift(a - 1j * a))


def test_differentiable_transforms_gradcheck():
    x = torch.randn(2, 6, dtype=torch.complex128, requires_grad=True)
    xr = torch.randn(2, 7, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda z: trnfft.fft(z, norm="ortho"), (x,))
    assert torch.autograd.gradcheck(lambda z: trnfft.rfft(z), (xr,))
    assert torch.autograd.gradcheck(lambda z: trnfft.irfft(z, 10), (x,))
    assert torch.autograd.gradcheck(lambda z: trnfft.fftn(z, dim=(0, 1)), (x,))
    ct = trnfft.ComplexTensor(x.real.detach().clone().requires_grad_(), x.imag.detach().clone().requires_grad_())
    trnfft.fft(ct).abs().sum().backward()
    assert ct.real.grad is not None and ct.imag.grad is not None
    # float32 data through the kernel algorithm path differentiates too
    x32 = torch.randn(3, 17, requires_grad=True)
    trnfft.fft(x32, precision="kahan").abs().sum().backward()
    assert x32.grad is not None and torch.isfinite(x32.grad).all()


# Every public transform has an inline route for the common call (plain
# tensor, default keywords, precision "fast") and the full keyword parse;
# both must land on the same Op call: bitwise-equal results, the same dtype,
# and the same answer as NumPy (pocketfft, float64; float32 inputs within
# 8 u32 log2 n as above, here n <= 16 -> 2e-6).
_DEFAULT_CALLS = [
    ("fft", np.fft.fft, "c", (3, 16)), ("ifft", np.fft.ifft, "c", (3, 16)),
    ("fft2", np.fft.fft2, "c", (4, 6)), ("ifft2", np.fft.ifft2, "c", (2, 4, 6)),
    ("fftn", np.fft.fftn, "c", (4, 6)), ("ifftn", np.fft.ifftn, "c", (2, 3, 5)),
    ("rfft", np.fft.rfft, "r", (3, 16)), ("ihfft", np.fft.ihfft, "r", (3, 15)),
    ("irfft", np.fft.irfft, "c", (3, 9)), ("hfft", np.fft.hfft, "c", (3, 9)),
    ("rfft2", np.fft.rfft2, "r", (4, 6)), ("rfftn", np.fft.rfftn, "r", (2, 4, 6)),
    ("irfft2", np.fft.irfft2, "c", (4, 5)), ("irfftn", np.fft.irfftn, "c", (2, 4, 5)),
]


@pytest.mark.parametrize("name,ref,kind,shape", _DEFAULT_CALLS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_default_call_matches_full_parse_and_numpy(name, ref, kind, shape, dtype):
    f = getattr(trnfft, name)
    r = np.random.default_rng(7)
    a = r.standard_normal(shape) + (1j * r.standard_normal(shape) if kind == "c" else 0)
    a = a.astype(np.complex64 if dtype == "float32" and kind == "c" else
                 np.complex128 if kind == "c" else dtype)
    x = torch.from_numpy(a)
    y = f(x)
    full = (dict(n=x.shape[-1] if name in ("fft", "ifft", "rfft", "ihfft") else 2 * (x.shape[-1] - 1), dim=-1)
            if name in ("fft", "ifft", "rfft", "ihfft", "irfft", "hfft") else {})
    y2 = f(x, norm="Backward", precision="fast", **full)  # case variant: the Options parser
    assert y.dtype == y2.dtype and torch.equal(y, y2)
    assert rel(y, ref(a.astype(np.complex128 if kind == "c" else np.float64))) < (
        2e-6 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("name", ["irfft", "hfft", "irfft2", "irfftn"])
def test_default_length_needs_two_coefficients(name):
    # 2 (m - 1) = 0 for m = 1: the common-call route must not take it
    with pytest.raises(ValueError, match=name):
        getattr(trnfft, name)(torch.ones(3, 1, dtype=torch.complex64))


# ---- issue 19: valid NumPy input that was refused (reference: numpy.fft on the same input)

def test_numpy_inputs_of_every_kind_are_accepted_like_numpy():
    x = np.arange(8.0)
    # ifft's result is a lazy conjugate view in torch; NumPy out must still work
    np.testing.assert_allclose(trnfft.ifft(x), np.fft.ifft(x), rtol=0, atol=1e-15)
    np.testing.assert_allclose(trnfft.ifft(x + 1j * x[::-1]), np.fft.ifft(x + 1j * x[::-1]), rtol=0, atol=1e-15)
    X = np.random.default_rng(0).standard_normal((4, 6))
    for kw in ({"s": np.array([4, 4])}, {"axes": np.array([1, 0])}, {"s": np.array([3, 5], dtype=np.uint8)},
               {"s": (np.int32(4), np.int64(6))}, {"axes": [np.int64(0)]}):
        for name in ("fftn", "ifftn", "rfftn", "fft2"):
            ref_kw = {k: tuple(int(i) for i in v) for k, v in kw.items()}
            if name == "fft2" and len(next(iter(ref_kw.values()))) != 2:
                continue
            np.testing.assert_allclose(getattr(trnfft, name)(X, **kw), getattr(np.fft, name)(X, **ref_kw),
                                       rtol=0, atol=1e-13, err_msg=f"{name} {kw}")
    np.testing.assert_allclose(trnfft.fft(X, n=np.array(5), axis=np.int64(0)), np.fft.fft(X, n=5, axis=0),
                               rtol=0, atol=1e-13)
    for dt in (">f8", ">c16", ">f4"):  # non-native byte order is converted, not refused
        Y = X.astype(dt)
        np.testing.assert_allclose(trnfft.fft(Y), np.fft.fft(Y), rtol=1e-6 if dt == ">f4" else 1e-13,
                                   atol=1e-5 if dt == ">f4" else 1e-13)
    with pytest.raises(TypeError, match="fftn: s must be a sequence of ints"):
        trnfft.fftn(X, s=np.array([4.0, 4.0]))
    with pytest.raises(ValueError, match="fftn: axes=5 is out of range"):  # names the keyword given
        trnfft.fftn(X, axes=np.array([0, 5]))
