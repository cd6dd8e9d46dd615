"""SVD by one-sided Jacobi on the device, and ``pinv`` on it.

``svd`` (real float32, ``min(m, n) <=`` 128, ``max(m, n) <=`` 4096): the
columns of ``A`` (of ``A^T`` when ``m < n``) are orthogonalized by
:func:`~trnsolver.kernels.svd_sweep.svd_sweep_kernel`, one launch
per sweep, until the largest ``gamma^2 / (alpha beta)`` of a sweep is below
``FP32_TOL^2`` (the kernel reports it; only those ``n`` scalars and the
``n`` column norms cross to the host each sweep) or stops falling. Then on
the host: the ``n`` singular values sorted, ``U``'s columns divided by them
(an ``m n`` scaling pass), and -- only for exactly rank-deficient inputs -- the
left vectors of zero singular values completed by a host QR. The number of
sweeps depends on the data, so the plan carries no closed form (one sweep's
is :func:`~trnsolver.kernels.svd_sweep.svd_sweep_counts`).

``pinv``: that SVD, then ``X = (V s^+) U^T`` on the GEMM kernel.
"""

from __future__ import annotations

import warnings

import torch

import trnblas
from trnsci import iterative as it_
from trnsci import nki
from trnsolver._nki.common import FP32_TOL, KERNEL_DTYPES, _trnblas, not_finite
from trnsolver._nki.eigen import _tables
from trnsolver.factor import PINV, SVD
from trnsolver.kernels.svd_sweep import MAX_M, MAX_N, svd_sweep_kernel

F32 = torch.float32
MAX_SWEEPS = 40

__all__ = ["svd_device"]


def _jacobi_tall(M: torch.Tensor):
    """Thin SVD of a real ``[m, n]`` matrix, ``m >= n``, ``n <= 128``: ``(U, S, V)`` (V not transposed)."""
    m, n = M.shape
    k = n + n % 2
    ut = torch.zeros(k, m, dtype=F32, device=M.device)
    ut[:n] = M.T.to(F32)
    eye, S = (t.to(M.device) for t in _tables(k))  # the sweep's constant tables, with the matrix
    vt = eye.clone()
    prev = float("inf")
    ok = False
    for _ in range(MAX_SWEEPS):
        ut, vt, conv, norms = nki.run(svd_sweep_kernel, ut, vt, eye, S, out_dtype=F32)
        worst = float(conv.max())
        if worst != worst:  # NaN/Inf (check_finite=False): give up, reported as not converged
            break
        if worst <= FP32_TOL ** 2 or (worst >= prev and worst <= (64 * FP32_TOL) ** 2):
            ok = True
            break
        prev = worst
    if not ok:
        warnings.warn(f"svd: one-sided Jacobi did not converge in {MAX_SWEEPS} sweeps",
                      it_.ConvergenceWarning, stacklevel=5)
    sig = norms[:n, 0].clamp_min(0).sqrt()
    sig, order = torch.sort(sig, descending=True)
    U = ut[order].T.contiguous()
    V = vt[order][:, :n].T.contiguous()
    small = sig <= max(m, n) * float(torch.finfo(F32).eps) * float(sig[0]) if n else sig > 0
    U = U / torch.where(small, torch.ones_like(sig), sig)
    if bool(small.any()):  # complete the left vectors of (numerically) zero singular values on the host
        keep = (~small).nonzero()[:, 0]
        fill = torch.randn(m, n, generator=torch.Generator().manual_seed(0)).to(U.device)
        Q = torch.linalg.qr(torch.cat([U[:, keep], fill], 1))[0]
        U[:, small] = Q[:, keep.numel():keep.numel() + int(small.sum())]
    return U, sig, V


def svd_device(M: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Thin ``(U, S, Vh)`` of one real matrix by the sweep kernel."""
    m, n = M.shape
    if m >= n:
        U, S, V = _jacobi_tall(M)
        return U, S, V.T.contiguous()
    U, S, V = _jacobi_tall(M.T)
    return V, S, U.T.contiguous()


def _svd_supports(A, full_matrices, *rest):
    m, n = A.shape[-2:]
    if A.numel() == 0:
        return "empty matrix: nothing to compute"
    if min(m, n) > MAX_N:
        return f"min(m, n)={min(m, n)} > {MAX_N}: one tile of one-sided Jacobi (no block variant yet)"
    if max(m, n) > MAX_M:
        return f"max(m, n)={max(m, n)} exceeds the sweep kernel's SBUF plan ({MAX_M})"
    if full_matrices and m != n:
        return "full_matrices=True on a rectangular matrix: the Jacobi path gives the thin factors"
    return not_finite(A)


def _no_closed_form(*args, **kwargs):
    """None: the number of sweep launches depends on the data."""
    return None


@SVD.lowering("nki", dtypes=KERNEL_DTYPES, supports=_svd_supports, counts=_no_closed_form,
              kernels=("svd_sweep_kernel",))
def _svd_nki(A, full_matrices):
    m, n = A.shape[-2:]
    outs = [svd_device(M) for M in A.reshape(-1, m, n)]
    shape = A.shape[:-2]
    U = torch.stack([o[0] for o in outs]).reshape(*shape, *outs[0][0].shape).to(A.dtype)
    S = torch.stack([o[1] for o in outs]).reshape(*shape, -1).to(A.dtype)
    Vh = torch.stack([o[2] for o in outs]).reshape(*shape, *outs[0][2].shape).to(A.dtype)
    return U, S, Vh


def _pinv_supports(A, rtol):
    return _svd_supports(A, False)


@PINV.lowering("nki", dtypes=KERNEL_DTYPES, supports=_pinv_supports, counts=_no_closed_form,
               kernels=("svd_sweep_kernel", "gemm_kernel"))
def _pinv_nki(A, rtol):
    m, n = A.shape[-2:]
    if rtol is None:
        rtol = float(torch.finfo(F32).eps) * max(m, n)
    Xs = []
    for M in A.reshape(-1, m, n):
        U, S, Vh = svd_device(M)
        cut = S[:1] * rtol
        Sinv = torch.where(S > cut, 1.0 / torch.where(S > cut, S, torch.ones_like(S)), torch.zeros_like(S))
        with _trnblas():
            Xs.append(trnblas.gemm(1.0, (Vh.T * Sinv).contiguous(), U.contiguous(), transB=True))
    return torch.stack(Xs).reshape(*A.shape[:-2], n, m).to(A.dtype)
