"""Every docstring example in trnsci and its libraries runs, so the user's manual cannot rot.

Collection is generic: each installed library package (``trnsci`` and the
six in :data:`trnsci.backend.LIBRARIES`) is walked module by module, and
every docstring with ``>>>`` examples defined in a module -- the module's
own, its functions', classes' and methods' -- becomes one test. A new
library or function is picked up without touching this file. Skipped: the
``__main__`` entry points (importing them runs the CLI) and the emulator's
internals (``trnsci.nki.emulator``, documented and tested in
``tests/emulator``).
"""

from __future__ import annotations

import doctest
import importlib
import io
import pkgutil

import pytest

from trnsci import backend

SKIP_MODULES = ("trnsci.nki.emulator",)
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _modules(lib: str):
    try:
        pkg = importlib.import_module(lib)
    except ImportError:
        return []
    mods = [pkg]
    for info in pkgutil.walk_packages(getattr(pkg, "__path__", []), lib + "."):
        name = info.name
        if name.rsplit(".", 1)[-1] == "__main__" or name.startswith(SKIP_MODULES):
            continue
        mods.append(importlib.import_module(name))
    return mods


def _doctests():
    finder = doctest.DocTestFinder(exclude_empty=True)
    seen = {}
    for lib in ("trnsci", *backend.LIBRARIES):
        for mod in _modules(lib):
            for test in finder.find(mod, mod.__name__):
                if test.examples and test.name not in seen:
                    seen[test.name] = test
    return sorted(seen.values(), key=lambda t: t.name)


DOCTESTS = _doctests()


def test_the_manual_has_examples():
    names = {t.name for t in DOCTESTS}
    for expected in ("trnblas.level3_gemm.gemm", "trnblas.level1.nrm2", "trnsci.dispatch.Op", "trnsci.testing"):
        assert expected in names, expected


@pytest.mark.parametrize("test", DOCTESTS, ids=[t.name for t in DOCTESTS])
def test_docstring_examples(test):
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    out = io.StringIO()
    test.globs = dict(test.globs)  # a fresh namespace per run
    result = runner.run(test, out=out.write, clear_globs=True)
    assert result.failed == 0, out.getvalue()
