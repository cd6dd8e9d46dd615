"""The published module path ``trntensor.nki`` (backend switches, ``HAS_NKI``): see :mod:`trntensor.nki.dispatch`."""

from trntensor.nki.dispatch import *  # noqa: F403
from trntensor.nki.dispatch import __all__  # noqa: F401
