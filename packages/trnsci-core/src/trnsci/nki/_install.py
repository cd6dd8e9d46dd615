"""Run unmodified NKI 0.6 kernel files on the emulator: ``import nki`` resolves to it.

:func:`install_as_nki` registers the emulator under AWS's module names in
``sys.modules`` -- ``nki``, ``nki.language``, ``nki.isa``,
``nki.isa.constants``, ``nki.typing``, ``nki.dtype`` (also
``nki.language.dtypes``) and ``nki.collectives`` -- so a kernel file written
for AWS's toolchain (``import nki``, ``import nki.language as nl``,
``import nki.isa as nisa``) imports and runs on the CPU.  It does nothing
when AWS's NKI >= 0.6 is what the ``trnsci.nki`` shim is using, unless
``force=True``.  :func:`uninstall_nki` puts back whatever those names held
before.

``python -m trnsci.nki kernel.py [args...]`` installs it and runs the file
as ``__main__`` (see :mod:`trnsci.nki.__main__`).
"""

from __future__ import annotations

import sys
import types

NAMES = ("nki", "nki.language", "nki.language.dtypes", "nki.isa", "nki.isa.constants", "nki.typing", "nki.dtype",
         "nki.collectives")
_saved: dict[str, object] | None = None


def _package():
    from trnsci.nki import emulator
    from trnsci.nki.emulator import extras

    pkg = types.ModuleType("nki", "NKI 0.6/0.7 as emulated by trnsci.nki.emulator (installed by install_as_nki)")
    pkg.__path__ = []  # a package, so "import nki.x" consults sys.modules
    pkg.__version__ = emulator.NKI_VERSION
    pkg.__trnsci_emulator__ = True  # the trnsci.nki shim must not mistake this for AWS's package
    pkg.jit = emulator.nki.jit
    pkg.simulate = emulator.nki.simulate
    pkg.language, pkg.isa = emulator.nl, emulator.nisa
    pkg.typing, pkg.dtype, pkg.collectives = extras.typing, extras.dtype, extras.collectives
    return {
        "nki": pkg,
        "nki.language": emulator.nl,
        "nki.language.dtypes": extras.dtype,
        "nki.isa": emulator.nisa,
        "nki.isa.constants": extras.isa_constants,
        "nki.typing": extras.typing,
        "nki.dtype": extras.dtype,
        "nki.collectives": extras.collectives,
    }


def install_as_nki(force: bool = False):
    """Make ``import nki`` (and its submodules) the emulator; return the ``nki`` module now in use.

    Parameters
    ----------
    force : bool
        Install even when the ``trnsci.nki`` shim is using AWS's NKI >= 0.6
        (by default AWS's package is left alone and returned).
    """
    global _saved
    from trnsci import nki as shim

    if not isinstance(force, bool):
        raise TypeError(f"force must be a bool, got {type(force).__name__}")
    if shim.SOURCE == "neuron" and not force:
        return shim.nki
    if shim.EMULATOR_ERROR is not None:
        raise RuntimeError(f"NKI emulator not available: {shim.EMULATOR_ERROR}")
    mods = _package()
    if _saved is None:
        _saved = {n: sys.modules.get(n) for n in NAMES}
    sys.modules.update(mods)
    # in AWS's package these are submodule attributes too (``from nki.isa import constants``)
    mods["nki.isa"].constants = mods["nki.isa.constants"]
    mods["nki.language"].dtypes = mods["nki.language.dtypes"]
    return mods["nki"]


def uninstall_nki() -> None:
    """Undo :func:`install_as_nki`: the ``nki*`` module names hold what they held before."""
    global _saved
    if _saved is None:
        return
    from trnsci.nki.emulator import nisa, nl

    for mod, attr in ((nisa, "constants"), (nl, "dtypes")):
        mod.__dict__.pop(attr, None)
    for n, m in _saved.items():
        if m is None:
            sys.modules.pop(n, None)
        else:
            sys.modules[n] = m
    _saved = None
