"""GeneratorProgram: a reusable plan filling several named buffers from one generator."""

from __future__ import annotations

import torch

from trnsci import validate

from . import distributions as D
from . import generator as _generator

_KINDS = ("uniform", "normal", "exponential")


class GeneratorProgram:
    """Fill several named buffers with several distributions per call, advancing the generator.

    Build one with :meth:`Generator.new_program`, add steps with
    :meth:`uniform`, :meth:`normal`, :meth:`exponential` (each names its
    output buffer), then :meth:`build`. Each :meth:`stream_into` call fills
    the buffers in step order with exactly the numbers the matching
    ``*_into`` calls would give from the generator's current state, and
    leaves the generator after them, so repeated calls continue the stream.
    (The NKI phase runs one kernel call per step that fills the whole buffer.)

    Examples
    --------
    >>> import torch, trnrand
    >>> g = trnrand.Generator(seed=5)
    >>> prog = g.new_program().uniform(4, low=-1.0, high=1.0, out="u").exponential(3, rate=2.0, out="e").build()
    >>> bufs = {"u": torch.empty(4), "e": torch.empty(3)}
    >>> prog.stream_into(bufs)
    >>> h = trnrand.Generator(seed=5)
    >>> bool((bufs["u"] == trnrand.uniform(4, low=-1.0, high=1.0, generator=h)).all())
    True
    """

    def __init__(self, generator):
        self._generator = generator
        self._steps: list[tuple[str, int, dict, str]] = []
        self._built = False

    def _add(self, kind, n, out, **params):
        where = f"GeneratorProgram.{kind}"
        if self._built:
            raise ValueError(f"{where}: the program is already built")
        n = validate.integer(n, "n", where, minimum=0)
        if not isinstance(out, str):
            raise TypeError(f"{where}: out must be a str (the buffer's name), got {type(out).__name__}")
        if any(s[3] == out for s in self._steps):
            raise ValueError(f"{where}: buffer name {out!r} is already used")
        check = {"uniform": D.uniform, "normal": D.normal, "exponential": D.exponential}[kind]
        check(0, **params, generator=self._generator)  # validates the parameters, draws nothing
        self._steps.append((kind, n, params, out))
        return self

    def uniform(self, n, low=0.0, high=1.0, out="u"):
        """Add ``n`` U[low, high) samples into buffer ``out``; returns the program."""
        return self._add("uniform", n, out, low=low, high=high)

    def normal(self, n, mean=0.0, std=1.0, out="z"):
        """Add ``n`` N(mean, std**2) samples into buffer ``out``; returns the program."""
        return self._add("normal", n, out, mean=mean, std=std)

    def exponential(self, n, rate=1.0, out="e"):
        """Add ``n`` Exponential(rate) samples into buffer ``out``; returns the program."""
        return self._add("exponential", n, out, rate=rate)

    def build(self):
        """Freeze the steps (ValueError when there are none); returns the program."""
        if not self._steps:
            raise ValueError("GeneratorProgram.build: add at least one step (uniform, normal, exponential) first")
        self._built = True
        return self

    @property
    def steps(self):
        """The steps as (distribution, n, parameters, buffer name) tuples."""
        return list(self._steps)

    def __repr__(self):
        body = ", ".join(f"{k}({n}) -> {o!r}" for k, n, _, o in self._steps)
        return f"GeneratorProgram[{body}] on {self._generator!r}"

    def stream_into(self, buffers):
        """Fill ``buffers`` (a dict name -> float32/float64 tensor with ``n`` elements) in step order."""
        where = "GeneratorProgram.stream_into"
        if not self._built:
            raise ValueError(f"{where}: call build() first")
        if not isinstance(buffers, dict):
            raise TypeError(f"{where}: buffers must be a dict of name -> tensor, got {type(buffers).__name__}")
        for _kind, n, _, out in self._steps:
            if out not in buffers:
                raise ValueError(f"{where}: buffers has no entry {out!r}")
            b = buffers[out]
            if not isinstance(b, torch.Tensor):
                raise TypeError(f"{where}: buffers[{out!r}] must be a torch.Tensor, got {type(b).__name__}")
            if b.numel() != n:
                raise ValueError(f"{where}: buffers[{out!r}] must have {n} elements, got {b.numel()}")
            if b.dtype not in (torch.float32, torch.float64):
                raise TypeError(f"{where}: buffers[{out!r}] must be float32 or float64, got {b.dtype}")
        fill = {"uniform": D.uniform_into, "normal": D.normal_into, "exponential": D.exponential_into}
        for kind, _, params, out in self._steps:
            fill[kind](buffers[out], **params, generator=self._generator)


_generator._PROGRAM = GeneratorProgram  # Generator.new_program
