"""trnfft: cuFFT for AWS Trainium -- FFTs of any size and dimension, real FFTs, STFT.

Every transform accepts a :class:`ComplexTensor` (split real/imaginary, the
layout NeuronCores compute in), a torch tensor (real or complex) or a NumPy
array, and returns the matching kind (see :mod:`trnfft.basic`). In this
release every operation runs on the torch path; plans say so
(``create_plan(...).backend``).
"""

from trnsci._libinfo import library_version as _library_version
from trnsci.backend import bind as _bind
from trnsci.nki import HAS_NKI

from . import nn
from .basic import fft, fft2, fftn, ifft, ifft2, ifftn
from .complex import ComplexTensor, complex_matmul
from .helpers import fftfreq, fftshift, ifftshift, rfftfreq
from .plan import FFTPlan, clear_plan_cache, create_plan
from .precision import get_precision, set_precision, use_precision
from .real import hfft, ihfft, irfft, irfft2, irfftn, rfft, rfft2, rfftn
from .stft import istft, stft

__version__ = _library_version("trnfft")
set_backend, get_backend, use_backend = _bind("trnfft")

__all__ = [
    "__version__", "set_backend", "get_backend", "use_backend", "HAS_NKI",
    # transforms
    "fft", "ifft", "rfft", "irfft", "hfft", "ihfft",
    "fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn", "irfftn",
    # helpers
    "fftfreq", "rfftfreq", "fftshift", "ifftshift",
    # short-time transforms
    "stft", "istft",
    # split-complex data
    "ComplexTensor", "complex_matmul",
    # plans and precision
    "create_plan", "clear_plan_cache", "FFTPlan", "set_precision", "get_precision", "use_precision",
    # layers
    "nn",
]
