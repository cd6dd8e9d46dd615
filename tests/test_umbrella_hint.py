"""Without the umbrella distribution, what the core says to install names the suite's wheelhouse
(PyPI's ``trnsci`` is another project's), asks for ``[chem]`` only where PySCF is needed, and
``trnsci demo --distributed`` ends with that message and status 2 instead of a traceback."""

import pytest

from trnsci import demo, plugins


@pytest.fixture
def no_umbrella(monkeypatch):
    real = plugins.declared
    monkeypatch.setattr(plugins, "declared", lambda g: [] if g == "trnsci.workflows" else real(g))


def test_workflow_hint_names_the_wheelhouse(no_umbrella):
    with pytest.raises(ImportError) as exc:
        plugins.workflow("chem", "trnblas.chem.dfmp2")
    msg = str(exc.value)
    assert msg.startswith("trnblas.chem.dfmp2 runs the suite's 'chem' workflow"), msg
    assert "pip install 'trnsci[chem]' --find-links WHEELHOUSE" in msg and "docs/packaging.md" in msg, msg


def test_distributed_demo_without_umbrella_is_one_message(no_umbrella):
    lines = []
    assert demo.main(["--distributed", "--nproc", "2", "--what", "gemm"], echo=lines.append) == 2
    text = "\n".join(lines)
    assert "'distributed_demo' workflow" in text and "pip install trnsci --find-links WHEELHOUSE" in text, text
    assert "[chem]" not in text, text  # the distributed demo's GEMM/FFT parts need no PySCF
