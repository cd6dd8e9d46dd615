"""``python -m trnsci.nki KERNEL.py [ARGS...]``: run an NKI 0.6 kernel file on the emulator.

The file runs unchanged as ``__main__`` (``sys.argv`` = the file and ARGS)
after :func:`trnsci.nki.install_as_nki`, so its ``import nki`` /
``import nki.language as nl`` / ``import nki.isa as nisa`` resolve to the
emulator and calling an ``@nki.jit`` kernel on NumPy arrays runs it on the
CPU.  ``--target trn1|trn2`` sets ``NEURON_PLATFORM_TARGET_OVERRIDE`` (the
variable AWS's simulator reads) for the run.
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m trnsci.nki",
                                description="Run an NKI 0.6 kernel file on the trnsci NKI emulator.")
    p.add_argument("--target", choices=("trn1", "trn2"), default=None,
                   help="emulated target (default: NEURON_PLATFORM_TARGET_OVERRIDE, else trn1)")
    p.add_argument("file", help="a Python file written against `import nki`")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the file as sys.argv[1:]")
    ns = p.parse_args(argv)
    if not os.path.isfile(ns.file):
        p.error(f"no such file: {ns.file}")
    if ns.target:
        os.environ["NEURON_PLATFORM_TARGET_OVERRIDE"] = ns.target
    from trnsci.nki import install_as_nki

    install_as_nki(force=True)
    sys.argv = [ns.file, *ns.args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(ns.file)))
    runpy.run_path(ns.file, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
