"""NKI lowerings of :mod:`trnsolver.eigen`: ``eigh`` by parallel Jacobi and the real Schur form.

``EIGH`` (real float32): parallel Brent-Luk Jacobi. ``n <= 128``: one tile,
one :func:`~trnsolver.kernels.eigh_sweep.eigh_sweep_kernel` launch per sweep
(``n - 1`` rounds of ``n/2`` rotations inside), until
``off(A) <= max(tol, FP32_TOL) ||A||_F`` or the off-norm stops falling
(fp32 floor). ``n > 128``: block Jacobi (:data:`BLOCK` x :data:`BLOCK`
blocks, each block pair one tile solved by the same kernel for a fixed
two sweeps), the pair rotations applied by ``trnblas.gemm``. Eigenvalues
are sorted on the host; no LAPACK call.

``SCHUR``: the real Schur form by explicit double-shift QR iterations on the QR and GEMM kernels.

For a real float32 ``A`` (``output="real"``, no ``sort``), with ``T = A``,
``Z = I`` and the active window ``T[:h, :h]`` (``h = n`` at first):

=====  ==============================================================  ==========================
step   what                                                            launch
=====  ==============================================================  ==========================
1      ``s, t``: trace and determinant of the window's trailing 2x2     host reads of 4 entries
       (both of its eigenvalues are the shifts, real or a pair)
2      ``M = W W - s W + t I`` (``W`` the window), real even for a     ``gemm_kernel``
       complex pair of shifts
3      ``M = Q R``                                                      :func:`qr_device` (``qr_panel_kernel``,
                                                                        ``gemm_kernel``, ``trsm_kernel``)
4      ``W <- Q^T W Q``; ``T[:h, h:] <- Q^T T[:h, h:]``;                ``gemm_kernel``
       ``Z[:, :h] <- Z[:, :h] Q``
5      deflate: the window's last row (1x1) or last two rows (2x2)      host reads of the norms
       left of the diagonal block below ``eps32 ||T||_F``: ``h -= 1``
       or ``h -= 2``
=====  ==============================================================  ==========================

This is Francis's double shift made explicit: one QR step with the shifts
``mu, conj(mu)`` of the trailing 2x2 is one QR factorization of the real
``(W - mu I)(W - conj(mu) I)``, so complex pairs converge as real
eigenvalues do (quadratically near the end) without complex arithmetic.
Every step is a fixed-shape kernel launch per window size. After the loop
each 2x2 block is put in standard form on the host
(:func:`trnsolver.eigen._standard_form`, rotations of two rows and columns
of ``T`` and ``Z``). Ten steps without a deflation take one exceptional
shift pair; ``30 n`` steps in all raise ``LinAlgError``.

trnblas is called through its public functions inside
``use_backend(<trnsolver's backend>, "trnblas")``, so its own Ops decide
(dtype, SBUF plan) and its plans show the kernels that ran.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import torch

import trnblas
from trnsci import iterative as it_
from trnsci import linalg as la
from trnsci import nki
from trnsolver._nki.common import F32, FP32_TOL, KERNEL_DTYPES, _trnblas, not_finite
from trnsolver._nki.eigen_jacobi import _block_jacobi_eigh_torch
from trnsolver._nki.factor_qr import qr_device
from trnsolver.eigen import EIGH, SCHUR, _standard_form
from trnsolver.kernels.eigh_sweep import MAX_N, eigh_sweep_kernel, partner_table
from trnsolver.kernels.qr_panel import MAX_W

#: Block size of block Jacobi (a block pair is one 2*BLOCK <= 128 tile).
BLOCK = MAX_N // 2


@functools.lru_cache(maxsize=8)
def _tables(m: int):
    return torch.eye(m, dtype=F32), torch.from_numpy(partner_table(m))


def jacobi_tile(M: torch.Tensor, tol: float, max_sweeps: int, stop_early: bool = True):
    """Jacobi on one real ``[n, n]`` tile (n <= 128) with the sweep kernel.

    Returns ``(d, V, sweeps, converged)``: unsorted diagonal, ``V`` with
    ``M ~= V diag(d) V^T``. With ``stop_early=False`` exactly ``max_sweeps``
    sweeps run (block Jacobi's fixed inner work).
    """
    n = M.shape[-1]
    m = n + n % 2
    a = torch.zeros(m, m, dtype=F32)
    a[:n, :n] = 0.5 * (M + M.mT).to(F32)
    eye, S = _tables(m)
    vt = eye.clone()
    off2 = float((a - torch.diag(a.diagonal())).square().sum())
    tot2 = float(a.square().sum())
    goal = max(tol, FP32_TOL) ** 2 * tot2 if stop_early else -1.0
    sweeps = 0
    converged = off2 <= goal or tot2 == 0
    while not converged and sweeps < max_sweeps:
        a, vt, norms = nki.run(eigh_sweep_kernel, a, vt, eye, S, out_dtype=F32)
        sweeps += 1
        new = float(norms[0, 0])
        if new != new:  # NaN/Inf in A (check_finite=False): stop, reported as not converged
            break
        converged = new <= goal
        if stop_early and not converged and new >= off2:  # fp32 floor reached
            converged = new <= (64 * FP32_TOL) ** 2 * tot2
            break
        off2 = new
    return a.diagonal()[:n].clone(), vt.mT[:n, :n].contiguous(), sweeps, converged


def _inner_kernel(sub, inner_sweeps):
    """Each block-pair tile of ``sub`` [npair, 2b, 2b] through the kernel, unsorted."""
    return torch.stack([jacobi_tile(t, 0.0, inner_sweeps, stop_early=False)[1] for t in sub])


def _gemm_pairs(X, Y):
    """X @ Y for stacks of matrices, one trnblas.gemm per pair."""
    return torch.stack([trnblas.gemm(1.0, x.contiguous(), y.contiguous()) for x, y in zip(X, Y)])


def _eigh_supports(A, uplo, lo, hi, vectors, tol=1e-10, max_sweeps=100):
    if A.shape[-1] == 0:
        return "empty matrix: nothing to compute"
    return None


def _eigh_counts(A, uplo, lo, hi, vectors, tol=1e-10, max_sweeps=100):
    """None: the number of sweep launches depends on the data. One sweep's
    closed forms are :func:`~trnsolver.kernels.eigh_sweep.eigh_sweep_counts`."""
    return None


def _eigh_kernels(A, uplo, lo, hi, vectors, tol=1e-10, max_sweeps=100):
    """The sweep kernel on one tile; past one tile (n > 128) block Jacobi adds trnblas's GEMM kernel."""
    return ("eigh_sweep_kernel",) if A.shape[-1] <= 2 * BLOCK else ("eigh_sweep_kernel", "gemm_kernel")


@EIGH.lowering("nki", dtypes=KERNEL_DTYPES, supports=_eigh_supports, counts=_eigh_counts, kernels=_eigh_kernels)
def _eigh_nki(A, uplo, lo, hi, vectors, tol=1e-10, max_sweeps=100):
    n = A.shape[-1]
    full = la.symmetric(A, uplo)
    flat = full.reshape(-1, n, n)
    ws, Vs, bad = [], [], 0
    for M in flat:
        if n <= 2 * BLOCK:  # one tile (2 * BLOCK = MAX_N = 128)
            d, V, sweeps, ok = jacobi_tile(M, tol, max_sweeps)
            d, order = torch.sort(d)
            V = V[:, order]
        else:
            with _trnblas():
                d, V, sweeps = _block_jacobi_eigh_torch(M.to(F32), max(tol, FP32_TOL), max_sweeps, block=BLOCK,
                                                        inner=_inner_kernel, mm=_gemm_pairs)
            ok = sweeps < max_sweeps
        bad += not ok
        ws.append(d[lo:hi + 1])
        Vs.append(V[:, lo:hi + 1])
    if bad:
        warnings.warn(f"eigh: the Jacobi kernel did not reach tol on {bad} matrix(es) in max_sweeps={max_sweeps}",
                      it_.ConvergenceWarning, stacklevel=4)
    k = hi - lo + 1
    w = torch.stack(ws).reshape(*A.shape[:-2], k).to(A.device)
    if not vectors:
        return w, None
    return w, torch.stack(Vs).reshape(*A.shape[:-2], n, k).to(A.device)


# ------------------------------------------------------------------ real Schur form

EPS32 = float(torch.finfo(torch.float32).eps)

__all__ = ["schur_device"]


def schur_device(A: torch.Tensor):
    """``(T, Z, steps)``: the real Schur form of one real float32 matrix by the launches above."""
    n = A.shape[0]
    T = A.to(F32).clone()
    Z = torch.eye(n, dtype=F32, device=A.device)
    tol = EPS32 * max(float(torch.linalg.norm(T)), np.finfo(np.float32).tiny)
    h, steps, stall = n, 0, 0
    with _trnblas():
        while h > 2:
            if float(torch.linalg.norm(T[h - 1, :h - 1])) <= tol:
                T[h - 1, :h - 1] = 0.0
                h, stall = h - 1, 0
                continue
            if float(torch.linalg.norm(T[h - 2:h, :h - 2])) <= tol:
                T[h - 2:h, :h - 2] = 0.0
                h, stall = h - 2, 0
                continue
            steps += 1
            stall += 1
            if steps > 30 * n:
                raise la.LinAlgError(f"schur: the QR iteration did not converge (eigenvalue {h} of {n})", info=h)
            W = T[:h, :h].contiguous()
            a, b, c, d = (float(x) for x in W[h - 2:, h - 2:].reshape(-1))
            s, t = a + d, a * d - b * c
            if stall % 10 == 0:  # exceptional shifts: break a cycle
                w = abs(float(W[h - 1, h - 2])) + abs(float(W[h - 2, h - 3]))
                s, t = 1.5 * w, w * w
            M = trnblas.gemm(1.0, W, W, -s, W)
            M.diagonal().add_(t)
            Q, _ = qr_device(M, "complete")
            T[:h, :h] = trnblas.gemm(1.0, trnblas.gemm(1.0, Q, W, transA=True), Q)
            if h < n:
                T[:h, h:] = trnblas.gemm(1.0, Q, T[:h, h:].contiguous(), transA=True)
            Z[:, :h] = trnblas.gemm(1.0, Z[:, :h].contiguous(), Q)
    # every deflation zeroed its rows left of their block, and later steps touch only the window and
    # the columns right of it: T is quasi-triangular with exact zeros; 2x2 blocks to standard form
    Tn, Zn = T.cpu().numpy(), Z.cpu().numpy()
    _standard_form(Tn, Zn)
    Tn = np.triu(Tn, -1)
    return torch.from_numpy(Tn).to(A.device), torch.from_numpy(Zn).to(A.device), steps


def _schur_supports(A, complex_out, sort):
    if A.shape[-1] < 3:
        return "n < 3: the 2x2 standard form is all there is (host)"
    if complex_out or A.is_complex():
        return "complex Schur form: the kernels are real float32"
    if sort is not None:
        return "sort=: the block swaps (2x2 Sylvester solves) run on the host"
    if A.shape[-1] > MAX_W:
        return f"n={A.shape[-1]} exceeds the QR panel kernel's SBUF plan (n <= {MAX_W})"
    return not_finite(A)


def _schur_counts(A, complex_out, sort):
    """None: the number of QR steps depends on the data (each step's launches: see the module docs)."""
    return None


def _schur_kernels(A, complex_out, sort):
    """Steps 2-4 of the table above (none for n <= 2: the window is already one block)."""
    return ("gemm_kernel", "qr_panel_kernel", "trsm_kernel") if A.shape[-1] > 2 else ()


@SCHUR.lowering("nki", dtypes=KERNEL_DTYPES, supports=_schur_supports, counts=_schur_counts,
                kernels=_schur_kernels)
def _schur_nki(A, complex_out, sort):
    T, Z, _ = schur_device(A)
    return T.to(A.dtype), Z.to(A.dtype), None
