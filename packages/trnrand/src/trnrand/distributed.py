"""trnrand on torch.distributed: one Philox stream split across the ranks of a process group.

:func:`generator` builds a :class:`trnrand.Generator` whose partition is
this rank of the group (``partition_rank = rank``, ``partition_size = P``)
after the ranks have agreed on the seed: ``seed=None`` takes rank 0's
entropy seed on every rank (one broadcast), and ranks passing different
seeds, subsequences or offsets raise ``ValueError`` on every rank (one
all-reduce) -- silently different streams are the classic bug here.

With that generator, a call for ``n`` samples on rank ``r`` returns samples
``[r n, (r+1) n)`` of the one-process draw of ``P n`` samples and every rank
moves past the whole draw (Philox skip-ahead: no rank generates another's
words).  :func:`draw` does the same for a global length ``N`` that need not
divide by ``P``, returned as a DTensor ``Shard(0)``: each rank draws
``ceil(N/P)`` and keeps its :func:`trnsci.distributed.shard_sizes` share,
so the ranks' pieces are the first ``N`` samples of the one-process draw of
``P ceil(N/P)`` -- for distributions whose sample ``i`` depends only on
its own position in the stream (all of trnrand's per-sample families) that
is the one-process draw of ``N``, bit for bit.
"""

from __future__ import annotations

import torch

from trnsci import distributed as D

from .generator import Generator

__all__ = ["generator", "draw"]

_U64 = 1 << 64


def generator(seed=None, group=None, device="cpu", subsequence: int = 0, offset: int = 0,
              timeout: float | None = None) -> Generator:
    """A :class:`trnrand.Generator` partitioned over ``group`` (default: the world), seed agreed by all ranks."""
    import torch.distributed as dist

    where = "trnrand.distributed.generator"
    with D.agree(where, group, timeout):
        g = Generator(seed=seed, device=device, subsequence=subsequence, offset=offset)
    P, r = dist.get_world_size(group), dist.get_rank(group)
    words = torch.tensor([seed is None, g.seed >> 32, g.seed & 0xFFFFFFFF, subsequence >> 32,
                          subsequence & 0xFFFFFFFF, offset >> 32, offset & 0xFFFFFFFF], dtype=torch.int64)
    root = words.clone()
    D.broadcast(root, 0, group, timeout)
    if seed is None and bool(root[0]):
        words[1:3] = root[1:3]  # everyone takes rank 0's entropy seed
    differ = torch.tensor([int(not torch.equal(words[1:], root[1:]))], dtype=torch.int64)
    D.all_reduce(differ, group=group, timeout=timeout, kind="status")
    if int(differ[0]):
        raise ValueError(f"{where}: ranks passed different seed/subsequence/offset (or mixed seed=None with a "
                         f"seed); every rank must pass the same values")
    s = (int(words[1]) << 32) | int(words[2])
    return Generator(seed=s, device=device, partition_rank=r, partition_size=P, subsequence=subsequence,
                     offset=offset)


def draw(fn, N: int, *, generator: Generator, mesh, **kwargs):
    """``fn(N, generator=..., **kwargs)`` (e.g. ``trnrand.normal``) as a DTensor ``Shard(0)`` on 1-D ``mesh``.

    ``generator`` must come from :func:`generator` on the mesh's group.
    No communication.  See the module docstring for what the pieces equal.
    """
    from torch.distributed.tensor import Shard

    where = "trnrand.distributed.draw"
    if not callable(fn):
        raise TypeError(f"{where}: fn must be a trnrand sampling function, got {type(fn).__name__}")
    if not isinstance(N, int) or isinstance(N, bool) or N < 0:
        raise ValueError(f"{where}: N must be a non-negative int, got {N!r}")
    if not isinstance(generator, Generator):
        raise TypeError(f"{where}: generator must be a trnrand.Generator, got {type(generator).__name__}")
    P = mesh.size()
    r = mesh.get_coordinate()[0]
    if mesh.ndim != 1 or generator.partition_size != P or generator.partition_rank != r:
        raise ValueError(f"{where}: generator is partition {generator.partition_rank} of "
                         f"{generator.partition_size}, the 1-D mesh needs partition {r} of {P}")
    c = -(-N // P) if N else 0
    local = fn(c, generator=generator, **kwargs)[:D.shard_sizes(N, P)[r]]
    return D.from_local(local, mesh, [Shard(0)], (N,))
