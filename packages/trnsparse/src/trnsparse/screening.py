"""Integral screening for sparse quantum chemistry (Schwarz and density bounds).

Schwarz: ``|(mn|ls)| <= sqrt((mn|mn)) sqrt((ls|ls)) = Q_mn Q_ls``. Pairs
whose bound falls below a threshold are dropped; the survivors form the
sparsity pattern (usually tiled to BSR) of the integral contractions.
All comparisons are evaluated in float64 on squared quantities, so the
masks are exact 0/1 decisions, not rounded ones.
"""

from __future__ import annotations

import math

import torch

from trnsci import validate
from trnsci.dispatch import Op

_REAL = (torch.float32, torch.float64)


def _real(x, name, where, ndim):
    t = validate.tensor(x, name, where)
    validate.dtype(t, name, _REAL, where)
    validate.ndim(t, name, ndim, where)
    return t


def _thr(threshold, where):
    t = validate.scalar(threshold, "threshold", where, complex_ok=False)
    if not (math.isfinite(t) and t >= 0):
        raise ValueError(f"{where}: threshold must be finite and >= 0, got {threshold!r}")
    return float(t)


@validate.numpy_io
def schwarz_bounds(diagonal_integrals):
    """Schwarz factors ``Q = sqrt(|(mn|mn)|)``, elementwise (any shape).

    Examples
    --------
    >>> import torch, trnsparse
    >>> trnsparse.schwarz_bounds(torch.tensor([4., -9.]))
    tensor([2., 3.])
    """
    d = _real(diagonal_integrals, "diagonal_integrals", "schwarz_bounds", (1, 2))
    return SCHWARZ_BOUNDS(d)


SCHWARZ_BOUNDS = Op("trnsparse.schwarz_bounds", "elements", float("inf"),  # elementwise: no kernel
          size=lambda d: float(d.numel()), doc="sqrt(|d|); size = n",
          schema="(Tensor d) -> Tensor", fake=lambda d: torch.empty_like(d))


@SCHWARZ_BOUNDS.lowering("torch")
def _schwarz_bounds_torch(d):
    return torch.sqrt(torch.abs(d))


@validate.numpy_io
def screen_quartets(Q, threshold=1e-10):
    """Significant pairs: ``Q_mn**2 > threshold`` (a quartet with itself survives Schwarz).

    Returns a bool tensor of Q's shape.

    Examples
    --------
    >>> import torch, trnsparse
    >>> trnsparse.screen_quartets(torch.tensor([1e-6, 1e-4]), threshold=1e-10)
    tensor([False,  True])
    """
    where = "screen_quartets"
    Q = _real(Q, "Q", where, (1, 2))
    return SCREEN_QUARTETS(Q, _thr(threshold, where))


SCREEN_QUARTETS = Op("trnsparse.screen_quartets", "elements", float("inf"),  # elementwise: no kernel
          size=lambda Q, t: float(Q.numel()) ** 2, doc="Q_ij Q_kl > threshold mask; size = n^4 (pairs^2)",
          schema="(Tensor Q, float threshold) -> Tensor",
          fake=lambda Q, t: torch.empty_like(Q, dtype=torch.bool))


@SCREEN_QUARTETS.lowering("torch")
def _screen_quartets_torch(Q, threshold):
    q = Q.double()
    return q * q > threshold


@validate.numpy_io
def density_screen(Q, P, threshold=1e-10):
    """Density-weighted pair screen: ``Q_mn * max_ls(|P_ls| Q_ls) > threshold``.

    A pair (mn) is kept if it can contribute ``|P_ls (mn|ls)| > threshold``
    to some Fock element.

    Examples
    --------
    >>> import torch, trnsparse
    >>> Q = torch.tensor([[1.0, 1e-8], [1e-8, 1.0]], dtype=torch.float64)
    >>> trnsparse.density_screen(Q, torch.eye(2, dtype=torch.float64), threshold=1e-6)
    tensor([[ True, False],
            [False,  True]])
    """
    where = "density_screen"
    Q = _real(Q, "Q", where, 2)
    P = _real(P, "P", where, 2)
    if Q.shape != P.shape:
        raise ValueError(f"{where}: Q has shape {tuple(Q.shape)} but P has shape {tuple(P.shape)}")
    return DENSITY_SCREEN(Q, P, _thr(threshold, where))


DENSITY_SCREEN = Op("trnsparse.density_screen", "elements", float("inf"),  # elementwise: no kernel
          size=lambda Q, P, t: float(Q.numel()) ** 2, doc="density-weighted Schwarz mask; size = pairs^2",
          schema="(Tensor Q, Tensor P, float threshold) -> Tensor",
          fake=lambda Q, P, t: torch.empty_like(Q, dtype=torch.bool))


@DENSITY_SCREEN.lowering("torch")
def _density_screen_torch(Q, P, threshold):
    q = Q.double()
    pq = (P.double().abs() * q).max() if q.numel() else q.new_zeros(())
    return q * pq > threshold


def sparsity_stats(Q, threshold=1e-10) -> dict:
    """Pair and quartet counts surviving :func:`screen_quartets`.

    Returns a dict with ``n_shells``, ``total_pairs``, ``significant_pairs``,
    ``pair_sparsity``, ``total_quartets``, ``significant_quartets_upper``,
    ``quartet_sparsity_lower``.

    Examples
    --------
    >>> import torch, trnsparse
    >>> trnsparse.sparsity_stats(torch.eye(2), threshold=0.5)["significant_pairs"]
    2
    """
    where = "sparsity_stats"
    Q = _real(Q, "Q", where, 2)
    mask = _screen_quartets_torch(Q, _thr(threshold, where))
    n = Q.shape[0]
    tot = int(Q.numel())
    sig = int(mask.sum())
    return {"n_shells": n, "total_pairs": tot, "significant_pairs": sig,
            "pair_sparsity": 1.0 - sig / tot if tot else 0.0,
            "total_quartets": tot * tot, "significant_quartets_upper": sig * sig,
            "quartet_sparsity_lower": 1.0 - (sig * sig) / (tot * tot) if tot else 0.0}


@validate.numpy_io
def screened_spmm(A, diag_integrals, B, threshold):
    """Schwarz-screened product ``C = (A * mask) @ B`` with ``mask_ij = |d_i| |d_j| > threshold``.

    Parameters
    ----------
    A : (n, n) dense tensor, float32/float64
    diag_integrals : (n,) tensor ``d`` (Schwarz factors are ``sqrt(|d|)``)
    B : (n, k) tensor
    threshold : float >= 0

    Returns
    -------
    (n, k) tensor. Differentiable in A and B (the mask is a constant).

    Notes
    -----
    The mask is exact: ``Q_i Q_j > sqrt(threshold)`` evaluated as
    ``|d_i| |d_j| > threshold`` in float64, with no square roots.

    Examples
    --------
    >>> import torch, trnsparse
    >>> A = torch.ones(2, 2); d = torch.tensor([1.0, 1e-12])
    >>> trnsparse.screened_spmm(A, d, torch.eye(2), threshold=1e-8)
    tensor([[1., 0.],
            [0., 0.]])
    """
    where = "screened_spmm"
    A = _real(A, "A", where, 2)
    d = _real(diag_integrals, "diag_integrals", where, 1)
    B = _real(B, "B", where, 2)
    validate.same_dtype(where, A=A, B=B)
    n = A.shape[0]
    if A.shape[1] != n or d.shape[0] != n or B.shape[0] != n:
        raise ValueError(f"{where}: need square A (n, n), diag_integrals (n,), B (n, k): A has shape "
                         f"{tuple(A.shape)}, diag_integrals has shape {tuple(d.shape)}, B has shape {tuple(B.shape)}")
    return SCREENED_SPMM(A, d, B, _thr(threshold, where))


SCREENED_SPMM = Op(
    # No hardware here to calibrate: worth a kernel once a few full Tensor
    # Engine tiles of work are done.
    "trnsparse.screened_spmm", "flops", 8 * 2 * 128 * 128 * 512,
    size=lambda A, d, B, threshold: 2.0 * A.shape[0] * A.shape[1] * B.shape[1],
    describe=lambda A, d, B, threshold: f"({A.shape[0]}x{A.shape[1]} masked) @ {B.shape[1]} column(s), "
                                        f"threshold {threshold:g}",
    doc="(A * [|d_i d_j| > threshold]) @ B; flops = 2 n^2 k",
    schema="(Tensor A, Tensor d, Tensor B, float threshold) -> Tensor",
    fake=lambda A, d, B, threshold: A.new_empty((A.shape[0], B.shape[1]), dtype=torch.promote_types(A.dtype, B.dtype)),
)


@SCREENED_SPMM.lowering("torch")
def _screened_spmm_torch(A, d, B, threshold):
    a = d.double().abs()
    mask = (a[:, None] * a[None, :]) > threshold
    return (A * mask.to(A.dtype)) @ B


