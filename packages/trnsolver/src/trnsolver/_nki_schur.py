"""Real Schur form on the device: explicit double-shift QR iterations on the QR and GEMM kernels.

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
(:func:`trnsolver._schur._standardize`, rotations of two rows and columns
of ``T`` and ``Z``). Ten steps without a deflation take one exceptional
shift pair; ``30 n`` steps in all raise ``LinAlgError``.
"""

from __future__ import annotations

import numpy as np
import torch

import trnblas
from trnsci import linalg as la
from trnsolver._nki import KERNEL_DTYPES, _trnblas, not_finite
from trnsolver._nki_qr import qr_device
from trnsolver.eigen import SCHUR
from trnsolver.kernels.qr_panel import MAX_W

F32 = torch.float32
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
    from trnsolver import _schur

    for i, size in _schur.blocks(Tn):
        if size == 2:
            _schur._standardize(Tn, Zn, i)
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
