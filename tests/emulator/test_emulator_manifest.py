"""The emulator's nki / nl / nisa export exactly the NKI 0.6 names and signatures.

The reference is ``nki_0_6_manifest.json``, transcribed by hand from AWS's
stubs and docs (see its ``_about``), not generated from the emulator.
"""

import enum
import inspect
import json
import pathlib

import pytest

from trnsci.nki.emulator import nisa, nki, nl
from trnsci.nki.emulator.errors import NkiValidationError, RemovedAPIError

MANIFEST = json.loads((pathlib.Path(__file__).parent / "nki_0_6_manifest.json").read_text())


def _default(d):
    if isinstance(d, enum.Enum):
        return f"{type(d).__name__}.{d.name}"
    if d is Ellipsis:
        return "..."
    if isinstance(d, type):
        return d.__name__
    if isinstance(d, str):
        return json.dumps(d)
    if callable(d) and hasattr(d, "__name__"):
        return d.__name__
    return repr(d)


def _sig(fn):
    parts = []
    for p in inspect.signature(fn).parameters.values():
        parts.append(p.name if p.default is inspect.Parameter.empty else f"{p.name}={_default(p.default)}")
    return "(" + ", ".join(parts) + ")"


def _public(mod):
    return {n for n in dir(mod) if not n.startswith("_")}


def test_nisa_names_exactly_the_release():
    m = MANIFEST["nki.isa"]
    expected = set(m["functions"]) | set(m["classes"]) | set(m["constants"])
    assert _public(nisa) == expected


@pytest.mark.parametrize("name", sorted(MANIFEST["nki.isa"]["functions"]))
def test_nisa_signature(name):
    assert _sig(getattr(nisa, name)) == MANIFEST["nki.isa"]["functions"][name]


def test_nisa_enums_and_constants():
    for cls, members in MANIFEST["nki.isa"]["enum_members"].items():
        assert [e.name for e in getattr(nisa, cls)] == members
    assert nisa.tensor_engine is nisa.engine.tensor and nisa.unknown_engine is nisa.engine.unknown
    assert issubclass(nisa.NkiValidationError, Exception)


def test_nl_names_exactly_the_release():
    m = MANIFEST["nki.language"]
    expected = set(m["functions"]) | set(m["documented"]) | set(m["classes"]) | set(m["constants"])
    assert _public(nl) == expected


@pytest.mark.parametrize("name", sorted(MANIFEST["nki.language"]["functions"]))
def test_nl_signature_from_stub(name):
    assert _sig(getattr(nl, name)) == MANIFEST["nki.language"]["functions"][name]


@pytest.mark.parametrize(
    "name", sorted(k for k, v in MANIFEST["nki.language"]["documented"].items() if v["signature"])
)
def test_nl_signature_documented(name):
    assert _sig(getattr(nl, name)) == MANIFEST["nki.language"]["documented"][name]["signature"]


def test_tile_size_attributes():
    for a in MANIFEST["nki.language"]["tile_size_attributes"]:
        assert isinstance(getattr(nl.tile_size, a), int)
    assert nl.tile_size.pmax == 128 and nl.tile_size.gemm_moving_fmax == 512


def test_nki_top_level():
    assert _public(nki) == set(MANIFEST["nki"])
    assert nki.language is nl and nki.isa is nisa


def test_internals_not_exported():
    for name in ("Tensor", "fail", "onchip", "check_matmul", "check_partitions", "new_tile", "mem", "dt", "np"):
        assert not hasattr(nl, name), name
        assert not hasattr(nisa, name), name


@pytest.mark.parametrize(
    "name, replacement",
    [("arange", "nl.ds"), ("mgrid", "nl.ds"), ("par_dim", "partition dim"), ("load_transpose2d", "dma_transpose"),
     ("where", "select_reduce"), ("full", "nisa.memset"), ("cos", "sin")],
)
def test_removed_nl_names_name_the_replacement(name, replacement):
    with pytest.raises(RemovedAPIError, match=replacement):
        getattr(nl, name)
    assert not hasattr(nl, name)
    assert issubclass(RemovedAPIError, NkiValidationError)


def test_removed_nisa_names_name_the_replacement():
    with pytest.raises(RemovedAPIError, match="tensor_copy with src.ap"):
        nisa.tensor_copy_dynamic_src  # noqa: B018


def _fake_nki(monkeypatch, version):
    import sys
    import types

    mod = types.ModuleType("nki")
    if version is not None:
        mod.__version__ = version
    lang, isa = types.ModuleType("nki.language"), types.ModuleType("nki.isa")
    mod.language, mod.isa = lang, isa
    monkeypatch.setitem(sys.modules, "nki", mod)
    monkeypatch.setitem(sys.modules, "nki.language", lang)
    monkeypatch.setitem(sys.modules, "nki.isa", isa)
    return mod, lang, isa


def test_shim_takes_aws_nki_0_6(monkeypatch):
    import trnsci.nki as shim

    monkeypatch.delenv("TRNSCI_NKI", raising=False)
    mod, lang, isa = _fake_nki(monkeypatch, "0.6.0")
    assert shim._load_toolchain() == ("neuron", mod, lang, isa, None)


@pytest.mark.parametrize("version", ["0.5.1", None])
def test_shim_falls_back_to_emulator_for_older_nki(monkeypatch, version):
    import trnsci.nki as shim

    monkeypatch.delenv("TRNSCI_NKI", raising=False)
    _fake_nki(monkeypatch, version)
    with pytest.warns(RuntimeWarning, match="older than 0.6"):
        src, _, lang, isa, err = shim._load_toolchain()
    assert src == "emulator" and lang is nl and isa is nisa and err is None


def test_shim_never_imports_neuronxcc(monkeypatch):
    import importlib

    import trnsci.nki as shim

    real = importlib.import_module
    seen = []

    def spy(name, *a, **k):
        seen.append(name)
        return real(name, *a, **k)

    monkeypatch.setattr(shim.importlib, "import_module", spy)
    monkeypatch.delenv("TRNSCI_NKI", raising=False)
    shim._load_toolchain()
    assert "nki" in seen and not any(n.startswith("neuronxcc") for n in seen)
