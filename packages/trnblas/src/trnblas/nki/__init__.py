"""The published module path ``trnblas.nki`` (backend switches, ``HAS_NKI``): see :mod:`trnblas.nki.dispatch`."""

from trnblas.nki.dispatch import *  # noqa: F403
from trnblas.nki.dispatch import __all__  # noqa: F401
