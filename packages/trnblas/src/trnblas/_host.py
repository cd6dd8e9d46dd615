"""Measured host routes of the torch lowerings: torch's BLAS or NumPy's / SciPy's BLAS.

On a CPU a GEMM or a rank-k update can run on torch's BLAS (MKL in the
PyPI wheels) or on the OpenBLAS that NumPy and SciPy ship, reached
without a copy through ``Tensor.numpy()`` / ``torch.from_numpy``. Which
is faster depends on the CPU, the shape, the dtype and the thread count
(on one 2-core Xeon torch's ``mm`` won every square GEMM from 64 to 256
at one thread while SciPy's ``dsyrk`` beat ``torch.mm`` + ``triu_`` by
1.4x; trntensor measured NumPy's matmul up to 4.5x faster on an AMD EPYC),
so :func:`trnsci.routes.choose` times both on the caller's operands once
per shape class (sizes to the next power of two), dtype and thread count; ``TRNSCI_ROUTES=estimate``
(the test suite) keeps torch, the obvious call.

Routes:

* ``gemm_numpy(a, b)``: ``a @ b`` by ``numpy.matmul`` (2-D, real
  float32/float64, any strides: NumPy passes transposed operands to BLAS
  with a transpose flag);
* ``syrk_blas(alpha, a, beta, C, upper)``: one triangle of
  ``alpha a a^T + beta C`` by SciPy's ``?syrk`` on the Fortran view of
  ``a^T`` (no copy for a C- or F-contiguous ``a``), the other triangle
  ``C``'s (zeros without ``C``); the result is C-contiguous.

Only plain CPU tensors without autograd take a NumPy route
(:func:`eligible`). With more than one torch thread only problems
OpenBLAS runs on the calling thread (``m n k < 2^19``, OpenBLAS's own
threading threshold) are candidates: OpenBLAS's worker threads spin after
a threaded call and slowed the next torch call severalfold beside
torch's own threads (measured for trntensor's autotuner). The two BLAS
libraries round differently: results may differ in the last units in the
last place between machines.
"""

from __future__ import annotations

import numpy as np
import torch

from trnsci import routes

__all__ = ["eligible", "gemm_uses_numpy", "syrk_uses_blas", "gemm_numpy", "syrk_blas", "clear"]

_DTYPES = (torch.float32, torch.float64)
#: OpenBLAS runs a GEMM on the calling thread while m n k < 65536 * 4 * 2 (its interface/gemm.c).
ONE_THREAD_MNK = 2 * 65536 * 4
#: Above this many multiply-adds a route is not timed (two warm-ups and five rounds of calls that
#: each take tens of milliseconds would cost more than a better route can save in most programs).
MAX_TIMED_MNK = 1 << 30
_LIMIT = 256
_threads = torch.get_num_threads
_gemm: dict = {}
_syrk: dict = {}
_SYRK = {}


def clear() -> None:
    """Forget the per-shape decisions (a :func:`trnsci.routes.forget` / ``force`` / ``mode`` calls it)."""
    _gemm.clear()
    _syrk.clear()


routes.on_change(clear)


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


def _candidate(mnk: int, threads: int) -> bool:
    return 0 < mnk <= MAX_TIMED_MNK and (threads == 1 or mnk < ONE_THREAD_MNK)


# ------------------------------------------------------------------ GEMM

def gemm_numpy(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` by ``numpy.matmul`` (NumPy's BLAS), as a tensor sharing NumPy's result."""
    return torch.from_numpy(np.matmul(a.numpy(), b.numpy()))


def gemm_uses_numpy(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``a @ b`` (2-D) runs on NumPy's matmul: the measured choice for its class, and eligible."""
    # the cheapest key that separates the classes (this runs on every GEMM of the torch path): strides
    # change only which transpose flags BLAS gets, not which library is faster, and cost 0.15 us each
    key = (a.dtype, a.shape, b.shape, _threads())
    hit = _gemm.get(key)
    if hit is None:
        return _choose_gemm(a, b, key)
    return hit and eligible(a, b)


def _choose_gemm(a, b, key) -> bool:
    if not eligible(a, b):
        return False  # not remembered: the key does not say what made the call ineligible
    (m, k), n = a.shape, b.shape[1]
    use = False
    if _candidate(m * n * k, key[-1]):
        cls = (str(a.dtype).replace("torch.", ""), _bucket(m), _bucket(n), _bucket(k))
        c = routes.choose("trnblas.gemm", cls, {"torch": lambda: torch.mm(a, b), "numpy": lambda: gemm_numpy(a, b)},
                          default="torch")
        use = c.route == "numpy"
    if len(_gemm) >= _LIMIT:
        _gemm.clear()
    _gemm[key] = use
    return use


def gemm_choice(a: torch.Tensor, b: torch.Tensor) -> routes.Choice | None:
    """The :class:`trnsci.routes.Choice` behind :func:`gemm_uses_numpy` (None: torch without a choice)."""
    if not eligible(a, b):
        return None
    (m, k), n = a.shape, b.shape[1]
    cls = (str(a.dtype).replace("torch.", ""), _bucket(m), _bucket(n), _bucket(k))
    return routes.lookup("trnblas.gemm", cls)


# ------------------------------------------------------------------ SYRK

def _syrk_func(dtype):
    f = _SYRK.get(dtype)
    if f is None:
        from scipy.linalg import blas

        f = _SYRK[dtype] = blas.dsyrk if dtype is torch.float64 else blas.ssyrk
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
        out = _syrk_func(a.dtype)(alpha, f, trans=trans, lower=lower)
    else:
        out = _syrk_func(a.dtype)(alpha, f, beta=beta, c=C.numpy().T, trans=trans, lower=lower)
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
        c = routes.choose("trnblas.syrk", cls,
                          {"torch": mm_route, "blas": lambda: syrk_blas(1.0, a, 1.0, C, upper)}, default="torch")
        use = c.route == "blas"
    if len(_syrk) >= _LIMIT:
        _syrk.clear()
    _syrk[key] = use
    return use
