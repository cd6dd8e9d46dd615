"""trnfft's torch path against torch.fft, scipy.fft and numpy.fft in the same run.

Run: ``pytest packages/trnfft/benchmarks/bench_fft_torch.py --benchmark-enable --benchmark-only``
(grouped by case; compare the rows of a group). Each implementation gets
the same data in its own kind (tensors for trnfft/torch, arrays for SciPy/NumPy).
"""

import numpy as np
import pytest
import scipy.fft as sf
import torch

import trnfft

CASES = {
    # name: (shape, dtype, functions per implementation)
    "fft pow2 64x4096 c64": ((64, 4096), np.complex64, "fft"),
    "fft prime 64x4099 c64": ((64, 4099), np.complex64, "fft"),
    "fft smooth 64x1000 c64": ((64, 1000), np.complex64, "fft"),
    "fft pow2 64x4096 c128": ((64, 4096), np.complex128, "fft"),
    "fft prime 64x4099 c128": ((64, 4099), np.complex128, "fft"),
    "rfft pow2 64x4096 f32": ((64, 4096), np.float32, "rfft"),
    "rfft prime 64x4099 f64": ((64, 4099), np.float64, "rfft"),
    "fft2 batched 8x256x256 c64": ((8, 256, 256), np.complex64, "fft2"),
    "fftn 3-D 64^3 c128": ((64, 64, 64), np.complex128, "fftn"),
    "rfftn 3-D 48x60x64 f32": ((48, 60, 64), np.float32, "rfftn"),
}

IMPLS = {
    "trnfft": (lambda name: getattr(trnfft, name), True),
    "torch.fft": (lambda name: getattr(torch.fft, name), True),
    "scipy.fft": (lambda name: getattr(sf, name), False),
    "numpy.fft": (lambda name: getattr(np.fft, name), False),
}


def _data(shape, dtype):
    r = np.random.default_rng(0)
    a = r.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * r.standard_normal(shape)
    return a.astype(dtype)


@pytest.mark.parametrize("impl", list(IMPLS))
@pytest.mark.parametrize("case", list(CASES))
def test_bench_fft(benchmark, case, impl):
    shape, dtype, fname = CASES[case]
    get, wants_tensor = IMPLS[impl]
    a = _data(shape, dtype)
    x = torch.from_numpy(a) if wants_tensor else a
    fn = get(fname)
    benchmark.group = case
    out = benchmark(fn, x)
    ref = getattr(np.fft, fname)(a.astype(np.complex128 if a.dtype.kind == "c" else np.float64))
    got = out.numpy() if isinstance(out, torch.Tensor) else out
    assert np.abs(got - ref).max() <= 1e-4 * np.abs(ref).max()  # float32 peers included: loose sanity check
