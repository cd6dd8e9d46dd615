"""trnsci on torch.distributed: how a distributed operand is laid out, and the collectives every library uses.

Operands are ``torch.distributed.tensor.DTensor`` objects on a ``DeviceMesh``
with ``Shard(d)`` / ``Replicate()`` placements -- the ecosystem's convention,
so a DTensor made by user code goes straight in and a result goes straight
on to ``full_tensor()``, ``redistribute`` or a model.  Shard sizes follow
DTensor's (``torch.chunk``) rule: ``ceil(n / P)`` rows per rank, the last
ranks short or empty (:func:`shard_sizes`).  DTensor has no block-cyclic
placement; the operations here do not need one (see docs/distributed.md).

The data movement itself does not go through DTensor's redistribute: every
collective here is one of ours, so that

* every collective is waited on with a timeout (:data:`DEFAULT_TIMEOUT`,
  ``TRNSCI_DIST_TIMEOUT`` seconds) -- a dead peer is an error, not a hang;
* every byte a rank hands to a collective for another rank is counted
  (:func:`counting`), so tests can assert communication-volume formulas;
* an error on one rank surfaces on all (:func:`agree`).

Byte-counting convention (per rank, what it *sends*): a point-to-point or
all-to-all send counts its payload for every other rank; ``broadcast``
counts ``(group size - 1) * nbytes`` at the root and 0 elsewhere;
``all_reduce`` counts the reduce-scatter + all-gather schedule on
:func:`shard_sizes` chunks, ``nbytes - c_r + (P - 1) c_r`` for own chunk
``c_r`` (the bandwidth-optimal algorithm; the backend's wire protocol may
differ).  Data a rank keeps for itself is never counted.

Helpers: :func:`init` (from torchrun's environment), :func:`mesh`,
:func:`distribute` / :func:`gather` (to and from one rank),
:func:`redistribute` (any Shard/Replicate layout to any other, one
all-to-all), :func:`all_gather`, :func:`reduce_scatter`,
:func:`all_reduce`, :func:`broadcast`, :func:`all_to_all`, and
:func:`spawn`, which runs a function on N local ranks (gloo on 127.0.0.1)
and returns their results -- the test launcher.
"""

from __future__ import annotations

import contextlib
import datetime
import math
import os
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

__all__ = ["DEFAULT_TIMEOUT", "DistributedError", "Traffic", "init", "mesh", "grid_shape", "shard_sizes",
           "shard_offsets", "local_box", "counting", "agree", "broadcast", "all_reduce", "all_gather",
           "reduce_scatter", "all_to_all", "distribute", "gather", "redistribute", "from_local", "spawn"]

#: Seconds any one collective may wait before it raises (env ``TRNSCI_DIST_TIMEOUT``).
DEFAULT_TIMEOUT = float(os.environ.get("TRNSCI_DIST_TIMEOUT", "60"))


class DistributedError(RuntimeError):
    """Raised on every rank that did not fail itself when another rank of the same operation failed."""


def _td(timeout: float | None) -> datetime.timedelta:
    return datetime.timedelta(seconds=DEFAULT_TIMEOUT if timeout is None else float(timeout))


def _tensor_api():
    # Imported lazily: most users never need torch.distributed.tensor (docs/perf-notes.md#design-distributed-start).
    from torch.distributed import tensor as dt

    return dt


# ------------------------------------------------------------------ set-up
def init(backend: str | None = None, timeout: float | None = None):
    """Join the process group described by torchrun's environment (if not joined) and return a 1-D mesh.

    ``backend`` defaults to gloo (CPU); on Trainium pass the Neuron/XLA
    collective backend's name.  Gloo is pinned to the loopback interface when
    ``MASTER_ADDR`` is a loopback address or every rank is on this node
    (unless ``GLOO_SOCKET_IFNAME`` is already set).
    """
    if not dist.is_initialized():
        one_node = os.environ.get("LOCAL_WORLD_SIZE", "?") == os.environ.get("WORLD_SIZE")
        if one_node or os.environ.get("MASTER_ADDR", "127.0.0.1").startswith("127."):
            os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        dist.init_process_group(backend or "gloo", timeout=_td(timeout))
    return mesh()


def grid_shape(P: int) -> tuple[int, int]:
    """The most nearly square ``(pr, pc)`` with ``pr * pc == P`` and ``pr <= pc``."""
    if not isinstance(P, int) or P < 1:
        raise ValueError(f"grid_shape: P must be a positive int, got {P!r}")
    pr = int(math.isqrt(P))
    while P % pr:
        pr -= 1
    return pr, P // pr


def mesh(shape: Sequence[int] | None = None, device_type: str = "cpu"):
    """A ``DeviceMesh`` over all ranks: 1-D by default, or ``shape`` (e.g. ``grid_shape(P)``), row-major."""
    P = dist.get_world_size()
    shape = (P,) if shape is None else tuple(int(s) for s in shape)
    if math.prod(shape) != P:
        raise ValueError(f"mesh: shape {shape} does not have {P} ranks")
    return _tensor_api().DeviceMesh(device_type, torch.arange(P).reshape(shape))


def shard_sizes(n: int, parts: int) -> list[int]:
    """Lengths of the ``parts`` shards of a length-``n`` dimension (DTensor's rule, like ``torch.chunk``)."""
    c = -(-n // parts) if n else 0
    return [max(0, min(c, n - r * c)) for r in range(parts)]


def shard_offsets(n: int, parts: int) -> list[int]:
    """Start of each shard of :func:`shard_sizes` (``parts + 1`` entries, the last is ``n``)."""
    out = [0]
    for s in shard_sizes(n, parts):
        out.append(out[-1] + s)
    return out


def _coord(m, rank: int) -> tuple[int, ...]:
    idx = (m.mesh == rank).nonzero()
    return tuple(int(i) for i in idx[0])


def _check_placements(placements, ndim: int, mdim: int, where: str):
    dt = _tensor_api()
    placements = tuple(placements)
    if len(placements) != mdim:
        raise ValueError(f"{where}: placements has {len(placements)} entries, the mesh has {mdim} dims")
    seen = set()
    for p in placements:
        if isinstance(p, dt.Shard):
            if not 0 <= p.dim < ndim:
                raise ValueError(f"{where}: placements shards dim {p.dim} of a {ndim}-d tensor")
            if p.dim in seen:
                raise ValueError(f"{where}: placements shards dim {p.dim} twice (not supported)")
            seen.add(p.dim)
        elif not isinstance(p, dt.Replicate):
            raise ValueError(f"{where}: placements may hold Shard or Replicate, got {p!r}")
    return placements


def local_box(shape: Sequence[int], m, placements, rank: int) -> list[tuple[int, int]]:
    """``[(start, stop)]`` per tensor dim of the block ``rank`` holds under ``placements`` on mesh ``m``."""
    dt = _tensor_api()
    box = [(0, int(s)) for s in shape]
    for mdim, (p, c) in enumerate(zip(placements, _coord(m, rank))):
        if isinstance(p, dt.Shard):
            off = shard_offsets(int(shape[p.dim]), m.size(mdim))
            box[p.dim] = (off[c], off[c + 1])
    return box


def from_local(local: torch.Tensor, m, placements, shape: Sequence[int]):
    """Wrap this rank's block as a DTensor of global ``shape`` (no communication, no checks across ranks)."""
    dt = _tensor_api()
    shape = torch.Size(int(s) for s in shape)
    stride = torch.empty(shape, device="meta").stride()
    return dt.DTensor.from_local(local, m, tuple(placements), run_check=False, shape=shape, stride=stride)


# ------------------------------------------------------------------ counting
@dataclass
class Traffic:
    """Bytes this rank sent inside a :func:`counting` block, in total and per collective kind."""

    by_kind: dict[str, int] = field(default_factory=dict)

    @property
    def bytes(self) -> int:
        return sum(self.by_kind.values())

    def add(self, kind: str, nbytes: int) -> None:
        self.by_kind[kind] = self.by_kind.get(kind, 0) + int(nbytes)


_COUNTERS: list[Traffic] = []


def _count(kind: str, nbytes: int) -> None:
    for t in _COUNTERS:
        t.add(kind, nbytes)


@contextlib.contextmanager
def counting() -> Iterator[Traffic]:
    """Count the bytes this rank sends through trnsci's collectives while the block runs (nests)."""
    t = Traffic()
    _COUNTERS.append(t)
    try:
        yield t
    finally:
        _COUNTERS.remove(t)


# ------------------------------------------------------------------ collectives
def _group_size(group) -> int:
    return dist.get_world_size(group)


def _wait(work, timeout, what: str):
    try:
        work.wait(_td(timeout))
    except RuntimeError as e:
        raise DistributedError(f"{what}: collective failed or timed out after "
                               f"{_td(timeout).total_seconds():g} s ({e})") from e


def broadcast(t: torch.Tensor, src: int = 0, group=None, timeout: float | None = None) -> torch.Tensor:
    """Broadcast ``t`` in place from group rank ``src``; returns ``t``."""
    P = _group_size(group)
    if P == 1:
        return t
    if dist.get_rank(group) == src:
        _count("broadcast", (P - 1) * t.numel() * t.element_size())
    buf = t if t.is_contiguous() else t.contiguous()  # the backend moves raw storage: it must be in order
    _wait(dist.broadcast(buf, group=group, group_src=src, async_op=True), timeout, "broadcast")
    if buf is not t:
        t.copy_(buf)
    return t


def all_reduce(t: torch.Tensor, op=dist.ReduceOp.SUM, group=None, timeout: float | None = None,
               kind: str = "all_reduce") -> torch.Tensor:
    """All-reduce ``t`` in place; counts ``nbytes - c_r + (P - 1) c_r`` (see module docstring)."""
    P = _group_size(group)
    if P == 1:
        return t
    r = dist.get_rank(group)
    c = shard_sizes(t.numel(), P)[r]
    _count(kind, (t.numel() - c + (P - 1) * c) * t.element_size())
    buf = t if t.is_contiguous() else t.contiguous()
    _wait(dist.all_reduce(buf, op=op, group=group, async_op=True), timeout, "all_reduce")
    if buf is not t:
        t.copy_(buf)
    return t


def _bytes(t: torch.Tensor) -> torch.Tensor:
    if not t.numel():
        return torch.empty(0, dtype=torch.uint8)
    flat = t.contiguous().reshape(-1)
    if flat.stride(0) != 1:  # a size-1 dim can leave a "contiguous" tensor with a non-unit stride
        flat = torch.empty(flat.numel(), dtype=t.dtype).copy_(flat)
    return flat.view(torch.uint8)


def all_to_all(chunks: Sequence[torch.Tensor], shapes: Sequence[Sequence[int]], dtype: torch.dtype,
               group=None, timeout: float | None = None, kind: str = "all_to_all") -> list[torch.Tensor]:
    """Send ``chunks[q]`` to group rank ``q`` and return the blocks received, ``shapes[q]`` from rank ``q``.

    Any dtype (sent as bytes).  Counts the bytes of every chunk for another rank.
    """
    P = _group_size(group)
    r = dist.get_rank(group)
    esize = torch.empty(0, dtype=dtype).element_size()
    recv_n = [math.prod(s) * esize for s in shapes]
    if P == 1:
        out = [_bytes(chunks[0])]
    else:
        send_n = [c.numel() * c.element_size() for c in chunks]
        _count(kind, sum(nb for q, nb in enumerate(send_n) if q != r))
        inp = torch.empty(sum(send_n), dtype=torch.uint8)
        off = 0
        for c, nb in zip(chunks, send_n):  # one copy of each chunk, straight into the send buffer
            if nb:
                inp[off:off + nb].view(c.dtype).view(c.shape).copy_(c)
            off += nb
        buf = torch.empty(sum(recv_n), dtype=torch.uint8)
        _wait(dist.all_to_all_single(buf, inp, recv_n, send_n, group=group, async_op=True), timeout, kind)
        out = list(torch.split(buf, recv_n))
    return [o.view(dtype).reshape(tuple(s)) if o.numel() else torch.empty(tuple(s), dtype=dtype)
            for o, s in zip(out, shapes)]


def all_gather(local: torch.Tensor, dim: int, sizes: Sequence[int], group=None,
               timeout: float | None = None) -> torch.Tensor:
    """Concatenate every rank's ``local`` along ``dim`` (rank ``q``'s has length ``sizes[q]`` there)."""
    P = _group_size(group)
    shapes = []
    for s in sizes:
        sh = list(local.shape)
        sh[dim] = s
        shapes.append(sh)
    parts = all_to_all([local] * P, shapes, local.dtype, group, timeout, kind="all_gather")
    return torch.cat(parts, dim=dim)


def reduce_scatter(t: torch.Tensor, dim: int, group=None, timeout: float | None = None) -> torch.Tensor:
    """Sum ``t`` over ranks and keep this rank's :func:`shard_sizes` slice along ``dim``."""
    P = _group_size(group)
    r = dist.get_rank(group)
    chunks = list(torch.split(t, shard_sizes(t.shape[dim], P), dim=dim))
    mine = list(chunks[r].shape)
    parts = all_to_all(chunks, [mine] * P, t.dtype, group, timeout, kind="reduce_scatter")
    out = parts[0].clone()
    for p in parts[1:]:
        out += p
    return out


# ------------------------------------------------------------------ agreement
@contextlib.contextmanager
def agree(what: str, group=None, timeout: float | None = None) -> Iterator[None]:
    """Run a block of local work; afterwards all ranks learn whether any rank failed in it.

    The rank that raised re-raises its own exception; every other rank
    raises :class:`DistributedError` naming the failed ranks.  Costs one
    small all-reduce (counted under ``"status"``).  Put collectives outside
    the block (a rank that raises inside would leave its peers waiting in
    them until the timeout).
    """
    P = _group_size(group)
    err = None
    try:
        yield
    except BaseException as e:  # noqa: BLE001 -- re-raised below after telling the others
        err = e
    if P > 1:
        flags = torch.zeros(P, dtype=torch.int32)
        flags[dist.get_rank(group)] = 1 if err is not None else 0
        all_reduce(flags, group=group, timeout=timeout, kind="status")
        failed = [q for q in range(P) if flags[q]]
    else:
        failed = [0] if err is not None else []
    if err is not None:
        raise err
    if failed:
        raise DistributedError(f"{what}: rank(s) {failed} failed; see their error")


# ------------------------------------------------------------------ layouts
def _meta(t: torch.Tensor | None, src: int, group, timeout, where: str):
    """Broadcast (dtype, shape) of ``t`` from ``src`` so the other ranks can allocate."""
    codes = list(TORCH_CODES)
    hdr = torch.zeros(10, dtype=torch.int64)
    with agree(where, group, timeout):
        if dist.get_rank(group) == src:
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"{where}: tensor must be a torch.Tensor on the source rank, "
                                f"got {type(t).__name__}")
            if t.dtype not in TORCH_CODES or t.dim() > 8:
                raise ValueError(f"{where}: tensor dtype {t.dtype} / {t.dim()} dims not supported")
    if dist.get_rank(group) == src:
        hdr[0] = codes.index(t.dtype)
        hdr[1] = t.dim()
        hdr[2:2 + t.dim()] = torch.tensor(t.shape)
    broadcast(hdr, src, group, timeout)
    return codes[int(hdr[0])], tuple(int(s) for s in hdr[2:2 + int(hdr[1])])


TORCH_CODES = (torch.float32, torch.float64, torch.complex64, torch.complex128, torch.float16, torch.bfloat16,
               torch.int32, torch.int64, torch.uint8, torch.bool)


def _slc(box):
    return tuple(slice(a, b) for a, b in box)


def _inter(a, b):
    box = [(max(x0, y0), min(x1, y1)) for (x0, x1), (y0, y1) in zip(a, b)]
    return box if all(x1 > x0 for x0, x1 in box) else None


def _extent(box):
    return [x1 - x0 for x0, x1 in box]


def distribute(tensor: torch.Tensor | None, m, placements, src: int = 0, timeout: float | None = None):
    """Scatter ``tensor`` (needed on global rank ``src`` only) into a DTensor on mesh ``m``.

    Each rank receives only its block; ``src`` sends ``sum of other ranks'
    block bytes``.  Shape and dtype travel with it (one small broadcast).
    """
    dtype, shape = _meta(tensor, src, None, timeout, "distribute")
    placements = _check_placements(placements, len(shape), m.ndim, "distribute")
    P, r = dist.get_world_size(), dist.get_rank()
    boxes = [local_box(shape, m, placements, q) for q in range(P)]
    if r == src:
        chunks = [tensor[_slc(b)] for b in boxes]
    else:
        chunks = [torch.empty(0, dtype=dtype)] * P
    shapes = [_extent(boxes[r]) if q == src else [0] for q in range(P)]
    got = all_to_all(chunks, shapes, dtype, None, timeout, kind="scatter")
    return from_local(got[src].clone() if r == src else got[src], m, placements, shape)


def _owner_box(d, q: int):
    """The block rank ``q`` would *send* from: only the replica at coordinate 0 of replicated mesh dims."""
    return local_box(d.shape, d.device_mesh, d.placements, q)


def gather(d, dst: int = 0, timeout: float | None = None) -> torch.Tensor | None:
    """Assemble the full tensor of DTensor ``d`` on global rank ``dst`` (``None`` elsewhere).

    Each element is sent once, by the replica with coordinate 0 on every
    replicated mesh dim.
    """
    dt = _tensor_api()
    m, pl = d.device_mesh, d.placements
    P, r = dist.get_world_size(), dist.get_rank()
    rep = [i for i, p in enumerate(pl) if isinstance(p, dt.Replicate)]

    def sends(q):
        c = _coord(m, q)
        return all(c[i] == 0 for i in rep)

    local = d.to_local()
    chunks = [local if (q == dst and sends(r)) else torch.empty(0, dtype=d.dtype) for q in range(P)]
    shapes = [(_extent(_owner_box(d, q)) if (r == dst and sends(q)) else [0]) for q in range(P)]
    got = all_to_all(chunks, shapes, d.dtype, None, timeout, kind="gather")
    if r != dst:
        return None
    out = torch.empty(tuple(d.shape), dtype=d.dtype)
    for q in range(P):
        if sends(q):
            out[_slc(_owner_box(d, q))] = got[q]
    return out


def redistribute(d, placements, timeout: float | None = None):
    """Move DTensor ``d`` to ``placements`` on the same mesh with one all-to-all.

    Rank ``q`` gets each element of its new block from exactly one holder:
    the holder whose coordinate on every mesh dim where ``d`` is replicated
    equals ``q``'s.  So Replicate -> Shard moves nothing, Shard -> Replicate
    is an all-gather and Shard(i) -> Shard(j) an all-to-all; every rank sends
    exactly the part of its block that the receiver does not already hold.
    """
    dt = _tensor_api()
    m = d.device_mesh
    placements = _check_placements(placements, d.dim(), m.ndim, "redistribute")
    if tuple(placements) == tuple(d.placements):
        return d
    P, r = dist.get_world_size(), dist.get_rank()
    rep = [i for i, p in enumerate(d.placements) if isinstance(p, dt.Replicate)]
    coords = [_coord(m, q) for q in range(P)]
    old = [local_box(d.shape, m, d.placements, q) for q in range(P)]
    new = [local_box(d.shape, m, placements, q) for q in range(P)]

    def designated(sender, receiver):
        return all(coords[sender][i] == coords[receiver][i] for i in rep)

    local = d.to_local()
    chunks, shapes, recv_boxes = [], [], []
    for q in range(P):
        box = _inter(old[r], new[q]) if designated(r, q) else None
        if box is None:
            chunks.append(torch.empty(0, dtype=d.dtype))
        else:
            chunks.append(local[_slc([(a - o0, b - o0) for (a, b), (o0, _) in zip(box, old[r])])])
        rbox = _inter(old[q], new[r]) if designated(q, r) else None
        recv_boxes.append(rbox)
        shapes.append(_extent(rbox) if rbox is not None else [0])
    got = all_to_all(chunks, shapes, d.dtype, None, timeout, kind="redistribute")
    out = torch.empty(_extent(new[r]), dtype=d.dtype)
    for q, box in enumerate(recv_boxes):
        if box is not None:
            out[_slc([(a - n0, b - n0) for (a, b), (n0, _) in zip(box, new[r])])] = got[q]
    return from_local(out, m, placements, d.shape)


# ------------------------------------------------------------------ launcher
def _worker(rank, nprocs, path, fn, args, timeout, queue):
    global DEFAULT_TIMEOUT
    DEFAULT_TIMEOUT = float(timeout)  # the ranks' collectives wait as long as spawn was told
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    os.environ.update({"RANK": str(rank), "WORLD_SIZE": str(nprocs), "LOCAL_RANK": str(rank),
                       "LOCAL_WORLD_SIZE": str(nprocs), "MASTER_ADDR": "127.0.0.1"})
    torch.set_num_threads(1)
    try:
        store = dist.FileStore(path, nprocs)
        store.set_timeout(_td(timeout))
        dist.init_process_group("gloo", store=store, rank=rank, world_size=nprocs, timeout=_td(timeout))
        result = fn(*args)
        queue.put((rank, True, result))
    except BaseException as e:  # noqa: BLE001 -- reported to the parent with its traceback
        queue.put((rank, False, f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))
    finally:
        if dist.is_initialized():
            with contextlib.suppress(Exception):
                dist.destroy_process_group()


def spawn(fn: Callable, nprocs: int, args: tuple = (), timeout: float = 120.0, collective_timeout: float = 30.0,
          raise_errors: bool = True, start_method: str = "auto") -> list:
    """Run ``fn(*args)`` on ``nprocs`` fresh processes joined by gloo on 127.0.0.1; return results by rank.

    ``fn`` must be importable (a module-level function) and its result
    picklable.  The ranks meet through a ``FileStore`` in a fresh temporary
    directory (no listening socket, no port to guess); gloo is pinned to the
    loopback interface, so its connections use ports the OS picks on
    127.0.0.1.  Workers run one thread.  ``start_method``
    ``"auto"`` forks the ranks from a forkserver that has imported torch
    once (on Linux), else spawns fresh interpreters.  If the whole run
    exceeds ``timeout`` seconds the workers are killed and ``TimeoutError``
    raised.  With ``raise_errors`` a rank's exception becomes a
    ``RuntimeError`` here carrying every failed rank's traceback; otherwise
    the list holds ``(False, message)`` for failed ranks and ``(True,
    result)`` for the others.  ``collective_timeout`` becomes the ranks'
    :data:`DEFAULT_TIMEOUT`.
    """
    import multiprocessing as mp
    import queue as _queue
    import time

    if not isinstance(nprocs, int) or nprocs < 1:
        raise ValueError(f"spawn: nprocs must be a positive int, got {nprocs!r}")
    import shutil
    import tempfile

    tmp = tempfile.mkdtemp(prefix="trnsci-spawn-")
    if start_method == "auto":
        start_method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
    ctx = mp.get_context(start_method)
    if start_method == "forkserver":
        # one clean server process imports torch once; every rank is a fork of it (not of this process,
        # whose threads a fork could catch holding locks), cheaper than a fresh interpreter per rank
        # (docs/perf-notes.md#design-distributed-start)
        ctx.set_forkserver_preload(["torch", "torch.distributed", "trnsci.distributed"])
    q = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(r, nprocs, os.path.join(tmp, "store"), fn, args,
                                               collective_timeout, q),
                         daemon=True) for r in range(nprocs)]
    for p in procs:
        p.start()
    results: dict[int, tuple] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(results) < nprocs:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"spawn: ranks {sorted(set(range(nprocs)) - set(results))} did not finish "
                                   f"in {timeout:g} s")
            try:
                rank, ok, val = q.get(timeout=min(left, 1.0))
                results[rank] = (ok, val)
            except _queue.Empty:
                dead = [r for r, p in enumerate(procs) if not p.is_alive() and r not in results]
                if dead and all(p.exitcode not in (None, 0) for p in (procs[r] for r in dead)):
                    # a rank died without reporting (killed, segfault): give the queue one more look
                    with contextlib.suppress(_queue.Empty):
                        rank, ok, val = q.get(timeout=1.0)
                        results[rank] = (ok, val)
                        continue
                    raise RuntimeError(f"spawn: rank(s) {dead} died (exit codes "
                                       f"{[procs[r].exitcode for r in dead]})") from None
    finally:
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join()
        shutil.rmtree(tmp, ignore_errors=True)
    ordered = [results[r] for r in range(nprocs)]
    if raise_errors:
        bad = [f"--- rank {r} ---\n{v}" for r, (ok, v) in enumerate(ordered) if not ok]
        if bad:
            raise RuntimeError("spawn: a rank failed\n" + "\n".join(bad))
        return [v for _, v in ordered]
    return ordered
