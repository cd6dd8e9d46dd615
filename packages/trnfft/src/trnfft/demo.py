"""trnfft's part of ``trnsci demo``: its NKI kernels at small, ragged shapes (:func:`kernel_cases`).

Run with ``trnsci demo --kernels-only``; every case goes through trnfft's
public functions, once on the torch path (``torch.fft``) and once with
backend ``"simulator"`` (the kernel on the NumPy NKI emulator).
"""

from __future__ import annotations

import torch

from trnsci.demo import KernelCase

__all__ = ["kernel_cases"]


def kernel_cases() -> list[KernelCase]:
    """trnfft's demo kernels: one case per kernel route of a 1-D transform, plus the complex multiply.

    Batches are 130 or 7 rows (one full 128-row tile plus a ragged one, or
    one ragged tile); the lengths pick the routes of
    :func:`trnfft._nki.basic.algorithm`: 48 and 97 (DFT-as-GEMM: powers of two up
    to 512, other lengths up to 2048, where the cost model puts it ahead of
    Stockham and Bluestein), 1024 (power of two, Stockham) and real 200-row
    input of length 256 (the half-length real kernel).

    Tolerances bound ``max|kernel - torch| / max(1, max|torch|)``. Both paths
    are float32, so each bound is twice the kernel algorithm's worst-case
    float32 bound on the relative error (``trnfft.algorithms``, with
    ``u = 2**-24``): DFT-GEMM ``2 n u``, Stockham ``8 u log2 n``; the real kernel adds ~3 u to its Stockham transform of
    length n/2, rounded up to the Stockham bound of n. Complex multiply is
    elementwise (``ac - bd``, ``ad + bc``): a few ulp of |a||b|, 1e-6.
    ``istft`` (n_fft 64, hop 16, Hann window: R = 4 frames per sample, the
    envelope >= 0.5 on the kept range) is the half-length inverse per frame
    then the overlap-add: <= 2 (R Stockham(64) / 0.5 + (R + 2) u).

    Examples
    --------
    >>> from trnsci.demo import run_kernel_case
    >>> from trnfft.demo import kernel_cases
    >>> case = kernel_cases()[0]
    >>> case.name
    'fft dft-gemm'
    >>> r = run_kernel_case(case)
    >>> r["ok"], r["kernels"]
    (True, ['dft_gemm_kernel'])
    """
    import trnfft
    from trnfft import algorithms as A

    g = torch.Generator().manual_seed(11)

    def crnd(*shape):
        return torch.complex(torch.randn(*shape, generator=g), torch.randn(*shape, generator=g))

    x48, x1024, x97 = crnd(130, 48), crnd(129, 1024), crnd(7, 97)
    r256 = torch.randn(200, 256, generator=g)
    w64 = torch.hann_window(64)
    spec = torch.stft(torch.randn(3, 1000, generator=g), 64, 16, window=w64, return_complex=True)
    a = trnfft.ComplexTensor(torch.randn(130, 70, generator=g), torch.randn(130, 70, generator=g))
    b = trnfft.ComplexTensor(torch.randn(130, 70, generator=g), torch.randn(130, 70, generator=g))
    return [
        KernelCase("trnfft", "fft dft-gemm", "130 x n=48 complex64", lambda: trnfft.fft(x48),
                   2 * A.GEMM_BOUND(48), ("dft_gemm_kernel",)),
        KernelCase("trnfft", "fft stockham", "129 x n=1024 complex64", lambda: trnfft.fft(x1024),
                   2 * A.STOCKHAM_BOUND(1024), ("fft_pow2_kernel",)),
        KernelCase("trnfft", "ifft stockham", "129 x n=1024 complex64, norm=ortho",
                   lambda: trnfft.ifft(x1024, norm="ortho"), 2 * A.STOCKHAM_BOUND(1024), ("fft_pow2_kernel",)),
        KernelCase("trnfft", "fft prime", "7 x n=97 (prime: DFT-GEMM) complex64", lambda: trnfft.fft(x97),
                   2 * A.GEMM_BOUND(97), ("dft_gemm_kernel",)),
        KernelCase("trnfft", "rfft half", "200 x n=256 float32 -> 129 bins", lambda: trnfft.rfft(r256),
                   2 * A.STOCKHAM_BOUND(256), ("rfft_kernel",)),
        KernelCase("trnfft", "complex mul", "130x70 split complex float32", lambda: (a * b).to_torch(),
                   1e-6, ("cmul_kernel",)),
        KernelCase("trnfft", "istft", "3 x 63 frames, n_fft=64 hop=16 hann",
                   lambda: trnfft.istft(spec, 64, 16, window=w64),
                   2 * (4 * A.STOCKHAM_BOUND(64) / 0.5 + 6 * A.U32), ("irfft_kernel", "overlap_add_kernel")),
    ]
