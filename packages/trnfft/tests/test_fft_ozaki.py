"""The Ozaki precision modes ("ozaki", "ozaki_hq") and set_ozaki_product_precision_verified.

References: scipy.fft in float64, and a NumPy model of the Tensor Engine in which every bf16 x bf16
product is rounded to bf16 (round to nearest even, ml_dtypes) before an exact accumulation -- the
trn1/trn2 behaviour the published trnfft measured (docs/NKI.md). Tolerances are the componentwise
bound of trnfft.algorithms.ozaki_bound (eps_split + gamma_{P K} + 2u, relative to
sum_k |a_k| |w_k|), applied per output component.
"""

import ml_dtypes
import numpy as np
import pytest
import scipy.fft
import torch

import trnfft
from trnfft import algorithms as A
from trnfft.kernels import dft_gemm as KG
from trnsci.testing import assert_counts, kernel_ran

MODES = ("ozaki", "ozaki_hq")


@pytest.fixture(params=[False, True], ids=["products-rounded", "products-verified"])
def verified(request):
    trnfft.set_ozaki_product_precision_verified(request.param)
    yield request.param
    trnfft.set_ozaki_product_precision_verified(False)


def _x(B, n, seed):
    return torch.randn(B, n, dtype=torch.complex64, generator=torch.Generator().manual_seed(seed))


def _abs_scale(x: np.ndarray) -> np.ndarray:
    """sum_k |a_k| |w_k| of every output component: |xr| |C| + |xi| |S| (the same for Re and Im)."""
    n = x.shape[-1]
    ang = 2 * np.pi * np.outer(np.arange(n), np.arange(n)) / n
    return np.abs(x.real) @ np.abs(np.cos(ang)) + np.abs(x.imag) @ np.abs(np.sin(ang))


def _check_componentwise(y, x, mode, verified):
    x64 = x.numpy().astype(np.complex128)
    ref = scipy.fft.fft(x64)
    n = x.shape[-1]
    bound = A.ozaki_bound(mode, 2 * n, verified) * _abs_scale(x64)
    err = np.asarray(y, dtype=np.complex128) - ref
    assert (np.abs(err.real) <= bound).all() and (np.abs(err.imag) <= bound).all()
    return np.linalg.norm(err) / np.linalg.norm(ref)


# ------------------------------------------------------------------ the slicing

@pytest.mark.parametrize("D,b", [(4, 4), (6, 4), (2, 8), (3, 8)])
def test_slices_have_b_bits_and_sum_back(D, b):
    a = torch.randn(4000, generator=torch.Generator().manual_seed(1)) * torch.logspace(-20, 20, 4000)
    s = A.ozaki_slices(a, D, b)
    for t in s:
        m, e = np.frexp(t.double().numpy())
        assert np.array_equal(m * 2.0**b, np.round(m * 2.0**b))  # <= b significant bits
        assert t.dtype == a.dtype
    r = a.double().numpy() - sum(t.double().numpy() for t in s)
    assert (np.abs(r) <= 2.0 ** (-b * D) * np.abs(a.double().numpy())).all()


def test_four_bit_slice_products_are_exact_in_bf16_eight_bit_ones_are_not():
    """The reason for the default: products of <= 4-bit slices survive rounding to bf16."""
    g = torch.Generator().manual_seed(2)
    a, w = torch.randn(3000, generator=g), torch.randn(3000, generator=g)
    for b, exact in ((4, True), (8, False)):
        sa, sw = A.ozaki_slices(a, 2, b), A.ozaki_slices(w, 2, b)
        p = sa[0].double().numpy() * sw[0].double().numpy()
        assert np.array_equal(p.astype(ml_dtypes.bfloat16).astype(np.float64), p) is exact


def test_ozaki_params_and_pairs():
    assert A.ozaki_params("ozaki", False) == (4, 4) and A.ozaki_params("ozaki_hq", False) == (6, 4)
    assert A.ozaki_params("ozaki", True) == (2, 8) and A.ozaki_params("ozaki_hq", True) == (3, 8)
    assert len(A.ozaki_pairs(4)) == 10 and len(A.ozaki_pairs(6)) == 21 and len(A.ozaki_pairs(2)) == 3
    assert all(i + j < 4 for i, j in A.ozaki_pairs(4))


# ------------------------------------------------------------------ the torch path vs scipy in float64

@pytest.mark.parametrize("n", [48, 64, 200])
@pytest.mark.parametrize("mode", MODES)
def test_torch_path_componentwise_bound(mode, n, verified):
    x = _x(5, n, n)
    y = trnfft.fft(x, precision=mode).numpy()
    rel = _check_componentwise(y, x, mode, verified)
    # normwise, measured: "ozaki" ~6e-7 (4-bit slices) / ~3.5e-6 (8-bit), "ozaki_hq" ~1e-7 -- vs ~2e-3 for "bf16"
    assert rel < (1e-5 if mode == "ozaki" else 4e-7)


@pytest.mark.parametrize("mode", MODES)
def test_torch_path_long_power_of_two_and_set_precision(mode):
    """n = 4096: Stockham with radix-128 DFT-GEMM stages (two) in the mode; per stage the GEMM bound
    plus the float32 twiddle product -- normwise within 2 x 2 sqrt(128) x (stage bound) + 8 u log2 n."""
    x = _x(2, 4096, 9)
    with trnfft.use_precision(mode):
        assert trnfft.get_precision() == mode
        y = trnfft.fft(x).numpy()
    ref = scipy.fft.fft(x.numpy().astype(np.complex128))
    tol = 2 * 2 * np.sqrt(128) * A.ozaki_bound(mode, 256) + A.STOCKHAM_BOUND(4096)
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) <= tol


def test_float64_input_is_computed_in_float64():
    x = _x(2, 48, 3).to(torch.complex128)
    y = trnfft.fft(x, precision="ozaki").numpy()
    np.testing.assert_allclose(y, scipy.fft.fft(x.numpy()), rtol=0, atol=1e-12 * np.abs(y).max())


# ------------------------------------------------------------------ the hardware rule, modeled in NumPy

def _gemm_rounded_products(a: np.ndarray, w: np.ndarray) -> np.ndarray:
    """a @ w with every product rounded to bf16 (RNE) and the products summed exactly (float64)."""
    p = a[:, :, None] * w[None, :, :]
    return p.astype(ml_dtypes.bfloat16).astype(np.float64).sum(1)


@pytest.mark.parametrize("mode", MODES)
def test_bound_holds_when_products_are_rounded_to_bf16(mode):
    """The default slicing (4-bit slices) under the trn1/trn2 product rounding: every slice product is
    exact, so the model equals the exact-product result and stays within the bound; the 8-bit slicing
    that set_ozaki_product_precision_verified(True) selects is ~1e-3 under the same rule (the published
    trnfft measured 1.7e-3 at n = 64 on trn1/trn2): per-product errors up to u_b = 2**-9."""
    n, B = 64, 4
    x = _x(B, n, 11)
    x64 = x.numpy().astype(np.complex128)
    ref = scipy.fft.fft(x64)
    a = np.concatenate([x64.real, x64.imag], 1).astype(np.float32)  # [xr | xi]
    ang = 2 * np.pi * np.outer(np.arange(n), np.arange(n)) / n
    C, S = np.cos(ang), -np.sin(ang)
    w = np.block([[C, S], [-S, C]])  # [Yr | Yi] = [xr | xi] @ w
    errs = {}
    for verified in (False, True):
        D, b = A.ozaki_params(mode, verified)
        sa = [t.double().numpy() for t in A.ozaki_slices(torch.from_numpy(a), D, b)]
        sw = [t.numpy() for t in A.ozaki_slices(torch.from_numpy(w), D, b)]
        rounded = sum(_gemm_rounded_products(sa[i], sw[j]) for i, j in A.ozaki_pairs(D))
        exact = sum(sa[i] @ sw[j] for i, j in A.ozaki_pairs(D))
        y = rounded[:, :n] + 1j * rounded[:, n:]
        errs[verified] = np.linalg.norm(y - ref) / np.linalg.norm(ref)
        if not verified:
            assert np.array_equal(rounded, exact)  # products exact despite the rounding
            bound = A.ozaki_bound(mode, 2 * n, False) * _abs_scale(x64)
            assert (np.abs((y - ref).real) <= bound).all() and (np.abs((y - ref).imag) <= bound).all()
    assert errs[True] > 1e-4 > 100 * errs[False]


# ------------------------------------------------------------------ the NKI path on the emulator

def _emulator_rounds_bf16_products() -> bool:
    """Whether the emulator's nc_matmul rounds a bf16 x bf16 product to bf16: (1 + 2^-7)^2 needs 15
    significant bits (docs/emulator.md, "Numerics", states the rule the emulator follows)."""
    from trnsci import nki

    a = np.full((1, 1), 1 + 2**-7, dtype=ml_dtypes.bfloat16)
    y, _ = nki.profile(KG.dft_gemm_kernel, a, a)
    return float(y[0, 0]) != 1 + 2**-6 + 2**-14


@pytest.mark.simulator
@pytest.mark.parametrize("B,n", [(130, 48), (3, 200)])
@pytest.mark.parametrize("mode", MODES)
def test_kernel_path_bound_counts_and_torch_agreement(mode, B, n, verified):
    x = _x(B, n, B + n)
    with kernel_ran("dft_gemm_kernel") as runs:
        y = trnfft.fft(x, precision=mode).numpy()
    P = len(A.ozaki_pairs(A.ozaki_params(mode, verified)[0]))
    assert_counts(runs[0].profile, KG.dft_gemm_counts(B, 2 * n * P, 2 * n, 2))
    x64 = x.numpy().astype(np.complex128)
    if verified and _emulator_rounds_bf16_products():
        # 8-bit slices on an emulator that models the trn1/trn2 product rounding: what the flag must not be
        # set on. Each slice product carries up to u_b of itself: bound + u_b (1 + 2^-8)^2 / (1 - 2^-8)^2
        ref = scipy.fft.fft(x64)
        bound = (A.ozaki_bound(mode, 2 * n, True) + A.U_BF16 * 1.02) * _abs_scale(x64)
        assert (np.abs((y - ref).real) <= bound).all() and (np.abs((y - ref).imag) <= bound).all()
        assert np.linalg.norm(y - ref) / np.linalg.norm(ref) > 1e-4
        return
    _check_componentwise(y, x, mode, verified)
    yt = trnfft.fft(x, precision=mode).numpy()  # torch path: both within the bound of the reference
    scale = A.ozaki_bound(mode, 2 * n, verified) * _abs_scale(x64)
    assert (np.abs(y - yt) <= 2 * scale).all()


@pytest.mark.simulator
def test_kernel_path_ifft_and_rfft():
    x = _x(7, 40, 4)
    with kernel_ran("dft_gemm_kernel"):
        y = trnfft.ifft(x, precision="ozaki_hq").numpy()
    ref = scipy.fft.ifft(x.numpy().astype(np.complex128))
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) < 4e-7
    r = torch.randn(5, 96, generator=torch.Generator().manual_seed(8))
    with kernel_ran("dft_gemm_kernel"):  # even n: one complex transform of n/2 = 48
        y = trnfft.rfft(r, precision="ozaki").numpy()
    ref = scipy.fft.rfft(r.numpy().astype(np.float64))
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) < 2e-6


@pytest.mark.simulator
def test_lengths_beyond_the_kernel_run_on_torch_and_the_plan_says_why():
    plan = trnfft.create_plan(512, precision="ozaki_hq")
    with trnfft.use_backend("simulator"):
        assert plan.backend == "torch"
        assert "n <= 256" in plan.reason and "21 slice products" in plan.reason
        plan = trnfft.create_plan(256, precision="ozaki_hq")
        assert plan.backend != "torch"


def test_flag_validation_and_mode_names():
    with pytest.raises(TypeError, match="verified must be a bool"):
        trnfft.set_ozaki_product_precision_verified(1)
    with pytest.raises(ValueError, match="ozaki_hq"):
        trnfft.fft(torch.ones(4), precision="ozaki-hq")
    trnfft.set_ozaki_product_precision_verified()
    assert A.ozaki_params("ozaki") == (2, 8)
    trnfft.set_ozaki_product_precision_verified(False)
    assert A.ozaki_params("ozaki") == (4, 4)
