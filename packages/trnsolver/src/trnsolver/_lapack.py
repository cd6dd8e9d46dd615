"""Direct LAPACK calls (``scipy.linalg.lapack``) for the torch path's small CPU cases.

At small n the cost of a dense factorization is mostly per-call overhead,
and ``scipy.linalg.lapack``'s wrappers are thinner than ``torch.linalg``'s:
on this (shared, 2-core) machine at n = 64, OMP_NUM_THREADS=1, ``dpotrf``
took ~9-18 us vs ~18-33 us for ``torch.linalg.cholesky_ex``, ``dpotrs``
~3 us vs ~9 us for ``torch.cholesky_solve``, ``dgesv`` ~22 us vs ~40-68 us
for ``torch.linalg.solve``, and ``dsyevd`` beat ``torch.linalg.eigh`` in
float64 at n = 64..256 (280 vs 320 us, 5.6 vs 6.7 ms) -- see
``docs/trnsolver.md``. Both call the same LAPACK routines (potrf, potrs,
gesv, syevd), so ``info`` and errors are those of the torch call.

SciPy is optional: without it everything runs on ``torch.linalg``.
A tensor takes this route only when nothing torch-specific can be lost: a
plain 2-D CPU tensor of float32/float64 that does not require grad
(:func:`eligible`); batches, complex, autograd, other devices and tensor
subclasses stay on ``torch.linalg``. The results are tensors sharing the
Fortran-ordered arrays LAPACK wrote (strides ``(1, n)``, as
``torch.linalg``'s own results).
"""

from __future__ import annotations

import math as _math

import torch

try:  # SciPy is optional (not a dependency of trnsolver): without it every call stays on torch
    from scipy.linalg import lapack as _lp
except ImportError:  # pragma: no cover - the dev environment has SciPy
    _lp = None

_PREFIX = {torch.float32: "s", torch.float64: "d"}
_FUNCS: dict = {}


def _func(name: str, dtype: torch.dtype):
    f = _FUNCS.get((name, dtype))
    if f is None:
        f = _FUNCS[(name, dtype)] = getattr(_lp, _PREFIX[dtype] + name)
    return f


def eligible(*ts: torch.Tensor) -> bool:
    """All of ``ts`` plain non-empty 2-D real float32/float64 CPU tensors without autograd, one dtype."""
    if _lp is None:
        return False
    dt = ts[0].dtype
    for t in ts:
        if (type(t) is not torch.Tensor or t.dim() != 2 or t.dtype is not dt or t.requires_grad
                or t.device.type != "cpu" or not t.numel()):  # f2py rejects empty arrays
            return False
    return dt in _PREFIX


#: The ``info`` of a successful call, shared (making a fresh 0-d tensor costs
#: ~3 us, as much as validation): callers that hand ``info`` to the user
#: return ``ZERO_INFO.clone()`` instead of this object.
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
    if not _math.isfinite(c.trace()):
        # NaN/Inf got in (only possible with check_finite=False): OpenBLAS's
        # potrf reports info = 0 for a NaN pivot where torch's (MKL) names the
        # minor; let torch decide so the answer is the same either way
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
    # algorithm (~7x slower at n = 1024); 64 columns per block is LAPACK's
    # usual optimum (ilaenv NB) order of magnitude
    f, tau, _, info = _func("geqrf", A.dtype)(A.numpy(), lwork=max(1, 64 * n))
    if info < 0:
        raise RuntimeError(f"?geqrf: illegal argument {-info}")
    R = torch.from_numpy(f[:k, :]).triu()
    q, _, info = _func("orgqr", A.dtype)(f[:, :k], tau, lwork=max(1, 64 * k))
    if info < 0:
        raise RuntimeError(f"?orgqr: illegal argument {-info}")
    return torch.from_numpy(q), R
