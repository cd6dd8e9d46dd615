"""BLAS level 1: vector-vector operations (``cublas<t>axpy``, ``dot``, ``nrm2``, ...).

Vectors are 1-D tensors of any stride (a BLAS ``incx`` is a tensor stride:
``x[::incx]``). Functions return new tensors and never modify their inputs;
``out=`` (where offered) receives the result in place. Reductions return
0-d tensors on the input's device; :func:`iamax`/:func:`iamin` return Python
ints and :func:`rotg` Python numbers, as BLAS returns scalars.

These operations are memory-bound with one pass over the data. Each
routine that moves or reduces a vector is an :class:`~trnsci.dispatch.Op`
(``trnblas.axpy``, ``trnblas.dot``, ...; size metric ``elements``) whose
NKI lowering (in :mod:`trnblas._nki.level1`) runs the Vector-Engine kernels
:mod:`trnblas.kernels.axpby` and :mod:`trnblas.kernels.vreduce`, reading
each operand once. Under ``"auto"`` vectors below the threshold (default
2^22 elements, uncalibrated) stay on torch.

Low precision: bfloat16 and float16 vectors are accepted; the torch path
computes in float32 and rounds the result once to the input dtype (the
Ops declare ``half="float32"``, which the core applies:
:mod:`trnsci.precision`; the kernels do the same on the Vector Engine), so an elementwise result is
within one rounding (2^-8 relative for bf16, 2^-11 for fp16) of the exact
value of the rounded inputs, and a reduction over ``n`` entries is within
``n * 2^-24`` (fp32 accumulation) plus that one rounding.
"""

from __future__ import annotations

import math

import torch

from trnsci import validate
from trnsci.dispatch import Op
from trnsci.settled import call, public, settles

__all__ = ["axpy", "dot", "dotu", "dotc", "nrm2", "asum", "scal", "iamax", "iamin",
           "rot", "rotg", "swap", "copy"]


#: What level 1 accepts: the BLAS dtypes plus bfloat16/float16 (computed in float32).
DTYPES = validate.ALL_FLOAT_DTYPES
#: Elements below which "auto" keeps a level-1 call on torch: a placeholder until calibrated on hardware
#: (docs/perf-notes.md#design-launch-placeholders).
THRESHOLD = 2 ** 22


def _n(*args):
    return next(a.shape[0] for a in args if isinstance(a, torch.Tensor))


#: The keyword arguments every level-1 Op shares: its size (n) and description. The Ops that compute
#: declare half="float32" (bf16/fp16 computed in float32 and rounded once, by the core: trnsci.precision);
#: those that only move or compare data (copy, swap, iamax, iamin) are exact in any dtype.
_VEC = dict(size=_n, describe=lambda *a: f"n = {_n(*a)}")


def _real_dtype(x):
    return x.real.dtype if x.is_complex() else x.dtype


# the fake implementations: the result's shape, dtype and device from the inputs' (nothing computed)
AXPY = Op("trnblas.axpy", "elements", THRESHOLD, half="float32", doc="alpha x + y; elements = n",
          schema="(Scalar alpha, Tensor x, Tensor y) -> Tensor", fake=lambda alpha, x, y: torch.empty_like(x), **_VEC)
SCAL = Op("trnblas.scal", "elements", THRESHOLD, half="float32", doc="alpha x; elements = n",
          schema="(Scalar alpha, Tensor x) -> Tensor", fake=lambda alpha, x: torch.empty_like(x), **_VEC)
COPY = Op("trnblas.copy", "elements", THRESHOLD, doc="a copy of x; elements = n", schema="(Tensor x) -> Tensor",
          fake=lambda x: torch.empty_like(x), **_VEC)
SWAP = Op("trnblas.swap", "elements", THRESHOLD, doc="(y, x) as new copies; elements = n",
          schema="(Tensor x, Tensor y) -> (Tensor, Tensor)",
          fake=lambda x, y: (torch.empty_like(y), torch.empty_like(x)), **_VEC)
ROT = Op("trnblas.rot", "elements", THRESHOLD, half="float32", doc="plane rotation of (x, y); elements = n",
         schema="(Tensor x, Tensor y, Scalar c, Scalar s) -> (Tensor, Tensor)",
         fake=lambda x, y, c, s: (torch.empty_like(x), torch.empty_like(x)), **_VEC)
DOT = Op("trnblas.dot", "elements", THRESHOLD, half="float32", doc="sum x y (unconjugated); elements = n",
         schema="(Tensor x, Tensor y) -> Tensor", fake=lambda x, y: x.new_empty(()), **_VEC)
DOTC = Op("trnblas.dotc", "elements", THRESHOLD, half="float32", doc="sum conj(x) y; elements = n",
          schema="(Tensor x, Tensor y) -> Tensor", fake=lambda x, y: x.new_empty(()), **_VEC)
NRM2 = Op("trnblas.nrm2", "elements", THRESHOLD, half="float32", doc="scaled Euclidean norm; elements = n",
          schema="(Tensor x) -> Tensor", fake=lambda x: x.new_empty((), dtype=_real_dtype(x)), **_VEC)
ASUM = Op("trnblas.asum", "elements", THRESHOLD, half="float32", doc="sum of |Re| + |Im|; elements = n",
          schema="(Tensor x) -> Tensor", fake=lambda x: x.new_empty((), dtype=_real_dtype(x)), **_VEC)
# an index is data: under fake tensors an unbacked size (torch.compile needs capture_dynamic_output_shape_ops)
IAMAX = Op("trnblas.iamax", "elements", THRESHOLD, doc="first index of the largest magnitude; elements = n",
           schema="(Tensor x) -> SymInt", fake=lambda x: torch.library.get_ctx().new_dynamic_size(), **_VEC)
IAMIN = Op("trnblas.iamin", "elements", THRESHOLD, doc="first index of the smallest magnitude; elements = n",
           schema="(Tensor x) -> SymInt", fake=lambda x: torch.library.get_ctx().new_dynamic_size(), **_VEC)


# Torch lowerings: float32/float64/complex code; bf16/fp16 calls reach them upcast to float32 (the Ops'
# half="float32", applied by the core).

@AXPY.lowering("torch")
def _axpy_torch(alpha, x, y):
    return torch.add(y, x, alpha=alpha)


def _axpy_plain(alpha, x, y):
    return torch.add(y, x, alpha=alpha)


@settles(_axpy_torch)
def _(alpha, x, y):
    return _axpy_plain


@SCAL.lowering("torch")
def _scal_torch(alpha, x):
    return torch.mul(x, alpha)


@COPY.lowering("torch")
def _copy_torch(x):
    return x.clone()


@SWAP.lowering("torch")
def _swap_torch(x, y):
    return y.clone(), x.clone()


@ROT.lowering("torch")
def _rot_torch(x, y, c, s):
    xr = torch.mul(x, c).add_(y, alpha=s)
    yr = torch.mul(y, c).sub_(x, alpha=s.conjugate() if isinstance(s, complex) else s)
    return xr, yr


@DOT.lowering("torch")
def _dot_torch(x, y):
    return torch.dot(x, y)


@settles(_dot_torch)
def _(x, y):
    return torch.dot, (0, 1)


@DOTC.lowering("torch")
def _dotc_torch(x, y):
    return torch.vdot(x, y)


@settles(_dotc_torch)
def _(x, y):
    return torch.vdot, (0, 1)




def _pair(where, x, y):
    x = validate.vector(x, "x", where, DTYPES)
    y = validate.vector(y, "y", where, DTYPES)
    if y.dtype is not x.dtype or y.device != x.device:
        validate.agree(where, x=x, y=y)
    if x.shape[0] != y.shape[0]:
        raise validate.mismatch(where, "x and y must have one length", x=x, y=y)
    return x, y


@public(AXPY, "scalar tensor tensor")
def axpy(alpha, x, y, *, out=None):
    """``alpha * x + y`` (``cublas<t>axpy``).

    Parameters
    ----------
    alpha : number
        Complex only for complex data. ``alpha == 0`` returns a copy of
        ``y`` without reading ``x``.
    x, y : tensor, shape (n,)
    out : tensor, shape (n,), optional
        Receives the result and is returned (``out=y`` gives BLAS's
        in-place update).

    Returns
    -------
    tensor, shape (n,)

    Raises
    ------
    TypeError
        Non-tensor, integer/bool dtype, mixed dtypes, complex ``alpha`` for
        real data.
    ValueError
        Not 1-D, lengths differ, devices differ.

    Examples
    --------
    >>> import torch, trnblas
    >>> trnblas.axpy(2.0, torch.ones(3), torch.arange(3.0)).tolist()
    [2.0, 3.0, 4.0]
    """
    where = "axpy"
    x, y = _pair(where, x, y)
    alpha = validate.scalar(alpha, "alpha", where, complex_ok=x.dtype.is_complex)
    if alpha == 0 or x.shape[0] == 0:
        return validate.finish(y.clone(), out, where)
    if out is None:
        return call(AXPY, alpha, x, y)
    return validate.finish(AXPY(alpha, x, y), out, where)


@public(DOT, "tensor tensor")
def dot(x, y):
    """Unconjugated dot product ``sum(x * y)`` (``cublas<t>dot``, ``cublas<t>dotu``).

    Parameters
    ----------
    x, y : tensor, shape (n,)

    Returns
    -------
    0-d tensor
        Of the inputs' dtype; ``0`` for ``n == 0``.

    Raises
    ------
    TypeError, ValueError
        As :func:`axpy`.

    Notes
    -----
    For complex data no conjugation is applied (``cublasCdotu``); use
    :func:`dotc` for ``sum(conj(x) * y)``. ``dotu`` is an alias.

    Examples
    --------
    >>> import torch, trnblas
    >>> trnblas.dot(torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0]))
    tensor(11.)
    """
    x, y = _pair("dot", x, y)
    if x.shape[0] == 0:
        return torch.zeros((), dtype=x.dtype, device=x.device)
    return call(DOT, x, y)


dotu = dot


@public(DOTC, "tensor tensor")
def dotc(x, y):
    """Conjugated dot product ``sum(conj(x) * y)`` (``cublas<t>dotc``).

    Parameters
    ----------
    x, y : tensor, shape (n,)

    Returns
    -------
    0-d tensor

    Raises
    ------
    TypeError, ValueError
        As :func:`axpy`.

    Notes
    -----
    For real data ``dotc`` equals :func:`dot`.

    Examples
    --------
    >>> import torch, trnblas
    >>> x = torch.tensor([1j], dtype=torch.complex64)
    >>> trnblas.dotc(x, x)
    tensor(1.+0.j)
    """
    x, y = _pair("dotc", x, y)
    if x.shape[0] == 0:
        return torch.zeros((), dtype=x.dtype, device=x.device)
    return call(DOTC, x, y)


# Below sqrt(tiny) squares underflow, above sqrt(huge) they overflow: the
# unscaled norm is exact enough only between these.
_SAFE = {
    torch.float32: (math.sqrt(torch.finfo(torch.float32).tiny) * 4, math.sqrt(torch.finfo(torch.float32).max) / 4),
    torch.float64: (math.sqrt(torch.finfo(torch.float64).tiny) * 4, math.sqrt(torch.finfo(torch.float64).max) / 4),
}
_SAFE[torch.complex64] = _SAFE[torch.float32]
_SAFE[torch.complex128] = _SAFE[torch.float64]


@public(NRM2, "tensor")
def nrm2(x):
    """Euclidean norm ``sqrt(sum |x_i|^2)`` without overflow or underflow (``cublas<t>nrm2``).

    Parameters
    ----------
    x : tensor, shape (n,)

    Returns
    -------
    0-d tensor
        Real (float32 for float32/complex64 input, float64 otherwise).

    Raises
    ------
    TypeError, ValueError
        Non-BLAS dtype; not 1-D.

    Notes
    -----
    Like reference BLAS, entries are scaled when needed so that
    ``nrm2([1e200, 1e200]) == 1.414e200`` in float64 rather than ``inf``
    and tiny entries do not underflow to zero. The fast unscaled norm runs
    first; the scaled one only when the result falls outside the safe range
    (this reads the result on the host once for a CPU tensor; on a device
    both are computed and the choice is made there, with no host read). Inf
    in ``x`` gives Inf; NaN gives NaN.

    Examples
    --------
    >>> import torch, trnblas
    >>> float(trnblas.nrm2(torch.tensor([1e200, 1e200], dtype=torch.float64)))
    1.414213562373095e+200
    """
    x = validate.vector(x, "x", "nrm2", DTYPES)
    if x.shape[0] == 0:
        return torch.zeros((), dtype=x.real.dtype if x.is_complex() else x.dtype, device=x.device)
    return call(NRM2, x)


def _nrm2_real(lo: float, hi: float):
    """The norm of a real float32/float64 vector whose unscaled norm is exact between ``lo`` and ``hi``."""

    def nrm2_real(x):
        r = torch.linalg.vector_norm(x)
        if not x.is_cpu:  # on a device: decide on the device, no read on the host
            return _nrm2_on_device(x, r, lo, hi)
        val = float(r)
        if lo <= val <= hi or math.isnan(val):
            return r
        scale = x.abs().amax()
        s = float(scale)
        if s == 0 or math.isinf(s) or math.isnan(s):
            return scale if not math.isnan(val) else r
        return torch.linalg.vector_norm(x / scale) * scale

    return nrm2_real


def _nrm2_on_device(x, r, lo: float, hi: float):
    """:func:`_nrm2_real`'s choice made on the device: the scaled norm, selected where the unscaled one
    left the safe range (both computed; one more pass over ``x``), so that nothing is read on the host."""
    scale = x.abs().max()  # amax() with no dim does not reduce on torch-xla 2.9
    safe = torch.where((scale == 0) | torch.isinf(scale) | torch.isnan(scale), torch.ones_like(scale), scale)
    scaled = torch.linalg.vector_norm(x / safe) * safe
    degenerate = torch.where(torch.isnan(r), r, scale)  # zero, Inf or NaN scale: as the host path returns
    pick_scaled = torch.where((scale == 0) | torch.isinf(scale) | torch.isnan(scale), degenerate, scaled)
    ok = ((r >= lo) & (r <= hi)) | torch.isnan(r)
    return torch.where(ok, r, pick_scaled)


_NRM2_REAL = {dt: _nrm2_real(*_SAFE[dt]) for dt in (torch.float32, torch.float64)}


@NRM2.lowering("torch")
def _nrm2_torch(x):
    if x.is_complex():  # |x| over the real and imaginary parts: scaling by a real never divides a complex
        x = torch.view_as_real(x.resolve_conj()).reshape(-1)
    return _NRM2_REAL[x.dtype](x)


@settles(_nrm2_torch)
def _(x):
    # real float32/float64 (the key fixes the dtype): the lowering is its real-vector part, no dtype tests
    return (_NRM2_REAL[x.dtype], (0,)) if x.dtype in _NRM2_REAL else None


@validate.numpy_io
def asum(x):
    """Sum of magnitudes (``cublas<t>asum``).

    Parameters
    ----------
    x : tensor, shape (n,)

    Returns
    -------
    0-d tensor
        Real. For real data ``sum |x_i|``; for complex data
        ``sum (|Re x_i| + |Im x_i|)``, as BLAS (not the modulus).

    Raises
    ------
    TypeError, ValueError
        Non-BLAS dtype; not 1-D.

    Examples
    --------
    >>> import torch, trnblas
    >>> trnblas.asum(torch.tensor([3 + 4j], dtype=torch.complex64))
    tensor(7.)
    """
    x = validate.vector(x, "x", "asum", DTYPES)
    if x.shape[0] == 0:
        return torch.zeros((), dtype=x.real.dtype if x.is_complex() else x.dtype, device=x.device)
    return ASUM(x)


@ASUM.lowering("torch")
def _asum_torch(x):
    if x.is_complex():
        if x.is_conj():
            x = x.conj()  # magnitudes only: drop the lazy conjugation
        return torch.view_as_real(x).abs().sum()
    return x.abs().sum()


@validate.numpy_io
def scal(alpha, x, *, out=None):
    """``alpha * x`` (``cublas<t>scal``; also ``csscal``/``zdscal`` for real alpha).

    Parameters
    ----------
    alpha : number
        Complex only for complex data. ``alpha == 0`` returns zeros without
        reading ``x``.
    x : tensor, shape (n,)
    out : tensor, optional
        Receives the result (``out=x`` gives BLAS's in-place scaling).

    Returns
    -------
    tensor, shape (n,)

    Raises
    ------
    TypeError, ValueError
        As :func:`axpy`.

    Examples
    --------
    >>> import torch, trnblas
    >>> trnblas.scal(3.0, torch.ones(2)).tolist()
    [3.0, 3.0]
    """
    where = "scal"
    x = validate.vector(x, "x", where, DTYPES)
    alpha = validate.scalar(alpha, "alpha", where, complex_ok=x.dtype.is_complex)
    if alpha == 0 or x.shape[0] == 0:
        R = torch.zeros_like(x)
    else:
        R = SCAL(alpha, x)
    return validate.finish(R, out, where)


def _magnitude(x: torch.Tensor) -> torch.Tensor:
    if x.is_complex():
        if x.is_conj():
            x = x.conj()
        return torch.view_as_real(x).abs().sum(-1)
    return x.abs()


@validate.numpy_io
def iamax(x) -> int:
    """0-based index of the entry of largest magnitude (``cublasI<t>amax``).

    Parameters
    ----------
    x : tensor, shape (n,)

    Returns
    -------
    int
        The first such index on ties; ``-1`` when ``n == 0``. Note cuBLAS
        returns 1-based indices: ``trnblas.iamax(x) == cublasIsamax(x) - 1``.

    Raises
    ------
    TypeError, ValueError
        Non-BLAS dtype; not 1-D.

    Notes
    -----
    The magnitude is ``|x_i|`` for real data and ``|Re x_i| + |Im x_i|`` for
    complex data, as BLAS. A NaN counts as larger than any number (the
    first NaN's index is returned), as :func:`torch.argmax`.

    Examples
    --------
    >>> import torch, trnblas
    >>> trnblas.iamax(torch.tensor([1.0, -5.0, 5.0]))
    1
    """
    x = validate.vector(x, "x", "iamax", DTYPES)
    if x.shape[0] == 0:
        return -1
    return IAMAX(x)


@IAMAX.lowering("torch")
def _iamax_torch(x):
    return int(torch.argmax(_magnitude(x)))


@validate.numpy_io
def iamin(x) -> int:
    """0-based index of the entry of smallest magnitude (``cublasI<t>amin``).

    Parameters
    ----------
    x : tensor, shape (n,)

    Returns
    -------
    int
        The first such index on ties; ``-1`` when ``n == 0``.

    Raises
    ------
    TypeError, ValueError
        Non-BLAS dtype; not 1-D.

    Notes
    -----
    Magnitude as in :func:`iamax`.

    Examples
    --------
    >>> import torch, trnblas
    >>> trnblas.iamin(torch.tensor([3.0, -1.0, 1.0]))
    1
    """
    x = validate.vector(x, "x", "iamin", DTYPES)
    if x.shape[0] == 0:
        return -1
    return IAMIN(x)


@IAMIN.lowering("torch")
def _iamin_torch(x):
    return int(torch.argmin(_magnitude(x)))


@validate.numpy_io
def rot(x, y, c, s):
    """Apply a plane rotation (``cublas<t>rot``): returns ``(c x + s y, c y - conj(s) x)``.

    Parameters
    ----------
    x, y : tensor, shape (n,)
    c : real number
        The cosine.
    s : number
        The sine; complex allowed for complex data (``crot``/``zrot``).

    Returns
    -------
    (tensor, tensor)
        New ``x'`` and ``y'``; the inputs are not modified.

    Raises
    ------
    TypeError
        Complex ``c``, complex ``s`` for real data, plus :func:`axpy`'s.
    ValueError
        As :func:`axpy`.

    Examples
    --------
    >>> import torch, trnblas
    >>> xr, yr = trnblas.rot(torch.tensor([1.0]), torch.tensor([0.0]), 0.0, 1.0)
    >>> xr.tolist(), yr.tolist()
    ([0.0], [-1.0])
    """
    where = "rot"
    x, y = _pair(where, x, y)
    cc = validate.scalar(c, "c", where, complex_ok=False)
    ss = validate.scalar(s, "s", where, complex_ok=x.dtype.is_complex)
    if x.shape[0] == 0:
        return x.clone(), y.clone()
    return ROT(x, y, cc, ss)


def _num(x, name):
    return validate.scalar(x, name, "rotg")


def rotg(a, b):
    """Construct a Givens rotation (``cublas<t>rotg``, reference ``drotg``/``zrotg``).

    Parameters
    ----------
    a, b : number (or 0-d tensor/array)
        Real or complex.

    Returns
    -------
    (c, s, r, z)
        Python numbers with ``[c s; -conj(s) c] [a; b] = [r; 0]``, ``c``
        real. Real inputs: ``r = ±sqrt(a^2 + b^2)`` with the sign of the
        larger-magnitude input, and ``z`` BLAS's reconstruction value
        (``s`` if ``|a| > |b|``, else ``1/c`` if ``c != 0``, else ``1``).
        Complex inputs (``zrotg``, LAPACK >= 3.10 conventions): ``s`` and
        ``r`` complex, ``z`` is None (BLAS defines none).

    Raises
    ------
    TypeError
        Non-numbers.

    Notes
    -----
    Scaled as LAPACK's ``la_xrotg`` (``max(|a|, |b|)`` divides before
    squaring), so large and tiny inputs neither overflow nor underflow.

    Examples
    --------
    >>> import trnblas
    >>> trnblas.rotg(3.0, 4.0)
    (0.6, 0.8, 5.0, 1.6666666666666667)
    """
    a = _num(a, "a")
    b = _num(b, "b")
    if isinstance(a, complex) or isinstance(b, complex):
        a, b = complex(a), complex(b)
        if b == 0:
            return 1.0, 0j, a, None
        if a == 0:  # LAPACK 3.10 zrotg: r = |b| real, s = conj(b) / |b|
            return 0.0, b.conjugate() / abs(b), complex(abs(b)), None
        scale = max(abs(a), abs(b))
        norm = scale * math.sqrt(abs(a / scale) ** 2 + abs(b / scale) ** 2)
        phase = a / abs(a)
        return abs(a) / norm, phase * b.conjugate() / norm, phase * norm, None
    a, b = float(a), float(b)
    if b == 0:
        return 1.0, 0.0, a, 0.0
    if a == 0:
        return 0.0, 1.0, b, 1.0
    scale = max(abs(a), abs(b))
    r = scale * math.sqrt((a / scale) ** 2 + (b / scale) ** 2)
    r = math.copysign(r, a if abs(a) > abs(b) else b)
    cs, sn = a / r, b / r
    if abs(a) > abs(b):
        z = sn
    elif cs != 0:
        z = 1.0 / cs
    else:
        z = 1.0
    return cs, sn, r, z


@validate.numpy_io
def swap(x, y):
    """Exchange two vectors (``cublas<t>swap``): returns ``(y, x)`` as new copies.

    Parameters
    ----------
    x, y : tensor, shape (n,)

    Returns
    -------
    (tensor, tensor)
        Copies of ``y`` and ``x``; the inputs are not modified.

    Raises
    ------
    TypeError, ValueError
        As :func:`axpy`.

    Examples
    --------
    >>> import torch, trnblas
    >>> a, b = trnblas.swap(torch.zeros(1), torch.ones(1))
    >>> a.tolist(), b.tolist()
    ([1.0], [0.0])
    """
    x, y = _pair("swap", x, y)
    if x.shape[0] == 0:
        return y.clone(), x.clone()
    return SWAP(x, y)


@validate.numpy_io
def copy(x, *, out=None):
    """Copy a vector (``cublas<t>copy``).

    Parameters
    ----------
    x : tensor, shape (n,)
    out : tensor, shape (n,), optional
        Receives the copy (BLAS's ``y := x``) and is returned.

    Returns
    -------
    tensor, shape (n,)

    Raises
    ------
    TypeError, ValueError
        Non-BLAS dtype; not 1-D; ``out`` of another shape, dtype or device.

    Examples
    --------
    >>> import torch, trnblas
    >>> trnblas.copy(torch.ones(2)).tolist()
    [1.0, 1.0]
    """
    x = validate.vector(x, "x", "copy", DTYPES)
    if out is not None:
        return validate.write_out(x, out, "copy")
    return x.clone() if x.shape[0] == 0 else COPY(x)


# ------------------------------------------------------------------ derivatives (torch.ops.trnblas.*)
# Declared with the operators: each backward is forward level-1 operations (kernels under a kernel
# backend, as in the forward) or, for the reductions, the incoming 0-d gradient times a vector.

def _conj(a):
    """conj of a scalar (Python number)."""
    return a.conjugate() if isinstance(a, complex) else a


def _axpy_backward(inputs, output, g, needs):
    alpha, x, y = inputs
    return None, SCAL(_conj(alpha), g) if needs[1] else None, g if needs[2] else None


def _scal_backward(inputs, output, g, needs):
    alpha, x = inputs
    return None, SCAL(_conj(alpha), g) if needs[1] else None


def _rot_backward(inputs, output, g, needs):
    # (x', y') = (c x + s y, c y - conj(s) x) is [c s; -conj(s) c] applied to (x, y); its adjoint
    # [c -s; conj(s) c] is the rotation by (c, -s)
    x, y, c, s = inputs
    gx, gy = ROT(g[0], g[1], c, -s)
    return gx if needs[0] else None, gy if needs[1] else None, None, None


def _dot_backward(conj_x):
    def backward(inputs, output, g, needs):
        x, y = inputs
        gx = gy = None
        if needs[0]:  # dotc: d/dx of sum conj(x) y is conj(g) y; dot: g conj(y)
            gx = y * g.conj() if conj_x else y.conj() * g
        if needs[1]:
            gy = (x if conj_x else x.conj()) * g
        return gx, gy
    return backward


def _nrm2_backward(inputs, output, g, needs):
    # d||x|| = Re(conj(x) dx) / ||x||: grad x = g x / ||x|| (zero where ||x|| = 0, as torch)
    (x,) = inputs
    if not needs[0]:
        return (None,)
    return (x * torch.where(output == 0, torch.zeros_like(output), g / output),)


def _asum_backward(inputs, output, g, needs):
    (x,) = inputs
    if not needs[0]:
        return (None,)
    if x.is_complex():  # sum |Re| + |Im|: sign(Re) + i sign(Im)
        return (torch.complex(torch.sign(x.real), torch.sign(x.imag)) * g,)
    return (torch.sign(x) * g,)


AXPY.backward(_axpy_backward, formula="dx = conj(alpha) g; dy = g", runs="one `trnblas.scal` call")
SCAL.backward(_scal_backward, formula="dx = conj(alpha) g", runs="one `trnblas.scal` call")
COPY.backward(lambda inputs, output, g, needs: (g,), formula="dx = g", runs="nothing (the gradient passes through)")
SWAP.backward(lambda inputs, output, g, needs: (g[1], g[0]), formula="dx = g_2, dy = g_1 (the outputs swapped)",
              runs="nothing (the gradients are exchanged)")
ROT.backward(_rot_backward, formula="(dx, dy) = the rotation by (c, -s) of (g_x, g_y)", runs="one `trnblas.rot` call")
DOT.backward(_dot_backward(False), formula="dx = g conj(y); dy = g conj(x)", runs="torch: a vector times the 0-d g")
DOTC.backward(_dot_backward(True), formula="dx = conj(g) y; dy = g x", runs="torch: a vector times the 0-d g")
NRM2.backward(_nrm2_backward, formula="dx = g x / ||x|| (0 where ||x|| = 0)", runs="torch: a vector times the 0-d g")
ASUM.backward(_asum_backward, formula="dx = g (sign(Re x) + i sign(Im x))", runs="torch: a vector times the 0-d g")
IAMAX.not_differentiable("an index")
IAMIN.not_differentiable("an index")
