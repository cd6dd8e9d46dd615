"""Kernels written in AWS's NKI 0.6 style (``aws_style_kernels.py``, plain ``import nki``) vs NumPy.

The kernel file is imported after ``trnsci.nki.install_as_nki()``, the
documented way to run an unmodified NKI 0.6 kernel file on the emulator.
Shapes are ragged (not multiples of 128 / 512).  Tolerances: fp32 kernels
against float64 NumPy; sums of up to ~300 fp32 terms of size O(1) agree to
~1e-5 relative, so 1e-4 (rtol) with a small atol is safe and still fails on
any wrong element; integer outputs (indices) are exact.
"""

import importlib
import pathlib
import sys

import numpy as np
import pytest

import trnsci.nki as tn
from trnsci.nki.emulator import NkiValidationError

HERE = pathlib.Path(__file__).parent
RNG = np.random.default_rng(21)
F32 = np.float32


@pytest.fixture(scope="module")
def K():
    """The kernel module, imported with `import nki` resolving to the emulator."""
    for n in list(sys.modules):
        if n == "aws_style_kernels":
            del sys.modules[n]
    before = sys.modules.get("nki")
    nki = tn.install_as_nki()
    assert sys.modules["nki"] is nki and nki.__trnsci_emulator__
    sys.path.insert(0, str(HERE))
    try:
        mod = importlib.import_module("aws_style_kernels")
        yield mod
    finally:
        sys.path.remove(str(HERE))
        sys.modules.pop("aws_style_kernels", None)
        tn.uninstall_nki()
        assert sys.modules.get("nki") is before


def _sim(kernel, *args, **kw):
    return tn.simulate(kernel, *args, **kw)


def test_import_nki_resolves_to_the_emulator(K):
    import nki
    import nki.isa as nisa
    import nki.language as nl
    from nki.isa.constants import dge_mode, oob_mode

    from trnsci.nki import emulator

    assert nl is emulator.nl and nisa is emulator.nisa and oob_mode is nisa.oob_mode and dge_mode is nisa.dge_mode
    assert nki.dtype.bfloat16 == nl.bfloat16 and nki.typing.mutable_tensor[(4, 4), nl.float32]
    from nki.isa import constants  # a submodule attribute, as in AWS's package (find_nonzero_indices)

    assert constants.oob_mode is oob_mode
    # nki-library kernels order generations: `nisa.get_nc_version() <= nisa.nc_version.gen3`
    assert nisa.nc_version.gen2 < nisa.nc_version.gen3 <= nisa.nc_version.gen3 < nisa.nc_version.gen4
    # the trnsci.nki shim does not mistake the installed emulator for AWS's package
    assert tn._load_toolchain()[0] == "emulator"


def test_matmul_tiles_and_counters(K):
    k, m, n = 200, 150, 600  # 2 x 2 x 2 tiles, all ragged
    a = RNG.standard_normal((k, m)).astype(F32)
    b = RNG.standard_normal((k, n)).astype(F32)
    out, prof = tn.profile(K.matmul_tiles, a, b)
    np.testing.assert_allclose(out, a.T.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    assert prof.instructions["tensor"] == 2 * 2 * 2
    # each A tile is read once per N tile and each B tile once per M tile
    assert prof.hbm_read_bytes == 4 * (2 * k * m + 2 * k * n) and prof.hbm_write_bytes == 4 * m * n


def test_softmax_rows(K):
    x = (RNG.standard_normal((200, 77)) * 4).astype(F32)
    y = _sim(K.softmax_rows, x)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_rmsnorm_rows(K):
    x = RNG.standard_normal((130, 300)).astype(F32)
    w = RNG.standard_normal((1, 300)).astype(F32)
    y = _sim(K.rmsnorm_rows, x, w, 1e-6)
    ref = x / np.sqrt((x.astype(np.float64) ** 2).mean(axis=1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)


def test_cumsum_rows(K):
    x = RNG.standard_normal((131, 700)).astype(F32)
    y = _sim(K.cumsum_rows, x)
    np.testing.assert_allclose(y, np.cumsum(x.astype(np.float64), axis=1), rtol=1e-4, atol=2e-4)


def test_topk_with_max8_and_match_replace8(K):
    x = RNG.permutation(140 * 90).reshape(140, 90).astype(F32)  # distinct values: indices are unique
    vals, idx = _sim(K.topk_rows, x, 2)
    order = np.argsort(-x, axis=1)[:, :16]
    np.testing.assert_array_equal(vals, np.take_along_axis(x, order, axis=1))
    # within each max8 round the 8 values are served 7..0 by match_replace8, each at its own position
    np.testing.assert_array_equal(np.take_along_axis(x, idx.astype(np.int64), axis=1), vals)


def test_find_index8_duplicates_and_absent(K):
    x = np.array([[5, 1, 5, 2, 5, 3, 9, 9, 0, 4]], F32)
    v = np.array([[5, 5, 5, 5, 9, 9, 7, 1]], F32)
    got = _sim(K.find_index8_rows, x, v)
    ones = 0xFFFFFFFF
    # duplicates take successive occurrences (0.6 release notes); none left or absent -> all-ones
    assert got.tolist() == [[0, 2, 4, ones, 6, 7, ones, 1]]


def test_depthwise_conv1d_psum_accumulation(K):
    x = RNG.standard_normal((140, 530)).astype(F32)
    w = RNG.standard_normal((140, 5)).astype(F32)
    y, prof = tn.profile(K.depthwise_conv1d, x, w)
    lo = 530 - 5 + 1
    ref = sum(w[:, t:t + 1].astype(np.float64) * x[:, t:t + lo] for t in range(5))
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
    assert prof.instructions["tensor"] == 2 * 2 * 5  # channel tiles x output chunks x taps


def test_indirect_dma_gather(K):
    table = RNG.standard_normal((50, 24)).astype(F32)
    idx = RNG.integers(0, 50, size=(150, 1)).astype(np.int32)
    idx[7, 0] = 77  # out of range: skipped (oob_mode.skip), the row stays at its memset value
    out = _sim(K.gather_rows, table, idx)
    ref = table[np.clip(idx[:, 0], 0, 49)]
    ref[7] = 0.0
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("kernel, shapes, rule", [
    ("matmul_moving_too_wide", [(64, 32), (64, 600)], r"2 KiB\) PSUM bank limit"),
    ("sin_out_of_range", [(4, 8)], r"outside the valid range \[-3.14159, 3.14159\] of nl.sin"),
    ("tile_too_tall", [(200, 4)], r"partition"),
    ("psum_store_to_hbm", [(4, 8)], r"PSUM"),
])
def test_rule_breaking_kernels_are_rejected_by_rule(K, kernel, shapes, rule):
    args = [np.linspace(0, 10, int(np.prod(s)), dtype=F32).reshape(s) for s in shapes]
    with pytest.raises(NkiValidationError, match=rule):
        _sim(getattr(K, kernel), *args)


def test_runner_runs_a_kernel_file(tmp_path):
    """`python -m trnsci.nki file.py` runs an unmodified kernel file on the emulator."""
    import subprocess

    f = tmp_path / "k.py"
    f.write_text(
        "import numpy as np\nimport nki\nimport nki.language as nl\nimport nki.isa as nisa\n\n"
        "@nki.jit\ndef twice(a):\n"
        "    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)\n"
        "    nisa.dma_copy(dst=t, src=a)\n"
        "    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)\n"
        "    o = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)\n"
        "    nisa.dma_copy(dst=o, src=t)\n    return o\n\n"
        "if __name__ == '__main__':\n"
        "    a = np.arange(6, dtype=np.float32).reshape(2, 3)\n"
        "    print('OK', nisa.get_nc_version().name, float(nki.simulate(twice)(a).sum()))\n"
    )
    env = {**__import__("os").environ, "PYTHONPATH": ":".join(sys.path)}
    r = subprocess.run([sys.executable, "-m", "trnsci.nki", "--target", "trn2", str(f)], capture_output=True,
                       text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "OK gen3 30.0"
