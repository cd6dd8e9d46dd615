"""Frequency grids and spectrum shifts: fftfreq, rfftfreq, fftshift, ifftshift."""

from __future__ import annotations

import numbers
from typing import Any

import torch

from trnsci import validate

from .complex import ComplexTensor


def _d(d: Any, where: str) -> float:
    if isinstance(d, bool) or not isinstance(d, numbers.Real):
        raise TypeError(f"{where}: d must be a real number, got {type(d).__name__}")
    d = float(d)
    if not d > 0 or d == float("inf"):
        raise ValueError(f"{where}: d (the sample spacing) must be positive and finite, got {d}")
    return d


def _fdtype(dtype: Any, where: str) -> torch.dtype:
    if dtype is None:
        return torch.get_default_dtype()
    if dtype is not torch.float32 and dtype is not torch.float64:  # identity: arrays compare elementwise
        raise TypeError(f"{where}: dtype must be torch.float32 or torch.float64, got {dtype!r}")
    return dtype


def _fftfreq_torch(n: int, d: float, dtype: torch.dtype, device) -> torch.Tensor:
    k = torch.arange(n, device=device, dtype=torch.float64)
    k = torch.where(k >= (n + 1) // 2, k - n, k)
    return (k / (n * d)).to(dtype)


def _rfftfreq_torch(n: int, d: float, dtype: torch.dtype, device) -> torch.Tensor:
    return (torch.arange(n // 2 + 1, device=device, dtype=torch.float64) / (n * d)).to(dtype)


def fftfreq(n: int, d: float = 1.0, *, dtype: torch.dtype | None = None, device: Any = None) -> torch.Tensor:
    """Sample frequencies of :func:`fft`: ``[0, 1, ..., ceil(n/2)-1, -floor(n/2), ..., -1] / (d n)``.

    Parameters
    ----------
    n : int
        Transform length (positive).
    d : float, optional
        Sample spacing (default 1.0), positive.
    dtype : torch.float32 or torch.float64, optional
        Default: torch's default dtype. Computed in float64, then cast.
    device : torch.device, optional

    Returns
    -------
    torch.Tensor
        Shape ``(n,)``, cycles per unit of ``d``.

    Raises
    ------
    TypeError
        Non-int ``n``, non-real ``d``, bad ``dtype``.
    ValueError
        ``n <= 0`` or ``d <= 0``.

    Examples
    --------
    >>> import trnfft
    >>> trnfft.fftfreq(5, d=0.5)
    tensor([ 0.0000,  0.4000,  0.8000, -0.8000, -0.4000])
    """
    return _fftfreq_torch(validate.positive_int(n, "n", "fftfreq"), _d(d, "fftfreq"), _fdtype(dtype, "fftfreq"),
                          validate.device(device, "fftfreq"))


def rfftfreq(n: int, d: float = 1.0, *, dtype: torch.dtype | None = None, device: Any = None) -> torch.Tensor:
    """Sample frequencies of :func:`rfft`: ``[0, 1, ..., n//2] / (d n)``.

    Parameters and errors as for :func:`fftfreq`; the result has ``n // 2 + 1`` entries.

    Examples
    --------
    >>> import trnfft
    >>> trnfft.rfftfreq(4)
    tensor([0.0000, 0.2500, 0.5000])
    """
    return _rfftfreq_torch(validate.positive_int(n, "n", "rfftfreq"), _d(d, "rfftfreq"), _fdtype(dtype, "rfftfreq"),
                           validate.device(device, "rfftfreq"))


def _shift_torch(x: torch.Tensor, dims: tuple, inverse: bool) -> torch.Tensor:
    if not dims:  # a 0-d input: no axis to shift, so a copy (NumPy 2.x raises in roll here)
        return x.clone()
    shifts = tuple((-(x.shape[d] // 2)) if inverse else (x.shape[d] // 2) for d in dims)
    return torch.roll(x, shifts, dims)


def _shift(where: str, x: Any, dim: Any, axes: Any, inverse: bool):
    name = "dim" if axes is None else "axes"
    dim = validate.alias(where, "dim", dim, "axes", axes)
    if isinstance(x, ComplexTensor):
        dims = tuple(range(x.ndim)) if dim is None else validate.axes(dim, x.ndim, name, where)
        return ComplexTensor._make(_shift_torch(x.real, dims, inverse), _shift_torch(x.imag, dims, inverse))
    t = validate.tensor(x, "x", where)
    dims = tuple(range(t.dim())) if dim is None else validate.axes(dim, t.dim(), name, where)
    return _shift_torch(t, dims, inverse)


@validate.numpy_io
def fftshift(x: Any, dim: Any = None, *, axes: Any = None):
    """Move the zero-frequency entry to the centre: roll each ``dim`` by ``n // 2``.

    Parameters
    ----------
    x : ComplexTensor, torch.Tensor or numpy.ndarray
        Any dtype (it only moves entries).
    dim : int or sequence of int, optional
        Axes to shift (default all). ``axes`` is an alias.

    Returns
    -------
    Same kind as ``x``, same shape.

    Raises
    ------
    TypeError
        Non-tensor ``x``.
    ValueError
        ``dim`` out of range or repeated.

    Examples
    --------
    >>> import trnfft
    >>> trnfft.fftshift(trnfft.fftfreq(5))
    tensor([-0.4000, -0.2000,  0.0000,  0.2000,  0.4000])
    """
    return _shift("fftshift", x, dim, axes, False)


@validate.numpy_io
def ifftshift(x: Any, dim: Any = None, *, axes: Any = None):
    """Inverse of :func:`fftshift` (roll by ``-(n // 2)``; differs for odd ``n``).

    Examples
    --------
    >>> import torch, trnfft
    >>> trnfft.ifftshift(trnfft.fftshift(torch.arange(5)))
    tensor([0, 1, 2, 3, 4])
    """
    return _shift("ifftshift", x, dim, axes, True)
