"""Split-complex tensors: the layout NeuronCores compute in (there is no complex dtype).

A :class:`ComplexTensor` holds two real tensors of one shape, dtype and
device, ``real`` and ``imag``. Arithmetic is done on the parts (a complex
product is four real products; a complex matrix product four real
matmuls), so it runs, and differentiates, wherever real torch does.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import torch

from trnsci import precision, validate
from trnsci.dispatch import Op

_REAL = (torch.float32, torch.float64, torch.bfloat16, torch.float16)


def _part(x: Any, name: str) -> torch.Tensor:
    t = validate.tensor(x, name, "ComplexTensor")
    if t.dtype not in _REAL:
        raise TypeError(f"ComplexTensor: {name} must be a real floating tensor, got dtype "
                        f"{str(t.dtype).replace('torch.', '')}")
    return t


class ComplexTensor:
    """A complex tensor stored as separate real and imaginary parts.

    Parameters
    ----------
    real : torch.Tensor or numpy.ndarray
        Real part (float32/float64/bfloat16/float16). If it is a complex
        tensor (or array) and ``imag`` is omitted, it is split into parts.
    imag : torch.Tensor or numpy.ndarray, optional
        Imaginary part, same shape, dtype and device as ``real``; zeros if
        omitted.

    Raises
    ------
    TypeError
        Non-tensor parts, integer/bool dtypes, or parts of different dtypes.
    ValueError
        Parts of different shapes or devices.

    Notes
    -----
    Supports ``+ - * /`` with ComplexTensors, real tensors and Python
    numbers, ``@`` (:func:`complex_matmul`), indexing, ``reshape``,
    ``transpose``, ``conj``, ``abs``, ``angle``; autograd flows through the
    parts. ``to_torch()`` / ``from_torch()`` convert to and from torch's
    complex dtypes.

    Examples
    --------
    >>> import torch, trnfft
    >>> z = trnfft.ComplexTensor(torch.tensor([1.0, 0.0]), torch.tensor([1.0, 2.0]))
    >>> (z * z.conj()).real
    tensor([2., 4.])
    >>> z.to_torch()
    tensor([1.+1.j, 0.+2.j])
    """

    __slots__ = ("real", "imag")

    def __init__(self, real: Any, imag: Any = None):
        if imag is None:
            if isinstance(real, (np.ndarray, torch.Tensor)) and (
                    (isinstance(real, torch.Tensor) and real.is_complex())
                    or (isinstance(real, np.ndarray) and real.dtype.kind == "c")):
                t = validate.tensor(real, "real", "ComplexTensor")
                self.real, self.imag = t.real, t.imag
                return
            r = _part(real, "real")
            self.real, self.imag = r, torch.zeros_like(r)
            return
        r, i = _part(real, "real"), _part(imag, "imag")
        if r.shape != i.shape:
            raise ValueError(f"ComplexTensor: real has shape {tuple(r.shape)} but imag has {tuple(i.shape)}")
        validate.same_dtype("ComplexTensor", real=r, imag=i)
        validate.same_device("ComplexTensor", real=r, imag=i)
        self.real, self.imag = r, i

    @classmethod
    def _make(cls, r: torch.Tensor, i: torch.Tensor) -> ComplexTensor:
        out = object.__new__(cls)
        out.real, out.imag = r, i
        return out

    # ---- conversion
    @classmethod
    def from_torch(cls, z: torch.Tensor) -> ComplexTensor:
        """Split a torch (complex or real) tensor into a ComplexTensor (views, no copy)."""
        if not isinstance(z, torch.Tensor):
            raise TypeError(f"ComplexTensor.from_torch: z must be a torch.Tensor, got {type(z).__name__}")
        if z.is_complex():
            return cls._make(z.real, z.imag)
        return cls(z)

    @classmethod
    def from_polar(cls, magnitude: torch.Tensor, phase: torch.Tensor) -> ComplexTensor:
        """``magnitude * exp(i phase)``."""
        return cls(magnitude * torch.cos(phase), magnitude * torch.sin(phase))

    def to_torch(self) -> torch.Tensor:
        """The same values as a torch complex tensor (complex64 or complex128)."""
        r, i = precision.upcast((self.real, self.imag))  # bfloat16/float16 parts: complex64 (exact)
        return torch.complex(r, i)

    def __trnsci_upcast__(self, dtype: torch.dtype) -> ComplexTensor:
        """Both parts in ``dtype`` (:mod:`trnsci.precision`'s protocol: how a bfloat16/float16 ComplexTensor
        enters a computation in float32)."""
        return ComplexTensor._make(self.real.to(dtype), self.imag.to(dtype))

    to_torch_complex = to_torch

    def numpy(self) -> np.ndarray:
        return self.to_torch().detach().cpu().numpy()

    # ---- metadata
    @property
    def shape(self) -> torch.Size:
        return self.real.shape

    @property
    def dtype(self) -> torch.dtype:
        return self.real.dtype

    @property
    def device(self) -> torch.device:
        return self.real.device

    @property
    def ndim(self) -> int:
        return self.real.dim()

    def dim(self) -> int:
        return self.real.dim()

    def __len__(self) -> int:
        return len(self.real)

    def __repr__(self) -> str:
        return f"ComplexTensor(shape={tuple(self.shape)}, dtype={str(self.dtype).replace('torch.', '')})"

    # ---- elementwise
    def conj(self) -> ComplexTensor:
        return ComplexTensor._make(self.real, -self.imag)

    def abs(self) -> torch.Tensor:
        """``|z|`` via ``hypot`` (no overflow for large parts)."""
        return torch.hypot(self.real, self.imag)

    def angle(self) -> torch.Tensor:
        return torch.atan2(self.imag, self.real)

    @staticmethod
    def _other(o: Any, like: torch.Tensor | None = None):
        """The other operand of ``+ - * /`` as ``(real, imag or None)``, None if not a number/tensor.

        With ``like`` (this tensor's real part), a tensor operand must have a
        numeric dtype (``TypeError``) and broadcast with it (``ValueError``)
        instead of failing inside torch."""
        if isinstance(o, ComplexTensor):
            o_shape = o.real.shape
            pair = o.real, o.imag
        elif isinstance(o, torch.Tensor):
            if o.dtype is torch.bool:
                raise TypeError("ComplexTensor: the other operand has dtype bool; use a numeric tensor")
            o_shape = o.shape
            pair = (o.real, o.imag) if o.is_complex() else (o, None)
        else:
            o_shape = None
            pair = None
        if pair is not None:
            if like is not None:
                try:
                    torch.broadcast_shapes(like.shape, o_shape)
                except RuntimeError:
                    raise ValueError(f"ComplexTensor: shapes {tuple(like.shape)} and {tuple(o_shape)} "
                                     "do not broadcast") from None
            return pair
        if isinstance(o, numbers.Complex) and not isinstance(o, bool):
            c = complex(o)
            return c.real, (c.imag if c.imag else None)
        return None

    def __add__(self, o):
        p = self._other(o, self.real)
        if p is None:
            return NotImplemented
        return ComplexTensor._make(self.real + p[0], self.imag if p[1] is None else self.imag + p[1])

    __radd__ = __add__

    def __sub__(self, o):
        p = self._other(o, self.real)
        if p is None:
            return NotImplemented
        return ComplexTensor._make(self.real - p[0], self.imag if p[1] is None else self.imag - p[1])

    def __rsub__(self, o):
        return (-self).__add__(o)

    def __neg__(self) -> ComplexTensor:
        return ComplexTensor._make(-self.real, -self.imag)

    def __mul__(self, o):
        p = self._other(o, self.real)
        if p is None:
            return NotImplemented
        c, d = p
        if d is None:
            return ComplexTensor._make(self.real * c, self.imag * c)
        if isinstance(c, torch.Tensor):  # two complex tensors: the elementwise-multiply op
            return ComplexTensor._make(*CMUL(self.real, self.imag, c, d))
        return ComplexTensor._make(self.real * c - self.imag * d, self.real * d + self.imag * c)

    __rmul__ = __mul__

    def __truediv__(self, o):
        p = self._other(o, self.real)
        if p is None:
            return NotImplemented
        c, d = p
        if d is None:
            return ComplexTensor._make(self.real / c, self.imag / c)
        # Smith-free form via a common scale keeps it simple and differentiable
        den = c * c + d * d
        return ComplexTensor._make((self.real * c + self.imag * d) / den, (self.imag * c - self.real * d) / den)

    def __rtruediv__(self, o):
        p = self._other(o, self.real)
        if p is None:
            return NotImplemented
        num = ComplexTensor._make(torch.as_tensor(p[0]) + 0 * self.real,
                                  (0 * self.imag) if p[1] is None else torch.as_tensor(p[1]) + 0 * self.imag)
        return num / self

    def __matmul__(self, o):
        if isinstance(o, (ComplexTensor, torch.Tensor)):
            return complex_matmul(self, o)
        return NotImplemented

    def __rmatmul__(self, o):
        if isinstance(o, torch.Tensor):
            return complex_matmul(o, self)
        return NotImplemented

    # ---- shape
    def __getitem__(self, key) -> ComplexTensor:
        return ComplexTensor._make(self.real[key], self.imag[key])

    def __setitem__(self, key, value) -> None:
        p = self._other(value)
        if p is None:
            raise TypeError(f"ComplexTensor: cannot assign a {type(value).__name__}")
        self.real[key] = p[0]
        self.imag[key] = 0 if p[1] is None else p[1]

    def reshape(self, *shape) -> ComplexTensor:
        return ComplexTensor._make(self.real.reshape(*shape), self.imag.reshape(*shape))

    def transpose(self, dim0: int, dim1: int) -> ComplexTensor:
        nd = max(self.real.dim(), 1)  # torch lets a 0-d tensor name dim 0 / -1
        dim0 = validate.axis(dim0, nd, "dim0", "ComplexTensor.transpose")
        dim1 = validate.axis(dim1, nd, "dim1", "ComplexTensor.transpose")
        return ComplexTensor._make(self.real.transpose(dim0, dim1), self.imag.transpose(dim0, dim1))

    def unsqueeze(self, dim: int) -> ComplexTensor:
        dim = validate.axis(dim, self.real.dim() + 1, "dim", "ComplexTensor.unsqueeze")
        return ComplexTensor._make(self.real.unsqueeze(dim), self.imag.unsqueeze(dim))

    def squeeze(self, dim: int | None = None) -> ComplexTensor:
        if dim is None:
            return ComplexTensor._make(self.real.squeeze(), self.imag.squeeze())
        dim = validate.axis(dim, max(self.real.dim(), 1), "dim", "ComplexTensor.squeeze")
        return ComplexTensor._make(self.real.squeeze(dim), self.imag.squeeze(dim))

    def to(self, *args, **kwargs) -> ComplexTensor:
        """As ``torch.Tensor.to`` on both parts; what torch refuses is a ``ValueError``."""
        try:
            real = self.real.to(*args, **kwargs)
        except RuntimeError as e:  # a device or dtype torch does not know
            raise ValueError(f"ComplexTensor.to: {str(e).splitlines()[0][:120]}") from None
        return ComplexTensor._make(real, self.imag.to(*args, **kwargs))

    def clone(self) -> ComplexTensor:
        return ComplexTensor._make(self.real.clone(), self.imag.clone())

    def detach(self) -> ComplexTensor:
        return ComplexTensor._make(self.real.detach(), self.imag.detach())

    def contiguous(self) -> ComplexTensor:
        return ComplexTensor._make(self.real.contiguous(), self.imag.contiguous())


def _parts(x: Any, name: str):
    if isinstance(x, ComplexTensor):
        return x.real, x.imag
    t = validate.tensor(x, name, "complex_matmul")
    if t.is_complex():
        return t.real, t.imag
    if t.dtype not in _REAL:
        raise TypeError(f"complex_matmul: {name} has dtype {str(t.dtype).replace('torch.', '')}; "
                        "expected a floating or complex dtype")
    return t, None


def complex_matmul(a: Any, b: Any) -> ComplexTensor:
    """Complex matrix product ``a @ b`` as real matmuls of the parts.

    Parameters
    ----------
    a, b : ComplexTensor, torch.Tensor or numpy.ndarray
        Operands with ``torch.matmul``-compatible shapes (batching
        broadcasts); real operands have zero imaginary part.

    Returns
    -------
    ComplexTensor
        ``(ar br - ai bi) + i (ar bi + ai br)`` -- four real matmuls (two if
        one side is real) on torch; one real GEMM ``[ar | ai] @ [[br, bi],
        [-bi, br]]`` on the DFT-as-GEMM kernel under a kernel backend (two
        float32 matrices).

    Raises
    ------
    TypeError
        Non-numeric operands or mismatched dtypes.
    ValueError
        Shapes that do not multiply.

    Examples
    --------
    >>> import torch, trnfft
    >>> a = trnfft.ComplexTensor(torch.eye(2), torch.eye(2))
    >>> trnfft.complex_matmul(a, a).imag
    tensor([[2., 0.],
            [0., 2.]])
    """
    ar, ai = _parts(a, "a")
    br, bi = _parts(b, "b")
    if ar.dtype != br.dtype:
        raise TypeError(f"complex_matmul: a has dtype {ar.dtype} but b has {br.dtype}; cast them to one dtype")
    try:
        if ai is None and bi is None:
            yr = ar @ br
            return ComplexTensor._make(yr, torch.zeros_like(yr))
        return ComplexTensor._make(*CMATMUL(ar, ai, br, bi))
    except RuntimeError as e:
        raise ValueError(f"complex_matmul: a has shape {tuple(ar.shape)} and b has shape {tuple(br.shape)}; "
                         "they do not multiply") from e


def _cmatmul_flops(ar, ai, br, bi):
    k = ar.shape[-1]
    m = ar.shape[-2] if ar.dim() >= 2 else 1
    n = br.shape[-1] if br.dim() >= 2 else 1
    batch = max(ar.numel() // max(m * k, 1), br.numel() // max(k * n, 1), 1)
    return 8.0 * batch * m * k * n


def _cmatmul_describe(ar, ai, br, bi):
    return f"{tuple(ar.shape)} @ {tuple(br.shape)} complex (split planes)"


#: Complex matrix product of split planes ``(ar, ai, br, bi) -> (yr, yi)`` (``ai`` or ``bi`` None: a real
#: side). The kernel path is one real GEMM ``[ar | ai] @ [[br, bi], [-bi, br]]`` on the DFT-as-GEMM
#: kernel. Threshold (flops, 8 m k n): not calibrated on hardware (none here); the GEMM of 2**30 flops
#: (about 512^3 complex) is where trnblas's placeholder puts a kernel launch's worth.
CMATMUL = Op("trnfft.complex_matmul", "flops", 2.0**30, size=_cmatmul_flops, describe=_cmatmul_describe,
             dtype=lambda ar, *rest: ar.dtype,
             schema="(Tensor ar, Tensor? ai, Tensor br, Tensor? bi) -> (Tensor, Tensor)",
             fake=lambda ar, ai, br, bi: _cmatmul_torch(ar, ai, br, bi),  # on fake tensors: shapes only
             doc="complex matmul of split planes: one real block GEMM on dft_gemm_kernel; flops = 8 m k n")


@CMATMUL.lowering("torch")
def _cmatmul_torch(ar, ai, br, bi):
    if ai is None:
        return ar @ br, ar @ bi
    if bi is None:
        return ar @ br, ai @ br
    return ar @ br - ai @ bi, ar @ bi + ai @ br


# ------------------------------------------------------------------ op

def _cmul_points(ar, ai, br, bi):
    return max(ar.numel(), br.numel())


def _cmul_describe(ar, ai, br, bi):
    return f"{tuple(ar.shape)} * {tuple(br.shape)} elementwise (split complex)"


#: Elementwise complex product of split planes, ``(ar, ai, br, bi) -> (yr, yi)``
#: (ComplexTensor ``*``). Threshold: elements; a placeholder until calibrated on
#: hardware: an elementwise pass is memory bound on the host too, so only very
#: large products are worth a kernel launch (docs/perf-notes.md#design-launch-placeholders).
def _cmul_fake(ar, ai, br, bi):
    """The operator's fake implementation: the broadcast shape and promoted dtype, without computing."""
    shape = torch.broadcast_shapes(ar.shape, ai.shape, br.shape, bi.shape)
    dt = torch.promote_types(torch.promote_types(ar.dtype, ai.dtype), torch.promote_types(br.dtype, bi.dtype))
    return ar.new_empty(shape, dtype=dt), ar.new_empty(shape, dtype=dt)


CMUL = Op("trnfft.complex_mul", "points", 2**24, size=_cmul_points, describe=_cmul_describe,
          schema="(Tensor ar, Tensor ai, Tensor br, Tensor bi) -> (Tensor, Tensor)", fake=_cmul_fake,
          doc="elementwise complex multiply of split real/imaginary planes; points = elements")


@CMUL.lowering("torch")
def _cmul_torch(ar, ai, br, bi):
    return ar * br - ai * bi, ar * bi + ai * br
