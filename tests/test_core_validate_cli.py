"""trnsci.validate (uniform errors, NumPy round trip), the CLI, and the kernel shim."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

import trnsci
from trnsci import cli, dispatch, validate
from trnsci import nki as tnki

# ------------------------------------------------------------------ validate

def test_tensor_coercion_and_errors():
    a = np.arange(6.0).reshape(2, 3)
    t = validate.tensor(a, "A", "gemm")
    assert isinstance(t, torch.Tensor) and t.data_ptr() == a.ctypes.data  # shared, not copied
    ro = a.copy()
    ro.flags.writeable = False
    assert validate.tensor(ro, "A").tolist() == a.tolist()
    with pytest.raises(TypeError, match=r"gemm: A must be a torch.Tensor or numpy.ndarray, got list"):
        validate.tensor([[1.0]], "A", "gemm")
    with pytest.raises(TypeError, match="must hold numbers"):
        validate.tensor(np.array(["x"]), "A")


def test_dtype_ndim_shape_device_checks():
    x = torch.zeros(2, 3, dtype=torch.int64)
    with pytest.raises(TypeError, match=r"syrk: A has dtype int64; expected one of float32, float64"):
        validate.dtype(x, "A", validate.FLOAT_DTYPES, "syrk")
    with pytest.raises(ValueError, match=r"x must be 1-D, got shape \(2, 3\)"):
        validate.ndim(x, "x", 1)
    with pytest.raises(ValueError, match=r"C must have shape \(2, 4\), got \(2, 3\)"):
        validate.shape(x, "C", (2, 4))
    validate.shape(x, "C", (None, 3))
    with pytest.raises(TypeError, match="B has dtype float64 but A has float32"):
        validate.same_dtype(A=torch.zeros(1), B=torch.zeros(1, dtype=torch.float64))
    with pytest.raises(ValueError, match="B is on meta but A is on cpu"):
        validate.same_device(A=torch.zeros(1), B=torch.zeros(1, device="meta"))


def test_scalar_choice_integer():
    assert validate.scalar(np.float64(2.5), "alpha") == 2.5
    assert validate.scalar(torch.tensor(3), "alpha") == 3
    assert validate.scalar(1 + 2j, "alpha") == 1 + 2j
    with pytest.raises(TypeError, match="alpha must be real"):
        validate.scalar(1j, "alpha", complex_ok=False)
    with pytest.raises(TypeError, match="alpha must be a number, got str"):
        validate.scalar("1", "alpha")
    with pytest.raises(TypeError):
        validate.scalar(True, "alpha")
    uplo = {"U": ("upper", "U"), "L": ("lower", "L")}
    assert validate.choice("Upper", "uplo", uplo) == "U"
    assert validate.choice("l", "uplo", uplo) == "L"
    with pytest.raises(ValueError, match=r"uplo must be one of 'upper', 'U', 'lower', 'L'; got 'diag'"):
        validate.choice("diag", "uplo", uplo)
    assert validate.integer(3, "n", minimum=0) == 3
    with pytest.raises(ValueError, match="n must be >= 0"):
        validate.integer(-1, "n", minimum=0)
    with pytest.raises(TypeError):
        validate.integer(2.0, "n")


def test_numpy_io_round_trip_and_out():
    @validate.numpy_io
    def twice(x, out=None):
        return validate.write_out(x * 2, out)

    r = twice(np.array([1.0, 2.0]))
    assert isinstance(r, np.ndarray) and r.tolist() == [2.0, 4.0]
    t = twice(torch.tensor([1.0]))
    assert isinstance(t, torch.Tensor)
    buf = np.zeros(2)
    res = twice(np.array([3.0, 4.0]), out=buf)
    assert buf.tolist() == [6.0, 8.0] and res.tolist() == [6.0, 8.0]
    with pytest.raises(ValueError, match=r"out must have shape \(2,\)"):
        twice(torch.ones(2), out=torch.zeros(3))
    with pytest.raises(TypeError, match="out has dtype"):
        twice(torch.ones(2), out=torch.zeros(2, dtype=torch.float64))


# ------------------------------------------------------------------ kernel shim

def test_shim_reports_source():
    assert tnki.SOURCE in ("neuron", "emulator")
    assert tnki.HAS_NKI == (tnki.SOURCE == "neuron")
    if tnki.SOURCE == "emulator":
        assert not tnki.has_neuron_device()


def test_numpy_torch_conversions_keep_bf16_bits():
    t = torch.tensor([1.0, -2.5, 3.140625], dtype=torch.bfloat16)
    a = tnki.to_numpy(t)
    assert a.dtype.name == "bfloat16"
    back = tnki.from_numpy(a)
    assert back.dtype == torch.bfloat16 and torch.equal(back, t)
    f = tnki.from_numpy(np.ones(2, dtype=np.float32), dtype=torch.float64)
    assert f.dtype == torch.float64


def test_run_rejects_unknown_backend():
    with pytest.raises(ValueError, match="'simulator' or 'nki'"):
        tnki.run(lambda x: x, torch.zeros(1), backend="gpu")


def test_run_nki_without_device_raises():
    with pytest.raises(RuntimeError, match="NeuronCore"):
        tnki.run(lambda x: x, torch.zeros(1), backend="nki")


# ------------------------------------------------------------------ CLI

def test_info_lists_everything(capsys, monkeypatch):
    monkeypatch.setenv("TRNBLAS_BACKEND", "torch")
    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    for name in ("trnsci", *trnsci.LIBRARIES, "torch", "numpy", "scipy"):
        assert name in out
    assert f"NKI source      {tnki.SOURCE}" in out
    assert "env:TRNBLAS_BACKEND" in out
    assert "calibration file" in out
    for op in dispatch.registry():
        if not op.startswith("trntensor.test_"):
            assert op in out


def test_info_bad_env_is_a_clear_error(capsys, monkeypatch):
    monkeypatch.setenv("TRNSCI_BACKEND", "cuda")
    assert cli.main(["info"]) == 2
    assert "TRNSCI_BACKEND" in capsys.readouterr().err


def test_calibrate_without_device_says_so(tmp_path, capsys):
    path = tmp_path / "cal.json"
    assert cli.main(["calibrate", "--output", str(path)]) == 2
    assert "nothing to calibrate" in capsys.readouterr().out
    assert not path.exists()  # no file of defaults pretending to be measurements


def test_calibrate_with_device_measures(tmp_path, monkeypatch):
    """With a (pretended) device, calibrate times probes and records the break-even size."""
    monkeypatch.setattr(tnki, "has_neuron_device", lambda: True)
    import time

    def probe(n):  # the "kernel" is faster from n >= 256 on
        slow, fast = (lambda: time.sleep(2e-3)), (lambda: None)
        return float(n) ** 3, (fast if n < 256 else slow), (slow if n < 256 else fast)

    dispatch.register("trntensor.test_cal_probe", "flops", 1.0, probe=probe)
    try:
        found = cli.calibrate(path=tmp_path / "c.json", sizes=(64, 128, 256, 512), repeats=1, echo=lambda s: None)
    finally:
        dispatch._REGISTRY.pop("trntensor.test_cal_probe")
    assert found == {"trntensor.test_cal_probe": 256.0**3}
    assert dispatch.load_calibration(tmp_path / "c.json") == found


def test_python_dash_m_and_version():
    r = subprocess.run([sys.executable, "-m", "trnsci", "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and trnsci.__version__ in r.stdout


@pytest.mark.neuron
def test_neuron_marker_is_skipped_without_hardware():
    """Runs only on a NeuronCore: there the device is present and the shim is the real NKI."""
    assert tnki.has_neuron_device() and tnki.SOURCE == "neuron"


def test_bench_runs_trnblas_cases(capsys):
    """`trnsci bench` times each trnblas row against its peers and prints a ratio to the best one."""
    from trnsci import bench

    rows, errors, _ = bench.collect(["trnblas"], quick=True)
    rows = [r for r in rows if r.name.startswith("gemm 64^3")]
    assert not errors and {n for r in rows for n in r.peers} == {"torch.mm", "scipy dgemm"}
    out = bench.run(rows, rounds=1, budget_s=0.0, echo=lambda s: None, pause_s=0.0)
    assert len(out) == 2 and all(r["ratio"] > 0 and r["trnsci_s"] > 0 for r in out)
    assert all(r["ratio"] == r["trnsci_s"] / min(p["median_s"] for p in r["peers"].values()) for r in out)


@pytest.mark.slow
def test_demo_agrees_with_pyscf():
    """`trnsci demo` runs DF-MP2 on a molecule against PySCF, then the libraries' kernel cases."""
    pytest.importorskip("pyscf")
    from trnsci import demo, nki

    r = subprocess.run([sys.executable, "-m", "trnsci", "demo", "--molecule", "hf"],
                       capture_output=True, text=True, timeout=300)
    assert "|dE| bound 1e-08 Eh: all within" in r.stdout, r.stdout + r.stderr
    assert "E_corr PySCF" in r.stdout and "NKI kernels on the emulator" in r.stdout
    if nki.EMULATOR_ERROR is None:
        assert r.returncode == 0, r.stdout + r.stderr
        assert "mp2_energy" in r.stdout and "[modeled]" in r.stdout and "no demo kernel cases (" not in r.stdout
        n = sum(len(m.kernel_cases()) for m in demo.kernel_case_modules().values())
        assert f"{n} of {n} kernel cases agree with torch" in r.stdout, r.stdout


def test_options_fast_lookup_and_errors():
    trans = validate.Options({"N": ("N", False), "T": ("T", True), "C": ("C",)})
    assert [trans(x, "transA") for x in (False, True, "n", "T", "c")] == ["N", "T", "N", "T", "C"]
    with pytest.raises(ValueError, match=r"gemm: transA must be one of 'N', False, 'T', True, 'C'; got 'X'"):
        trans("X", "transA", "gemm")
    with pytest.raises(ValueError, match="got 1"):
        trans(1, "transA")  # 1 is not True: no silent truthiness


@pytest.mark.parametrize("command,option", [("demo", "--kernels-only"), ("bench", "--lib")])
def test_subcommand_help_is_the_subcommands_own(command, option, capsys):
    """``trnsci demo --help`` lists demo's options, not the outer parser's ``rest`` placeholder."""
    with pytest.raises(SystemExit) as exc:
        cli.main([command, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert option in out and "rest" not in out


def test_bench_names_what_a_case_module_is_missing(monkeypatch, capsys):
    """A declared bench module that fails to import is reported with the package to install, not skipped."""
    from trnsci import bench, plugins

    broken = plugins.Plugin("trnblas", "trnblas.bench", "trnblas",
                            error=plugins._missing(ModuleNotFoundError("No module named 'scipy'", name="scipy")))
    monkeypatch.setattr(plugins, "load", lambda group: [broken])
    assert bench.main(["--lib", "trnblas"]) == 1
    cap = capsys.readouterr()
    out = cap.out + cap.err
    assert "benchmark cases (trnblas.bench, from trnblas)" in out and "pip install scipy" in out, out
