"""Tile arithmetic and on-chip memory budgets, shared by every kernel and its host code.

A NeuronCore's on-chip memories are split into 128 partitions:

==========  =============================  =============================
target      SBUF                           PSUM
==========  =============================  =============================
``trn1``    24 MiB = 128 x 192 KiB         2 MiB = 128 x 16 KiB (8 banks)
``trn2``    28 MiB = 128 x 224 KiB         2 MiB = 128 x 16 KiB (8 banks)
==========  =============================  =============================

Kernels size their resident tiles against :func:`sbuf_budget` for the
*smallest* target (trn1) by default, so one tiling plan -- and one set of
closed-form counts -- holds on both. Tile extents come from
``nl.tile_size`` (:data:`PMAX`, :data:`PSUM_FMAX`, :data:`STATIONARY_FMAX`,
:data:`MOVING_FMAX`).

Tiles of an axis
----------------
An axis of ``n`` elements, cut from ``start`` into tiles of ``size`` whose
offsets advance by ``step`` (default ``size``), has :func:`ntiles` tiles;
tile ``i`` is ``(offset, extent)`` = :func:`tile` ``(i, n, size, start,
step)`` with ``offset = start + i * step`` and ``extent = min(size, n -
offset)`` -- every tile is full except a ragged last one. The same
arithmetic serves the partition axis (``size = PMAX``) and the free axes
(``size = MOVING_FMAX``, ``PSUM_FMAX`` or a kernel's own width). Inside a
kernel the loop stays an NKI loop and the tile is computed from its index::

    for mt in nl.static_range(ntiles(m, PMAX)):
        m0, mm = tile(mt, m, PMAX)          # rows m0 : m0 + mm on the partitions
        for nt in nl.static_range(ntiles(n, MOVING_FMAX)):
            n0, nn = tile(nt, n, MOVING_FMAX)

Host code (closed forms, plans) iterates the same tiles with :func:`tiles`
and :func:`tiles2d`.

Examples
--------
>>> from trnsci.nki.tiling import cdiv, ntiles, tile, tiles, tiles2d
>>> cdiv(300, 128)
3
>>> list(tiles(300, 128))
[(0, 128), (128, 128), (256, 44)]
>>> ntiles(300, 128), tile(2, 300, 128)
(3, (256, 44))
>>> list(tiles(10, 4, start=3))                 # [3, 10): two tiles, the last ragged
[(3, 4), (7, 3)]
>>> list(tiles(10, 2, step=4))                  # strided: every other pair
[(0, 2), (4, 2), (8, 2)]
>>> list(tiles2d(3, 5, 2, 4))
[((0, 2), (0, 4)), ((0, 2), (4, 1)), ((2, 1), (0, 4)), ((2, 1), (4, 1))]
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

__all__ = [
    "cdiv", "ntiles", "tile", "tiles", "tiles2d", "PMAX", "PSUM_FMAX", "STATIONARY_FMAX", "MOVING_FMAX",
    "Target", "TARGETS", "DEFAULT_TARGET", "target_info", "sbuf_budget", "psum_budget",
]

KIB = 1024


def _tile_size(name: str, default: int) -> int:
    try:
        from trnsci.nki import nl

        return int(getattr(nl.tile_size, name))
    except Exception:  # toolchain without tile_size, or not importable: the documented value
        return default


#: Partitions of SBUF/PSUM (the contraction tile of ``nc_matmul``).
PMAX = _tile_size("pmax", 128)
#: fp32 elements of one PSUM bank per partition (2 KiB).
PSUM_FMAX = _tile_size("psum_fmax", 512)
#: Largest free size of the stationary ``nc_matmul`` operand.
STATIONARY_FMAX = _tile_size("gemm_stationary_fmax", 128)
#: Largest free size of the moving ``nc_matmul`` operand.
MOVING_FMAX = _tile_size("gemm_moving_fmax", 512)


def cdiv(a: int, b: int) -> int:
    """``ceil(a / b)`` for non-negative ints, exactly (no floats)."""
    return -(-a // b)


def _check(n: int, size: int, start: int, step: int | None) -> int:
    if size < 1:
        raise ValueError(f"tile size must be >= 1; got {size}")
    step = size if step is None else step
    if step < 1:
        raise ValueError(f"tile step must be >= 1; got {step}")
    if start < 0:
        raise ValueError(f"tile start must be >= 0; got {start}")
    return step


def ntiles(n: int, size: int, start: int = 0, step: int | None = None) -> int:
    """Number of tiles of ``size`` (offsets ``start, start + step, ...``) that cover ``[start, n)``.

    ``ceil((n - start) / step)`` (0 for an empty range); with ``step = size``
    (the default) that is ``cdiv(n - start, size)``.
    """
    step = _check(n, size, start, step)
    return cdiv(n - start, step) if n > start else 0


def tile(i: int, n: int, size: int, start: int = 0, step: int | None = None) -> tuple[int, int]:
    """``(offset, extent)`` of tile ``i`` of :func:`ntiles` ``(n, size, start, step)``.

    ``offset = start + i * step`` and ``extent = min(size, n - offset)``: a
    full tile, or the ragged last one. Both are Python ints, so a kernel's
    slices stay compile-time constants. ``i`` outside ``[0, ntiles)``
    raises ``IndexError``.
    """
    step = _check(n, size, start, step)
    count = cdiv(n - start, step) if n > start else 0
    if not 0 <= i < count:
        raise IndexError(f"tile index {i} outside [0, {count}) for n={n}, size={size}, start={start}, step={step}")
    off = start + i * step
    return off, min(size, n - off)


def tiles(n: int, size: int, start: int = 0, step: int | None = None) -> Iterator[tuple[int, int]]:
    """``(offset, extent)`` of each tile covering ``[start, n)`` (see :func:`tile`); the last tile is ragged.

    For host code; a kernel loops ``nl.static_range(ntiles(...))`` and calls :func:`tile`.
    """
    for i in range(ntiles(n, size, start, step)):
        yield tile(i, n, size, start, step)


def tiles2d(m: int, n: int, size_m: int, size_n: int) -> Iterator[tuple[tuple[int, int], tuple[int, int]]]:
    """``((m0, mm), (n0, nn))`` of each tile of an ``[m, n]`` array cut into ``[size_m, size_n]`` tiles.

    Row-major order (the tiles of the first ``size_m`` rows first); ragged on
    the last row and last column of tiles.
    """
    for mt in tiles(m, size_m):
        for nt in tiles(n, size_n):
            yield mt, nt


@dataclass(frozen=True)
class Target:
    """On-chip memory of one NeuronCore generation, bytes per partition."""

    name: str
    sbuf_partition_bytes: int
    psum_partition_bytes: int
    partitions: int = 128

    @property
    def sbuf_bytes(self) -> int:
        return self.sbuf_partition_bytes * self.partitions

    @property
    def psum_bytes(self) -> int:
        return self.psum_partition_bytes * self.partitions


TARGETS = {
    "trn1": Target("trn1", 192 * KIB, 16 * KIB),
    "trn2": Target("trn2", 224 * KIB, 16 * KIB),
}
#: The target tiling plans are sized for unless told otherwise: the smaller SBUF.
DEFAULT_TARGET = "trn1"


def target_info(target: str | None = None) -> Target:
    """The :class:`Target` named ``target`` (default :data:`DEFAULT_TARGET`)."""
    name = target or DEFAULT_TARGET
    try:
        return TARGETS[name]
    except KeyError:
        raise ValueError(f"target must be one of {', '.join(map(repr, TARGETS))}; got {target!r}") from None


def sbuf_budget(target: str | None = None, *, reserve: int = 0) -> int:
    """SBUF bytes per partition a kernel may plan for: the target's, less ``reserve``.

    ``reserve`` keeps room for small work tiles the plan does not count.

    >>> sbuf_budget("trn1", reserve=12 * 1024), sbuf_budget("trn2")
    (184320, 229376)
    """
    return target_info(target).sbuf_partition_bytes - reserve


def psum_budget(target: str | None = None) -> int:
    """PSUM bytes per partition (16 KiB: eight 2 KiB banks)."""
    return target_info(target).psum_partition_bytes
