"""The published module path ``trnsolver.nki.dispatch``, kept importable: thin aliases onto today's API.

``set_backend``/``get_backend`` are :func:`trnsolver.set_backend`/:func:`trnsolver.get_backend`
(``"pytorch"`` is accepted as an alias of ``"torch"``; ``"simulator"`` runs the
kernels on the emulator); ``HAS_NKI`` is True when AWS's NKI package is importable.
The kernels themselves live in ``trnsolver.kernels`` and run through the library's public
functions.
"""

from trnsci.nki import HAS_NKI
from trnsolver import get_backend, set_backend

__all__ = ["HAS_NKI", "set_backend", "get_backend"]
