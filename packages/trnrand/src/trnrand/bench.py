"""Benchmark cases for ``trnsci bench``: trnrand against NumPy's Philox bit generator, torch, and scipy.stats.qmc."""

from __future__ import annotations

import warnings

import numpy as np
import scipy.stats.qmc as qmc
import torch

import trnrand
from trnsci.bench import Case, why


def _scipy_qmc(cls, n, d):
    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return cls(d, scramble=False).random(n)

    return run


_PHILOX = why("trnrand-philox", "Without numba (the trnrand[jit] extra) the Philox rounds and Box-Muller run as "
              "NumPy array passes, 1.2-2x the peers' C loops; the cuRAND stream stays bit-identical either way")
_SMALL = why("trnrand-small", "The public call's Python layers (checks, dispatch, tensor wrap) against NumPy's one "
             "C call")


def cases(quick: bool = True):
    """Yield the comparison cases (smaller sizes when ``quick``)."""
    n = 1 << 18 if quick else 1 << 22
    g = trnrand.Generator(seed=1)
    ph = np.random.Generator(np.random.Philox(1))
    tg = torch.Generator().manual_seed(1)
    for dtype, ndt, name in ((torch.float32, np.float32, "float32"), (torch.float64, np.float64, "float64")):
        yield Case(
            "trnrand",
            f"uniform {n} {name}",
            lambda dtype=dtype: trnrand.uniform(n, dtype=dtype, generator=g),
            "numpy Philox random",
            lambda ndt=ndt: ph.random(n, dtype=ndt),
            note=_PHILOX,
        )
        yield Case(
            "trnrand",
            f"normal {n} {name}",
            lambda dtype=dtype: trnrand.normal(n, dtype=dtype, generator=g),
            "numpy Philox standard_normal",
            lambda ndt=ndt: ph.standard_normal(n, dtype=ndt),
            note=_PHILOX,
        )
    yield Case(
        "trnrand",
        "uniform 1000 float32 (fixed cost)",
        lambda: trnrand.uniform(1000, generator=g),
        "numpy Philox random",
        lambda: ph.random(1000, dtype=np.float32),
        note=_SMALL,
    )
    yield Case(
        "trnrand",
        f"uniform {n} float32 vs torch",
        lambda: trnrand.uniform(n, generator=g),
        "torch.rand",
        lambda: torch.rand(n, generator=tg),
        note=_PHILOX,
    )
    yield Case(
        "trnrand",
        f"normal {n} float32 vs torch",
        lambda: trnrand.normal(n, generator=g),
        "torch.randn",
        lambda: torch.randn(n, generator=tg),
        note=_PHILOX,
    )
    m, d = (1 << 14, 10) if quick else (1 << 18, 10)
    yield Case(
        "trnrand",
        f"sobol {m}x{d}",
        lambda m=m, d=d: trnrand.sobol(m, d, scramble=False, dtype=torch.float64),  # bound now: m, d change below
        "scipy Sobol",
        _scipy_qmc(qmc.Sobol, m, d),
    )
    m, d = (100_000, 5)
    yield Case(
        "trnrand",
        f"halton {m}x{d}",
        lambda m=m, d=d: trnrand.halton(m, d, dtype=torch.float64),
        "scipy Halton",
        _scipy_qmc(qmc.Halton, m, d),
    )
