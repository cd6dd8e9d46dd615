"""trntensor.distributed.einsum on 3 gloo ranks against numpy.einsum on the whole operands.

Ragged extents (7 and 5 over 3 ranks).  Tolerance: ``testing.tolerance(float64, K)``
relative to ``numpy.einsum`` of the absolute values, K the contracted
length (the ranks sum in another order).  Bytes asserted against the
reduce-scatter / all-reduce volumes in the module docstring.
"""

from __future__ import annotations

import numpy as np
import pytest

from trnsci import distributed as D
from trnsci import testing

P = 3


def _checks():
    import torch
    import torch.distributed as dist
    from torch.distributed.tensor import Replicate, Shard

    from trntensor import distributed as TD

    r = dist.get_rank()
    out = testing.RankChecks()
    check = out.check

    def dist_(x, pl):
        return D.distribute(torch.from_numpy(x) if r == 0 else None, m, pl)

    def close(name, got, eq, *xs, k=1):
        ref = np.einsum(eq, *xs)
        scale = np.einsum(eq, *[np.abs(x) for x in xs])
        g = got.full_tensor().numpy()
        err = float(np.max(np.abs(g - ref))) if ref.size else 0.0
        check(name, g.shape == ref.shape and err <= testing.tolerance(torch.float64, k) * max(float(np.max(scale)),
                                                                                              1e-300), err)

    m = D.mesh()
    A, B = testing.random((7, 5), seed=1), testing.random((5, 4), seed=2)
    X = testing.random((7, 5, 6), seed=3)
    # sharded index kept in the output: no communication
    a, b = dist_(A, [Shard(0)]), dist_(B, [Replicate()])
    with D.counting() as t:
        y = TD.einsum("ij,jk->ik", a, b)
    close("row-sharded gemm", y, "ij,jk->ik", A, B, k=5)
    check("row-sharded gemm no comm", t.bytes == t.by_kind.get("status", 0), t.by_kind)
    # contracted sharded index: reduce-scatter (default) or all-reduce
    a, bs = dist_(A, [Shard(1)]), dist_(B, [Shard(0)])
    with D.counting() as t:
        y = TD.einsum("ij,jk->ik", a, bs)
    close("contracted shard, reduce-scatter", y, "ij,jk->ik", A, B, k=5)
    check("reduce-scatter bytes", t.by_kind.get("reduce_scatter") == (7 - D.shard_sizes(7, P)[r]) * 4 * 8,
          t.by_kind)
    with D.counting() as t:
        y = TD.einsum("ij,jk->ik", a, b, out="replicate")
    close("contracted shard, all-reduce (replicated operand sliced)", y, "ij,jk->ik", A, B, k=5)
    c = D.shard_sizes(28, P)[r]
    check("all-reduce bytes", t.by_kind.get("all_reduce") == (28 - c + (P - 1) * c) * 8, t.by_kind)
    # 3 operands, DF-like: sharded auxiliary index contracted to a scalar-per-pair
    y = TD.einsum("iaq,jbq->ijab", dist_(X[:, :2], [Shard(2)]), dist_(X[:, 2:4], [Shard(2)]))
    close("df contraction", y, "iaq,jbq->ijab", X[:, :2], X[:, 2:4], k=6)
    y = TD.einsum("ij,jk,kl->il", dist_(A, [Replicate()]), dist_(B, [Shard(1)]), dist_(B.T @ B, [Replicate()]))
    close("chain with middle shard", y, "ij,jk,kl->il", A, B, B.T @ B, k=20)
    # two different sharded letters: the larger keeps its shard
    y = TD.einsum("ijq,jk->ikq", dist_(X, [Shard(2)]), dist_(B, [Shard(1)]))
    close("two sharded letters", y, "ijq,jk->ikq", X, B, k=5)
    check("two sharded letters keeps q", y.placements == (Shard(2),), y.placements)
    try:
        TD.einsum("ij,jk", dist_(A, [Shard(0)]), dist_(B, [Shard(0)]))
        check("implicit output rejected", False, "no error")
    except ValueError as e:
        check("implicit output rejected", "->" in str(e), e)
    return out


@pytest.fixture(scope="module")
def results():
    return D.spawn(_checks, P, timeout=300, collective_timeout=60)


def test_tensor_distributed(results):
    testing.assert_ranks_passed(results, count=11)
