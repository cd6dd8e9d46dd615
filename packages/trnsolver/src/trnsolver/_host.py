"""Direct LAPACK calls (``scipy.linalg.lapack``) as a measured second CPU route of the torch path.

At small n the cost of a dense factorization is mostly per-call overhead,
and ``scipy.linalg.lapack``'s wrappers can be thinner than
``torch.linalg``'s; at larger n the two libraries' LAPACK builds (SciPy's
OpenBLAS, torch's MKL in the PyPI wheels) differ in speed and in how they
use threads. Which is faster depends on the CPU, the build, the size, the
dtype and the thread count, so :func:`use` lets :func:`trnsci.routes.choose`
time both on the caller's operands once per family, dtype and size class
(n to the next power of two) at this thread count, and keeps
``torch.linalg`` -- the obvious call -- unless SciPy's is clearly faster
(``TRNSCI_ROUTES=estimate``, the test suite, keeps torch untimed). Both
call the same LAPACK routines (potrf, potrs, gesv, syevd, gesdd, geqrf),
so ``info`` and errors are those of the torch call.

Every call into SciPy here goes through :func:`trnsci.hostblas.call`:
with torch at more than one thread, SciPy's OpenBLAS runs in the calling
thread, so its spinning workers never stall torch's next multi-threaded
call; the candidates are timed through the same wrapper, and beside
torch's threads a choice is ``robust`` (:func:`trnsci.routes.pick`).

SciPy is optional: without it everything runs on ``torch.linalg``.
A tensor is a candidate only when nothing torch-specific can be lost: a
plain 2-D CPU tensor of float32/float64 that does not require grad
(:func:`eligible`); batches, complex, autograd, other devices and tensor
subclasses stay on ``torch.linalg``. The results are tensors sharing the
Fortran-ordered arrays LAPACK wrote (strides ``(1, n)``, as
``torch.linalg``'s own results).
"""

from __future__ import annotations

import math as _math

import torch

from trnsci import hostblas, routes

try:  # SciPy is optional (not a dependency of trnsolver): without it every call stays on torch
    from scipy.linalg import lapack as _lp
except ImportError:  # pragma: no cover - the dev environment has SciPy
    _lp = None

_PREFIX = {torch.float32: "s", torch.float64: "d"}
_FUNCS: dict = {}
#: Above this many flops (the family's leading term) a route is not timed: the warm-up and five rounds of
#: calls of a second or more would cost more than a better route saves in most programs; torch runs.
MAX_TIMED_FLOPS = 1 << 30
_chosen = routes.Memo()  # (family, dtype, shape, extra, threads) -> whether the LAPACK route runs


def clear() -> None:
    """Forget the per-class decisions (:func:`trnsci.routes.forget` / ``force`` / ``mode`` do it too)."""
    _chosen.clear()


def _func(name: str, dtype: torch.dtype):
    f = _FUNCS.get((name, dtype))
    if f is None:
        f = _FUNCS[(name, dtype)] = hostblas.serial(getattr(_lp, _PREFIX[dtype] + name))
    return f


def use(family: str, A: torch.Tensor, flops: float, candidates, extra: tuple = ()) -> bool:
    """Whether the SciPy LAPACK route (``"lapack"``) runs for ``A``'s class in ``family``.

    ``A`` must be :func:`eligible`. ``candidates()`` returns the thunks
    ``{"lapack": ..., "torch": ...}`` on the caller's operands; it is called
    only when the class (``family``, dtype, n to the next power of two,
    ``extra``, thread count) has no decision yet. ``flops`` (the leading
    term) above :data:`MAX_TIMED_FLOPS` keeps torch untimed.
    """
    threads = torch.get_num_threads()
    key = (family, A.dtype, A.shape, extra, threads)
    hit = _chosen.get(key)
    if hit is None:
        n = max(A.shape)
        cls = (str(A.dtype).replace("torch.", ""), 1 << max(0, n - 1).bit_length()) + tuple(extra)
        c = routes.choose("trnsolver." + family, cls, candidates(), default="torch",
                          worth_timing=flops <= MAX_TIMED_FLOPS, robust=threads > 1)
        hit = _chosen.remember(key, c.route == "lapack")
    return hit


def choice(family: str, A: torch.Tensor, extra: tuple = ()) -> routes.Choice | None:
    """The :class:`trnsci.routes.Choice` behind :func:`use` for ``A``'s class, if one was made."""
    n = max(A.shape)
    cls = (str(A.dtype).replace("torch.", ""), 1 << max(0, n - 1).bit_length()) + tuple(extra)
    return routes.lookup("trnsolver." + family, cls)


def eligible(*ts: torch.Tensor) -> bool:
    """All of ``ts`` plain non-empty 2-D real float32/float64 CPU tensors without autograd, one dtype."""
    if _lp is None:
        return False
    dt = ts[0].dtype
    for t in ts:
        if (type(t) is not torch.Tensor or t.dim() != 2 or t.dtype is not dt or t.requires_grad
                or not t.is_cpu or not t.numel()):  # f2py rejects empty arrays
            return False
    return dt in _PREFIX


#: The ``info`` of a successful call, shared (a fresh 0-d tensor costs as much
#: as validation: docs/perf-notes.md#design-fast-paths): callers that hand
#: ``info`` to the user return ``ZERO_INFO.clone()`` instead of this object.
ZERO_INFO = torch.zeros((), dtype=torch.int32)


def potrf(A: torch.Tensor, upper: bool):
    """``(factor, info)`` as ``torch.linalg.cholesky_ex`` (zeros in the other triangle),
    or None when the factor is not finite (the caller then runs torch)."""
    c, info = _func("potrf", A.dtype)(A.numpy(), lower=0 if upper else 1, clean=1)
    if info < 0:  # an argument error cannot come from a validated call; let torch say it
        raise RuntimeError(f"?potrf: illegal argument {-info}")
    if info > 0:
        # LAPACK leaves the trailing block unfactored; return the same
        # partial factor shape torch does (values past the minor unspecified)
        return torch.from_numpy(c), torch.tensor(info, dtype=torch.int32)
    if not _math.isfinite(c[-1, -1]):
        # NaN/Inf got in (only possible with check_finite=False): OpenBLAS's
        # potrf reports info = 0 for a NaN pivot where torch's (MKL) names the
        # minor; let torch decide so the answer is the same either way. A NaN
        # pivot (or an Inf below the diagonal, which makes the next pivot NaN)
        # turns every later column NaN, so the last diagonal entry shows it
        # (one element read instead of the trace: docs/perf-notes.md#design-fast-paths)
        return None
    return torch.from_numpy(c), ZERO_INFO


def potrs(F: torch.Tensor, B: torch.Tensor, lower: bool) -> torch.Tensor:
    """``torch.cholesky_solve(B, F, upper=not lower)``; only ``F``'s ``lower``/upper triangle is read."""
    x, info = _func("potrs", F.dtype)(F.numpy(), B.numpy(), lower=1 if lower else 0)
    if info < 0:
        raise RuntimeError(f"?potrs: illegal argument {-info}")
    return torch.from_numpy(x)


def gesv(A: torch.Tensor, B: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(X, info)`` as ``torch.linalg.solve_ex`` (``info`` > 0: ``U[info-1, info-1]`` is zero)."""
    _, _, x, info = _func("gesv", A.dtype)(A.numpy(), B.numpy())
    if info < 0:
        raise RuntimeError(f"?gesv: illegal argument {-info}")
    return torch.from_numpy(x), (torch.tensor(info, dtype=torch.int32) if info else ZERO_INFO)


def syevd(A: torch.Tensor, lower: bool, vectors: bool):
    """``(w, V or None)`` of ``?syevd``, or None when it did not converge (the caller
    then runs ``torch.linalg.eigh``, whose error/behaviour is the reference)."""
    w, V, info = _func("syevd", A.dtype)(A.numpy(), compute_v=1 if vectors else 0, lower=1 if lower else 0)
    if info != 0:
        return None
    return torch.from_numpy(w), (torch.from_numpy(V) if vectors else None)


def gesdd(A: torch.Tensor, full_matrices: bool):
    """``(U, S, Vh)`` of ``?gesdd`` (``torch.linalg.svd``'s driver on CPU), or None
    when it did not converge (the caller then runs ``torch.linalg.svd``)."""
    u, s, vt, info = _func("gesdd", A.dtype)(A.numpy(), compute_uv=1, full_matrices=1 if full_matrices else 0)
    if info != 0:
        return None
    return torch.from_numpy(u), torch.from_numpy(s), torch.from_numpy(vt)


def qr_reduced(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.linalg.qr(A, mode="reduced")`` by ``?geqrf`` + ``?orgqr``."""
    m, n = A.shape
    k = min(m, n)
    # f2py's default lwork is the minimum (n), which selects the unblocked
    # algorithm; 64 columns per block is LAPACK's usual optimum (ilaenv NB)
    # order of magnitude (docs/perf-notes.md#design-qr-lwork)
    f, tau, _, info = _func("geqrf", A.dtype)(A.numpy(), lwork=max(1, 64 * n))
    if info < 0:
        raise RuntimeError(f"?geqrf: illegal argument {-info}")
    R = torch.from_numpy(f[:k, :]).triu()
    q, _, info = _func("orgqr", A.dtype)(f[:, :k], tau, lwork=max(1, 64 * k))
    if info < 0:
        raise RuntimeError(f"?orgqr: illegal argument {-info}")
    return torch.from_numpy(q), R
