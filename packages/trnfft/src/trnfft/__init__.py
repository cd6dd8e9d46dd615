"""trnfft: cuFFT for AWS Trainium -- FFTs of any size and dimension, real FFTs, STFT.

Every transform accepts a :class:`ComplexTensor` (split real/imaginary, the
layout NeuronCores compute in), a torch tensor (real or complex) or a NumPy
array, and returns the matching kind (see :mod:`trnfft.basic`). Every
transform is a :class:`trnsci.dispatch.Op` with a torch lowering and, for
every transform, stft and the complex multiply, an NKI lowering
(:mod:`trnfft._nki`: DFT-as-GEMM, Stockham, Bluestein, half-length real
forward and inverse kernels); plans say which runs and why
(``create_plan(...).backend``, ``.algorithms``).
"""

from trnsci.backend import bind as _bind
from trnsci.dispatch import load_lowerings as _load_lowerings
from trnsci.libinfo import library_version as _library_version
from trnsci.nki import HAS_NKI

from . import nn
from .basic import fft, fft2, fftn, ifft, ifft2, ifftn
from .complex import ComplexTensor, complex_matmul
from .helpers import fftfreq, fftshift, ifftshift, rfftfreq
from .plan import FFTPlan, clear_plan_cache, create_plan
from .precision import get_precision, set_ozaki_product_precision_verified, set_precision, use_precision
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
    "set_ozaki_product_precision_verified",
    # layers
    "nn",
]

# The NKI lowerings live in the package trnfft._nki (one module per family) and register on the Ops above;
# imported last (a broken kernel module warns and leaves the torch path running).
_load_lowerings("trnfft")
