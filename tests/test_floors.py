"""Floors that never loop: no module imports a floor above its own (tests/floors.py walks the graph)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import tomllib

_spec = importlib.util.spec_from_file_location("floors", Path(__file__).with_name("floors.py"))
floors = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(floors)


def test_source_tree_has_no_upward_import():
    assert floors.upward_edges() == []


@pytest.mark.parametrize(("where", "code", "culprit"), [
    ("trnsci/backend.py", "import trnblas\n", "trnsci-core (floor 1) imports trnblas"),
    ("trnsci/dispatch.py", "def f():\n    from trnsci import chem\n", "imports trnsci.chem (trnsci, floor 3)"),
    ("trnblas/level1.py", "from trnsci.chem import df_mp2\n", "trnblas (floor 2) imports trnsci.chem.df_mp2"),
    ("trnblas/level3.py", "import trnsolver.factor\n", "trnblas (floor 2) imports trnsolver.factor"),
])
def test_an_upward_import_is_reported(tmp_path, where, code, culprit):
    """The walker on a made-up installed layout: each planted edge is found, the legal ones are not."""
    legal = {
        "trnsci/__init__.py": "import torch\n",
        "trnsci/chem.py": "import trnblas\nimport trnsolver\n",
        "trnsci/chem_demo.py": "from trnblas.demo import MOLECULES\n",
        "trnblas/__init__.py": "from trnsci.dispatch import Op\n",
        "trnsolver/__init__.py": "import trnblas\n",
    }
    for rel, text in {**legal, where: code}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    # what the umbrella installed, as its RECORD says (the rest of trnsci/ is the core's)
    (tmp_path / "trnsci-1.dist-info").mkdir()
    (tmp_path / "trnsci-1.dist-info" / "RECORD").write_text("trnsci/chem.py,,\ntrnsci/chem_demo.py,,\n")
    bad = floors.upward_edges(tmp_path)
    assert len(bad) == 1 and culprit in bad[0], bad


def test_declared_dependencies_match_the_lateral_imports():
    """A library may import another library only if its pyproject requires it (and vice versa)."""
    root = Path(__file__).resolve().parent.parent
    for lib in floors.LIBRARIES:
        deps = tomllib.loads((root / "packages" / lib / "pyproject.toml").read_text())["project"]["dependencies"]
        ours = {d.split("==")[0] for d in deps if d.split("==")[0] in floors.LIBRARIES}
        assert ours == floors.LATERAL.get(lib, set()), (lib, ours)
