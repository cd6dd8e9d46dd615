"""The published path ``trnrand.nki.dispatch``: its backend switches and ``HAS_NKI`` (docs/migration.md)."""

from trnrand import get_backend, set_backend
from trnsci.nki import HAS_NKI

__all__ = ["HAS_NKI", "set_backend", "get_backend"]
