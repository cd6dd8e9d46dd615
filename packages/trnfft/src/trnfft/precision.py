"""The default arithmetic mode of every transform (overridden per call by ``precision=``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from . import _engine as E
from . import _host
from . import algorithms as A

PRECISIONS = E.PRECISIONS


def set_precision(mode: str) -> None:
    """Set the default precision mode for all trnfft transforms in this process.

    Parameters
    ----------
    mode : {"fast", "kahan", "double", "bf16", "bf16_refined", "ozaki", "ozaki_hq"}
        * ``"fast"`` -- float32 data, float32 arithmetic (torch.fft on the torch path);
        * ``"kahan"`` -- float32 data, compensated Stockham/Bluestein
          (TwoSum-corrected butterflies, split twiddles);
        * ``"double"`` -- float64 arithmetic inside, result in the input's precision;
        * ``"bf16"`` -- DFT-as-GEMM with bfloat16 operands and float32
          accumulation (the Tensor Engine's fast mode; ~3 significant digits);
        * ``"bf16_refined"`` -- ``"bf16"`` plus one residual correction
          (operands split into bf16 high + low parts, three GEMMs; ~5 digits);
        * ``"ozaki"`` -- Ozaki-scheme DFT-as-GEMM: each operand cut into
          slices of 4 significant bits (16 bits kept), the slice products
          with combined weight above ``2**-16`` added in float32 (10
          slice-pair GEMMs; ~6e-7 normwise). Every slice product is exact
          in bf16, so the bound holds where the Tensor Engine rounds
          bf16 x bf16 products to bf16 (see
          :func:`set_ozaki_product_precision_verified`);
        * ``"ozaki_hq"`` -- the same with 24 bits kept (6 slices, 21
          slice-pair GEMMs; float32 grade, ~1e-7).

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
    _host.clear()  # settled per-call routes were chosen under the old default


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
        _host.clear()


def set_ozaki_product_precision_verified(verified: bool = True) -> None:
    """Declare whether the Tensor Engine's bf16 x bf16 products are exact before PSUM accumulation.

    The ``"ozaki"`` / ``"ozaki_hq"`` modes cut each GEMM operand into slices
    whose pairwise products must be exact. By default (``False``) the slices
    carry 4 significant bits, so every product has at most 8 and is exact
    even when the hardware rounds each product to bf16 -- as the published
    trnfft measured on trn1 and trn2 (SDK 2.29), where 8-bit slices left the
    Ozaki modes at ~1.7e-3, the error of plain ``"bf16"``. ``True`` declares
    the products exact (fp32 products of bf16 operands; check it on the
    instance type first, e.g. with ``precision="ozaki"`` against a float64
    reference): the slices then carry 8 bits and the modes need about half
    the GEMMs (3 instead of 10 for ``"ozaki"``, 6 instead of 21 for
    ``"ozaki_hq"``) for the same bound. On hardware that rounds the
    products, ``True`` makes the Ozaki modes no better than ``"bf16"``.

    Parameters
    ----------
    verified : bool, default True
        Whether bf16 x bf16 products are exact on this hardware.

    Raises
    ------
    TypeError
        ``verified`` is not a bool.

    Examples
    --------
    >>> import trnfft
    >>> trnfft.set_ozaki_product_precision_verified(False)  # the default: 4-bit slices
    """
    if not isinstance(verified, bool):
        raise TypeError(f"set_ozaki_product_precision_verified: verified must be a bool, "
                        f"got {type(verified).__name__}")
    A._ozaki_verified[0] = verified
    _host.clear()  # routes and plans were settled for the old slicing
