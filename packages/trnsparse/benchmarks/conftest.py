"""Plain test runs (benchmarks disabled) deselect the benchmark-only cases (each bench module's ``benchmark_only``).

They are deselected at collection rather than skipped, so a test run's "skipped" count
only holds tests that could not run here; ``--benchmark-enable`` runs every case.
"""

from __future__ import annotations


def pytest_collection_modifyitems(config, items):
    disabled = config.getoption("benchmark_disable", default=False) and not config.getoption(
        "benchmark_enable", default=False)  # pytest-benchmark's rule (the root addopts pass --benchmark-disable)
    if not disabled:
        return
    keep, drop = [], []
    for item in items:
        fn = getattr(item.module, "benchmark_only", None) if item.fspath.basename.startswith("bench_") else None
        params = getattr(getattr(item, "callspec", None), "params", {})
        (drop if fn is not None and fn(item.originalname, params) else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
