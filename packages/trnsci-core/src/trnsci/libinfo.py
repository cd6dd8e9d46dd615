"""Small helpers the six libraries share at import time."""

from __future__ import annotations

import importlib.metadata as md

from trnsci._version import __version__ as _suite_version


def library_version(dist: str) -> str:
    """The installed version of ``dist``; the suite's version when run from a source tree."""
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return _suite_version
