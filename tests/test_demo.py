"""``trnsci demo``'s kernel part: every library's ``<lib>.demo.kernel_cases()`` and the comparison they go through.

Each library's cases run here as they run in ``trnsci demo`` (torch path,
then backend "simulator" through the library's public functions); their
tolerances are stated and justified in each ``kernel_cases`` docstring. The
comparison itself (:func:`trnsci.demo.compare`) is tested on hand-made
results whose verdict is known.
"""

from __future__ import annotations

import types

import pytest
import torch

from trnsci import demo, nki
from trnsci.backend import LIBRARIES


def _all_cases():
    return [pytest.param(c, id=f"{lib}-{c.name.replace(' ', '_')}")
            for lib, mod in demo.kernel_case_modules().items() for c in mod.kernel_cases()]


def test_every_library_ships_demo_kernel_cases():
    mods = demo.kernel_case_modules()
    assert sorted(mods) == sorted(LIBRARIES)
    for lib, mod in mods.items():
        cases = mod.kernel_cases()
        assert len(cases) >= 3, lib
        names = [c.name for c in cases]
        assert len(set(names)) == len(names), lib
        for c in cases:
            # every case names the kernels it is there to show, and states a bound
            # fp32 bounds: the widest is two fp32 solves of a cond-10 system, each ~n u cond from exact
            assert c.library == lib and c.expect and 0 <= c.tol <= 2e-4, (lib, c.name)


@pytest.mark.simulator
@pytest.mark.skipif(nki.EMULATOR_ERROR is not None, reason="NKI emulator unavailable")
@pytest.mark.parametrize("case", _all_cases())
def test_demo_kernel_case_runs_its_kernels_and_agrees(case):
    r = demo.run_kernel_case(case)
    assert r["kernels"] and not r["missing"], (r["kernels"], r["missing"])
    assert r["err"] <= case.tol, r["err"]
    assert r["ok"] and len(r["profiles"]) == len(r["kernels"])


# ------------------------------------------------------------ the comparison

def test_compare_counts_imaginary_parts():
    ref = torch.tensor([1 + 1j, 2 - 1j], dtype=torch.complex64)
    got = ref.clone()
    got[1] += 0.5j  # real parts identical: a real-only comparison would call this equal
    err, ok = demo.compare(ref, got, 1e-3)
    assert not ok and err == pytest.approx(0.5 / abs(2 - 1j))
    assert demo.compare(ref, ref.clone(), 0.0) == (0.0, True)


def test_compare_tolerance_zero_is_bit_equality():
    ref = torch.tensor([0.25, 1.5, -3.0])
    assert demo.compare(ref, ref.clone(), 0.0) == (0.0, True)
    one_ulp = ref.clone()
    one_ulp[1] = torch.nextafter(one_ulp[1], torch.tensor(2.0))
    err, ok = demo.compare(ref, one_ulp, 0.0)
    assert not ok and 0 < err < 1e-6
    assert demo.compare(ref, one_ulp, 1e-6)[1]  # the same pair agrees under a bound
    err, ok = demo.compare(ref, ref.double(), 0.0)  # same values, another dtype: not bit-identical
    assert not ok and err == float("inf")


def test_compare_integers_exactly_whatever_the_bound():
    big = torch.tensor([2**53, 7], dtype=torch.int64)
    off = big.clone()
    off[0] += 1  # equal once rounded to float64
    assert not demo.compare(big, off, 1e-3)[1]
    assert demo.compare(big, big.clone(), 1e-3) == (0.0, True)
    flags = torch.tensor([True, False])
    assert not demo.compare(flags, ~flags, 1.0)[1]


def test_compare_parts_shapes_and_nan():
    w, V = torch.tensor([1.0, 2.0]), torch.eye(2)
    assert demo.compare((w, V), (w.clone(), V.clone()), 0.0) == (0.0, True)
    err, ok = demo.compare((w, V), (w, V + 1e-3), 1e-6)
    assert not ok and err == pytest.approx(1e-3 / 1.0, rel=1e-4)  # the worst part
    assert demo.compare((w, V), (w,), 1.0) == (float("inf"), False)
    assert demo.compare(w, w[:1], 1.0) == (float("inf"), False)
    assert demo.compare(w, torch.tensor([1.0, float("nan")]), 1.0) == (float("inf"), False)
    # the scale is max(1, max|ref|): small results are compared absolutely, large ones relatively
    small, large = torch.tensor([1e-3], dtype=torch.float64), torch.tensor([1e3], dtype=torch.float64)
    assert demo.compare(small, 2 * small, 1.5e-3) == (pytest.approx(1e-3), True)
    assert demo.compare(large, large + 0.5, 1e-3) == (pytest.approx(5e-4), True)
    assert not demo.compare(large, large + 2.0, 1e-3)[1]


# ------------------------------------------------------------ the table

@pytest.mark.skipif(nki.EMULATOR_ERROR is not None, reason="NKI emulator unavailable")
def test_kernel_part_reports_fallbacks_disagreements_and_errors(monkeypatch):
    """A case that runs no kernel, one whose expected kernel did not run, one off its bound and
    one that raises are each reported and make the part fail; a good case passes."""
    import trnblas

    A = torch.randn(40, 30, generator=torch.Generator().manual_seed(0))
    Bm = torch.randn(30, 20, generator=torch.Generator().manual_seed(1))
    lib = "trnblas"
    good = demo.KernelCase(lib, "gemm", "40x30 @ 30x20", lambda: trnblas.gemm(1.0, A, Bm), 1e-5, ("gemm_kernel",))
    cases = {
        "good": [good],
        "no kernel": [demo.KernelCase(lib, "plain torch", "-", lambda: A @ Bm, 1e-5)],
        "missing": [demo.KernelCase(lib, "gemm", "-", good.call, 1e-5, ("syrk_kernel",))],
        "off": [demo.KernelCase(lib, "gemm", "-", lambda: trnblas.gemm(1.0, A, Bm) + (
            0.0 if trnblas.get_backend() == "torch" else 1.0), 1e-5)],
        "raises": [demo.KernelCase(lib, "gemm", "-", lambda: trnblas.gemm(1.0, A, A), 1e-5)],
    }
    for what, cs in cases.items():
        monkeypatch.setattr(demo, "kernel_case_modules",
                            lambda cs=cs: {lib: types.SimpleNamespace(kernel_cases=lambda: cs)})
        lines = []
        ok = demo.kernel_part(echo=lines.append, profiles=True)
        text = "\n".join(lines)
        assert ok is (what == "good"), (what, text)
        assert "trnfft     no demo kernel cases (not installed" in text  # the others are absent in this fake
        if what == "good":
            assert "gemm_kernel" in text and "[modeled]" in text and "1 of 1 kernel cases agree" in text
            assert "KernelProfile" in text  # profiles=True prints the kernel's profile under its row
        elif what == "no kernel":
            assert "none ran (torch fallback)" in text
        elif what == "missing":
            assert "expected, not run: syrk_kernel" in text
        elif what == "off":
            assert "BAD" in text and "0 of 1" in text
        else:
            assert "FAILED (ValueError" in text


def test_a_demo_module_that_fails_to_import_is_reported_with_the_missing_package(monkeypatch):
    from trnsci import plugins

    broken = plugins.Plugin("trnfoo", "trnfoo.demo", "trnfoo", error=plugins._missing(ModuleNotFoundError(
        "No module named 'scipy'", name="scipy")))
    monkeypatch.setattr(demo, "demo_plugins", lambda: [broken])
    monkeypatch.setattr(demo, "kernel_case_modules", lambda: {})
    lines = []
    assert demo.kernel_part(echo=lines.append) is False
    text = "\n".join(lines)
    assert "trnfoo     FAILED to load trnfoo.demo" in text and "pip install scipy" in text, text


@pytest.mark.slow
def test_demo_distributed_is_reached_through_the_umbrellas_entry_point(tmp_path):
    """`trnsci demo --distributed` (the command torchrun runs) hands over to the umbrella's distributed demo."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "trnsci", "demo", "--distributed", "--nproc", "2", "--what", "gemm",
                        "--gemm", "64"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "rank 0/2" in r.stdout and "rank 1/2" in r.stdout and "gemm 64^2" in r.stdout, r.stdout
