"""The default arithmetic mode of every transform (overridden per call by ``precision=``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from . import _engine as E
from . import _routes

PRECISIONS = E.PRECISIONS


def set_precision(mode: str) -> None:
    """Set the default precision mode for all trnfft transforms in this process.

    Parameters
    ----------
    mode : {"fast", "kahan", "double", "bf16", "bf16_refined"}
        * ``"fast"`` -- float32 data, float32 arithmetic (torch.fft on the torch path);
        * ``"kahan"`` -- float32 data, compensated Stockham/Bluestein
          (TwoSum-corrected butterflies, split twiddles);
        * ``"double"`` -- float64 arithmetic inside, result in the input's precision;
        * ``"bf16"`` -- DFT-as-GEMM with bfloat16 operands and float32
          accumulation (the Tensor Engine's fast mode; ~3 significant digits);
        * ``"bf16_refined"`` -- ``"bf16"`` plus one residual correction
          (operands split into bf16 high + low parts, three GEMMs; ~5 digits).

        float64 inputs are always computed in float64.

    Raises
    ------
    ValueError
        Unknown mode.

    Examples
    --------
    >>> import trnfft
    >>> trnfft.set_precision("double"); trnfft.get_precision()
    'double'
    >>> trnfft.set_precision("fast")
    """
    E._precision[0] = E.PRECISION(mode, "mode", "set_precision")
    _routes.clear()  # settled per-call routes were chosen under the old default


def get_precision() -> str:
    """The current default precision mode (initially ``"fast"``).

    Examples
    --------
    >>> import trnfft
    >>> trnfft.get_precision()
    'fast'
    """
    return E._precision[0]


@contextlib.contextmanager
def use_precision(mode: str) -> Iterator[None]:
    """Context manager: the default precision is ``mode`` inside the ``with`` block.

    Examples
    --------
    >>> import torch, trnfft
    >>> with trnfft.use_precision("kahan"):
    ...     trnfft.get_precision()
    'kahan'
    """
    old = E._precision[0]
    set_precision(mode)
    try:
        yield
    finally:
        E._precision[0] = old
        _routes.clear()
