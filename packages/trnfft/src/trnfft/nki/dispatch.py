"""The published module path ``trnfft.nki.dispatch``, kept importable: thin aliases onto today's API.

``set_backend``/``get_backend`` are :func:`trnfft.set_backend`/:func:`trnfft.get_backend`
(``"pytorch"`` is accepted as an alias of ``"torch"``; ``"simulator"`` runs the
kernels on the emulator); ``HAS_NKI`` is True when AWS's NKI package is importable.
The kernels themselves live in ``trnfft.kernels`` and run through the library's public
functions.
"""

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
