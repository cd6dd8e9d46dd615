"""Krylov solvers and tall-skinny QR on row-distributed data (torch.distributed).

Vectors are split by rows (``Shard(0)``, :func:`trnsci.distributed.shard_sizes`);
the operator is anything with ``A(x_local) -> (A x)_local`` -- a
:class:`trnsparse.distributed.DistCSR`, or a callable doing its own halo
exchange.  Every inner product is a local dot and an all-reduce; dots that
are needed at the same point travel in one all-reduce:

* ``cg``: 2 all-reduces per iteration (``p.Ap``; then ``r.r`` and ``r.z``
  together), plus one per operator application inside ``A``.
* ``bicgstab``: 4 per iteration (``rhat.v``; ``t.s`` and ``t.t``;
  ``rhat.r`` and ``r.r`` ...).
* ``gmres(restart)``: classical Gram-Schmidt applied twice (CGS2, as
  stable as modified Gram-Schmidt in practice) so iteration ``j`` needs 3
  all-reduces of ``j + 1`` numbers instead of ``j + 1`` separate ones --
  latency, not bandwidth, is what limits distributed Krylov methods.

The small Hessenberg least-squares problem and all scalars are computed
identically on every rank from all-reduced numbers, so the ranks take the
same branch in every test (no extra agreement step is needed).

``tsqr(A)``: ``A`` (m x n, m >> n) rows split; each rank factors its block
``A_r = Q_r R_r``, the ``R_r`` (n x n each) are gathered on every rank
(rank r sends ``(P-1) n^2`` words), stacked and factored once more,
``[R_0; ...; R_{P-1}] = Q' R``; then ``Q = diag(Q_r) Q'``.  ``R`` has a
non-negative diagonal (signs fixed), so it is unique for full-rank ``A``.
"""

from __future__ import annotations

import math

import torch

from trnsci import distributed as D

__all__ = ["cg", "bicgstab", "gmres", "tsqr"]


def _local(x):
    return x.to_local() if hasattr(x, "to_local") else x


def _dots(pairs, group, timeout) -> list:
    """``[sum over ranks of vdot(a, b)]`` for every pair, in one all-reduce."""
    if not pairs:
        return []
    vals = torch.stack([torch.vdot(a, b) if a.numel() else torch.zeros((), dtype=a.dtype) for a, b in pairs])
    vals = vals.to(torch.complex128 if vals.is_complex() else torch.float64)
    D.all_reduce(vals, group=group, timeout=timeout, kind="dots")
    return [complex(v) if vals.is_complex() else float(v) for v in vals]


def _setup(where, A, b, x0, tol, maxiter, group, timeout):
    import torch.distributed as dist

    with D.agree(where, group, timeout):
        if not callable(A):
            raise TypeError(f"{where}: A must be a DistCSR or a callable on local row blocks, got {type(A).__name__}")
        bl = _local(b)
        if not isinstance(bl, torch.Tensor) or bl.dim() != 1:
            raise ValueError(f"{where}: b must be this rank's 1-D piece (tensor or Shard(0) DTensor)")
        if not (isinstance(tol, (int, float)) and tol >= 0):
            raise ValueError(f"{where}: tol must be a non-negative number, got {tol!r}")
        if not (isinstance(maxiter, int) and maxiter >= 1):
            raise ValueError(f"{where}: maxiter must be a positive int, got {maxiter!r}")
        x = torch.zeros_like(bl) if x0 is None else _local(x0).clone()
        if x.shape != bl.shape:
            raise ValueError(f"{where}: x0 piece has shape {tuple(x.shape)}, b piece {tuple(bl.shape)}")
    del dist
    return bl, x


def _result(x, b, it, rel, m_shape):
    if hasattr(b, "device_mesh"):
        x = D.from_local(x, b.device_mesh, b.placements, b.shape)
    return x, it, rel


def cg(A, b, x0=None, tol: float = 1e-8, maxiter: int = 1000, M=None, *, group=None, timeout=None):
    """Conjugate gradients for Hermitian positive definite ``A``; returns ``(x, iterations, relres)``.

    ``M`` (optional): a local preconditioner ``r_local -> z_local`` (e.g.
    block Jacobi on the rank's diagonal block).  ``relres`` is the
    recursive residual ``||r|| / ||b||`` when the loop stopped.
    """
    bl, x = _setup("trnsolver.distributed.cg", A, b, x0, tol, maxiter, group, timeout)
    r = bl - A(x) if x0 is not None else bl.clone()
    (bb,) = _dots([(bl, bl)], group, timeout)
    bn = math.sqrt(abs(bb)) or 1.0
    z = M(r) if M is not None else r
    rr, rz = _dots([(r, r), (r, z)], group, timeout)
    p = z.clone()
    it = 0
    while math.sqrt(abs(rr)) > tol * bn and it < maxiter:
        it += 1
        Ap = A(p)
        (pAp,) = _dots([(p, Ap)], group, timeout)
        alpha = rz / pAp
        x = x + alpha * p
        r = r - alpha * Ap
        z = M(r) if M is not None else r
        rr, rz_new = _dots([(r, r), (r, z)], group, timeout)
        p = z + (rz_new / rz) * p
        rz = rz_new
    return _result(x, b, it, math.sqrt(abs(rr)) / bn, None)


def bicgstab(A, b, x0=None, tol: float = 1e-8, maxiter: int = 1000, *, group=None, timeout=None):
    """BiCGSTAB for general ``A``; returns ``(x, iterations, relres)``."""
    bl, x = _setup("trnsolver.distributed.bicgstab", A, b, x0, tol, maxiter, group, timeout)
    r = bl - A(x) if x0 is not None else bl.clone()
    rhat = r.clone()
    bb, rr = _dots([(bl, bl), (r, r)], group, timeout)
    bn = math.sqrt(abs(bb)) or 1.0
    rho = alpha = omega = 1.0
    v = torch.zeros_like(r)
    p = torch.zeros_like(r)
    it = 0
    while math.sqrt(abs(rr)) > tol * bn and it < maxiter:
        it += 1
        (rho_new,) = _dots([(rhat, r)], group, timeout)
        if rho_new == 0:
            break
        beta = (rho_new / rho) * (alpha / omega)
        rho = rho_new
        p = r + beta * (p - omega * v)
        v = A(p)
        (rv,) = _dots([(rhat, v)], group, timeout)
        alpha = rho / rv
        s = r - alpha * v
        t = A(s)
        ts, tt = _dots([(t, s), (t, t)], group, timeout)
        omega = ts / tt if tt else 0.0
        x = x + alpha * p + omega * s
        r = s - omega * t
        (rr,) = _dots([(r, r)], group, timeout)
        if omega == 0:
            break
    return _result(x, b, it, math.sqrt(abs(rr)) / bn, None)


def gmres(A, b, x0=None, tol: float = 1e-8, restart: int = 30, maxiter: int = 1000, *, group=None, timeout=None):
    """Restarted GMRES (CGS2 Arnoldi, Givens rotations); ``maxiter`` counts inner iterations."""
    bl, x = _setup("trnsolver.distributed.gmres", A, b, x0, tol, maxiter, group, timeout)
    if not (isinstance(restart, int) and restart >= 1):
        raise ValueError(f"trnsolver.distributed.gmres: restart must be a positive int, got {restart!r}")
    dt = torch.complex128 if bl.is_complex() else torch.float64
    (bb,) = _dots([(bl, bl)], group, timeout)
    bn = math.sqrt(abs(bb)) or 1.0
    it, rel = 0, 1.0
    while it < maxiter:
        r = bl - A(x)
        (rr,) = _dots([(r, r)], group, timeout)
        beta = math.sqrt(abs(rr))
        rel = beta / bn
        if rel <= tol:
            break
        m = min(restart, maxiter - it)
        V = torch.zeros(bl.shape[0], m + 1, dtype=bl.dtype)
        H = torch.zeros(m + 1, m, dtype=dt)
        cs, sn = torch.zeros(m, dtype=dt), torch.zeros(m, dtype=dt)
        g = torch.zeros(m + 1, dtype=dt)
        g[0] = beta
        V[:, 0] = r / beta
        k = 0
        for j in range(m):
            it += 1
            w = A(V[:, j])
            h = torch.zeros(j + 1, dtype=dt)
            for _ in range(2):  # CGS2
                loc = (V[:, :j + 1].conj().T @ w).to(dt) if w.numel() else torch.zeros(j + 1, dtype=dt)
                D.all_reduce(loc, group=group, timeout=timeout, kind="dots")
                w = w - V[:, :j + 1] @ loc.to(bl.dtype)
                h += loc
            (ww,) = _dots([(w, w)], group, timeout)
            hn = math.sqrt(abs(ww))
            H[:j + 1, j] = h
            H[j + 1, j] = hn
            if hn > 0:
                V[:, j + 1] = w / hn
            for i in range(j):  # apply the previous rotations
                a, c = H[i, j].clone(), H[i + 1, j].clone()
                H[i, j] = cs[i].conj() * a + sn[i].conj() * c
                H[i + 1, j] = -sn[i] * a + cs[i] * c
            a, c = H[j, j], H[j + 1, j]
            den = math.sqrt(abs(a) ** 2 + abs(c) ** 2) or 1.0
            cs[j], sn[j] = a / den, c / den
            H[j, j], H[j + 1, j] = den, 0.0
            g[j + 1] = -sn[j] * g[j]
            g[j] = cs[j].conj() * g[j]
            k = j + 1
            rel = abs(complex(g[j + 1])) / bn
            if rel <= tol or hn == 0:
                break
        y = torch.linalg.solve_triangular(H[:k, :k], g[:k, None], upper=True)[:, 0]
        x = x + (V[:, :k] @ y.to(bl.dtype))
        if rel <= tol:
            break
    return _result(x, b, it, rel, None)


def tsqr(A, *, group=None, timeout=None):
    """``(Q, R)`` of a row-distributed tall-skinny ``A`` (DTensor ``Shard(0)`` or local block): Q row-split like A.

    A rank's block may have fewer than ``n`` rows (its ``R_r`` is then
    ``m_r x n``) or none.  ``R`` (n x n) is returned on every rank with a
    non-negative real diagonal.
    """
    import torch.distributed as dist

    where = "trnsolver.distributed.tsqr"
    a = _local(A)
    with D.agree(where, group, timeout):
        if not isinstance(a, torch.Tensor) or a.dim() != 2:
            raise ValueError(f"{where}: A must be a 2-D tensor or Shard(0) DTensor piece")
    P, r = dist.get_world_size(group), dist.get_rank(group)
    Qr, Rr = torch.linalg.qr(a, mode="reduced")  # Rr: (min(m_r, n), n)
    k = Rr.shape[0]
    ks = [int(v[0]) for v in D.all_to_all([torch.tensor([k])] * P, [(1,)] * P, torch.int64, group, timeout,
                                          kind="tsqr_setup")]
    Rs = D.all_gather(Rr, 0, ks, group, timeout)  # (sum k, n), identical on every rank
    Q2, R = torch.linalg.qr(Rs, mode="reduced")
    sgn = torch.sgn(torch.diagonal(R))
    sgn = torch.where(sgn == 0, torch.ones_like(sgn), sgn)
    R = sgn.conj()[:, None] * R
    Q2 = Q2 * sgn[None, :]
    off = sum(ks[:r])
    Q = Qr @ Q2[off:off + k]
    if hasattr(A, "device_mesh"):
        Q = D.from_local(Q, A.device_mesh, A.placements, (A.shape[0], Q.shape[1]))
    return Q, R
