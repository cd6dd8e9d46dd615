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


# Why the Philox rows miss (issue 23 round 3; thread CPU time at 1 torch thread, best of 9 interleaved rounds
# of 15 calls in one process, load ~4 on the shared 2 cores; figures and what was tried: docs/trnrand.md).
# The stream is Philox4x32-10, bit-compatible with cuRAND; on the host it runs as NumPy array passes
# (trnrand._philox): per round of 10, two in-place uint64 multiplies, one uint32 XOR and a key XOR plus mask
# over the (x0, x2) lanes and the products -- 4 L2-bound passes, ~19 ns per block of four 32-bit words here
# (NumPy's uint64 multiply alone is 0.5 ns per element; torch's int64 ops are 2-2.5x slower). The C
# generators keep a block in registers. At 2 torch threads the chunks of a draw may run on two Python
# threads (a measured trnsci.routes choice, "trnrand.stream"): it halves the calling thread's CPU time but
# lost in wall time on this loaded box (uniform32 4 chunks 2.27 vs 2.60 ms), so the 2-thread column stays
# at the 1-thread one; where a core is free the route takes it.
_ROUNDS = ("trnrand's 10 Philox rounds alone, as NumPy array passes (4 in-place uint64 passes per round over the "
           "state, ~19 ns per block of 4 words here), take")
_THREADS = ("; at 2 threads the threaded-chunk route is measured per machine and lost here (wall 2.27 ms serial vs "
            "2.60 ms on 2 threads, load 4 on 2 cores)")
_NOTE_U32 = (f"{_ROUNDS} 1.25 ms, 1.25x the peer's whole C call (1.00 ms), before 0.49 ms of word-to-float "
             "conversion (thread CPU time, 1 thread, best of 9 interleaved rounds); cuRAND's Philox4x32-10 stream "
             f"must stay bit-identical, so the rounds cannot be skipped or fused outside C{_THREADS}")
_NOTE_U64 = (f"float64 takes two 32-bit words per sample (cuRAND's 53-bit layout) where NumPy's Philox4x64 "
             f"gives one 64-bit word: twice the blocks; {_ROUNDS} 2.47 ms, 1.54x NumPy's whole call (1.60 ms), "
             f"plus 0.86 ms of conversion (thread CPU time, 1 thread){_THREADS}")
_NOTE_SMALL = ("sequential small draws read a per-thread read-ahead buffer (was 47 us: 41 ufunc calls of rounds on "
               "250 blocks); now 16.9 us vs NumPy's 5.1 us (thread CPU time, 1 thread, best of 9): 9.9 us per draw "
               "from the buffer -- checks and dispatch ~4.5 us of Python layers, the 2-call float map and tensor "
               "wrap ~4.5 us -- plus the refill amortized, 337 us per 16384 blocks = 5.1 us per 250 blocks (the "
               "rounds at ~21 ns per block); NumPy's draw is one C call")
_NOTE_N32_TORCH = (f"{_ROUNDS} 1.25 ms, 1.17x torch.randn's whole call (1.07 ms: mt19937 and a vectorized "
                   "Box-Muller in C); Box-Muller adds 1.95 ms as separate float32 NumPy passes (casts, log, "
                   "sqrt, sin, interleaved stores) in the order the NKI kernel uses, which keeps the bits "
                   f"(thread CPU time, 1 thread, best of 9){_THREADS}")
_NOTE_N64 = ("at the target within noise (1.02x thread CPU time at 1 thread, 0.95-1.14x over four bench runs at 1 "
             f"and 2 threads): 4 words per pair; {_ROUNDS} 2.29 ms and the float64 Box-Muller passes 2.1 ms, against "
             "NumPy's ziggurat on one 64-bit word per sample (4.28 ms)")


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
        note=_NOTE_U32.replace("1.25x the peer's whole C call (1.00 ms)", "1.18x torch.rand's whole C call (1.06 ms)"),
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
