"""trnsci.routes ``robust`` choices: a candidate whose slowest round stalled (a multi-threaded call
waiting for a busy core) is not chosen over the default, with a fake clock (no wall-clock races)."""

from __future__ import annotations

import pytest

from trnsci import routes


class StallClock:
    """Time moves only when a fake candidate runs: its cost, times ``stall`` on its ``at``-th call."""

    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def cost(self, seconds: float, stall: float = 1.0, at: int = -1):
        n = [0]

        def run():
            self.t += seconds * (stall if n[0] == at else 1.0)
            n[0] += 1
        return run


@pytest.fixture(autouse=True)
def _fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("TRNSCI_CALIBRATION_FILE", str(tmp_path / "cal.json"))
    monkeypatch.delenv("TRNSCI_ROUTES", raising=False)
    routes.forget()
    yield
    routes.forget()


def test_pick_with_worst_rounds():
    t, b = {"d": 1.0, "o": 0.5}, {"d": 0.9, "o": 0.4}
    assert routes.pick(t, "d", best=b) == "o"
    assert routes.pick(t, "d", best=b, worst={"d": 1.2, "o": 0.7}) == "o"
    assert routes.pick(t, "d", best=b, worst={"d": 1.2, "o": 30.0}) == "d"  # it stalled once: the default


def test_choose_robust_keeps_the_default_when_the_faster_candidate_stalled():
    # "fast" is 3x faster per call, but one of its 5 timed rounds (its 3rd call) took 40x its cost
    def cands(clk):
        return {"one": clk.cost(3e-3), "fast": clk.cost(1e-3, stall=40.0, at=3)}

    clk = StallClock()
    c = routes.choose("t.stall", ("a",), cands(clk), default="one", clock=clk, persist=False)
    assert c.route == "fast"  # median and best rounds alone: the stall goes unnoticed
    clk = StallClock()
    c = routes.choose("t.stall", ("b",), cands(clk), default="one", clock=clk, persist=False, robust=True)
    assert c.route == "one"
    # two calls per timed sample (2 ms each), one of them 40x: that round 20.5x the others
    assert c.spread["fast"] == pytest.approx(19.5)  # (max - min) / median: the stall is on record
    clk = StallClock()
    quiet = {"one": clk.cost(3e-3), "fast": clk.cost(1e-3)}
    assert routes.choose("t.stall", ("c",), quiet, default="one", clock=clk, persist=False,
                         robust=True).route == "fast"
