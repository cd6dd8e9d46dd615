"""One shape in all six libraries (docs/contributing.md, "One op, top to bottom"), checked from the source.

Every library has its public family modules, an ``_nki/`` package whose modules mirror those families
(``_nki/<family>.py`` or ``_nki/<family>_<part>.py`` next to ``<family>.py``), ``_host.py`` for its
measured CPU routes and ``kernels/`` with one kernel per file. No library module takes part in an
import cycle, at import time or through imports inside functions (read with ``ast``); no ``_nki``
module imports after its first definition (a tail import closes a cycle); no private name crosses a
distribution (tests/floors.py), nor, inside the core or a library, the package that holds it (a private
module is imported by its siblings only; what ``_nki/`` and ``kernels/`` need is public or theirs); no
source file calls ``exec`` or ``eval``; every Op is a module-level ``NAME = Op(...)`` and every lowering
registers with the decorator; every kernel uses the core's tiling helper.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("floors", Path(__file__).with_name("floors.py"))
floors = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(floors)

ROOT = floors.ROOT
LIBRARIES = floors.LIBRARIES

#: The public family modules of each library: where its public functions and their Ops are written.
FAMILIES = {
    "trnblas": ("level1", "level2", "level3", "chem"),
    "trnfft": ("basic", "real", "stft", "complex"),
    "trnsparse": ("ops", "attention", "screening"),
    "trnsolver": ("factor", "eigen", "iterative"),
    "trnrand": ("distributions", "quasi", "philox", "threefry"),
    "trntensor": ("einsum", "chem", "tensorops"),
}
#: ``_nki`` modules that mirror no family: what the family modules of one library's ``_nki`` share.
NKI_SHARED = {"__init__", "common"}

#: Cycles closed only by imports inside functions (deferred to the call): none. A lower module that needs
#: something of a module built on it is handed it when that module is imported (trnsparse.formats'
#: ``_OPERATIONS``, trnrand.generator's ``_PROGRAM``, trntensor.plan's ``_ABOVE``).
DEFERRED_CYCLES: dict[str, list[list[str]]] = {}

#: Source files that may call exec/eval: none (the fast path is closures written in settled.py).
EXEC_ALLOWED: list[str] = []


def _src(lib: str) -> Path:
    return ROOT / "packages" / lib / "src" / lib


def _modules(lib: str) -> dict[str, Path]:
    """``{dotted module name: path}`` of every module of a library."""
    base = ROOT / "packages" / lib / "src"
    out = {}
    for p in sorted(_src(lib).rglob("*.py")):
        parts = list(p.relative_to(base).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = p
    return out


def _module_level(tree: ast.Module):
    """Every node run at import: module-level statements and what they hold, but no function or class body."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        yield node
        todo.extend(ast.iter_child_nodes(node))


def import_graph(lib: str, deferred: bool = False) -> dict[str, set[str]]:
    """Edges ``module -> library module it imports at import time`` (with ``deferred``, also inside
    functions); ``from pkg import name`` is an edge to ``pkg.name`` when that is a module, else to ``pkg``."""
    mods = _modules(lib)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        tree = ast.parse(path.read_text(), str(path))
        for node in (ast.walk(tree) if deferred else _module_level(tree)):
            if isinstance(node, ast.Import):
                graph[mod] |= {a.name for a in node.names if a.name in mods}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                for a in node.names:
                    target = f"{base}.{a.name}"
                    if target in mods:
                        graph[mod].add(target)
                    elif base in mods:
                        graph[mod].add(base)
        graph[mod].discard(mod)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


@pytest.mark.parametrize("lib", LIBRARIES)
def test_module_roles_are_present(lib):
    src = _src(lib)
    missing = [f"{f}.py" for f in FAMILIES[lib] if not (src / f"{f}.py").is_file()]
    missing += [p for p in ("_host.py", "_nki/__init__.py", "kernels/__init__.py") if not (src / p).is_file()]
    assert not missing, f"{lib} lacks {missing}"
    assert not (src / "_nki.py").exists(), f"{lib}: the NKI lowerings are the package _nki/, not _nki.py"
    assert not sorted(src.glob("_nki_*.py")), f"{lib}: NKI lowerings outside _nki/"
    assert [p.name for p in (src / "kernels").glob("*.py") if p.name != "__init__.py"], f"{lib}: no kernel"


@pytest.mark.parametrize("lib", LIBRARIES)
def test_nki_modules_mirror_the_public_families(lib):
    src = _src(lib)
    stray = []
    for p in sorted((src / "_nki").glob("*.py")):
        if p.stem in NKI_SHARED:
            continue
        family = p.stem if (src / f"{p.stem}.py").is_file() else p.stem.partition("_")[0]
        if not (src / f"{family}.py").is_file():
            stray.append(p.name)
    assert not stray, f"{lib}/_nki: {stray} mirror no public module of {lib}"
    registered = {p.stem for p in (src / "_nki").glob("*.py")}
    tree = ast.parse((src / "_nki" / "__init__.py").read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert registered - NKI_SHARED <= imported, f"{lib}/_nki/__init__.py does not import {registered - imported}"


@pytest.mark.parametrize("lib", LIBRARIES)
def test_nki_modules_say_what_they_hold_and_import_first(lib):
    for p in sorted((_src(lib) / "_nki").glob("*.py")):
        tree = ast.parse(p.read_text(), str(p))
        doc = ast.get_docstring(tree)
        assert doc, f"{p.name}: no module docstring"
        assert "every nki lowering" not in doc.lower() and "in one place" not in doc.lower(), \
            f"{lib}/_nki/{p.name}: its docstring claims every lowering"
        first_def = next((n.lineno for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))), None)
        late = [n.lineno for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
                and first_def is not None and n.lineno > first_def]
        assert not late, f"{lib}/_nki/{p.name}: import after the first definition (lines {late})"


@pytest.mark.parametrize("lib", LIBRARIES)
def test_no_import_cycle_among_a_librarys_modules(lib):
    assert cycles(import_graph(lib)) == []
    assert cycles(import_graph(lib, deferred=True)) == DEFERRED_CYCLES.get(lib, [])


def declaration_faults(tree: ast.Module) -> list[str]:
    """Where a module declares an Op or registers a lowering other than the one way (docs/contributing.md,
    "How a new library op is added"): an ``Op(...)`` call that is not a module-level ``NAME = Op(...)``
    (a factory, a loop), and an ``OP.lowering(...)`` that is not a decorator (a call, a loop)."""
    declared = {id(n.value) for n in tree.body if isinstance(n, ast.Assign) and len(n.targets) == 1
                and isinstance(n.targets[0], ast.Name) and n.targets[0].id.isupper()}
    decorators = {id(d) for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                  for d in n.decorator_list}
    faults = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        if isinstance(node.func, ast.Name) and node.func.id == "Op" and id(node) not in declared:
            faults.append(f"line {node.lineno}: Op(...) outside a module-level NAME = Op(...)")
        if (isinstance(node.func, ast.Attribute) and node.func.attr == "lowering" and node.args
                and isinstance(node.args[0], ast.Constant) and id(node) not in decorators):
            faults.append(f"line {node.lineno}: a lowering registered by a call, not a decorator")
    return faults


@pytest.mark.parametrize("lib", LIBRARIES)
def test_ops_and_lowerings_are_declared_one_way(lib):
    found = {}
    for mod, path in _modules(lib).items():
        faults = declaration_faults(ast.parse(path.read_text(), str(path)))
        if faults:
            found[mod] = faults
    assert found == {}


def test_the_declaration_scan_finds_planted_faults():
    tree = ast.parse("def f(n):\n    return Op(n, 'flops', 1)\nX = Op('a.x', 'flops', 1)\n"
                     "X.lowering('torch')(g)\n@X.lowering('nki')\ndef h():\n    pass\n")
    assert declaration_faults(tree) == ["line 2: Op(...) outside a module-level NAME = Op(...)",
                                        "line 4: a lowering registered by a call, not a decorator"]


def test_the_cycle_finder_finds_a_planted_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_private_name_crosses_a_distribution():
    assert floors.private_crossings() == []


#: The registries a lower module is handed what it needs in, by modules built on it (docs/contributing.md,
#: "Library layout"): written from wherever those modules live, also from ``_nki/``.
HANDED_UP = {"trnsparse.formats._OPERATIONS", "trntensor.plan._ABOVE", "trnrand.generator._PROGRAM"}

#: Private names that still cross a package inside one distribution, ``(importing module, private module
#: or name)``, and why; the test fails on any other crossing and on an entry that no longer crosses.
PRIVATE_CROSSINGS_LEFT: dict[tuple[str, str], str] = {}


def _source_modules(src: Path, top: str) -> dict[str, Path]:
    """``{dotted name: path}`` of every module of the package ``top`` under ``src``."""
    out = {}
    for p in sorted((src / top).rglob("*.py")):
        parts = list(p.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = p
    return out


def _is_private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _nki_mirror(importer: str, holder: str) -> bool:
    """``importer`` is the NKI half (``<lib>._nki.<family>[_<part>]``) of the family module ``holder``."""
    parts = importer.split(".")
    if len(parts) != 3 or parts[1] != "_nki":
        return False
    stem = parts[2]
    return holder in (f"{parts[0]}.{stem}", f"{parts[0]}.{stem.partition('_')[0]}")


def _crossing(mod: str, package: str, target: str, mods: dict[str, Path]) -> str | None:
    """The private module or name of ``target`` that ``mod`` (in ``package``) may not use, or None."""
    parts = target.split(".")
    for i in range(1, len(parts)):
        holder = ".".join(parts[:i])
        if holder not in mods:  # an attribute of a class or object: not a module-level name
            return None
        if not _is_private(parts[i]):
            continue
        thing = ".".join(parts[: i + 1])
        home = holder if mods[holder].name == "__init__.py" else holder.rpartition(".")[0]
        if package == home or package == thing or package.startswith(thing + ".") or mod == thing:
            continue
        if thing in HANDED_UP or (thing not in mods and _nki_mirror(mod, holder)):
            continue
        return thing
    return None


def package_crossings(mods: dict[str, Path]) -> list[tuple[str, str, int]]:
    """``(importing module, private module or name, line)`` for every import of, or attribute read on, a
    private module or module-level name from outside the package that holds it.

    A private module (``_x.py``, ``_x/``) belongs to the package it sits in; a private module-level name
    to the package of its module. Modules of that package use it, and so does what lies inside the private
    module itself (``trnblas._nki.level3`` imports ``trnblas._nki.level1``). Allowed besides: an NKI
    lowering module ``<lib>._nki.<family>[_<part>]`` uses the private names of the family module
    ``<lib>.<family>`` it lowers (the torch half of the same Ops: shared helpers), and modules write the
    registries of ``HANDED_UP``. Attributes of classes (``CSRMatrix._make``) are not module-level names and
    are not checked. Imports inside functions count (they run too); relative imports are resolved."""
    bad = []
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        bound: dict[str, str] = {}
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                # ``import a.b`` binds ``a``; ``import a.b as m`` binds ``m`` to ``a.b``
                pairs = [(a.name, a.asname) if a.asname else (a.name.split(".")[0],) * 2 for a in node.names]
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                pairs = [(f"{base}.{a.name}", a.asname or a.name) for a in node.names]
                targets = [t for t, _ in pairs]
            else:
                continue
            for target, name in pairs:
                bound[name] = target
            for target in targets:
                thing = _crossing(mod, package, target, mods)
                if thing:
                    bad.append((mod, thing, node.lineno))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound:
                thing = _crossing(mod, package, f"{bound[node.value.id]}.{node.attr}", mods)
                if thing:
                    bad.append((mod, thing, node.lineno))
    return bad


def _all_package_crossings() -> list[tuple[str, str, int]]:
    core = _source_modules(ROOT / "packages" / floors.CORE / "src", "trnsci")
    found = package_crossings(core)
    for lib in LIBRARIES:
        found += package_crossings(_source_modules(ROOT / "packages" / lib / "src", lib))
    return found


def test_no_private_name_crosses_a_package():
    found = {}
    for mod, thing, line in _all_package_crossings():
        found.setdefault((mod, thing), []).append(line)
    new = {k: v for k, v in found.items() if k not in PRIVATE_CROSSINGS_LEFT}
    assert new == {}, "private modules/names used outside their package (make them public or move them)"
    gone = set(PRIVATE_CROSSINGS_LEFT) - set(found)
    assert not gone, f"no longer crossing, drop from PRIVATE_CROSSINGS_LEFT: {sorted(gone)}"


def test_the_package_crossing_scan_finds_planted_crossings(tmp_path):
    """Planted crossings are found (a private module from a subpackage, from the parent into a private
    subpackage's private module, a private name by attribute, a relative import); what the rule allows is
    not (siblings, inside a private package, the NKI half of a family, a handed-up registry, a class's
    private attribute)."""
    files = {
        "lib/__init__.py": "from lib import _nki\n",
        "lib/_algo.py": "def _helper():\n    pass\nTABLE = 1\n",
        "lib/fam.py": "from lib import _algo\nfrom lib._algo import _helper\n_algo.TABLE\n"
                      "class K:\n    @classmethod\n    def _make(cls):\n        pass\n"
                      "def _fam_torch():\n    pass\n_REG = {}\n",
        "lib/plan.py": "_ABOVE = {}\n",
        "lib/_nki/__init__.py": "from lib._nki import fam, fam_part\n",
        "lib/_nki/_kit.py": "X = 1\n",
        "lib/_nki/fam.py": "from lib.fam import K, _fam_torch\nfrom lib import plan\nfrom lib._nki import _kit\n"
                           "K._make()\nplan._ABOVE['x'] = 1\n"
                           "from lib import _algo\n",  # crossing 1: the parent's private module
        "lib/_nki/fam_part.py": "from ..fam import _fam_torch\n"
                                "def f():\n    from .. import _algo as A\n    return A.TABLE\n",  # crossing 2
        "lib/kernels/__init__.py": "",
        "lib/kernels/k.py": "import lib.fam as F\nF._REG\n",  # crossing 3: a private name by attribute
        "lib/other.py": "from lib._nki._kit import X\n",  # crossing 4: into a private package's private module
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    HANDED_UP.add("lib.plan._ABOVE")
    try:
        found = sorted({(m, t) for m, t, _ in package_crossings(_source_modules(tmp_path, "lib"))})
    finally:
        HANDED_UP.discard("lib.plan._ABOVE")
    assert found == [("lib._nki.fam", "lib._algo"), ("lib._nki.fam_part", "lib._algo"),
                     ("lib.kernels.k", "lib.fam._REG"), ("lib.other", "lib._nki._kit")], found


def _exec_calls(path: Path) -> list[int]:
    calls = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            f = node.func
            if (isinstance(f, ast.Name) and f.id in ("exec", "eval")) or (
                    isinstance(f, ast.Attribute) and f.attr in ("exec", "eval")
                    and isinstance(f.value, ast.Name) and f.value.id == "builtins"):
                calls.append(node.lineno)
    return calls


def test_no_exec_or_eval_in_the_sources():
    found = {}
    for path in sorted((ROOT / "packages").glob("*/src/**/*.py")):
        rel = path.relative_to(ROOT).as_posix()
        lines = _exec_calls(path)
        if lines and rel not in EXEC_ALLOWED:
            found[rel] = lines
    assert found == {}


def test_the_exec_scan_finds_a_planted_call(tmp_path):
    p = tmp_path / "m.py"
    p.write_text("import builtins\nexec('x = 1')\nbuiltins.eval('1')\nmodel.eval()\n")
    assert _exec_calls(p) == [2, 3]


# ------------------------------------------------------------------ one kernel per file, named <file stem>_kernel

KERNEL_FILES = sorted(p for p in ROOT.glob("packages/*/src/*/kernels/*.py") if p.name != "__init__.py")


def _is_jit(decorator: ast.expr) -> bool:
    """``@nki.jit``, ``@jit`` or either called with options (``@nki.jit(mode=...)``)."""
    d = decorator.func if isinstance(decorator, ast.Call) else decorator
    return (isinstance(d, ast.Attribute) and d.attr == "jit") or (isinstance(d, ast.Name) and d.id == "jit")


def kernel_file_faults(path: Path) -> list[str]:
    """What breaks "one kernel per file, named for it": a kernel file defines exactly one ``@nki.jit`` function
    and its name is ``<file stem>_kernel``, so a kernel name read in a Plan, ``capture()`` or counters is its
    file. A private jit function (``_name``: a sub-kernel the kernel calls, launched from nowhere else) is
    part of its file's kernel, not a second one, and is left out. The closed form of its counters is
    ``<file stem>_counts`` (other ``*_counts`` helpers may sit beside it)."""
    tree = ast.parse(path.read_text(), str(path))
    jits = [n.name for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(map(_is_jit, n.decorator_list))]
    public = [name for name in jits if not name.startswith("_")]
    want = f"{path.stem}_kernel"
    if len(public) != 1:
        return [f"{path.name}: {len(public)} kernels {public}, not one"]
    faults = [] if public == [want] else [f"{path.name}: kernel {public[0]}, not {want}"]
    counts = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    if f"{path.stem}_counts" not in counts:
        faults.append(f"{path.name}: no {path.stem}_counts (the kernel's counters in closed form)")
    return faults


@pytest.mark.parametrize("path", KERNEL_FILES, ids=lambda p: f"{p.parts[-3]}/{p.name}")
def test_one_kernel_per_file_named_for_the_file(path):
    assert kernel_file_faults(path) == []


def test_the_kernel_file_scan_sees_every_library():
    # the rule above must see every library's kernels (a moved tree would make it vacuous)
    assert {p.parts[-3] for p in KERNEL_FILES} == set(LIBRARIES)
    assert len(KERNEL_FILES) >= 60


def test_the_kernel_file_scan_finds_planted_faults(tmp_path):
    head = "from trnsci.nki import nki\n\n"
    cases = {
        "axpy.py": ("@nki.jit\ndef axpy_kernel(x):\n    return x\n\ndef axpy_counts(n):\n    return {}\n", []),
        # a private sub-kernel is the file's own, and a plain helper no kernel
        "scan.py": ("@nki.jit\ndef _sweep(x):\n    return x\n\n@nki.jit\ndef scan_kernel(x):\n    return _sweep(x)\n\n"
                    "def scan_counts(n):\n    return {}\n", []),
        "fft_pow2.py": ("@nki.jit\ndef stockham_kernel(x):\n    return x\n\ndef stockham_counts(n):\n    return {}\n",
                        ["fft_pow2.py: kernel stockham_kernel, not fft_pow2_kernel",
                         "fft_pow2.py: no fft_pow2_counts (the kernel's counters in closed form)"]),
        "threefry.py": ("@nki.jit\ndef threefry_kernel(x):\n    return x\n\n@nki.jit(mode='baremetal')\n"
                        "def threefry_block_kernel(x):\n    return x\n",
                        ["threefry.py: 2 kernels ['threefry_kernel', 'threefry_block_kernel'], not one"]),
        "helpers.py": ("def helpers_kernel(x):\n    return x\n", ["helpers.py: 0 kernels [], not one"]),
    }
    for name, (body, want) in cases.items():
        (tmp_path / name).write_text(head + body)
        assert kernel_file_faults(tmp_path / name) == want, name


# Every kernel on the core's tiling helper, with Dimensions and Pseudocode: tests/test_core_tiling.py
# (test_core_tiling_kernel_files), which names the two kernels whose tiles come from elsewhere and why.
