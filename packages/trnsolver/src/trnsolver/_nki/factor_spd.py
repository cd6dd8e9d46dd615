"""The SPD routines on the device: ``solve_spd``, ``cho_solve``, ``inv_spd``, ``inv_sqrt_spd``.

Compositions (each launch a kernel; the plan lists them with summed closed forms):

* ``cho_solve``: two trnblas ``trsm_kernel`` solves (``L`` then ``L^T``; for an
  upper factor ``U^T`` then ``U``).
* ``solve_spd``: the device Cholesky (:func:`trnsolver._nki.factor.cholesky_device`:
  ``potrf_tile_kernel`` per diagonal block, TRSM/SYRK/GEMM kernels for the
  rest), then ``cho_solve``'s two solves. ``iterative_refinement=True`` forms
  its residual in float64, which no kernel does: that call stays on torch.
* ``inv_spd``: Cholesky, then the two solves with ``B = I`` (``potri``'s
  ``L^{-T} L^{-1}``).
* ``inv_sqrt_spd``: the Jacobi eigensolver kernel (``EIGH``'s NKI path), the
  ``n`` eigenvalues clamped/inverted on the host, and ``X = (V s) V^T`` on the
  GEMM kernel (the column scaling ``V s`` is an ``n^2`` host pass). The
  number of Jacobi sweeps depends on the data, so its plan carries no
  closed form.
"""

from __future__ import annotations

import torch

import trnblas
from trnblas.kernels.trsm import trsm_counts
from trnsolver._nki.common import KERNEL_DTYPES, _batch, _Tally, _trnblas, not_finite
from trnsolver._nki.eigen import _eigh_kernels, _eigh_nki
from trnsolver._nki.factor import cholesky_device, cholesky_tally
from trnsolver.factor import CHO_SOLVE, INV_SPD, INV_SQRT_SPD, SOLVE_SPD

F32 = torch.float32

__all__ = ["cho_solve_device"]


def cho_solve_device(F: torch.Tensor, B: torch.Tensor, lower: bool) -> torch.Tensor:
    """``A X = B`` from one real triangular factor (only its ``lower``/upper triangle read)."""
    F = F.to(F32).contiguous()
    B = B.to(F32).contiguous()
    uplo = "lower" if lower else "upper"
    with _trnblas():
        # lower: L (L^T X) = B; upper: U^T (U X) = B
        Y = trnblas.trsm(1.0, F, B, side="left", uplo=uplo, trans=not lower)
        return trnblas.trsm(1.0, F, Y, side="left", uplo=uplo, trans=lower)


def _two_trsm(t: _Tally, n: int, k: int):
    t.add({"kernel": "trsm_kernel", **trsm_counts(n, k)}, 2)


def _empty(A, *rest):
    if A.shape[-1] == 0 or A.numel() == 0:
        return "empty matrix: nothing to compute"
    return not_finite(A)


def _rhs_supports(A, B, *rest):
    if B.is_complex():
        return "complex: the kernels are real float32"
    return _empty(A) or (None if B.shape[-1] and B.numel() else "no right-hand sides")


def _pairs(A, B):
    shape = torch.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    n = A.shape[-1]
    As = A.expand(*shape, n, n).reshape(-1, n, n)
    Bs = B.expand(*shape, *B.shape[-2:]).reshape(-1, *B.shape[-2:])
    return shape, As, Bs


# ------------------------------------------------------------------ cho_solve


def _cho_solve_counts(F, B, lower):
    t = _Tally()
    _two_trsm(t, F.shape[-1], B.shape[-1])
    return t.result(_batch(F, B))


@CHO_SOLVE.lowering("nki", dtypes=KERNEL_DTYPES, supports=_rhs_supports, counts=_cho_solve_counts)
def _cho_solve_nki(F, B, lower):
    shape, Fs, Bs = _pairs(F, B)
    Xs = [cho_solve_device(f, b, lower) for f, b in zip(Fs, Bs)]
    return torch.stack(Xs).reshape(*shape, *B.shape[-2:]).to(B.dtype)


# ------------------------------------------------------------------ solve_spd


def _solve_spd_supports(A, B, refine):
    if refine:
        return "iterative_refinement forms its residual in float64, which the kernels do not compute"
    return _rhs_supports(A, B)


def _solve_spd_counts(A, B, refine):
    t = _Tally()
    cholesky_tally(t, A.shape[-1])
    _two_trsm(t, A.shape[-1], B.shape[-1])
    return t.result(_batch(A, B))


def _spd_solve_all(As, Bs):
    Xs, infos = [], []
    for M, Bm in zip(As, Bs):
        L, info = cholesky_device(M)
        infos.append(info)
        if isinstance(info, torch.Tensor):  # on a device: solve anyway and zero a failed factor's result there
            X = cho_solve_device(L, Bm, True)
            Xs.append(torch.where(info == 0, X, torch.zeros((), dtype=X.dtype, device=X.device)))
        else:
            Xs.append(torch.zeros(Bm.shape, dtype=F32) if info else cho_solve_device(L, Bm, True))
    return Xs, infos


def _infos(infos, shape, device):
    if any(isinstance(i, torch.Tensor) for i in infos):  # device infos: stacked there
        return torch.stack([torch.as_tensor(i).to(torch.int32).reshape(()).to(device) for i in infos]).reshape(shape)
    return torch.tensor(infos, dtype=torch.int32, device=device).reshape(shape)


@SOLVE_SPD.lowering("nki", dtypes=KERNEL_DTYPES, supports=_solve_spd_supports, counts=_solve_spd_counts)
def _solve_spd_nki(A, B, refine):
    shape, As, Bs = _pairs(A, B)
    Xs, infos = _spd_solve_all(As, Bs)
    X = torch.stack(Xs).reshape(*shape, *B.shape[-2:]).to(B.dtype)
    return X, _infos(infos, shape, A.device)


# ------------------------------------------------------------------ inv_spd


def _inv_spd_counts(A):
    return _solve_spd_counts(A, A, False)


@INV_SPD.lowering("nki", dtypes=KERNEL_DTYPES, supports=_empty, counts=_inv_spd_counts)
def _inv_spd_nki(A):
    n = A.shape[-1]
    As = A.reshape(-1, n, n)
    eye = torch.eye(n, dtype=F32, device=A.device)
    Xs, infos = _spd_solve_all(As, [eye] * As.shape[0])
    return torch.stack(Xs).reshape(A.shape).to(A.dtype), _infos(infos, A.shape[:-2], A.device)


# ------------------------------------------------------------------ inv_sqrt_spd


def _inv_sqrt_counts(A, min_eig):
    """None: the Jacobi sweeps depend on the data (one sweep's closed form is
    :func:`~trnsolver.kernels.eigh_sweep.eigh_sweep_counts`; the final product
    is one :func:`trnblas.kernels.gemm.gemm_counts` ``(n, n, n)``)."""
    return None


def _inv_sqrt_kernels(A, min_eig):
    """eigh's kernels (:func:`trnsolver._nki._eigh_kernels`), then the GEMM kernel for ``V diag(s) V^T``."""
    return (*_eigh_kernels(A, "L", 0, A.shape[-1] - 1, True), "gemm_kernel")


@INV_SQRT_SPD.lowering("nki", dtypes=KERNEL_DTYPES, supports=_empty, counts=_inv_sqrt_counts,
                       kernels=_inv_sqrt_kernels)
def _inv_sqrt_spd_nki(A, min_eig):
    n = A.shape[-1]
    w, V = _eigh_nki(A, "L", 0, n - 1, True)
    wmin = w[..., 0]
    if min_eig is not None:
        w = w.clamp(min=min_eig)
    s = torch.where(w > 0, w, torch.ones_like(w)).rsqrt()
    Xs = []
    with _trnblas():
        for Vm, sm in zip(V.reshape(-1, n, n), s.reshape(-1, n)):
            Xs.append(trnblas.gemm(1.0, (Vm * sm).contiguous(), Vm.contiguous(), transB=True))
    return torch.stack(Xs).reshape(A.shape).to(A.dtype), wmin

