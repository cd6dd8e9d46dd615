"""The torch path's machinery: input kinds, options, precision modes.

Canonical form reached by validation (and what every ``_<op>_torch`` takes):
``x`` a torch tensor of dtype float32/float64/complex64/complex128,
sizes as a tuple of positive ints, dims as a tuple of distinct
non-negative ints, ``norm`` one of ``"backward"``/``"ortho"``/``"forward"``,
``precision`` one of :data:`PRECISIONS`.

Precision modes on the torch path:

* ``"fast"`` -- ``torch.fft`` (MKL or pocketfft, as torch was built) in the input's precision;
* ``"double"`` -- ``torch.fft`` in float64, result cast back to the input's precision;
* ``"kahan"``, ``"bf16"``, ``"bf16_refined"``, ``"ozaki"``, ``"ozaki_hq"`` --
  the kernel algorithms of :mod:`trnfft.algorithms` in float32 (compensated
  Stockham; bf16 DFT-GEMM operands with float32 accumulation; plus one
  residual correction; operands cut into narrow slices whose products are
  exact, Ozaki scheme). For
  float64 inputs these modes compute in float64 with ``torch.fft``: they
  describe float32 hardware arithmetic and never lower the precision of
  float64 data.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from trnsci import precision as _precision_decl
from trnsci import validate

from . import algorithms as A
from .algorithms import _SWAP_NORM, swap_norm  # noqa: F401  (the torch path's E.swap_norm, E._SWAP_NORM)
from .algorithms import as_rows as _rows
from .algorithms import norm_scale as _scale
from .algorithms import resize as _resize
from .complex import ComplexTensor

PRECISIONS = ("fast", "kahan", "double", "bf16", "bf16_refined", "ozaki", "ozaki_hq")
_precision = ["fast"]

NORM = validate.Options({"backward": ("backward", None), "ortho": ("ortho",), "forward": ("forward",)})
PRECISION = validate.Options({p: (p,) for p in PRECISIONS})

#: How every transform takes bfloat16/float16 data (:mod:`trnsci.precision`): computed in float32 and the
#: result kept in float32/complex64 (not rounded back), as ``numpy.fft`` gives float16 data.
HALF = _precision_decl.promote("float32")

#: The public transforms' declaration of :data:`HALF` on their data argument ``input`` (other tensors, a
#: window, pass as given): the input reaches validation (:func:`prep`) already in float32.
promotes_half = _precision_decl.computes_in(HALF, args=("input",), note=False)

# the dtypes prep takes (bfloat16/float16 arrive upcast by the declaration)
_DTYPES = frozenset((torch.float32, torch.float64, torch.complex64, torch.complex128))
_NAMES = "float32, float64, complex64, complex128 (bfloat16/float16 are computed in float32)"


def dtype_error(t: torch.Tensor, where: str, name: str = "input") -> TypeError:
    return TypeError(f"{where}: {name} has dtype {str(t.dtype).replace('torch.', '')}; expected one of {_NAMES}")


TORCH, CT, NUMPY = 0, 1, 2


def prep(x: Any, where: str, real_only: bool = False, name: str = "input") -> tuple[torch.Tensor, int]:
    """``(tensor, kind)`` with kind TORCH/CT/NUMPY; TypeError for unsupported kinds/dtypes. bfloat16/float16
    data arrives in float32 (the callers declare :data:`HALF`)."""
    if isinstance(x, torch.Tensor):
        if x.dtype not in _DTYPES:
            raise dtype_error(x, where, name)
        if real_only and x.is_complex():
            raise TypeError(f"{where}: {name} must be real, got dtype {str(x.dtype).replace('torch.', '')} "
                            "(use fft for complex input)")
        return x, TORCH
    if isinstance(x, ComplexTensor):
        if real_only:
            raise TypeError(f"{where}: {name} must be real, got a ComplexTensor (use fft for complex input)")
        r = x.real
        if r.dtype not in _DTYPES:
            raise dtype_error(r, where, name)
        return x.to_torch(), CT
    t = validate.tensor(x, name, where)  # NumPy arrays (shared memory) or TypeError
    return prep(t, where, real_only, name)[0], NUMPY


def wrap(y: torch.Tensor, kind: int):
    """Return ``y`` in the caller's kind: ComplexTensor for complex results of ComplexTensor input,
    NumPy for NumPy input, else the tensor."""
    if kind == TORCH:
        return y
    if kind == CT:
        return ComplexTensor._make(y.real, y.imag) if y.is_complex() else y
    return validate.to_numpy(y)


FAST_DTYPES = frozenset((torch.float32, torch.float64, torch.complex64, torch.complex128))
REAL_DTYPES = frozenset((torch.float32, torch.float64))


def precision(p: Any, where: str) -> str:
    if p is None:
        return _precision[0]
    return PRECISION(p, "precision", where)


# exact canonical spellings -> code, one dict probe; other spellings (case
# variants) and errors go through the Options parsers above
_NORM_CANON = {None: "backward", "backward": "backward", "ortho": "ortho", "forward": "forward"}
_PREC_CANON = {p: p for p in PRECISIONS}


def options(norm: Any, prec: Any, where: str) -> tuple[str, str]:
    """Canonical ``(norm, precision)`` of a call (the same answers and errors as :data:`NORM` and
    :func:`precision`, in that order)."""
    nm = _NORM_CANON.get(norm) if norm is None or type(norm) is str else None
    if nm is None:
        nm = NORM(norm, "norm", where)
    if prec is None:
        return nm, _precision[0]
    p = _PREC_CANON.get(prec) if type(prec) is str else None
    return nm, (p if p is not None else PRECISION(prec, "precision", where))


def dim1(x: torch.Tensor, dim: Any, axis_: Any, where: str) -> int:
    if axis_ is None and type(dim) is int:
        nd = x.dim()
        if -nd <= dim < nd:
            return dim + nd if dim < 0 else dim
    d = validate.alias(where, "dim", dim, "axis", axis_, -1)
    return validate.axis(d, x.dim(), "dim" if axis_ is None else "axis", where)


def n1(x: torch.Tensor, n: Any, d: int, where: str, default: int | None = None) -> int:
    if n is None:
        n = x.shape[d] if default is None else default
        if n <= 0:
            raise ValueError(f"{where}: the input has length {x.shape[d]} along dim {d}; "
                             f"give n (a positive transform length)")
        return n
    return validate.positive_int(n, "n", where)


def dims_sizes(x: torch.Tensor, s: Any, dim: Any, where: str, default_dims: tuple | None = None,
               dim_name: str = "dim"):
    """Canonical ``(sizes, dims)`` for the n-D transforms (NumPy's rules for s/axes);
    ``dim_name``: the keyword the caller used (``dim`` or ``axes``), for messages."""
    nd = x.dim()
    if s is not None:
        s = validate.positive_ints(s, "s", where)
    if dim is None:
        if default_dims is not None:
            dims = tuple(d % nd for d in default_dims) if nd >= len(default_dims) else None
            if dims is None:
                raise ValueError(f"{where}: input must have at least {len(default_dims)} dimensions, "
                                 f"got shape {tuple(x.shape)}")
            if s is not None and len(s) != len(dims):
                raise ValueError(f"{where}: s has {len(s)} entries but the transform has {len(dims)} dims")
        elif s is not None:
            if len(s) > nd:
                raise ValueError(f"{where}: s has {len(s)} entries but input has only {nd} dimensions")
            dims = tuple(range(nd - len(s), nd))
        else:
            dims = tuple(range(nd))
    else:
        dims = validate.axes(dim, nd, dim_name, where)
        if s is not None and len(s) != len(dims):
            raise ValueError(f"{where}: s has {len(s)} entries but {dim_name} has {len(dims)}")
    if not dims and nd == 0:
        raise ValueError(f"{where}: input must have at least one dimension, got a 0-d tensor")
    if s is None:
        s = tuple(x.shape[d] for d in dims)
        for d, k in zip(dims, s):
            if k <= 0:
                raise ValueError(f"{where}: the input has length 0 along dim {d}; give s (positive lengths)")
    return s, dims


# ------------------------------------------------------------------ algorithm path

def alg_c2c(x: torch.Tensor, sizes, dims, norm: str, inverse: bool, mode: str) -> torch.Tensor:
    """Complex transform along ``dims`` with the kernel algorithms (float32)."""
    x = x.to(torch.complex64)
    for n, d in zip(sizes, dims):
        x = _resize(x, n, d)
        rows, shp = _rows(x, d, n)
        yr, yi = A.fft_any(rows.real.contiguous(), rows.imag.contiguous(), inverse, mode)
        x = torch.complex(yr, yi).reshape(shp).movedim(-1, d)
    f = _scale(norm, inverse, math.prod(sizes))
    return x * f if f != 1.0 else x


def alg_r2c(x: torch.Tensor, sizes, dims, norm: str, mode: str) -> torch.Tensor:
    """Real-input transform: half spectrum along ``dims[-1]``, full along the others."""
    x = x.to(torch.float32)
    n, d = sizes[-1], dims[-1]
    x = _resize(x, n, d)
    rows, shp = _rows(x, d, n)
    rows = rows.contiguous()
    if n % 2 == 0:
        yr, yi = A.rfft_half(rows, mode)
    else:
        yr, yi = A.fft_any(rows, torch.zeros_like(rows), False, mode)
        yr, yi = yr[:, : n // 2 + 1], yi[:, : n // 2 + 1]
    y = torch.complex(yr, yi).reshape(*shp[:-1], n // 2 + 1).movedim(-1, d)
    if len(dims) > 1:
        y = alg_c2c(y, sizes[:-1], dims[:-1], "backward", False, mode)
    f = _scale(norm, False, math.prod(sizes))
    return y * f if f != 1.0 else y


def alg_c2r(x: torch.Tensor, sizes, dims, norm: str, mode: str) -> torch.Tensor:
    """Inverse of :func:`alg_r2c`: full inverse along ``dims[:-1]``, Hermitian-to-real along ``dims[-1]``."""
    x = x.to(torch.complex64)
    if len(dims) > 1:
        x = alg_c2c(x, sizes[:-1], dims[:-1], "forward", True, mode)  # unscaled inverse
    n, d = sizes[-1], dims[-1]
    h = n // 2 + 1
    x = _resize(x, h, d)
    rows, shp = _rows(x, d, h)
    Xr, Xi = rows.real.contiguous(), rows.imag.clone()
    Xi[:, 0] = 0
    if n % 2 == 0:
        Xi[:, -1] = 0
        y = A.irfft_half(Xr, Xi, n, mode)
    else:
        full_r = torch.cat((Xr, Xr[:, 1:].flip(-1)), 1)
        full_i = torch.cat((Xi, -Xi[:, 1:].flip(-1)), 1)
        y, _ = A.fft_any(full_r, full_i, True, mode)
    y = y.reshape(*shp[:-1], n).movedim(-1, d)
    f = _scale(norm, True, math.prod(sizes))
    return y * f if f != 1.0 else y


def empty(x: torch.Tensor, dims: tuple, lengths: tuple, complex_out: bool) -> torch.Tensor:
    """The (empty) result for an input with no elements (MKL/pocketfft reject empty batches)."""
    shape = list(x.shape)
    for d, n in zip(dims, lengths):
        shape[d] = n
    if x.dtype in (torch.float64, torch.complex128):
        dt = torch.complex128 if complex_out else torch.float64
    else:
        dt = torch.complex64 if complex_out else torch.float32
    return x.new_zeros(shape, dtype=dt)


def single(x: torch.Tensor) -> bool:
    return x.dtype in (torch.float32, torch.complex64)


def up64(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.complex128 if x.is_complex() else torch.float64)


def down(y: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    if single(like):
        return y.to(torch.complex64 if y.is_complex() else torch.float32)
    return y


# ------------------------------------------------------------------ Op metrics

#: Default NKI thresholds, in points (batch x transform length): placeholders
#: until ``trnsci calibrate`` runs on trn1/trn2; below them the host transform
#: finishes before a kernel launch would (docs/perf-notes.md#design-launch-placeholders).
THRESHOLD_POINTS = 2**20


def batch_of(x: torch.Tensor, dims) -> int:
    b = x.numel()
    for d in dims:
        m = x.shape[d]
        if not m:
            return 0
        b //= m
    return b


def points1(x: torch.Tensor, n: int, dim: int, norm: str, precision: str) -> int:
    """Points of a 1-D transform call: batch x n."""
    m = x.shape[dim]
    return (x.numel() // m if m else 0) * n


def pointsn(x: torch.Tensor, s: tuple, dim: tuple, norm: str, precision: str) -> int:
    """Points of an n-D transform call: batch x prod(s)."""
    return batch_of(x, dim) * math.prod(s)


def describe1(x: torch.Tensor, n: int, dim: int, norm: str, precision: str) -> str:
    return (f"batch {points1(x, n, dim, norm, precision) // n} x n={n} along dim {dim} of {tuple(x.shape)}"
            f"   (norm={norm!r}, precision={precision!r})")


def describen(x: torch.Tensor, s: tuple, dim: tuple, norm: str, precision: str) -> str:
    return (f"batch {batch_of(x, dim)} x s={tuple(s)} along dims {tuple(dim)} of {tuple(x.shape)}"
            f"   (norm={norm!r}, precision={precision!r})")


# what each transform returns: (complex output, half-spectrum length along the last transformed dim)
_KINDS = {"fft": (True, False), "ifft": (True, False), "rfft": (True, True), "irfft": (False, False),
          "hfft": (False, False), "ihfft": (True, True), "fftn": (True, False), "ifftn": (True, False),
          "rfftn": (True, True), "irfftn": (False, False)}


def transform_fake(kind: str, nd: bool):
    """The operator's fake implementation: the output's shape and dtype without computing it."""
    complex_out, half = _KINDS[kind]

    def fake(x, s, dim, norm, precision):
        dims, lengths = (tuple(dim), list(s)) if nd else ((dim,), [s])
        if half:
            lengths[-1] = lengths[-1] // 2 + 1
        shape = list(x.shape)
        for d, n in zip(dims, lengths):
            shape[d] = n
        if x.dtype in (torch.float64, torch.complex128):
            dt = torch.complex128 if complex_out else torch.float64
        else:
            dt = torch.complex64 if complex_out else torch.float32
        return x.new_empty(shape, dtype=dt)

    return fake


#: The keyword arguments every 1-D transform's Op shares: its size, description and operator schema
#: (``Op("trnfft.rfft", "points", THRESHOLD_POINTS, doc=..., fake=transform_fake("rfft", nd=False), **ONE_D)``).
ONE_D = dict(size=points1, describe=describe1,
             schema="(Tensor x, SymInt n, int dim, str norm, str precision) -> Tensor")
#: The same for every n-D transform.
N_D = dict(size=pointsn, describe=describen,
           schema="(Tensor x, SymInt[] s, int[] dim, str norm, str precision) -> Tensor")
