"""``trnsci demo --distributed`` / ``python -m trnsci.distributed_demo``: bad options are usage errors
raised before any rank is spawned (no tracebacks from every rank), and small byte counts stay readable."""

import importlib.util

import pytest

from trnsci import distributed_demo as dd


def _usage_error(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        dd.main(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("what", ["gem", "fft,mp3", ","])
def test_unknown_part_is_a_usage_error(what, capsys, monkeypatch):
    monkeypatch.setattr(dd.D, "spawn", lambda *a, **k: pytest.fail("spawned despite bad --what"))
    err = _usage_error(["--what", what], capsys)
    assert "--what" in err and "choose from mp2, fft, gemm" in err, err


@pytest.mark.parametrize("opt", ["--gemm", "--fft", "--repeat", "--nproc"])
def test_non_positive_sizes_are_usage_errors(opt, capsys):
    err = _usage_error(["--what", "gemm", opt, "0"], capsys)
    assert f"{opt} must be a positive integer, got 0" in err, err


def test_mp2_without_pyscf_says_what_to_install(capsys, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(dd.importlib.util, "find_spec", lambda name, *a: None if name == "pyscf" else real(name, *a))
    monkeypatch.setattr(dd.D, "spawn", lambda *a, **k: pytest.fail("spawned without PySCF"))
    err = _usage_error(["--what", "mp2,gemm"], capsys)
    assert "needs PySCF" in err and "pip install pyscf" in err and "--what fft,gemm" in err, err


def test_bytes_readable():
    # a 64^2 float32 "row" GEMM on 2 ranks sends (P-1) k_r n 4 = 1 * 32 * 64 * 4 = 8192 bytes per rank
    assert dd._bytes(1 * 32 * 64 * 4) == "8.0 KiB"
    assert dd._bytes(33_554_432) == "32.0 MiB" and dd._bytes(48) == "48 B"
