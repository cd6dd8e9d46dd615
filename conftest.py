"""Fixtures for every test in the repository: each starts from a clean backend state."""

from __future__ import annotations

import pytest

from trnsci import backend


@pytest.fixture(autouse=True)
def _clean_backend_env(monkeypatch, tmp_path):
    """No TRNSCI_*/TRN<LIB>_* variables from the caller's shell leak into a test, nor the user's
    calibration file (thresholds, measured routes): the default location is the test's own directory."""
    for key in ["TRNSCI_BACKEND", "TRNSCI_REQUIRE_NKI", "TRNSCI_CALIBRATION_FILE"] + [
        backend.env_var(lib) for lib in backend.LIBRARIES
    ]:
        monkeypatch.delenv(key, raising=False)
    # no timing in the suite: measured routes (trnsci.routes) take their default, untimed, and
    # nothing is written to the user's calibration file; route tests opt back in
    monkeypatch.setenv("TRNSCI_ROUTES", "estimate")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    for lib in (None, *backend.LIBRARIES):
        backend.reset_backend(lib)
    yield
    for lib in (None, *backend.LIBRARIES):
        backend.reset_backend(lib)


@pytest.fixture
def kernel_runs():
    """The test body runs under the ``simulator`` backend and must run an NKI kernel.

    Yields the list of :class:`trnsci.nki.KernelRun` (names, profiles); the
    test fails at teardown if no kernel ran (the torch path answered). See
    :func:`trnsci.testing.kernel_ran` for the context-manager form.
    """
    from trnsci.testing import kernel_ran

    with kernel_ran() as runs:
        yield runs


def pytest_collection_modifyitems(config, items):
    """Skip tests marked ``neuron`` where no NeuronCore with the Neuron SDK is present."""
    from trnsci import nki

    if nki.has_neuron_device():
        return
    skip = pytest.mark.skip(reason="needs a NeuronCore and the Neuron SDK (trnsci.nki.has_neuron_device() is False)")
    for item in items:
        if "neuron" in item.keywords:
            item.add_marker(skip)
