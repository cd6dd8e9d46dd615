"""The eight distributions build the way pip builds them, carry the right metadata, and install from wheels alone.

Every distribution is built as an sdist first and its wheel from that sdist
(``python -m build``'s default, what pip does with a source archive), so a
distribution whose sdist is not self-contained fails here. The metadata
checks read the wheels; then the wheels are installed into fresh virtual
environments (no system site packages, so the editable installs of the
development venv cannot leak in) with ``--no-index --find-links <wheels>``:
every package of the suite can only come from the wheels just built. In the
venv that has the whole suite a smoke script runs what a new user runs:
import all six, ``trnsci info``, ``trnsci demo --quick`` (one or more NKI
kernels per library on the emulator, compared with torch). A second venv
installs one library and must get exactly that library and the core.

Third-party dependencies (torch, numpy, scipy, ml_dtypes) are installed once
per run into a shared directory that the fresh venvs see through a ``.pth``
file; torch is pinned by ``constraints/dev.txt``. By default they are
installed only if the pinned torch lies on this machine's disk (pip's
configured find-links), because an index build of torch is several GB; set
``TRNSCI_PACKAGING_ONLINE=1`` to let pip fetch it from the configured
indexes instead. Without either, the install steps are skipped with the
reason; the build and metadata checks still run.
"""

from __future__ import annotations

import email.parser
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomllib

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
LIBRARIES = ("trnblas", "trnfft", "trnsparse", "trnsolver", "trnrand", "trntensor")
CORE = "trnsci-core"
DISTS = (CORE, *LIBRARIES, "trnsci")
SOURCES = {CORE: ROOT / "packages" / CORE, **{lib: ROOT / "packages" / lib for lib in LIBRARIES}, "trnsci": ROOT}
# library -> the other libraries it may import (and must then require); everything else is floor-1 only
LATERAL = {"trnsolver": ("trnblas",), "trntensor": ("trnblas", "trnsolver")}
CONSTRAINTS = ROOT / "constraints" / "dev.txt"


def suite_version() -> str:
    text = (SOURCES[CORE] / "src" / "trnsci" / "_version.py").read_text()
    match = re.search(r'^__version__\s*=\s*"([^"]+)"', text, re.M)
    assert match, "trnsci-core's _version.py has no __version__"
    return match.group(1)


VERSION = suite_version()


def run(cmd: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 300):
    """Run a command; fail with its output when it exits non-zero."""
    proc = subprocess.run(
        [str(c) for c in cmd], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )
    if proc.returncode != 0:
        pytest.fail(
            f"command failed ({proc.returncode}): {' '.join(map(str, cmd))}\n"
            f"--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}"
        )
    return proc


def base_env() -> dict[str, str]:
    """This process's environment without anything that could point Python at this tree."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PIP_CONSTRAINT"] = str(CONSTRAINTS)
    return env


def wheels_only_env() -> dict[str, str]:
    """pip configuration that can see nothing but the command line: no config files, no PIP_* links."""
    env = {k: v for k, v in base_env().items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_CONSTRAINT=str(CONSTRAINTS))
    return env


def pinned(name: str) -> str:
    for line in CONSTRAINTS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if re.match(rf"{name}\s*==", line):
            return line.replace(" ", "")
    pytest.fail(f"{CONSTRAINTS} does not pin {name}")


def wheel_name(dist: str, kind: str = "whl") -> str:
    stem = f"{dist.replace('-', '_')}-{VERSION}"
    return f"{stem}-py3-none-any.whl" if kind == "whl" else f"{stem}.tar.gz"


# ------------------------------------------------------------------ sources


@pytest.mark.parametrize("dist", DISTS)
def test_every_pyproject_states_the_suite_version_and_exact_pins(dist):
    """One version across the eight pyprojects; our own requirements are exact pins with the local label."""
    project = tomllib.loads((SOURCES[dist] / "pyproject.toml").read_text())["project"]
    assert project["name"] == dist and project["version"] == VERSION
    assert "+" in VERSION, "the local label keeps our pins off other projects' distributions on an index"
    ours = {}
    for req in project["dependencies"]:
        name = re.match(r"[A-Za-z0-9_.\-]+", req).group(0).lower()
        if name in DISTS:
            ours[name] = req
    for name, req in ours.items():
        assert req == f"{name}=={VERSION}", f"{dist} must pin {name}=={VERSION} exactly, has {req!r}"
    want = {
        CORE: set(),
        "trnsci": {CORE, *LIBRARIES},
        **{lib: {CORE, *LATERAL.get(lib, ())} for lib in LIBRARIES},
    }[dist]
    assert set(ours) == want, f"{dist} requires {sorted(ours)} of the suite, should require {sorted(want)}"


# ------------------------------------------------------------------ wheels


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> Path:
    """sdist, then the wheel built from that sdist, for each of the eight distributions."""
    pytest.importorskip("hatchling", reason="building without isolation needs hatchling in this venv (.[dev])")
    pytest.importorskip("build", reason="needs the build package in this venv (.[dev])")
    out = tmp_path_factory.mktemp("wheels")
    for dist in DISTS:
        run([sys.executable, "-m", "build", "-q", "--no-isolation", "--outdir", out, SOURCES[dist]],
            env=base_env(), cwd=out)
    return out


def metadata(wheel: Path):
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        return email.parser.Parser().parsestr(zf.read(name).decode())


def requires(meta) -> dict[str, str]:
    """Requires-Dist without environment markers, name -> specifier (as written)."""
    out = {}
    for req in meta.get_all("Requires-Dist") or []:
        if ";" in req:
            continue
        match = re.match(r"([A-Za-z0-9_.\-]+)\s*(.*)", req)
        out[match.group(1).lower()] = match.group(2).strip().strip("()").replace(" ", "")
    return out


def files(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        return [n for n in zf.namelist() if ".dist-info/" not in n]


def entry_points(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as zf:
        name = next((n for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt")), None)
        return zf.read(name).decode() if name else ""


def test_eight_sdists_and_wheels_with_the_suite_version(wheels):
    found = sorted(p.name for p in wheels.iterdir())
    expected = sorted([wheel_name(d) for d in DISTS] + [wheel_name(d, "sdist") for d in DISTS])
    assert found == expected


@pytest.mark.parametrize("dist", DISTS)
def test_sdist_is_self_contained(wheels, dist):
    """Nothing in an sdist points outside it (the wheel was built from it, which proves the rest)."""
    with tarfile.open(wheels / wheel_name(dist, "sdist")) as tf:
        text = tf.extractfile(next(m for m in tf.getmembers() if m.name.endswith("/pyproject.toml"))).read().decode()
    assert "../" not in text, f"{dist}'s pyproject.toml refers outside its sdist"


def test_umbrella_pins_the_core_and_every_library_exactly(wheels):
    meta = metadata(wheels / wheel_name("trnsci"))
    assert meta["Name"] == "trnsci" and meta["Version"] == VERSION
    reqs = requires(meta)
    for dist in (CORE, *LIBRARIES):
        assert reqs.get(dist) == f"=={VERSION}", f"trnsci should pin {dist}=={VERSION}, has {reqs.get(dist)!r}"
    extras = set(meta.get_all("Provides-Extra") or [])
    assert {"neuron", "chem", "dev", "docs"} <= extras, extras


def test_umbrella_ships_only_the_workflows_into_the_core_package(wheels):
    """The umbrella adds modules to ``trnsci`` but never the package's ``__init__`` (the core's)."""
    names = files(wheels / wheel_name("trnsci"))
    assert names and all(n.startswith("trnsci/") for n in names), names
    assert "trnsci/__init__.py" not in names
    assert {"trnsci/chem.py", "trnsci/chem_demo.py"} <= set(names)
    eps = entry_points(wheels / wheel_name("trnsci"))
    assert "[trnsci.demo]" in eps and "trnsci.chem_demo" in eps and "[trnsci.workflows]" in eps


def test_core_declares_what_its_default_paths_import(wheels):
    """The emulator (backend "simulator") imports SciPy and ml_dtypes: the core must require them."""
    meta = metadata(wheels / wheel_name(CORE))
    reqs = requires(meta)
    for dep in ("torch", "numpy", "scipy", "ml-dtypes"):
        assert dep in reqs or dep.replace("-", "_") in reqs, f"{CORE} should require {dep}: {sorted(reqs)}"
    names = files(wheels / wheel_name(CORE))
    assert "trnsci/__init__.py" in names and "trnsci/nki/emulator/__init__.py" in names
    assert not any(n in names for n in ("trnsci/chem.py", "trnsci/chem_demo.py")), "workflows are floor 3"
    assert "trnsci = trnsci.cli:main" in entry_points(wheels / wheel_name(CORE))


@pytest.mark.parametrize("lib", LIBRARIES)
def test_library_requires_the_core_and_declares_its_plugins(wheels, lib):
    meta = metadata(wheels / wheel_name(lib))
    assert meta["Name"] == lib and meta["Version"] == VERSION
    reqs = requires(meta)
    assert reqs.get(CORE) == f"=={VERSION}", f"{lib} should require {CORE}=={VERSION}"
    assert "trnsci" not in reqs, f"{lib} must not require the umbrella (that is the cycle this layout removes)"
    assert "torch" in reqs and "numpy" in reqs
    tops = {n.split("/", 1)[0] for n in files(wheels / wheel_name(lib))}
    assert tops == {lib}, f"{lib}'s wheel should hold exactly one import package, has {sorted(tops)}"
    eps = entry_points(wheels / wheel_name(lib))
    for group, value in (("trnsci.libraries", lib), ("trnsci.demo", f"{lib}.demo"), ("trnsci.bench", f"{lib}.bench")):
        assert f"[{group}]" in eps and f"{lib} = {value}" in eps, (group, eps)


# ------------------------------------------------------------------ fresh venvs


@pytest.fixture(scope="module")
def third_party(tmp_path_factory) -> Iterator[Path]:
    """A directory holding torch (pinned), numpy, scipy and ml_dtypes, shared by the fresh venvs."""
    torch_req = pinned("torch")
    if os.environ.get("TRNSCI_PACKAGING_ONLINE") != "1":
        probe = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--dry-run",
                "--quiet",
                "--no-index",
                "--no-deps",
                "--ignore-installed",
                torch_req,
            ],
            env=base_env(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if probe.returncode != 0:
            errors = [line for line in probe.stderr.splitlines() if line.startswith("ERROR")]
            pytest.skip(
                f"{torch_req} (constraints/dev.txt) is not on this machine's disk via pip's find-links, and an "
                "index build of torch is several GB; set TRNSCI_PACKAGING_ONLINE=1 to download it. "
                f"pip said: {errors[0] if errors else probe.stderr.strip()[-300:]}"
            )
    deps = tmp_path_factory.mktemp("third_party")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-compile",
            "--target",
            deps,
            torch_req,
            "numpy",
            "scipy",
            "ml_dtypes",
        ],
        env=base_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if proc.returncode != 0:
        shutil.rmtree(deps, ignore_errors=True)
        pytest.skip(f"cannot install torch/numpy/scipy/ml_dtypes for a fresh venv here: {proc.stderr.strip()[-1500:]}")
    yield deps
    shutil.rmtree(deps, ignore_errors=True)  # ~1 GB; pytest would keep it in its last three temp dirs


class Venv:
    """A fresh venv without pip of its own; this interpreter's pip drives it (``pip --python``)."""

    def __init__(self, path: Path, deps: Path):
        self.path = path
        run([sys.executable, "-m", "venv", "--without-pip", path], env=base_env())
        self.python = path / "bin" / "python"
        self.purelib = Path(self.eval("import sysconfig; print(sysconfig.get_paths()['purelib'])"))
        (self.purelib / "_trnsci_test_third_party.pth").write_text(f"{deps}\n")

    def pip(self, *args: str, env: dict[str, str] | None = None):
        return run([sys.executable, "-m", "pip", "--python", self.python, *args], env=env or base_env(), cwd=self.path)

    def eval(self, code: str) -> str:
        # cwd is the venv itself, never the repository: `python -c` puts cwd on sys.path.
        return run([self.python, "-c", code], env=base_env(), cwd=self.path).stdout.strip()

    def install_from_wheels(self, wheels: Path, *names: str):
        return self.pip("install", "--no-index", "--find-links", str(wheels), *names, env=wheels_only_env())

    def installed(self) -> dict[str, str]:
        out = self.pip("list", "--format=json").stdout
        return {d["name"].lower(): d["version"] for d in json.loads(out)}

    def check_from_wheels(self, dists) -> None:
        """Each dist is a regular (not editable, not from a directory) install in this venv's site-packages."""
        code = (
            "import importlib, importlib.metadata as md, json, sys\n"
            f"out = {{}}\n"
            f"for d in {list(dists)!r}:\n"
            "    dist = md.distribution(d)\n"
            "    mod = importlib.import_module(d)\n"
            "    out[d] = dict(version=dist.version, where=str(dist.locate_file('')),\n"
            "                  file=mod.__file__, direct_url=dist.read_text('direct_url.json'),\n"
            "                  modversion=getattr(mod, '__version__', None))\n"
            "print(json.dumps(out))\n"
        )
        info = json.loads(self.eval(code))
        for dist, row in info.items():
            assert row["version"] == VERSION, (dist, row)
            assert row["modversion"] == VERSION, (dist, row)
            assert Path(row["where"]).resolve() == self.purelib.resolve(), (dist, row)
            assert Path(row["file"]).resolve().is_relative_to(self.purelib.resolve()), (dist, row)
            assert row["direct_url"] is None, f"{dist} was installed from a directory or editable: {row}"


SMOKE = """
import importlib, sys, warnings
import torch
import trnsci
libs = ("trnblas", "trnfft", "trnsparse", "trnsolver", "trnrand", "trntensor")
mods = {name: importlib.import_module(name) for name in libs}
from trnsci import nki
assert nki.EMULATOR_ERROR is None, nki.EMULATOR_ERROR
# the README's simulator example: the kernel must run (no fallback to torch)
from trnsci.testing import kernel_ran
A, B = torch.randn(70, 40), torch.randn(40, 30)
with warnings.catch_warnings():
    warnings.simplefilter("error")
    with trnsci.use_backend("simulator"), kernel_ran() as runs:
        C = mods["trnblas"].gemm(1.0, A, B)
assert torch.allclose(C, A @ B, rtol=1e-5, atol=1e-5) and runs, runs
print("smoke ok", trnsci.__version__)
"""


def test_trnsci_installs_the_suite_from_wheels(wheels, third_party, tmp_path):
    venv = Venv(tmp_path / "suite", third_party)
    venv.install_from_wheels(wheels, "trnsci")
    installed = venv.installed()
    for dist in DISTS:
        assert installed.get(dist) == VERSION, f"{dist} not installed at {VERSION}: {installed}"
    assert installed.get("torch", "").split("+")[0] == pinned("torch").split("==")[1]
    venv.check_from_wheels(LIBRARIES)
    assert venv.eval("import trnsci.chem, trnsci; print(trnsci.chem.df_mp2.__name__, trnsci.__version__)") == (
        f"df_mp2 {VERSION}"
    )
    assert venv.eval(SMOKE).endswith(f"smoke ok {VERSION}")

    info = run([venv.python, "-m", "trnsci", "info"], env=base_env(), cwd=venv.path).stdout
    assert f"trnsci {VERSION}" in info and "emulator unavailable" not in info
    for lib in LIBRARIES:
        assert re.search(rf"^\s*{lib}\s+{re.escape(VERSION)}\s+imported: {re.escape(VERSION)}", info, re.M), info
    script = venv.path / "bin" / "trnsci"
    assert run([script, "--version"], env=base_env(), cwd=venv.path).stdout.strip() == f"trnsci {VERSION}"
    # no PySCF in this venv: the DF-MP2 part says so, every library's kernel cases run and agree
    demo = run([script, "demo", "--quick"], env=base_env(), cwd=venv.path, timeout=600).stdout
    assert "needs PySCF" in demo and "pip install 'trnsci[chem]'" in demo, demo
    assert "all checks passed" in demo, demo
    for lib in LIBRARIES:
        assert re.search(rf"^\s*{lib}\s", demo, re.M), f"no kernel case of {lib} ran:\n{demo}"
    floors = run([venv.python, ROOT / "tests" / "floors.py", venv.purelib], env=base_env(), cwd=venv.path).stdout
    assert "no upward import" in floors, floors


def test_one_library_brings_only_itself_and_the_core(wheels, third_party, tmp_path):
    venv = Venv(tmp_path / "one", third_party)
    venv.install_from_wheels(wheels, "trnblas")
    ours = {d: v for d, v in venv.installed().items() if d in DISTS}
    assert ours == {CORE: VERSION, "trnblas": VERSION}, ours
    venv.check_from_wheels(("trnblas",))
    out = venv.eval(
        "import trnblas, trnsci; trnblas.set_backend('torch'); print(trnblas.get_backend(), trnsci.get_backend())"
    )
    assert out == "torch auto"
    # a call that needs the umbrella says what to install
    msg = venv.eval(
        "import trnblas.chem\n"
        "try:\n    trnblas.chem.dfmp2(None)\nexcept ImportError as exc:\n    print(exc)"
    )
    assert "pip install 'trnsci[chem]'" in msg, msg
    info = run([venv.path / "bin" / "trnsci", "info"], env=base_env(), cwd=venv.path).stdout
    assert re.search(r"^\s*trnfft\s+not installed", info, re.M), info


def _index_reachable() -> bool:
    probe = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "trnsci"], env=base_env(),
                           capture_output=True, text=True, timeout=120, check=False)
    return probe.returncode == 0 and "0.1.0" in probe.stdout


def test_with_the_index_in_reach_our_pins_never_resolve_to_other_projects(wheels, third_party, tmp_path):
    """PyPI holds other projects' trnsci 0.1.0, trnblas 0.5.4, trnfft 0.12.0: pip must never pick them for us."""
    if not _index_reachable():
        pytest.skip("the package index (with the other projects' trnsci) is not reachable from here")
    venv = Venv(tmp_path / "idx", third_party)
    # the wheelhouse beside the index: every one of our packages comes from the wheelhouse, at our version
    out = venv.pip("install", "--dry-run", "--quiet", "--report", "-", "--find-links", str(wheels), "trnsci").stdout
    items = {i["metadata"]["name"].lower(): i for i in json.loads(out)["install"]}
    for dist in DISTS:
        assert items[dist]["metadata"]["version"] == VERSION, (dist, items[dist]["metadata"]["version"])
        assert items[dist]["download_info"]["url"].startswith("file:"), items[dist]["download_info"]
    # a library from its source directory without the wheelhouse: the exact pin on the core cannot be met by
    # the index, so pip stops and names it (before, it installed the index's unrelated trnsci 0.1.0)
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv.python), "install", "--dry-run",
                           str(SOURCES["trnblas"])], env=base_env(), capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode != 0 and f"trnsci-core=={VERSION}" in proc.stderr, proc.stderr[-2000:]
