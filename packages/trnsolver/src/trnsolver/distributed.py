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

``cholesky(A_local, BlockCyclic(n, nb, P))``: right-looking Cholesky on a
1-D block-cyclic column layout (see :class:`BlockCyclic`); the owner of
each column block broadcasts its factored panel, every rank updates its
own trailing columns.  ``lu`` (partial pivoting) works the same way; with
whole columns on each rank its row interchanges need no communication.
Both also take a :class:`BlockCyclic2D` descriptor (a ``pr x pc`` process
grid, SUMMA-style trailing updates, distributed pivot search): see
:mod:`trnsolver.distributed2d`.
"""

from __future__ import annotations

import math

import torch

from trnsci import distributed as D

from .distributed2d import BlockCyclic2D, cholesky_2d, lu_2d

__all__ = ["cg", "bicgstab", "gmres", "tsqr", "BlockCyclic", "BlockCyclic2D", "cholesky", "lu"]


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


def _result(x, b, it, rel):
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
    return _result(x, b, it, math.sqrt(abs(rr)) / bn)


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
    return _result(x, b, it, math.sqrt(abs(rr)) / bn)


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
    return _result(x, b, it, rel)


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


# ====================================================== block-cyclic Cholesky

class BlockCyclic:
    """1-D block-cyclic columns (ScaLAPACK's layout with one process row): block ``b`` of ``nb`` on rank ``b % P``.

    DTensor has no block-cyclic placement, and a factorisation needs one:
    with plain blocks the last rank would own all the late (expensive)
    trailing updates.  ``local_columns(r)`` lists a rank's global columns
    in its local order.
    """

    def __init__(self, n: int, nb: int, P: int):
        for name, v in (("n", n), ("nb", nb), ("P", P)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"BlockCyclic: {name} must be a positive int, got {v!r}")
        self.n, self.nb, self.P = n, nb, P
        self.nblocks = -(-n // nb)

    def block(self, b: int) -> tuple[int, int]:
        return b * self.nb, min(self.n, (b + 1) * self.nb)

    def owner(self, b: int) -> int:
        return b % self.P

    def local_blocks(self, r: int) -> list[int]:
        return list(range(r, self.nblocks, self.P))

    def local_columns(self, r: int) -> list[int]:
        return [c for b in self.local_blocks(r) for c in range(*self.block(b))]

    def local_offset(self, b: int) -> int:
        """Where block ``b`` starts among its owner's local columns."""
        return sum(self.block(q)[1] - self.block(q)[0] for q in range(self.owner(b), b, self.P))

    def split(self, A: torch.Tensor, r: int) -> torch.Tensor:
        """Rank ``r``'s columns of a full matrix (no communication)."""
        return A[:, self.local_columns(r)].clone()

    def join(self, pieces) -> torch.Tensor:
        """The full matrix from every rank's columns (e.g. after an all-gather)."""
        out = torch.empty(self.n, self.n, dtype=pieces[0].dtype)
        for r, p in enumerate(pieces):
            out[:, self.local_columns(r)] = p
        return out


def _no_group_with_2d(group, name: str) -> None:
    if group is not None:
        raise ValueError(f"trnsolver.distributed.{name}: a BlockCyclic2D grid spans the default group; "
                         "group= must be None")


def _check_1d(where: str, A_local, desc, P: int, r: int, group, timeout) -> None:
    """The 1-D factorizations' arguments, agreed on by every rank (a bad one raises everywhere)."""
    with D.agree(where, group, timeout):
        if not isinstance(desc, BlockCyclic) or desc.P != P:
            raise ValueError(f"{where}: desc must be a BlockCyclic for {P} ranks")
        want = (desc.n, len(desc.local_columns(r)))
        if not isinstance(A_local, torch.Tensor) or tuple(A_local.shape) != want:
            raise ValueError(f"{where}: A_local must be this rank's {want} columns, got "
                             f"{tuple(getattr(A_local, 'shape', ()))}")


def cholesky(A_local: torch.Tensor, desc, *, group=None, timeout=None) -> torch.Tensor:
    """Lower Cholesky factor of an SPD matrix held in ``desc``'s block-cyclic columns; returns this rank's columns of L.

    Right-looking: for each column block, its owner factors the diagonal
    block (``torch.linalg.cholesky_ex``) and solves the panel below it
    (``trnblas.trsm``), broadcasts the panel -- block ``b``'s owner sends
    ``(P-1) (n - c_b) nb_b`` words -- and every rank updates its own
    trailing columns with the panel (``trnblas.gemm``).  A matrix that is
    not positive definite raises ``trnsci.linalg.LinAlgError`` on the
    owner of the failing block and ``DistributedError`` on the others.
    """
    import torch.distributed as dist

    import trnblas
    from trnsci import linalg as la

    if isinstance(desc, BlockCyclic2D):  # the grid spans the whole world (its row/column groups are made here)
        _no_group_with_2d(group, "cholesky")
        return cholesky_2d(A_local, desc, timeout=timeout)
    where = "trnsolver.distributed.cholesky"
    P, r = dist.get_world_size(group), dist.get_rank(group)
    _check_1d(where, A_local, desc, P, r, group, timeout)
    L = A_local.clone()
    n = desc.n
    mine = desc.local_blocks(r)
    for b in range(desc.nblocks):
        c0, c1 = desc.block(b)
        w = c1 - c0
        o = desc.owner(b)
        panel = torch.empty(n - c0, w, dtype=L.dtype)
        with D.agree(where, group, timeout):
            if r == o:
                lc = desc.local_offset(b)
                Lbb, info = torch.linalg.cholesky_ex(L[c0:c1, lc:lc + w])
                if int(info) != 0:
                    raise la.LinAlgError(f"{where}: the matrix is not positive definite (leading minor of order "
                                         f"{c0 + int(info)})", info=c0 + int(info))
                below = L[c1:, lc:lc + w]
                if below.shape[0]:
                    below = trnblas.trsm(1.0, Lbb, below, side="right", uplo="lower", trans=True)
                panel = torch.cat([Lbb, below])
                L[c0:, lc:lc + w] = panel
                L[:c0, lc:lc + w] = 0
        D.broadcast(panel, o, group, timeout)
        for b2 in mine:  # trailing update of my later blocks: A[d0:, d] -= P[d0:] P[d]^T
            if b2 <= b:
                continue
            d0, d1 = desc.block(b2)
            ld = desc.local_offset(b2)
            L[d0:, ld:ld + d1 - d0] -= trnblas.gemm(1.0, panel[d0 - c0:], panel[d0 - c0:d1 - c0], transB=True)
    return L


def lu(A_local: torch.Tensor, desc, *, group=None, timeout=None):
    """LU with partial pivoting of a square matrix in ``desc``'s block-cyclic columns: ``(LU_local, ipiv)``.

    The LAPACK ``getrf`` result: this rank's columns of the packed ``L\\U``
    (unit lower ``L``) and ``ipiv`` (0-based, global, every rank): row
    ``i`` was interchanged with row ``ipiv[i]``, as ``scipy.linalg.lu_factor``
    reports.  With whole columns on each rank the row interchanges are
    local; per column block, its owner factors the panel
    (``torch.linalg.lu_factor_ex``), broadcasts it with its pivots -- the
    owner of block ``b`` sends ``(P-1) ((n - c_b) nb_b + nb_b)`` 8-byte
    words -- and every rank swaps rows in its columns, solves for its part
    of the ``U`` block row (``trnblas.trsm``) and updates its trailing
    columns (``trnblas.gemm``).  An exactly singular panel raises
    ``LinAlgError`` on its owner, ``DistributedError`` elsewhere.
    """
    import torch.distributed as dist

    import trnblas
    from trnsci import linalg as la

    if isinstance(desc, BlockCyclic2D):
        _no_group_with_2d(group, "lu")
        return lu_2d(A_local, desc, timeout=timeout)
    where = "trnsolver.distributed.lu"
    P, r = dist.get_world_size(group), dist.get_rank(group)
    _check_1d(where, A_local, desc, P, r, group, timeout)
    F = A_local.clone()
    n = desc.n
    ipiv = torch.arange(n)
    for b in range(desc.nblocks):
        c0, c1 = desc.block(b)
        w = c1 - c0
        o = desc.owner(b)
        panel = torch.empty(n - c0, w, dtype=F.dtype)
        piv = torch.empty(w, dtype=torch.int64)
        with D.agree(where, group, timeout):
            if r == o:
                lc = desc.local_offset(b)
                LUp, pv, info = torch.linalg.lu_factor_ex(F[c0:, lc:lc + w])
                if int(info) != 0:
                    raise la.LinAlgError(f"{where}: the matrix is singular (U[{c0 + int(info) - 1}, "
                                         f"{c0 + int(info) - 1}] == 0)", info=c0 + int(info))
                panel, piv = LUp, pv.to(torch.int64) - 1 + c0
        D.broadcast(panel, o, group, timeout)
        D.broadcast(piv, o, group, timeout)
        ipiv[c0:c1] = piv
        for k in range(w):  # the interchanges, in order, on every local column
            i, j = c0 + k, int(piv[k])
            if i != j:
                F[[i, j]] = F[[j, i]]
        if r == o:
            F[c0:, desc.local_offset(b):desc.local_offset(b) + w] = panel
        L11 = panel[:w]
        L21 = panel[w:]
        for b2 in desc.local_blocks(r):
            if b2 <= b:
                continue
            d0, d1 = desc.block(b2)
            ld = desc.local_offset(b2)
            cols = slice(ld, ld + d1 - d0)
            U12 = trnblas.trsm(1.0, L11, F[c0:c1, cols], side="left", uplo="lower", diag="unit")
            F[c0:c1, cols] = U12
            if L21.shape[0]:
                F[c1:, cols] -= trnblas.gemm(1.0, L21, U12)
    return F, ipiv
