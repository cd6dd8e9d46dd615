"""The published module path ``trnsparse.nki`` (backend switches, ``HAS_NKI``): see :mod:`trnsparse.nki.dispatch`."""

from trnsparse.nki.dispatch import *  # noqa: F403
from trnsparse.nki.dispatch import __all__  # noqa: F401
