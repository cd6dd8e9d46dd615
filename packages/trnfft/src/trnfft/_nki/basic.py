"""NKI lowerings of :mod:`trnfft.basic` (fft, ifft, fftn, ifftn), and the routing and host steps every
transform lowering of :mod:`trnfft._nki` shares.

Each lowering is registered as the ``"nki"`` lowering (which also serves
``"simulator"``) of an :class:`~trnsci.dispatch.Op` declared next to its
public function, with the torch lowering's signature, and declares
``dtypes=``, ``supports=`` (lengths/modes the kernels' SBUF plans cannot
take) and ``counts=`` (closed-form HBM bytes and instructions of the one
kernel a call runs; None when a call runs several kernels, e.g. fftn).

Routing of one transform length ``n`` (:func:`algorithm`), ``"fast"`` mode:

* DFT-as-GEMM (:mod:`trnfft.kernels.dft_gemm`) for powers of two
  ``n <= GEMM_MAX_N = 512`` and other ``n <= GEMM_MAX_N_ANY = 2048`` (the
  modeled crossovers, see the constants);
* larger powers of two up to 4096 -> Stockham (:mod:`trnfft.kernels.fft_pow2`);
* powers of two 8192 .. 2**20 -> four-step on the host: column transforms,
  twiddle multiply (complex-multiply kernel), row transforms -- three
  kernel runs (:func:`large_counts`);
* other ``n > 2048`` with convolution length ``m <= 2**20`` -> the chirp-z
  steps of the Bluestein kernel (:mod:`trnfft.kernels.fft_any_length`, which
  itself takes ``m <= 4096``) as separate runs (three complex multiplies, two
  four-step transforms of length m);
* real input of even ``n`` with ``n/2`` a power of two ``<= 4096`` -> the
  half-length kernel (:mod:`trnfft.kernels.rfft`); other n: the
  complex route of length n;
* stft: framing/windowing on the host, the frames as the batch of one
  rfft (one-sided) or fft kernel;
* istft: two launches -- the inverse transform of every frame (the irfft
  route for a real output, the inverse c2c route for ``return_complex``),
  then :mod:`trnfft.kernels.overlap_add` (window, overlap-add on the Tensor
  Engine, division by the summed squared window); the window/envelope
  tables, the NOLA check and the final trim are host work;
* irfft/hfft (and the last dim of irfftn), even ``n``: the half-length
  trick -- the fused :mod:`trnfft.kernels.irfft` kernel when ``n/2`` is
  a power of two ``<= 4096`` ("fast"), else the same pre-twiddle on the host
  and one complex inverse of length ``n/2`` on the routed kernel; odd ``n``:
  Hermitian extension on the host, one complex inverse of length n.
  ihfft: the rfft route; rfftn/irfftn: the real route along the last dim and
  complex kernels along the others (one kernel run per dim);
* ``"bf16"``/``"bf16_refined"``: DFT-as-GEMM with bf16 operands for
  ``n <= 1024``; ``"ozaki"``/``"ozaki_hq"``: the same kernel with the
  operands' bf16 slices stacked along the contraction for ``n <= 256``;
  ``"kahan"``/``"double"`` and longer lengths run on torch (the plan's
  reason says so).

Host-side work and why: the DFT-GEMM kernel takes ``[xr; xi]`` transposed
(contraction dim on the partitions, one host pass); complex inputs are
split into a ``[2, B, n]`` plane array (one pass); zero-padding/truncation
to ``n``, the norm scaling, the Hermitian extension of odd-length ``irfft``
and the pre-twiddle of the non-fused half-length ``irfft`` are host passes;
kernels are unnormalized and return float32.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

from trnsci import nki, runtime

from .. import algorithms as A
from ..basic import FFT, FFTN, IFFT, IFFTN
from ..kernels import dft_gemm as KG
from ..kernels import fft_any_length as KB
from ..kernels import fft_pow2 as KS
from ..kernels import irfft as KI
from ..kernels import rfft as KR
from ..kernels.cmul import cmul_counts, cmul_kernel

F32 = torch.float32
C2C_DTYPES = (torch.float32, torch.complex64)
#: Longest power of two routed to DFT-as-GEMM rather than Stockham ("fast" mode): the modeled
#: crossover of the emulator's cost model, not a measurement; the boundary stays here until a trn1
#: measurement decides it (docs/perf-notes.md#design-fft-crossover).
GEMM_MAX_N = 512
#: Longest other n routed to DFT-as-GEMM rather than the single-kernel Bluestein (whose
#: convolution length m <= 4096 ends at n = 2048): DFT-GEMM is ahead on the modeled timeline
#: throughout, so no "fast" call runs the single-kernel Bluestein; it stays, tested on its own,
#: for a hardware calibration to revisit (docs/perf-notes.md#design-fft-crossover).
#: Above 2048: the several-run Bluestein.
GEMM_MAX_N_ANY = 2048
GEMM_MAX_N_BF16 = 1024
#: Longest n of the Ozaki modes' DFT-GEMM: the contraction stacks one ``2n`` block per slice pair
#: (21 pairs for ``"ozaki_hq"`` with 4-bit slices), and the kernel's x slices take
#: ``K <= MAX_K = 16384`` (21 * 2 * 256 = 10752).
GEMM_MAX_N_OZAKI = 256
#: Longest power of two (and Bluestein convolution) the host-orchestrated
#: four-step plan takes: n = n1 n2 with n1, n2 <= 1024 -- each sub-transform
#: one kernel run (DFT-GEMM or Stockham), the twiddle table 8 n bytes on the
#: host. Simulator-tested at n = 8192 and 2**16 (Bluestein m = 16384).
MAX_LARGE = 2**20


def algorithm(n: int, precision: str) -> tuple[str | None, str]:
    """``(kernel algorithm or None, why not)`` for a complex transform of length n."""
    if precision == "double":
        return None, ("precision 'double' runs torch.fft in float64 on the host: no NeuronCore engine computes "
                      "in float64, and a float-float emulation needs exact fp32 products, which neither the "
                      "Tensor Engine (fp32 accumulation of rounded products) nor the ALU table (no fused "
                      "multiply-add) provides")
    if precision == "kahan":
        return None, ("precision 'kahan' (the compensated Stockham of trnfft.algorithms: a TwoSum error term "
                      "carried through every stage) has no kernel -- it would double the Vector Engine work "
                      "and SBUF of every stage; it runs on torch in float32")
    if precision in ("bf16", "bf16_refined"):
        if n <= GEMM_MAX_N_BF16:
            return "dft_gemm", ""
        return None, f"precision {precision!r} uses the DFT-GEMM kernel, which takes n <= {GEMM_MAX_N_BF16} (n={n})"
    if precision in A.OZAKI_BITS:
        if n <= GEMM_MAX_N_OZAKI:
            return "dft_gemm", ""
        return None, (f"precision {precision!r} stacks {len(A.ozaki_pairs(A.ozaki_params(precision)[0]))} slice "
                      f"products along the DFT-GEMM kernel's contraction, which takes n <= {GEMM_MAX_N_OZAKI} "
                      f"(n={n})")
    pow2 = n & (n - 1) == 0
    if n <= (GEMM_MAX_N if pow2 else GEMM_MAX_N_ANY):
        return "dft_gemm", ""
    if pow2:
        if n <= KS.MAX_N:
            return "stockham", ""
        if n <= MAX_LARGE:
            return "four_step", ""
        return None, f"n={n} exceeds the four-step plan (powers of two n <= {MAX_LARGE})"
    m = KB.length(n)
    if m <= KB.MAX_M:
        return "bluestein", ""
    if m <= MAX_LARGE:
        return "bluestein_large", ""
    return None, f"n={n} needs a Bluestein convolution of length {m} > {MAX_LARGE} (the four-step plan)"


def _rfft_route(n, precision):
    if precision == "fast" and KR.fits(n):
        return "rfft_half", ""
    return algorithm(n, precision)


# irfft of even n by the half-length trick (the inverse of rfft's): pre-twiddle the n/2 + 1 half
# spectrum to a length-n/2 complex spectrum Z'_k = (X_k + conj X_(h-k)) + i w^-k (X_k - conj X_(h-k))
# (Im X_0, Im X_h ignored, as numpy/scipy do), one inverse transform of length n/2, real/imaginary
# parts as the even/odd outputs. Fused in irfft_kernel when n/2 is a power of two <= 4096 ("fast");
# other even n: the pre-twiddle on the host (same formula, float32 table) and one complex inverse
# of length n/2 on the routed kernel. Odd n: the Hermitian extension to length n on the host and one
# full-length complex inverse.

def _c2r_route(n: int, precision: str) -> tuple[str | None, str]:
    """``("irfft_half" | "half" | <c2c algorithm of n> | None, why not)`` for the real-output step of length n."""
    if n % 2:
        return algorithm(n, precision)
    if precision == "fast" and KR.fits(n):
        return "irfft_half", ""
    alg, why = algorithm(n // 2, precision)
    if alg is None:
        return None, f"{why} (a real output of even length {n} runs one complex transform of length {n // 2})"
    return "half", ""


_REAL_IN = ("rfft", "ihfft", "rfft2", "rfftn")
_REAL_OUT = ("irfft", "hfft", "irfft2", "irfftn")


def _detail(alg: str | None, m: int) -> str:
    if alg == "stockham":
        return f"radices {KS.radices(m)}"
    if alg == "bluestein":
        return f"convolution length {KB.length(m)}"
    if alg == "bluestein_large":
        return f"convolution length {KB.length(m)}, four-step {'x'.join(map(str, split(KB.length(m))))}"
    if alg == "four_step":
        return f"n1 x n2 = {'x'.join(map(str, split(m)))}"
    return ""


def plan_algorithms(kind: str, lengths: tuple, precision: str) -> list[tuple[str, int, str]]:
    """Per transform axis, ``(algorithm, inner length, detail)`` of what the NKI lowering of ``kind``
    runs: the routing above (``"dft_gemm"``, ``"stockham"``, ``"bluestein"``, ``"four_step"``,
    ``"bluestein_large"``; ``"real_half+<alg>"`` for a real axis done as one complex transform of
    half the length -- the fused ``rfft_half``/``irfft_half`` kernels are ``"real_half+stockham"``).
    :class:`trnfft.plan.FFTPlan` reports it when a kernel runs."""
    out = []
    last = len(lengths) - 1
    for i, n in enumerate(lengths):
        route = None
        if i == last and kind in _REAL_IN:
            route = _rfft_route(n, precision)[0]
            half = route == "rfft_half"
        elif i == last and kind in _REAL_OUT:
            route = _c2r_route(n, precision)[0]
            half = route in ("irfft_half", "half")
        else:
            half = False
        m = n // 2 if half else n
        alg = "stockham" if route in ("rfft_half", "irfft_half") else algorithm(m, precision)[0]
        out.append((("real_half+" if half else "") + str(alg), m, _detail(alg, m)))
    return out


# ------------------------------------------------------------------ host tables (torch, cached)

def _gemm_matrix(n: int, inverse: bool, precision: str) -> torch.Tensor:
    """:func:`_gemm_matrix_for` under the current Ozaki slicing."""
    verified = A.ozaki_verified() if precision in A.OZAKI_BITS else False
    return _gemm_matrix_for(n, inverse, precision, verified)


@functools.lru_cache(maxsize=8)
def _gemm_matrix_for(n: int, inverse: bool, precision: str, verified: bool) -> torch.Tensor:
    """The kernel's ``[[C, S], [-S, C]]`` (``S`` negated for the inverse) in its operand dtype.

    Entry ``(j, k)`` is the float64 ``exp(-2 pi i r / n)``, ``r = jk mod n``,
    of :func:`trnfft.algorithms.dft_tables` (the same values: one table of
    n angles gathered by r), rounded once. Up to 64 MiB each (fp32,
    n = 2048), so few are kept."""
    from ..algorithms import cos_sin, reduced_angle

    # bf16 and the Ozaki slices: from float64 (the slices of an fp64 entry are exact in bf16)
    wide = np.float64 if precision == "bf16" or precision in A.OZAKI_BITS else np.float32
    c1, s1 = (t.astype(wide) for t in cos_sin(reduced_angle(np.arange(n), n)))
    r = np.outer(np.arange(n), np.arange(n)) % n
    c, s = torch.from_numpy(c1[r]), torch.from_numpy(s1[r])
    if inverse:
        s = -s
    w = torch.cat((torch.cat((c, s), 1), torch.cat((-s, c), 1)), 0)
    if precision == "bf16":
        return w.to(torch.bfloat16).contiguous()
    if precision == "bf16_refined":
        hi, lo = _split(w)
        return torch.cat((hi, lo, hi), 0).contiguous()
    if precision in A.OZAKI_BITS:
        D, b = A.ozaki_params(precision, verified)
        ws = A.ozaki_slices(w, D, b)
        return torch.cat([ws[j].to(torch.bfloat16) for _, j in A.ozaki_pairs(D)], 0).contiguous()
    return w.to(F32).contiguous()


def _split(a: torch.Tensor):
    """bf16 high part and bf16 residual of ``a`` (the residual of the float32 value)."""
    a = a.to(F32)
    hi = a.to(torch.bfloat16)
    return hi, (a - hi.to(F32)).to(torch.bfloat16)


@functools.lru_cache(maxsize=64)
def _table(kind: str, n: int, inverse: bool = False):
    if kind == "tw":
        return torch.from_numpy(KS.twiddle_table(n))
    if kind == "half":
        return torch.from_numpy(KR.half_table(n))
    if kind == "ihalf":
        return torch.from_numpy(KI.ihalf_table(n))
    if kind == "ihalf0":  # k = 0 .. n/2 - 1 (cos, sin rows) for the host pre-twiddle
        t = np.concatenate((np.array([[1.0], [0.0]], np.float32), KI.ihalf_table(n)), 1)
        return torch.from_numpy(t[0].copy()), torch.from_numpy(t[1].copy())
    chirp, filt = KB.tables(n, inverse)
    return torch.from_numpy(chirp), torch.from_numpy(filt)


# ------------------------------------------------------------------ running one length

def _rows_c2c(xr: torch.Tensor, xi: torch.Tensor, inverse: bool, precision: str):
    """Unnormalized (inverse) DFT of the rows of float32 ``(B, n)`` planes through one kernel."""
    n = xr.shape[1]
    alg, _ = algorithm(n, precision)
    if alg == "dft_gemm":
        xt = torch.cat((xr.T, xi.T), 0)
        if precision == "bf16":
            xt = xt.to(torch.bfloat16)
        elif precision == "bf16_refined":
            hi, lo = _split(xt)
            xt = torch.cat((hi, hi, lo), 0)
        elif precision in A.OZAKI_BITS:  # slices of <= 8 bits: exact in bf16
            D, b = A.ozaki_params(precision)
            xs = A.ozaki_slices(xt, D, b)
            xt = torch.cat([xs[i].to(torch.bfloat16) for i, _ in A.ozaki_pairs(D)], 0)
        verified = A.ozaki_verified() if precision in A.OZAKI_BITS else False  # the slicing is in the key
        W = runtime.constant(("trnfft.dft_gemm", n, inverse, precision, verified), xt.device,
                             lambda: _gemm_matrix(n, inverse, precision))  # resident after warm-up
        y = nki.run(KG.dft_gemm_kernel, xt.contiguous(), W, out_dtype=F32)
        return y[:, :n], y[:, n:]
    if alg == "four_step":
        return _four_step(xr, xi, inverse, precision)
    if alg == "bluestein_large":
        return _bluestein_large(xr, xi, inverse, precision)
    planes = torch.stack((xr, xi)).contiguous()
    if alg == "stockham":
        y = nki.run(KS.fft_pow2_kernel, planes, _table("tw", n), inverse=inverse, out_dtype=F32)
    else:
        chirp, filt = _table("chirp", n, inverse)
        y = nki.run(KB.fft_any_length_kernel, planes, chirp, filt, _table("tw", KB.length(n)), inverse=inverse,
                    out_dtype=F32)
    return y[0], y[1]


def _c2c_counts_rows(B: int, n: int, precision: str):
    alg, _ = algorithm(n, precision)
    if alg == "dft_gemm":
        if precision in A.OZAKI_BITS:
            K = 2 * n * len(A.ozaki_pairs(A.ozaki_params(precision)[0]))
        else:
            K = (6 if precision == "bf16_refined" else 2) * n
        size = 2 if precision in A.GEMM_MODES else 4
        return {"kernel": "dft_gemm_kernel", **KG.dft_gemm_counts(B, K, 2 * n, size)}
    if alg == "stockham":
        return {"kernel": "fft_pow2_kernel", **KS.fft_pow2_counts(B, n)}
    if alg in ("four_step", "bluestein_large"):
        return None  # several kernel runs: large_counts() gives their sum
    return {"kernel": "fft_any_length_kernel", **KB.fft_any_length_counts(B, n)}


# ------------------------------------------------------------------ large lengths (several kernel runs)
#
# Four-step (Bailey) for a power of two n = n1 n2 beyond the Stockham kernel's
# SBUF plan: with j = a n2 + b and k = k1 + n1 k2,
#
#     X[k1 + n1 k2] = sum_b w_n2^(b k2) [ w_n^(b k1) sum_a x[a n2 + b] w_n1^(a k1) ],
#
# i.e. (1) n2 column transforms of length n1, (2) the twiddle w_n^(b k1) (host
# table, float64 from exactly reduced angles, rounded once to float32) by the
# complex-multiply kernel, (3) n1 row transforms of length n2 -- each step one
# kernel run over all B n2 (or B n1) rows; the transposes between the steps
# are host passes (HBM round trips). fp32 error: the two sub-transforms'
# bounds plus ~3 u for the twiddle product: within STOCKHAM_BOUND(n).
# Bluestein with m > KB.MAX_M runs the same chirp-z steps as its kernel as
# separate runs: chirp multiply, four-step FFT_m, filter multiply, inverse
# four-step, chirp multiply (complex-multiply kernel for the products).


def split(n: int) -> tuple[int, int]:
    """``(n1, n2)``, ``n = n1 n2``, as equal as powers of two allow (n1 >= n2)."""
    L = n.bit_length() - 1
    return 1 << (L - L // 2), 1 << (L // 2)


@functools.lru_cache(maxsize=16)
def four_step_twiddles(n: int) -> torch.Tensor:
    """float32 ``[2, n2, n1]``: ``w_n^(b k1)`` (cos, sin) for ``b < n2``, ``k1 < n1``."""
    import numpy as np

    from ..algorithms import cos_sin, reduced_angle

    n1, n2 = split(n)
    c, s = cos_sin(reduced_angle(np.outer(np.arange(n2), np.arange(n1)) % n, n))
    return torch.from_numpy(np.stack([c, s]).astype(np.float32))


def _cmul_rows(ar, ai, br, bi, conj=False):
    """``a * b`` (``a * conj(b)``) of float32 ``(R, m)`` planes through one complex-multiply kernel run."""
    y = nki.run(cmul_kernel, torch.stack((ar, ai)).contiguous(), torch.stack((br, bi)).contiguous(),
                conj=conj, out_dtype=F32)
    return y[0], y[1]


def _four_step(xr, xi, inverse, precision):
    B, n = xr.shape
    n1, n2 = split(n)
    # (1) columns: rows [b, a] of length n1
    cr = xr.reshape(B, n1, n2).transpose(1, 2).reshape(B * n2, n1)
    ci = xi.reshape(B, n1, n2).transpose(1, 2).reshape(B * n2, n1)
    yr, yi = _rows_c2c(cr.contiguous(), ci.contiguous(), inverse, precision)
    # (2) twiddles w_n^(b k1) (conjugate for the inverse), broadcast over the batch on the host
    tw = four_step_twiddles(n).unsqueeze(1).expand(2, B, n2, n1).reshape(2, B * n2, n1)
    yr, yi = _cmul_rows(yr, yi, tw[0], tw[1], conj=inverse)
    # (3) rows [k1, b] of length n2, then X[k1 + n1 k2] = Z[k1, k2]
    rr = yr.reshape(B, n2, n1).transpose(1, 2).reshape(B * n1, n2)
    ri = yi.reshape(B, n2, n1).transpose(1, 2).reshape(B * n1, n2)
    zr, zi = _rows_c2c(rr.contiguous(), ri.contiguous(), inverse, precision)
    return (zr.reshape(B, n1, n2).transpose(1, 2).reshape(B, n),
            zi.reshape(B, n1, n2).transpose(1, 2).reshape(B, n))


def _bluestein_large(xr, xi, inverse, precision):
    B, n = xr.shape
    m = KB.length(n)
    chirp, filt = _table("chirp", n, inverse)
    wr, wi = chirp[0].expand(B, n), chirp[1].expand(B, n)
    ar, ai = _cmul_rows(xr, xi, wr, wi, conj=inverse)
    pad = xr.new_zeros(B, m - n)
    Ar, Ai = _four_step(torch.cat((ar, pad), 1), torch.cat((ai, pad), 1), False, precision)
    Pr, Pi = _cmul_rows(Ar, Ai, filt[0].expand(B, m), filt[1].expand(B, m))
    cr, ci = _four_step(Pr, Pi, True, precision)
    return _cmul_rows(cr[:, :n].contiguous(), ci[:, :n].contiguous(), wr, wi, conj=inverse)


def _four_step_parts(B: int, n: int, precision: str) -> list[dict]:
    n1, n2 = split(n)  # n1, n2 <= 1024: each sub-transform is one DFT-GEMM or Stockham run
    return [_c2c_counts_rows(B * n2, n1, precision), {"kernel": "cmul_kernel", **cmul_counts(B * n2, n1)},
            _c2c_counts_rows(B * n1, n2, precision)]


def large_counts(B: int, n: int, precision: str = "fast") -> dict:
    """Closed-form counters of a large-length call (``four_step`` / ``bluestein_large``) summed
    over its kernel runs, with ``"kernels"``: their names in run order."""
    alg, why = algorithm(n, precision)
    if alg == "four_step":
        parts = _four_step_parts(B, n, precision)
    elif alg == "bluestein_large":
        m = KB.length(n)
        parts = [{"kernel": "cmul_kernel", **cmul_counts(B, n)}, *_four_step_parts(B, m, precision),
                 {"kernel": "cmul_kernel", **cmul_counts(B, m)}, *_four_step_parts(B, m, precision),
                 {"kernel": "cmul_kernel", **cmul_counts(B, n)}]
    else:
        raise ValueError(f"large_counts: n={n} is not a large-length plan ({alg or why})")
    total: dict = {"kernels": [p["kernel"] for p in parts]}
    for p in parts:
        for k, v in p.items():
            if k != "kernel":
                total[k] = total.get(k, 0) + v
    return total


def _c2c_names(n: int, precision: str) -> list[str]:
    """The kernels one complex transform of length ``n`` launches, in order (what :func:`_rows_c2c` runs)."""
    alg, _ = algorithm(n, precision)
    if alg in ("four_step", "bluestein_large"):
        return large_counts(1, n, precision)["kernels"]
    return [_c2c_counts_rows(1, n, precision)["kernel"]]


def _r2c_names(n: int, precision: str) -> list[str]:
    """The kernels one real-input transform of length ``n`` launches (what :func:`_r2c` runs)."""
    if _rfft_route(n, precision)[0] == "rfft_half":
        return ["rfft_kernel"]
    return _c2c_names(n, precision)


def _c2r_names(n: int, precision: str) -> list[str]:
    """The kernels one real-output transform of length ``n`` launches (what :func:`_c2r` runs)."""
    route = _c2r_route(n, precision)[0]
    if route == "irfft_half":
        return ["irfft_kernel"]
    return _c2c_names(n // 2 if route == "half" else n, precision)


def _along(x: torch.Tensor, n: int, d: int, fn):
    """Apply ``fn(xr, xi) -> (yr, yi)`` to the rows of ``x`` (complex64) along dim d (length n)."""
    x = A.resize(x, n, d)
    rows, shp = A.as_rows(x, d, n)
    yr, yi = fn(rows.real.contiguous(), rows.imag.contiguous())
    return torch.complex(yr, yi).reshape(*shp[:-1], yr.shape[1]).movedim(-1, d)


def _scaled(y: torch.Tensor, norm: str, inverse: bool, N: int) -> torch.Tensor:
    f = A.norm_scale(norm, inverse, N)
    return y * f if f != 1.0 else y


def _c2c(x, sizes, dims, norm, inverse, precision):
    x = x.to(torch.complex64)
    for n, d in zip(sizes, dims):
        x = _along(x, n, d, lambda r, i, n=n: _rows_c2c(r, i, inverse, precision))
    return _scaled(x, norm, inverse, math.prod(sizes))


# ------------------------------------------------------------------ c2c lowerings

def _nonempty(x):
    return None if x.numel() else "empty input: nothing for a kernel to do"


def _supports1(x, n, dim, norm, precision):
    return _nonempty(x) or algorithm(n, precision)[1] or None


def _supportsn(x, s, dim, norm, precision):
    if not x.numel():
        return "empty input: nothing for a kernel to do"
    for n in s:
        why = algorithm(n, precision)[1]
        if why:
            return why
    return None


def _counts1(x, n, dim, norm, precision):
    return _c2c_counts_rows(FFT.size(x, n, dim, norm, precision) // n, n, precision)  # points / n: rows (any 1-D Op)


def _countsn(x, s, dim, norm, precision):
    if len(s) == 1:
        return _c2c_counts_rows(FFTN.size(x, s, dim, norm, precision) // s[0], s[0], precision)
    return None  # one kernel run per transformed dim


def _kernels1(x, n, dim, norm, precision):
    return _c2c_names(n, precision)


def _r2c_kernels(x, n, dim, norm, precision):
    return _r2c_names(n, precision)


def _c2r_kernels(x, n, dim, norm, precision):
    return _c2r_names(n, precision)


@FFT.lowering("nki", dtypes=C2C_DTYPES, supports=_supports1, counts=_counts1, kernels=_kernels1)
def _fft_nki(x, n, dim, norm, precision):
    return _c2c(x, (n,), (dim,), norm, False, precision)


@IFFT.lowering("nki", dtypes=C2C_DTYPES, supports=_supports1, counts=_counts1, kernels=_kernels1)
def _ifft_nki(x, n, dim, norm, precision):
    return _c2c(x, (n,), (dim,), norm, True, precision)


def _kernelsn(x, s, dim, norm, precision):
    return [k for n in s for k in _c2c_names(n, precision)]


@FFTN.lowering("nki", dtypes=C2C_DTYPES, supports=_supportsn, counts=_countsn, kernels=_kernelsn)
def _fftn_nki(x, s, dim, norm, precision):
    return _c2c(x, s, dim, norm, False, precision)


@IFFTN.lowering("nki", dtypes=C2C_DTYPES, supports=_supportsn, counts=_countsn, kernels=_kernelsn)
def _ifftn_nki(x, s, dim, norm, precision):
    return _c2c(x, s, dim, norm, True, precision)
