"""Backend scopes in one screen: who decides which implementation runs, and why.

Run it anywhere (no NeuronCore needed):

    python examples/backend_scopes.py

It prints the effective backend of the suite and of two libraries as the
settings change, then the dispatch decision for one GEMM size under each
backend. On a machine without a NeuronCore, ``auto`` always chooses torch and
says so; ``simulator`` runs the NKI kernel source on the CPU; ``nki`` is an
error, never a silent fallback.
"""

from __future__ import annotations

import os
import threading

import trnblas  # importing a library registers its operations with trnsci.dispatch
import trnsci
import trnsci.dispatch
from trnsci import backend

GEMM_FLOPS = 2 * 1024**3  # one 1024 x 1024 x 1024 GEMM


def show(label: str) -> None:
    cells = []
    for lib in (None, "trnblas", "trnfft"):
        s = backend.resolve(lib)
        cells.append(f"{lib or 'suite'}={s.name} ({s.origin})")
    print(f"  {label:<42} " + "  ".join(cells))


def main() -> None:
    print("effective backend (origin), strongest scope wins: with > library > suite > env > default")
    show("start")
    trnsci.set_backend("torch")
    show('trnsci.set_backend("torch")')
    trnblas.set_backend("simulator")
    show('trnblas.set_backend("simulator")')
    with trnsci.use_backend("pytorch"):
        show('  inside trnsci.use_backend("pytorch")')
        with trnsci.use_backend("simulator", library="trnfft"):
            show('    + use_backend("simulator", "trnfft")')
    show("after the blocks")

    seen = {}
    worker = threading.Thread(target=lambda: seen.update(blas=trnblas.get_backend()))
    worker.start()
    worker.join()
    print(f"  a new thread sees trnblas={seen['blas']}: API settings live in contextvars, not globals")

    trnsci.reset_backend("trnblas")
    trnsci.reset_backend()
    show("trnsci.reset_backend() (trnblas, suite)")
    os.environ["TRNFFT_BACKEND"] = "torch"  # normally set in the shell
    show("TRNFFT_BACKEND=torch in the environment")
    del os.environ["TRNFFT_BACKEND"]

    value, origin = trnsci.dispatch.threshold("trnblas.gemm")
    print(f"\nNKI threshold of trnblas.gemm under 'auto': {value:g} flops ({origin}); consulted only on a NeuronCore")
    print(f"trnsci.decide('trnblas.gemm', size={GEMM_FLOPS:.3g} flops) under each backend")
    for name in ("auto", "torch", "simulator", "nki"):
        with trnsci.use_backend(name):
            try:
                decision = trnsci.decide("trnblas.gemm", GEMM_FLOPS)
                print(f"  {name:<10} -> {decision.backend:<10} {decision.reason}")
            except RuntimeError as exc:
                print(f"  {name:<10} -> error: {exc}")


if __name__ == "__main__":
    main()
