"""Hatch metadata hook shared by all seven distributions of the suite.

It fills the two fields that must agree across the suite from the one place
they are written (``trnsci/_version.py``): the version, and the pins between
the packages. The umbrella ``trnsci`` pins every library to exactly its own
version; each library asks for the ``trnsci`` core of the same minor series.
Each pyproject lists only its third-party dependencies in
``[tool.hatch.metadata.hooks.custom] requires``.
"""

from __future__ import annotations

import re
from pathlib import Path

from hatchling.metadata.plugin.interface import MetadataHookInterface

LIBRARIES = ("trnblas", "trnfft", "trnsparse", "trnsolver", "trnrand", "trntensor")
_VERSION_FILE = Path(__file__).resolve().parent.parent / "trnsci" / "_version.py"


def suite_version() -> str:
    text = _VERSION_FILE.read_text()
    match = re.search(r'^__version__\s*=\s*"([^"]+)"', text, re.M)
    if not match:
        raise RuntimeError(f"no __version__ in {_VERSION_FILE}")
    return match.group(1)


class SuiteMetadataHook(MetadataHookInterface):
    PLUGIN_NAME = "custom"

    def update(self, metadata: dict) -> None:
        version = suite_version()
        major, minor = version.split(".")[:2]
        metadata["version"] = version
        deps = list(self.config.get("requires", []))
        if metadata["name"] == "trnsci":
            deps += [f"{lib}=={version}" for lib in LIBRARIES]
        else:
            deps.append(f"trnsci>={major}.{minor},<{major}.{int(minor) + 1}")
        metadata["dependencies"] = deps
