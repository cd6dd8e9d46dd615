"""istft on the device: the inverse transform of the frames, then the overlap-add kernel.

References: torch.istft (ATen's own overlap-add) for the public function, and
a NumPy float64 overlap-add for the kernel alone. Tolerances: float32 data;
each output sample is a sum of R = ceil(n_fft / hop) windowed frame samples
divided by the envelope, so the kernel alone agrees with float64 to ~(R + 2) u
relative to the terms (u = 2**-24): 1e-6 relative to the output's max; the
whole istft adds the inverse transform's float32 error (DFT-GEMM /
half-length Stockham bounds of trnfft.algorithms, ~1e-6 for n_fft <= 256):
2e-6 absolute on unit-variance signals.
"""

import numpy as np
import pytest
import torch

import trnfft
from trnfft.kernels import overlap_add as KO
from trnsci import nki
from trnsci.dispatch import plan_call
from trnsci.testing import assert_counts, assert_plan_matches_run

pytestmark = pytest.mark.simulator

G = torch.Generator().manual_seed(7)

# (L, n_fft, hop, win_length, center, length, normalized, return_complex, batch): ragged sizes, several
# output tiles (F > 128 frames), hop not dividing n_fft, win_length < n_fft, trimming and padding
CASES = [
    (203, 20, 7, 15, True, 210, False, False, None),
    (1000, 64, 16, 64, True, None, True, False, 3),
    (300, 32, 8, 32, True, None, False, True, 2),
    (2000, 24, 5, 24, True, None, False, False, None),  # F = 401 frames: 4 output tiles, R = 5
    (999, 100, 37, 100, False, 900, False, False, 2),
    (999, 100, 37, 90, True, 1010, False, False, None),  # trimmed, then zero-padded to length
]


def _signal(L, complex_, batch):
    shape = (batch, L) if batch else (L,)
    if complex_:
        return torch.complex(torch.randn(shape, generator=G), torch.randn(shape, generator=G))
    return torch.randn(shape, generator=G)


@pytest.mark.parametrize("L, n_fft, hop, wl, center, length, normalized, rc, batch", CASES)
def test_istft_simulator_vs_torch(L, n_fft, hop, wl, center, length, normalized, rc, batch):
    w = torch.hann_window(wl) + 0.1  # + 0.1: NOLA holds also without center padding
    S = torch.stft(_signal(L, rc, batch), n_fft, hop, wl, w, center=center, normalized=normalized,
                   onesided=not rc, return_complex=True)
    kw = dict(center=center, normalized=normalized, onesided=not rc, length=length, return_complex=rc)
    with trnfft.use_backend("simulator"):
        plan, y, runs = assert_plan_matches_run(trnfft.istft, S, n_fft, hop, wl, w, **kw)
    assert plan.backend == "simulator" and [r.kernel for r in runs][-1] == "overlap_add_kernel"
    assert len(runs) == 2 and plan.kernel["kernels"] == [r.kernel for r in runs]
    ref = torch.istft(S, n_fft, hop, wl, w, **kw)
    assert y.shape == ref.shape and y.dtype == ref.dtype
    assert float((y - ref).abs().max()) <= 2e-6


def test_plan_lists_both_launches():
    w = torch.hann_window(16)
    S = torch.stft(torch.randn(200, generator=G), 16, 4, window=w, return_complex=True)
    with trnfft.use_backend("simulator"):
        p = plan_call(trnfft.istft, S, 16, 4, window=w)
    assert p.kernel["kernels"] == ["irfft_kernel", "overlap_add_kernel"]
    assert "launches: irfft_kernel -> overlap_add_kernel" in str(p)


def _ola_reference(frames, w, hop, ienv):
    NB, F, n = frames.shape
    S, _ = ienv.shape
    y = np.zeros((NB, S * hop))
    for t in range(F):
        y[:, t * hop:t * hop + n] += w[:n] * frames[:, t, :].astype(np.float64)
    return (y * ienv.reshape(-1)).reshape(NB, S, hop)


@pytest.mark.parametrize("NB, F, n, hop", [(2, 300, 100, 37), (1, 5, 16, 16), (3, 130, 50, 7)])
def test_overlap_add_kernel_vs_numpy_and_closed_form(NB, F, n, hop):
    r = np.random.default_rng(NB * F + n)
    R, Rh, S, _ = KO.plan(F, n, hop)
    frames = r.standard_normal((NB, F, n)).astype(np.float32)
    w = np.zeros(Rh, np.float32)
    w[:n] = r.uniform(0.5, 1.5, n)
    ienv = r.uniform(0.5, 2.0, (S, hop)).astype(np.float32)
    y, prof = nki.profile(KO.overlap_add_kernel, frames, w.reshape(1, Rh), ienv)
    ref = _ola_reference(frames, w.astype(np.float64), hop, ienv.astype(np.float64))
    assert np.abs(y - ref).max() <= 1e-6 * np.abs(ref).max() * R
    assert_counts(prof, KO.overlap_add_counts(NB, F, n, hop))


def test_limits_and_nola_plan_on_torch():
    S = torch.stft(torch.randn(4000, generator=G), 2048, 1024, window=torch.hann_window(2048), return_complex=True)
    with trnfft.use_backend("simulator"):
        assert "hop_length=1024 > 512" in plan_call(trnfft.istft, S, 2048, 1024,
                                                    window=torch.hann_window(2048)).reason
        # hann without center padding: the envelope is 0 at sample 0 -> torch raises, plan says so
        S2 = torch.stft(torch.randn(300, generator=G), 32, 8, window=torch.hann_window(32), center=False,
                        return_complex=True)
        p = plan_call(trnfft.istft, S2, 32, 8, window=torch.hann_window(32), center=False)
        assert p.backend == "torch" and "NOLA" in p.reason
        with pytest.raises(ValueError, match="istft"):
            trnfft.istft(S2, 32, 8, window=torch.hann_window(32), center=False)


def test_kahan_and_double_plans_say_why_not():
    x = torch.randn(3, 64, dtype=torch.complex64, generator=G)
    with trnfft.use_backend("simulator"):
        d = plan_call(trnfft.fft, x, precision="double")
        k = plan_call(trnfft.ifft, x, precision="kahan")
    assert d.backend == "torch" and "float64" in d.reason and "exact fp32 products" in d.reason
    assert k.backend == "torch" and "compensated" in k.reason and "no kernel" in k.reason
