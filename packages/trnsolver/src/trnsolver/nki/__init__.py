"""The published module path ``trnsolver.nki`` (backend switches, ``HAS_NKI``): see :mod:`trnsolver.nki.dispatch`."""

from trnsolver.nki.dispatch import *  # noqa: F403
from trnsolver.nki.dispatch import __all__  # noqa: F401
