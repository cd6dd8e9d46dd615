"""The torch path's routes, one per transform: torch.fft, Bluestein on torch.fft, or SciPy's pocketfft.

Every transform kind has up to three CPU implementations of the same
result:

* ``torch`` -- the obvious ``torch.fft`` call (MKL or pocketfft, as torch
  was built); always a candidate, and the route when nothing is measured;
* ``bluestein`` -- :mod:`trnfft._chirp`, a candidate when a transform
  length has a prime factor >= :data:`trnfft._chirp.MIN_PRIME` (where
  torch's algorithm cost grows with the factor);
* ``scipy`` -- ``scipy.fft`` with ``workers`` = torch's thread count, on
  CPU tensors (through NumPy views, no copy), called through
  :func:`trnsci.hostblas.call` as every route into SciPy.

Which is fastest depends on the machine, the build and the thread count
(no static rule held across machines: docs/perf-notes.md#design-bluestein),
so :func:`trnsci.routes.choose` times them where the code runs, once per
shape class -- kind, lengths, whether the last axis is transformed, batch
rounded up to a power of two, dtype (and, added by the core, the thread
count) -- for problems of at least
:data:`MEASURE_MIN_POINTS` points; smaller ones take ``torch`` untimed
(timing would cost more than any route could save). With more than one
torch thread the choice is also ``robust`` (:func:`trnsci.routes.pick`):
a candidate whose slowest round stalled longer than torch's -- a
multi-threaded call waiting for a core another process holds -- is not
taken. Under
``TRNSCI_ROUTES=estimate`` nothing is timed and ``torch`` runs.

:func:`route` returns the settled route for a canonical call as a
callable of the input; the Op's torch lowering and the public functions'
settled routes (:mod:`trnsci.settled`) run the same callable,
so a plan says what a call runs. A route that goes through NumPy falls
back to ``torch`` for inputs NumPy cannot view (autograd, conjugate
views, non-CPU devices).
"""

from __future__ import annotations

import functools
import math

import torch

from trnsci import dispatch, hostblas, routes

from . import _chirp as C
from . import _engine as E

MEASURE_MIN_POINTS = 1 << 15
"""Transforms with fewer points (batch x lengths) take torch.fft untimed."""

# kind -> (torch.fft function, real input?, real output?, n-D?)
_T = torch.fft
KINDS = {
    "fft": (_T.fft, False, False, False), "ifft": (_T.ifft, False, False, False),
    "rfft": (_T.rfft, True, False, False), "irfft": (_T.irfft, False, True, False),
    "hfft": (_T.hfft, False, True, False), "ihfft": (_T.rfft, True, False, False),
    "fftn": (_T.fftn, False, False, True), "ifftn": (_T.ifftn, False, False, True),
    "rfftn": (_T.rfftn, True, False, True), "irfftn": (_T.irfftn, False, True, True),
}


def _torch_call(kind: str, shape: tuple, s: tuple, dims: tuple, norm: str):
    """The plain torch.fft route as a callable of ``x``, with torch's defaults passed as None
    (torch then skips its resize and dim parsing)."""
    fn = KINDS[kind][0]
    nd = len(shape)
    if not KINDS[kind][3]:
        n, d = s[0], dims[0]
        if kind == "ihfft":  # torch's own ihfft returns a lazy conj (a copy to resolve): conj in place
            nn = None if n == shape[d] else n
            sw = E._SWAP_NORM[norm]
            return lambda x: fn(x, nn, d, sw).conj_physical_()
        half = kind in ("irfft", "hfft")
        default_n = 2 * (shape[d] - 1) if half else shape[d]
        nn = None if n == default_n else n
        if nn is None and d == nd - 1 and norm == "backward":
            return fn  # the bare call: nothing to add
        return lambda x: fn(x, nn, d, norm)  # positional: cheaper than a partial's keyword merge
    half = kind == "irfftn"
    lengths = [shape[d] for d in dims]
    if half:
        lengths[-1] = 2 * (lengths[-1] - 1)
    ss = None if tuple(lengths) == tuple(s) else s
    dd = None if dims == tuple(range(nd)) else dims
    if ss is None and dd is None and norm == "backward":
        return fn
    return lambda x: fn(x, ss, dd, norm)


def _bluestein_call(kind: str, s: tuple, dims: tuple, norm: str):
    if kind in ("fft", "ifft"):
        inv = kind == "ifft"
        return lambda x: C.c2c(x, s[0], dims[0], norm, inv)
    if kind == "rfft":
        return lambda x: C.r2c(x, s[0], dims[0], norm)
    if kind == "irfft":
        return lambda x: C.c2r(x, s[0], dims[0], norm)
    if kind == "hfft":
        sw = E._SWAP_NORM[norm]
        return lambda x: C.c2r(x.conj(), s[0], dims[0], sw)
    if kind == "ihfft":
        sw = E._SWAP_NORM[norm]
        return lambda x: C.r2c(x, s[0], dims[0], sw).conj_physical_()
    if kind in ("fftn", "ifftn"):
        inv = kind == "ifftn"
        return lambda x: C.c2c_nd(x, s, dims, norm, inv)
    if kind == "rfftn":
        return lambda x: C.r2c_nd(x, s, dims, norm)
    return lambda x: C.c2r_nd(x, s, dims, norm)


def _scipy_call(kind: str, s: tuple, dims: tuple, norm: str, fallback, workers: int):
    import scipy.fft as sf

    fn = getattr(sf, kind)
    call = hostblas.call  # every route into SciPy goes through it (OpenBLAS held at one thread beside torch's)
    if KINDS[kind][3]:
        def run(x):
            if x.requires_grad or x.is_conj() or x.device.type != "cpu" or type(x) is not torch.Tensor:
                return fallback(x)  # autograd, a lazy conjugate, a device or a subclass (fake, functional)
            return torch.from_numpy(call(fn, x.numpy(), s, dims, norm, workers=workers))
    else:
        n, d = s[0], dims[0]

        def run(x):
            if x.requires_grad or x.is_conj() or x.device.type != "cpu" or type(x) is not torch.Tensor:
                return fallback(x)  # autograd, a lazy conjugate, a device or a subclass (fake, functional)
            return torch.from_numpy(call(fn, x.numpy(), n, d, norm, workers=workers))
    return run


def candidates_for(kind: str, shape: tuple, s: tuple, dims: tuple, norm: str, device: torch.device) -> dict:
    """Route name -> callable of ``x`` for this canonical call (``torch`` first)."""
    plain = _torch_call(kind, shape, s, dims, norm)
    out = {"torch": plain}
    if any(k >= C.MIN_PRIME and C.slow_length(k) for k in s):
        out["bluestein"] = _bluestein_call(kind, s, dims, norm)
    if device.type == "cpu" and _has_scipy():
        out["scipy"] = _scipy_call(kind, s, dims, norm, plain, routes.threads())
    return out


@functools.lru_cache(maxsize=1)
def _has_scipy() -> bool:
    try:
        import scipy.fft  # noqa: F401
    except ImportError:
        return False
    return True


def shape_class(kind: str, shape: tuple, s: tuple, dims: tuple, dtype: torch.dtype) -> tuple:
    """What a measured choice is keyed by: kind, lengths, last-axis or strided, batch rounded up to a
    power of two, dtype."""
    nd = len(shape)
    batch = math.prod(shape) // max(1, math.prod(shape[d] for d in dims))
    last = "last" if nd - 1 in dims else "strided"
    b = 1 << max(0, (max(1, batch) - 1).bit_length())
    return (kind, "x".join(map(str, s)), last, f"batch<={b}", str(dtype).replace("torch.", ""))


def _make(kind, shape, dtype, device, s, dims, norm):
    cands = candidates_for(kind, shape, s, dims, norm, device)
    points = math.prod(shape) // max(1, math.prod(shape[d] for d in dims)) * math.prod(s)
    probe = []

    def thunk(f):
        def run():
            if not probe:  # made only when something is timed
                probe.append(torch.randn(shape, dtype=dtype, device=device))
            return f(probe[0])
        return run

    threads = routes.threads()
    c = routes.choose("trnfft." + kind, shape_class(kind, shape, s, dims, dtype),
                      {name: thunk(f) for name, f in cands.items()}, default="torch",
                      worth_timing=points >= MEASURE_MIN_POINTS, robust=threads > 1)
    f = cands[c.route]
    if points >= MEASURE_MIN_POINTS:  # a choice valid at this thread count only (the key says so)
        f = _at_threads(f, threads, kind, s, dims, norm)
    return f, c


def _at_threads(f, threads, kind, s, dims, norm):
    """``f`` while torch runs ``threads`` threads; at another count the route for that count. The public
    functions' per-call caches keep the returned callable, so it must not outlive the thread count."""
    now = torch.get_num_threads

    def run(x):
        if now() == threads:
            return f(x)
        return route(kind, x, s, dims, norm)(x)
    return run


_built = routes.Memo(limit=512)  # built routes, emptied with the choices they were built from


def _settled(kind, shape, dtype, device, s, dims, norm):
    key = (kind, shape, dtype, device, s, dims, norm, routes.threads())
    hit = _built.get(key)
    if hit is None:
        hit = _built.remember(key, _make(kind, shape, dtype, device, s, dims, norm))
    return hit


def route(kind: str, x: torch.Tensor, s: tuple, dims: tuple, norm: str):
    """The settled "fast"-precision route for a canonical call of ``x``, as a callable of the input."""
    return _settled(kind, tuple(x.shape), x.dtype, x.device, s, dims, norm)[0]


def choice_for(kind: str, shape: tuple, dtype: torch.dtype, device: torch.device, s: tuple, dims: tuple,
               norm: str) -> routes.Choice:
    """The :class:`trnsci.routes.Choice` behind :func:`route` for that shape (for plans and reports)."""
    return _settled(kind, tuple(shape), dtype, torch.device(device), tuple(s), tuple(dims), norm)[1]


def clear() -> None:
    """Drop every settled route (built routes and the public functions' per-call caches)."""
    _built.clear()
    for op in dispatch.ops("trnfft").values():
        op.settled.clear()


routes.on_change(clear)
