"""The modeling probe in benchmarks/jacobi_model.py (the Vector-Engine alternative's per-instruction cost).

The script itself runs by hand; its probe kernel is checked here so the
figure it feeds into docs/trnsolver.md stays a count of what it claims:
one DMA in, eight full-tile Vector multiplies, one DMA out.
"""

import importlib.util
from pathlib import Path

import numpy as np

from trnsci.nki import emulator

_SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "jacobi_model.py"


def _load():
    spec = importlib.util.spec_from_file_location("trnsolver_jacobi_model", _SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_probe_kernel_counts_and_result():
    mod = _load()
    a = np.random.default_rng(0).standard_normal((6, 6)).astype(np.float32)
    out, prof = emulator.profile(mod._one_full_tile_op, a, target="trn1")
    np.testing.assert_array_equal(out, a * a)  # fp32 products, exact in fp32 on both sides
    assert prof.instructions["vector"] == 8
    assert prof.instructions["dma"] == 2
    assert prof.hbm_read_bytes == prof.hbm_write_bytes == a.nbytes


def test_script_runs_for_one_small_size(capsys):
    _load().main([8])
    out = capsys.readouterr().out
    assert out.splitlines()[1].split()[0] == "8"
