"""Tensor Engine numerics the hardware shows and the ISA does not state: rounded bf16 products.

**Rule (``bf16 products rounded``).** On trn1 and trn2 the Tensor Engine
rounds each bf16 x bf16 product to bf16 before it is added into the fp32
PSUM accumulator.  Source: the published trnfft (``trnsci/trnfft``,
``CHANGELOG.md`` 0.19.0, "Hardware precision"), measured on trn1 (SDK
2.29.0, 2026-04-30) and trn2.3xlarge (SDK 2.29.0, 2026-05-01): a 1- and
2-level Ozaki split DFT-GEMM measured ~1.7e-3 relative error at N = 64, the
same as a single bf16 DFT-GEMM (~1.5e-3), while the same splits reach
~1.6e-5 / ~1.4e-7 when products are exact -- per-product rounding dominates.
The ISA's "accumulation precision internal to Tensor Engine is float32"
describes the accumulator, not the products.

What the emulator does: ``nisa.nc_matmul`` (and ``nl.matmul``, which lowers
to it) with **both** operands bf16 forms every product ``s[k, m] *
mo[k, n]`` exactly in fp32 (a bf16 x bf16 product has at most 16 significant
bits), rounds it to bf16 (round to nearest, ties to even; the rounding mode
is not published) and sums the K rounded products in fp32.  Other dtype
pairs (fp32, fp16, fp8, mixed) were not measured and keep exact products.
The bit-accurate transpose mode (``is_transpose=True``) moves data and is
not affected.

What it means for error bounds: with bf16 unit roundoff ``u = 2**-8`` and
fp32's ``u32 = 2**-24``, a K-term bf16 dot product obeys
``|err| <= (u + (K - 1) u32) * sum_k |a_k b_k|`` (first order) instead of
``(K - 1) u32 * sum_k |a_k b_k|`` for exact products; inputs rounded from
fp32 to bf16 add ``2u`` per product, so an fp32 -> bf16 -> matmul pipeline
goes from ``2u`` to ``3u`` per product in the worst case.  A split-precision
(Ozaki-style) scheme whose pieces are multiplied in bf16 cannot get below
``u`` relative per leading product on this hardware.

Switch: ``TRNSCI_EMULATOR_BF16_PRODUCTS=rounded`` (default, as the
hardware) or ``exact`` (products exact, as on a CPU fp32 fallback), or in
code :func:`bf16_products` (``with bf16_products("exact"): ...``).  The
setting is read when a kernel run starts and holds for the whole run
(all programs of a multi-core launch); :func:`bf16_products_mode` reports it.
"""

import contextlib
import os
import threading

import numpy as np

MODES = ("rounded", "exact")
_local = threading.local()


def _env_mode():
    v = os.environ.get("TRNSCI_EMULATOR_BF16_PRODUCTS", "rounded").strip().lower() or "rounded"
    if v not in MODES:
        raise ValueError(f"TRNSCI_EMULATOR_BF16_PRODUCTS must be 'rounded' or 'exact', got {v!r}")
    return v


def bf16_products_mode():
    """``"rounded"`` (bf16 x bf16 products rounded to bf16 before fp32 accumulation) or ``"exact"``."""
    override = getattr(_local, "mode", None)
    return override if override is not None else _env_mode()


@contextlib.contextmanager
def bf16_products(mode):
    """Run the kernels inside the block with bf16 x bf16 products ``"rounded"`` or ``"exact"``."""
    if mode not in MODES:
        raise ValueError(f"mode must be 'rounded' or 'exact', got {mode!r}")
    prev = getattr(_local, "mode", None)
    _local.mode = mode
    try:
        yield
    finally:
        _local.mode = prev


def matmul_rounded_products(s, m, chunk_elems=1 << 18):
    """``s.T @ m`` (fp32 arrays of bf16 values) with every product rounded to bf16, summed in fp32.

    Forms ``chunk_elems`` products at a time in a reused buffer and rounds them in place on their
    bits (round to nearest even at bit 16: add 0x7FFF plus the kept lowest bit, clear the low half;
    Inf stays Inf, NumPy's quiet NaNs stay NaN).  Cost: K M N elementwise operations
    (docs/perf-notes.md#design-emulator-products) -- use ``bf16_products("exact")`` for runs
    that check only counters.
    """
    k, mm = s.shape
    n = m.shape[1]
    s = np.ascontiguousarray(s, dtype=np.float32)
    m = np.ascontiguousarray(m, dtype=np.float32)
    out = np.zeros(mm * n, dtype=np.float32)
    kb = max(1, min(k, chunk_elems // max(1, mm * n)))
    buf = np.empty((kb, mm, n), dtype=np.float32)
    tmp = np.empty((kb, mm, n), dtype=np.uint32)
    for k0 in range(0, k, kb):
        w = min(kb, k - k0)
        p, t = buf[:w], tmp[:w]
        np.multiply(s[k0:k0 + w, :, None], m[k0:k0 + w, None, :], out=p)
        bits = p.view(np.uint32)
        np.right_shift(bits, np.uint32(16), out=t)
        np.bitwise_and(t, np.uint32(1), out=t)
        t += np.uint32(0x7FFF)
        bits += t
        bits &= np.uint32(0xFFFF0000)
        out += p.reshape(w, -1).sum(axis=0, dtype=np.float32)
    return out.reshape(mm, n)
