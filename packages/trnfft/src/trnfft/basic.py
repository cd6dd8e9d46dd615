"""Complex-to-complex transforms: fft, ifft, fft2, ifft2, fftn, ifftn.

Definitions (unnormalized forward, ``norm="backward"``)::

    X[k] = sum_{j=0}^{n-1} x[j] exp(-2 pi i j k / n)          (fft)
    x[j] = (1/n) sum_{k=0}^{n-1} X[k] exp(+2 pi i j k / n)    (ifft)

``norm="ortho"`` scales both directions by ``1/sqrt(n)``, ``norm="forward"``
puts ``1/n`` on the forward transform. Multi-dimensional transforms apply
these along each listed dim (``n`` is then the product of the lengths).

Input kinds and what comes back (every transform in trnfft):

* ``ComplexTensor`` in -> ``ComplexTensor`` out (complex results);
* torch tensor (real or complex) in -> torch complex tensor out, on the
  input's device, complex64 for float32/complex64 (and bfloat16/float16,
  computed in float32) inputs, complex128 for float64/complex128;
* NumPy array in -> NumPy array out, same dtype rules.

Real-valued results (``irfft``, ``hfft``, ...) are real torch tensors (or
NumPy arrays) whatever the input kind.
"""

from __future__ import annotations

from typing import Any

import torch

from trnsci import validate
from trnsci.dispatch import Op
from trnsci.settled import call, public

from . import _engine as E
from . import _host as R

# ------------------------------------------------------------------ ops
# torch lowerings here; NKI lowerings in trnfft._nki.basic. Every lowering takes
# (x, n, dim, norm, precision) -- or (x, s, dim, norm, precision) for the
# n-D ops -- in the canonical form of trnfft._engine and returns a tensor.

FFT = Op("trnfft.fft", "points", E.THRESHOLD_POINTS, doc="1-D complex DFT along one dim; points = batch x n",
         fake=E.transform_fake("fft", nd=False), **E.ONE_D)
IFFT = Op("trnfft.ifft", "points", E.THRESHOLD_POINTS, doc="1-D inverse complex DFT along one dim; points = batch x n",
          fake=E.transform_fake("ifft", nd=False), **E.ONE_D)
FFTN = Op("trnfft.fftn", "points", E.THRESHOLD_POINTS, doc="n-D complex DFT (also fft2); points = batch x prod(s)",
          fake=E.transform_fake("fftn", nd=True), **E.N_D)
IFFTN = Op("trnfft.ifftn", "points", E.THRESHOLD_POINTS,
           doc="n-D inverse complex DFT (also ifft2); points = batch x prod(s)",
           fake=E.transform_fake("ifftn", nd=True), **E.N_D)

# ------------------------------------------------------------------ derivatives
# fft and ifft are linear: the gradient of y = F x is F^H g, the transform in the other direction with
# the normalization swapped (its unscaled sum where the forward was scaled, and the reverse) -- one call of
# the other Op, so a backward runs the FFT kernel wherever the forward did. A zero-padded input (n
# larger than its length) gets the leading part of that gradient, a truncated one zeros past n; a real
# input the real part.


def _c2c_backward(other):
    def backward(inputs, output, g, needs):
        x, n, dim, norm, precision = inputs
        if not needs[0]:
            return None, None, None, None, None
        gx = other(g.contiguous(), n, dim, E._SWAP_NORM[norm], precision)
        m = x.shape[dim]
        if m < n:
            gx = gx.narrow(dim, 0, m)
        elif m > n:
            pad = list(gx.shape)
            pad[dim] = m - n
            gx = torch.cat([gx, gx.new_zeros(pad)], dim)
        if not x.is_complex():
            gx = gx.real
        return gx.to(x.dtype) if gx.dtype != x.dtype else gx, None, None, None, None

    return backward


_C2C_GRAD = ("dx = F^H g: the {} of g with the normalization swapped, its leading part for a zero-padded "
             "input (zeros past n for a truncated one), the real part for a real input")
FFT.backward(_c2c_backward(IFFT), formula=_C2C_GRAD.format("ifft"), runs="one `trnfft.ifft` call")
IFFT.backward(_c2c_backward(FFT), formula=_C2C_GRAD.format("fft"), runs="one `trnfft.fft` call")

# ------------------------------------------------------------------ torch lowerings
# In precision "fast" each runs the route trnfft._host settled for the call
# (torch.fft, Bluestein on torch.fft or scipy.fft, measured on this machine).


def _c2c_modes(x: torch.Tensor, sizes: tuple, dims: tuple, norm: str, inverse: bool, precision: str) -> torch.Tensor:
    if precision == "double" or not E.single(x):
        f = torch.fft.ifftn if inverse else torch.fft.fftn
        return E.down(f(E.up64(x), s=sizes, dim=dims, norm=norm), x)
    return E.alg_c2c(x, sizes, dims, norm, inverse, precision)


@FFT.lowering("torch")
def _fft_torch(x: torch.Tensor, n: int, dim: int, norm: str, precision: str) -> torch.Tensor:
    """fft of ``x`` (float32/64, complex64/128) along ``dim`` (>= 0) with length ``n``."""
    if not x.numel():
        return E.empty(x, (dim,), (n,), True)
    if precision == "fast":
        return R.route("fft", x, (n,), (dim,), norm)(x)
    return _c2c_modes(x, (n,), (dim,), norm, False, precision)


@IFFT.lowering("torch")
def _ifft_torch(x: torch.Tensor, n: int, dim: int, norm: str, precision: str) -> torch.Tensor:
    if not x.numel():
        return E.empty(x, (dim,), (n,), True)
    if precision == "fast":
        return R.route("ifft", x, (n,), (dim,), norm)(x)
    return _c2c_modes(x, (n,), (dim,), norm, True, precision)


@FFTN.lowering("torch")
def _fftn_torch(x: torch.Tensor, s: tuple, dim: tuple, norm: str, precision: str) -> torch.Tensor:
    """fftn along the distinct non-negative ``dim`` with lengths ``s`` (also fft2)."""
    if not x.numel():
        return E.empty(x, dim, s, True)
    if precision == "fast":
        return R.route("fftn", x, s, dim, norm)(x)
    return _c2c_modes(x, s, dim, norm, False, precision)


@IFFTN.lowering("torch")
def _ifftn_torch(x: torch.Tensor, s: tuple, dim: tuple, norm: str, precision: str) -> torch.Tensor:
    if not x.numel():
        return E.empty(x, dim, s, True)
    if precision == "fast":
        return R.route("ifftn", x, s, dim, norm)(x)
    return _c2c_modes(x, s, dim, norm, True, precision)


# the torch lowerings that run R.route in precision "fast" (not a replacement put in by Op.override)
ROUTED = {_fft_torch, _ifft_torch, _fftn_torch, _ifftn_torch}

# ------------------------------------------------------------------ public
# Every public function is one call of _one (1-D) or _many (n-D), wrapped by the core's fast path
# (trnsci.settled.public): the first call of a signature -- the input's dtype, shape, layout and device,
# the options as given and their types -- validates everything and ends in settled.call, which runs the
# Op (kernels, plans) or, on the torch path, the lowering's route for the call (trnfft._routes) and
# remembers it; later calls with that signature run the route. Anything else -- NumPy arrays,
# ComplexTensors, dtypes that are converted -- validates and calls the Op.

#: The settled signature of the 1-D and n-D public functions (input, n/s, dim, norm; axis/axes, precision).
SIG1 = "tensor option option option * option option"
SIGN = "tensor ints ints option * ints option"


def _via(kind, x, sizes, dims, norm, precision, nd):
    """What the torch lowering computes for this validated call, as a function of the input alone
    (:func:`trnsci.settled.call`'s ``via``): the route trnfft._routes settled for it, or the lowering on
    the normalised options."""

    def via(lowering):
        if precision == "fast" and x.numel() and lowering in ROUTED:  # what the lowering runs, minus its checks
            return R.route(kind, x, sizes, dims, norm), (x,)
        args = ((sizes, dims) if nd else (sizes[0], dims[0])) + (norm, precision)

        def go(x):
            return lowering(x, *args)
        return go, (x,)

    return via


def _one(where, op, kind, input, n, dim, norm, axis, precision, real_in=False, half_in=False):
    """A 1-D transform: ``real_in``, the input must be real; ``half_in``, it is a half spectrum (default
    output length 2 (m - 1))."""
    if type(input) is _Tensor and input.dtype in (E.REAL_DTYPES if real_in else E.FAST_DTYPES):
        x, ct = input, E.TORCH
    else:
        x, ct = E.prep(input, where, real_only=real_in)
    d = E.dim1(x, dim, axis, where)
    n = E.n1(x, n, d, where, 2 * (x.shape[d] - 1) if (half_in and n is None) else None)
    norm, precision = E.options(norm, precision, where)
    if ct == E.TORCH and x is input:
        return call(op, x, n, d, norm, precision, via=_via(kind, x, (n,), (d,), norm, precision, False))
    y = op(x, n, d, norm, precision)
    return y if ct == E.TORCH else E.wrap(y, ct)


def _many(where, op, kind, input, s, dim, norm, axes, precision, default_dims=None, real_in=False, half_in=False):
    """An n-D transform (``real_in``/``half_in`` as for :func:`_one`, on the last transformed axis)."""
    if type(input) is _Tensor and input.dtype in (E.REAL_DTYPES if real_in else E.FAST_DTYPES):
        x, ct = input, E.TORCH
    else:
        x, ct = E.prep(input, where, real_only=real_in)
    name = "dim" if axes is None else "axes"  # the keyword the caller used, for messages
    dim = validate.alias(where, "dim", dim, "axes", axes)
    half_default = half_in and s is None
    s, dims = E.dims_sizes(x, s, dim, where, default_dims, name)
    if (real_in or half_in) and not dims:
        raise ValueError(f"{where}: {name} must name at least one axis")
    if half_default:  # irfftn without s: the last output length is 2 (m - 1)
        s = s[:-1] + (2 * (x.shape[dims[-1]] - 1),)
        if s[-1] <= 0:
            raise ValueError(f"{where}: the input has {x.shape[dims[-1]]} coefficient(s) along dim {dims[-1]}, "
                             "too few for the default output length 2*(m-1); give s")
    norm, precision = E.options(norm, precision, where)
    if ct == E.TORCH and x is input:
        return call(op, x, s, dims, norm, precision, via=_via(kind, x, s, dims, norm, precision, True))
    y = op(x, s, dims, norm, precision)
    return y if ct == E.TORCH else E.wrap(y, ct)


_Tensor = torch.Tensor


@public(FFT, SIG1, numpy=False)
@E.promotes_half
def fft(input: Any, n: int | None = None, dim: int | None = None, norm: str | None = None, *,
        axis: int | None = None, precision: str | None = None):
    """One-dimensional discrete Fourier transform.

    ``X[k] = sum_j x[j] exp(-2 pi i j k / n)`` along one dim, batched over the others.

    Parameters
    ----------
    input : ComplexTensor, torch.Tensor or numpy.ndarray
        Real or complex data, float32/float64/complex64/complex128 (bfloat16
        and float16 are computed in float32).
    n : int, optional
        Transform length: the input is zero-padded or truncated along
        ``dim`` to ``n``. Default: the input's length. Any positive length
        (primes included).
    dim : int, optional
        The axis to transform (default -1). ``axis`` is an alias.
    norm : {"backward", "ortho", "forward"}, optional
        Normalization (default "backward": none on the forward transform).
    precision : {"fast", "kahan", "double", "bf16", "bf16_refined", "ozaki", "ozaki_hq"}, optional
        Arithmetic mode for this call (default: :func:`get_precision`).

    Returns
    -------
    ComplexTensor, torch.Tensor or numpy.ndarray
        Complex spectrum, the input's shape with ``n`` along ``dim``; kind
        as described in :mod:`trnfft.basic`.

    Raises
    ------
    TypeError
        Unsupported kind or dtype (integers, bool), non-int ``n``/``dim``.
    ValueError
        ``n <= 0``, ``dim`` out of range, unknown ``norm``/``precision``,
        empty transform axis without ``n``.

    Examples
    --------
    >>> import torch, trnfft
    >>> trnfft.fft(torch.tensor([1.0, 2.0, 3.0, 4.0]))
    tensor([10.+0.j, -2.+2.j, -2.+0.j, -2.-2.j])
    """
    return _one("fft", FFT, "fft", input, n, dim, norm, axis, precision)


@public(IFFT, SIG1, numpy=False)
@E.promotes_half
def ifft(input: Any, n: int | None = None, dim: int | None = None, norm: str | None = None, *,
         axis: int | None = None, precision: str | None = None):
    """One-dimensional inverse discrete Fourier transform.

    ``x[j] = (1/n) sum_k X[k] exp(+2 pi i j k / n)`` (``norm="backward"``).
    Parameters, returns and errors as for :func:`fft`.

    Examples
    --------
    >>> import torch, trnfft
    >>> trnfft.ifft(torch.tensor([10.+0.j, -2.+2.j, -2.+0.j, -2.-2.j])).real
    tensor([1., 2., 3., 4.])
    """
    return _one("ifft", IFFT, "ifft", input, n, dim, norm, axis, precision)


@public(FFTN, SIGN, numpy=False)
@E.promotes_half
def fftn(input: Any, s: Any = None, dim: Any = None, norm: str | None = None, *,
         axes: Any = None, precision: str | None = None):
    """N-dimensional discrete Fourier transform.

    Parameters
    ----------
    input : ComplexTensor, torch.Tensor or numpy.ndarray
        Real or complex data (dtypes as for :func:`fft`).
    s : sequence of int, optional
        Transform lengths along ``dim`` (zero-pad or truncate). Default: the
        input's lengths.
    dim : sequence of int, optional
        Axes to transform (default: the last ``len(s)`` axes if ``s`` is
        given, else all). ``axes`` is an alias. Axes must be distinct.
    norm : {"backward", "ortho", "forward"}, optional
        Normalization; ``n`` is the product of the transform lengths.
    precision : str, optional
        As for :func:`fft`.

    Returns
    -------
    ComplexTensor, torch.Tensor or numpy.ndarray
        The complex spectrum (kind as for :func:`fft`).

    Raises
    ------
    TypeError, ValueError
        As for :func:`fft`; also ``len(s) != len(dim)`` or repeated axes.

    Examples
    --------
    >>> import torch, trnfft
    >>> trnfft.fftn(torch.ones(2, 3))
    tensor([[6.+0.j, 0.+0.j, 0.+0.j],
            [0.+0.j, 0.+0.j, 0.+0.j]])
    """
    return _many("fftn", FFTN, "fftn", input, s, dim, norm, axes, precision)


@public(IFFTN, SIGN, numpy=False)
@E.promotes_half
def ifftn(input: Any, s: Any = None, dim: Any = None, norm: str | None = None, *,
          axes: Any = None, precision: str | None = None):
    """N-dimensional inverse discrete Fourier transform (see :func:`fftn`).

    Examples
    --------
    >>> import torch, trnfft
    >>> x = torch.randn(3, 4, 5, dtype=torch.float64)
    >>> bool(torch.allclose(trnfft.ifftn(trnfft.fftn(x)).real, x))
    True
    """
    return _many("ifftn", IFFTN, "ifftn", input, s, dim, norm, axes, precision)


@public(FFTN, SIGN, numpy=False)
@E.promotes_half
def fft2(input: Any, s: Any = None, dim: Any = None, norm: str | None = None, *,
         axes: Any = None, precision: str | None = None):
    """Two-dimensional discrete Fourier transform over ``dim`` (default the last two axes).

    Same as :func:`fftn` with ``dim=(-2, -1)`` by default.

    Examples
    --------
    >>> import torch, trnfft
    >>> trnfft.fft2(torch.eye(2))
    tensor([[2.+0.j, 0.+0.j],
            [0.+0.j, 2.+0.j]])
    """
    return _many("fft2", FFTN, "fftn", input, s, dim, norm, axes, precision, (-2, -1))


@public(IFFTN, SIGN, numpy=False)
@E.promotes_half
def ifft2(input: Any, s: Any = None, dim: Any = None, norm: str | None = None, *,
          axes: Any = None, precision: str | None = None):
    """Two-dimensional inverse discrete Fourier transform (see :func:`fft2`).

    Examples
    --------
    >>> import torch, trnfft
    >>> trnfft.ifft2(torch.full((2, 2), 4.0)).real
    tensor([[4., 0.],
            [0., 0.]])
    """
    return _many("ifft2", IFFTN, "ifftn", input, s, dim, norm, axes, precision, (-2, -1))
