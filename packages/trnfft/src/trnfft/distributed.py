"""Distributed multi-dimensional FFTs on torch.distributed (the cuFFTMp role): slab and pencil decompositions.

Operands are DTensors (:mod:`trnsci.distributed`).  Each rank transforms
the axes it holds whole with :mod:`trnfft` itself, then an all-to-all
transpose (:func:`trnsci.distributed.redistribute`) makes the next axes
whole, as in FFTW-MPI, heFFTe and cuFFTMp.

Decomposition (from the mesh):

* **slab** (1-D mesh, any rank >= 2 tensor): natural layout ``[Shard(0)]``,
  transposed layout ``[Shard(1)]``.  Forward: axes 1.. locally, transpose,
  axis 0.  One transpose; rank r sends ``n0_r (N1 - n1_r) R`` elements
  (``R`` = product of the axes after 1; ``n0_r``, ``n1_r`` its shares).
* **pencil** (2-D mesh pr x pc, 3-D tensors): natural ``[Shard(0),
  Shard(1)]``, transposed ``[Shard(1), Shard(2)]``.  Forward: axis 2,
  transpose within mesh rows (to ``[Shard(0), Shard(2)]``), axis 1,
  transpose within mesh columns, axis 0.  Rank (i, j) sends
  ``n0_i n1_j (N2 - n2_j) + n0_i (N1 - n1_i) n2_j`` elements (``n1_j``,
  ``n2_j`` split pc ways, ``n0_i``, ``n1_i`` pr ways) -- each transpose
  talks to ``pc`` or ``pr`` ranks instead of ``P``, which is why pencils
  scale past ``P = N0``, where slabs stop.

``out_layout="transposed"`` returns the forward result in the transposed
layout (global indices unchanged; only the sharded axis differs) and saves
the transpose back; the inverse transforms accept either layout and take
the shorter route from it (from transposed input: no extra transpose).
``out_layout="natural"`` (default) moves the result back with one more
all-to-all.  ``rfftn``'s half-spectrum axis is the last; ``irfftn`` always
returns the natural layout, since the real axis must be whole.

Norms (``"backward"``, ``"ortho"``, ``"forward"``) factor over axes, so each
partial transform applies its own share.
"""

from __future__ import annotations

import torch

from trnsci import distributed as D

__all__ = ["fftn", "ifftn", "rfftn", "irfftn", "layouts"]

_NORMS = (None, "backward", "ortho", "forward")


def _dt():
    from torch.distributed import tensor as dt

    return dt


def layouts(mesh_ndim: int):
    """``(natural, transposed)`` placements for a 1-D (slab) or 2-D (pencil) mesh."""
    dt = _dt()
    S = dt.Shard
    if mesh_ndim == 1:
        return (S(0),), (S(1),)
    return (S(0), S(1)), (S(1), S(2))


def _check(x, where: str, norm, out_layout, complex_in: bool | None):
    dt = _dt()
    if not isinstance(x, dt.DTensor):
        raise TypeError(f"{where}: x must be a torch.distributed.tensor.DTensor, got {type(x).__name__}")
    m = x.device_mesh
    if m.ndim not in (1, 2):
        raise ValueError(f"{where}: the mesh must be 1-D (slab) or 2-D (pencil), got {m.ndim}-D")
    if m.ndim == 1 and x.dim() < 2:
        raise ValueError(f"{where}: x must have at least 2 dims for a slab FFT, got shape {tuple(x.shape)}")
    if m.ndim == 2 and x.dim() != 3:
        raise ValueError(f"{where}: a pencil FFT (2-D mesh) needs a 3-D x, got shape {tuple(x.shape)}")
    if norm not in _NORMS:
        raise ValueError(f"{where}: norm must be 'backward', 'ortho' or 'forward', got {norm!r}")
    if out_layout not in ("natural", "transposed"):
        raise ValueError(f"{where}: out_layout must be 'natural' or 'transposed', got {out_layout!r}")
    if complex_in is True and not x.dtype.is_complex:
        raise TypeError(f"{where}: x must be complex, got {x.dtype}")
    if complex_in is False and (x.dtype.is_complex or not x.dtype.is_floating_point):
        raise TypeError(f"{where}: x must be real floating point, got {x.dtype}")


def _local(kind: str, t: torch.Tensor, dims: tuple, norm, out_shape=None) -> torch.Tensor:
    """One local transform of ``t`` over ``dims`` (all whole on this rank)."""
    import trnfft

    if kind == "c2c" or kind == "ic2c":
        if t.numel() == 0:
            return t.clone()
        f = trnfft.fftn if kind == "c2c" else trnfft.ifftn
        return f(t, dim=dims, norm=norm)
    if kind == "r2c":
        shape = list(t.shape)
        shape[dims[-1]] = shape[dims[-1]] // 2 + 1
        if t.numel() == 0:
            return torch.empty(shape, dtype=torch.complex128 if t.dtype == torch.float64 else torch.complex64)
        return trnfft.rfftn(t, dim=dims, norm=norm)
    # c2r: out_shape is the full local real shape
    if t.numel() == 0 or 0 in out_shape:
        return torch.empty(out_shape, dtype=torch.float64 if t.dtype == torch.complex128 else torch.float32)
    return trnfft.irfftn(t, s=tuple(out_shape[d] for d in dims), dim=dims, norm=norm)


def _wrap(t, m, placements, shape):
    return D.from_local(t, m, placements, shape)


def _c2c(x, norm, out_layout, inverse: bool, timeout):
    m = x.device_mesh
    nat, tr = layouts(m.ndim)
    kind = "ic2c" if inverse else "c2c"
    shape = tuple(x.shape)
    rest = tuple(range(1, x.dim()))
    if tuple(x.placements) not in (nat, tr):
        x = D.redistribute(x, nat, timeout)
    if m.ndim == 1:
        if tuple(x.placements) == nat:
            x = _wrap(_local(kind, x.to_local(), rest, norm), m, nat, shape)
            x = D.redistribute(x, tr, timeout)
            x = _wrap(_local(kind, x.to_local(), (0,), norm), m, tr, shape)
        else:  # transposed in: axis 0 first, then back to slabs for the rest
            x = _wrap(_local(kind, x.to_local(), (0,), norm), m, tr, shape)
            x = D.redistribute(x, nat, timeout)
            x = _wrap(_local(kind, x.to_local(), rest, norm), m, nat, shape)
    else:
        S = _dt().Shard
        mid = (S(0), S(2))
        order = [(2, mid), (1, tr), (0, None)] if tuple(x.placements) == nat else [(0, mid), (1, nat), (2, None)]
        for axis, nxt in order:
            x = _wrap(_local(kind, x.to_local(), (axis,), norm), m, x.placements, shape)
            if nxt is not None:
                x = D.redistribute(x, nxt, timeout)
    want = nat if out_layout == "natural" else tr
    return x if tuple(x.placements) == want else D.redistribute(x, want, timeout)


def fftn(x, norm=None, *, out_layout: str = "natural", timeout: float | None = None):
    """Forward n-D FFT over every axis of complex DTensor ``x`` (slab on a 1-D mesh, pencil on 2-D)."""
    where = "trnfft.distributed.fftn"
    with D.agree(where, timeout=timeout):
        _check(x, where, norm, out_layout, True)
    return _c2c(x, norm, out_layout, False, timeout)


def ifftn(x, norm=None, *, out_layout: str = "natural", timeout: float | None = None):
    """Inverse of :func:`fftn`; ``x`` may be in the natural or the transposed layout."""
    where = "trnfft.distributed.ifftn"
    with D.agree(where, timeout=timeout):
        _check(x, where, norm, out_layout, True)
    return _c2c(x, norm, out_layout, True, timeout)


def rfftn(x, norm=None, *, out_layout: str = "natural", timeout: float | None = None):
    """Real-input n-D FFT of DTensor ``x``; the last axis is halved to ``N // 2 + 1``."""
    where = "trnfft.distributed.rfftn"
    with D.agree(where, timeout=timeout):
        _check(x, where, norm, out_layout, False)
    m = x.device_mesh
    nat, tr = layouts(m.ndim)
    x = D.redistribute(x, nat, timeout)
    shape = list(x.shape)
    shape[-1] = shape[-1] // 2 + 1
    whole = tuple(range(1, x.dim())) if m.ndim == 1 else (2,)
    y = _wrap(_local("r2c", x.to_local(), whole, norm), m, nat, shape)
    if m.ndim == 1:
        y = D.redistribute(y, tr, timeout)
        y = _wrap(_local("c2c", y.to_local(), (0,), norm), m, tr, shape)
    else:
        S = _dt().Shard
        y = D.redistribute(y, (S(0), S(2)), timeout)
        y = _wrap(_local("c2c", y.to_local(), (1,), norm), m, y.placements, shape)
        y = D.redistribute(y, tr, timeout)
        y = _wrap(_local("c2c", y.to_local(), (0,), norm), m, tr, shape)
    return y if out_layout == "transposed" else D.redistribute(y, nat, timeout)


def irfftn(x, n_last: int | None = None, norm=None, *, timeout: float | None = None):
    """Inverse of :func:`rfftn`: real output (natural layout) whose last axis has ``n_last`` points.

    ``n_last`` defaults to ``2 (M - 1)`` for a half-spectrum axis of ``M``
    (pass it for odd lengths, as ``s[-1]`` in NumPy).
    """
    where = "trnfft.distributed.irfftn"
    with D.agree(where, timeout=timeout):
        _check(x, where, norm, "natural", True)
        if n_last is not None and (not isinstance(n_last, int) or isinstance(n_last, bool) or n_last < 1
                                   or n_last // 2 + 1 != x.shape[-1]):
            raise ValueError(f"{where}: n_last must be a positive int with n_last // 2 + 1 == "
                             f"{x.shape[-1]}, got {n_last!r}")
    m = x.device_mesh
    nat, tr = layouts(m.ndim)
    shape = tuple(x.shape)
    n_last = 2 * (shape[-1] - 1) if n_last is None else n_last
    out_shape = shape[:-1] + (n_last,)
    if tuple(x.placements) != tr:
        x = D.redistribute(x, tr, timeout)
    y = _wrap(_local("ic2c", x.to_local(), (0,), norm), m, tr, shape)
    if m.ndim == 1:
        y = D.redistribute(y, nat, timeout)
        whole = tuple(range(1, len(shape)))
    else:
        S = _dt().Shard
        y = D.redistribute(y, (S(0), S(2)), timeout)
        y = _wrap(_local("ic2c", y.to_local(), (1,), norm), m, y.placements, shape)
        y = D.redistribute(y, nat, timeout)
        whole = (2,)
    loc = y.to_local()
    local_out = list(loc.shape)
    local_out[-1] = n_last
    return _wrap(_local("c2r", loc, whole, norm, local_out), m, nat, out_shape)
