"""Host BLAS threads: trnsci's calls into NumPy's and SciPy's OpenBLAS run in the calling thread.

The torch path of several operations has a second CPU route through NumPy
or SciPy (``?potrf``, ``?gemm``, ``?syevd``, sparsetools, ...). Those
packages' wheels bundle OpenBLAS with a pool of worker threads of its own,
beside torch's OpenMP pool. After a multi-threaded call OpenBLAS's workers
keep spinning for a while waiting for more work; a torch call made in that
window with more than one thread waits at its OpenMP barrier for a core the
spinning worker holds (docs/perf-notes.md#design-openblas-spin).

So every trnsci route into NumPy/SciPy BLAS or LAPACK goes through
:func:`call` (or a function wrapped by :func:`serial`): every OpenBLAS
loaded in the process runs at one thread for the duration of the call (in
the caller's thread, no workers woken) and gets its previous setting back
afterwards. The rule holds at one torch thread too: a caller who set torch
to one thread asked for single-threaded work, and OpenBLAS threading a
large product by itself stalls at its own barrier when another process
holds the second core. Multi-threaded work is torch's: a host
candidate measured by :mod:`trnsci.routes` is timed through the same
wrapper, so it competes with its single-threaded cost against torch's
multi-threaded one. Pools already at one thread (``OMP_NUM_THREADS=1``,
``OPENBLAS_NUM_THREADS=1``) are only read, not set.

OpenBLAS is found in the process's loaded libraries (Linux:
``/proc/self/maps``) by its exported ``*openblas_set_num_threads*``
functions, whatever prefix or suffix the wheel gave them (NumPy's and
SciPy's wheels ship two separate copies). Elsewhere, or with another BLAS
(MKL, Accelerate), :func:`call` runs the function unchanged.
"""

from __future__ import annotations

import contextvars
import ctypes
import functools
import os
import sys
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

__all__ = ["call", "serial", "pools", "each_single_threaded", "OPENBLAS_ONE", "openblas_one_thread"]

F = TypeVar("F", bound=Callable[..., Any])

_SUFFIXES = ("", "64_", "_64")
_PREFIXES = ("scipy_openblas_", "openblas_")

_lock = threading.Lock()


def openblas_one_thread() -> bool:
    """Whether OpenBLAS runs single-threaded in this process: the first of ``OPENBLAS_NUM_THREADS``,
    ``GOTO_NUM_THREADS``, ``OMP_NUM_THREADS`` that is set (the order OpenBLAS reads them in when NumPy or
    SciPy load it) is ``1``, or the machine has one CPU."""
    for var in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"):
        value = os.environ.get(var, "").strip()
        if value:
            return value == "1"
    return os.cpu_count() == 1


#: :func:`openblas_one_thread` as it was when this module was imported (OpenBLAS reads the variables once,
#: when it loads): whether a host BLAS call runs on the calling thread whatever its size.
OPENBLAS_ONE: bool = openblas_one_thread()
_state: dict[str, Any] = {"modules": -1, "pools": (), "depth": 0, "saved": ()}


def _openblas_paths() -> list[str]:
    try:
        with open("/proc/self/maps") as f:
            return sorted({line.split(None, 5)[5].strip() for line in f
                           if line.count(" ") >= 5 and "openblas" in line.lower() and ".so" in line})
    except (OSError, IndexError):
        return []


def _controls(path: str):
    try:
        # RTLD_NOLOAD: a handle on the copy already loaded, never a second one. Not RTLD_GLOBAL: that would
        # promote the copy's BLAS symbols to the global scope, where a library loaded later (PySCF's
        # libnp_helper) can bind its dgemm_ to them (docs/perf-notes.md#design-openblas-spin)
        lib = ctypes.CDLL(path, mode=getattr(os, "RTLD_NOLOAD", 0))
    except OSError:
        return None
    for prefix in _PREFIXES:
        for suffix in _SUFFIXES:
            setter = getattr(lib, f"{prefix}set_num_threads{suffix}", None)
            getter = getattr(lib, f"{prefix}get_num_threads{suffix}", None)
            if setter is not None and getter is not None:
                setter.restype, getter.restype = None, ctypes.c_int
                setter.argtypes, getter.argtypes = [ctypes.c_int], []
                return getter, setter
    return None


def pools() -> tuple:
    """``(get_num_threads, set_num_threads)`` of every OpenBLAS loaded in this process.

    Looked up again whenever modules were imported since the last look
    (NumPy's OpenBLAS loads with NumPy, SciPy's with ``scipy.linalg``).
    """
    n = len(sys.modules)
    if _state["modules"] != n:
        found = tuple(c for c in (_controls(p) for p in _openblas_paths()) if c is not None)
        with _lock:
            _state["modules"], _state["pools"] = n, found
    return _state["pools"]


def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` with every OpenBLAS in the process at one thread.

    Nested and concurrent calls are counted: the first to enter lowers the
    pools that run more than one thread, the last to leave restores them.
    """
    ps = pools()
    if not ps:
        return fn(*args, **kwargs)
    with _lock:
        if _state["depth"] == 0:
            saved = [(put, was) for (get, put), was in zip(ps, [get() for get, _ in ps]) if was > 1]
            for put, _ in saved:
                put(1)
            _state["saved"] = saved
        _state["depth"] += 1
    try:
        return fn(*args, **kwargs)
    finally:
        with _lock:
            _state["depth"] -= 1
            if _state["depth"] == 0:
                for put, was in _state["saved"]:
                    put(was)
                _state["saved"] = ()


def serial(fn: F) -> F:
    """``fn`` wrapped so that each call goes through :func:`call`."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return call(fn, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


def each_single_threaded(fn: Callable[[Any], Any], items: Iterable, workers: int | None = None) -> None:
    """``fn(item)`` for every item, spread over ``workers`` Python threads (default: torch's thread
    count) that each run torch single-threaded.

    Where each item is a GEMM or C code that releases the GIL, the workers
    overlap without an OpenMP barrier per call -- on a small shared machine
    that beats one multi-threaded call per item. Each worker runs in a copy
    of the caller's context (its backend scope holds there). torch's
    thread count is restored afterwards. With one worker or one item the
    items run in the calling thread, torch's setting untouched.
    """
    import torch

    items = list(items)
    n = torch.get_num_threads()
    workers = min(n if workers is None else workers, len(items))
    if workers <= 1:
        for it in items:
            fn(it)
        return

    def work(ctx_item):
        ctx, it = ctx_item
        torch.set_num_threads(1)
        ctx.run(fn, it)

    torch.set_num_threads(1)
    try:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(work, [(contextvars.copy_context(), it) for it in items]))
    finally:
        torch.set_num_threads(n)
