"""The seven distributions build, carry the right metadata, and install from wheels alone.

Builds a wheel of ``trnsci`` and of each library from this tree, reads their
metadata, then installs them into fresh virtual environments (no system site
packages, so the editable installs of the development venv cannot leak in)
with ``--no-index --find-links <wheels>``: every one of the seven packages can
only come from the wheels just built.

Third-party dependencies (torch, numpy, ml_dtypes) are installed once per
run into a shared directory that both fresh venvs see through a ``.pth``
file; torch is pinned by ``constraints/dev.txt``. By default they are
installed only if the pinned torch lies on this machine's disk (pip's
configured find-links), because an index build of torch is several GB; set
``TRNSCI_PACKAGING_ONLINE=1`` to let pip fetch it from the configured
indexes instead. Without either, the install steps are skipped with the
reason; the wheel-metadata checks still run.
"""

from __future__ import annotations

import email.parser
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
LIBRARIES = ("trnblas", "trnfft", "trnsparse", "trnsolver", "trnrand", "trntensor")
DISTS = ("trnsci", *LIBRARIES)
CONSTRAINTS = ROOT / "constraints" / "dev.txt"


def suite_version() -> str:
    text = (ROOT / "trnsci" / "_version.py").read_text()
    match = re.search(r'^__version__\s*=\s*"([^"]+)"', text, re.M)
    assert match, "trnsci/_version.py has no __version__"
    return match.group(1)


VERSION = suite_version()
MAJOR, MINOR = (int(x) for x in VERSION.split(".")[:2])


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


# ------------------------------------------------------------------ wheels


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> Path:
    pytest.importorskip("hatchling", reason="building without isolation needs hatchling in this venv (.[dev])")
    out = tmp_path_factory.mktemp("wheels")
    paths = [ROOT, *(ROOT / "packages" / lib for lib in LIBRARIES)]
    run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", out, *paths],
        env=base_env(),
        cwd=out,
    )
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


def test_seven_wheels_with_the_suite_version(wheels):
    found = sorted(p.name for p in wheels.glob("*.whl"))
    expected = sorted(f"{d}-{VERSION}-py3-none-any.whl" for d in DISTS)
    assert found == expected


def test_umbrella_pins_every_library_exactly(wheels):
    meta = metadata(wheels / f"trnsci-{VERSION}-py3-none-any.whl")
    assert meta["Name"] == "trnsci" and meta["Version"] == VERSION
    reqs = requires(meta)
    for lib in LIBRARIES:
        assert reqs.get(lib) == f"=={VERSION}", f"trnsci should pin {lib}=={VERSION}, has {reqs.get(lib)!r}"
    for dep in ("torch", "numpy", "ml-dtypes"):
        assert dep in reqs or dep.replace("-", "_") in reqs, f"trnsci should require {dep}"
    extras = set(meta.get_all("Provides-Extra") or [])
    assert {"neuron", "chem", "dev", "docs"} <= extras, extras


@pytest.mark.parametrize("lib", LIBRARIES)
def test_library_requires_the_core_of_its_minor_series(wheels, lib):
    meta = metadata(wheels / f"{lib}-{VERSION}-py3-none-any.whl")
    assert meta["Name"] == lib and meta["Version"] == VERSION
    reqs = requires(meta)
    want = {f">={MAJOR}.{MINOR},<{MAJOR}.{MINOR + 1}", f"<{MAJOR}.{MINOR + 1},>={MAJOR}.{MINOR}"}
    assert reqs.get("trnsci") in want, f"{lib} should require trnsci>={MAJOR}.{MINOR},<{MAJOR}.{MINOR + 1}"
    assert "torch" in reqs and "numpy" in reqs
    with zipfile.ZipFile(wheels / f"{lib}-{VERSION}-py3-none-any.whl") as zf:
        tops = {n.split("/", 1)[0] for n in zf.namelist() if not n.split("/", 1)[0].endswith(".dist-info")}
    assert tops == {lib}, f"{lib}'s wheel should hold exactly one import package, has {sorted(tops)}"


# ------------------------------------------------------------------ fresh venvs


@pytest.fixture(scope="module")
def third_party(tmp_path_factory) -> Iterator[Path]:
    """A directory holding torch (pinned), numpy and ml_dtypes, shared by the fresh venvs."""
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
        pytest.skip(f"cannot install torch/numpy/ml_dtypes for a fresh venv here: {proc.stderr.strip()[-1500:]}")
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


def test_trnsci_installs_the_suite_from_wheels(wheels, third_party, tmp_path):
    venv = Venv(tmp_path / "suite", third_party)
    venv.install_from_wheels(wheels, "trnsci")
    installed = venv.installed()
    for dist in DISTS:
        assert installed.get(dist) == VERSION, f"{dist} not installed at {VERSION}: {installed}"
    assert installed.get("torch", "").split("+")[0] == pinned("torch").split("==")[1]
    venv.check_from_wheels(DISTS)

    info = run([venv.python, "-m", "trnsci", "info"], env=base_env(), cwd=venv.path).stdout
    assert f"trnsci {VERSION}" in info
    for lib in LIBRARIES:
        assert re.search(rf"^\s*{lib}\s+{re.escape(VERSION)}\s+imported: {re.escape(VERSION)}", info, re.M), info
    script = run([venv.path / "bin" / "trnsci", "info"], env=base_env(), cwd=venv.path).stdout
    assert f"trnsci {VERSION}" in script
    assert run([venv.path / "bin" / "trnsci", "--version"], env=base_env(), cwd=venv.path).stdout.strip() == (
        f"trnsci {VERSION}"
    )


def test_one_library_brings_the_core_and_the_suite(wheels, third_party, tmp_path):
    """trnblas needs trnsci, which pins all six: the cycle resolves to one consistent suite."""
    venv = Venv(tmp_path / "one", third_party)
    venv.install_from_wheels(wheels, "trnblas")
    installed = venv.installed()
    for dist in DISTS:
        assert installed.get(dist) == VERSION, f"{dist} not installed at {VERSION}: {installed}"
    venv.check_from_wheels(("trnblas", "trnsci"))
    out = venv.eval(
        "import trnblas, trnsci; trnblas.set_backend('torch'); print(trnblas.get_backend(), trnsci.get_backend())"
    )
    assert out == "torch auto"
