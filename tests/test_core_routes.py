"""trnsci.routes: measured choice among candidates, with a fake clock (no wall-clock races)."""

from __future__ import annotations

import json

import pytest

from trnsci import dispatch, routes


class FakeClock:
    """A clock that moves only when a fake candidate 'runs' for its stated cost."""

    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def cost(self, seconds: float, calls: list | None = None, name: str = ""):
        def run():
            self.t += seconds
            if calls is not None:
                calls.append(name)
        return run


@pytest.fixture(autouse=True)
def _fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("TRNSCI_CALIBRATION_FILE", str(tmp_path / "cal.json"))
    monkeypatch.delenv("TRNSCI_ROUTES", raising=False)
    routes.forget()
    yield
    routes.forget()


def test_measure_picks_fastest_and_reports_times():
    clk = FakeClock()
    cands = {"torch": clk.cost(3e-3), "bluestein": clk.cost(1e-3), "scipy": clk.cost(2e-3)}
    c = routes.choose("t.fft", ("n=4099", "c128"), cands, default="torch", clock=clk)
    assert c.route == "bluestein" and c.origin == "measured"
    # every round times each candidate once: its median is exactly its cost
    assert c.times == pytest.approx({"torch": 3e-3, "bluestein": 1e-3, "scipy": 2e-3}, rel=1e-12)
    assert "bluestein 1,000.0 us" in str(c) and "threads=" in c.key


def test_margin_keeps_default_on_near_tie():
    clk = FakeClock()
    # 5 % faster is inside the 10 % margin: the obvious call stays
    c = routes.choose("t.tie", ("a",), {"torch": clk.cost(1.0e-3), "other": clk.cost(0.95e-3)},
                      default="torch", clock=clk)
    assert c.route == "torch"
    assert routes.pick({"torch": 1.0, "other": 0.89}, "torch") == "other"
    assert routes.pick({"other": 2.0, "x": 1.0}, "torch") == "x"  # default failed: fastest
    # a median win with a best round no better than the default's: the default stays
    assert routes.pick({"torch": 1.0, "other": 0.8}, "torch", best={"torch": 0.5, "other": 0.6}) == "torch"
    assert routes.pick({"torch": 1.0, "other": 0.8}, "torch", best={"torch": 0.9, "other": 0.6}) == "other"


def test_interleaved_rounds_and_failing_candidate_excluded():
    clk = FakeClock()
    calls: list[str] = []

    def broken():
        raise RuntimeError("cannot")

    cands = {"a": clk.cost(1e-3, calls, "a"), "b": clk.cost(1e-3, calls, "b"), "bad": broken}
    times, spread, best = routes.measure(cands, rounds=4, sample_s=1e-3, clock=clk)
    assert best == pytest.approx({"a": 1e-3, "b": 1e-3}) and set(times) == {"a", "b"}
    assert spread == pytest.approx({"a": 0.0, "b": 0.0}, abs=1e-9)
    # warm-ups, then rounds in rotating order: a b | b a | a b | b a
    assert calls == ["a", "b", "a", "b", "b", "a", "a", "b", "b", "a"]


def test_sample_repeats_fast_calls():
    clk = FakeClock()
    calls: list[str] = []
    times, _, _ = routes.measure({"x": clk.cost(1e-6, calls, "x")}, rounds=2, sample_s=1e-4, clock=clk)
    assert len(calls) == 1 + 2 * 100  # warm-up, then 100 calls per sample of 100 us
    assert times["x"] == pytest.approx(1e-6)


def test_estimate_mode_does_not_time(monkeypatch):
    def never():
        raise AssertionError("estimate mode must not run candidates")

    monkeypatch.setenv("TRNSCI_ROUTES", "estimate")
    c = routes.choose("t.est", ("a",), {"torch": never, "other": never}, default="torch")
    assert (c.route, c.origin, dict(c.times)) == ("torch", "estimate", {})
    assert routes.remembered() == {}
    monkeypatch.setenv("TRNSCI_ROUTES", "fastest")
    with pytest.raises(ValueError, match="TRNSCI_ROUTES"):
        routes.current_mode()
    with pytest.raises(ValueError, match="mode"):
        with routes.mode("nope"):
            pass


def test_persisted_second_process_does_not_remeasure(tmp_path):
    clk = FakeClock()
    first = routes.choose("t.persist", ("n=7919",), {"torch": clk.cost(2e-3), "scipy": clk.cost(1e-3)},
                          default="torch", clock=clk)
    doc = json.loads((tmp_path / "cal.json").read_text())
    assert doc["routes"][first.key]["route"] == "scipy"
    routes.forget()  # as a fresh process

    def never():
        raise AssertionError("re-measured")

    again = routes.choose("t.persist", ("n=7919",), {"torch": never, "scipy": never}, default="torch")
    assert again.route == "scipy" and again.origin.startswith("calibration:")
    assert again.times == pytest.approx(first.times)


def test_thread_count_is_part_of_key():
    import torch

    old = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        k1 = routes.route_key("f", ("a",))
        torch.set_num_threads(2)
        k2 = routes.route_key("f", ("a",))
    finally:
        torch.set_num_threads(old)
    assert k1 != k2 and k1.endswith("threads=1")


def test_calibrate_keeps_routes_and_routes_keep_thresholds(tmp_path):
    path = tmp_path / "cal.json"
    clk = FakeClock()
    routes.choose("t.keep", ("a",), {"torch": clk.cost(1.0), "b": clk.cost(0.1)}, default="torch", clock=clk)
    import trnblas  # noqa: F401 -- registers trnblas.gemm

    op = "trnblas.gemm"
    dispatch.write_calibration({op: 123.0}, path)
    doc = json.loads(path.read_text())
    assert doc["thresholds"] == {op: 123.0} and len(doc["routes"]) == 1
    routes.save({}, path)
    assert json.loads(path.read_text())["thresholds"] == {op: 123.0}


def test_malformed_file_is_named(tmp_path):
    path = tmp_path / "cal.json"
    path.write_text('{"routes": {"k": {"times": {}}}}')
    with pytest.raises(ValueError, match="cal.json"):
        routes.load(path)
    with pytest.raises(ValueError, match="default route"):
        routes.choose("t", ("a",), {"x": lambda: None}, default="torch")


def test_memo_never_outlives_the_choices_and_stays_bounded():
    memo = routes.Memo(limit=3)
    memo.remember(("a", 1), "torch")
    routes.forget()  # choices may have changed: the copies go too
    assert memo == {}
    memo.remember(("a", 1), "numpy")
    with routes.force("numpy"):
        assert memo == {}
    for i in range(3):
        memo.remember(i, "torch")
    assert memo.remember(3, "numpy") == "numpy" and memo == {3: "numpy"}  # full: emptied, then stored
