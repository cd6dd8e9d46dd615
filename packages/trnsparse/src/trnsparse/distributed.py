"""Row-partitioned CSR on torch.distributed: SpMV with a halo exchange of only the entries a rank needs.

A :class:`DistCSR` holds this rank's block of rows of a global ``m x n``
matrix (rows split by :func:`trnsci.distributed.shard_sizes`, as a
``Shard(0)`` DTensor splits them) with *global* column indices.  Vectors
``x`` are split the same way over their ``n`` entries.  At construction the
ranks agree once which of their ``x`` entries each other rank's rows touch
(two small all-to-alls: counts, then indices); every :meth:`DistCSR.matvec`
then sends exactly those entries -- rank r sends ``sum over q != r of
|{j owned by r : some row of q has a nonzero in column j}|`` values --
and multiplies its rows by ``[x_own ; x_halo]`` with :func:`trnsparse.spmv`
(the columns are renumbered into that local order once).
"""

from __future__ import annotations

import numpy as np
import torch

from trnsci import distributed as D

__all__ = ["DistCSR"]


class DistCSR:
    """This rank's rows of a distributed sparse matrix, with the halo plan for ``A @ x``.

    Parameters
    ----------
    local : trnsparse.CSRMatrix or scipy.sparse matrix, shape (m_r, n)
        This rank's ``shard_sizes(m, P)[r]`` rows, global column indices.
    shape : (m, n)
        The global shape.
    group : ProcessGroup, optional
        Default: the world.
    """

    def __init__(self, local, shape, group=None, timeout: float | None = None):
        import torch.distributed as dist

        from .formats import CSRMatrix, from_scipy

        where = "trnsparse.distributed.DistCSR"
        self.group, self.timeout = group, timeout
        P, r = dist.get_world_size(group), dist.get_rank(group)
        with D.agree(where, group, timeout):
            if not isinstance(local, CSRMatrix):
                if not hasattr(local, "tocsr"):
                    raise TypeError(f"{where}: local must be a trnsparse.CSRMatrix or scipy sparse matrix, "
                                    f"got {type(local).__name__}")
                local = from_scipy(local.tocsr(), "csr")
            m, n = (int(s) for s in shape)
            if local.shape != (D.shard_sizes(m, P)[r], n):
                raise ValueError(f"{where}: local is {local.shape}, rank {r} of {P} must hold "
                                 f"{(D.shard_sizes(m, P)[r], n)} of a {(m, n)} matrix")
        self.shape, self.dtype = (m, n), local.values.dtype
        self.P, self.rank = P, r
        self.col_off = D.shard_offsets(n, P)
        c0, c1 = self.col_off[r], self.col_off[r + 1]
        cols = local.col_indices.numpy()
        off_cols = np.unique(cols[(cols < c0) | (cols >= c1)])
        owner = np.searchsorted(np.asarray(self.col_off[1:]), off_cols, side="right")
        need = [off_cols[owner == q] for q in range(P)]  # global indices I read from rank q
        counts = D.all_to_all([torch.tensor([len(x)], dtype=torch.int64) for x in need], [(1,)] * P, torch.int64,
                              group, timeout, kind="halo_setup")
        give = D.all_to_all([torch.from_numpy(x.astype(np.int64)) for x in need],
                            [(int(c[0]),) for c in counts], torch.int64, group, timeout, kind="halo_setup")
        self._give = [g - c0 for g in give]  # my local entries each rank reads
        self._need_n = [len(x) for x in need]
        # renumber columns: own -> col - c0, halo -> n_own + position in concat(need)
        halo = np.concatenate(need) if need else np.zeros(0, np.int64)
        n_own = c1 - c0
        local_cols = np.where((cols >= c0) & (cols < c1), cols - c0,
                              n_own + np.searchsorted(halo, cols) if halo.size else 0)
        self.local = CSRMatrix(local.values, torch.from_numpy(local_cols.astype(np.int64)), local.row_ptrs,
                               (local.shape[0], n_own + halo.size))
        self.halo_bytes = sum(len(g) for q, g in enumerate(self._give) if q != r) * local.values.element_size()

    @classmethod
    def from_global(cls, A, group=None, timeout: float | None = None):
        """Every rank passes the same global matrix (scipy or trnsparse CSR) and keeps its rows."""
        import torch.distributed as dist

        sp = A.to_scipy() if hasattr(A, "to_scipy") else A.tocsr()
        P, r = dist.get_world_size(group), dist.get_rank(group)
        off = D.shard_offsets(sp.shape[0], P)
        return cls(sp[off[r]:off[r + 1]], sp.shape, group, timeout)

    def matvec(self, x: torch.Tensor) -> torch.Tensor:
        """``A x`` for this rank's rows; ``x`` is this rank's ``Shard(0)`` piece (a tensor or DTensor)."""
        from . import ops

        if not isinstance(x, torch.Tensor):
            raise TypeError(f"DistCSR.matvec: x must be a tensor, got {type(x).__name__}")
        if hasattr(x, "to_local"):
            x = x.to_local()
        want = self.col_off[self.rank + 1] - self.col_off[self.rank]
        if x.shape != (want,):
            raise ValueError(f"DistCSR.matvec: x must have this rank's {want} entries, got shape {tuple(x.shape)}")
        got = D.all_to_all([x[g] for g in self._give], [(k,) for k in self._need_n], x.dtype, self.group,
                           self.timeout, kind="halo")
        xx = torch.cat([x, *got])
        if self.local.shape[0] == 0:
            return torch.zeros(0, dtype=torch.promote_types(self.dtype, x.dtype))
        return ops.spmv(self.local, xx.to(self.dtype))

    __call__ = matvec
