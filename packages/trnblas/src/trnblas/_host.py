"""Measured host routes of the torch lowerings: torch's BLAS or NumPy's / SciPy's BLAS.

On a CPU a GEMM or a rank-k update can run on torch's BLAS (MKL in the
PyPI wheels) or on the OpenBLAS that NumPy and SciPy ship, reached
without a copy through ``Tensor.numpy()`` / ``torch.from_numpy``. Which
is faster depends on the CPU, the shape, the dtype and the thread count
(docs/perf-notes.md#design-trnblas-host), so :func:`trnsci.routes.choose`
times the candidates on the caller's operands once per shape class
(sizes to the next power of two), dtype and thread count, and keeps
torch -- the obvious call -- unless another is clearly faster; ``TRNSCI_ROUTES=estimate`` (the test suite) keeps torch
untimed.

Routes:

* ``gemm_host(route, alpha, a, b)``: ``alpha a @ b`` by ``numpy.matmul``
  or SciPy's ``?gemm`` (2-D, real float32/float64, any strides: transposed
  views reach BLAS as a transpose flag, not a copy); NumPy and SciPy may
  ship different OpenBLAS builds, so both are candidates;
* ``syrk_blas(alpha, a, beta, C, upper)``: one triangle of
  ``alpha a a^T + beta C`` by SciPy's ``?syrk`` on the Fortran view of
  ``a^T`` (no copy for a C- or F-contiguous ``a``), the other triangle
  ``C``'s (zeros without ``C``); the result is C-contiguous.

Only plain CPU tensors without autograd take a NumPy route
(:func:`eligible`). Every call into NumPy's or SciPy's BLAS -- the routes
and the candidates :func:`trnsci.routes.choose` times -- goes through
:func:`trnsci.hostblas.call`: with more than one torch thread OpenBLAS
runs on the calling thread for its duration, so no OpenBLAS worker is left
spinning into the next multi-threaded torch call, and a host candidate
is measured at the single-threaded cost it will have as a route. The two
BLAS libraries round differently: results may differ in the last units in
the last place between machines. Beside torch's own threads a choice is
also ``robust`` (:func:`trnsci.routes.pick`): a candidate whose slowest
round stalled longer than torch's is not taken.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from trnsci import hostblas, routes

__all__ = ["eligible", "gemm_route", "gemm_host", "gemm_choice", "syrk_uses_blas", "syrk_blas", "clear"]

_DTYPES = (torch.float32, torch.float64)
#: OpenBLAS runs a GEMM on the calling thread while m n k < 65536 * 4 * 2 (its interface/gemm.c).
ONE_THREAD_MNK = 2 * 65536 * 4
#: Above this many multiply-adds a route is not timed (two warm-ups and five rounds of calls that
#: each take tens of milliseconds would cost more than a better route can save in most programs).
MAX_TIMED_MNK = 1 << 30
_threads = torch.get_num_threads
_gemm = routes.Memo()  # per-shape decisions, emptied with the route choices they copy
_syrk = routes.Memo()
_FUNCS: dict = {}


def clear() -> None:
    """Forget the per-shape decisions (:func:`trnsci.routes.forget` / ``force`` / ``mode`` do it too)."""
    _gemm.clear()
    _syrk.clear()


def eligible(*ts: torch.Tensor) -> bool:
    """Plain 2-D CPU tensors of one real dtype (float32/float64), no autograd, no negative view."""
    dt = ts[0].dtype
    if dt not in _DTYPES:
        return False
    for t in ts:
        if (type(t) is not torch.Tensor or t.dim() != 2 or t.dtype is not dt or not t.is_cpu
                or t.requires_grad or t.is_neg()):
            return False
    return True


def _bucket(v: int) -> int:
    return 1 << max(0, (int(v) - 1).bit_length())


def _layout(t: torch.Tensor) -> str:
    """``"C"`` (rows contiguous), ``"F"`` (a transposed view) or ``"S"`` (other strides)."""
    s0, s1 = t.stride()
    if s1 == 1 or t.shape[1] == 1:
        return "C"
    return "F" if s0 == 1 or t.shape[0] == 1 else "S"


def clock(threads: int, mnk: int):
    """The clock a route is timed with: the calling thread's CPU time when every candidate runs on that
    thread (one torch thread, and OpenBLAS single-threaded for this size), else wall time.

    CPU time does not count the time other processes take the core, so a choice made on a busy machine
    is not decided by whose rounds the other jobs happened to hit (docs/perf-notes.md#design-trnblas-host);
    helper threads' work would be missed, hence wall time as soon as there are any.
    """
    if threads == 1 and (mnk < ONE_THREAD_MNK or hostblas.OPENBLAS_ONE):
        return time.thread_time
    return time.perf_counter


def _robust(clk) -> bool:
    """Whether a choice timed with ``clk`` compares the slowest rounds too (:func:`trnsci.routes.pick`).

    Whenever some candidate may run on helper threads (wall time): torch's beside its own threads, or
    OpenBLAS's own pool at one torch thread above its threading threshold. A threaded call that waited
    at a barrier for a core another process held is no evidence to choose it
    (docs/perf-notes.md#design-trnblas-host).
    """
    return clk is time.perf_counter


def _candidate(mnk: int, threads: int) -> bool:
    # any thread count: beside torch's threads a host route runs single-threaded (trnsci.hostblas) and is
    # timed that way, so it is taken only where one OpenBLAS thread beats torch's threads
    return 0 < mnk <= MAX_TIMED_MNK


# ------------------------------------------------------------------ GEMM

def _fortran(t: torch.Tensor):
    """``(f, trans)``: a Fortran-ordered view ``f`` of ``t``'s data with ``op(f) = t^T`` under BLAS's flag
    ``trans`` -- ``t^T`` itself (0) for a C-ordered ``t``, ``t`` (1) for a transposed view (no copy either way)."""
    an = t.numpy()
    if an.flags.f_contiguous and not an.flags.c_contiguous:
        return an, 1
    return an.T, 0


def gemm_host(route: str, alpha, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``alpha a @ b`` (2-D) by NumPy's ``matmul`` (``"numpy"``) or SciPy's ``?gemm`` (``"scipy"``).

    ``?gemm`` is column-major: it forms ``C^T = b^T a^T`` in Fortran order
    from the Fortran views of ``b^T`` and ``a^T`` (:func:`_fortran`), and
    ``C^T.T`` is the C-ordered ``C``; ``alpha`` is applied inside BLAS.
    """
    if route == "numpy":
        R = torch.from_numpy(hostblas.call(np.matmul, a.numpy(), b.numpy()))
        if alpha != 1:
            R.mul_(alpha)
        return R
    fb, tb = _fortran(b)
    fa, ta = _fortran(a)
    return torch.from_numpy(hostblas.call(_blas("gemm", a.dtype), alpha, fb, fa, trans_a=tb, trans_b=ta).T)


def gemm_route(a: torch.Tensor, b: torch.Tensor) -> str:
    """``"torch"``, ``"numpy"`` or ``"scipy"`` for ``a @ b`` (2-D): the measured choice for its class, when
    the operands are eligible."""
    # the cheapest key that separates the classes (this runs on every GEMM of the torch path): no strides,
    # which change only which transpose flags BLAS gets (docs/perf-notes.md#design-fast-paths)
    key = (a.dtype, a.shape, b.shape, _threads())
    hit = _gemm.get(key)
    if hit is None:
        return _choose_gemm(a, b, key)
    return hit if hit == "torch" or eligible(a, b) else "torch"


def _gemm_class(a, b):
    (m, k), n = a.shape, b.shape[1]
    return str(a.dtype).replace("torch.", ""), _bucket(m), _bucket(n), _bucket(k)


def _choose_gemm(a, b, key) -> str:
    if not eligible(a, b):
        return "torch"  # not remembered: the key does not say what made the call ineligible
    (m, k), n = a.shape, b.shape[1]
    route = "torch"
    if _candidate(m * n * k, key[-1]):
        clk = clock(key[-1], m * n * k)
        c = routes.choose("trnblas.gemm", _gemm_class(a, b),
                          {"torch": lambda: torch.mm(a, b), "numpy": lambda: gemm_host("numpy", 1.0, a, b),
                           "scipy": lambda: gemm_host("scipy", 1.0, a, b)}, default="torch",
                          clock=clk, robust=_robust(clk))
        route = c.route
    return _gemm.remember(key, route)


def gemm_choice(a: torch.Tensor, b: torch.Tensor) -> routes.Choice | None:
    """The :class:`trnsci.routes.Choice` behind :func:`gemm_route` (None: torch without a choice)."""
    return routes.lookup("trnblas.gemm", _gemm_class(a, b)) if eligible(a, b) else None


# ------------------------------------------------------------------ SYRK

def _blas(name: str, dtype):
    f = _FUNCS.get((name, dtype))
    if f is None:
        from scipy.linalg import blas

        f = _FUNCS[(name, dtype)] = getattr(blas, ("d" if dtype is torch.float64 else "s") + name)
    return f


def syrk_blas(alpha, a: torch.Tensor, beta, C: torch.Tensor | None, upper: bool) -> torch.Tensor:
    """One triangle of ``alpha a a^T + beta C`` by SciPy's ``?syrk`` (``a`` is ``n x k``).

    BLAS is column-major: ``f = a.numpy().T`` is ``a^T`` in Fortran order
    (no copy when ``a`` is C-contiguous), and ``trans=1`` makes ``?syrk``
    form ``f^T f = a a^T``; a transposed view ``a`` is itself Fortran-ordered
    and goes in as ``f = a`` with ``trans=0`` (``f f^T``). It writes the Fortran matrix ``R^T``, whose
    lower triangle is ``R``'s upper one; ``R^T.T`` is C-contiguous. With
    ``C``, ``c = C.numpy().T`` is ``C^T`` (copied by the wrapper, so ``C``
    is not modified), and the triangle ``?syrk`` leaves alone keeps ``C``'s
    other triangle.
    """
    an = a.numpy()
    f, trans = (an, 0) if an.flags.f_contiguous and not an.flags.c_contiguous else (an.T, 1)  # f f^T or f^T f
    lower = 1 if upper else 0
    if C is None or beta == 0:
        out = hostblas.call(_blas("syrk", a.dtype), alpha, f, trans=trans, lower=lower)
    else:
        out = hostblas.call(_blas("syrk", a.dtype), alpha, f, beta=beta, c=C.numpy().T, trans=trans, lower=lower)
    return torch.from_numpy(out.T)


def syrk_uses_blas(a: torch.Tensor, C: torch.Tensor | None, upper: bool, mm_route) -> bool:
    """Whether ``syrk`` on ``a`` (``n x k``) runs :func:`syrk_blas`; ``mm_route()`` is the torch candidate."""
    key = (a.dtype, a.shape, a.stride(), C is None, upper, _threads())
    hit = _syrk.get(key)
    if hit is not None:
        return hit and eligible(a) and (C is None or eligible(a, C))
    if not (eligible(a) and (C is None or eligible(a, C))):
        return False
    n, k = a.shape
    use = False
    if _candidate(n * n * k, key[-1]):
        cls = (str(a.dtype).replace("torch.", ""), _bucket(n), _bucket(k), _layout(a), C is None)
        clk = clock(key[-1], n * n * k)
        c = routes.choose("trnblas.syrk", cls,
                          {"torch": mm_route, "blas": lambda: syrk_blas(1.0, a, 1.0, C, upper)}, default="torch",
                          clock=clk, robust=_robust(clk))
        use = c.route == "blas"
    return _syrk.remember(key, use)
