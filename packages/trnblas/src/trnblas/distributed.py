"""Distributed level-3 BLAS on torch.distributed (the cuBLASMp role): gemm, syrk, trsm on DTensors.

Operands are DTensors (see :mod:`trnsci.distributed`); each rank's block
product runs through :func:`trnblas.gemm` / :func:`trnblas.trsm`, so the
local work takes the same torch or NKI route as a one-process call.  Words
below are matrix elements; bytes = words x element size.  ``m_r`` etc. are
this rank's :func:`trnsci.distributed.shard_sizes` shares.

gemm, ``C = alpha A B (+ beta C)``, ``A`` m x k, ``B`` k x n:

* ``"row"`` (1-D mesh): ``A`` Shard(0), ``B`` Shard(0); all-gather ``B``,
  ``C_r = A_r B``.  Rank r sends ``(P - 1) k_r n`` words.
* ``"col"`` (1-D mesh): ``A`` Shard(1), ``B`` Shard(0); each rank forms the
  rank-``k_r`` partial product ``A[:, k_r] B[k_r, :]`` (m x n) and a
  reduce-scatter sums it into row blocks.  Rank r sends ``(m - m_r) n``.
* ``"summa"`` (2-D mesh pr x pc): ``A``, ``B``, ``C`` all
  ``[Shard(0), Shard(1)]``; for each k-panel the owner broadcasts its ``A``
  panel along its mesh row and its ``B`` panel along its mesh column.  Rank
  (i, j) sends ``(pc - 1) m_i k_j + (pr - 1) k_i n_j`` words (``k_j``: its
  share of k split pc ways, ``k_i``: split pr ways).

Rule (:func:`choose_gemm`): on a 2-D mesh, SUMMA; on a 1-D mesh, the one of
row / col with fewer words per rank on average -- ``(P-1)/P k n`` against
``(P-1)/P m n``, i.e. ``"row"`` when ``k <= m`` else ``"col"``.
:func:`choose_gemm` also reports the SUMMA figure on the squarest grid,
``(m k (pc-1) + k n (pr-1)) / P``, so a caller can decide to build a 2-D mesh
(``trnsci.distributed.mesh(grid_shape(P))``); it is smaller than both 1-D
figures once P >= 4 and the three dimensions are comparable.

Inputs in another layout are first moved by
:func:`trnsci.distributed.redistribute` (counted as ``"redistribute"``).
"""

from __future__ import annotations

import torch

from trnsci import distributed as D

__all__ = ["gemm", "syrk", "trsm", "choose_gemm", "gemm_bytes"]


def _dt():
    from torch.distributed import tensor as dt

    return dt


def _check_dtensor(x, name: str, where: str, ndim: int = 2):
    if not isinstance(x, _dt().DTensor):
        raise TypeError(f"{where}: {name} must be a torch.distributed.tensor.DTensor, got {type(x).__name__}")
    if x.dim() != ndim:
        raise ValueError(f"{where}: {name} must be {ndim}-D, got shape {tuple(x.shape)}")


def choose_gemm(m: int, n: int, k: int, P: int, mesh_ndim: int = 1) -> tuple[str, str]:
    """``(algorithm, reason)`` for an m x k times k x n product on ``P`` ranks (see module docstring)."""
    if mesh_ndim == 2:
        return "summa", "2-D mesh: SUMMA"
    if P == 1:
        return "row", "one rank: no communication"
    f = (P - 1) / P
    row, col = f * k * n, f * m * n
    pr, pc = D.grid_shape(P)
    summa = (m * k * (pc - 1) + k * n * (pr - 1)) / P
    alg = "row" if row <= col else "col"
    return alg, (f"words/rank: row {row:.0f}, col {col:.0f}, summa on {pr}x{pc} {summa:.0f}"
                 f" (needs a 2-D mesh); picked {alg}")


def gemm_bytes(algorithm: str, m: int, n: int, k: int, mesh_shape, coord, itemsize: int) -> int:
    """Bytes the rank at mesh ``coord`` sends in :func:`gemm`'s algorithm (inputs already in its layout)."""
    if algorithm == "row":
        (P,), (r,) = mesh_shape, coord
        return (P - 1) * D.shard_sizes(k, P)[r] * n * itemsize
    if algorithm == "col":
        (P,), (r,) = mesh_shape, coord
        return (m - D.shard_sizes(m, P)[r]) * n * itemsize
    (pr, pc), (i, j) = mesh_shape, coord
    return ((pc - 1) * D.shard_sizes(m, pr)[i] * D.shard_sizes(k, pc)[j]
            + (pr - 1) * D.shard_sizes(k, pr)[i] * D.shard_sizes(n, pc)[j]) * itemsize


def _local_mm(alpha, a, b, transB=False):
    import trnblas

    if a.shape[0] == 0 or (b.shape[0] if transB else b.shape[1]) == 0 or a.shape[1] == 0:
        rows, cols = a.shape[0], (b.shape[0] if transB else b.shape[1])
        return torch.zeros(rows, cols, dtype=a.dtype)
    return trnblas.gemm(alpha, a, b, transB=transB)


def _summa(alpha, A, B, timeout):
    m2 = A.device_mesh
    pr, pc = m2.size(0), m2.size(1)
    i, j = m2.get_coordinate()
    (m, k), n = A.shape, B.shape[1]
    offA, offB = D.shard_offsets(k, pc), D.shard_offsets(k, pr)
    mi, nj = D.shard_sizes(m, pr)[i], D.shard_sizes(n, pc)[j]
    a, b = A.to_local(), B.to_local()
    C = torch.zeros(mi, nj, dtype=a.dtype)
    row_g, col_g = m2.get_group(1), m2.get_group(0)
    cuts = sorted(set(offA) | set(offB))
    for k0, k1 in zip(cuts[:-1], cuts[1:]):
        if k1 == k0:
            continue
        jA = max(q for q in range(pc) if offA[q] <= k0)
        iB = max(q for q in range(pr) if offB[q] <= k0)
        ap = a[:, k0 - offA[j]:k1 - offA[j]].contiguous() if j == jA else torch.empty(mi, k1 - k0, dtype=a.dtype)
        bp = b[k0 - offB[i]:k1 - offB[i], :].contiguous() if i == iB else torch.empty(k1 - k0, nj, dtype=a.dtype)
        D.broadcast(ap, jA, row_g, timeout)
        D.broadcast(bp, iB, col_g, timeout)
        C += _local_mm(alpha, ap, bp)
    return C


def gemm(alpha, A, B, beta=0.0, C=None, *, algorithm: str = "auto", timeout: float | None = None):
    """``alpha A B + beta C`` for DTensors ``A`` (m x k) and ``B`` (k x n) on one mesh.

    ``algorithm``: ``"auto"`` (:func:`choose_gemm`), ``"row"`` or ``"col"``
    (1-D mesh), ``"summa"`` (2-D mesh).  Returns a DTensor: ``Shard(0)`` on a
    1-D mesh, ``[Shard(0), Shard(1)]`` on a 2-D one.  ``C`` (optional) is
    moved to that layout.  Raises ``TypeError``/``ValueError`` naming the
    argument on every rank for bad input.
    """
    dt = _dt()
    where = "trnblas.distributed.gemm"
    with D.agree(where, timeout=timeout):
        _check_dtensor(A, "A", where)
        _check_dtensor(B, "B", where)
        if A.device_mesh != B.device_mesh:
            raise ValueError(f"{where}: A and B must be on the same mesh")
        if A.shape[1] != B.shape[0]:
            raise ValueError(f"{where}: A is {tuple(A.shape)} and B is {tuple(B.shape)}; inner dims differ")
        if A.dtype != B.dtype:
            raise TypeError(f"{where}: A is {A.dtype} and B is {B.dtype}; dtypes must match")
        m2 = A.device_mesh
        if m2.ndim not in (1, 2):
            raise ValueError(f"{where}: the mesh must be 1-D or 2-D, got {m2.ndim}-D")
        if algorithm not in ("auto", "row", "col", "summa"):
            raise ValueError(f"{where}: algorithm must be 'auto', 'row', 'col' or 'summa', got {algorithm!r}")
        if algorithm == "auto":
            algorithm = choose_gemm(A.shape[0], B.shape[1], A.shape[1], m2.size(), m2.ndim)[0]
        if (algorithm == "summa") != (m2.ndim == 2):
            raise ValueError(f"{where}: algorithm {algorithm!r} does not run on a {m2.ndim}-D mesh")
        if C is not None:
            _check_dtensor(C, "C", where)
            if tuple(C.shape) != (A.shape[0], B.shape[1]):
                raise ValueError(f"{where}: C is {tuple(C.shape)}, expected {(A.shape[0], B.shape[1])}")
    S0, S1 = dt.Shard(0), dt.Shard(1)
    m, n = A.shape[0], B.shape[1]
    if algorithm == "summa":
        out_pl = [S0, S1]
        c = _summa(alpha, D.redistribute(A, out_pl, timeout), D.redistribute(B, out_pl, timeout), timeout)
    elif algorithm == "row":
        out_pl = [S0]
        a, b = D.redistribute(A, [S0], timeout).to_local(), D.redistribute(B, [S0], timeout).to_local()
        bfull = D.all_gather(b, 0, D.shard_sizes(B.shape[0], m2.size()), timeout=timeout)
        c = _local_mm(alpha, a, bfull)
    else:
        out_pl = [S0]
        a, b = D.redistribute(A, [S1], timeout).to_local(), D.redistribute(B, [S0], timeout).to_local()
        c = D.reduce_scatter(_local_mm(alpha, a, b), 0, timeout=timeout)
    if C is not None and beta != 0:
        c = c + beta * D.redistribute(C, out_pl, timeout).to_local()
    return D.from_local(c, m2, out_pl, (m, n))


def syrk(alpha, A, *, algorithm: str = "auto", timeout: float | None = None):
    """``alpha A A^T`` (both triangles) for a DTensor ``A`` (n x k) on a 1-D mesh; result ``Shard(0)``.

    ``"row"``: ``A`` Shard(0), all-gather ``A``; rank r sends ``(P-1) n_r k``
    words.  ``"col"``: ``A`` Shard(1), partial ``A_r A_r^T`` reduce-scattered;
    rank r sends ``(n - n_r) n``.  ``"auto"`` takes row when ``k <= n``.
    """
    dt = _dt()
    where = "trnblas.distributed.syrk"
    with D.agree(where, timeout=timeout):
        _check_dtensor(A, "A", where)
        if A.device_mesh.ndim != 1:
            raise ValueError(f"{where}: A must be on a 1-D mesh")
        if algorithm not in ("auto", "row", "col"):
            raise ValueError(f"{where}: algorithm must be 'auto', 'row' or 'col', got {algorithm!r}")
    n, k = A.shape
    P = A.device_mesh.size()
    if algorithm == "auto":
        algorithm = "row" if k <= n else "col"
    if algorithm == "row":
        a = D.redistribute(A, [dt.Shard(0)], timeout).to_local()
        full = D.all_gather(a, 0, D.shard_sizes(n, P), timeout=timeout)
        c = _local_mm(alpha, a, full, transB=True)
    else:
        a = D.redistribute(A, [dt.Shard(1)], timeout).to_local()
        c = D.reduce_scatter(_local_mm(alpha, a, a, transB=True), 0, timeout=timeout)
    return D.from_local(c, A.device_mesh, [dt.Shard(0)], (n, n))


def trsm(alpha, A, B, side: str = "left", uplo: str = "upper", trans: bool = False, diag: str = "nonunit", *,
         timeout: float | None = None):
    """Solve ``op(A) X = alpha B`` (side left) or ``X op(A) = alpha B`` (right) for row-distributed ``B``.

    ``A`` is a plain tensor, the same on every rank; ``B`` a DTensor
    ``Shard(0)`` on a 1-D mesh; ``X`` comes back ``Shard(0)``.  Right side:
    every row of ``X`` needs only its own row of ``B``, no communication.
    Left side: a column of ``X`` needs the whole column of ``B``, so ``B``
    is transposed to ``Shard(1)`` (rank r sends ``n_r (nrhs - c_r)``
    words), each rank solves its columns, and ``X`` goes back
    (``(n - n_r) c_r`` words), where ``c_r`` is its share of the nrhs
    columns.  A distributed substitution would instead serialise the ranks.
    """
    import trnblas

    dt = _dt()
    where = "trnblas.distributed.trsm"
    side = {"L": "left", "R": "right"}.get(side, side) if isinstance(side, str) else side
    with D.agree(where, timeout=timeout):
        _check_dtensor(B, "B", where)
        if not isinstance(A, torch.Tensor) or isinstance(A, dt.DTensor):
            raise TypeError(f"{where}: A must be a plain torch.Tensor (replicated), got {type(A).__name__}")
        if B.device_mesh.ndim != 1:
            raise ValueError(f"{where}: B must be on a 1-D mesh")
        if side not in ("left", "right"):
            raise ValueError(f"{where}: side must be 'left' or 'right', got {side!r}")
        need = B.shape[0] if side == "left" else B.shape[1]
        if A.dim() != 2 or tuple(A.shape) != (need, need):
            raise ValueError(f"{where}: A must be {need} x {need} for side={side!r}, got {tuple(A.shape)}")
    S0 = dt.Shard(0)
    b = D.redistribute(B, [S0], timeout)
    if side == "right":
        x = b.to_local()
        x = trnblas.trsm(alpha, A, x, side, uplo, trans, diag) if x.numel() else x.clone()
        return D.from_local(x, B.device_mesh, [S0], B.shape)
    bc = D.redistribute(b, [dt.Shard(1)], timeout)
    x = bc.to_local()
    x = trnblas.trsm(alpha, A, x, side, uplo, trans, diag) if x.numel() else x.clone()
    return D.redistribute(D.from_local(x, B.device_mesh, [dt.Shard(1)], B.shape), [S0], timeout)
