"""What the core finds on the floors above it: entry points, never imports.

The core (floor 1) must not import a library (floor 2) or the umbrella's
workflows (floor 3). Where it needs something from them -- the libraries
themselves for ``trnsci info``, their demo and bench cases, the DF-MP2
workflow -- the distribution that provides it declares an entry point in one
of these groups, and the core loads what is installed:

``trnsci.libraries``
    ``<lib> = "<lib>"``: the library's top-level package (importing it
    registers its ops).
``trnsci.demo``
    ``<name> = "<module>"``: a module with ``kernel_cases()`` (a library's
    NKI kernel cases) and/or ``add_arguments(parser)`` + ``run(args, echo)``
    (a demo part, such as the umbrella's DF-MP2 table).
``trnsci.bench``
    ``<lib> = "<module>"``: a module with the library's benchmark cases.
``trnsci.workflows``
    ``<name> = "<module>"``: cross-library workflows a library may hand a
    call to (``trnblas.chem.dfmp2`` -> the umbrella's ``trnsci.chem``).

A module that is declared but fails to import is reported with the reason
(the missing package's name), not skipped in silence.
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
from dataclasses import dataclass
from types import ModuleType

GROUPS = ("trnsci.libraries", "trnsci.demo", "trnsci.bench", "trnsci.workflows")

# The order the libraries are listed in everywhere (info, demo, bench).
_ORDER = ("trnblas", "trnfft", "trnsparse", "trnsolver", "trnrand", "trntensor")


@dataclass(frozen=True)
class Plugin:
    """One declared entry point: ``module`` once loaded, else ``error`` says why not."""

    name: str
    value: str
    dist: str
    module: ModuleType | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.module is not None


def _missing(exc: BaseException) -> str:
    """A one-line reason naming the package to install when an import failed for a missing one."""
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        top = exc.name.split(".")[0]
        hint = {"pyscf": "trnsci[chem]", "sklearn": "scikit-learn"}.get(top, top)
        return f"needs the package {top!r}, which is not installed (pip install {hint})"
    return f"{type(exc).__name__}: {exc}"


def declared(group: str) -> list[md.EntryPoint]:
    """The entry points of ``group`` in every installed distribution, libraries in suite order first."""
    if group not in GROUPS:
        raise ValueError(f"group must be one of {', '.join(GROUPS)}, got {group!r}")
    eps = {ep.name: ep for ep in md.entry_points(group=group)}
    first = [eps.pop(n) for n in _ORDER if n in eps]
    return first + [eps[n] for n in sorted(eps)]


def load(group: str) -> list[Plugin]:
    """Import every module declared in ``group``; failures are kept with their reason."""
    out = []
    for ep in declared(group):
        dist = ep.dist.name if ep.dist is not None else "?"
        try:
            mod = importlib.import_module(ep.value.split(":")[0])
        except Exception as exc:  # a broken plugin is reported, and must not hide the others
            out.append(Plugin(ep.name, ep.value, dist, error=_missing(exc)))
        else:
            out.append(Plugin(ep.name, ep.value, dist, module=mod))
    return out


def workflow(name: str, what: str) -> ModuleType:
    """The module of workflow ``name`` (group ``trnsci.workflows``), or an ImportError saying what to install.

    ``what`` names the caller for the message (``"trnblas.chem.dfmp2"``).
    """
    for ep in declared("trnsci.workflows"):
        if ep.name == name:
            try:
                return importlib.import_module(ep.value.split(":")[0])
            except ImportError as exc:
                raise ImportError(f"{what}: the {name!r} workflow is installed but {_missing(exc)}") from exc
    raise ImportError(f"{what} runs the suite's {name!r} workflow, which the umbrella distribution ships: "
                      + umbrella_hint("trnsci[chem]" if name == "chem" else "trnsci"))


def umbrella_hint(requirement: str = "trnsci") -> str:
    """How to install the umbrella when it is absent: from the suite's wheelhouse, never PyPI alone.

    PyPI's ``trnsci`` is another project's distribution; a bare ``pip install trnsci`` would fetch it.
    """
    req = f"'{requirement}'" if "[" in requirement else requirement
    return (f"pip install {req} --find-links WHEELHOUSE (the suite's wheels, e.g. the dist/ of "
            "`bash tools/dev.sh wheels`; PyPI's 'trnsci' is another project: docs/packaging.md)")
