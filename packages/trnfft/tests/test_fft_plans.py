"""Plan == run for every trnfft op with a kernel (trnsci.testing.assert_plan_matches_run):
the plan's backend is the backend the call used and, when the plan names a kernel, its
closed-form figures equal the emulator's counters -- including calls the kernels cannot
take (they must plan and run on torch, with the reason saying why)."""

import pytest
import torch

import trnfft
from trnfft.basic import FFT
from trnsci.dispatch import plan_call
from trnsci.testing import assert_plan_matches_run

pytestmark = pytest.mark.simulator

g = torch.Generator().manual_seed(0)
C = torch.randn(130, 64, dtype=torch.complex64, generator=g)
R = torch.randn(130, 64, generator=g)
CASES = [
    ("fft gemm", trnfft.fft, (C,), {}),
    ("fft stockham", trnfft.fft, (C[:3],), {"n": 256}),
    ("ifft bluestein", trnfft.ifft, (C[:2],), {"n": 97, "norm": "ortho"}),
    ("fftn one dim", trnfft.fftn, (C,), {"dim": (1,)}),
    ("fft2 two dims (no single-kernel counts)", trnfft.fft2, (C[:8, :8],), {}),
    ("ifftn", trnfft.ifftn, (C[:4],), {"s": (4, 16)}),
    ("rfft half", trnfft.rfft, (R,), {}),
    ("rfft odd -> c2c kernel", trnfft.rfft, (R[:3],), {"n": 45}),
    ("irfft", trnfft.irfft, (C[:3, :9],), {"n": 16}),
    # routing boundaries: DFT-GEMM for powers of two <= 512 and other n <= 2048 (trnfft._nki.basic)
    ("fft gemm at the power-of-two boundary", trnfft.fft, (C[:3],), {"n": 512}),
    ("fft stockham above it", trnfft.fft, (C[:3],), {"n": 1024}),
    ("fft gemm, non-power of two above 512", trnfft.fft, (C[:1],), {"n": 600}),
    ("fft above the non-power-of-two boundary: long bluestein", trnfft.fft, (C[:1],), {"n": 2049}),
    # irfft routes: fused half-length kernel, host pre-twiddle + half-length GEMM, odd n full length
    ("irfft half kernel, ragged", trnfft.irfft, (C,), {"n": 126}),
    ("irfft even n, half-length gemm", trnfft.irfft, (C[:3, :16],), {"n": 30}),
    ("irfft odd n, full length", trnfft.irfft, (C[:3, :9],), {"n": 17}),
    ("irfft bf16, half-length gemm", trnfft.irfft, (C[:3, :9],), {"n": 16, "precision": "bf16"}),
    ("irfft half length beyond the four-step plan", trnfft.irfft, (C[:1, :9],), {"n": 2**22}),
    ("bf16", trnfft.fft, (C[:3],), {"precision": "bf16"}),
    ("complex multiply", lambda a, b: a * b, (trnfft.ComplexTensor(R, R), trnfft.ComplexTensor(R, -R)), {}),
    ("complex matmul (one real block GEMM)", trnfft.complex_matmul,
     (trnfft.ComplexTensor(R, -R), trnfft.ComplexTensor(R[:64, :9], R[1:65, :9])), {}),
    ("four-step (several kernels, no single-kernel counts)", trnfft.fft, (C[:3],), {"n": 8192}),
    ("bluestein, long convolution (several kernels)", trnfft.ifft, (C[:1],), {"n": 4099}),
    ("rfftn of a length beyond the half kernel: four-step", trnfft.rfftn, (R[:1],), {"s": (16384,)}),
    # calls the kernels cannot take: planned and run on torch
    ("too long for the four-step plan", trnfft.fft, (C[:1],), {"n": 2**21}),
    ("kahan", trnfft.fft, (C[:3],), {"precision": "kahan"}),
    ("double", trnfft.ifft, (C[:3],), {"precision": "double"}),
    ("float64", trnfft.fft, (R.double(),), {}),
    ("empty", trnfft.fft, (torch.zeros(0, 8, dtype=torch.complex64),), {}),
    ("bluestein too long", trnfft.fft, (C[:1],), {"n": 2**19 + 1}),
    ("hfft", trnfft.hfft, (C[:3],), {}),
    ("ihfft", trnfft.ihfft, (R[:3],), {"norm": "ortho"}),
    ("rfft2 (one kernel per dim)", trnfft.rfft2, (R[:8, :8],), {}),
    ("irfftn one dim", trnfft.irfftn, (C[:3, :9],), {"s": (16,)}),
    ("irfftn two dims", trnfft.irfftn, (C[:4, :9],), {"s": (4, 16)}),
    ("rfftn length beyond the kernels", trnfft.rfftn, (R[:1],), {"s": (2**21,)}),
    ("stft", trnfft.stft, (R[:2],), {"n_fft": 16, "window": torch.hann_window(16)}),
    ("istft: inverse kernel, then overlap-add", trnfft.istft,
     (torch.stft(R[0], 16, window=torch.hann_window(16), return_complex=True),),
     {"n_fft": 16, "window": torch.hann_window(16)}),
    ("istft hop beyond a PSUM bank", trnfft.istft,
     (torch.stft(R[:24].reshape(-1), 1200, 600, window=torch.hann_window(1200), return_complex=True),),
     {"n_fft": 1200, "hop_length": 600, "window": torch.hann_window(1200)}),
]
TORCH_ONLY = {"too long for the four-step plan", "kahan", "double", "float64", "empty", "bluestein too long",
              "rfftn length beyond the kernels", "irfft half length beyond the four-step plan",
              "istft hop beyond a PSUM bank"}


@pytest.mark.parametrize("name,fn,args,kwargs", CASES, ids=[c[0] for c in CASES])
def test_plan_matches_run_under_simulator(name, fn, args, kwargs):
    with trnfft.use_backend("simulator"):
        plan, _, runs = assert_plan_matches_run(fn, *args, **kwargs)
    assert plan.backend == ("torch" if name in TORCH_ONLY else "simulator"), plan.reason
    if name in TORCH_ONLY and plan.op is not None:
        assert "simulator" in plan.reason  # the setting, and why the kernel was not used


def test_plan_reasons_name_the_limit():
    with trnfft.use_backend("simulator"):
        assert f"n <= {2**20}" in plan_call(trnfft.fft, C[:1], n=2**21).reason
        assert f"> {2**20}" in plan_call(trnfft.fft, C[:1], n=2**19 + 1).reason
        big = plan_call(trnfft.fft, C[:3], n=8192)  # several kernel runs: no single-kernel figures
        assert big.backend == "simulator" and big.kernel is None
        assert "kahan" in plan_call(trnfft.fft, C[:1], precision="kahan").reason
        assert "float64" in plan_call(trnfft.fft, R.double()).reason


def test_fftplan_backend_comes_from_the_op_decision():
    p = trnfft.create_plan((130, 64), kind="fft")
    with trnfft.use_backend("torch"):
        assert p.backend == "torch"
    with trnfft.use_backend("simulator"):
        assert p.backend == "simulator"
        assert p.dispatch_plan().kernel["name"] == "dft_gemm_kernel"
        _, _, runs = assert_plan_matches_run(p.execute, C)
        assert [r.kernel for r in runs] == ["dft_gemm_kernel"]
    with trnfft.use_backend("simulator"), FFT.override("nki", None):
        assert p.backend == "torch" and "no NKI kernel" in p.reason


def test_every_kernel_op_has_cases():
    from trnsci import dispatch

    with_kernel = {name for name, op in dispatch.ops("trnfft").items() if op.has_kernel}
    with trnfft.use_backend("simulator"):
        planned_on_kernel = {plan_call(fn, *args, **kwargs).op for name, fn, args, kwargs in CASES
                             if name not in TORCH_ONLY}
    assert with_kernel == planned_on_kernel


# FFTPlan.algorithms names what runs: under the simulator the NKI routing, one entry per axis
ALGORITHM_CASES = [
    ("fft", 512, ("dft_gemm",), ["dft_gemm_kernel"]),
    ("fft", 1024, ("stockham",), ["fft_pow2_kernel"]),
    ("fft", 2047, ("dft_gemm",), ["dft_gemm_kernel"]),
    ("ifft", 8192, ("four_step",), ["dft_gemm_kernel", "cmul_kernel", "dft_gemm_kernel"]),
    ("rfft", 128, ("real_half+stockham",), ["rfft_kernel"]),
    ("rfft", 30, ("dft_gemm",), ["dft_gemm_kernel"]),
    ("irfft", 128, ("real_half+stockham",), ["irfft_kernel"]),
    ("irfft", 30, ("real_half+dft_gemm",), ["dft_gemm_kernel"]),
    ("irfft", 17, ("dft_gemm",), ["dft_gemm_kernel"]),
    ("hfft", 16, ("real_half+stockham",), ["irfft_kernel"]),
]


@pytest.mark.parametrize("kind,n,algs,kernels", ALGORITHM_CASES, ids=[f"{c[0]}-{c[1]}" for c in ALGORITHM_CASES])
def test_fftplan_algorithms_name_what_runs(kind, n, algs, kernels):
    real_in, half_in = kind in ("rfft", "ihfft"), kind in ("irfft", "hfft")
    m = n // 2 + 1 if half_in else n
    p = trnfft.create_plan((2, m), kind=kind, s=n)
    x = torch.randn(2, m, dtype=torch.float32 if real_in else torch.complex64, generator=g)
    with trnfft.use_backend("simulator"):
        assert p.algorithms == algs and p.backend == "simulator"
        _, _, runs = assert_plan_matches_run(p.execute, x)
        assert [r.kernel for r in runs] == kernels
        assert algs[0] in repr(p)
    with trnfft.use_backend("torch"):  # torch: the reference algorithms (DFT-GEMM only up to 64 there)
        assert p.backend == "torch"
        if n == 512:
            assert p.algorithms == ("stockham",)
