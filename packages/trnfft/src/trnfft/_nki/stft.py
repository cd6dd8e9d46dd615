"""NKI lowerings of :mod:`trnfft.stft`: stft (host framing, the frames as one batch of the rfft or fft kernel)
and istft (the inverse transform of every frame, then :mod:`trnfft.kernels.overlap_add`).
"""

from __future__ import annotations

import torch

from trnsci import nki

from ..kernels import irfft as KI
from ..kernels import overlap_add as KO
from ..stft import ISTFT, STFT
from .basic import F32, _c2c, _c2c_counts_rows, _c2c_names, _c2r_route, _r2c_names, _rfft_route, algorithm
from .real import _c2r, _r2c


def _stft_supports(x, n_fft, hop_length, win_length, window, center, pad_mode, normalized, onesided):
    if not x.numel():
        return "empty input: nothing for a kernel to do"
    if onesided and not x.is_complex():
        return _rfft_route(n_fft, "fast")[1] or None
    return algorithm(n_fft, "fast")[1] or None


def _stft_kernels(x, n_fft, hop_length, win_length, window, center, pad_mode, normalized, onesided):
    """One transform over every frame: the real-input kernel one-sided, else the complex one."""
    return _r2c_names(n_fft, "fast") if onesided else _c2c_names(n_fft, "fast")


@STFT.lowering("nki", dtypes=(torch.float32, torch.complex64), supports=_stft_supports, kernels=_stft_kernels)
def _stft_nki(x, n_fft, hop_length, win_length, window, center, pad_mode, normalized, onesided):
    """Framing, padding and windowing on the host (torch.stft's conventions), then one transform
    kernel over every frame (frames are the batch rows)."""
    if center:
        p = n_fft // 2
        x = torch.nn.functional.pad(x.reshape(-1, 1, x.shape[-1]), (p, p), mode=pad_mode).reshape(
            *x.shape[:-1], x.shape[-1] + 2 * p)
    if window is None:
        window = torch.ones(win_length, dtype=x.real.dtype, device=x.device)
    left = (n_fft - win_length) // 2
    w = torch.nn.functional.pad(window, (left, n_fft - win_length - left))
    frames = x.unfold(-1, n_fft, hop_length) * w  # (B?, F, n_fft)
    norm = "ortho" if normalized else "backward"
    if onesided:
        y = _r2c(frames.contiguous(), n_fft, frames.dim() - 1, norm, "fast")
    else:
        y = _c2c(frames, (n_fft,), (frames.dim() - 1,), norm, False, "fast")
    return y.transpose(-1, -2)


# ------------------------------------------------------------------ istft
#
# Composition (each step one launch, the plan lists both with their closed forms):
#   1. frames = irfft(S^T, n_fft) (one-sided, or the first n_fft/2 + 1 bins of a two-sided input
#      with a real output, as torch.istft) or ifft(S^T) (return_complex: real and imaginary planes
#      become two signals), norm "ortho" when normalized else "backward";
#   2. overlap_add_kernel(frames, window, 1/envelope) -> (NB, S, hop) blocks;
# host: the window padded as stft pads it, the envelope sum_t w[j - t hop]^2 over the kept range
# (start = n_fft//2 if center; end = start + length, else the full signal less n_fft//2 if
# center) and its NOLA check (min |env| >= 1e-11, as torch), then the trim (a view) and any
# zero padding up to `length`.

def _istft_geometry(S, n_fft, hop, win_length, window, center, onesided, length, return_complex):
    nb = S.numel() // (S.shape[-1] * S.shape[-2]) * (2 if return_complex else 1)
    F = S.shape[-1]
    full = n_fft + hop * (F - 1)
    start = n_fft // 2 if center else 0
    end = start + length if length is not None else (full - n_fft // 2 if center else full)
    return nb, F, full, start, end


def _istft_inverse_route(n_fft, return_complex):
    return algorithm(n_fft, "fast") if return_complex else _c2r_route(n_fft, "fast")


def _istft_supports(S, n_fft, hop_length, win_length, window, center, normalized, onesided, length,
                    return_complex):
    if not S.numel():
        return "empty input: nothing for a kernel to do"
    why = _istft_inverse_route(n_fft, return_complex)[1]
    if why:
        return f"the inverse transform of the frames: {why}"
    why = KO.fits(S.shape[-1], n_fft, hop_length)
    if why:
        return why
    _, F, _, start, end = _istft_geometry(S, n_fft, hop_length, win_length, window, center, onesided, length,
                                          return_complex)
    try:
        _istft_tables(n_fft, hop_length, win_length, window, F, start, end, S.dtype)
    except RuntimeError:
        return "the window fails the NOLA condition (its overlap-added square vanishes): torch reports the error"
    return None


def _istft_counts(S, n_fft, hop_length, win_length, window, center, normalized, onesided, length,
                  return_complex):
    nb, F, *_ = _istft_geometry(S, n_fft, hop_length, win_length, window, center, onesided, length,
                                return_complex)
    rows = S.numel() // S.shape[-2]  # frames of all signals
    if return_complex:
        inv = _c2c_counts_rows(rows, n_fft, "fast")
    else:
        route = _c2r_route(n_fft, "fast")[0]
        inv = ({"kernel": "irfft_kernel", **KI.irfft_counts(rows, n_fft)} if route == "irfft_half"
               else _c2c_counts_rows(rows, n_fft // 2 if route == "half" else n_fft, "fast"))
    if inv is None:
        return None  # the inverse itself runs several kernels (four-step): no closed form here
    ola = {"kernel": "overlap_add_kernel", **KO.overlap_add_counts(nb, F, n_fft, hop_length)}
    return _launches(inv, ola)


def _launches(*parts: dict) -> dict:
    """Several kernel launches as one plan entry: their names in order and their summed figures."""
    total: dict = {"kernel": " -> ".join(p["kernel"] for p in parts), "kernels": [p["kernel"] for p in parts]}
    for p in parts:
        for k, v in p.items():
            if k != "kernel":
                total[k] = total.get(k, 0) + v
    return total


def _istft_tables(n_fft, hop, win_length, window, F, start, end, dtype):
    if window is None:
        window = torch.ones(win_length, dtype=torch.float64)
    left = (n_fft - win_length) // 2
    w = torch.nn.functional.pad(window.double().cpu(), (left, n_fft - win_length - left))
    R, Rh, Sb, _ = KO.plan(F, n_fft, hop)
    env = torch.zeros(Sb * hop, dtype=torch.float64)
    for t in range(F):  # host table (like the twiddles): sum of shifted squared windows
        env[t * hop:t * hop + n_fft] += w * w
    full = n_fft + hop * (F - 1)
    kept = env[start:min(end, full)]
    if kept.numel() and kept.abs().min() < 1e-11:
        raise RuntimeError(f"istft: window overlap add min: {float(kept.abs().min()):.3g} (the NOLA condition "
                           "fails: the summed squared window vanishes)")
    ienv = torch.zeros(Sb * hop, dtype=torch.float64)
    ienv[start:min(end, full)] = 1.0 / kept
    wtab = torch.nn.functional.pad(w, (0, Rh - n_fft)).reshape(1, Rh)
    return wtab.to(F32), ienv.reshape(Sb, hop).to(F32)


@ISTFT.lowering("nki", dtypes=(torch.complex64,), supports=_istft_supports, counts=_istft_counts)
def _istft_nki(S, n_fft, hop_length, win_length, window, center, normalized, onesided, length, return_complex):
    hop = hop_length
    nb, F, full, start, end = _istft_geometry(S, n_fft, hop, win_length, window, center, onesided, length,
                                              return_complex)
    wtab, ienv = _istft_tables(n_fft, hop, win_length, window, F, start, end, S.dtype)
    norm = "ortho" if normalized else "backward"
    spec = S.transpose(-1, -2)  # (B?, F, n_freq): frames are the batch rows
    if return_complex:
        fr = _c2c(spec, (n_fft,), (spec.dim() - 1,), norm, True, "fast")
        planes = torch.stack((fr.real, fr.imag), 0)  # (2, B?, F, n_fft): two signals per input
    else:
        if not onesided:
            spec = spec[..., :n_fft // 2 + 1]
        planes = _c2r(spec, n_fft, spec.dim() - 1, norm, "fast")
    frames = planes.reshape(-1, F, n_fft).to(F32).contiguous()
    y = nki.run(KO.overlap_add_kernel, frames, wtab.to(S.device), ienv.to(S.device), out_dtype=F32)
    y = y.reshape(frames.shape[0], -1)[:, start:min(end, full)]
    if end > full:
        y = torch.nn.functional.pad(y, (0, end - full))
    if return_complex:
        y = torch.complex(y[: nb // 2], y[nb // 2:])
    return y.reshape(*S.shape[:-2], y.shape[-1])
