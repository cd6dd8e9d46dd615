"""The published module path ``trnfft.nki`` (backend switches, ``HAS_NKI``): see :mod:`trnfft.nki.dispatch`."""

from trnfft.nki.dispatch import *  # noqa: F403
from trnfft.nki.dispatch import __all__  # noqa: F401
