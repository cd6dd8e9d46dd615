"""trnfft NKI kernels through the emulator: results vs numpy.fft/scipy.fft (float64 references)
and vs the torch path, on ragged batches (130, 200 rows: one full 128-row tile plus a ragged
one), and the emulator's counters vs each kernel's closed forms.

Tolerances: relative 2-norm error per batch against the fp64 reference, bounded by the
algorithm's stated float32 bound (trnfft.algorithms: GEMM 2 n u, Stockham 8 u log2 n,
Bluestein 30 u log2 m, u = 2^-24); bf16 modes by their bf16 bounds.
"""

import numpy as np
import pytest
import scipy.fft
import torch

import trnfft
from trnfft import algorithms as A
from trnfft.kernels import dft_gemm as KG
from trnfft.kernels import fft_any_length as KB
from trnfft.kernels import fft_pow2 as KS
from trnfft.kernels import irfft as KI
from trnfft.kernels import rfft as KR
from trnfft.kernels.cmul import cmul_counts, cmul_kernel
from trnsci import nki
from trnsci.nki.emulator import bf16_products
from trnsci.testing import assert_counts, kernel_ran

pytestmark = pytest.mark.simulator


def _planes(B, n, seed):
    return np.random.default_rng(seed).standard_normal((2, B, n)).astype(np.float32)


def _relerr(y, ref):
    return np.linalg.norm(y - ref) / np.linalg.norm(ref)


def _c(y):
    return y[0].astype(np.float64) + 1j * y[1]


# ------------------------------------------------------------------ kernels on their own

@pytest.mark.parametrize("B,n", [(130, 16), (3, 2), (5, 64), (2, 512)])
@pytest.mark.parametrize("inverse", [False, True])
def test_stockham_kernel(B, n, inverse):
    x = _planes(B, n, n)
    y, prof = nki.profile(KS.fft_pow2_kernel, x, KS.twiddle_table(n), inverse=inverse)
    ref = (scipy.fft.ifft(_c(x), norm="forward") if inverse else scipy.fft.fft(_c(x)))
    assert _relerr(_c(y), ref) <= A.STOCKHAM_BOUND(n)
    assert_counts(prof, KS.fft_pow2_counts(B, n))


def test_stockham_radices_and_butterfly_counts():
    assert KS.radices(4096) == [8, 8, 8, 8] and KS.radices(1024) == [8, 8, 4, 4] and KS.radices(2) == [2]
    assert [KS.bfly(r) for r in (2, 4, 8)] == [4, 16, 56]
    with pytest.raises(ValueError, match="power of two"):
        KS.radices(12)


@pytest.mark.parametrize("B,n,dtype", [(130, 5, np.float32), (200, 17, np.float32), (3, 1, np.float32),
                                       (129, 40, "bf16")])
def test_dft_gemm_kernel(B, n, dtype):
    import ml_dtypes

    dt = ml_dtypes.bfloat16 if dtype == "bf16" else dtype
    x = np.random.default_rng(n).standard_normal((2, B, n))
    C, S = A.dft_tables(n)
    w = np.ascontiguousarray(np.block([[C, S], [-S, C]]).astype(dt))
    xt = np.ascontiguousarray(np.concatenate([x[0].T, x[1].T]).astype(dt))
    y, prof = nki.profile(KG.dft_gemm_kernel, xt, w)
    ref = scipy.fft.fft(x[0] + 1j * x[1])
    bound = 4 * A.U_BF16 if dtype == "bf16" else A.GEMM_BOUND(max(n, 2))
    assert _relerr(y[:, :n] + 1j * y[:, n:], ref) <= bound
    assert_counts(prof, KG.dft_gemm_counts(B, 2 * n, 2 * n, np.dtype(dt).itemsize))


def test_dft_gemm_streams_a_matrix_too_large_to_keep():
    B, n = 2, 1100  # 2n x 2n fp32 does not fit W_BUDGET: tiles stream in per batch tile
    assert not KG.resident(2 * n, 2 * n, 4)
    x = np.random.default_rng(1).standard_normal((2, B, n))
    C, S = A.dft_tables(n)
    w = np.ascontiguousarray(np.block([[C, S], [-S, C]]).astype(np.float32))
    xt = np.ascontiguousarray(np.concatenate([x[0].T, x[1].T]).astype(np.float32))
    y, prof = nki.profile(KG.dft_gemm_kernel, xt, w)
    assert _relerr(y[:, :n] + 1j * y[:, n:], scipy.fft.fft(x[0] + 1j * x[1])) <= A.GEMM_BOUND(n)
    assert_counts(prof, KG.dft_gemm_counts(B, 2 * n, 2 * n, 4))


@pytest.mark.parametrize("B,n", [(130, 3), (7, 17), (2, 97)])
@pytest.mark.parametrize("inverse", [False, True])
def test_bluestein_kernel(B, n, inverse):
    x = _planes(B, n, n)
    chirp, filt = KB.tables(n, inverse)
    y, prof = nki.profile(KB.fft_any_length_kernel, x, chirp, filt, KS.twiddle_table(KB.length(n)), inverse=inverse)
    ref = (scipy.fft.ifft(_c(x), norm="forward") if inverse else scipy.fft.fft(_c(x)))
    assert _relerr(_c(y), ref) <= A.BLUESTEIN_BOUND(n)
    assert_counts(prof, KB.fft_any_length_counts(B, n))


@pytest.mark.parametrize("B,n", [(200, 64), (130, 4), (3, 1024)])
def test_rfft_half_kernel(B, n):
    x = np.random.default_rng(n).standard_normal((B, n)).astype(np.float32)
    y, prof = nki.profile(KR.rfft_kernel, x, KR.half_table(n), KS.twiddle_table(n // 2))
    assert y.shape == (2, B, n // 2 + 1)
    assert _relerr(_c(y), np.fft.rfft(x.astype(np.float64))) <= A.STOCKHAM_BOUND(n // 2) + 4 * A.U32
    assert_counts(prof, KR.rfft_counts(B, n))


def _half_spectrum(B, h, seed):
    """Random half spectra ``[2, B, h]`` whose X_0 and X_(h-1) have large imaginary parts (which
    numpy/scipy irfft ignore for even n: a real signal's DC and Nyquist bins are real)."""
    X = np.random.default_rng(seed).standard_normal((2, B, h)).astype(np.float32)
    X[1, :, 0] = 7.0
    X[1, :, -1] = -5.0
    return X


@pytest.mark.parametrize("B,n", [(3, 4), (130, 16), (200, 128), (1, 8192)])
def test_irfft_half_kernel(B, n):
    h = n // 2
    X = _half_spectrum(B, h + 1, n)
    y, prof = nki.profile(KI.irfft_kernel, X, KI.ihalf_table(n), KS.twiddle_table(h))
    assert y.shape == (B, n)
    ref = scipy.fft.irfft(_c(X), n, norm="forward")  # unnormalized, like the kernel
    Xr = _c(X)
    Xr[:, 0], Xr[:, -1] = Xr[:, 0].real, Xr[:, -1].real
    np.testing.assert_allclose(ref, scipy.fft.irfft(Xr, n, norm="forward"), atol=1e-9)  # scipy does ignore them
    # inner inverse Stockham of length h plus ~4 u for the pre-twiddle (relative to ||y||)
    assert _relerr(y, ref) <= A.STOCKHAM_BOUND(h) + 4 * A.U32
    assert_counts(prof, KI.irfft_counts(B, n))
    if h == 4096:  # the docstring's SBUF plan at the largest length: ~36 h bytes per partition
        assert prof.peak_sbuf_bytes <= 36 * h <= 192 * 1024


# irfft routes on the NKI path: fused half-length kernel (n/2 a power of two <= 4096); other even n
# pre-twiddled on the host + one complex inverse of n/2 (DFT-GEMM, or the four-step beyond 8192);
# odd n the Hermitian extension + one full-length complex inverse. Bounds: the inner transform's
# plus 4 u (relative 2-norm error of the output).
@pytest.mark.parametrize("n,B,precision,kernels,bound", [
    (16, 130, "fast", ["irfft_kernel"], A.STOCKHAM_BOUND(8) + 4 * A.U32),
    (2, 3, "fast", ["dft_gemm_kernel"], A.GEMM_BOUND(2) + 4 * A.U32),  # h = 1: below the kernel
    (30, 130, "fast", ["dft_gemm_kernel"], A.GEMM_BOUND(15) + 4 * A.U32),
    (31, 3, "fast", ["dft_gemm_kernel"], A.GEMM_BOUND(31)),
    (16384, 1, "fast", ["dft_gemm_kernel", "cmul_kernel", "dft_gemm_kernel"], A.STOCKHAM_BOUND(8192) + 4 * A.U32),
    (2048, 3, "bf16", ["dft_gemm_kernel"], 4 * A.U_BF16),  # h = 1024: the bf16 GEMM's limit
])
def test_irfft_routes_vs_scipy_and_torch(n, B, precision, kernels, bound):
    from trnsci.testing import assert_plan_matches_run

    X = torch.from_numpy(_half_spectrum(B, n // 2 + 1, n + B)).contiguous()
    X = torch.complex(X[0], X[1])
    with kernel_ran(*kernels):
        y = trnfft.irfft(X, n=n, norm="ortho", precision=precision)
    ref = scipy.fft.irfft(X.numpy().astype(np.complex128), n, norm="ortho")
    assert y.shape == (B, n) and _relerr(y.numpy(), ref) <= bound
    with trnfft.use_backend("torch"):
        t = trnfft.irfft(X, n=n, norm="ortho")
    assert _relerr(y.numpy(), t.numpy()) <= bound + A.STOCKHAM_BOUND(n)
    with trnfft.use_backend("simulator"):
        assert_plan_matches_run(trnfft.irfft, X, n=n, norm="ortho", precision=precision)


@pytest.mark.parametrize("conj", [False, True])
def test_cmul_kernel(conj):
    B, n = 130, 2100  # ragged in both the batch and the 2048-element free chunks
    a, b = _planes(B, n, 1), _planes(B, n, 2)
    y, prof = nki.profile(cmul_kernel, a, b, conj=conj)
    ref = _c(a) * (np.conj(_c(b)) if conj else _c(b))
    # two rounded products and a rounded sum per component: <= 3 u |a||b|
    assert np.all(np.abs(_c(y) - ref) <= 3 * A.U32 * np.abs(_c(a)) * np.abs(_c(b)) * 1.01 + 1e-30)
    assert_counts(prof, cmul_counts(B, n))


# ------------------------------------------------------------------ through the public API

# Routing boundaries (trnfft._nki.basic.GEMM_MAX_N = 512 for powers of two, GEMM_MAX_N_ANY = 2048 for
# other n, from the modeled crossover): each side of each, on ragged batches.
@pytest.mark.parametrize("n,kernel,B", [(17, "dft_gemm_kernel", 130), (100, "dft_gemm_kernel", 200),
                                        (512, "dft_gemm_kernel", 130), (513, "dft_gemm_kernel", 3),
                                        (1024, "fft_pow2_kernel", 130), (1000, "dft_gemm_kernel", 1),
                                        (2048, "fft_pow2_kernel", 3)])
def test_fft_simulator_vs_torch_and_scipy(n, kernel, B):
    from trnfft._nki import basic as N

    # the route is named for the algorithm (Stockham), its kernel for its file (kernels/fft_pow2.py)
    assert N.algorithm(n, "fast")[0] == {"dft_gemm_kernel": "dft_gemm", "fft_pow2_kernel": "stockham"}[kernel]
    x = torch.randn(B, n, dtype=torch.complex64, generator=torch.Generator().manual_seed(n + B))
    with kernel_ran(kernel):
        y = trnfft.fft(x, norm="ortho")
    with trnfft.use_backend("torch"):
        t = trnfft.fft(x, norm="ortho")
    ref = scipy.fft.fft(x.numpy().astype(np.complex128), norm="ortho")
    bound = {"dft_gemm_kernel": A.GEMM_BOUND(n), "fft_pow2_kernel": A.STOCKHAM_BOUND(n)}[kernel]
    assert _relerr(y.numpy(), ref) <= bound
    assert _relerr(y.numpy(), t.numpy()) <= bound + 2 * A.STOCKHAM_BOUND(n)


def test_ifft_fftn_rfft_irfft_simulator_on_ragged_batches():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(130, 64, dtype=torch.complex64, generator=g)
    with kernel_ran("dft_gemm_kernel"):
        y = trnfft.ifft(x, dim=1)
    assert _relerr(y.numpy(), np.fft.ifft(x.numpy().astype(np.complex128))) <= A.GEMM_BOUND(64)
    z = torch.randn(5, 6, 8, dtype=torch.complex64, generator=g)
    with kernel_ran("dft_gemm_kernel", "dft_gemm_kernel"):
        y = trnfft.fftn(z, dim=(0, 2))
    assert _relerr(y.numpy(), scipy.fft.fftn(z.numpy().astype(np.complex128), axes=(0, 2))) <= 1e-6
    r = torch.randn(200, 256, generator=g)
    with kernel_ran("rfft_kernel"):
        y = trnfft.rfft(r, norm="forward")
    ref = np.fft.rfft(r.numpy().astype(np.float64), norm="forward")
    assert _relerr(y.numpy(), ref) <= A.STOCKHAM_BOUND(128) + 4 * A.U32
    h = torch.fft.rfft(torch.randn(130, 30, generator=g))
    with kernel_ran("dft_gemm_kernel"):
        y = trnfft.irfft(h, n=30)
    assert _relerr(y.numpy(), np.fft.irfft(h.numpy().astype(np.complex128), n=30)) <= A.GEMM_BOUND(30)


def test_hermitian_and_real_nd_transforms_on_kernels():
    """hfft/ihfft and rfftn/irfftn compose the real and complex kernels (one run per dim)."""
    g = torch.Generator().manual_seed(1)
    r = torch.randn(6, 10, 16, generator=g)
    with kernel_ran("rfft_kernel", "dft_gemm_kernel", "dft_gemm_kernel"):
        y = trnfft.rfftn(r, norm="ortho")
    ref = scipy.fft.rfftn(r.numpy().astype(np.float64), norm="ortho")
    assert _relerr(y.numpy(), ref) <= 3 * A.GEMM_BOUND(16)
    X = torch.fft.rfftn(r)
    with kernel_ran("dft_gemm_kernel", "dft_gemm_kernel", "irfft_kernel"):  # last dim: half-length
        y = trnfft.irfftn(X, s=(6, 10, 16))
    assert _relerr(y.numpy(), scipy.fft.irfftn(X.numpy().astype(np.complex128), s=(6, 10, 16))) <= 3 * A.GEMM_BOUND(16)
    c = torch.randn(130, 9, dtype=torch.complex64, generator=g)  # Im c[0], Im c[8] nonzero: ignored
    with kernel_ran("irfft_kernel"):
        y = trnfft.hfft(c, n=16, norm="forward")
    ref = scipy.fft.hfft(c.numpy().astype(np.complex128), n=16, norm="forward")
    assert _relerr(y.numpy(), ref) <= A.STOCKHAM_BOUND(8) + 4 * A.U32
    with kernel_ran("rfft_kernel"):
        y = trnfft.ihfft(r[0], n=16)
    assert _relerr(y.numpy(), scipy.fft.ihfft(r[0].numpy().astype(np.float64), n=16)) <= A.STOCKHAM_BOUND(8) + 4 * A.U32


@pytest.mark.parametrize("kw,kernel", [
    ({"n_fft": 64, "hop_length": 16, "win_length": 48}, "rfft_kernel"),
    ({"n_fft": 60, "center": False, "pad_mode": "constant"}, "dft_gemm_kernel"),
])
def test_stft_frames_go_through_one_transform_kernel(kw, kernel):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(3, 700, generator=g)
    w = torch.hann_window(kw.get("win_length", kw["n_fft"]))
    with kernel_ran(kernel):
        y = trnfft.stft(x, window=w, **kw)
    ref = torch.stft(x.double(), window=w.double(), return_complex=True, **kw)  # torch's own conventions, fp64
    assert y.shape == ref.shape
    assert _relerr(y.numpy(), ref.numpy()) <= A.GEMM_BOUND(kw["n_fft"])


def test_complex_stft_two_sided_normalized():
    x = torch.randn(2, 300, dtype=torch.complex64, generator=torch.Generator().manual_seed(5))
    with kernel_ran("dft_gemm_kernel"):
        y = trnfft.stft(x, 32, normalized=True, onesided=False, window=torch.hann_window(32))
    ref = torch.stft(x.to(torch.complex128), 32, normalized=True, onesided=False,
                     window=torch.hann_window(32, dtype=torch.float64), return_complex=True)
    assert _relerr(y.numpy(), ref.numpy()) <= A.GEMM_BOUND(32)


@pytest.mark.parametrize("precision,products,bound", [
    ("bf16", "rounded", 4 * A.U_BF16),
    # bf16_refined's 3e-5 needs exact bf16 x bf16 products; trn1/trn2 round each product to bf16
    # (the emulator's default, trnsci.nki.emulator.numerics), which caps it at the bf16 bound
    ("bf16_refined", "exact", 3e-5),
    ("bf16_refined", "rounded", 4 * A.U_BF16),
])
def test_bf16_modes_run_the_gemm_kernel(precision, products, bound):
    x = torch.randn(130, 48, dtype=torch.complex64, generator=torch.Generator().manual_seed(3))
    with kernel_ran("dft_gemm_kernel"), bf16_products(products):
        y = trnfft.fft(x, precision=precision)
    assert _relerr(y.numpy(), scipy.fft.fft(x.numpy().astype(np.complex128))) <= bound


def test_complex_tensor_multiply_runs_the_cmul_kernel():
    g = torch.Generator().manual_seed(4)
    a = trnfft.ComplexTensor(torch.randn(130, 7, generator=g), torch.randn(130, 7, generator=g))
    b = trnfft.ComplexTensor(torch.randn(130, 7, generator=g), torch.randn(130, 7, generator=g))
    with kernel_ran("cmul_kernel"):
        y = a * b
    ref = a.to_torch().numpy().astype(np.complex128) * b.to_torch().numpy()
    np.testing.assert_allclose(y.to_torch().numpy(), ref, rtol=0, atol=4 * A.U32 * np.abs(ref).max())


def test_emulator_rounds_bf16_products_like_the_hardware():
    """(1 + 2^-7)^2 = 1 + 2^-6 + 2^-14 needs 15 significant bits: exact in fp32, not in bf16. trn1/trn2
    round each bf16 x bf16 product to bf16 before fp32 accumulation (trnfft's hardware measurement,
    modeled by default: trnsci.nki.emulator.numerics), so "bf16_refined" with 8-bit slices gains
    nothing there (it needs 4-bit operand slices, docs/trnfft.md); bf16_products("exact") gives the
    exact products that mode assumes."""
    import ml_dtypes

    a = np.full((1, 1), 1 + 2**-7, dtype=ml_dtypes.bfloat16)
    y, _ = nki.profile(KG.dft_gemm_kernel, a, a)
    assert float(y[0, 0]) == 1 + 2**-6  # the 2^-14 bit rounded away (ties-to-even not involved)
    with bf16_products("exact"):
        y, _ = nki.profile(KG.dft_gemm_kernel, a, a)
    assert float(y[0, 0]) == 1 + 2**-6 + 2**-14


def test_complex_tensor_times_python_complex_stays_on_the_host():
    a = trnfft.ComplexTensor(torch.tensor([1.0, 2.0]), torch.tensor([1.0, -1.0]))
    with trnfft.use_backend("simulator"):
        y = (a * (2 + 3j)).to_torch()
    np.testing.assert_array_equal(y.numpy(), np.array([1 + 1j, 2 - 1j]) * (2 + 3j))


# ------------------------------------------------------------------ large lengths: several kernel runs
# Four-step (n = n1 n2 beyond the Stockham kernel's SBUF plan) and Bluestein with m > 4096 are
# orchestrated on the host from the kernels above; the sub-transforms run over B n2 / B n1 rows
# (192 and 384 rows here: full 128-row tiles plus ragged ones). Small batches keep the emulator
# under a second per call.

def _summed(runs):
    tot = {}
    for r in runs:
        p = r.profile
        for k, v in {"hbm_read_bytes": p.hbm_read_bytes, "hbm_write_bytes": p.hbm_write_bytes,
                     "flops": p.flops, **p.instructions}.items():
            tot[k] = tot.get(k, 0) + v
    return tot


@pytest.mark.parametrize("fn,B,n,norm", [("fft", 3, 8192, "backward"), ("ifft", 2, 2**16, "ortho")])
def test_four_step_large_powers_of_two(fn, B, n, norm):
    from trnfft._nki import basic as N

    x = torch.randn(B, n, dtype=torch.complex64, generator=torch.Generator().manual_seed(n))
    with trnfft.use_backend("simulator"), nki.capture() as runs:
        y = getattr(trnfft, fn)(x, norm=norm)
    want = N.large_counts(B, n)
    n1, n2 = N.split(n)
    assert n1 * n2 == n and n1 <= 1024 and n2 <= 1024
    assert [r.kernel for r in runs] == want["kernels"] and want["kernels"][1] == "cmul_kernel"
    got = _summed(runs)
    assert {k: got.get(k) for k in want if k != "kernels"} == {k: v for k, v in want.items() if k != "kernels"}
    # the twiddle pass alone: four float32 planes of B n points in, two out
    cm = runs[1].profile
    assert (cm.hbm_read_bytes, cm.hbm_write_bytes) == (16 * B * n, 8 * B * n)
    ref = getattr(scipy.fft, fn)(x.numpy().astype(np.complex128), norm=norm)
    # four-step error: the two Stockham/GEMM sub-transform bounds plus ~3 u for the twiddle product
    assert _relerr(y.numpy(), ref) <= A.STOCKHAM_BOUND(n)
    with trnfft.use_backend("torch"):
        t = getattr(trnfft, fn)(x, norm=norm)
    assert _relerr(y.numpy(), t.numpy()) <= 2 * A.STOCKHAM_BOUND(n)


def test_bluestein_with_a_long_convolution_and_long_rfft():
    from trnfft._nki import basic as N

    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 4099, dtype=torch.complex64, generator=g)  # prime; m = 16384 > 4096
    assert KB.length(4099) == 16384 > KB.MAX_M
    with trnfft.use_backend("simulator"), nki.capture() as runs:
        y = trnfft.ifft(x, norm="ortho")
    want = N.large_counts(2, 4099)
    assert [r.kernel for r in runs] == want["kernels"]
    assert want["kernels"].count("cmul_kernel") == 5  # chirp, 2 twiddle passes, filter, chirp
    got = _summed(runs)
    assert {k: got.get(k) for k in want if k != "kernels"} == {k: v for k, v in want.items() if k != "kernels"}
    ref = scipy.fft.ifft(x.numpy().astype(np.complex128), norm="ortho")
    assert _relerr(y.numpy(), ref) <= A.BLUESTEIN_BOUND(4099)
    # rfft of n = 16384: n/2 beyond the half-length kernel, so the complex four-step of length n
    r = torch.randn(3, 16384, generator=g)
    with trnfft.use_backend("simulator"), nki.capture() as runs:
        y = trnfft.rfft(r)
    assert [k.kernel for k in runs] == N.large_counts(3, 16384)["kernels"]
    assert _relerr(y.numpy(), np.fft.rfft(r.numpy().astype(np.float64))) <= A.STOCKHAM_BOUND(16384)


@pytest.mark.parametrize("m,k,n,side", [(130, 70, 600, "both"), (3, 129, 5, "both"), (131, 9, 17, "a_real"),
                                        (7, 33, 130, "b_real")])
def test_complex_matmul_on_the_dft_gemm_kernel(m, k, n, side):
    """Issue 32: complex_matmul under a kernel backend is one real block GEMM on dft_gemm_kernel. Reference:
    NumPy complex128; bound: an fp32 k-term dot product per component (GEMM_BOUND(2k) of |a||b|); the
    profile's counters equal dft_gemm_counts(m, 2k, 2n, 4)."""
    from trnfft._nki.complex import _cmatmul_counts

    rng = np.random.default_rng(m + k + n)
    a = rng.standard_normal((m, k)) + (0 if side == "a_real" else 1j) * rng.standard_normal((m, k))
    b = rng.standard_normal((k, n)) + (0 if side == "b_real" else 1j) * rng.standard_normal((k, n))
    a, b = a.astype(np.complex64), b.astype(np.complex64)

    def arg(x, real):
        return torch.from_numpy(x.real.copy()) if real else trnfft.ComplexTensor(torch.from_numpy(x.real.copy()),
                                                                                 torch.from_numpy(x.imag.copy()))

    ta, tb = arg(a, side == "a_real"), arg(b, side == "b_real")
    with kernel_ran("dft_gemm_kernel") as runs:
        c = trnfft.complex_matmul(ta, tb)
    ref = a.astype(np.complex128) @ b.astype(np.complex128)
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    err = np.abs((c.real.numpy() + 1j * c.imag.numpy()) - ref) / scale
    assert err.max() <= A.GEMM_BOUND(2 * k)
    ar, br = torch.from_numpy(a.real.copy()), torch.from_numpy(b.real.copy())
    assert_counts(runs[0].profile, _cmatmul_counts(ar, None, br, None), ignore=("kernel",))
    # the torch path gives the same answer to the same bound
    c2 = trnfft.complex_matmul(ta, tb)
    assert (np.abs((c2.real.numpy() + 1j * c2.imag.numpy()) - ref) / scale).max() <= A.GEMM_BOUND(2 * k)
