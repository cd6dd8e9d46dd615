"""``einsum`` on DTensors with one sharded index (torch.distributed).

Every operand is a DTensor on the same 1-D mesh, either ``Replicate()`` or
``Shard(d)``; the index letters on the sharded dims name *the* sharded
index ``s``.  Each rank contracts its blocks with :func:`trntensor.einsum`
(its planner picks the pairwise order), then:

* ``s`` in the output: the result is already ``Shard`` on ``s``'s output
  dim -- no communication;
* ``s`` summed: each rank holds a partial sum of the whole output;
  ``out="shard"`` (default) reduce-scatters it over output dim 0 (rank r
  sends ``|out| - |out_r|`` elements), ``out="replicate"`` all-reduces it.

A replicated operand that carries ``s`` is sliced locally (no
communication).  Operands sharded on *different* letters: the one holding
the most elements keeps its shard and the others are all-gathered first
(counted as ``"redistribute"``).  Repeated letters within an operand and
``...`` are not supported on a sharded dim.
"""

from __future__ import annotations

import functools

import torch

from trnsci import distributed as D

__all__ = ["einsum"]


def _parse(eq: str, n: int, where: str):
    eq = eq.replace(" ", "")
    if "->" not in eq:
        raise ValueError(f"{where}: subscripts must name the output explicitly ('...->...'), got {eq!r}")
    lhs, out = eq.split("->")
    ins = lhs.split(",")
    if len(ins) != n:
        raise ValueError(f"{where}: subscripts name {len(ins)} operands, got {n}")
    if "." in eq:
        raise ValueError(f"{where}: '...' is not supported in the distributed einsum")
    return ins, out


def einsum(subscripts: str, *operands, out: str = "shard", timeout: float | None = None):
    """``einsum(subscripts, *operands)`` for DTensors on one 1-D mesh; returns a DTensor (see module docstring)."""
    from torch.distributed.tensor import DTensor, Replicate, Shard

    import trntensor

    where = "trntensor.distributed.einsum"
    with D.agree(where, timeout=timeout):
        if not operands:
            raise ValueError(f"{where}: at least one operand is needed")
        for k, x in enumerate(operands):
            if not isinstance(x, DTensor):
                raise TypeError(f"{where}: operand {k} must be a DTensor, got {type(x).__name__}")
        m = operands[0].device_mesh
        if m.ndim != 1 or any(x.device_mesh != m for x in operands):
            raise ValueError(f"{where}: all operands must be on the same 1-D mesh")
        if out not in ("shard", "replicate"):
            raise ValueError(f"{where}: out must be 'shard' or 'replicate', got {out!r}")
        ins, o = _parse(subscripts, len(operands), where)
        for k, (s, x) in enumerate(zip(ins, operands)):
            if len(s) != x.dim():
                raise ValueError(f"{where}: operand {k} has {x.dim()} dims, subscripts {s!r} name {len(s)}")
        sharded = {}
        for k, (s, x) in enumerate(zip(ins, operands)):
            p = x.placements[0]
            if isinstance(p, Shard):
                if s.count(s[p.dim]) > 1:
                    raise ValueError(f"{where}: operand {k} is sharded on a repeated index {s[p.dim]!r}")
                sharded.setdefault(s[p.dim], []).append(k)
    P, r = m.size(), m.get_coordinate()[0]
    ops = list(operands)
    if len(sharded) > 1:  # keep the shard of the largest sharded operand, gather the others
        keep = max(sharded, key=lambda c: max(ops[k].numel() for k in sharded[c]))
        for c, ks in sharded.items():
            if c != keep:
                for k in ks:
                    ops[k] = D.redistribute(ops[k], [Replicate()], timeout)
        sharded = {keep: sharded[keep]}
    if not sharded:  # nothing sharded: every rank computes the whole result
        res = trntensor.einsum(subscripts, *[x.to_local() for x in ops])
        return D.from_local(res, m, [Replicate()], res.shape)
    (s_idx,) = sharded
    # the global extent of s, and this rank's slice of it
    k0 = sharded[s_idx][0]
    ext = ops[k0].shape[ins[k0].index(s_idx)]
    off = D.shard_offsets(ext, P)
    locals_ = []
    for s, x in zip(ins, ops):
        t = x.to_local()
        if isinstance(x.placements[0], Replicate) and s_idx in s:
            sl = [slice(None)] * t.dim()
            for d, c in enumerate(s):
                if c == s_idx:
                    sl[d] = slice(off[r], off[r + 1])
            t = t[tuple(sl)]
        locals_.append(t)
    sizes = {}
    for s, x in zip(ins, ops):
        for c, n in zip(s, x.shape):
            sizes[c] = n
    shape = tuple(sizes[c] for c in o)
    with D.agree(where, timeout=timeout):  # local work: an error here is raised on every rank
        if 0 in [t.numel() for t in locals_]:  # an empty shard contributes zeros
            dtype = functools.reduce(torch.promote_types, [x.dtype for x in ops])
            part = torch.zeros(tuple(D.shard_sizes(sizes[c], P)[r] if c == s_idx else sizes[c] for c in o),
                               dtype=dtype)
        else:
            part = trntensor.einsum(subscripts, *locals_)
    if s_idx in o:
        return D.from_local(part, m, [Shard(o.index(s_idx))], shape)
    if out == "replicate" or not o:
        D.all_reduce(part, timeout=timeout)
        return D.from_local(part, m, [Replicate()], shape)
    return D.from_local(D.reduce_scatter(part, 0, timeout=timeout), m, [Shard(0)], shape)
