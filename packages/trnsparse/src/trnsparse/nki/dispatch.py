"""The published module path ``trnsparse.nki.dispatch``, kept importable: thin aliases onto today's API.

``set_backend``/``get_backend`` are :func:`trnsparse.set_backend`/:func:`trnsparse.get_backend`
(``"pytorch"`` is accepted as an alias of ``"torch"``; ``"simulator"`` runs the
kernels on the emulator); ``HAS_NKI`` is True when AWS's NKI package is importable.
The kernels themselves live in ``trnsparse.kernels`` and run through the library's public
functions.
"""

from trnsci.nki import HAS_NKI
from trnsparse import get_backend, set_backend

__all__ = ["HAS_NKI", "set_backend", "get_backend"]
