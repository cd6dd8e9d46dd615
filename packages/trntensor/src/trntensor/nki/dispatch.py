"""The published path ``trntensor.nki.dispatch``: its backend switches and ``HAS_NKI`` (docs/migration.md)."""

from trnsci.nki import HAS_NKI
from trntensor import get_backend, set_backend

__all__ = ["HAS_NKI", "set_backend", "get_backend"]
