"""The published module path ``trnrand.nki`` (backend switches, ``HAS_NKI``): see :mod:`trnrand.nki.dispatch`."""

from trnrand.nki.dispatch import *  # noqa: F403
from trnrand.nki.dispatch import __all__  # noqa: F401
