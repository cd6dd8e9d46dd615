"""NKI 0.7 (Neuron 2.33) additions: tiled / blocked layouts and the collectives' prepare/trigger names.

Kernels of our own in the style of the 2.33 API reference's examples
(``nl.tiles``, ``nl.blocks``, ``nl.alloc_tiles``; trn2).  Data moves and an
exact scaling by 2 only, so results are compared exactly with NumPy.
"""

import numpy as np
import pytest

from trnsci.nki.emulator import NkiValidationError, NotEmulatedError, nisa, nl, profile
from trnsci.nki.emulator.extras import collectives

F32 = np.float32
RNG = np.random.default_rng(7)


def copy_by_tiles(src):
    tiles = nl.tiles(src, tile_shape=(128, 256))
    dst = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.shared_hbm)
    dst_tiles = nl.tiles(dst, tile_shape=(128, 256))
    seen = []
    for i in range(tiles.shape[0]):
        for j in range(tiles.shape[1]):
            t = tiles[i, j]
            seen.append((t.element_shape, t.is_remainder))
            sb = nl.ndarray(t.element_shape, dtype=src.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=sb, src=t.data)
            nisa.tensor_scalar(dst=sb, data=sb, op0=nl.multiply, operand0=2.0)
            nisa.dma_copy(dst=dst_tiles[i, j].data, src=sb)
    copy_by_tiles.seen = seen
    return dst


def test_tiles_cover_a_ragged_tensor_with_clamped_remainders():
    x = RNG.standard_normal((300, 700)).astype(F32)
    out = profile(copy_by_tiles, x, target="trn2")[0]
    np.testing.assert_array_equal(out, 2 * x)
    seen = copy_by_tiles.seen
    assert len(seen) == 3 * 3
    assert seen[0] == ((128, 256), False) and seen[2] == ((128, 188), True) and seen[8] == ((44, 188), True)


def copy_by_blocks(src):
    blocks = nl.blocks(src, tile_shape=(64, 128), block_shape=(2, 2))
    dst = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.shared_hbm)
    dst_blocks = nl.blocks(dst, tile_shape=(64, 128), block_shape=(2, 2))
    assert blocks.shape == (2, 2) and blocks.block_shape == (2, 2) and blocks.index_step_elements == (128, 256)
    for i in range(blocks.shape[0]):
        for j in range(blocks.shape[1]):
            src_tiles, dst_tiles = nl.tiles(blocks[i, j]), nl.tiles(dst_blocks[i, j])
            for a in range(src_tiles.shape[0]):
                for b in range(src_tiles.shape[1]):
                    t = src_tiles[a, b]
                    sb = nl.ndarray(t.element_shape, dtype=src.dtype, buffer=nl.sbuf)
                    nisa.dma_copy(dst=sb, src=t.data)
                    nisa.dma_copy(dst=dst_tiles[a, b].data, src=sb)
    return dst


def test_blocks_group_tiles_and_tiles_of_a_block_navigate_inside_it():
    x = RNG.standard_normal((200, 500)).astype(F32)  # blocks of 128 x 256, the last ones partial
    np.testing.assert_array_equal(profile(copy_by_blocks, x, target="trn2")[0], x)


def scale_via_sbuf_tile_grid(src):
    """alloc_tiles on SBUF: a (256, 512) logical tensor stored as four (128, 256) tiles side by side."""
    grid = nl.alloc_tiles(tile_shape=(128, 256), element_shape=src.shape, buffer=nl.sbuf, dtype=src.dtype)
    src_tiles = nl.tiles(src, tile_shape=(128, 256))
    dst = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.shared_hbm)
    dst_tiles = nl.tiles(dst, tile_shape=(128, 256))
    assert grid.shape == (2, 2) and not grid[0].is_data_representable and grid[1, 1].is_data_representable
    for i in range(2):
        for j in range(2):
            nisa.dma_copy(dst=grid[i, j].data, src=src_tiles[i, j].data)
    for i in range(2):
        for j in range(2):
            t = grid[i, j].data
            nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
            nisa.dma_copy(dst=dst_tiles[i, j].data, src=t)
    with pytest.raises(NkiValidationError, match="is_data_representable is False"):
        grid[0].data  # noqa: B018 -- two tiles are not one tensor in the rank-two layout
    return dst


def test_alloc_tiles_on_sbuf_uses_the_dense_rank_two_layout():
    x = RNG.standard_normal((256, 512)).astype(F32)
    out, prof = profile(scale_via_sbuf_tile_grid, x, target="trn2")
    np.testing.assert_array_equal(out, 2 * x)
    assert prof.peak_sbuf_bytes == 4 * 256 * 4  # one (128, 1024) fp32 storage tile


def test_grid_apis_are_refused_on_trn1_and_checked():
    x = np.zeros((128, 128), F32)
    with pytest.raises(NkiValidationError, match="nl.tiles: the tiled/blocked layout APIs .* Trn2/Trn3"):
        profile(copy_by_tiles, x, target="trn1")

    def bad_tile(a):
        nl.tiles(a, tile_shape=(128,))

    with pytest.raises(TypeError, match="'tile_shape' must be a tuple of at least 2"):
        profile(bad_tile, x, target="trn2")

    def tall(a):
        nl.alloc_tiles(tile_shape=(256, 4), element_shape=(256, 4), buffer=nl.sbuf, dtype=nl.float32)

    with pytest.raises(NkiValidationError, match="exceeds the 128 partitions"):
        profile(tall, x, target="trn2")


def test_prepare_trigger_collectives_exist_and_say_not_emulated():
    for name in ("all_gather_v_prepare", "all_gather_v_trigger", "all_to_all_v_prepare", "all_to_all_v_trigger"):
        with pytest.raises(NotEmulatedError, match=f"nki.collectives.{name} is not emulated yet"):
            getattr(collectives, name)(None)
