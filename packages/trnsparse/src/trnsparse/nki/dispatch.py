"""The published path ``trnsparse.nki.dispatch``: its backend switches and ``HAS_NKI`` (docs/migration.md)."""

from trnsci.nki import HAS_NKI
from trnsparse import get_backend, set_backend

__all__ = ["HAS_NKI", "set_backend", "get_backend"]
