"""Real-input and Hermitian transforms: rfft, irfft, hfft, ihfft, rfft2, irfft2, rfftn, irfftn.

A real signal of length ``n`` has a Hermitian spectrum (``X[n-k] =
conj(X[k])``), so only ``n // 2 + 1`` coefficients are stored. ``irfft``
takes those back to ``n`` real samples; because ``n`` cannot be recovered
from the half length, pass ``n`` for odd lengths (the default is
``2 * (m - 1)`` for ``m`` input coefficients). The imaginary parts of the
zero-frequency (and, for even ``n``, the Nyquist) coefficient are ignored,
as in NumPy. ``hfft``/``ihfft`` are the same pair with the roles of time
and frequency swapped. Input/output kinds follow :mod:`trnfft.basic`.
"""

from __future__ import annotations

from typing import Any

import torch

from trnsci.dispatch import Op
from trnsci.settled import public

from . import _engine as E
from . import _host as R
from .basic import ROUTED, SIG1, SIGN, _many, _one

# ------------------------------------------------------------------ ops
# torch lowerings here; NKI lowerings in trnfft._nki.real (same arguments).

RFFT = Op("trnfft.rfft", "points", E.THRESHOLD_POINTS, doc="1-D real-input DFT (half spectrum); points = batch x n",
          fake=E.transform_fake("rfft", nd=False), **E.ONE_D)
IRFFT = Op("trnfft.irfft", "points", E.THRESHOLD_POINTS,
           doc="1-D inverse of rfft (real output of length n); points = batch x n",
           fake=E.transform_fake("irfft", nd=False), **E.ONE_D)
HFFT = Op("trnfft.hfft", "points", E.THRESHOLD_POINTS,
          doc="1-D DFT of a Hermitian half spectrum (real output); points = batch x n",
          fake=E.transform_fake("hfft", nd=False), **E.ONE_D)
IHFFT = Op("trnfft.ihfft", "points", E.THRESHOLD_POINTS,
           doc="1-D inverse of hfft (half spectrum of real input); points = batch x n",
           fake=E.transform_fake("ihfft", nd=False), **E.ONE_D)
RFFTN = Op("trnfft.rfftn", "points", E.THRESHOLD_POINTS,
           doc="n-D real-input DFT (also rfft2); points = batch x prod(s)", fake=E.transform_fake("rfftn", nd=True),
           **E.N_D)
IRFFTN = Op("trnfft.irfftn", "points", E.THRESHOLD_POINTS,
            doc="n-D inverse of rfftn (also irfft2); points = batch x prod(s)",
            fake=E.transform_fake("irfftn", nd=True), **E.N_D)

# ------------------------------------------------------------------ derivatives
# Each backward is the adjoint transform, run through the other Op (kernels wherever the forward ran
# them). With s the forward's scale and h = n // 2 + 1 stored coefficients:
#   rfft:  y = s P F x (P keeps the first h bins). For real x, dx = Re(F^H P^T g) = irfft(G, n) with
#          the normalization swapped, G = g with the bins 0 < k < n/2 halved (irfft counts each of them
#          twice, the zero and Nyquist bins once and ignores their imaginary parts, as Re does).
#   irfft: y_j = s (Re X_0 + 2 Re sum_{0<k<n/2} X_k w^{jk} + [n even] Re X_{n/2} (-1)^j), so
#          dX = W rfft(g, n) with the normalization swapped, W = 2 on the bins 0 < k < n/2, 1 on the
#          zero and Nyquist bins.
#   hfft(x) = irfft(conj x) and ihfft(x) = conj rfft(x) (normalizations swapped): the same with a
#          conjugate on g's side.
# A zero-padded input (its length m < the n or h the transform used) gets the leading part of the
# gradient, a truncated one zeros past what was used; a real input the real part.


def _resized(gx, m: int, dim: int):
    k = gx.shape[dim]
    if m < k:
        return gx.narrow(dim, 0, m)
    if m > k:
        pad = list(gx.shape)
        pad[dim] = m - k
        return torch.cat([gx, gx.new_zeros(pad)], dim)
    return gx


def _halve_inner(g, n: int, dim: int, factor: float):
    """``g`` with its bins ``0 < k < n/2`` times ``factor`` (0.5 for rfft's adjoint, 2 for irfft's)."""
    h = g.shape[dim]
    inner = min(h, (n + 1) // 2) - 1  # bins 1 .. ceil(n/2) - 1
    if inner <= 0:
        return g
    w = torch.ones(h, dtype=g.real.dtype, device=g.device)
    w[1:1 + inner] = factor
    shape = [1] * g.dim()
    shape[dim] = h
    return g * w.reshape(shape)


def _real_to_half_backward(inverse_op, conj: bool):
    """rfft (conj False) / ihfft (conj True): dx = the c2r Op on the weighted gradient."""
    def backward(inputs, output, g, needs):
        x, n, dim, norm, precision = inputs
        if not needs[0]:
            return None, None, None, None, None
        g = g.conj() if conj else g
        G = _halve_inner(_resized(g, n // 2 + 1, dim), n, dim, 0.5).contiguous()
        # rfft's adjoint: irfft with the normalization swapped; ihfft (= conj rfft, swapped) undoes both swaps
        gx = inverse_op(G, n, dim, norm if conj else E.swap_norm(norm), precision)
        gx = _resized(gx, x.shape[dim], dim)
        return gx.to(x.dtype) if gx.dtype != x.dtype else gx, None, None, None, None

    return backward


def _half_to_real_backward(forward_op, conj: bool):
    """irfft (conj False) / hfft (conj True): dX = W times the r2c Op of the gradient."""
    def backward(inputs, output, g, needs):
        x, n, dim, norm, precision = inputs
        if not needs[0]:
            return None, None, None, None, None
        gX = forward_op(g.contiguous(), n, dim, norm if conj else E.swap_norm(norm), precision)
        gX = _halve_inner(gX, n, dim, 2.0)
        if conj:
            gX = gX.conj().resolve_conj()
        gX = _resized(gX, x.shape[dim], dim)
        if not x.is_complex():
            gX = gX.real
        return gX.to(x.dtype) if gX.dtype != x.dtype else gX, None, None, None, None

    return backward


RFFT.backward(_real_to_half_backward(IRFFT, False),
              formula="dx = Re(F^H g): irfft of g (inner bins halved) with the normalization swapped",
              runs="one `trnfft.irfft` call")
IHFFT.backward(_real_to_half_backward(IRFFT, True),
               formula="dx = irfft of conj(g) (inner bins halved), the normalization as given",
               runs="one `trnfft.irfft` call")
IRFFT.backward(_half_to_real_backward(RFFT, False),
               formula="dX = W rfft(g) with the normalization swapped; W = 2 on the bins 0 < k < n/2, 1 on "
                       "the zero and Nyquist bins",
               runs="one `trnfft.rfft` call")
HFFT.backward(_half_to_real_backward(RFFT, True),
              formula="dX = conj(W rfft(g)), the normalization as given; W as for irfft",
              runs="one `trnfft.rfft` call")

# ------------------------------------------------------------------ torch lowerings

# In precision "fast" each runs the route trnfft._host settled for the call.


def _r2c_modes(x, s, dims, norm, precision):
    if precision == "double" or not E.single(x):
        return E.down(torch.fft.rfftn(E.up64(x), s=s, dim=dims, norm=norm), x)
    return E.alg_r2c(x, s, dims, norm, precision)


def _c2r_modes(x, s, dims, norm, precision):
    if precision == "double" or not E.single(x):
        return E.down(torch.fft.irfftn(E.up64(x), s=s, dim=dims, norm=norm), x)
    return E.alg_c2r(x, s, dims, norm, precision)


@RFFT.lowering("torch")
def _rfft_torch(x: torch.Tensor, n: int, dim: int, norm: str, precision: str) -> torch.Tensor:
    """rfft of real ``x`` (float32/64) along ``dim`` (>= 0), length ``n``: ``n//2+1`` outputs."""
    if not x.numel():
        return E.empty(x, (dim,), (n // 2 + 1,), True)
    if precision == "fast":
        return R.route("rfft", x, (n,), (dim,), norm)(x)
    return _r2c_modes(x, (n,), (dim,), norm, precision)


@IRFFT.lowering("torch")
def _irfft_torch(x: torch.Tensor, n: int, dim: int, norm: str, precision: str) -> torch.Tensor:
    """irfft of Hermitian half-spectrum ``x`` along ``dim``: ``n`` real outputs."""
    if not x.numel():
        return E.empty(x, (dim,), (n,), False)
    if precision == "fast":
        return R.route("irfft", x, (n,), (dim,), norm)(x)
    return _c2r_modes(x, (n,), (dim,), norm, precision)


@HFFT.lowering("torch")
def _hfft_torch(x: torch.Tensor, n: int, dim: int, norm: str, precision: str) -> torch.Tensor:
    """hfft: ``irfft(conj(x), n)`` with the normalization swapped; ``n`` real outputs."""
    if not x.numel():
        return E.empty(x, (dim,), (n,), False)
    if precision == "fast":
        return R.route("hfft", x, (n,), (dim,), norm)(x)
    return _c2r_modes(x.conj(), (n,), (dim,), E.swap_norm(norm), precision)


@IHFFT.lowering("torch")
def _ihfft_torch(x: torch.Tensor, n: int, dim: int, norm: str, precision: str) -> torch.Tensor:
    """ihfft: ``conj(rfft(x, n))`` with the normalization swapped; ``n//2+1`` outputs."""
    if not x.numel():
        return E.empty(x, (dim,), (n // 2 + 1,), True)
    if precision == "fast":
        return R.route("ihfft", x, (n,), (dim,), norm)(x)
    return _r2c_modes(x, (n,), (dim,), E.swap_norm(norm), precision).conj().resolve_conj()


@RFFTN.lowering("torch")
def _rfftn_torch(x: torch.Tensor, s: tuple, dim: tuple, norm: str, precision: str) -> torch.Tensor:
    """rfftn (and rfft2): half spectrum along ``dim[-1]``, full along the others."""
    if not x.numel():
        return E.empty(x, dim, s[:-1] + (s[-1] // 2 + 1,), True)
    if precision == "fast":
        return R.route("rfftn", x, s, dim, norm)(x)
    return _r2c_modes(x, s, dim, norm, precision)


@IRFFTN.lowering("torch")
def _irfftn_torch(x: torch.Tensor, s: tuple, dim: tuple, norm: str, precision: str) -> torch.Tensor:
    """irfftn (and irfft2): ``s[-1]`` real outputs along ``dim[-1]``."""
    if not x.numel():
        return E.empty(x, dim, s, False)
    if precision == "fast":
        return R.route("irfftn", x, s, dim, norm)(x)
    return _c2r_modes(x, s, dim, norm, precision)


# ------------------------------------------------------------------ public

ROUTED.update((_rfft_torch, _irfft_torch, _hfft_torch, _ihfft_torch, _rfftn_torch, _irfftn_torch))

# Each public function is one call of trnfft.basic's _one (1-D) or _many (n-D).


@public(RFFT, SIG1, numpy=False)
@E.promotes_half
def rfft(input: Any, n: int | None = None, dim: int | None = None, norm: str | None = None, *,
         axis: int | None = None, precision: str | None = None):
    """One-dimensional DFT of real input, non-negative frequencies only.

    ``X[k] = sum_j x[j] exp(-2 pi i j k / n)`` for ``k = 0 .. n//2``.

    Parameters
    ----------
    input : ComplexTensor, torch.Tensor or numpy.ndarray
        Real data (float32/float64; bfloat16/float16 computed in float32).
    n : int, optional
        Transform length (zero-pad or truncate the input). Default: the input's length.
    dim : int, optional
        The axis to transform (default -1). ``axis`` is an alias.
    norm : {"backward", "ortho", "forward"}, optional
        Normalization as in NumPy (default "backward").
    precision : {"fast", "kahan", "double", "bf16", "bf16_refined", "ozaki", "ozaki_hq"}, optional
        Arithmetic mode for this call (default: :func:`get_precision`).

    Returns
    -------
    out : torch.Tensor, ComplexTensor or numpy.ndarray
        Complex spectrum with ``n // 2 + 1`` entries along ``dim``.
        In the input's kind: a ComplexTensor for complex results of
        ComplexTensor input, an array for NumPy input.

    Raises
    ------
    TypeError
        Unsupported kind or dtype (complex input: use :func:`fft`).
    ValueError
        Non-positive lengths, ``dim`` out of range or repeated, unknown
        ``norm``/``precision``.

    Examples
    --------
    >>> import torch, trnfft
    >>> trnfft.rfft(torch.tensor([1.0, 2.0, 3.0, 4.0]))
    tensor([10.+0.j, -2.+2.j, -2.+0.j])
    """
    return _one("rfft", RFFT, "rfft", input, n, dim, norm, axis, precision, real_in=True)


@public(IRFFT, SIG1, numpy=False)
@E.promotes_half
def irfft(input: Any, n: int | None = None, dim: int | None = None, norm: str | None = None, *,
          axis: int | None = None, precision: str | None = None):
    """Inverse of :func:`rfft`: real signal of length ``n`` from its half spectrum.

    Parameters
    ----------
    input : ComplexTensor, torch.Tensor or numpy.ndarray
        Half spectrum (complex, or real meaning zero imaginary part).
    n : int, optional
        Output length; the input is padded/truncated to ``n // 2 + 1`` coefficients. Default ``2 * (m - 1)``.
    dim : int, optional
        The axis to transform (default -1). ``axis`` is an alias.
    norm : {"backward", "ortho", "forward"}, optional
        Normalization as in NumPy (default "backward").
    precision : {"fast", "kahan", "double", "bf16", "bf16_refined", "ozaki", "ozaki_hq"}, optional
        Arithmetic mode for this call (default: :func:`get_precision`).

    Returns
    -------
    out : torch.Tensor, ComplexTensor or numpy.ndarray
        Real data with ``n`` entries along ``dim``.
        In the input's kind: a ComplexTensor for complex results of
        ComplexTensor input, an array for NumPy input.

    Raises
    ------
    TypeError
        Unsupported kind or dtype.
    ValueError
        Non-positive lengths, ``dim`` out of range or repeated, unknown
        ``norm``/``precision``.

    Examples
    --------
    >>> import torch, trnfft
    >>> trnfft.irfft(torch.tensor([10.+0.j, -2.+2.j, -2.+0.j]))
    tensor([1., 2., 3., 4.])
    """
    return _one("irfft", IRFFT, "irfft", input, n, dim, norm, axis, precision, half_in=True)


@public(HFFT, SIG1, numpy=False)
@E.promotes_half
def hfft(input: Any, n: int | None = None, dim: int | None = None, norm: str | None = None, *,
         axis: int | None = None, precision: str | None = None):
    """DFT of a Hermitian-symmetric signal given by its first half: a real spectrum.

    ``hfft(x, n) = irfft(conj(x), n) * n`` for ``norm="backward"``.

    Parameters
    ----------
    input : ComplexTensor, torch.Tensor or numpy.ndarray
        First half of a Hermitian signal (complex or real).
    n : int, optional
        Output length (default ``2 * (m - 1)``).
    dim : int, optional
        The axis to transform (default -1). ``axis`` is an alias.
    norm : {"backward", "ortho", "forward"}, optional
        Normalization as in NumPy (default "backward").
    precision : {"fast", "kahan", "double", "bf16", "bf16_refined", "ozaki", "ozaki_hq"}, optional
        Arithmetic mode for this call (default: :func:`get_precision`).

    Returns
    -------
    out : torch.Tensor, ComplexTensor or numpy.ndarray
        Real data with ``n`` entries along ``dim``.
        In the input's kind: a ComplexTensor for complex results of
        ComplexTensor input, an array for NumPy input.

    Raises
    ------
    TypeError
        Unsupported kind or dtype.
    ValueError
        Non-positive lengths, ``dim`` out of range or repeated, unknown
        ``norm``/``precision``.

    Examples
    --------
    >>> import torch, trnfft
    >>> trnfft.hfft(torch.tensor([1.+0.j, 2.+0.j, 3.+0.j]))
    tensor([ 8., -2.,  0., -2.])
    """
    return _one("hfft", HFFT, "hfft", input, n, dim, norm, axis, precision, half_in=True)


@public(IHFFT, SIG1, numpy=False)
@E.promotes_half
def ihfft(input: Any, n: int | None = None, dim: int | None = None, norm: str | None = None, *,
          axis: int | None = None, precision: str | None = None):
    """Inverse of :func:`hfft`: half of the Hermitian spectrum of a real signal.

    ``ihfft(x, n) = conj(rfft(x, n)) / n`` for ``norm="backward"``.

    Parameters
    ----------
    input : ComplexTensor, torch.Tensor or numpy.ndarray
        Real data (float32/float64).
    n : int, optional
        Transform length (zero-pad or truncate). Default: the input's length.
    dim : int, optional
        The axis to transform (default -1). ``axis`` is an alias.
    norm : {"backward", "ortho", "forward"}, optional
        Normalization as in NumPy (default "backward").
    precision : {"fast", "kahan", "double", "bf16", "bf16_refined", "ozaki", "ozaki_hq"}, optional
        Arithmetic mode for this call (default: :func:`get_precision`).

    Returns
    -------
    out : torch.Tensor, ComplexTensor or numpy.ndarray
        Complex data with ``n // 2 + 1`` entries along ``dim``.
        In the input's kind: a ComplexTensor for complex results of
        ComplexTensor input, an array for NumPy input.

    Raises
    ------
    TypeError
        Unsupported kind or dtype (complex input).
    ValueError
        Non-positive lengths, ``dim`` out of range or repeated, unknown
        ``norm``/``precision``.

    Examples
    --------
    >>> import torch, trnfft
    >>> trnfft.ihfft(torch.tensor([8., -2., 0., -2.]))
    tensor([1.-0.j, 2.-0.j, 3.-0.j])
    """
    return _one("ihfft", IHFFT, "ihfft", input, n, dim, norm, axis, precision, real_in=True)


@public(RFFTN, SIGN, numpy=False)
@E.promotes_half
def rfftn(input: Any, s: Any = None, dim: Any = None, norm: str | None = None, *,
          axes: Any = None, precision: str | None = None):
    """N-dimensional DFT of real input: half spectrum along the last transformed axis.

    Parameters
    ----------
    input : ComplexTensor, torch.Tensor or numpy.ndarray
        Real data (float32/float64).
    s : sequence of int, optional
        Transform lengths (zero-pad or truncate). Default: the input's lengths.
    dim : sequence of int, optional
        Axes to transform (default: the last ``len(s)`` axes if ``s`` is given,
        else all); the half-spectrum axis is the last one listed. ``axes`` is an
        alias.
    norm : {"backward", "ortho", "forward"}, optional
        Normalization as in NumPy (default "backward").
    precision : {"fast", "kahan", "double", "bf16", "bf16_refined", "ozaki", "ozaki_hq"}, optional
        Arithmetic mode for this call (default: :func:`get_precision`).

    Returns
    -------
    out : torch.Tensor, ComplexTensor or numpy.ndarray
        Complex data; the last transformed axis has ``s[-1] // 2 + 1`` entries.
        In the input's kind: a ComplexTensor for complex results of
        ComplexTensor input, an array for NumPy input.

    Raises
    ------
    TypeError
        Unsupported kind or dtype (complex input: use :func:`fftn`).
    ValueError
        Non-positive lengths, ``dim`` out of range or repeated, unknown
        ``norm``/``precision``.

    Examples
    --------
    >>> import torch, trnfft
    >>> trnfft.rfftn(torch.ones(2, 4)).shape
    torch.Size([2, 3])
    """
    return _many("rfftn", RFFTN, "rfftn", input, s, dim, norm, axes, precision, real_in=True)


@public(IRFFTN, SIGN, numpy=False)
@E.promotes_half
def irfftn(input: Any, s: Any = None, dim: Any = None, norm: str | None = None, *,
           axes: Any = None, precision: str | None = None):
    """Inverse of :func:`rfftn`.

    Parameters
    ----------
    input : ComplexTensor, torch.Tensor or numpy.ndarray
        Half spectrum (complex or real).
    s : sequence of int, optional
        Output lengths; default: the input's lengths with the last one ``2 * (m - 1)``.
    dim : sequence of int, optional
        Axes to transform (default: the last ``len(s)`` axes if ``s`` is given,
        else all); the half-spectrum axis is the last one listed. ``axes`` is an
        alias.
    norm : {"backward", "ortho", "forward"}, optional
        Normalization as in NumPy (default "backward").
    precision : {"fast", "kahan", "double", "bf16", "bf16_refined", "ozaki", "ozaki_hq"}, optional
        Arithmetic mode for this call (default: :func:`get_precision`).

    Returns
    -------
    out : torch.Tensor, ComplexTensor or numpy.ndarray
        Real data with lengths ``s`` along ``dim``.
        In the input's kind: a ComplexTensor for complex results of
        ComplexTensor input, an array for NumPy input.

    Raises
    ------
    TypeError
        Unsupported kind or dtype.
    ValueError
        Non-positive lengths, ``dim`` out of range or repeated, unknown
        ``norm``/``precision``.

    Examples
    --------
    >>> import torch, trnfft
    >>> x = torch.randn(3, 4, 6, dtype=torch.float64)
    >>> bool(torch.allclose(trnfft.irfftn(trnfft.rfftn(x), s=x.shape), x))
    True
    """
    return _many("irfftn", IRFFTN, "irfftn", input, s, dim, norm, axes, precision, half_in=True)


@public(RFFTN, SIGN, numpy=False)
@E.promotes_half
def rfft2(input: Any, s: Any = None, dim: Any = None, norm: str | None = None, *,
          axes: Any = None, precision: str | None = None):
    """Two-dimensional DFT of real input (:func:`rfftn` over the last two axes by default).

    Parameters
    ----------
    input : ComplexTensor, torch.Tensor or numpy.ndarray
        Real data with at least two dimensions.
    s : sequence of int, optional
        Transform lengths. Default: the input's lengths.
    dim : sequence of int, optional
        Axes to transform (default the last two); the half-spectrum axis is the last one. ``axes`` is an alias.
    norm : {"backward", "ortho", "forward"}, optional
        Normalization as in NumPy (default "backward").
    precision : {"fast", "kahan", "double", "bf16", "bf16_refined", "ozaki", "ozaki_hq"}, optional
        Arithmetic mode for this call (default: :func:`get_precision`).

    Returns
    -------
    out : torch.Tensor, ComplexTensor or numpy.ndarray
        Complex data; the last transformed axis has ``s[-1] // 2 + 1`` entries.
        In the input's kind: a ComplexTensor for complex results of
        ComplexTensor input, an array for NumPy input.

    Raises
    ------
    TypeError
        Unsupported kind or dtype (complex input).
    ValueError
        Non-positive lengths, ``dim`` out of range or repeated, unknown
        ``norm``/``precision``.

    Examples
    --------
    >>> import torch, trnfft
    >>> trnfft.rfft2(torch.ones(2, 2))
    tensor([[4.+0.j, 0.+0.j],
            [0.+0.j, 0.+0.j]])
    """
    return _many("rfft2", RFFTN, "rfftn", input, s, dim, norm, axes, precision, (-2, -1), real_in=True)


@public(IRFFTN, SIGN, numpy=False)
@E.promotes_half
def irfft2(input: Any, s: Any = None, dim: Any = None, norm: str | None = None, *,
           axes: Any = None, precision: str | None = None):
    """Inverse of :func:`rfft2`.

    Parameters
    ----------
    input : ComplexTensor, torch.Tensor or numpy.ndarray
        Half spectrum with at least two dimensions.
    s : sequence of int, optional
        Output lengths; default: the input's with the last one ``2 * (m - 1)``.
    dim : sequence of int, optional
        Axes to transform (default the last two); the half-spectrum axis is the last one. ``axes`` is an alias.
    norm : {"backward", "ortho", "forward"}, optional
        Normalization as in NumPy (default "backward").
    precision : {"fast", "kahan", "double", "bf16", "bf16_refined", "ozaki", "ozaki_hq"}, optional
        Arithmetic mode for this call (default: :func:`get_precision`).

    Returns
    -------
    out : torch.Tensor, ComplexTensor or numpy.ndarray
        Real data.
        In the input's kind: a ComplexTensor for complex results of
        ComplexTensor input, an array for NumPy input.

    Raises
    ------
    TypeError
        Unsupported kind or dtype.
    ValueError
        Non-positive lengths, ``dim`` out of range or repeated, unknown
        ``norm``/``precision``.

    Examples
    --------
    >>> import torch, trnfft
    >>> trnfft.irfft2(torch.tensor([[4.+0.j, 0.+0.j], [0.+0.j, 0.+0.j]]))
    tensor([[1., 1.],
            [1., 1.]])
    """
    return _many("irfft2", IRFFTN, "irfftn", input, s, dim, norm, axes, precision, (-2, -1), half_in=True)
