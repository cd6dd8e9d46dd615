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


def test_source_tree_has_no_private_crossing():
    assert floors.private_crossings() == []


@pytest.mark.parametrize(("where", "code", "culprit"), [
    ("trnblas/level1.py", "from trnsci._env import flag\n", "trnblas imports trnsci._env.flag, private to trnsci-core"),
    ("trnblas/level1.py", "from trnsci.validate import _helper\n",
     "trnblas imports trnsci.validate._helper, private to trnsci-core"),
    ("trnblas/level1.py", "from trnsci import validate as V\nV._helper(1)\n",
     "trnblas reads V._helper (trnsci.validate._helper, private to trnsci-core)"),
    ("trnsolver/__init__.py", "from trnblas import _host\n", "trnsolver imports trnblas._host, private to trnblas"),
    ("trnsolver/__init__.py", "import trnblas\ntrnblas._host.clear()\n",
     "trnsolver reads trnblas._host (trnblas._host, private to trnblas)"),
    ("trnsci/chem.py", "from trnsci import nki\nnki._runs.get()\n",
     "trnsci reads nki._runs (trnsci.nki._runs, private to trnsci-core)"),
    ("trnsci/chem.py", "def f():\n    import trnsci.distributed as D\n    return D._COUNTERS\n",
     "trnsci reads D._COUNTERS (trnsci.distributed._COUNTERS, private to trnsci-core)"),
])
def test_a_private_crossing_is_reported(tmp_path, where, code, culprit):
    """Planted private imports and attribute reads across distributions are found; the same names inside
    their own distribution, dunders and public names across distributions are not."""
    legal = {
        "trnsci/__init__.py": "from trnsci._version import __version__\n",
        "trnsci/validate.py": "def _helper(x):\n    return x\n",
        "trnsci/dispatch.py": "from trnsci import _env\n_env.flag\n",
        "trnsci/chem.py": "import trnblas\nfrom trnsci import nki, __version__\nnki.capture()\ntrnblas.__name__\n",
        "trnblas/__init__.py": "from trnsci.dispatch import Op\nfrom trnblas import _host\n_host.clear()\n",
        "trnblas/_host.py": "def clear():\n    pass\n",
        "trnsolver/__init__.py": "import trnblas\nfrom trnsci import validate as V\nV.scalar\n",
    }
    for rel, text in {**legal, where: legal.get(where, "") + code}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    (tmp_path / "trnsci-1.dist-info").mkdir()
    (tmp_path / "trnsci-1.dist-info" / "RECORD").write_text("trnsci/chem.py,,\n")
    assert floors.upward_edges(tmp_path) == []
    bad = floors.private_crossings(tmp_path)
    assert len(bad) == 1 and culprit in bad[0], bad
