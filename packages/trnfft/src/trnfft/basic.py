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

import functools
from typing import Any

import torch

from . import _chirp as C
from . import _engine as E

# ------------------------------------------------------------------ ops
# torch lowerings here; NKI lowerings in trnfft._nki. Every lowering takes
# (x, n, dim, norm, precision) -- or (x, s, dim, norm, precision) for the
# n-D ops -- in the canonical form of trnfft._engine and returns a tensor.

FFT = E.op1("trnfft.fft", "1-D complex DFT along one dim; points = batch x n")
IFFT = E.op1("trnfft.ifft", "1-D inverse complex DFT along one dim; points = batch x n")
FFTN = E.opn("trnfft.fftn", "n-D complex DFT (also fft2); points = batch x prod(s)")
IFFTN = E.opn("trnfft.ifftn", "n-D inverse complex DFT (also ifft2); points = batch x prod(s)")

# ------------------------------------------------------------------ torch lowerings

# torch.fft entry points bound once (saves an attribute walk per call)
_T_fft = torch.fft.fft
_T_ifft = torch.fft.ifft
_T_fftn = torch.fft.fftn
_T_ifftn = torch.fft.ifftn
_T_fft2 = torch.fft.fft2
_T_ifft2 = torch.fft.ifft2


def _s_or_none(x: torch.Tensor, s: tuple, dims: tuple):
    """``None`` when ``s`` is the input's own lengths (torch.fft then skips its resize step)."""
    shp = x.shape
    for k, d in zip(s, dims):
        if shp[d] != k:
            return s
    return None


_IN_ORDER = tuple(tuple(range(k)) for k in range(65))  # torch tensors have at most 64 dims


def _all_or(x: torch.Tensor, dims: tuple):
    """``None`` when ``dims`` is every axis in order (torch.fft's default: parsing a dim tuple
    costs torch about 0.5 us a call), else ``dims``."""
    return None if dims == _IN_ORDER[x.dim()] else dims


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
        if n >= C.MIN_PRIME and C.slow_length(n):
            return C.c2c(x, n, dim, norm, False)
        return _T_fft(x, None if n == x.shape[dim] else n, dim, norm)
    return _c2c_modes(x, (n,), (dim,), norm, False, precision)


@IFFT.lowering("torch")
def _ifft_torch(x: torch.Tensor, n: int, dim: int, norm: str, precision: str) -> torch.Tensor:
    if not x.numel():
        return E.empty(x, (dim,), (n,), True)
    if precision == "fast":
        if n >= C.MIN_PRIME and C.slow_length(n):
            return C.c2c(x, n, dim, norm, True)
        return _T_ifft(x, None if n == x.shape[dim] else n, dim, norm)
    return _c2c_modes(x, (n,), (dim,), norm, True, precision)


@FFTN.lowering("torch")
def _fftn_torch(x: torch.Tensor, s: tuple, dim: tuple, norm: str, precision: str) -> torch.Tensor:
    """fftn along the distinct non-negative ``dim`` with lengths ``s`` (also fft2)."""
    if not x.numel():
        return E.empty(x, dim, s, True)
    if precision == "fast":
        if C.any_slow(s):
            return C.c2c_nd(x, s, dim, norm, False)
        return _T_fftn(x, _s_or_none(x, s, dim), _all_or(x, dim), norm)
    return _c2c_modes(x, s, dim, norm, False, precision)


@IFFTN.lowering("torch")
def _ifftn_torch(x: torch.Tensor, s: tuple, dim: tuple, norm: str, precision: str) -> torch.Tensor:
    if not x.numel():
        return E.empty(x, dim, s, True)
    if precision == "fast":
        if C.any_slow(s):
            return C.c2c_nd(x, s, dim, norm, True)
        return _T_ifftn(x, _s_or_none(x, s, dim), _all_or(x, dim), norm)
    return _c2c_modes(x, s, dim, norm, True, precision)


# ------------------------------------------------------------------ public


# The plain call -- a torch tensor of a supported dtype; n/dim plain ints or
# None, or s/dim short int sequences; norm one of its names; precision "fast"
# -- is recognised by the decorators below, which wrap each public function.
# When the Op is settled on torch (``OP.on_torch()``: backend "torch", or
# "auto" without a NeuronCore) the wrapper calls torch.fft itself, which is
# what the torch lowering does with those arguments (lengths torch.fft is
# slow at excepted: see trnfft._chirp). Anything else, and anything torch
# refuses (n <= 0, a dim out of range, an empty axis), runs the decorated
# function: the full parse, which names a bad argument and ends in the Op
# call. Every route gives the same result; the inlined one saves ~1.5 us, half
# of a small transform's time.
_Tensor = torch.Tensor
_C2C_FAST = E.FAST_DTYPES
_PREC = E._precision
_NORMS = E._NORM_CANON


def _KW_1D(n, dim, norm) -> bool:
    """True when ``n``, ``dim`` and ``norm`` are values torch.fft takes as they are: ``n``/``dim``
    None or a plain int, ``norm`` None or one of its three names.

    Values torch then refuses (``n <= 0``, ``dim`` out of range) raise inside
    torch, and the caller drops to the full route, which names the argument.
    """
    return ((n is None or type(n) is int) and (dim is None or type(dim) is int)
            and (norm is None or (type(norm) is str and norm in _NORMS)))


def _ND_FAST(s, dim, norm, precision) -> bool:
    """:func:`_KW_1D` for the n-D transforms, and precision "fast": ``s`` None or a non-empty tuple/list of positive
    ints (torch would read -1 as "keep the length"), ``dim`` None or a non-empty tuple/list of ints."""
    if not ((norm is None or (type(norm) is str and norm in _NORMS))
            and (_PREC[0] == "fast" if precision is None else type(precision) is str and precision == "fast")):
        return False
    if s is not None:
        if type(s) not in _SEQ or not s:
            return False
        for k in s:  # a loop: all(<generator>) costs more than these few items
            if type(k) is not int or k <= 0:
                return False
    if dim is not None:
        if type(dim) not in _SEQ or not dim:
            return False
        for d in dim:
            if type(d) is not int:
                return False
    return True


_SEQ = (tuple, list)
_CH = C.MIN_PRIME  # an input with fewer elements has no transform length trnfft._chirp takes
_slow = C.slow


def _nd_slow(x, s, dim, two: bool, half: bool, real: bool = False) -> bool:
    """Whether a length of this n-D call is one torch.fft is slow at (:func:`trnfft._chirp.slow`);
    ``half``: the last length is the real output length 2 (m - 1) of irfftn/irfft2; ``real``: the
    last axis is a real transform's."""
    if s is None:
        shp = x.shape
        dims = dim if dim is not None else (_D2 if two else range(len(shp)))
        s = [shp[d] for d in dims]
        if half and s:
            s[-1] = 2 * (s[-1] - 1)
    return C.any_slow(s, real)
_D2 = (-2, -1)  # the 2-D transforms' default dims


def _torch_route_1d(op, dtypes, call, *, half: bool = False, slow=_slow):
    """Decorator for a 1-D transform ``f(input, n, dim, norm, *, axis, precision)``: plain calls
    settled on torch run ``call(input)`` / ``call(input, n, dim, norm)`` (torch.fft's function);
    ``half``: the default output length is 2 (m - 1), never a ``slow`` one (it is even)."""
    def wrap(full):
        on_torch = op.on_torch

        @functools.wraps(full)
        def transform(input, n=None, dim=None, norm=None, *, axis=None, precision=None):
            if (type(input) is _Tensor and axis is None and input.dtype in dtypes
                    and (precision is None and _PREC[0] == "fast" or type(precision) is str and precision == "fast")
                    and on_torch()):
                try:
                    if n is None and dim is None and norm is None:
                        if half or input.numel() < _CH or not slow(input.shape[-1]):
                            return call(input)
                    elif _KW_1D(n, dim, norm):
                        k = n if n is not None or half else input.shape[-1 if dim is None else dim]
                        if k is None or k < _CH or not slow(k):
                            return call(input, n, -1 if dim is None else dim, norm)
                except Exception:  # noqa: BLE001 -- whatever torch refused, the full route names
                    pass
            return full(input, n, dim, norm, axis=axis, precision=precision)

        return transform

    return wrap


def _torch_route_nd(op, dtypes, call, *, two: bool = False, half: bool = False, real: bool = False,
                    need_dim: bool = False):
    """:func:`_torch_route_1d` for ``f(input, s, dim, norm, *, axes, precision)``: ``two``, the
    2-D form (default dims the last two); ``half``/``real`` as for :func:`_nd_slow`; ``need_dim``:
    a 0-d input takes the full route (torch would transform it)."""
    def wrap(full):
        on_torch = op.on_torch

        @functools.wraps(full)
        def transform(input, s=None, dim=None, norm=None, *, axes=None, precision=None):
            if (type(input) is _Tensor and axes is None and input.dtype in dtypes
                    and (s is None and dim is None and norm is None and precision is None and _PREC[0] == "fast"
                         or _ND_FAST(s, dim, norm, precision)) and on_torch() and (not need_dim or input.dim())):
                try:
                    if (s is None and input.numel() < _CH) or not _nd_slow(input, s, dim, two, half, real):
                        if s is None and dim is None and norm is None:
                            return call(input)
                        return call(input, s, (dim or _D2) if two else dim, norm)
                except Exception:  # noqa: BLE001 -- whatever torch refused, the full route names
                    pass
            return full(input, s, dim, norm, axes=axes, precision=precision)

        return transform

    return wrap


def _one(where, lowering, input, n, dim, norm, axis, precision):
    if type(input) is _Tensor and input.dtype in _C2C_FAST:
        x, ct = input, E.TORCH
    else:
        x, ct = E.prep(input, where)
    d = E.dim1(x, dim, axis, where)
    n = E.n1(x, n, d, where)
    y = lowering(x, n, d, *E.options(norm, precision, where))
    return y if ct == E.TORCH else E.wrap(y, ct)


def _many(where, lowering, input, s, dim, norm, axes, precision, default_dims=None):
    if type(input) is _Tensor and input.dtype in _C2C_FAST:
        x, ct = input, E.TORCH
    else:
        x, ct = E.prep(input, where)
    name = "dim" if axes is None else "axes"
    dim = E.alias(where, "dim", dim, "axes", axes)
    s, dims = E.dims_sizes(x, s, dim, where, default_dims, name)
    y = lowering(x, s, dims, *E.options(norm, precision, where))
    return y if ct == E.TORCH else E.wrap(y, ct)


@_torch_route_1d(FFT, _C2C_FAST, _T_fft)
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
    precision : {"fast", "kahan", "double", "bf16", "bf16_refined"}, optional
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
    return _one("fft", FFT, input, n, dim, norm, axis, precision)


@_torch_route_1d(IFFT, _C2C_FAST, _T_ifft)
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
    return _one("ifft", IFFT, input, n, dim, norm, axis, precision)


@_torch_route_nd(FFTN, _C2C_FAST, _T_fftn, need_dim=True)
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
    return _many("fftn", FFTN, input, s, dim, norm, axes, precision)


@_torch_route_nd(IFFTN, _C2C_FAST, _T_ifftn, need_dim=True)
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
    return _many("ifftn", IFFTN, input, s, dim, norm, axes, precision)


@_torch_route_nd(FFTN, _C2C_FAST, _T_fft2, two=True)
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
    return _many("fft2", FFTN, input, s, dim, norm, axes, precision, (-2, -1))


@_torch_route_nd(IFFTN, _C2C_FAST, _T_ifft2, two=True)
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
    return _many("ifft2", IFFTN, input, s, dim, norm, axes, precision, (-2, -1))
