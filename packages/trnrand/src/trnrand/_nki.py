"""Every NKI lowering of trnrand, in one place.

Each function is the ``"nki"`` lowering (which also serves ``"simulator"``)
of an :class:`~trnsci.dispatch.Op` declared next to its public function,
with the torch lowering's signature. The host part is small and exact:

* stream draws (uniform, normal, lognormal): the request's words
  ``w0 .. w0 + nw - 1`` become whole Philox blocks ``w0 // 4 ..``; ONE
  kernel call produces them all (split only where the block index crosses a
  multiple of 2**32, so the counter's word 1 is a constant of the call);
  the host drops the < 4 words before/after the request and applies the
  same affine map as the torch path (``low + (high - low) u``,
  ``mean + std z``, ``exp``), so uniforms are bit-identical to torch;
* float64 uniforms take the kernel's uint32 words and the torch path's
  exact 53-bit map;
* sobol: direction numbers (scrambled on the host, as on the torch path)
  go to the kernel as uint32; its ``[d, n]`` integers are transposed and
  mapped to floats exactly.
"""

from __future__ import annotations

import torch

from trnsci import nki

from . import _philox
from .distributions import LOGNORMAL, NORMAL, UNIFORM, _affine, _scale, _wps
from .kernels.box_muller import box_muller_counts, box_muller_kernel
from .kernels.philox import philox_counts, philox_kernel
from .kernels.sobol import sobol_counts, sobol_kernel
from .quasi import SOBOL, _sobol_floats

__all__ = ["stream"]

SPAN = 1 << 32  # blocks per value of the counter's word 1


def _runs(w0: int, nw: int) -> list[tuple[int, int]]:
    """(block0, nblocks) kernel calls covering words w0 .. w0+nw-1 (nw >= 1)."""
    b0, b1 = w0 // 4, (w0 + nw - 1) // 4 + 1
    runs = []
    while b0 < b1:
        e = min(b1, (b0 // SPAN + 1) * SPAN)
        runs.append((b0, e - b0))
        b0 = e
    return runs


def stream(kernel, seed: int, subsequence: int, w0: int, nw: int, **kw) -> torch.Tensor:
    """Kernel output per stream word w0 .. w0+nw-1 (flat), from whole blocks."""
    parts = [nki.run(kernel, seed=seed, subsequence=subsequence, block0=b, nblocks=m, **kw).reshape(-1)
             for b, m in _runs(w0, nw)]
    flat = parts[0] if len(parts) == 1 else torch.cat(parts)
    lead = w0 - 4 * (w0 // 4)
    return flat[lead:lead + nw]


def _one_call(w0, nw, kernel, counts):
    """Plans' figures: the kernel's closed forms when one call covers the request, else None."""
    runs = _runs(w0, nw)
    return {"kernel": kernel, **counts(runs[0][1])} if len(runs) == 1 else None


# ---- uniform -------------------------------------------------------------------------------------
def _uniform_words(seed, subsequence, base, first, n, low, high, dtype, device):
    k = _wps(dtype)
    return base + k * first, k * n


def _uniform_supports(*a):
    return "an empty draw runs no kernel" if a[4] == 0 else None


def _uniform_counts(*a):
    w0, nw = _uniform_words(*a)
    mode = "uniform" if a[7] == torch.float32 else "words"
    return _one_call(w0, nw, "philox_kernel", lambda nb: philox_counts(nb, mode))


@UNIFORM.lowering("nki", dtypes=(torch.float32, torch.float64), supports=_uniform_supports, counts=_uniform_counts)
def _uniform_nki(seed, subsequence, base, first, n, low, high, dtype, device):
    w0, nw = _uniform_words(seed, subsequence, base, first, n, low, high, dtype, device)
    if dtype == torch.float32:  # the kernel's (w >> 8) 2**-24
        u = stream(philox_kernel, seed, subsequence, w0, nw, mode="uniform")
    else:  # the kernel's words, the torch path's exact 53-bit map
        w = stream(philox_kernel, seed, subsequence, w0, nw, mode="words").to(torch.int64)
        u = _philox._unit(w, dtype, False)
    return _affine(u.to(device), low, high, dtype)


# ---- normal / lognormal --------------------------------------------------------------------------
def _normal_span(base, first, n):
    """(w0, nw, odd) of the kernel call for normals first .. first+n-1 of a draw starting at word base.

    Pairs start at base + even. For even base the kernel's pairs (w0, w1), (w2, w3) are the draw's and
    normal k sits at its word; for odd base the kernel's odd pairing (w1, w2), (w3, w0 of the next
    block) is, and its value at word j is the normal of word j + 1.
    """
    odd = base % 2 == 1
    return base + first - odd, n, odd


def _normal_supports(*a):
    if a[4] == 0:
        return "an empty draw runs no kernel"
    w0, nw, odd = _normal_span(a[2], a[3], a[4])
    if odd and len(_runs(w0, nw + 1)) > 1:
        return (f"the draw starts at odd stream word {a[2]} and its last pair straddles a multiple of 2**32 "
                "blocks (the kernel's odd pairing reads the next block inside one counter-word-1 span)")
    return None


def _normal_counts(*a):
    w0, nw, _ = _normal_span(a[2], a[3], a[4])
    return _one_call(w0, nw, "box_muller_kernel", box_muller_counts)


def _standard_normal_nki(seed, subsequence, base, first, n, device):
    """Normal sample k of the draw from the kernel's pairing that matches the parity of ``base``."""
    w0, nw, odd = _normal_span(base, first, n)
    return stream(box_muller_kernel, seed, subsequence, w0, nw, odd=odd).to(device)


@NORMAL.lowering("nki", dtypes=(torch.float32,), supports=_normal_supports, counts=_normal_counts)
def _normal_nki(seed, subsequence, base, first, n, mean, std, dtype, device):
    return _scale(_standard_normal_nki(seed, subsequence, base, first, n, device), mean, std)


@LOGNORMAL.lowering("nki", dtypes=(torch.float32,), supports=_normal_supports, counts=_normal_counts)
def _lognormal_nki(seed, subsequence, base, first, n, mean, std, dtype, device):
    return _standard_normal_nki(seed, subsequence, base, first, n, device).mul(std).add_(mean).exp_()


# ---- sobol ---------------------------------------------------------------------------------------
def _sobol_supports(V, shift, skip, n, dtype):
    return "an empty point set runs no kernel" if n == 0 else None


def _sobol_counts(V, shift, skip, n, dtype):
    return {"kernel": "sobol_kernel", **sobol_counts(V.shape[0], n, skip)}


@SOBOL.lowering("nki", dtypes=(torch.float32, torch.float64), supports=_sobol_supports, counts=_sobol_counts)
def _sobol_nki(V, shift, skip, n, dtype):
    v = V.to(torch.int32).contiguous().numpy().view("uint32")  # 30-bit values: the int32 bits are the uint32
    s = shift.to(torch.int32).reshape(-1, 1).contiguous().numpy().view("uint32")
    x = nki.run(sobol_kernel, v, s, skip=skip, n=n)
    return _sobol_floats(x.to(torch.int64).T.contiguous(), dtype)
