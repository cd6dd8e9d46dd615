"""The published module path ``trnrand.nki.dispatch``, kept importable: thin aliases onto today's API.

``set_backend``/``get_backend`` are :func:`trnrand.set_backend`/:func:`trnrand.get_backend`
(``"pytorch"`` is accepted as an alias of ``"torch"``; ``"simulator"`` runs the
kernels on the emulator); ``HAS_NKI`` is True when AWS's NKI package is importable.
The kernels themselves live in ``trnrand.kernels`` and run through the library's public
functions.
"""

from trnrand import get_backend, set_backend
from trnsci.nki import HAS_NKI

__all__ = ["HAS_NKI", "set_backend", "get_backend"]
