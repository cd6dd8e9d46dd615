"""The published path ``trnfft.nki.dispatch``: its backend switches and ``HAS_NKI`` (docs/migration.md)."""

from trnfft import get_backend, set_backend
from trnfft.complex import ComplexTensor, complex_matmul
from trnsci.nki import HAS_NKI

complex_gemm = complex_matmul  # published name of the complex GEMM


def complex_mask_apply(mask: ComplexTensor, spec: ComplexTensor) -> ComplexTensor:
    """Elementwise complex product ``mask * spec`` (a spectrogram mask), as the published function."""
    return mask * spec


def complex_linear(x: ComplexTensor, w_real, w_imag) -> ComplexTensor:
    """``x @ W^T`` for complex ``W = w_real + i w_imag``, as the published function."""
    return complex_matmul(x, ComplexTensor(w_real.T, w_imag.T))


__all__ = ["HAS_NKI", "set_backend", "get_backend", "complex_gemm", "complex_mask_apply", "complex_linear"]
