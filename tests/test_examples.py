"""Every example script runs and passes its own check (each exits non-zero when its check fails)."""

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.py"))


@pytest.mark.slow
@pytest.mark.parametrize("script", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs(script):
    if script.name == "dfmp2_molecules.py":
        pytest.importorskip("pyscf")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600, cwd=script.parent)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


def test_there_are_examples():
    assert {p.name for p in EXAMPLES} >= {"backend_scopes.py", "dfmp2_molecules.py", "dfmp2_synthetic.py"}
