"""Fast reads of environment variables on the per-call dispatch path.

Every operation consults a few variables (``TRNSCI_BACKEND``,
``TRN<LIB>_BACKEND``, ``TRNSCI_REQUIRE_NKI``) so that a change to
``os.environ`` takes effect at the next call. ``os.environ.get`` encodes
the key and decodes the value on every call (about a microsecond each);
on POSIX CPython the mapping keeps its bytes in ``os.environ._data``,
which we read directly with pre-encoded keys. Elsewhere we use the public
mapping. Both see every change made through ``os.environ``.
"""

from __future__ import annotations

import os

_data = getattr(os.environ, "_data", None)
_fast = os.name == "posix" and isinstance(_data, dict) and all(isinstance(k, bytes) for k in list(_data)[:1])
_keys: dict[str, bytes] = {}
_decoded: dict[bytes, str] = {}


def get(name: str) -> str:
    """The stripped value of ``name``, or ``""`` when unset."""
    if not _fast:
        return os.environ.get(name, "").strip()
    key = _keys.get(name)
    if key is None:
        key = _keys[name] = os.fsencode(name)
    raw = _data.get(key)
    if raw is None:
        return ""
    value = _decoded.get(raw)
    if value is None:
        if len(_decoded) > 256:
            _decoded.clear()
        value = _decoded[raw] = os.fsdecode(raw).strip()
    return value


def reader(names: tuple[str, ...]):
    """A function of no arguments returning ``(name, value)`` for the first of ``names`` set to a
    non-blank value (stripped, as :func:`get`), else ``None``.

    The same reads as calling :func:`get` on each name, with the keys
    encoded once: :func:`trnsci.backend.resolve` runs this on every call.
    """
    names = tuple(names)
    if not _fast:
        def read_slow():
            for name in names:
                value = get(name)
                if value:
                    return name, value
            return None
        return read_slow
    pairs = tuple((os.fsencode(name), name) for name in names)
    data_get = _data.get

    def read():
        for key, name in pairs:
            if data_get(key) is not None:  # usually none is set: one dict probe per name
                value = get(name)
                if value:
                    return name, value
        return None

    return read


def raw_keys(names: tuple[str, ...]) -> tuple[bytes, ...] | None:
    """The keys of ``names`` in ``os.environ``'s byte mapping (``_data``), for presence probes
    (``_data.get(key) is None``: unset); ``None`` where that mapping is not used (not POSIX)."""
    return tuple(os.fsencode(name) for name in names) if _fast else None


_TRUE = ("1", "true", "yes", "on")
_flags: dict[str, bool] = {}


def flag(name: str) -> bool:
    """True when ``name`` is set to ``1``, ``true``, ``yes`` or ``on`` (any case, spaces ignored).

    Read afresh on every call like :func:`get`; only the parsing of a value
    seen before is cached.
    """
    if _fast:  # the usual answer (unset) with one dict probe
        key = _keys.get(name)
        if key is not None and _data.get(key) is None:
            return False
    value = get(name)
    if not value:
        return False
    on = _flags.get(value)
    if on is None:
        if len(_flags) > 64:
            _flags.clear()
        on = _flags[value] = value.lower() in _TRUE
    return on
