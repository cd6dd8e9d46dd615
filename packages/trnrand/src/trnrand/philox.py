"""The Philox4x32 block function, public for known-answer testing."""

from __future__ import annotations

import numpy as np
import torch

from trnsci import validate
from trnsci.dispatch import Op

from ._philox import _philox_torch
from .distributions import THRESHOLD

_INTS = (torch.int64, torch.int32, torch.uint32, torch.uint8, torch.int16, torch.uint16, torch.uint64)


def _words_arg(x, name, last, where="philox4x32"):
    if isinstance(x, (list, tuple)):
        try:
            a = np.asarray(x, dtype=object)
        except ValueError:
            raise ValueError(f"{where}: {name} must be a rectangular nest of lists") from None
        flat = a.ravel()
        if any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) for v in flat):
            raise TypeError(f"{where}: {name} must hold integers 0 .. 2**32-1")
        if any(v < 0 or v > 0xFFFFFFFF for v in flat):
            raise ValueError(f"{where}: {name} words must be in 0 .. 2**32-1")
        x = torch.from_numpy(a.astype(np.int64))
    t = validate.tensor(x, name, where)
    if t.dtype not in _INTS:
        raise TypeError(f"{where}: {name} must have an integer dtype, got {str(t.dtype).replace('torch.', '')}")
    if t.dim() < 1 or t.shape[-1] != last:
        raise ValueError(f"{where}: {name} must have shape (..., {last}), got {tuple(t.shape)}")
    if t.dtype == torch.uint64:
        t = t.to(torch.float64)  # only to range-check below; values < 2**53 convert exactly
    t = t.to(torch.int64)
    if t.numel() and (bool((t < 0).any()) or bool((t > 0xFFFFFFFF).any())):
        raise ValueError(f"{where}: {name} words must be in 0 .. 2**32-1")
    return t


@validate.numpy_io
def philox4x32(counter, key, rounds=10):
    """The Philox4x32-``rounds`` block function (Salmon et al., SC'11) on uint32 words.

    Parameters
    ----------
    counter : tensor, array or list of shape (..., 4)
        Counter words (least significant first), integers 0 .. 2**32-1.
    key : tensor, array or list of shape (..., 2)
        Key words; broadcast against ``counter``'s leading dims.
    rounds : int
        1 .. 16 (10 is Philox4x32-10, the generator's).

    Returns
    -------
    torch.Tensor (NumPy for NumPy input)
        Shape (..., 4): uint32 values held in int64 (uint32 for uint32 input).

    Raises
    ------
    TypeError
        Non-integer inputs.
    ValueError
        Wrong trailing dimension, words outside 0 .. 2**32-1, rounds outside 1 .. 16.

    Examples
    --------
    >>> import trnrand
    >>> [hex(v) for v in trnrand.philox4x32([0, 0, 0, 0], [0, 0]).tolist()]
    ['0x6627e8d5', '0xe169c58d', '0xbc57ac4c', '0x9b00dbd8']
    """
    r = validate.integer(rounds, "rounds", "philox4x32", minimum=1)
    if r > 16:
        raise ValueError(f"philox4x32: rounds must be <= 16, got {r}")
    in_dtype = counter.dtype if isinstance(counter, torch.Tensor) else None
    c = _words_arg(counter, "counter", 4)
    k = _words_arg(key, "key", 2)
    try:
        lead = torch.broadcast_shapes(c.shape[:-1], k.shape[:-1])
    except RuntimeError:
        raise ValueError(
            f"philox4x32: counter {tuple(c.shape)} and key {tuple(k.shape)} leading dims do not broadcast"
        ) from None
    c = c.expand(*lead, 4)
    k = k.expand(*lead, 2).to(c.device)
    out = PHILOX4X32(c, k, r)
    return out.to(torch.uint32) if in_dtype == torch.uint32 else out


# threshold: see trnrand.distributions.THRESHOLD (a guess; no hardware here to calibrate it)
PHILOX4X32 = Op("trnrand.philox4x32", "samples", THRESHOLD, size=lambda c, k, r: float(c.numel()),
                dtype=lambda c, k, r: c.dtype, doc="Philox4x32-r of explicit counters and keys; samples = words",
                schema="(Tensor counter, Tensor key, int rounds) -> Tensor",  # torch.ops.trnrand.philox4x32
                fake=lambda c, k, r: torch.empty(c.shape, dtype=torch.int64, device=c.device),
                differentiable=False)


@PHILOX4X32.lowering("torch")
def _philox4x32_torch(c, k, r):
    return _philox_torch(c, k, r)
