"""The Philox4x32-10 generator: seed, subsequence, offset, partitions, programs."""

from __future__ import annotations

import os
import struct

import torch

from trnsci import validate

from . import _philox

_U64 = 1 << 64
_STATE_FORMAT = "<4sQQQQQQ"  # magic, seed, subsequence, offset lo, offset hi, partition rank, partition size
_MAGIC = b"TRP1"


def _u64(x, name: str, where: str) -> int:
    x = validate.integer(x, name, where)
    if not 0 <= x < _U64:
        raise ValueError(f"{where}: {name} must be in [0, 2**64), got {x}")
    return x


def _device(device, where: str) -> torch.device:
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"{where}: device must be a str or torch.device, got {type(device).__name__}")
    try:
        dev = torch.device(device)
        torch.empty(0, device=dev)  # an unavailable backend (e.g. "cuda" without a GPU) fails here, not mid-draw
    except (RuntimeError, AssertionError) as e:
        raise ValueError(f"{where}: device {str(device)!r} is not usable here ({str(e).splitlines()[0]})") from None
    return dev


def _entropy_seed() -> int:
    return int.from_bytes(os.urandom(8), "little")


class Generator:
    """A Philox4x32-10 random number generator with cuRAND ``curand_init`` semantics.

    The generator is a position in one stream of uint32 words, fixed by
    ``(seed, subsequence, offset)``: word ``j`` of subsequence ``s`` is lane
    ``j % 4`` of ``philox4x32_10(counter=(j//4 mod 2**32, j//4 >> 32,
    s mod 2**32, s >> 32), key=(seed mod 2**32, seed >> 32))``. Every draw
    reads the next words and moves the position past them, so the same
    ``(seed, subsequence, offset)`` gives the same numbers on every backend
    and device. Nothing is stored but those integers: moving anywhere is O(1).

    Parameters
    ----------
    seed : int or None, optional
        0 .. 2**64-1, the Philox key. ``None`` draws one from the operating
        system (``os.urandom``); read it back from :attr:`seed`.
    device : str or torch.device, optional
        Where samples are returned (default ``"cpu"``).
    partition_rank, partition_size : int, optional
        Split every draw across ``partition_size`` cooperating processes:
        a call for ``n`` samples on rank ``r`` returns samples
        ``[r*n, (r+1)*n)`` of the single-process draw of ``partition_size*n``
        samples, and every rank advances past the whole draw. Concatenating
        the ranks' results in rank order equals the single-process result.
    subsequence : int, optional
        0 .. 2**64-1: independent streams for the same seed (the counter's
        high 64 bits), as in ``curand_init(seed, subsequence, offset)``.
    offset : int, optional
        Start position in words (0 .. 2**66-1).

    Raises
    ------
    TypeError
        Non-integer seed, rank, size, subsequence or offset; a bad device type.
    ValueError
        Out-of-range values (negative, >= 2**64, rank not in [0, size)).

    Examples
    --------
    >>> import trnrand
    >>> g = trnrand.Generator(seed=42)
    >>> a = trnrand.uniform(6, generator=g)
    >>> g.position()
    6
    >>> g.advance_to(2)
    >>> bool((trnrand.uniform(4, generator=g) == a[2:]).all())
    True
    """

    def __init__(self, seed=None, device="cpu", partition_rank=0, partition_size=1, subsequence=0, offset=0):
        where = "Generator"
        self._seed = _entropy_seed() if seed is None else _u64(seed, "seed", where)
        self._device = _device(device, where)
        # every rank's draws share the 2**66 outputs of one counter: no more ranks than that
        size = validate.integer(partition_size, "partition_size", where, minimum=1, maximum=1 << 66)
        rank = validate.integer(partition_rank, "partition_rank", where, minimum=0)
        if rank >= size:
            raise ValueError(f"{where}: partition_rank must be in [0, partition_size={size}), got {rank}")
        self._rank, self._size = rank, size
        self._subsequence = _u64(subsequence, "subsequence", where)
        self._offset = validate.integer(offset, "offset", where, minimum=0)
        if self._offset >= 1 << 66:
            raise ValueError(f"{where}: offset must be < 2**66, got {self._offset}")

    # ---- identity -------------------------------------------------------------------------------------------
    @property
    def seed(self) -> int:
        """The Philox key as an int (0 .. 2**64-1)."""
        return self._seed

    @property
    def device(self) -> torch.device:
        """Device of the returned samples."""
        return self._device

    @property
    def subsequence(self) -> int:
        """The subsequence (counter words 2 and 3)."""
        return self._subsequence

    @property
    def partition_rank(self) -> int:
        return self._rank

    @property
    def partition_size(self) -> int:
        return self._size

    def __repr__(self) -> str:
        return (
            f"trnrand.Generator(seed={self._seed}, subsequence={self._subsequence}, offset={self._offset}, "
            f"partition={self._rank}/{self._size}, device='{self._device}')"
        )

    def manual_seed(self, seed) -> Generator:
        """Set the seed and restart the stream at offset 0 (subsequence and partition kept); returns self."""
        self._seed = _u64(seed, "seed", "Generator.manual_seed")
        self._offset = 0
        return self

    # ---- position ---------------------------------------------------------------------------------------------
    def position(self) -> int:
        """Words consumed so far in this subsequence (the stream offset), for checkpoint and resume."""
        return self._offset

    def advance(self, n) -> None:
        """Skip ``n`` words (>= 0) without generating them, O(1).

        A float32 uniform consumes one word per sample, float64 two; see
        ``docs/trnrand.md`` for each distribution's consumption.
        """
        n = validate.integer(n, "n", "Generator.advance", minimum=0)
        self._offset += n

    def advance_to(self, position) -> None:
        """Jump to word ``position`` (>= 0) of the subsequence, O(1)."""
        self._offset = validate.integer(position, "position", "Generator.advance_to", minimum=0)

    # ---- state -----------------------------------------------------------------------------------------------
    def get_state(self) -> torch.Tensor:
        """Everything that fixes the next numbers, as a uint8 tensor (seed, subsequence, offset, partition)."""
        off = self._offset
        raw = struct.pack(
            _STATE_FORMAT, _MAGIC, self._seed, self._subsequence, off & (_U64 - 1), off >> 64, self._rank, self._size
        )
        return torch.frombuffer(bytearray(raw), dtype=torch.uint8).clone()

    def set_state(self, state) -> None:
        """Restore a state from :meth:`get_state` (ValueError if it is not one)."""
        state = validate.tensor(state, "state", "Generator.set_state")
        n = struct.calcsize(_STATE_FORMAT)
        if state.dtype != torch.uint8 or state.dim() != 1 or state.numel() != n:
            raise ValueError(f"Generator.set_state: state must be the uint8 tensor of length {n} from get_state()")
        magic, seed, sub, lo, hi, rank, size = struct.unpack(_STATE_FORMAT, bytes(state.cpu().tolist()))
        if magic != _MAGIC or size < 1 or rank >= size:
            raise ValueError("Generator.set_state: state is not a trnrand generator state")
        self._seed, self._subsequence, self._offset = seed, sub, lo | (hi << 64)
        self._rank, self._size = rank, size

    # ---- drawing (private; distributions call these) -------------------------------------------------------------
    def _reserve(self, words_total: int) -> int:
        """Start word of the next global draw of ``words_total`` words; moves the position past it."""
        base = self._offset
        self._offset = base + words_total
        return base

    def _draw(self) -> _Draw:
        """A draw that raises -- or is only planned (``plan_call`` stops at the Op) -- leaves the position unchanged."""
        return _Draw(self)

    def _words(self, start: int, n: int) -> torch.Tensor:
        return _philox.words(self._seed, self._subsequence, start, n, self._device)

    def new_program(self):
        """A :class:`GeneratorProgram` builder drawing from this generator.

        Examples
        --------
        >>> import torch, trnrand
        >>> g = trnrand.Generator(seed=1)
        >>> prog = g.new_program().normal(1000, out="z").uniform(10, out="u").build()
        >>> bufs = {"z": torch.empty(1000), "u": torch.empty(10)}
        >>> prog.stream_into(bufs)
        >>> g.position()
        1010
        """
        return _PROGRAM(self)


#: The class :meth:`Generator.new_program` builds: :class:`trnrand.program.GeneratorProgram`, handed in when
#: trnrand.program is imported (a program draws through trnrand.distributions, which builds on this module).
_PROGRAM = None


def key_tensor(*values: int, device=None) -> torch.Tensor:
    """Non-negative integers below 2**96 (a generator's seed, subsequence and position) as an int64 tensor
    of 32-bit words, three per value, least significant first: how a generator crosses a torch operator's
    boundary (a schema's ``int`` is 64-bit signed). On the CPU, or the meta device for a meta draw."""
    dev = "meta" if device is not None and torch.device(device).type == "meta" else None
    words = []
    for v in values:
        # the third word by a comparison first: under torch.compile a position may be a symbolic int64,
        # and a shift by 64 would put a 2**64 constant in the compiled code
        words += (v & 0xFFFFFFFF, (v >> 32) & 0xFFFFFFFF, v >> 64 if v >= 1 << 64 else 0)
    return torch.tensor(words, dtype=torch.int64, device=dev)


def key_values(key: torch.Tensor) -> tuple[int, ...]:
    """The integers :func:`key_tensor` packed (one host read of its few words)."""
    w = key.tolist()
    return tuple(w[i] | (w[i + 1] << 32) | (w[i + 2] << 64) for i in range(0, len(w), 3))


_default_generator: Generator | None = None


class _Draw:
    """Context of one draw: restores the generator's position if the draw raises (a plain class: ~10x cheaper
    than a generator-based context manager on the per-call path)."""

    __slots__ = ("_g", "_start")

    def __init__(self, g: Generator):
        self._g, self._start = g, g._offset

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self._g._offset = self._start
        return False


def get_default_generator() -> Generator:
    """The generator used when a distribution gets ``generator=None`` (seeded from the OS until :func:`manual_seed`)."""
    global _default_generator
    if _default_generator is None:
        _default_generator = Generator()
    return _default_generator


def manual_seed(seed) -> Generator:
    """Replace the default generator by ``Generator(seed)`` and return it.

    Examples
    --------
    >>> import trnrand
    >>> a = (trnrand.manual_seed(3), trnrand.uniform(2))[1]
    >>> b = (trnrand.manual_seed(3), trnrand.uniform(2))[1]
    >>> bool((a == b).all())
    True
    """
    global _default_generator
    _default_generator = Generator(seed=_u64(seed, "seed", "manual_seed"))
    return _default_generator


def _resolve(generator, where: str) -> Generator:
    if generator is None:
        return get_default_generator()
    if not isinstance(generator, Generator):
        raise TypeError(f"{where}: generator must be a trnrand.Generator or None, got {type(generator).__name__}")
    return generator
