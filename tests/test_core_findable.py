"""Five places, at most four files, found by name (issue 31, "one shape"; docs/contributing.md, "One op, top
to bottom").

Every public function of the six libraries is read off the running code, not off a list: it is called once
under backend ``"simulator"`` with the small valid arguments of tests/test_core_plan_call.py (the bad-input
sweep's enumeration and base calls), while :class:`trnsci.dispatch.Op` and :func:`trnsci.nki.run` are watched.
The five places of the function are then the source files of

1. the public function (``inspect.getsourcefile`` of the unwrapped function);
2. the backend decision: each Op the function itself calls (reached while no other Op is running; an Op
   called inside another Op's lowering is a step of that Op, and an Op of another library called beside one of
   its own -- a CSR matrix's ``A @ x`` -- a step of the function), found where its module-level
   ``NAME = Op("<lib>.<name>", ...)`` is written;
3. those Ops' torch lowerings;
4. their NKI lowerings;
5. the kernels those NKI lowerings launched in the call (``nki.run``'s kernel, launched by the Op's own
   library; launches inside a step's lowering, or by another library's ``_nki`` through a seam such as
   ``__trnsci_spmv__``, are the step's).

A function that dispatches no Op (configuration, constructors, host-side helpers) has one place; an Op without
a kernel (host-only, with its reason in docs/coverage.md) three places in one or two files. The promise:

* **at most four files** per public function (the Op and its torch lowering share a file); a call that
  launches several different kernels adds one file per further kernel, and the functions whose calls can
  exceed four files that way are listed in ``ALLOWED`` with their reasons and a call that does (``STRESS``);
* **by names alone**: an Op of library ``L`` is declared in a public module ``L/<family>.py``; its torch
  lowering is in that same file; its NKI lowering is in ``L/_nki/<module>.py`` where ``<module>`` mirrors
  ``<family>`` (equal, ``<family>_<part>``, or the family's prefix: ``level3_gemm.py`` -> ``_nki/level3.py``,
  ``factor.py`` -> ``_nki/factor_lu.py``); its kernels are in ``L/kernels/``; every kernel is launched from
  an ``_nki`` module of the library whose ``kernels/`` holds it; a public function that dispatches an Op is
  defined in a public (not ``_``-prefixed) module of its own library.

The same naming rules hold for every Op of the registry (including those no small call reaches), with every
kernel its NKI lowering refers to (the coverage table's walk, :mod:`trnsci.coverage`). The last tests plant
faults -- a lowering swapped for one written here, a launch from here, a fake library laid out wrongly -- and
require the check to name each one.
Paths are derived by introspection, so a module moved or renamed is followed, not listed.
"""

from __future__ import annotations

import ast
import contextvars
import functools
import importlib
import importlib.util
import inspect
import pkgutil
import sys
from pathlib import Path

import pytest
import torch

import trnsci
from trnsci import coverage, dispatch, nki
from trnsci.dispatch import Op, Plan, plan_call

pytestmark = pytest.mark.simulator  # the sweep runs every public function's kernels in the emulator

_spec = importlib.util.spec_from_file_location("plan_walk", Path(__file__).with_name("test_core_plan_call.py"))
walk = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(walk)

ROOT = Path(__file__).resolve().parents[1]
LIBRARIES = tuple(m.__name__ for m in walk.LIBRARIES)
MAX_FILES = 4

#: Public functions some of whose calls put their places in more than four files, each with its reason; every
#: entry has a call in STRESS that does, and exceeds four files only by its kernels (one kernel per file, named
#: for what it computes). No function is allowed a place named otherwise.
_AXES = ("one kernel per kind of axis length: fft_pow2.py for a power of two from 1024, dft_gemm.py below 2048, "
         "the chirp-z path (cmul.py and dft_gemm.py) from 2049")
ALLOWED: dict[str, str] = {
    **{f"trnfft.{name}": _AXES for name in ("fft2", "ifft2", "fftn", "ifftn")},
    "trnfft.rfft2": _AXES + ", or the half-length real kernel (rfft.py) on the last axis",
    "trnfft.rfftn": _AXES + ", or the half-length real kernel (rfft.py) on the last axis",
    "trnfft.irfft2": _AXES + ", or the half-length inverse real kernel (irfft.py) on the last axis",
    "trnfft.irfftn": _AXES + ", or the half-length inverse real kernel (irfft.py) on the last axis",
    "trntensor.elementwise": "a strided operand is gathered (gather.py), a permuted one transposed "
                             "(transpose.py), then the three are combined (elementwise.py)",
}


def _complex(*shape):
    return torch.zeros(shape, dtype=torch.complex64)


def _strided():
    return torch.linspace(-1, 1, 960).reshape(12, 8, 10)[::2].permute(2, 0, 1)


#: A call of each ALLOWED function that launches three kernels (planned: the large ones take seconds to run).
STRESS = {
    **{f"trnfft.{name}": lambda: ((_complex(1024, 2049),), {}) for name in ("fft2", "ifft2", "fftn", "ifftn")},
    "trnfft.rfft2": lambda: ((torch.zeros(1024, 4100),), {}),
    "trnfft.irfft2": lambda: ((_complex(1024, 2051),), {}),
    "trnfft.rfftn": lambda: ((torch.linspace(-1, 1, 1024 * 8 * 16).reshape(1024, 8, 16),), {}),
    "trnfft.irfftn": lambda: ((torch.linspace(-1, 1, 1024 * 8 * 9).reshape(1024, 8, 9).to(torch.complex64),), {}),
    "trntensor.elementwise": lambda: ((_strided(), torch.ones(6, 8, 10).permute(2, 0, 1), _strided()),
                                      {"alpha": 2.0}),
}


# ------------------------------------------------------------------ where things are written

def rel(path: str | Path) -> str:
    p = Path(path).resolve()
    return p.relative_to(ROOT).as_posix() if p.is_relative_to(ROOT) else p.as_posix()


def source_file(obj) -> str:
    """The file ``obj`` is written in: through ``functools.wraps`` chains and ``nki.jit``'s kernel object."""
    fn = inspect.unwrap(obj)
    fn = inspect.unwrap(getattr(fn, "func", None) or fn)
    try:
        return rel(inspect.getsourcefile(fn))
    except TypeError:  # a builtin or a C-level object: the module that holds it
        return rel(sys.modules[type(fn).__module__].__file__)


def package_dir(library: str) -> Path:
    return Path(importlib.import_module(library).__file__).resolve().parent


@functools.cache
def declarations(library: str) -> dict[str, str]:
    """``{op name: file}`` for every ``Op("<name>", ...)`` written in ``library``'s sources (read with ``ast``)."""
    found = {}
    for path in sorted(package_dir(library).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Op"
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                found[node.args[0].value] = rel(path)
    return found


def mirrors(nki_module: str, family: str) -> bool:
    """``_nki/<nki_module>.py`` holds lowerings of the family module ``<family>.py``."""
    return (nki_module == family or nki_module.startswith(family + "_") or family.startswith(nki_module + "_"))


def op_places(op: Op) -> dict[str, list[str]]:
    library = op.name.split(".", 1)[0]
    torch_low, nki_low = op.lowering_for("torch"), op.lowering_for("nki")
    declared = declarations(library).get(op.name)
    return {"op": [declared or f"<{op.name}: no Op({op.name!r}, ...) found in {library}'s sources>"],
            "torch": [source_file(torch_low.fn)] if torch_low else [],
            "nki": [source_file(nki_low.fn)] if nki_low else []}


def op_faults(op: Op, places: dict[str, list[str]], kernel_files: list[str]) -> list[str]:
    """What breaks the naming rules for one Op: where it is declared, its lowerings and its kernels."""
    library = op.name.split(".", 1)[0]
    base = rel(package_dir(library))
    faults = []
    (decl,) = places["op"]
    family = Path(decl).stem
    if Path(decl).parent.as_posix() != base or family.startswith("_"):
        faults.append(f"{op.name}: declared in {decl}, not in a public module {base}/<family>.py")
    for t in places["torch"]:
        if t != decl:
            faults.append(f"{op.name}: torch lowering in {t}, not beside its Op in {decl}")
    if not places["torch"]:
        faults.append(f"{op.name}: no torch lowering")
    for n in places["nki"]:
        if Path(n).parent.as_posix() != f"{base}/_nki" or not mirrors(Path(n).stem, family):
            faults.append(f"{op.name}: NKI lowering in {n}, not in {base}/_nki/<a module mirroring {family}>.py")
    for k in kernel_files:
        if Path(k).parent.as_posix() != f"{base}/kernels":
            faults.append(f"{op.name}: kernel in {k}, not in {base}/kernels/")
    return faults


def function_faults(qual: str, fn, ops: list[Op], kernels: dict[Op, list]) -> tuple[dict[str, list[str]], list[str]]:
    """The five places of the public function ``qual`` (``fn``) that called ``ops`` (which launched
    ``kernels[op]``), as files, and what breaks the promise."""
    places: dict[str, list[str]] = {"public": [source_file(fn)], "op": [], "torch": [], "nki": [], "kernel": []}
    faults = [f"{qual}: launched {source_file(k)} outside any Op" for k in kernels.get(None, ())]
    for op in ops:
        own = op_places(op)
        files = list(dict.fromkeys(source_file(k) for k in kernels.get(op, ())))
        for key in ("op", "torch", "nki"):
            places[key] += [f for f in own[key] if f not in places[key]]
        places["kernel"] += [f for f in files if f not in places["kernel"]]
        faults += op_faults(op, own, files)
    library = qual.split(".", 1)[0]
    public = places["public"][0]
    if ops and (Path(public).parent.as_posix() != rel(package_dir(library)) or Path(public).stem.startswith("_")):
        faults.append(f"{qual}: defined in {public}, not in a public module of {library}")
    count = len({f for files in places.values() for f in files})
    if count > MAX_FILES:
        faults.append(f"{qual}: its places are in {count} files (at most {MAX_FILES})")
    return places, faults


def referred_kernels(op: Op) -> list[str]:
    """The files of every kernel ``op``'s NKI lowering refers to, following the library's functions it calls as
    deep as the coverage table does (:mod:`trnsci.coverage`'s walk): what any call of the Op may launch."""
    low = op.lowering_for("nki")
    kernel_type = type(nki.nki.jit(lambda x: x))
    found: set[str] = set()

    def visit(_, obj):
        if isinstance(obj, kernel_type):
            found.add(source_file(obj))

    if low is not None:
        coverage._walk(low.fn, op.name.split(".", 1)[0], coverage._DEPTH, set(), visit)
    return sorted(found)


def describe(qual: str, places: dict[str, list[str]]) -> str:
    return qual + "\n" + "\n".join(f"  {key:>7}: {', '.join(files) or '-'}" for key, files in places.items())


# ------------------------------------------------------------------ what a call reaches

_active: contextvars.ContextVar[tuple] = contextvars.ContextVar("findable_active", default=())


class Watch:
    """What one call runs: the Ops it calls itself (``top``, in order) and every kernel launch as ``(Op whose
    lowering was running or None, module that called trnsci.nki.run, kernel)``."""

    def __init__(self):
        self.top: list[Op] = []
        self.launches: list[tuple[Op | None, str, object]] = []

    def install(self, monkeypatch) -> None:
        run, launch = Op.run, nki.run
        watch = self

        def watched_run(op, *args, **kwargs):
            outer = _active.get()
            token = _active.set((*outer, op))
            try:
                result = run(op, *args, **kwargs)
            except Exception as exc:  # a plan being collected (plan_call, plan_*): the call did not run the Op
                if not isinstance(getattr(exc, "plan", None), Plan) and not outer and op not in watch.top:
                    watch.top.append(op)
                raise
            finally:
                _active.reset(token)
            if not outer and op not in watch.top:
                watch.top.append(op)
            return result

        def watched_launch(kernel, *args, **kwargs):
            active = _active.get()
            caller = sys._getframe(1).f_globals.get("__name__", "?")
            watch.launches.append((active[-1] if active else None, caller, kernel))
            return launch(kernel, *args, **kwargs)

        monkeypatch.setattr(Op, "run", watched_run)
        monkeypatch.setattr(nki, "run", watched_launch)

    def own(self, qual: str) -> tuple[list[Op], dict]:
        """The function's own Ops and, per Op, the kernels its lowering launched itself.

        Its own Ops are the Ops it calls of its own library, or, when it calls none of them, every Op it calls
        (trntensor.mp2_energy is trnblas.mp2_energy); another library's Op called beside its own (a CSR
        matrix's ``A @ x`` for a residual) is a step. A launch made by another library's code inside an Op's
        lowering (trnsparse's SpMV kernel through the ``__trnsci_spmv__`` seam in trnsolver.cg) is that
        library's step too. Launches outside any Op are kept under ``None`` (a fault)."""
        library = qual.split(".", 1)[0]
        ops = [op for op in self.top if op.name.split(".", 1)[0] == library] or list(self.top)
        kernels: dict = {}
        for op, caller, kernel in self.launches:
            if op is None:
                kernels.setdefault(None, []).append(kernel)
            elif op in ops and caller.split(".", 1)[0] == op.name.split(".", 1)[0]:
                kernels.setdefault(op, []).append(kernel)
        return ops, kernels


def launch_faults(launches) -> list[str]:
    """Every kernel is launched from an ``_nki`` module of the library whose ``kernels/`` holds it."""
    faults = []
    for _, caller, kernel in launches:
        library, _, rest = caller.partition(".")
        file = source_file(kernel)
        if library not in LIBRARIES or not (rest == "_nki" or rest.startswith("_nki.")):
            faults.append(f"{file} launched from {caller}, not from a library's _nki package")
        elif Path(file).parent.as_posix() != f"{rel(package_dir(library))}/kernels":
            faults.append(f"{file} launched from {caller}, not in {rel(package_dir(library))}/kernels/")
    return list(dict.fromkeys(faults))


def watched_call(fn, args, kwargs) -> Watch:
    watch = Watch()
    with pytest.MonkeyPatch.context() as mp:
        watch.install(mp)
        with walk.sweep._restored_settings(), trnsci.use_backend("simulator"), torch.no_grad():
            with nki.capture() as runs:
                result = fn(*args, **kwargs)
                if inspect.isgenerator(result):
                    result.close()
    assert len(watch.launches) == len(runs), "a kernel ran without trnsci.nki.run: the watch missed it"
    return watch


def check_call(qual: str, fn, args, kwargs) -> tuple[dict[str, list[str]], list[str]]:
    """Run ``fn(*args, **kwargs)`` under "simulator": its places, and what breaks the promise."""
    watch = watched_call(fn, args, kwargs)
    places, faults = function_faults(qual, fn, *watch.own(qual))
    return places, faults + launch_faults(watch.launches)


@pytest.fixture(scope="module")
def found():
    """``qual -> (places, faults)`` for every public function with a small call."""
    calls = walk.small_calls()
    out = {}
    for qual, fn in sorted(walk.FUNCTIONS.items()):
        if qual in calls:
            out[qual] = check_call(qual, fn, *calls[qual])
    return out


# ------------------------------------------------------------------ the promise

def test_every_public_function_is_found(found):
    missing = sorted(set(walk.FUNCTIONS) - set(found) - set(walk.NO_CALL))
    assert not missing, f"no small call for {missing} (tests/test_core_plan_call.py finds them)"
    assert len(found) > 150


def _count(places: dict[str, list[str]]) -> int:
    return len({f for files in places.values() for f in files})


def _too_many(fault: str) -> bool:
    return fault.endswith(f"files (at most {MAX_FILES})")


@pytest.mark.parametrize("qual", sorted(walk.FUNCTIONS))
def test_five_places_in_at_most_four_files_named_by_the_layout(found, qual):
    if qual in walk.NO_CALL:
        pytest.skip(walk.NO_CALL[qual])
    places, faults = found[qual]
    if qual in ALLOWED:
        faults = [f for f in faults if not _too_many(f)]
    assert not faults, "\n".join(faults) + "\n" + describe(qual, places)


@functools.cache
def kernel_index(library: str) -> dict[str, object]:
    """``{kernel name as trnsci.nki records it: kernel}`` for the kernels of ``library``'s ``kernels`` package."""
    kernel_type = type(nki.nki.jit(lambda x: x))
    package = importlib.import_module(f"{library}.kernels")
    index = {}
    for info in pkgutil.iter_modules(package.__path__):
        for obj in vars(importlib.import_module(f"{package.__name__}.{info.name}")).values():
            if isinstance(obj, kernel_type):
                index[inspect.unwrap(obj).__qualname__] = obj
    return index


def planned_places(qual: str, fn, args, kwargs) -> tuple[Plan, dict[str, list[str]], list[str]]:
    """The places of a call as its plan names them under "simulator" (nothing runs): its Op and the kernels
    it would launch (tests/test_core_plan_call.py holds plan == run)."""
    with walk.sweep._restored_settings(), trnsci.use_backend("simulator"), torch.no_grad():
        plan = plan_call(fn, *args, **kwargs)
    op = dispatch.ops()[plan.op]
    index = kernel_index(op.name.split(".", 1)[0])
    return plan, *function_faults(qual, fn, [op], {op: [index[k] for k in plan.kernels]})


@pytest.mark.parametrize("qual", sorted(ALLOWED))
def test_an_allowed_function_exceeds_four_files_only_by_its_kernels(qual):
    assert set(STRESS) == set(ALLOWED)
    args, kwargs = STRESS[qual]()
    plan, places, faults = planned_places(qual, walk.FUNCTIONS[qual], args, kwargs)
    assert plan.backend == "simulator", plan.reason
    assert [f for f in faults if not _too_many(f)] == [], describe(qual, places)
    assert _count(places) > MAX_FILES, f"{qual} no longer needs ALLOWED:\n{describe(qual, places)}"
    # the public module (with the Op and its torch lowering) and the _nki module: the rest are kernels
    assert _count({k: v for k, v in places.items() if k != "kernel"}) == 2, describe(qual, places)


@pytest.mark.parametrize("qual", ["trnfft.rfftn", "trntensor.elementwise"])
def test_a_stress_call_runs_as_planned(qual):
    """Two of the stress calls small enough to run: the run launches the kernels the plan names."""
    args, kwargs = STRESS[qual]()
    _, planned, _ = planned_places(qual, walk.FUNCTIONS[qual], args, kwargs)
    ran, faults = check_call(qual, walk.FUNCTIONS[qual], args, kwargs)
    assert ran == planned and len(ran["kernel"]) == 3
    assert [f for f in faults if not _too_many(f)] == []


def test_the_counts(found):
    """The shape of the suite, as the docs state it: most functions with a kernel have three files (public
    module with its Op and torch lowering, _nki module, kernel); none of the sweep's calls more than four."""
    counts: dict[int, list[str]] = {}
    for qual, (places, _) in found.items():
        counts.setdefault(_count(places), []).append(qual)
    assert max(counts) <= MAX_FILES, counts.get(max(counts))
    with_kernel = [q for q, (p, _) in found.items() if p["kernel"]]
    assert len(counts.get(3, [])) > len(with_kernel) / 2, {n: len(q) for n, q in counts.items()}


@pytest.mark.parametrize("library", LIBRARIES)
def test_every_op_of_the_registry_is_named_by_the_layout(library):
    """All Ops, with every kernel their NKI lowering refers to (reached by a sweep call or not)."""
    faults = []
    for _, op in sorted(dispatch.ops(library).items()):
        faults += op_faults(op, op_places(op), referred_kernels(op))
    assert not faults, "\n".join(faults)


# ------------------------------------------------------------------ the check can fail

def test_a_compositions_steps_are_not_its_places():
    """trntensor.einsum under "simulator" launches kernels, all through its steps' Ops (trntensor's tensor ops,
    trnblas.gemm): its own places are einsum.py and _nki/einsum.py. trnsolver.cg on a trnsparse CSR matrix
    launches trnsparse's SpMV kernel through the ``__trnsci_spmv__`` seam from trnsparse's ``_nki`` and calls
    trnsparse.spmv for ``A @ x``: steps, so its own files are three."""
    import trnsolver
    import trnsparse
    import trntensor

    a, b = torch.randn(5, 3), torch.randn(3, 4)
    watch = watched_call(trntensor.einsum, ("ij,jk->ik", a, b), {})
    assert [op.name for op in watch.top] == ["trntensor.einsum"] and watch.launches
    assert watch.own("trntensor.einsum")[1] == {}
    places, faults = check_call("trntensor.einsum", trntensor.einsum, ("ij,jk->ik", a, b), {})
    assert faults == [] and places["kernel"] == [] and _count(places) == 2

    n = 40
    A = trnsparse.from_dense(torch.eye(n) * 4 + torch.diag(torch.ones(n - 1), 1) + torch.diag(torch.ones(n - 1), -1))
    watch = watched_call(trnsolver.cg, (A, torch.ones(n)), {})
    assert {op.name for op in watch.top} == {"trnsolver.cg", "trnsparse.spmv"}
    assert {(c, source_file(k).rsplit("/", 1)[1]) for _, c, k in watch.launches} >= {
        ("trnsparse._nki.ops", "csr_spmv.py"), ("trnsolver._nki.iterative", "cg_update.py")}
    places, faults = check_call("trnsolver.cg", trnsolver.cg, (A, torch.ones(n)), {})
    assert faults == [], faults
    assert [Path(f).name for f in places["kernel"]] == ["cg_update.py"] and _count(places) == 3


def test_a_lowering_out_of_place_is_found():
    """trnblas.gemm with its NKI lowering swapped for one written in this file (it runs the real one)."""
    import trnblas

    gemm_op = trnblas.level3.GEMM
    real = gemm_op.lowering_for("nki").fn

    def spy(*args, **kwargs):
        return real(*args, **kwargs)

    with gemm_op.override("nki", spy):
        places, faults = check_call("trnblas.gemm", trnblas.gemm, (1.0, torch.randn(5, 3), torch.randn(3, 4)), {})
    assert places["nki"] == [rel(__file__)] and [Path(f).name for f in places["kernel"]] == ["gemm.py"]
    assert faults == [f"trnblas.gemm: NKI lowering in {rel(__file__)}, not in "
                      f"{rel(package_dir('trnblas'))}/_nki/<a module mirroring level3_gemm>.py"]


def test_a_launch_out_of_place_is_found():
    """A kernel launched from a module that is not an ``_nki`` module (here, this test file)."""
    import trnblas.kernels.gemm as kg

    watch = Watch()
    with pytest.MonkeyPatch.context() as mp:
        watch.install(mp)
        with trnsci.use_backend("simulator"):
            nki.run(kg.gemm_kernel, torch.ones(3, 2), torch.ones(3, 4))
    gemm_file = source_file(kg.gemm_kernel)
    assert launch_faults(watch.launches) == [f"{gemm_file} launched from {__name__}, not from a library's _nki package"]
    assert launch_faults([(None, "trnfft._nki.basic", kg.gemm_kernel)]) == [
        f"{gemm_file} launched from trnfft._nki.basic, not in {rel(package_dir('trnfft'))}/kernels/"]
    assert launch_faults([(None, "trnblas._nki.level3", kg.gemm_kernel)]) == []
    places, faults = function_faults("trnblas.gemm", walk.FUNCTIONS["trnblas.gemm"], [], {None: [kg.gemm_kernel]})
    assert faults == [f"trnblas.gemm: launched {gemm_file} outside any Op"]


LAYOUT = {
    "__init__.py": "",
    "api.py": "from fakelib.family import F, f_public\n",
    "family.py": ("from trnsci.dispatch import Op\n"
                  "F = Op('fakelib.f', 'flops', 1)\n"
                  "def f_public(x):\n    return F(x)\n"),
    "_torch_side.py": "def f_torch(x):\n    return x\n",
    "_nki/__init__.py": "",
    "_nki/elsewhere.py": "def f_nki(x):\n    return x\n",
    "helpers.py": "def f_kernel(x):\n    return x\n",
    "kernels/__init__.py": "",
    "kernels/f.py": "def f_kernel(x):\n    return x\n",
    "_nki/family.py": "def f_nki(x):\n    return x\n",
    "_family_public.py": "def f_public(x):\n    return x\n",
}


def test_a_planted_layout_breaks_each_rule(tmp_path, monkeypatch):
    """A fake library: a torch lowering one file away from its Op, an NKI lowering in a module that mirrors no
    family, a kernel outside kernels/, a public function in a private module, and five files, are each a
    fault; the same Op laid out as the rules say has none."""
    from trnsci import testing

    for name, text in LAYOUT.items():
        (tmp_path / "fakelib" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "fakelib" / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(globals(), "ROOT", tmp_path.resolve())
    try:
        with testing.scratch_ops():
            fake = {name: importlib.import_module(f"fakelib.{name}")
                    for name in ("family", "_torch_side", "_nki.elsewhere", "helpers", "_family_public",
                                 "_nki.family", "kernels.f")}
            op = fake["family"].F
            op.lowering("torch")(fake["_torch_side"].f_torch)
            op.lowering("nki")(fake["_nki.elsewhere"].f_nki)
            places, faults = function_faults("fakelib.f", fake["_family_public"].f_public, [op],
                                             {op: [fake["helpers"].f_kernel]})
            assert places == {"public": ["fakelib/_family_public.py"], "op": ["fakelib/family.py"],
                              "torch": ["fakelib/_torch_side.py"], "nki": ["fakelib/_nki/elsewhere.py"],
                              "kernel": ["fakelib/helpers.py"]}
            assert faults == [
                "fakelib.f: torch lowering in fakelib/_torch_side.py, not beside its Op in fakelib/family.py",
                "fakelib.f: NKI lowering in fakelib/_nki/elsewhere.py, not in fakelib/_nki/<a module mirroring "
                "family>.py",
                "fakelib.f: kernel in fakelib/helpers.py, not in fakelib/kernels/",
                "fakelib.f: defined in fakelib/_family_public.py, not in a public module of fakelib",
                "fakelib.f: its places are in 5 files (at most 4)"]
            with op.override("torch", fake["family"].f_public), op.override("nki", fake["_nki.family"].f_nki):
                places, faults = function_faults("fakelib.f", fake["family"].f_public, [op],
                                                 {op: [fake["kernels.f"].f_kernel]})
            assert faults == [] and len({f for fs in places.values() for f in fs}) == 3
    finally:
        declarations.cache_clear()
        for name in [m for m in sys.modules if m == "fakelib" or m.startswith("fakelib.")]:
            del sys.modules[name]
