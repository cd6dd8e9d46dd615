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

Examples
--------
>>> from trnsci.nki.tiling import cdiv, tiles
>>> cdiv(300, 128)
3
>>> list(tiles(300, 128))
[(0, 128), (128, 128), (256, 44)]
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

__all__ = [
    "cdiv", "tiles", "PMAX", "PSUM_FMAX", "STATIONARY_FMAX", "MOVING_FMAX",
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


def tiles(n: int, size: int, start: int = 0) -> Iterator[tuple[int, int]]:
    """``(offset, extent)`` of each tile covering ``[start, n)``; the last tile is ragged.

    Host code only: inside a kernel, loops run over ``nl.static_range(cdiv(...))``.
    """
    for off in range(start, n, size):
        yield off, min(size, n - off)


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
