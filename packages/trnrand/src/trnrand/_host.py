"""trnrand's CPU routes of THE stream: compiled (numba) or NumPy, and one draw's chunks serial or threaded.

:data:`_JIT` is the compiled route (:mod:`trnrand._philox_jit`, the ``jit`` extra) when numba is installed,
else None: :mod:`trnrand._philox` then runs its NumPy passes. Both give the same words; tests switch it off
to compare them. Whether the chunks of one NumPy draw run on several threads is a measured route of
:mod:`trnsci.routes` (family ``"trnrand.stream"``, :func:`_route`).
"""

from __future__ import annotations

import threading

import torch

from . import _philox_jit

#: The compiled route (numba, the ``jit`` extra) when installed, else None: the NumPy passes of
#: :mod:`trnrand._philox`. Both give the same words; tests switch it off to compare them.
_JIT = _philox_jit if _philox_jit.AVAILABLE else None


# ---- chunks on several threads --------------------------------------------------------------------------------
#
# NumPy's ufuncs release the GIL inside their loops, and a chunk spends most of its time in them: the chunks
# of one draw can run on torch's thread count of Python threads, each with its own buffers (``_plan`` and
# ``_scratch`` are per thread). Whether that pays depends on the machine and its load, so it is a measured
# route (trnsci.routes): per sink kind, chunk-count class and thread count (docs/perf-notes.md#design-trnrand-host).
_pool = None
_pool_size = 0
_pool_lock = threading.Lock()


def _executor(workers: int):
    """The process's worker threads (replaced by a larger pool on demand; idle workers cost nothing)."""
    global _pool, _pool_size
    import concurrent.futures

    with _pool_lock:
        if _pool_size < workers:
            old = _pool
            _pool, _pool_size = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="trnrand"), workers
            if old is not None:
                old.shutdown(wait=False)  # its queued groups still run; it takes no new ones
        return _pool


def _threaded(chunks, args, spans) -> None:
    """``chunks(args, spans)`` on torch.get_num_threads() contiguous groups of ``spans``; group 0 on this thread."""
    nt = min(torch.get_num_threads(), len(spans))
    cut = [len(spans) * i // nt for i in range(nt + 1)]
    groups = [spans[cut[i]:cut[i + 1]] for i in range(nt)]
    futures = [_executor(nt - 1).submit(chunks, args, g) for g in groups[1:]]
    try:
        chunks(args, groups[0])
    finally:
        for f in futures:
            f.result()  # waits for every group; re-raises a worker's error


_ROUTE_CHUNKS = 8  # chunk-count classes 2, 4, 8 (8: any larger draw), each timed on at most its first 8 chunks


def _route(kind: str, chunks, args, spans) -> str:
    """"serial" or "threads" for a draw of ``len(spans)`` chunks run by ``chunks(args, spans)``, measured once per
    key (both write the same).

    The timing runs the draw's first chunks (at most _ROUTE_CHUNKS): past a few chunks per thread the
    split costs the same per chunk, and a huge draw is not computed a dozen times to choose.
    """
    from trnsci import routes

    cls = (kind, min(1 << (len(spans) - 1).bit_length(), _ROUTE_CHUNKS))
    head = spans[:_ROUTE_CHUNKS]
    return routes.choose("trnrand.stream", cls, {"serial": lambda: chunks(args, head),
                                                "threads": lambda: _threaded(chunks, args, head)},
                         default="serial", robust=True).route
