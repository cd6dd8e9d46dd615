"""trnsci.backend: names, scopes, precedence, threads, environment."""

from __future__ import annotations

import asyncio
import threading

import pytest

import trnblas
import trnfft
import trnsci
from trnsci import backend


def test_default_is_auto():
    assert trnsci.get_backend() == "auto"
    assert backend.resolve("trnblas") == backend.Setting("auto", "default")


@pytest.mark.parametrize("name,canon", [("torch", "torch"), ("pytorch", "torch"), ("PyTorch", "torch"),
                                        ("simulator", "simulator"), ("nki", "nki"), ("auto", "auto")])
def test_names_and_alias(name, canon):
    trnsci.set_backend(name)
    assert trnsci.get_backend() == canon


def test_bad_name_lists_valid_ones():
    with pytest.raises(ValueError) as err:
        trnsci.set_backend("cuda")
    msg = str(err.value)
    assert "'cuda'" in msg
    for valid in ("auto", "torch", "nki", "simulator", "pytorch"):
        assert repr(valid) in msg


def test_bad_type_and_bad_library():
    with pytest.raises(TypeError, match="must be a str"):
        trnsci.set_backend(3)
    with pytest.raises(ValueError, match="library must be one of"):
        trnsci.set_backend("torch", library="trncufft")
    with pytest.raises(ValueError, match="Unknown backend"):
        with trnsci.use_backend("gpu"):
            pass


def test_precedence_with_library_suite_env_default(monkeypatch):
    assert backend.resolve("trnblas").origin == "default"
    monkeypatch.setenv("TRNSCI_BACKEND", "simulator")
    assert backend.resolve("trnblas") == backend.Setting("simulator", "env:TRNSCI_BACKEND")
    monkeypatch.setenv("TRNBLAS_BACKEND", "pytorch")
    assert backend.resolve("trnblas") == backend.Setting("torch", "env:TRNBLAS_BACKEND")
    assert backend.resolve("trnfft").origin == "env:TRNSCI_BACKEND"  # library env is per library
    trnsci.set_backend("nki")  # suite API beats any env
    assert backend.resolve("trnblas") == backend.Setting("nki", "api")
    trnblas.set_backend("simulator")  # library API beats suite API
    assert trnblas.get_backend() == "simulator"
    assert trnfft.get_backend() == "nki"  # ... and only for that library
    with trnsci.use_backend("torch"):  # a block beats both
        assert trnblas.get_backend() == "torch"
        assert trnfft.get_backend() == "torch"
        with trnblas.use_backend("auto"):  # innermost block wins, only its library
            assert trnblas.get_backend() == "auto"
            assert trnfft.get_backend() == "torch"
        assert backend.resolve("trnblas").origin == "with"
    assert trnblas.get_backend() == "simulator"


def test_library_setting_does_not_change_suite():
    trnblas.set_backend("torch")
    assert trnsci.get_backend() == "auto"
    assert trnfft.get_backend() == "auto"


def test_with_restores_on_exception():
    trnsci.set_backend("simulator")
    with pytest.raises(KeyError):
        with trnsci.use_backend("torch"):
            assert trnsci.get_backend() == "torch"
            raise KeyError("boom")
    assert trnsci.get_backend() == "simulator"


def test_bad_env_value_names_the_variable(monkeypatch):
    monkeypatch.setenv("TRNBLAS_BACKEND", "cuda")
    trnsci.get_backend()  # the suite is unaffected
    with pytest.raises(ValueError, match="TRNBLAS_BACKEND"):
        trnblas.get_backend()


def test_threads_do_not_leak():
    """Two threads set different backends; each sees only its own, main sees neither."""
    barrier = threading.Barrier(2)
    seen = {}

    def worker(name):
        trnsci.set_backend(name)
        trnblas.set_backend(name)
        barrier.wait()  # both have set before either reads
        seen[name] = (trnsci.get_backend(), trnblas.get_backend())

    threads = [threading.Thread(target=worker, args=(n,)) for n in ("torch", "simulator")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"torch": ("torch", "torch"), "simulator": ("simulator", "simulator")}
    assert trnsci.get_backend() == "auto"
    assert trnblas.get_backend() == "auto"


def test_asyncio_tasks_isolated():
    async def task(name, delay):
        with trnsci.use_backend(name):
            await asyncio.sleep(delay)
            return trnsci.get_backend()

    async def main():
        return await asyncio.gather(task("torch", 0.02), task("simulator", 0.01))

    assert asyncio.run(main()) == ["torch", "simulator"]


def test_bound_functions_named_for_library():
    assert trnblas.set_backend.__name__ == "set_backend"
    assert "trnblas" in trnblas.get_backend.__doc__
