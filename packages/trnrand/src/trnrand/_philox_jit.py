"""The compiled CPU route of THE stream, when numba is installed (``pip install trnrand[jit]``), loaded lazily.

:data:`AVAILABLE` says whether numba can be imported (found without importing it); the kernels of
:mod:`trnrand._philox_numba` -- ``lanes_prods``, ``uniform32``, ``uniform64``, ``normal32_prep``,
``normal32_finish``, ``key_array`` -- are attributes of this module, imported on first use, so ``import
trnrand`` does not pay numba's import. They give the NumPy route's bits (see that module).
"""

from __future__ import annotations

import importlib
import importlib.util

AVAILABLE = importlib.util.find_spec("numba") is not None

_NAMES = ("lanes_prods", "uniform32", "uniform64", "normal32_prep", "normal32_finish", "key_array")


def __getattr__(name: str):
    if name in _NAMES and AVAILABLE:
        mod = importlib.import_module("trnrand._philox_numba")
        for n in _NAMES:
            globals()[n] = getattr(mod, n)
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
