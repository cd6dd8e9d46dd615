"""docs/coverage.md is what :mod:`trnsci.coverage` generates from the code and the registry, and says true things."""

from pathlib import Path

import pytest

from trnsci import coverage

DOC = Path(__file__).resolve().parents[1] / "docs" / "coverage.md"


@pytest.fixture(scope="module")
def table():
    return coverage.coverage_table()


def test_committed_table_is_current(table):
    assert DOC.read_text() == table + "\n", (
        "docs/coverage.md is stale: regenerate with `python -m trnsci.coverage --write`")


def test_rows_follow_the_registry():
    rows = {r["name"]: r for r in coverage.coverage_rows("trnblas")}
    # a routine whose op has a kernel: its kernel is named
    assert rows["axpy"]["device"] and rows["axpy"]["kernels"] == ["axpby_kernel", "caxpby_kernel"]
    assert rows["trsv"]["kernels"] == ["trsm_kernel"]
    # a composition: trmm reaches the GEMM op through the host triangle
    assert "trnblas.gemm" in rows["trmm"]["device_ops"]
    # without a device path, a reason is always given
    for r in rows.values():
        assert r["device"] or r["note"], r["name"]
    assert not rows["rotg"]["device"] and "host" in rows["rotg"]["note"]


@pytest.mark.parametrize("lib", coverage.LIBRARIES)
def test_every_host_only_function_gives_its_reason(lib):
    """Issue 32: no public function of any library is host-only without the table saying why."""
    rows = coverage.coverage_rows(lib)
    assert rows, lib
    assert [r["name"] for r in rows if not (r["device"] or r["note"])] == []


def test_every_documented_exception_names_a_public_function():
    import importlib

    for lib, notes in coverage.EXCEPTIONS.items():
        public = set(importlib.import_module(lib).__all__)
        assert set(notes) <= public, (lib, sorted(set(notes) - public))


def test_readme_states_the_generated_figure(table):
    import re

    dev, total = re.search(r"\*\*(\d+) of (\d+) public functions have a device path", table).groups()
    readme = (DOC.parents[1] / "README.md").read_text()
    assert f"{dev} of their {total} public functions" in readme.replace("\n", " ")
