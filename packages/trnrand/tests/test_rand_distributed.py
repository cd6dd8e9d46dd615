"""trnrand.distributed on 3 gloo ranks: the ranks' draws put together equal the one-process draw, bit for bit.

The reference is the same trnrand function run in one process with an
unpartitioned Generator (the partitioned path computes the same words from
other counters, so equality is not self-comparison of one code path: each
rank skips ahead to its own block).  Bit-identical: ``torch.equal``.
"""

from __future__ import annotations

import pytest
import torch

from trnsci import distributed as D
from trnsci import testing

P = 3


def _checks():
    import torch.distributed as dist

    import trnrand
    from trnrand import distributed as RD

    r = dist.get_rank()
    out = testing.RankChecks()
    check = out.check

    def union(x):
        return torch.cat(D.all_gather(x, 0, [x.shape[0]] * P).split(x.shape[0]))

    m = D.mesh()
    g = RD.generator(seed=1234)
    one = trnrand.Generator(seed=1234)
    # equal shares, call after call: the partitioned positions track the one-process one
    for name, call in (("uniform f32", lambda n, gen: trnrand.uniform(n, generator=gen)),
                       ("normal f64 odd", lambda n, gen: trnrand.normal(n, dtype=torch.float64, generator=gen)),
                       ("normal f32 odd", lambda n, gen: trnrand.normal(n, generator=gen)),
                       ("gamma", lambda n, gen: trnrand.gamma(n, shape=0.7, generator=gen)),
                       ("randint", lambda n, gen: trnrand.randint(n, low=0, high=1000, generator=gen))):
        got = union(call(7, g))
        ref = call(7 * P, one)
        check(name, torch.equal(got, ref) and g.position() == one.position(), (g.position(), one.position()))
    # ragged global length as a DTensor
    for N in (10, 2, 0):
        mark = one.position()
        x = RD.draw(trnrand.normal, N, generator=g, mesh=m, dtype=torch.float64)
        ref = trnrand.normal(N, dtype=torch.float64, generator=one)
        one.advance_to(mark)
        one.advance(g.position() - mark)
        check(f"draw N={N}", torch.equal(x.full_tensor(), ref) and x.to_local().shape[0] == D.shard_sizes(N, P)[r])
    # seed=None: every rank gets rank 0's seed
    ge = RD.generator()
    seeds = D.all_gather(torch.tensor([ge.seed >> 1], dtype=torch.int64), 0, [1] * P)
    check("entropy seed agreed", int(seeds.min()) == int(seeds.max()) and ge.partition_rank == r)
    # different seeds on different ranks: ValueError everywhere
    try:
        RD.generator(seed=5 + (r == 2))
        check("seed mismatch", False, "no error")
    except ValueError as e:
        check("seed mismatch", "different seed" in str(e), e)
    # bad seed on one rank: its own error there, DistributedError elsewhere
    try:
        RD.generator(seed=-1 if r == 1 else 3)
        check("bad seed", False, "no error")
    except ValueError as e:
        check("bad seed", r == 1, e)
    except D.DistributedError as e:
        check("bad seed", r != 1, e)
    return out


@pytest.fixture(scope="module")
def results():
    return D.spawn(_checks, P, timeout=300, collective_timeout=60)


def test_rand_distributed(results):
    testing.assert_ranks_passed(results, at_least=10)
