"""trnsci.nki.tiling: tile arithmetic against tiles written out by hand; every kernel on it."""

import ast
import pathlib

import pytest

from trnsci.nki.tiling import PMAX, cdiv, ntiles, tile, tiles, tiles2d

# (n, size, start, step) -> the tiles, enumerated by hand
CASES = [
    ((300, 128, 0, None), [(0, 128), (128, 128), (256, 44)]),      # ragged last tile
    ((256, 128, 0, None), [(0, 128), (128, 128)]),                 # exact multiple: no ragged tile
    ((5, 128, 0, None), [(0, 5)]),                                 # one tile shorter than size
    ((1, 1, 0, None), [(0, 1)]),
    ((10, 4, 3, None), [(3, 4), (7, 3)]),                          # from an offset
    ((10, 4, 9, None), [(9, 1)]),
    ((10, 4, 10, None), []),                                       # empty range
    ((0, 4, 0, None), []),
    ((10, 2, 0, 4), [(0, 2), (4, 2), (8, 2)]),                     # strided
    ((9, 2, 0, 4), [(0, 2), (4, 2), (8, 1)]),                      # strided, ragged last
    ((10, 4, 1, 3), [(1, 4), (4, 4), (7, 3)]),                     # overlapping windows
    ((1100, 512, 100, None), [(100, 512), (612, 488)]),
]


@pytest.mark.parametrize("args,expected", CASES)
def test_core_tiling_tiles_by_hand(args, expected):
    n, size, start, step = args
    assert list(tiles(n, size, start, step)) == expected
    assert ntiles(n, size, start, step) == len(expected)
    assert [tile(i, n, size, start, step) for i in range(len(expected))] == expected


@pytest.mark.parametrize("n", [1, 127, 128, 129, 255, 256, 1000])
@pytest.mark.parametrize("size", [1, 7, 128, 512])
def test_core_tiling_cover_the_axis_once(n, size):
    # every element in exactly one tile, tiles in order, all full but the last
    got = list(tiles(n, size))
    assert ntiles(n, size) == cdiv(n, size) == len(got)
    covered = [x for off, ext in got for x in range(off, off + ext)]
    assert covered == list(range(n))
    assert all(ext == size for _, ext in got[:-1]) and 1 <= got[-1][1] <= size


def test_core_tiling_2d_by_hand():
    assert list(tiles2d(3, 5, 2, 4)) == [((0, 2), (0, 4)), ((0, 2), (4, 1)), ((2, 1), (0, 4)), ((2, 1), (4, 1))]
    assert list(tiles2d(PMAX, 512, PMAX, 512)) == [((0, PMAX), (0, 512))]
    assert list(tiles2d(0, 5, 2, 4)) == []


def test_core_tiling_bad_arguments():
    with pytest.raises(IndexError, match="tile index 3"):
        tile(3, 300, 128)
    with pytest.raises(IndexError, match="tile index -1"):
        tile(-1, 300, 128)
    with pytest.raises(ValueError, match="size"):
        ntiles(10, 0)
    with pytest.raises(ValueError, match="step"):
        tile(0, 10, 2, step=0)
    with pytest.raises(ValueError, match="start"):
        ntiles(10, 2, start=-1)


# ---- every library kernel: docstring sections and tile edges from the helper --------------------------------------

ROOT = pathlib.Path(__file__).resolve().parents[1]
KERNELS = sorted(p for p in ROOT.glob("packages/*/src/*/kernels/*.py") if p.name != "__init__.py")
#: Kernels with no tile arithmetic of their own, and why.
NO_TILING = {
    "batched_gemm.py": "runs trnblas.kernels.gemm.gemm_tiles per entry",
    "csr_spgemm.py": "its row blocks (<= 128 rows) are fixed by the host's symbolic phase",
}


def _section(doc, title):
    """True when ``doc`` has a heading line starting with ``title``, underlined with dashes."""
    lines = doc.splitlines()
    return any(a.startswith(title) and set(b.strip()) == {"-"} for a, b in zip(lines, lines[1:]))


@pytest.mark.parametrize("path", KERNELS, ids=lambda p: f"{p.parts[-3]}/{p.name}")
def test_core_tiling_kernel_files(path):
    tree = ast.parse(path.read_text())
    doc = ast.get_docstring(tree) or ""
    assert _section(doc, "Pseudocode"), "docstring needs a 'Pseudocode' section"
    assert _section(doc, "Dimensions"), "docstring needs a 'Dimensions' section"
    # a hand-written tile edge min(T, N - x0) is what trnsci.nki.tiling.tile computes
    edges = [ast.unparse(n) for n in ast.walk(tree)
             if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "min"
             and any(isinstance(a, ast.BinOp) and isinstance(a.op, ast.Sub) for a in n.args)]
    assert not edges, f"tile edges written by hand (use trnsci.nki.tiling.tile): {edges}"
    uses = any(isinstance(n, ast.ImportFrom) and n.module == "trnsci.nki.tiling" for n in ast.walk(tree))
    assert uses or path.name in NO_TILING, "kernel does not use trnsci.nki.tiling"


def test_core_tiling_kernel_scan_finds_kernels():
    # the scan above must see every library's kernels (a moved tree would make it vacuous)
    libs = {p.parts[-3] for p in KERNELS}
    assert {"trnblas", "trnfft", "trnrand", "trnsolver", "trnsparse", "trntensor"} <= libs
    assert len(KERNELS) >= 59
