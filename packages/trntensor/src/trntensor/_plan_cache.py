"""The plan cache: the plans :func:`trntensor.plan._plan` built, least recently used dropped first.

Keyed by ``(subscripts, shapes, dtypes, device, precision, optimize, memory_limit)``;
:mod:`trntensor._host` empties the routes each cached plan keeps when :mod:`trnsci.routes` changes.
"""

from __future__ import annotations

import collections
import threading

__all__ = ["clear_plan_cache", "plan_cache_info"]

_CACHE_MAX = 512
_cache: collections.OrderedDict = collections.OrderedDict()
_lock = threading.Lock()
_stats = {"hits": 0, "misses": 0}


def clear_plan_cache() -> None:
    """Empty the plan cache and reset its hit/miss counters.

    Examples
    --------
    >>> import trntensor
    >>> trntensor.clear_plan_cache()
    >>> trntensor.plan_cache_info()["size"]
    0
    """
    with _lock:
        _cache.clear()
        _stats["hits"] = _stats["misses"] = 0


def plan_cache_info() -> dict:
    """Counters of the plan cache: ``hits``, ``misses``, ``size``, ``maxsize``.

    Plans are cached by ``(subscripts, shapes, dtypes, device, precision,
    optimize, memory_limit)``; the least recently used plan is dropped once
    ``maxsize`` plans are held.

    Examples
    --------
    >>> import torch, trntensor
    >>> trntensor.clear_plan_cache()
    >>> A = torch.ones(2, 3)
    >>> _ = trntensor.einsum("ij->ji", A); _ = trntensor.einsum("ij->ji", A)
    >>> info = trntensor.plan_cache_info()
    >>> (info["hits"], info["misses"], info["size"])
    (1, 1, 1)
    """
    with _lock:
        return {"hits": _stats["hits"], "misses": _stats["misses"], "size": len(_cache), "maxsize": _CACHE_MAX}

