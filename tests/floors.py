"""Walk the suite's import graph and report every edge that points up a floor.

Floors (docs/contributing.md): 1 the core (``trnsci-core``), 2 the six
libraries, 3 the umbrella's cross-library workflows (``trnsci.chem``,
``trnsci.chem_demo``). An import may point down, or stay inside its own
distribution; between libraries only along a declared dependency
(trnsolver on trnblas, trntensor on trnblas and trnsolver). Every ``import`` statement counts,
also the ones inside functions, since those run too.

    python tests/floors.py               the source tree
    python tests/floors.py SITE_PACKAGES an installed suite (the packaging test runs this in a fresh venv)

Prints ``no upward import`` and exits 0, or lists the edges and exits 1.
Standard library only, so it runs in any venv.

The same walk also reports every private name that crosses a distribution's
boundary (:func:`private_crossings`): a module that imports a name or module
whose dotted path has a part with a leading underscore from another
distribution (``from trnsci._x import y``, ``from trnblas._host import z``,
``from trnsci.validate import _helper``), or reads an underscore attribute of
something it imported from there (``validate._helper``, ``nki._runs``). Dunder
names (``__version__``) are public. Inside one distribution a private name
stays inside the package that holds it (tests/test_core_structure.py,
``test_no_private_name_crosses_a_package``).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

LIBRARIES = ("trnblas", "trnfft", "trnsparse", "trnsolver", "trnrand", "trntensor")
CORE, UMBRELLA = "trnsci-core", "trnsci"
FLOOR = {CORE: 1, **{lib: 2 for lib in LIBRARIES}, UMBRELLA: 3}
LATERAL = {"trnsolver": {"trnblas"}, "trntensor": {"trnblas", "trnsolver"}}
ROOT = Path(__file__).resolve().parent.parent


def sources(site: Path | None) -> tuple[dict[str, list[Path]], set[str]]:
    """``{dist: [py files]}`` and the umbrella's module names (``trnsci.chem``, ...)."""
    if site is None:
        umbrella_dir = ROOT / "trnsci"
        core_dir = ROOT / "packages" / CORE / "src" / "trnsci"
        lib_dirs = {lib: ROOT / "packages" / lib / "src" / lib for lib in LIBRARIES}
    else:
        umbrella_dir = core_dir = site / "trnsci"
        lib_dirs = {lib: site / lib for lib in LIBRARIES}
    umbrella_files = sorted(umbrella_dir.glob("*.py")) if site is None else _umbrella_files(site)
    umbrella_mods = {f"trnsci.{p.stem}" for p in umbrella_files}
    core_files = [p for p in sorted(core_dir.rglob("*.py")) if p not in umbrella_files]
    out = {CORE: core_files, UMBRELLA: umbrella_files}
    out.update({lib: sorted(d.rglob("*.py")) for lib, d in lib_dirs.items() if d.is_dir()})
    return out, umbrella_mods


def _umbrella_files(site: Path) -> list[Path]:
    """The ``.py`` files the umbrella distribution installed into ``site`` (from its RECORD)."""
    for info in site.glob("trnsci-*.dist-info"):  # the core's is trnsci_core-*.dist-info
        paths = [row.split(",")[0] for row in (info / "RECORD").read_text().splitlines()]
        return sorted(site / p for p in paths if p.startswith("trnsci/") and p.endswith(".py"))
    return []


def owner(module: str, umbrella_mods: set[str]) -> str | None:
    parts = module.split(".")
    if parts[0] == "trnsci":
        return UMBRELLA if ".".join(parts[:2]) in umbrella_mods else CORE
    return parts[0] if parts[0] in LIBRARIES else None


def imported(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module) for every absolute import; ``from X import y`` counts as ``X.y`` (y may be a module)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return out


def allowed(src: str, dst: str) -> bool:
    if src == dst or src == UMBRELLA:
        return True
    if FLOOR[dst] < FLOOR[src]:
        return True
    return FLOOR[dst] == FLOOR[src] == 2 and dst in LATERAL.get(src, set())


def upward_edges(site: Path | None = None) -> list[str]:
    files, umbrella_mods = sources(site)
    bad = []
    for dist, paths in files.items():
        for path in paths:
            for line, mod in imported(ast.parse(path.read_text(), str(path))):
                dst = owner(mod, umbrella_mods)
                if dst is not None and not allowed(dist, dst):
                    bad.append(f"{path}:{line}: {dist} (floor {FLOOR[dist]}) imports {mod} ({dst}, floor {FLOOR[dst]})")
    return bad


def _private(path: str) -> str | None:
    """The first part of a dotted path with a leading underscore (dunders are public), or None."""
    for part in path.split(".")[1:]:
        if part.startswith("_") and not (part.startswith("__") and part.endswith("__")):
            return part
    return None


def private_crossings(site: Path | None = None) -> list[str]:
    """Every import of, or attribute read on, another distribution's private name."""
    files, umbrella_mods = sources(site)
    bad = []
    for dist, paths in files.items():
        for path in paths:
            tree = ast.parse(path.read_text(), str(path))
            bound: dict[str, str] = {}  # local name -> dotted path of what it was imported as
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    pairs = [(a.name, a.asname or a.name.split(".")[0], a.name if a.asname else a.name.split(".")[0])
                             for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    pairs = [(f"{node.module}.{a.name}", a.asname or a.name, f"{node.module}.{a.name}")
                             for a in node.names]
                else:
                    continue
                for mod, name, target in pairs:
                    dst = owner(mod, umbrella_mods)
                    if dst is None or dst == dist:
                        continue
                    bound[name] = target
                    if _private(mod):
                        bad.append(f"{path}:{node.lineno}: {dist} imports {mod}, private to {dst}")
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound:
                    target = f"{bound[node.value.id]}.{node.attr}"
                    dst = owner(target, umbrella_mods)
                    if dst is not None and dst != dist and _private(target):
                        bad.append(f"{path}:{node.lineno}: {dist} reads {node.value.id}.{node.attr} "
                                   f"({target}, private to {dst})")
    return bad


def main(argv: list[str]) -> int:
    site = Path(argv[0]) if argv else None
    bad = upward_edges(site) + private_crossings(site)
    files, _ = sources(site)
    n = sum(len(v) for v in files.values())
    if bad:
        print("\n".join(bad))
        print(f"{len(bad)} upward import(s) or private crossing(s) in {n} files")
        return 1
    print(f"no upward import and no private crossing in {n} files")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
