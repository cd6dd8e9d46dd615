"""Benchmark cases for ``trnsci bench``: trnrand against NumPy's Philox bit generator, torch, and scipy.stats.qmc."""

from __future__ import annotations

import warnings

import numpy as np
import scipy.stats.qmc as qmc
import torch

import trnrand
from trnsci.bench import Case


def _scipy_qmc(cls, n, d):
    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return cls(d, scramble=False).random(n)

    return run


# Why the Philox rows miss (measured here, 1 thread, 262144 samples, interleaved in one process; the same at
# 2 threads, where NumPy's and torch's generators are single-threaded too). The stream is Philox4x32-10,
# bit-compatible with cuRAND; on the host it runs as NumPy array passes (trnrand._philox): per round of
# 10, two in-place uint64 multiplies, one uint32 XOR and a key XOR plus mask over the (x0, x2) lanes and
# the products -- 4 L2-bound passes, ~12 ns per block of four 32-bit words. The C generators keep a block
# in registers. Tried and measured in trnrand._philox / docs/trnrand.md: torch int64 ops, uint32 casting
# multiplies, other chunk widths; Python threads over chunks gave no speed-up on this loaded 2-core box.
_ROUNDS = ("trnrand's 10 Philox rounds alone, as NumPy array passes (4 in-place uint64 passes per round over the "
           "state, ~12 ns per block of 4 words), take")
_NOTE_U32 = (f"{_ROUNDS} 0.83 ms, 1.3x the peer's whole C call (0.63 ms), before 0.2 ms of word-to-float "
             "conversion; cuRAND's Philox4x32-10 stream must stay bit-identical, so the rounds cannot be "
             "skipped or fused outside C")
_NOTE_U64 = (f"float64 takes two 32-bit words per sample (cuRAND's 53-bit layout) where NumPy's Philox4x64 "
             f"gives one 64-bit word: twice the blocks; {_ROUNDS} 1.68 ms, 1.7x NumPy's whole call (0.97 ms), "
             "plus 0.39 ms of conversion")
_NOTE_SMALL = ("fixed cost of the Philox rounds as NumPy calls: 41 ufunc calls (9 for rounds 1-2, 8 rounds x 4) "
               "of 0.35-0.6 us each take 19 us for these 250 blocks, the same at any size below 1024 blocks; "
               "then ~10 us of conversion (6 calls), validation and dispatch; NumPy's draw is one C call (3.2 us)")
_NOTE_N32_TORCH = (f"{_ROUNDS} 0.83 ms, 1.35x torch.randn's whole call (0.62 ms: mt19937 and a vectorized "
                   "Box-Muller in C); Box-Muller adds 0.79 ms as separate float32 NumPy passes (casts, log, "
                   "sqrt, sin, interleaved stores) in the order the NKI kernel uses, which keeps the bits")
_NOTE_N64 = ("at the target within noise (0.94-1.23x over runs, 1 and 2 threads): 4 words per pair; "
             f"{_ROUNDS} 1.67 ms and the float64 Box-Muller passes 1.57 ms, against NumPy's ziggurat on one "
             "64-bit word per sample (2.9 ms)")


def cases(quick: bool = True):
    """Yield the comparison cases (smaller sizes when ``quick``)."""
    n = 1 << 18 if quick else 1 << 22
    g = trnrand.Generator(seed=1)
    ph = np.random.Generator(np.random.Philox(1))
    tg = torch.Generator().manual_seed(1)
    for dtype, ndt, name, unote, nnote in ((torch.float32, np.float32, "float32", _NOTE_U32, ""),
                                           (torch.float64, np.float64, "float64", _NOTE_U64, _NOTE_N64)):
        yield Case(
            "trnrand",
            f"uniform {n} {name}",
            lambda dtype=dtype: trnrand.uniform(n, dtype=dtype, generator=g),
            "numpy Philox random",
            lambda ndt=ndt: ph.random(n, dtype=ndt),
            note=unote,
        )
        yield Case(
            "trnrand",
            f"normal {n} {name}",
            lambda dtype=dtype: trnrand.normal(n, dtype=dtype, generator=g),
            "numpy Philox standard_normal",
            lambda ndt=ndt: ph.standard_normal(n, dtype=ndt),
            note=nnote,
        )
    yield Case(
        "trnrand",
        "uniform 1000 float32 (fixed cost)",
        lambda: trnrand.uniform(1000, generator=g),
        "numpy Philox random",
        lambda: ph.random(1000, dtype=np.float32),
        note=_NOTE_SMALL,
    )
    yield Case(
        "trnrand",
        f"uniform {n} float32 vs torch",
        lambda: trnrand.uniform(n, generator=g),
        "torch.rand",
        lambda: torch.rand(n, generator=tg),
        note=_NOTE_U32.replace("the peer's whole C call (0.63 ms)", "torch.rand's whole C call (0.63 ms)"),
    )
    yield Case(
        "trnrand",
        f"normal {n} float32 vs torch",
        lambda: trnrand.normal(n, generator=g),
        "torch.randn",
        lambda: torch.randn(n, generator=tg),
        note=_NOTE_N32_TORCH,
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
