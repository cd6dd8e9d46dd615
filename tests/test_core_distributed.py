"""trnsci.distributed on 3 gloo ranks (127.0.0.1): layouts against torch's own DTensor, bytes against formulas.

One spawn runs every check and reports a list of (name, ok, detail); the
test then asserts each.  Sizes are ragged (7 x 5 over 3 ranks: shards of
3, 3, 1 rows and 2, 2, 1 columns).
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from trnsci import distributed as D
from trnsci import testing

P = 3


def _checks(marker):
    import torch.distributed as dist
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    r = dist.get_rank()
    out = testing.RankChecks()
    check = out.check

    m = D.mesh()
    full = torch.arange(35, dtype=torch.float64).reshape(7, 5) * 1.5 - 3.0
    es = full.element_size()
    # shard sizes = torch's own DTensor shard sizes (independent reference)
    for d in (0, 1):
        ref = distribute_tensor(full, m, [Shard(d)]).to_local()
        check(f"shard_sizes dim{d}", D.shard_sizes(full.shape[d], P)[r] == ref.shape[d],
              (D.shard_sizes(full.shape[d], P), ref.shape))
    # scatter from rank 1: blocks equal torch.chunk of the original; root sends the others' blocks
    for pl in ([Shard(0)], [Shard(1)], [Replicate()]):
        with D.counting() as t:
            x = D.distribute(full if r == 1 else None, m, pl, src=1)
        d = pl[0].dim if isinstance(pl[0], Shard) else None
        want = full if d is None else torch.chunk(full, P, dim=d)[r] if r < len(torch.chunk(full, P, d)) else None
        check(f"distribute {pl}", want is not None and torch.equal(x.to_local(), want))
        others = sum(torch.chunk(full, P, d)[q].numel() for q in range(P) if q != 1) if d is not None \
            else (P - 1) * full.numel()
        meta = (P - 1) * 10 * 8 if r == 1 else 0
        check(f"distribute bytes {pl}", t.by_kind.get("scatter", 0) == (others * es if r == 1 else 0)
              and t.by_kind.get("broadcast", 0) == meta and t.by_kind.get("status", 0) == 16, t.by_kind)
        g = D.gather(x, dst=2)
        check(f"gather {pl}", (g is None) if r != 2 else torch.equal(g, full))
        check(f"full_tensor {pl}", torch.equal(x.full_tensor(), full))  # torch's own gather agrees
    # redistribute Shard(0) -> Shard(1): rank r sends its rows x the others' columns
    x0 = D.distribute(full if r == 0 else None, m, [Shard(0)])
    rows, cols = D.shard_sizes(7, P), D.shard_sizes(5, P)
    with D.counting() as t:
        x1 = D.redistribute(x0, [Shard(1)])
    check("redistribute S0->S1", torch.equal(x1.to_local(), torch.chunk(full, P, 1)[r]))
    check("redistribute S0->S1 bytes", t.bytes == rows[r] * (5 - cols[r]) * es, t.by_kind)
    with D.counting() as t:
        xr = D.redistribute(x1, [Replicate()])
    check("redistribute S1->R", torch.equal(xr.to_local(), full))
    check("redistribute S1->R bytes", t.bytes == (P - 1) * 7 * cols[r] * es, t.by_kind)
    with D.counting() as t:
        xs = D.redistribute(xr, [Shard(0)])
    check("redistribute R->S0 moves nothing", torch.equal(xs.to_local(), torch.chunk(full, P, 0)[r])
          and t.bytes == 0, t.by_kind)
    # complex data through the byte-level all-to-all; reduce_scatter and all_reduce vs NumPy sums
    z = torch.from_numpy(np.arange(12).reshape(4, 3) * (1 + 2j) + r)
    got = D.all_gather(z, 0, [4] * P)
    ref = np.concatenate([np.arange(12).reshape(4, 3) * (1 + 2j) + q for q in range(P)])
    check("all_gather complex", np.array_equal(got.numpy(), ref))
    a = torch.from_numpy(np.arange(20.0).reshape(5, 4) * (r + 1))
    with D.counting() as t:
        rs = D.reduce_scatter(a, 0)
    tot = np.arange(20.0).reshape(5, 4) * sum(q + 1 for q in range(P))
    check("reduce_scatter", np.array_equal(rs.numpy(), np.array_split(tot, [2, 4])[r]))
    check("reduce_scatter bytes", t.bytes == (5 - D.shard_sizes(5, P)[r]) * 4 * 8, t.by_kind)
    v = torch.full((10,), float(r + 1))
    with D.counting() as t:
        D.all_reduce(v)
    c = D.shard_sizes(10, P)[r]
    check("all_reduce", torch.equal(v, torch.full((10,), 6.0)) and t.bytes == (10 - c + (P - 1) * c) * 4)
    # non-contiguous tensors (a transposed view) through broadcast and all_reduce
    nc = (torch.arange(12.0).reshape(3, 4) * (r + 1)).T
    D.all_reduce(nc)
    check("all_reduce non-contiguous", torch.equal(nc, torch.arange(12.0).reshape(3, 4).T * 6), nc)
    nc = (torch.arange(12.0).reshape(3, 4) * (r + 1)).T
    D.broadcast(nc, 2)
    check("broadcast non-contiguous", torch.equal(nc, torch.arange(12.0).reshape(3, 4).T * 3), nc)
    # an error on one rank surfaces on all
    try:
        with D.agree("demo-op"):
            if r == 1:
                raise ValueError("bad input on rank 1")
        check("agree", False, "no error raised")
    except ValueError as e:
        check("agree", r == 1 and "rank 1" in str(e), e)
    except D.DistributedError as e:
        check("agree", r != 1 and "[1]" in str(e), e)
    # bad input on the source rank of distribute: TypeError there, DistributedError elsewhere
    try:
        D.distribute([[1.0]] if r == 0 else None, m, [Shard(0)])
        check("distribute bad input", False, "no error")
    except TypeError as e:
        check("distribute bad input", r == 0 and "torch.Tensor" in str(e), e)
    except D.DistributedError as e:
        check("distribute bad input", r != 0, e)
    # a peer that never joins: the collective raises within its 1 s timeout instead of waiting for the
    # default 60 s; the other ranks stay alive (and silent) until rank 0 has seen it, told by a marker file
    import os

    if r == 0:
        t0 = time.monotonic()
        try:
            D.all_reduce(torch.ones(1), timeout=1.0)
            check("timeout", False, "no error")
        except D.DistributedError as e:
            check("timeout", time.monotonic() - t0 < 15.0 and "timed out" in str(e), e)
        finally:
            open(marker, "w").close()
    else:
        deadline = time.monotonic() + 30
        while not os.path.exists(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        check("timeout", True)
    return out


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    marker = str(tmp_path_factory.mktemp("dist") / "timeout-seen")
    return D.spawn(_checks, P, args=(marker,), timeout=300, collective_timeout=60)


def test_distributed_core(results):
    testing.assert_ranks_passed(results)
    assert len(results[0]) == len(results[1]) >= 20


def test_grid_and_sizes():
    assert D.grid_shape(4) == (2, 2) and D.grid_shape(6) == (2, 3) and D.grid_shape(7) == (1, 7)
    assert D.shard_sizes(5, 4) == [2, 2, 1, 0] and D.shard_offsets(5, 4) == [0, 2, 4, 5, 5]
    with pytest.raises(ValueError, match="P must"):
        D.grid_shape(0)
    with pytest.raises(ValueError, match="nprocs"):
        D.spawn(_checks, 0)


def test_distributed_demo_runs(capsys):
    """The launch module end to end on 2 spawned ranks, tiny sizes (the figures themselves are not checked)."""
    from trnsci import distributed_demo

    assert distributed_demo.main(["--nproc", "2", "--what", "fft,gemm", "--fft", "8", "--gemm", "12",
                                  "--repeat", "1"]) == 0
    text = capsys.readouterr().out
    assert "rank 0/2" in text and "rank 1/2" in text and "fftn 8^3" in text and "gemm 12^2" in text


def _dies():
    import os

    import torch.distributed as dist

    if dist.get_rank() == 1:
        os._exit(3)  # a crash that reports nothing
    return "ok"


def test_spawn_reports_a_dead_rank():
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=r"rank\(s\) \[1\] died"):
        D.spawn(_dies, 2, timeout=60)
    assert time.monotonic() - t0 < 30
