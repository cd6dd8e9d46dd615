"""Keep NumPy's BLAS single-threaded while a kernel is emulated.

Tile matmuls are at most 128 x 128 x 512, where OpenBLAS's thread start-up
costs more than the arithmetic, and on a busy 2-core box a multi-threaded
BLAS is several times slower than a single thread.  The setting is restored
when the kernel returns.  Best effort: where the library cannot be found
(non-Linux, other BLAS), nothing changes.
"""

import contextlib
import ctypes
import os
import threading

_api = None


def _find():
    global _api
    if _api is not None:
        return _api
    _api = ()
    if os.environ.get("TRNSCI_EMULATOR_BLAS_THREADS", "1") == "keep":
        return _api
    try:
        import numpy  # noqa: F401  (make sure its BLAS is loaded)

        with open("/proc/self/maps") as f:
            paths = {ln.split()[-1] for ln in f if "openblas" in ln.lower() and ".so" in ln}
    except OSError:
        return _api
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix, suffix in (
            ("scipy_openblas", "64_"),
            ("scipy_openblas", ""),
            ("openblas", "64_"),
            ("openblas", ""),
        ):
            setter = getattr(lib, f"{prefix}_set_num_threads{suffix}", None)
            getter = getattr(lib, f"{prefix}_get_num_threads{suffix}", None)
            if setter is not None and getter is not None:
                setter.argtypes = [ctypes.c_int]
                getter.restype = ctypes.c_int
                _api = (setter, getter)
                return _api
    return _api


_lock = threading.Lock()
_depth = 0
_saved = None


@contextlib.contextmanager
def blas_threads(n=None):
    """Limit BLAS threads to n (default TRNSCI_EMULATOR_BLAS_THREADS or 1).

    Re-entrant and thread-safe: kernels emulated at the same time in several
    threads share one limit, and the caller's setting comes back when the
    last of them returns.
    """
    global _depth, _saved
    api = _find()
    if not api:
        yield
        return
    if n is None:
        n = int(os.environ.get("TRNSCI_EMULATOR_BLAS_THREADS", "1"))
    setter, getter = api
    with _lock:
        if _depth == 0:
            _saved = getter()
            setter(n)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                setter(_saved)
