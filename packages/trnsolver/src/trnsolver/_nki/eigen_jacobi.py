"""Parallel (Brent-Luk round-robin) Jacobi eigensolver: the torch reference
for the NKI eigensolver kernel.

Scalar version (:func:`_jacobi_eigh_torch`), one tile of n <= 128:
    pad n to even; a sweep is n-1 *rounds*; round r pairs the indices by the
    round-robin (chess tournament) schedule, so its n/2 rotations touch
    disjoint row/column pairs and commute. One round is
        gather  a_pp, a_qq, a_pq  for the n/2 pairs          (n/2-vectors)
        compute (c, s) with Rutishauser's stable formula      (Vector/Scalar Engine)
        A <- J^T A J,  V <- V J                               (row pass + column pass)
    where J is the n x n rotation with J[p,p]=J[q,q]=c, J[p,q]=s, J[q,p]=-s.
    Sweeps stop when off(A) = ||A - diag(A)||_F <= tol * ||A||_F.

Block version (:func:`_block_jacobi_eigh_torch`), n > one tile:
    split into 2m blocks of size b (b = 64, so one block pair is one 128 x 128
    tile); the block round-robin pairs blocks (I, J); each pair's 2b x 2b
    subproblem [[A_II, A_IJ], [A_JI, A_JJ]] is diagonalised by the scalar
    solver (all m pairs at once, batched -- one tile per pair), and its
    2b x 2b orthogonal factor U is applied as block matrix products
    A[rows of I,J] <- U^T A[...],  A[:, cols of I,J] <- A[...] U,  V <- V U
    -- GEMMs on the Tensor Engine.

Both accept leading batch dimensions and real float32/float64 (the device
kernel is real fp32). No LAPACK call anywhere.
"""

from __future__ import annotations

import torch


def round_robin(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Pairs for the ``n - 1`` rounds of one sweep (``n`` even): ``(top, bot)``,
    each ``(n - 1, n // 2)``; within a round every index appears exactly once."""
    assert n % 2 == 0
    players = list(range(n))
    tops, bots = [], []
    for _ in range(n - 1):
        tops.append(players[: n // 2])
        bots.append(players[n // 2:][::-1])
        players = [players[0], players[-1]] + players[1:-1]
    return torch.tensor(tops), torch.tensor(bots)


def _rotations(app, aqq, apq):
    """(c, s) zeroing a_pq (Rutishauser): t = sign(th) / (|th| + sqrt(th^2 + 1)),
    th = (a_qq - a_pp) / (2 a_pq); c = 1/sqrt(1+t^2), s = t c."""
    zero = apq == 0
    safe = torch.where(zero, torch.ones_like(apq), apq)
    th = (aqq - app) / (2 * safe)
    t = torch.sign(th) / (th.abs() + torch.sqrt(th * th + 1))
    t = torch.where(th == 0, torch.ones_like(t), t)
    t = torch.where(zero, torch.zeros_like(t), t)
    cth = torch.rsqrt(t * t + 1)
    return cth, t * cth


def _off(A):
    """(off-diagonal Frobenius norm, Frobenius norm), without cancellation."""
    eye = torch.eye(A.shape[-1], dtype=torch.bool, device=A.device)
    return torch.linalg.matrix_norm(A.masked_fill(eye, 0)), torch.linalg.matrix_norm(A)


def _apply_round(A, V, top, bot):
    """One round: n/2 disjoint rotations applied as a row pass and a column pass."""
    app = A[..., top, top]
    aqq = A[..., bot, bot]
    apq = A[..., top, bot]
    cs, sn = _rotations(app, aqq, apq)
    c1, s1 = cs.unsqueeze(-1), sn.unsqueeze(-1)
    # rows: A[p,:] <- c A[p,:] - s A[q,:];  A[q,:] <- s A[p,:] + c A[q,:]
    P, Q = A[..., top, :], A[..., bot, :]
    A = A.clone()
    A[..., top, :] = c1 * P - s1 * Q
    A[..., bot, :] = s1 * P + c1 * Q
    # columns, same rotation from the right
    c2, s2 = cs.unsqueeze(-2), sn.unsqueeze(-2)
    P, Q = A[..., :, top], A[..., :, bot]
    A[..., :, top] = c2 * P - s2 * Q
    A[..., :, bot] = s2 * P + c2 * Q
    P, Q = V[..., :, top], V[..., :, bot]
    V = V.clone()
    V[..., :, top] = c2 * P - s2 * Q
    V[..., :, bot] = s2 * P + c2 * Q
    return A, V


def _sorted(A, V):
    w = A.diagonal(dim1=-2, dim2=-1)
    w, order = torch.sort(w, dim=-1)
    V = torch.gather(V, -1, order.unsqueeze(-2).expand_as(V))
    return w, V


def _jacobi_eigh_torch(A: torch.Tensor, tol: float, max_sweeps: int, sort: bool = True):
    """Scalar parallel Jacobi. Returns ``(w, V, sweeps)`` with ``A = V diag(w) V^T``
    (``w`` ascending when ``sort``); ``sweeps`` is the number of sweeps run."""
    n = A.shape[-1]
    A = 0.5 * (A + A.mT)
    pad = n % 2
    if pad:
        A = torch.nn.functional.pad(A, (0, 1, 0, 1))
    m = n + pad
    V = torch.eye(m, dtype=A.dtype, device=A.device).expand_as(A).clone()
    sweeps = 0
    if m >= 2:
        tops, bots = round_robin(m)
        tops, bots = tops.to(A.device), bots.to(A.device)
        for sweeps in range(max_sweeps + 1):
            off, tot = _off(A)
            if bool((off <= tol * tot).all()) or sweeps == max_sweeps:
                break
            for r in range(m - 1):
                A, V = _apply_round(A, V, tops[r], bots[r])
    if pad:  # the padded row/column stays exactly zero; drop it
        A, V = A[..., :n, :n], V[..., :n, :n]
    if not sort:
        return A.diagonal(dim1=-2, dim2=-1), V, sweeps
    w, V = _sorted(A, V)
    return w, V, sweeps


def _inner_torch(sub, inner_sweeps):
    return _jacobi_eigh_torch(sub, 0.0, inner_sweeps, sort=False)[1]


def _block_jacobi_eigh_torch(A: torch.Tensor, tol: float, max_sweeps: int, block: int = 64, inner_sweeps: int = 2,
                             inner=None, mm=None):
    """Block parallel Jacobi for n beyond one tile (2 * block <= 128).

    Each block pair gets a fixed ``inner_sweeps`` scalar sweeps (uniform
    work per round, as on the device); the outer sweeps run to ``tol``.
    Returns ``(w ascending, V, sweeps)``. The device path passes
    ``inner(sub, inner_sweeps) -> U`` (the Jacobi kernel per pair tile) and
    ``mm(X, Y) -> X @ Y`` (trnblas GEMM kernels); the defaults are torch.
    """
    n = A.shape[-1]
    inner = inner or _inner_torch
    mm = mm or torch.matmul
    if inner is _inner_torch and n <= 2 * block:
        return _jacobi_eigh_torch(A, tol, max_sweeps)
    A = 0.5 * (A + A.mT)
    nb = -(-n // block)
    nb += nb % 2
    m = nb * block
    # pad with a decoupled diagonal far below the spectrum; dropped at the end
    shift = torch.linalg.matrix_norm(A).amax() + 1
    pad = m - n
    if pad:
        A = torch.nn.functional.pad(A, (0, pad, 0, pad))
        idx = torch.arange(n, m, device=A.device)
        A[..., idx, idx] = -shift.to(A.dtype) * (1 + torch.arange(pad, device=A.device, dtype=A.dtype))
    V = torch.eye(m, dtype=A.dtype, device=A.device).expand_as(A).clone()
    tops, bots = round_robin(nb)
    ar = torch.arange(block, device=A.device)
    sweeps = 0
    for sweeps in range(max_sweeps + 1):
        off, tot = _off(A)
        if bool((off <= tol * tot).all()) or sweeps == max_sweeps:
            break
        for r in range(nb - 1):
            # index sets of the nb/2 block pairs: (npair, 2*block)
            idx = torch.cat([tops[r][:, None] * block + ar, bots[r][:, None] * block + ar], dim=1).to(A.device)
            sub = A[..., idx[:, :, None], idx[:, None, :]]          # (..., npair, 2b, 2b)
            # one tile per pair, batched, fixed sweeps; unsorted (sorting inside a pair
            # whose blocks swap top/bottom roles between rounds makes the sweep cycle)
            U = inner(sub, inner_sweeps)
            # rows then columns as block matmuls:  A_S <- U^T A_S ; A_S <- A_S U
            rows = A[..., idx, :]                                    # (..., npair, 2b, m)
            A = A.clone()
            A[..., idx, :] = mm(U.mT, rows)
            cols = A[..., :, idx].movedim(-2, -3)                    # (..., npair, m, 2b)
            A[..., :, idx] = mm(cols, U).movedim(-3, -2)
            vcols = V[..., :, idx].movedim(-2, -3)
            V = V.clone()
            V[..., :, idx] = mm(vcols, U).movedim(-3, -2)
    w, V = _sorted(A, V)
    if pad:  # padded eigenvalues are the lowest, with eigenvectors on the pad rows
        w, V = w[..., pad:], V[..., :n, pad:]
    return w, V, sweeps
