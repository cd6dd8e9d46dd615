"""Short-time Fourier transform and its inverse, with torch.stft / torch.istft conventions.

``stft`` frames the signal (``n_fft`` samples every ``hop_length``; with
``center=True`` the signal is first padded by ``n_fft // 2`` on both sides
using ``pad_mode``), multiplies each frame by the window (``win_length``
samples, zero-padded to ``n_fft`` centred; the periodic Hann window if
``window`` is None, as the published trnfft and SciPy -- torch.stft's own
default is rectangular) and transforms it::

    S[..., f, t] = sum_j w[j] x[t * hop + j] exp(-2 pi i f j / n_fft)

(times ``n_fft ** -0.5`` if ``normalized``). ``istft`` inverts it by
windowed overlap-add divided by the summed squared window (which must not
vanish: the NOLA condition).
"""

from __future__ import annotations

from typing import Any

import torch

from trnsci import validate
from trnsci.dispatch import Op
from trnsci.settled import call, public

from . import _engine as E

_PAD = validate.Options({m: (m,) for m in ("reflect", "constant", "replicate", "circular")})


def _stft_points(x, n_fft, hop_length, *rest):
    L = x.shape[-1] + (2 * (n_fft // 2) if rest[3] else 0)  # rest[3]: center
    frames = 1 + max(0, L - n_fft) // hop_length
    return x.numel() // max(1, x.shape[-1]) * frames * n_fft


def _istft_points(S, n_fft, *rest):
    return S.numel() // max(1, S.shape[-2]) * n_fft


# STFT has an NKI lowering (trnfft._nki.stft: host framing + one transform kernel); ISTFT runs on
# torch (plans say so). Thresholds as for the transforms.
def _complex_of(t: torch.Tensor) -> torch.dtype:
    return torch.complex128 if t.dtype in (torch.float64, torch.complex128) else torch.complex64


def _stft_fake(x, n_fft, hop_length, win_length, window, center, pad_mode, normalized, onesided):
    """The operator's fake implementation: ``(B?, n_freq, n_frames)`` complex, without computing."""
    L = x.shape[-1] + (2 * (n_fft // 2) if center else 0)
    frames = 1 + (L - n_fft) // hop_length
    freqs = n_fft // 2 + 1 if onesided else n_fft
    return x.new_empty((*x.shape[:-1], freqs, frames), dtype=_complex_of(x))


def _istft_fake(S, n_fft, hop_length, win_length, window, center, normalized, onesided, length, return_complex):
    """The operator's fake implementation: ``(B?, L)`` real (complex with ``return_complex``)."""
    if length is None:
        length = n_fft + hop_length * (S.shape[-1] - 1) - (2 * (n_fft // 2) if center else 0)
    dt = _complex_of(S) if return_complex else _complex_of(S).to_real()
    return S.new_empty((*S.shape[:-2], length), dtype=dt)


# Operators torch.ops.trnfft.stft / istft; their derivative is the vjp of the torch lowering (torch.stft /
# torch.istft are differentiable in the signal and the window).
STFT = Op("trnfft.stft", "points", E.THRESHOLD_POINTS, size=_stft_points,
          doc="short-time Fourier transform; points = batch x frames x n_fft",
          schema="(Tensor x, int n_fft, int hop_length, int win_length, Tensor? window, bool center, "
                 "str pad_mode, bool normalized, bool onesided) -> Tensor", fake=_stft_fake)
ISTFT = Op("trnfft.istft", "points", E.THRESHOLD_POINTS, size=_istft_points,
           doc="inverse short-time Fourier transform; points = batch x frames x n_fft",
           schema="(Tensor S, int n_fft, int hop_length, int win_length, Tensor? window, bool center, "
                  "bool normalized, bool onesided, int? length, bool return_complex) -> Tensor", fake=_istft_fake)


@STFT.lowering("torch")
def _stft_torch(x: torch.Tensor, n_fft: int, hop_length: int, win_length: int, window: torch.Tensor | None,
                center: bool, pad_mode: str, normalized: bool, onesided: bool) -> torch.Tensor:
    """``(B?, L)`` real/complex -> ``(B?, n_freq, n_frames)`` complex."""
    return torch.stft(x, n_fft, hop_length, win_length, window, center, pad_mode, normalized, onesided,
                      return_complex=True)


@ISTFT.lowering("torch")
def _istft_torch(S: torch.Tensor, n_fft: int, hop_length: int, win_length: int, window: torch.Tensor | None,
                 center: bool, normalized: bool, onesided: bool, length: int | None,
                 return_complex: bool) -> torch.Tensor:
    return torch.istft(S, n_fft, hop_length, win_length, window, center, normalized, onesided, length,
                       return_complex)


def _frames(x, n_fft, hop_length, win_length, window, center, pad_mode):
    """The windowed frames ``(B?, F, n_fft)`` the transform takes (torch.stft's padding and window placement)."""
    if center:
        p = n_fft // 2
        x = torch.nn.functional.pad(x.reshape(-1, 1, x.shape[-1]), (p, p), mode=pad_mode).reshape(
            *x.shape[:-1], x.shape[-1] + 2 * p)
    frames = x.unfold(-1, n_fft, hop_length)
    if window is None:
        return frames
    left = (n_fft - win_length) // 2
    return frames * torch.nn.functional.pad(window, (left, n_fft - win_length - left))


@STFT.backward(formula="S = F frames(x, w): dframes = F^H g (an irfft of g with its inner bins halved, one-sided; "
                       "else an ifft, real part for real x), the normalization swapped; dx, dw = the framing's vjp",
               runs="one `trnfft.irfft` (or `trnfft.ifft`) call, the framing's vjp on torch")
def _stft_backward(inputs, output, g, needs):
    from .basic import IFFT
    from .real import IRFFT, _halve_inner

    x, n_fft, hop, wl, window, center, pad_mode, normalized, onesided = inputs
    none = [None] * len(inputs)
    if not (needs[0] or (window is not None and needs[4])):
        return tuple(none)
    norm = E.swap_norm("ortho" if normalized else "backward")
    gt = g.transpose(-1, -2).contiguous()  # (B?, F, n_freq): frames are the batch rows
    d = gt.dim() - 1
    if onesided:  # x real: the adjoint of the half spectrum
        gf = IRFFT(_halve_inner(gt, n_fft, d, 0.5).contiguous(), n_fft, d, norm, "fast")
    else:
        gf = IFFT(gt, n_fft, d, norm, "fast")
        if not x.is_complex():
            gf = gf.real
    with torch.enable_grad():
        xs = x.detach().requires_grad_(bool(needs[0]))
        ws = window.detach().requires_grad_(bool(needs[4])) if window is not None else None
        leaves = [t for t in (xs, ws) if t is not None and t.requires_grad]
        fr = _frames(xs, n_fft, hop, wl, ws, center, pad_mode)
        got = iter(torch.autograd.grad(fr, leaves, gf.to(fr.dtype)))
    none[0] = next(got) if xs.requires_grad else None
    if ws is not None and ws.requires_grad:
        none[4] = next(got)
    return tuple(none)


def _bool(b: Any, name: str, where: str) -> bool:
    if not isinstance(b, bool):
        raise TypeError(f"{where}: {name} must be a bool, got {type(b).__name__}")
    return b


#: Window names accepted as strings (periodic, as scipy.signal.get_window's default for spectra).
_WINDOWS = {
    "hann": torch.hann_window, "hanning": torch.hann_window, "hamming": torch.hamming_window,
    "blackman": torch.blackman_window, "bartlett": torch.bartlett_window,
    "boxcar": torch.ones, "rectangular": torch.ones, "ones": torch.ones,
}


def _named_window(name: str, n: int, dtype: torch.dtype, device) -> torch.Tensor:
    make = _WINDOWS[name]
    if make is torch.ones:
        return torch.ones(n, dtype=dtype, device=device)
    return make(n, periodic=True, dtype=dtype, device=device)


def _window(window: Any, win_length: int, like: torch.Tensor, where: str):
    """The window as a real tensor of ``like``'s precision; ``None`` is the periodic Hann window."""
    real = like.real.dtype if like.is_complex() else like.dtype
    if window is None:
        window = "hann"
    if isinstance(window, str):
        name = window.lower()
        if name not in _WINDOWS:
            raise ValueError(f"{where}: window must be a tensor or one of {', '.join(map(repr, _WINDOWS))}; "
                             f"got {window!r}")
        return _named_window(name, win_length, real, like.device)
    w = validate.tensor(window, "window", where)
    if w.dtype not in (torch.float32, torch.float64) or w.dim() != 1 or w.shape[0] != win_length:
        if w.dtype not in (torch.float32, torch.float64):
            raise TypeError(f"{where}: window must be float32/float64, got {w.dtype}")
        raise ValueError(f"{where}: window must be 1-D of length win_length={win_length}, got shape "
                         f"{tuple(w.shape)}")
    return w.to(device=like.device, dtype=real)


def _common(where, n_fft, hop_length, win_length, center, normalized):
    n_fft = validate.positive_int(n_fft, "n_fft", where)
    hop = n_fft // 4 if hop_length is None else validate.positive_int(hop_length, "hop_length", where)
    hop = max(hop, 1)
    wl = n_fft if win_length is None else validate.positive_int(win_length, "win_length", where)
    if wl > n_fft:
        raise ValueError(f"{where}: win_length={wl} must be <= n_fft={n_fft}")
    return n_fft, hop, wl, _bool(center, "center", where), _bool(normalized, "normalized", where)


@public(STFT, "tensor option option option tensor|option option option option option")
@E.promotes_half
def stft(input: Any, n_fft: int, hop_length: int | None = None, win_length: int | None = None,
         window: Any = None, center: bool = True, pad_mode: str = "reflect", normalized: bool = False,
         onesided: bool | None = None):
    """Short-time Fourier transform (torch.stft conventions, complex result).

    Parameters
    ----------
    input : torch.Tensor, ComplexTensor or numpy.ndarray
        Signal, shape ``(L,)`` or ``(B, L)``, real or complex floating.
    n_fft : int
        Frame (and transform) length.
    hop_length : int, optional
        Frame step (default ``n_fft // 4``).
    win_length : int, optional
        Window length ``<= n_fft`` (default ``n_fft``).
    window : torch.Tensor or str, optional
        1-D window of length ``win_length``, or a name: ``"hann"``,
        ``"hamming"``, ``"blackman"``, ``"bartlett"`` (periodic, as
        ``torch.hann_window(win_length)`` / SciPy's ``get_window``) or
        ``"boxcar"``/``"rectangular"``. Default: the periodic Hann window,
        as the published trnfft and ``scipy.signal.stft``. torch.stft's
        default is rectangular: pass ``window="boxcar"`` (or
        ``torch.ones(win_length)``) to reproduce it.
    center : bool, optional
        Pad ``n_fft // 2`` on both sides first (default True).
    pad_mode : {"reflect", "constant", "replicate", "circular"}, optional
    normalized : bool, optional
        Multiply by ``n_fft ** -0.5``.
    onesided : bool, optional
        Keep ``n_fft // 2 + 1`` frequencies (default True for real input;
        complex input needs False).

    Returns
    -------
    torch.Tensor, ComplexTensor or numpy.ndarray
        Complex, shape ``(B?, n_freq, n_frames)`` with
        ``n_frames = 1 + (L_padded - n_fft) // hop_length``.

    Raises
    ------
    TypeError
        Bad kinds/dtypes, non-bool flags.
    ValueError
        Non-positive sizes, ``win_length > n_fft``, signal shorter than
        the frame (or than the reflect padding), wrong window shape,
        one-sided output of complex input, unknown ``pad_mode``.

    Examples
    --------
    >>> import torch, trnfft
    >>> trnfft.stft(torch.ones(64), 16, hop_length=4).shape     # periodic Hann window
    torch.Size([9, 17])
    """
    where = "stft"
    x, ct = E.prep(input, where)
    validate.ndim(x, "input", (1, 2), where)
    n_fft, hop, wl, center, normalized = _common(where, n_fft, hop_length, win_length, center, normalized)
    pad_mode = _PAD(pad_mode, "pad_mode", where)
    one = (not x.is_complex()) if onesided is None else _bool(onesided, "onesided", where)
    if one and x.is_complex():
        raise ValueError(f"{where}: onesided=True needs real input; pass onesided=False for complex input")
    L = x.shape[-1]
    if L == 0:
        raise ValueError(f"{where}: the signal is empty (input has shape {tuple(x.shape)})")
    if center:
        if pad_mode == "reflect" and n_fft // 2 >= L:
            raise ValueError(f"{where}: input has {L} samples; reflect padding of {n_fft // 2} (n_fft // 2) "
                             "needs more (or pass pad_mode='constant')")
        L += 2 * (n_fft // 2)
    if L < n_fft:
        raise ValueError(f"{where}: the signal ({L} samples after padding) is shorter than n_fft={n_fft}")
    w = _window(window, wl, x, where)
    args = (n_fft, hop, wl, w, center, pad_mode, normalized, one)
    if ct == E.TORCH and x is input and (w is window or not isinstance(window, torch.Tensor)):
        return call(STFT, x, *args, via=_stft_via(x, window, args))
    return E.wrap(STFT(x, *args), ct)


def _stft_via(x, window, args):
    """What the torch lowering computes for a validated stft call, as a function of the input and the
    caller's window (:func:`trnsci.settled.call`'s ``via``): the caller's window tensor on every call (it
    was used as given), or the window built once from its name."""
    n_fft, hop, wl, w, center, pad_mode, normalized, one = args

    def via(lowering):
        if isinstance(window, torch.Tensor):
            def go(x, window):
                return lowering(x, n_fft, hop, wl, window, center, pad_mode, normalized, one)
        else:
            def go(x, window):
                return lowering(x, n_fft, hop, wl, w, center, pad_mode, normalized, one)
        return go, (x, window)

    return via


@validate.numpy_io
@E.promotes_half
def istft(input: Any, n_fft: int, hop_length: int | None = None, win_length: int | None = None,
          window: Any = None, center: bool = True, normalized: bool = False, onesided: bool | None = None,
          length: int | None = None, return_complex: bool = False):
    """Inverse short-time Fourier transform (torch.istft conventions).

    Parameters
    ----------
    input : torch.Tensor, ComplexTensor or numpy.ndarray
        Complex spectrogram ``(B?, n_freq, n_frames)`` as made by :func:`stft`.
    n_fft, hop_length, win_length, window, center, normalized
        As given to :func:`stft` (the same default window, periodic Hann).
    onesided : bool, optional
        Whether ``input`` holds the one-sided spectrum (default: inferred
        from ``n_freq == n_fft // 2 + 1``).
    length : int, optional
        Trim or zero-pad the output to this many samples.
    return_complex : bool, optional
        Return a complex signal (needs ``onesided=False``).

    Returns
    -------
    torch.Tensor or numpy.ndarray
        The signal ``(B?, L)``.

    Raises
    ------
    TypeError
        Real-valued ``input`` or bad argument kinds.
    ValueError
        Shapes inconsistent with ``n_fft``, or a window whose overlap-added
        square vanishes somewhere (NOLA).

    Examples
    --------
    >>> import torch, trnfft
    >>> x = torch.randn(100, dtype=torch.float64)
    >>> w = torch.hann_window(16, dtype=torch.float64)
    >>> S = trnfft.stft(x, 16, 4, window=w)
    >>> bool(torch.allclose(trnfft.istft(S, 16, 4, window=w, length=100), x))
    True
    """
    where = "istft"
    S, ct = E.prep(input, where)
    if not S.is_complex():
        raise TypeError(f"{where}: input must be a complex spectrogram, got dtype {S.dtype}")
    validate.ndim(S, "input", (2, 3), where)
    n_fft, hop, wl, center, normalized = _common(where, n_fft, hop_length, win_length, center, normalized)
    nf = S.shape[-2]
    one = (nf != n_fft) if onesided is None else _bool(onesided, "onesided", where)
    want = n_fft // 2 + 1 if one else n_fft
    if nf != want:
        raise ValueError(f"{where}: input has {nf} frequency bins; n_fft={n_fft} "
                         f"{'one-sided' if one else 'two-sided'} needs {want}")
    if S.shape[-1] < 1:
        raise ValueError(f"{where}: input has no frames")
    if length is not None:
        length = validate.positive_int(length, "length", where)
    rc = _bool(return_complex, "return_complex", where)
    if rc and one:
        raise ValueError(f"{where}: return_complex=True needs onesided=False")
    w = _window(window, wl, S, where)
    try:
        y = ISTFT(S, n_fft, hop, wl, w, center, normalized, one, length, rc)
    except RuntimeError as e:  # torch's NOLA / size checks
        raise ValueError(f"{where}: {e}") from None
    return E.wrap(y, ct)

