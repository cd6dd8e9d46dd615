"""Threefry4x32-20: the block function and streaming uniform / normal draws.

A second counter-based generator beside Philox4x32-10, built from 32-bit
additions, rotations and xors only (no integer multiply): on a NeuronCore
exact 32-bit arithmetic is the GpSimd engine's, and Threefry needs no
products there (see :mod:`trnrand._threefry` for the definition and the
stream, :mod:`trnrand.kernels.threefry` for the kernel).
"""

from __future__ import annotations

import torch

from trnsci import validate
from trnsci.dispatch import Op

from . import _threefry as T
from .distributions import _KEYED, THRESHOLD
from .philox import _words_arg

_U64 = 1 << 64


@validate.numpy_io
def threefry4x32(counter, key, rounds=20):
    """The Threefry4x32-``rounds`` block function (Salmon et al., SC'11; Random123) on uint32 words.

    Parameters
    ----------
    counter : tensor, array or list of shape (..., 4)
        Counter words (least significant first), integers 0 .. 2**32-1.
    key : tensor, array or list of shape (..., 4)
        Key words; broadcast against ``counter``'s leading dims.
    rounds : int
        1 .. 72 (20 is Threefry4x32-20, the stream's).

    Returns
    -------
    torch.Tensor (NumPy for NumPy input)
        Shape (..., 4): uint32 values held in int64 (uint32 for uint32 input).

    Raises
    ------
    TypeError
        Non-integer inputs.
    ValueError
        Wrong trailing dimension, words outside 0 .. 2**32-1, rounds outside 1 .. 72.

    Examples
    --------
    >>> import trnrand
    >>> [hex(v) for v in trnrand.threefry4x32([0, 0, 0, 0], [0, 0, 0, 0]).tolist()]
    ['0x9c6ca96a', '0xe17eae66', '0xfc10ecd4', '0x5256a7d8']
    """
    where = "threefry4x32"
    r = validate.integer(rounds, "rounds", where, minimum=1)
    if r > T.MAX_ROUNDS:
        raise ValueError(f"{where}: rounds must be <= {T.MAX_ROUNDS}, got {r}")
    in_dtype = counter.dtype if isinstance(counter, torch.Tensor) else None
    c = _words_arg(counter, "counter", 4, where)
    k = _words_arg(key, "key", 4, where)
    try:
        lead = torch.broadcast_shapes(c.shape[:-1], k.shape[:-1])
    except RuntimeError:
        raise ValueError(
            f"{where}: counter {tuple(c.shape)} and key {tuple(k.shape)} leading dims do not broadcast"
        ) from None
    c = c.expand(*lead, 4)
    k = k.expand(*lead, 4).to(c.device)
    out = THREEFRY4X32(c, k, r)
    return out.to(torch.uint32) if in_dtype == torch.uint32 else out


def _stream_args(n, seed, counter_offset, subsequence, device, where):
    n = validate.integer(n, "n", where, minimum=0)
    seed = validate.integer(seed, "seed", where, minimum=0)
    if seed >= _U64:
        raise ValueError(f"{where}: seed must be in [0, 2**64), got {seed}")
    off = validate.integer(counter_offset, "counter_offset", where, minimum=0)
    if off + (n + 3) // 4 > _U64:
        raise ValueError(f"{where}: counter_offset + ceil(n / 4) must be <= 2**64 (the 64-bit block counter)")
    sub = validate.integer(subsequence, "subsequence", where, minimum=0)
    if sub >= _U64:
        raise ValueError(f"{where}: subsequence must be in [0, 2**64), got {sub}")
    if device is None:
        dev = torch.device("cpu")
    elif isinstance(device, (str, torch.device)):
        try:
            dev = torch.device(device)
            torch.empty(0, device=dev)
        except (RuntimeError, AssertionError) as e:
            raise ValueError(f"{where}: device {str(device)!r} is not usable here ({str(e).splitlines()[0]})") from None
    else:
        raise TypeError(f"{where}: device must be a str, torch.device or None, got {type(device).__name__}")
    return n, seed, off, sub, dev


def threefry_stream_uniform(n, seed=0, counter_offset=0, *, subsequence=0, device=None):
    """``n`` float32 uniforms in [0, 1) from the Threefry4x32-20 stream, starting at block ``counter_offset``.

    Sample ``i`` is ``(w >> 8) 2**-24`` of stream word ``4 counter_offset + i``
    (block ``b = counter_offset + i // 4``, lane ``i % 4`` of
    ``threefry4x32_20(counter=(b mod 2**32, b >> 32, s mod 2**32, s >> 32),
    key=(seed mod 2**32, seed >> 32, 0, 0))``, ``s = subsequence``), so
    draws are streamed by advancing ``counter_offset`` by ``ceil(n / 4)``
    blocks and give the same bits on every backend.

    Parameters
    ----------
    n : int
        Number of samples (>= 0).
    seed : int
        Key, 0 .. 2**64-1.
    counter_offset : int
        First block of the draw (4 samples per block), >= 0.
    subsequence : int, optional
        Independent stream of the same seed (counter words 2 and 3), 0 .. 2**64-1.
    device : str or torch.device, optional
        Where the result goes (default CPU).

    Returns
    -------
    torch.Tensor
        Shape (n,), float32.

    Raises
    ------
    TypeError
        Non-integer n, seed, counter_offset or subsequence; a bad device type.
    ValueError
        Negative or out-of-range values.

    Examples
    --------
    >>> import trnrand
    >>> a = trnrand.threefry_stream_uniform(8, seed=7)
    >>> b = trnrand.threefry_stream_uniform(4, seed=7, counter_offset=1)
    >>> bool((a[4:] == b).all())
    True
    """
    n, seed, off, sub, dev = _stream_args(n, seed, counter_offset, subsequence, device,
                                          "threefry_stream_uniform")
    return THREEFRY_UNIFORM(seed, sub, off, n, dev)


def threefry_stream_normal(n, seed=0, counter_offset=0, *, subsequence=0, device=None):
    """``n`` float32 standard normals from the Threefry4x32-20 stream, starting at block ``counter_offset``.

    Words ``(4b, 4b+1)`` and ``(4b+2, 4b+3)`` of each block ``b`` are two
    Box-Muller pairs (the map of :func:`trnrand.normal`'s float32 pairs):
    sample ``i`` is ``z`` (even ``i``) or ``z'`` (odd ``i``) of pair
    ``i // 2`` from block ``counter_offset``; an odd ``n`` drops the last
    ``z'``. Advance ``counter_offset`` by ``ceil(n / 4)`` to stream.

    Parameters
    ----------
    n : int
        Number of samples (>= 0).
    seed : int
        Key, 0 .. 2**64-1.
    counter_offset : int
        First block of the draw (4 samples per block), >= 0.
    subsequence : int, optional
        Independent stream of the same seed, 0 .. 2**64-1.
    device : str or torch.device, optional
        Where the result goes (default CPU).

    Returns
    -------
    torch.Tensor
        Shape (n,), float32.

    Raises
    ------
    TypeError
        Non-integer n, seed, counter_offset or subsequence; a bad device type.
    ValueError
        Negative or out-of-range values.

    Examples
    --------
    >>> import trnrand
    >>> z = trnrand.threefry_stream_normal(10000, seed=1)
    >>> abs(float(z.mean())) < 0.05 and abs(float(z.std()) - 1) < 0.05
    True
    """
    n, seed, off, sub, dev = _stream_args(n, seed, counter_offset, subsequence, device,
                                          "threefry_stream_normal")
    return THREEFRY_NORMAL(seed, sub, off, n, dev)


def _samples(seed, sub, off, n, dev) -> float:
    return float(n)


def _f32(seed, sub, off, n, dev):
    return torch.float32


def _describe(seed, sub, off, n, dev) -> str:
    return f"{n} samples, seed={seed}, subsequence={sub}, stream blocks from {off}"


# threshold: see trnrand.distributions.THRESHOLD (a guess; no hardware here to calibrate it)
# Also torch operators (torch.ops.trnrand.threefry4x32, ...; no derivative). The streams' (seed,
# subsequence, block offset) cross as a key tensor (trnrand.generator.key_tensor).
_STREAM = "(Tensor key, int n, Device device) -> Tensor"


def _stream_fake(key, n, dev):
    return torch.empty(n, dtype=torch.float32, device=dev)


def _block_fake(c, k, r):
    return torch.empty(c.shape, dtype=torch.int64, device=c.device)


THREEFRY4X32 = Op("trnrand.threefry4x32", "samples", THRESHOLD, size=lambda c, k, r: float(c.numel()),
                  dtype=lambda c, k, r: c.dtype, doc="Threefry4x32-r of explicit counters and keys; samples = words",
                  schema="(Tensor counter, Tensor key, int rounds) -> Tensor", fake=_block_fake,
                  differentiable=False)
THREEFRY_UNIFORM = Op("trnrand.threefry_stream_uniform", "samples", THRESHOLD, size=_samples, describe=_describe,
                      dtype=_f32, doc="float32 uniforms (w >> 8) 2**-24 of the Threefry4x32-20 stream",
                      schema=_STREAM, fake=_stream_fake, **_KEYED)
THREEFRY_NORMAL = Op("trnrand.threefry_stream_normal", "samples", THRESHOLD, size=_samples, describe=_describe,
                     dtype=_f32, doc="float32 Box-Muller normals of the Threefry4x32-20 stream, two words per pair",
                     schema=_STREAM, fake=_stream_fake, **_KEYED)


@THREEFRY4X32.lowering("torch")
def _threefry4x32_torch(c, k, r):
    return T._threefry_torch(c, k, r)


@THREEFRY_UNIFORM.lowering("torch")
def _uniform_torch(seed, sub, off, n, dev):
    if n == 0:
        return torch.empty(0, dtype=torch.float32, device=dev)
    w = T.blocks(seed, sub, off, (n + 3) // 4)
    return T.uniform_words(w).reshape(-1)[:n].to(dev)


@THREEFRY_NORMAL.lowering("torch")
def _normal_torch(seed, sub, off, n, dev):
    if n == 0:
        return torch.empty(0, dtype=torch.float32, device=dev)
    w = T.blocks(seed, sub, off, (n + 3) // 4)
    return T.normal_blocks(w).reshape(-1)[:n].to(dev)
