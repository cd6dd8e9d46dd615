"""Cholesky and LU with partial pivoting on a 2-D block-cyclic process grid (ScaLAPACK / cuSOLVERMp layout).

``P = pr x pc`` ranks in row-major order (rank ``r`` sits at ``(r // pc,
r % pc)``, as ``trnsci.distributed.mesh(grid_shape(P))`` lays them out).
Square blocks of ``nb``: block ``(I, J)`` lives on process ``(I % pr, J %
pc)``; a rank stores its blocks packed, rows in global order then columns
in global order (:class:`BlockCyclic2D`).  Grid rule
(:meth:`BlockCyclic2D.grid`): the most nearly square ``pr <= pc``
(``trnsci.distributed.grid_shape``) -- traffic per step is proportional
to ``pr + pc``, smallest when square, and the short side on the process
column keeps LU's per-column pivot search (a collective over ``pr``
ranks) cheap.

Words each rank sends (8-byte elements; ``w_k`` the width of block ``k``,
``k`` runs over the blocks, ``R_p(S)`` = rows in row blocks ``I in S`` with
``I % pr == p``, ``C_q(S)`` likewise for columns):

cholesky (right-looking, lower), step ``k`` on ``(pk, qk) = (k % pr, k % pc)``:
    ``(pr-1) w_k^2``  at ``(pk, qk)`` (diagonal factor down its process column)
    ``+ (pc-1) w_k R_p(>k)``  if ``q == qk`` (panel along the process row)
    ``+ (pr-1) w_k sum_{J>k, J%pr==p, J%pc==q} w_J`` (the transposed panel
    down process column ``q``)
    -- summed over ranks about ``(pr + pc - 2) n^2 / 2`` words, against
    ``(P - 1) n^2 / 2`` on the 1-D layout.

lu (partial pivoting), step ``k``:
    ``w_k (pr-1) (2 w_k + 2)`` if ``q == qk`` (pivot search: per column one
    all-gather in the process column of each rank's best candidate row and
    the current row ``j``, kind ``"pivot_search"``)
    ``+ (pc-1) w_k (1 + R_p(>=k))`` if ``q == qk`` (pivots and panel along
    the process row)
    ``+ (pr-1) w_k C_q(>k)`` if ``p == pk`` (the U block row down the
    process column)
    ``+`` the row interchanges outside the panel (kind ``"row_swap"``, one
    all-to-all per step in each process column): each row that moves to a
    different process row sends its ``C_q`` local entries -- data
    dependent, at most ``2 w_k`` rows per step.

A failure (not positive definite, exactly singular pivot) raises
``trnsci.linalg.LinAlgError`` on the rank owning the diagonal block and
``DistributedError`` on every other rank.  Real floating dtypes only.
"""

from __future__ import annotations

import bisect

import torch

from trnsci import distributed as D

__all__ = ["BlockCyclic2D", "cholesky_2d", "lu_2d"]


class BlockCyclic2D:
    """2-D block-cyclic layout of an ``n x n`` matrix in ``nb x nb`` blocks on a ``pr x pc`` grid (row-major ranks)."""

    def __init__(self, n: int, nb: int, pr: int, pc: int):
        for name, v in (("n", n), ("nb", nb), ("pr", pr), ("pc", pc)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"BlockCyclic2D: {name} must be a positive int, got {v!r}")
        self.n, self.nb, self.pr, self.pc = n, nb, pr, pc
        self.P = pr * pc
        self.nblocks = -(-n // nb)

    @classmethod
    def grid(cls, n: int, nb: int, P: int) -> BlockCyclic2D:
        """The documented grid rule: ``(pr, pc) = trnsci.distributed.grid_shape(P)`` (nearly square, pr <= pc)."""
        pr, pc = D.grid_shape(P)
        return cls(n, nb, pr, pc)

    def coords(self, r: int) -> tuple[int, int]:
        return r // self.pc, r % self.pc

    def block(self, b: int) -> tuple[int, int]:
        return b * self.nb, min(self.n, (b + 1) * self.nb)

    def width(self, b: int) -> int:
        c0, c1 = self.block(b)
        return c1 - c0

    def local_rows(self, p: int) -> list[int]:
        return [i for b in range(p, self.nblocks, self.pr) for i in range(*self.block(b))]

    def local_cols(self, q: int) -> list[int]:
        return [i for b in range(q, self.nblocks, self.pc) for i in range(*self.block(b))]

    def split(self, A: torch.Tensor, r: int) -> torch.Tensor:
        """Rank ``r``'s blocks of a full matrix (no communication)."""
        p, q = self.coords(r)
        return A[self.local_rows(p)][:, self.local_cols(q)].clone()

    def join(self, pieces) -> torch.Tensor:
        """The full matrix from every rank's blocks (e.g. gathered on one rank)."""
        out = torch.empty(self.n, self.n, dtype=pieces[0].dtype)
        for r, piece in enumerate(pieces):
            p, q = self.coords(r)
            rows, cols = torch.tensor(self.local_rows(p)), torch.tensor(self.local_cols(q))
            out[rows[:, None], cols[None, :]] = piece
        return out


def _groups(desc):
    """Row and column process groups; every rank creates all of them in the same order (torch's rule)."""
    import torch.distributed as dist

    rowg = [dist.new_group([p * desc.pc + q for q in range(desc.pc)]) for p in range(desc.pr)]
    colg = [dist.new_group([p * desc.pc + q for p in range(desc.pr)]) for q in range(desc.pc)]
    return rowg, colg


def _release(rowg, colg):
    import torch.distributed as dist

    for g in rowg + colg:
        try:
            dist.destroy_process_group(g)
        except Exception:  # noqa: BLE001 -- a group torch already tore down
            pass


def _check(where, A_local, desc, timeout):
    import torch.distributed as dist

    P, r = dist.get_world_size(), dist.get_rank()
    with D.agree(where, None, timeout):
        if not isinstance(desc, BlockCyclic2D) or desc.P != P:
            raise ValueError(f"{where}: desc must be a BlockCyclic2D whose grid has {P} ranks")
        p, q = desc.coords(r)
        want = (len(desc.local_rows(p)), len(desc.local_cols(q)))
        if not isinstance(A_local, torch.Tensor) or tuple(A_local.shape) != want:
            raise ValueError(f"{where}: A_local must be this rank's {want} blocks, got "
                             f"{tuple(getattr(A_local, 'shape', ()))}")
        if not A_local.dtype.is_floating_point:
            raise TypeError(f"{where}: A_local must be a real floating tensor, got {A_local.dtype}")
    return r


def _loff(desc, b: int, parts: int) -> int:
    """Where block ``b`` starts among its owner's local rows (parts = pr) or columns (parts = pc)."""
    return sum(desc.width(c) for c in range(b % parts, b, parts))


def cholesky_2d(A_local: torch.Tensor, desc: BlockCyclic2D, *, timeout=None) -> torch.Tensor:
    """Lower Cholesky factor of an SPD matrix in ``desc``'s 2-D block-cyclic layout: this rank's blocks of L.

    Per column block ``k``: the diagonal owner factors ``A_kk``
    (``torch.linalg.cholesky_ex``) and broadcasts ``L_kk`` down its
    process column, which solves its panel blocks (``trnblas.trsm``); the
    panel goes along each process row and, transposed, down each process
    column, so every rank holds ``L_Ik`` for its row blocks and ``L_Jk``
    for its column blocks and updates its own lower blocks ``A_IJ -= L_Ik
    L_Jk^T`` (``trnblas.gemm``, SUMMA-style).  Upper blocks come back zero.
    """
    import trnblas
    from trnsci import linalg as la

    where = "trnsolver.distributed.cholesky (2-D)"
    r = _check(where, A_local, desc, timeout)
    p, q = desc.coords(r)
    pr, pc = desc.pr, desc.pc
    rows = desc.local_rows(p)
    L = A_local.clone()
    rowg, colg = _groups(desc)
    try:
        for k in range(desc.nblocks):
            k0, k1 = desc.block(k)
            w = k1 - k0
            pk, qk = k % pr, k % pc
            Lkk = torch.zeros(w, w, dtype=L.dtype)
            with D.agree(where, None, timeout):
                if (p, q) == (pk, qk):
                    lr, lc = _loff(desc, k, pr), _loff(desc, k, pc)
                    Lkk, info = torch.linalg.cholesky_ex(L[lr:lr + w, lc:lc + w])
                    if int(info) != 0:
                        raise la.LinAlgError(f"{where}: the matrix is not positive definite (leading minor of "
                                             f"order {k0 + int(info)})", info=k0 + int(info))
                    L[lr:lr + w, lc:lc + w] = Lkk
            s = bisect.bisect_left(rows, k1)  # my local rows below block k
            if q == qk:
                D.broadcast(Lkk, pk, colg[q], timeout)
                lc = _loff(desc, k, pc)
                if s < len(rows):
                    L[s:, lc:lc + w] = trnblas.trsm(1.0, Lkk, L[s:, lc:lc + w], side="right", uplo="lower",
                                                    trans=True)
                L[:bisect.bisect_left(rows, k0), lc:lc + w] = 0  # blocks above the diagonal
                panel = L[s:, lc:lc + w].clone()
            else:
                panel = torch.empty(len(rows) - s, w, dtype=L.dtype)
            if panel.shape[0]:
                D.broadcast(panel, qk, rowg[p], timeout)
            # the transposed panel: L_Jk for my column blocks J > k, from the process row that owns row block J
            LJ = {}
            for src in range(pr):
                Js = [J for J in range(k + 1, desc.nblocks) if J % pr == src and J % pc == q]
                if not Js:
                    continue
                if p == src:
                    buf = torch.cat([panel[_loff(desc, J, pr) - s:_loff(desc, J, pr) - s + desc.width(J)]
                                     for J in Js])
                else:
                    buf = torch.empty(sum(desc.width(J) for J in Js), w, dtype=L.dtype)
                D.broadcast(buf, src, colg[q], timeout)
                for J, piece in zip(Js, buf.split([desc.width(J) for J in Js])):
                    LJ[J] = piece
            for J in range(k + 1, desc.nblocks):
                if J % pc != q:
                    continue
                d0 = desc.block(J)[0]
                ld = _loff(desc, J, pc)
                sJ = bisect.bisect_left(rows, d0)  # lower blocks only: rows at or below block J
                if sJ < len(rows):
                    L[sJ:, ld:ld + desc.width(J)] -= trnblas.gemm(1.0, panel[sJ - s:], LJ[J], transB=True)
    finally:
        _release(rowg, colg)
    return L


def lu_2d(A_local: torch.Tensor, desc: BlockCyclic2D, *, timeout=None):
    """LU with partial pivoting in ``desc``'s 2-D block-cyclic layout: ``(LU_local, ipiv)`` as LAPACK ``getrf``.

    Per column block ``k``, the process column ``qk`` factors the panel
    column by column: each rank offers its largest-magnitude entry (first
    one on ties, like ``idamax``) with its row, one all-gather in the
    process column picks the pivot, and every rank of the column swaps and
    updates its panel rows.  The pivots and the panel go along the process
    rows; every process column applies the interchanges to its other
    columns (one all-to-all); process row ``pk`` solves its part of the U
    block row (``trnblas.trsm``) and sends it down the process columns;
    every rank updates its own trailing blocks (``trnblas.gemm``).
    ``ipiv`` (0-based, global) is on every rank, as
    ``scipy.linalg.lu_factor`` returns it.
    """
    import trnblas
    from trnsci import linalg as la

    where = "trnsolver.distributed.lu (2-D)"
    r = _check(where, A_local, desc, timeout)
    p, q = desc.coords(r)
    pr, pc, n, nb = desc.pr, desc.pc, desc.n, desc.nb
    rows, cols = desc.local_rows(p), desc.local_cols(q)
    lrow = {g: i for i, g in enumerate(rows)}
    F = A_local.clone()
    ipiv = torch.arange(n)
    rowg, colg = _groups(desc)

    def prow(i):  # process row owning global row i
        return (i // nb) % pr

    try:
        for k in range(desc.nblocks):
            k0, k1 = desc.block(k)
            w = k1 - k0
            pk, qk = k % pr, k % pc
            piv = torch.empty(w, dtype=torch.int64)
            singular = None
            if q == qk:
                lc = _loff(desc, k, pc)
                Fp = F[:, lc:lc + w]  # a view: updates land in F
                for jj in range(w):
                    j = k0 + jj
                    sj = bisect.bisect_left(rows, j)
                    msg = torch.zeros(2 * w + 2, dtype=F.dtype)
                    msg[0], msg[1] = -1.0, n
                    if sj < len(rows):
                        m = int(torch.argmax(Fp[sj:, jj].abs()))  # first maximum
                        msg[0], msg[1] = Fp[sj + m, jj].abs(), rows[sj + m]
                        msg[2:2 + w] = Fp[sj + m]
                    if j in lrow:
                        msg[2 + w:] = Fp[lrow[j]]
                    got = D.all_to_all([msg] * pr, [(2 * w + 2,)] * pr, F.dtype, colg[q], timeout,
                                       kind="pivot_search")
                    best = max(range(pr), key=lambda s_: (float(got[s_][0]), -float(got[s_][1])))
                    pv = int(got[best][1])
                    prow_j = got[prow(j)]
                    piv[jj] = pv
                    pivot_row = got[best][2:2 + w].clone()
                    if j in lrow:
                        Fp[lrow[j]] = pivot_row
                    if pv != j and pv in lrow:
                        Fp[lrow[pv]] = prow_j[2 + w:]
                    if pivot_row[jj] == 0:
                        singular = j if singular is None else singular
                        continue  # keep the column's collectives in step; raised after the panel
                    s = bisect.bisect_left(rows, j + 1)
                    if s < len(rows):
                        Fp[s:, jj] /= pivot_row[jj]
                        Fp[s:, jj + 1:] -= torch.outer(Fp[s:, jj], pivot_row[jj + 1:])
            with D.agree(where, None, timeout):
                if (p, q) == (pk, qk) and singular is not None:
                    raise la.LinAlgError(f"{where}: the matrix is singular (U[{singular}, {singular}] == 0)",
                                         info=singular + 1)
            D.broadcast(piv, qk, rowg[p], timeout)
            ipiv[k0:k1] = piv
            # the interchanges as one permutation of rows: position i now holds old row src[i]
            src = {}
            for jj in range(w):
                j, pv = k0 + jj, int(piv[jj])
                a, b = src.get(j, j), src.get(pv, pv)
                src[j], src[pv] = b, a
            moved = sorted(i for i, o in src.items() if i != o)
            other = [c for c in range(len(cols)) if not (q == qk and lc <= c < lc + w)]
            if moved and other:
                oc = torch.tensor(other)
                old = F[:, oc]
                sends = [torch.empty(0, len(other), dtype=F.dtype)] * pr
                for dst in range(pr):
                    if dst != p:
                        mine = [src[i] for i in moved if prow(i) == dst and prow(src[i]) == p]
                        if mine:
                            sends[dst] = old[[lrow[o] for o in mine]]
                shapes = [(sum(1 for i in moved if prow(i) == p and prow(src[i]) == s_), len(other))
                          if s_ != p else (0, len(other)) for s_ in range(pr)]
                got = D.all_to_all(sends, shapes, F.dtype, colg[q], timeout, kind="row_swap")
                newv = F[:, oc].clone()
                taken = [0] * pr
                for i in moved:
                    if prow(i) != p:
                        continue
                    o = src[i]
                    if prow(o) == p:
                        newv[lrow[i]] = old[lrow[o]]
                    else:
                        newv[lrow[i]] = got[prow(o)][taken[prow(o)]]
                        taken[prow(o)] += 1
                F[:, oc] = newv
            # the panel (rows of blocks >= k) along the process rows
            s0 = bisect.bisect_left(rows, k0)
            if q == qk:
                Lp = F[s0:, lc:lc + w].clone()
            else:
                Lp = torch.empty(len(rows) - s0, w, dtype=F.dtype)
            if Lp.shape[0]:
                D.broadcast(Lp, qk, rowg[p], timeout)
            sc = bisect.bisect_left(cols, k1)  # my columns right of block k
            U = torch.empty(w, len(cols) - sc, dtype=F.dtype)
            if p == pk and U.shape[1]:
                lr = _loff(desc, k, pr)
                U = trnblas.trsm(1.0, Lp[:w], F[lr:lr + w, sc:], side="left", uplo="lower", diag="unit")
                F[lr:lr + w, sc:] = U
            if U.shape[1]:
                D.broadcast(U, pk, colg[q], timeout)
            s1 = bisect.bisect_left(rows, k1)
            if s1 < len(rows) and U.shape[1]:
                F[s1:, sc:] -= trnblas.gemm(1.0, Lp[s1 - s0:], U)
    finally:
        _release(rowg, colg)
    return F, ipiv
