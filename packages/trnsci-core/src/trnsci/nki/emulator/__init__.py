"""NumPy emulator of the NKI subset trnsci kernels use (see docs/emulator.md).

Public interface::

    from trnsci.nki.emulator import nki, nl, nisa, KernelProfile, simulate, profile, NkiValidationError

* ``nki.jit(fn)`` wraps a kernel; calling it runs the emulator.
* ``nki.simulate(kernel)(*arrays, **kw)`` / ``simulate(kernel, *arrays, **kw)``
  return the kernel's outputs as NumPy arrays.
* ``profile(kernel, *arrays, target="trn1", **kw)`` returns
  ``(outputs, KernelProfile)``: exact counters plus modeled time.
"""

from . import nisa, nl
from ._table import INSTRUCTIONS
from .errors import EmulatorError, NkiValidationError, NotEmulatedError, RemovedAPIError
from .jit import Kernel, _make_nki_namespace, jit, profile, simulate, simulate_kernel
from .numerics import bf16_products, bf16_products_mode
from .profile import TARGETS, KernelProfile, Target

nki = _make_nki_namespace(nl, nisa)

#: The NKI release the emulator models: NKI 0.6.0 (Neuron 2.32) names, signatures and rules, plus the
#: NKI 0.7.0 (Neuron 2.33) additions (tiled/blocked layouts, prepare/trigger collective names; docs/emulator.md)
NKI_VERSION = "0.7.0"
#: Kernels written for these releases run unchanged.
NKI_VERSIONS = ("0.6.0", "0.7.0")

__all__ = [
    "nki",
    "nl",
    "nisa",
    "KernelProfile",
    "simulate",
    "profile",
    "EmulatorError",
    "NkiValidationError",
    "NotEmulatedError",
    "RemovedAPIError",
    "INSTRUCTIONS",
    "Kernel",
    "jit",
    "simulate_kernel",
    "TARGETS",
    "Target",
    "NKI_VERSION",
    "NKI_VERSIONS",
    "bf16_products",
    "bf16_products_mode",
]
