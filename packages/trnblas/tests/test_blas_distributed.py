"""trnblas.distributed on 4 gloo ranks (127.0.0.1) against NumPy/SciPy on the whole matrices.

One spawn runs every check; sizes do not divide by 4 (or by 2 on a 2 x 2
mesh).  Tolerance: ``testing.tolerance(float64, k)`` relative to
``max(|A| |B|)`` -- the dot-product rounding bound, since the ranks sum the
k terms in another order than one process.  Bytes sent are asserted exactly
against the formulas in trnblas.distributed.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

from trnsci import distributed as D
from trnsci import testing

P = 4


def _checks():
    import torch
    import torch.distributed as dist
    from torch.distributed.tensor import Replicate, Shard

    from trnblas import distributed as TD

    r = dist.get_rank()
    out = testing.RankChecks()
    check = out.check

    def close(name, got_dt, ref, scale, k):
        g = got_dt.full_tensor().numpy()
        err = float(np.max(np.abs(g - ref))) if ref.size else 0.0
        check(name, g.shape == ref.shape and err <= testing.tolerance(torch.float64, k) * scale, err)

    def dist_(x, m, pl):
        return D.distribute(torch.from_numpy(x) if r == 0 else None, m, pl)

    m1 = D.mesh()
    m_, k_, n_ = 13, 10, 7
    A, B, C = testing.random((m_, k_), seed=1), testing.random((k_, n_), seed=2), testing.random((m_, n_), seed=3)
    ref = 0.5 * A @ B + 2.0 * C
    scale = float(np.max(np.abs(A) @ np.abs(B))) + 2 * float(np.max(np.abs(C)))
    for alg, pa in (("row", [Shard(0)]), ("col", [Shard(1)])):
        a, b, c = dist_(A, m1, pa), dist_(B, m1, [Shard(0)]), dist_(C, m1, [Shard(0)])
        with D.counting() as t:
            res = TD.gemm(0.5, a, b, 2.0, c, algorithm=alg)
        close(f"gemm {alg}", res, ref, scale, k_)
        want = TD.gemm_bytes(alg, m_, n_, k_, (P,), (r,), 8)
        check(f"gemm {alg} bytes", t.by_kind.get(alg == "row" and "all_gather" or "reduce_scatter") == want
              and t.by_kind.get("redistribute", 0) == 0, (t.by_kind, want))
    # auto from replicated inputs: row for m >= k; a wide-k problem picks col
    res = TD.gemm(1.0, dist_(A, m1, [Replicate()]), dist_(B, m1, [Replicate()]))
    close("gemm auto", res, A @ B, scale, k_)
    check("choose_gemm", TD.choose_gemm(13, 7, 10, 4)[0] == "row" and TD.choose_gemm(5, 5, 40, 4)[0] == "col")
    # SUMMA on 2 x 2, 1 x 4 and 4 x 1 meshes (k panels from two different splits of k)
    m_, k_, n_ = 9, 11, 6
    A, B = testing.random((m_, k_), seed=4), testing.random((k_, n_), seed=5)
    scale = float(np.max(np.abs(A) @ np.abs(B)))
    for shape in ((2, 2), (1, 4), (4, 1)):
        m2 = D.mesh(shape)
        a, b = dist_(A, m2, [Shard(0), Shard(1)]), dist_(B, m2, [Shard(0), Shard(1)])
        with D.counting() as t:
            res = TD.gemm(1.0, a, b)
        close(f"summa {shape}", res, A @ B, scale, k_)
        want = TD.gemm_bytes("summa", m_, n_, k_, shape, tuple(m2.get_coordinate()), 8)
        check(f"summa {shape} bytes", t.by_kind.get("broadcast", 0) == want and t.bytes == want + t.by_kind["status"],
              (t.by_kind, want))
    # syrk both ways
    n_, k_ = 11, 6
    A = testing.random((n_, k_), seed=6)
    scale = float(np.max(np.abs(A) @ np.abs(A).T))
    nr = D.shard_sizes(n_, P)[r]
    for alg, pl, want in (("row", [Shard(0)], (P - 1) * nr * k_ * 8), ("col", [Shard(1)], (n_ - nr) * n_ * 8)):
        a = dist_(A, m1, pl)
        with D.counting() as t:
            res = TD.syrk(2.0, a, algorithm=alg)
        close(f"syrk {alg}", res, 2.0 * A @ A.T, 2 * scale, k_)
        check(f"syrk {alg} bytes", t.bytes - t.by_kind["status"] == want, (t.by_kind, want))
    # trsm: left (transposed through the mesh) and right (local), vs scipy
    n_, nrhs = 10, 7
    T = np.triu(testing.random((n_, n_), seed=7)) + 4 * np.eye(n_)
    Bm = testing.random((n_, nrhs), seed=8)
    b = dist_(Bm, m1, [Shard(0)])
    with D.counting() as t:
        x = TD.trsm(1.5, torch.from_numpy(T), b, side="left", uplo="upper")
    ref = scipy.linalg.solve_triangular(T, 1.5 * Bm, lower=False)
    close("trsm left", x, ref, float(np.max(np.abs(ref))) * 4, n_)
    rows, cols = D.shard_sizes(n_, P), D.shard_sizes(nrhs, P)
    want = (rows[r] * (nrhs - cols[r]) + (n_ - rows[r]) * cols[r]) * 8
    check("trsm left bytes", t.by_kind.get("redistribute") == want, (t.by_kind, want))
    Lt = np.tril(testing.random((nrhs, nrhs), seed=9)) + 4 * np.eye(nrhs)
    with D.counting() as t:
        x = TD.trsm(1.0, torch.from_numpy(Lt), b, side="right", uplo="lower", trans=True)
    ref = scipy.linalg.solve_triangular(Lt, Bm.T, lower=True, trans=0).T  # X L^T = B  <=>  L X^T = B^T
    close("trsm right", x, ref, float(np.max(np.abs(ref))) * 4, nrhs)
    check("trsm right moves nothing", t.bytes == t.by_kind["status"] == 24, t.by_kind)
    # bad input is a ValueError on every rank, not a hang
    try:
        TD.gemm(1.0, dist_(A, m1, [Shard(0)]), dist_(A, m1, [Shard(0)]))
        check("gemm bad shapes", False, "no error")
    except ValueError as e:
        check("gemm bad shapes", "inner dims" in str(e), e)
    try:
        TD.gemm(1.0, dist_(A, m1, [Shard(0)]), np.ones((2, 2)))
        check("gemm bad type", False, "no error")
    except TypeError as e:
        check("gemm bad type", "B must be" in str(e), e)
    return out


@pytest.fixture(scope="module")
def results():
    return D.spawn(_checks, P, timeout=300, collective_timeout=60)


def test_blas_distributed(results):
    testing.assert_ranks_passed(results, at_least=20)
