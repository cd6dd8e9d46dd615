"""`trnsci bench`: the report end to end (tiny), discovery errors, progress output, kernel re-modeling."""

from __future__ import annotations

import importlib.metadata as md
import io
import json
import sys

import pytest

from trnsci import bench
from trnsci._progress import Progress


def test_quick_report_end_to_end(tmp_path):
    """The command that generates docs/benchmarks.md, at zero timing budget: every library's cases
    run, the kernel table and the figures are made, the Markdown links them. (~30 s, mostly case setup.)"""
    pytest.importorskip("matplotlib")
    out = tmp_path / "docs"
    code = bench.main(["--quick", "--budget", "0", "--rounds", "1", "--no-chem", "--json", str(tmp_path / "b.json"),
                       "--md", str(out / "benchmarks.md"), "--plots", str(out / "img")])
    doc = json.loads((tmp_path / "b.json").read_text())
    assert code == 0 and doc["errors"] == {}
    libs = {r["library"] for r in doc["rows"]}
    assert libs == {"trnblas", "trnfft", "trnsparse", "trnsolver", "trnrand", "trntensor"}
    assert not [r for r in doc["rows"] if "error" in r]
    for r in doc["rows"]:
        assert r["ratio"] == pytest.approx(r["trnsci_s"] / min(p["median_s"] for p in r["peers"].values()))
    text = (out / "benchmarks.md").read_text()
    assert "## Machine" in text and "logical CPUs" in text and "modeled" in text
    for k in doc["kernels"]:
        assert k["hbm_bytes"] > 0 and k["modeled_s"]["trn1"] > 0 and k["modeled_s"]["trn2"] > 0
    for png in (out / "img").glob("*.png"):
        assert f"(img/{png.name})" in text
    assert (out / "img" / "kernel_roofline.png").exists() and (out / "img" / "time_trnfft.png").exists()
    assert {a["library"] for a in doc["accuracy"]} >= {"trnfft", "trnsolver"}
    # the report rebuilds from the JSON alone, without timing anything
    assert bench.main(["--from-json", str(tmp_path / "b.json"), "--md", str(tmp_path / "again.md")]) == 0
    def table_lines(md):
        return [line for line in md.splitlines() if line.startswith("|")]

    assert table_lines((tmp_path / "again.md").read_text()) == table_lines(text)


def test_import_error_names_the_missing_package(tmp_path, monkeypatch):
    (tmp_path / "broken_bench_mod.py").write_text("import not_a_real_package_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    ep = md.EntryPoint(name="trnfft", value="broken_bench_mod", group=bench.ENTRY_POINT_GROUP)
    monkeypatch.setattr(bench.md, "entry_points", lambda group: [ep] if group == bench.ENTRY_POINT_GROUP else [])
    mods, errors = bench.case_modules(["trnfft", "trnblas"])
    assert mods == {} and "'not_a_real_package_xyz'" in errors["trnfft"]  # trnblas: no entry point, absent
    sys.modules.pop("broken_bench_mod", None)


def test_progress_fits_where_it_goes():
    log = io.StringIO()
    p = Progress(3, log, tty=False)
    for k in ("a", "b", "c"):
        p.step(k)
    p.done()
    assert log.getvalue() == "[1/3] a\n[2/3] b\n[3/3] c\n"  # plain lines: nothing overprints in a log
    term = io.StringIO()
    p = Progress(2, term, tty=True)
    p.step("first")
    p.step("second")
    p.done()
    s = term.getvalue()
    assert s.startswith("\r[") and "ETA" in s and "\n" not in s and s.endswith("\r")


def test_op_and_size_and_targets():
    assert bench._op_and_size("fft 64x1024 complex64") == ("fft complex64", 65536.0)
    assert bench._op_and_size("gemm 256^3 float32") == ("gemm float32", 256.0 ** 3)
    assert bench._op_and_size("einsum ao->mo") == ("einsum ao->mo", None)
    assert bench.target_for(200e-6) == 1.1
    assert bench.target_for(10e-6) == pytest.approx(1.2 + 0.1)


def test_rows_interleave_and_rotate():
    calls = []
    impls = {n: (lambda n=n: calls.append(n)) for n in ("trnsci", "p1", "p2")}
    out = bench.time_row(impls, rounds=3, budget_s=0.0, pause_s=0.0, sample_s=0.0)
    assert set(out) == {"trnsci", "p1", "p2"} and all(len(v["rounds"]) == 3 for v in out.values())
    firsts = [c for c in calls[3:]][::3]  # after warm-ups, each sample is one call; 3 samples per impl per round
    assert calls[:3] == ["trnsci", "p1", "p2"] and firsts[:1] == ["trnsci"]
    order = []
    for c in calls[3:]:
        if not order or order[-1] != c:
            order.append(c)
    assert order == ["trnsci", "p1", "p2", "p1", "p2", "trnsci", "p2", "trnsci", "p1"]


def test_retarget_to_own_target_is_identity():
    """Re-modeling a trn1 profile for trn1 must give the emulator's own figures back."""
    from trnsci import nki

    if nki.SOURCE != "emulator":
        pytest.skip("needs the emulator")
    import torch

    import trnblas

    with trnblas.use_backend("simulator"), nki.capture() as runs:
        trnblas.gemm(1.0, torch.randn(130, 70), torch.randn(70, 90))
    prof = runs[0].profile
    t, util = bench._retarget(prof, "trn1")
    assert t == pytest.approx(prof.modeled_time_lower_s, rel=1e-12)
    assert util == pytest.approx(prof.tensor_engine_utilization(), rel=1e-12)
    t2, _ = bench._retarget(prof, "trn2")
    assert t2 > 0 and t2 != t


def test_unsteady_rows_are_retimed_and_the_steadiest_attempt_kept(monkeypatch):
    spreads = iter([3.0, 0.9, 0.2])
    calls = []

    def fake(impls, rounds, budget_s, pause_s):
        calls.append(1)
        s = next(spreads)
        return {n: {"median": 1.0, "spread": s, "rounds": [1.0]} for n in impls}

    monkeypatch.setattr(bench, "time_row", fake)
    t = bench._steadiest({"trnsci": None, "p": None}, 3, 0.0, 0.0)
    assert len(calls) == 3 and bench._spread(t) == 0.2
    calls.clear()
    spreads = iter([0.1])
    assert bench._spread(bench._steadiest({"trnsci": None}, 3, 0.0, 0.0)) == 0.1 and len(calls) == 1


def test_report_judges_the_compared_thread_count_too(tmp_path):
    from trnsci import _report

    def row(case, ratio, meets, unsteady=False):
        return {"library": "trnblas", "case": case, "op": case, "size": None, "trnsci_s": 2e-6 * ratio,
                "trnsci_spread": 0.01, "peers": {"torch.x": {"median_s": 2e-6, "spread": 0.01}},
                "best_peer": "torch.x", "best_peer_s": 2e-6, "ratio": ratio, "target": 1.7,
                "meets_target": meets, "unsteady": unsteady, "note": "a reason" if not meets else ""}

    two = {"machine": {"torch_threads": 2}, "rows": [row("a 1", 1.0, True), row("b 1", 2.5, False, True)]}
    doc = {"machine": {"torch_threads": 1}, "rows": [row("a 1", 1.0, True), row("b 1", 1.2, True)],
           "compare": [{"machine": two["machine"], "ratios": bench._ratios(two), "verdicts": bench._verdicts(two)}]}
    text = _report.markdown(doc, {}, tmp_path)
    assert "at 1 thread(s) 2 meet the target" in text and "At 2 threads 1 of 2 meet it, 1 do not (1 with" in text
    assert "| trnblas b 1 (2 threads) | 2.50x | torch.x |" in text  # listed with its reason
    assert "**2.50x (unsteady)**" in text and "| 1.00x |" in text


def test_a_case_target_replaces_the_generic_rule(monkeypatch):
    import types

    mod = types.SimpleNamespace(cases=lambda quick: [
        bench.Case("trnfft", "own 8", lambda: None, "p", lambda: None, target=0.6),
        bench.Case("trnfft", "generic 8", lambda: None, "p", lambda: None)])
    monkeypatch.setattr(bench, "case_modules", lambda libraries=None: ({"trnfft": mod}, {}))
    rows, _, _ = bench.collect(None, quick=True)
    monkeypatch.setattr(bench, "_steadiest", lambda impls, *a: {
        n: {"median": 1e-3 if n == "trnsci" else 1.5e-3, "spread": 0.0, "rounds": []} for n in impls})
    res = {r["case"]: r for r in bench.run(rows, echo=lambda *a: None)}
    assert res["own 8"]["target"] == 0.6 and not res["own 8"]["meets_target"]  # 0.67x > 0.6
    assert res["generic 8"]["target"] == 1.1 and res["generic 8"]["meets_target"]


def test_pause_outlasts_openblas_spin_only_when_torch_is_multithreaded():
    import torch

    old = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert bench.pause_for(0.3, quick=True) == bench.OPENBLAS_SPIN_S >= 0.2
        assert bench.pause_for(0.0, quick=True) == 0.0  # smoke runs do not sleep
        torch.set_num_threads(1)
        assert bench.pause_for(0.3, quick=True) < bench.OPENBLAS_SPIN_S
    finally:
        torch.set_num_threads(old)


def test_every_reason_is_short_and_links_its_measurement():
    """Issue 31: a row's reason in docs/benchmarks.md is one or two sentences with a link to the
    measurement behind it, a section of docs/perf-notes.md that exists."""
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "perf-notes.md").read_text()
    anchors = set(re.findall(r"\{#([\w-]+)\}", page))
    mods, errors = bench.case_modules()
    assert errors == {}
    notes = {c.note for name, m in mods.items() if name != "chem" for c in m.cases(quick=True) if c.note}
    assert notes
    for note in notes:
        links = re.findall(r"\]\(perf-notes\.md#([\w-]+)\)", note)
        assert len(links) == 1 and links[0] in anchors, note
        prose = re.sub(r"\s*\(\[measured\]\(.*?\)\)", "", note)
        assert len(prose) <= 240 and len(re.findall(r"[.;:] [A-Z]|\. ", prose.rstrip("."))) <= 1, note


def test_every_pointer_from_the_code_to_a_measurement_resolves():
    """Comments in the sources say what the code promises and point to the measurement behind a rule
    (``docs/perf-notes.md#anchor``); every such pointer names a section that exists."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    anchors = set(re.findall(r"\{#([\w-]+)\}", (root / "docs" / "perf-notes.md").read_text()))
    pointers = [(p.name, a) for p in (root / "packages").glob("*/src/**/*.py")
                for a in re.findall(r"perf-notes\.md#([\w-]+)", p.read_text())]
    assert len(pointers) >= 5
    assert [(f, a) for f, a in pointers if a not in anchors] == []
