"""Complex-valued neural-network layers on split-complex data.

Each layer takes a :class:`~trnfft.ComplexTensor` (returns one) or a torch
complex tensor (returns one). Parameters are real tensors (real and
imaginary parts), so any torch optimizer trains them, and every operation
is a real torch op, so autograd is exact (checked with
``torch.autograd.gradcheck`` in the tests).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from trnsci import validate

from .complex import ComplexTensor


def _split(x: Any, where: str) -> tuple[torch.Tensor, torch.Tensor, bool]:
    if isinstance(x, ComplexTensor):
        return x.real, x.imag, True
    if isinstance(x, torch.Tensor):
        if x.is_complex():
            return x.real, x.imag, False
        raise TypeError(f"{where}: x must be complex (ComplexTensor or a torch complex tensor), got dtype {x.dtype}")
    raise TypeError(f"{where}: x must be a ComplexTensor or torch complex tensor, got {type(x).__name__}")


def _join(re: torch.Tensor, im: torch.Tensor, ct: bool):
    return ComplexTensor._make(re, im) if ct else torch.complex(re, im)


def _check_dtype(xr: torch.Tensor, p: torch.Tensor, where: str) -> None:
    if xr.dtype != p.dtype:
        raise TypeError(f"{where}: x has dtype {xr.dtype} but the layer's parameters are {p.dtype}")


class _Part:
    """``layer.W_re.weight``-style access to one real part (published trnfft's sub-layer names)."""

    def __init__(self, weight):
        self.weight = weight


class _PublishedNames:
    """Checkpoints of the published trnfft load here; its attribute names read the same parameters.

    The published layers held each real part in a sub-layer (``W_re.weight``,
    ``conv_im.weight``) and biases as ``bias_re``/``bias_im``. ``_PUBLISHED``
    maps those state-dict keys onto this class's parameters; a checkpoint may
    use either spelling.
    """

    _PUBLISHED: dict[str, str] = {}

    def _accept_published_keys(self) -> None:
        def rename(state_dict, prefix, *_):
            for old, new in self._PUBLISHED.items():
                if prefix + old in state_dict and prefix + new not in state_dict:
                    state_dict[prefix + new] = state_dict.pop(prefix + old)

        self._register_load_state_dict_pre_hook(rename)

    @property
    def bias_re(self):
        return self.bias_real

    @property
    def bias_im(self):
        return self.bias_imag


class ComplexLinear(_PublishedNames, nn.Module):
    """``y = W x + b`` with complex ``W`` (out x in) and ``b``: four real matmuls.

    Parameters
    ----------
    in_features, out_features : int
    bias : bool, optional
        Learn a complex bias (default True).

    Notes
    -----
    ``W`` parts are initialized uniformly in ``+-1/sqrt(2 in_features)``,
    so ``Var(Re y) = Var(Im y)`` matches a real ``nn.Linear``'s scale.

    Parameters are ``weight_real``, ``weight_imag``, ``bias_real``,
    ``bias_imag``. The published trnfft's names read the same tensors
    (``layer.W_re.weight``, ``layer.W_im.weight``, ``layer.bias_re``,
    ``layer.bias_im``) and its checkpoints load (``load_state_dict`` accepts
    ``W_re.weight``/``W_im.weight``/``bias_re``/``bias_im`` keys).

    Examples
    --------
    >>> import torch, trnfft
    >>> layer = trnfft.nn.ComplexLinear(4, 2)
    >>> layer(torch.randn(3, 4, dtype=torch.complex64)).shape
    torch.Size([3, 2])
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True):
        super().__init__()
        i = validate.positive_int(in_features, "in_features", "ComplexLinear")
        o = validate.positive_int(out_features, "out_features", "ComplexLinear")
        bound = 1.0 / math.sqrt(2 * i)
        self.weight_real = nn.Parameter(torch.empty(o, i).uniform_(-bound, bound))
        self.weight_imag = nn.Parameter(torch.empty(o, i).uniform_(-bound, bound))
        if bias:
            self.bias_real = nn.Parameter(torch.zeros(o))
            self.bias_imag = nn.Parameter(torch.zeros(o))
        else:
            self.register_parameter("bias_real", None)
            self.register_parameter("bias_imag", None)
        self.in_features, self.out_features = i, o
        self._accept_published_keys()

    _PUBLISHED = {"W_re.weight": "weight_real", "W_im.weight": "weight_imag",
                  "bias_re": "bias_real", "bias_im": "bias_imag"}

    @property
    def W_re(self) -> _Part:
        return _Part(self.weight_real)

    @property
    def W_im(self) -> _Part:
        return _Part(self.weight_imag)

    def forward(self, x: Any):
        xr, xi, ct = _split(x, "ComplexLinear")
        _check_dtype(xr, self.weight_real, "ComplexLinear")
        if xr.shape[-1] != self.in_features:
            raise ValueError(f"ComplexLinear: x must have {self.in_features} features in its last dim, "
                             f"got shape {tuple(xr.shape)}")
        Wr, Wi = self.weight_real, self.weight_imag
        re = xr @ Wr.T - xi @ Wi.T
        im = xi @ Wr.T + xr @ Wi.T
        if self.bias_real is not None:
            re, im = re + self.bias_real, im + self.bias_imag
        return _join(re, im, ct)


class ComplexConv1d(_PublishedNames, nn.Module):
    """Complex 1-D convolution (cross-correlation, as ``nn.Conv1d``) on ``(N, C_in, L)``.

    ``y = (Wr * xr - Wi * xi) + i (Wr * xi + Wi * xr) + b``.

    Parameters
    ----------
    in_channels, out_channels, kernel_size : int
    stride, padding : int, optional
    bias : bool, optional

    Notes
    -----
    The published trnfft's names read the same parameters (``conv_re.weight``,
    ``conv_im.weight``, ``bias_re``, ``bias_im``) and its checkpoints load.

    Examples
    --------
    >>> import torch, trnfft
    >>> conv = trnfft.nn.ComplexConv1d(2, 3, 5, padding=2)
    >>> conv(torch.randn(1, 2, 16, dtype=torch.complex64)).shape
    torch.Size([1, 3, 16])
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, bias: bool = True):
        super().__init__()
        w = "ComplexConv1d"
        ci = validate.positive_int(in_channels, "in_channels", w)
        co = validate.positive_int(out_channels, "out_channels", w)
        k = validate.positive_int(kernel_size, "kernel_size", w)
        self.stride = validate.positive_int(stride, "stride", w)
        if isinstance(padding, bool) or not isinstance(padding, int) or padding < 0:
            raise ValueError(f"{w}: padding must be a non-negative int, got {padding!r}")
        self.padding = padding
        bound = 1.0 / math.sqrt(2 * ci * k)
        self.weight_real = nn.Parameter(torch.empty(co, ci, k).uniform_(-bound, bound))
        self.weight_imag = nn.Parameter(torch.empty(co, ci, k).uniform_(-bound, bound))
        if bias:
            self.bias_real = nn.Parameter(torch.zeros(co))
            self.bias_imag = nn.Parameter(torch.zeros(co))
        else:
            self.register_parameter("bias_real", None)
            self.register_parameter("bias_imag", None)
        self.in_channels = ci
        self._accept_published_keys()

    _PUBLISHED = {"conv_re.weight": "weight_real", "conv_im.weight": "weight_imag",
                  "bias_re": "bias_real", "bias_im": "bias_imag"}

    @property
    def conv_re(self) -> _Part:
        return _Part(self.weight_real)

    @property
    def conv_im(self) -> _Part:
        return _Part(self.weight_imag)

    def forward(self, x: Any):
        xr, xi, ct = _split(x, "ComplexConv1d")
        _check_dtype(xr, self.weight_real, "ComplexConv1d")
        if xr.dim() not in (2, 3) or xr.shape[-2] != self.in_channels:
            raise ValueError(f"ComplexConv1d: x must be (N, {self.in_channels}, L) or ({self.in_channels}, L), "
                             f"got shape {tuple(xr.shape)}")
        if xr.shape[-1] + 2 * self.padding < self.weight_real.shape[-1]:
            raise ValueError(f"ComplexConv1d: input length {xr.shape[-1]} (+ padding) is shorter than the kernel")
        conv = nn.functional.conv1d
        s, p = self.stride, self.padding
        re = conv(xr, self.weight_real, None, s, p) - conv(xi, self.weight_imag, None, s, p)
        im = conv(xi, self.weight_real, None, s, p) + conv(xr, self.weight_imag, None, s, p)
        if self.bias_real is not None:
            re, im = re + self.bias_real[:, None], im + self.bias_imag[:, None]
        return _join(re, im, ct)


class ComplexModReLU(nn.Module):
    """Modulus ReLU: ``f(z) = relu(|z| + b) z / |z|`` with a learned real bias per feature.

    The phase is kept; magnitudes below ``-b`` are zeroed. ``num_features``
    is the size of dim 1 (``(N, C, ...)``), or of the only dim for 1-D input.

    Examples
    --------
    >>> import torch, trnfft
    >>> act = trnfft.nn.ComplexModReLU(2)
    >>> act(torch.tensor([[3 + 4j, 0 + 0j]])).abs().detach()
    tensor([[5., 0.]])
    """

    def __init__(self, num_features: int, eps: float = 1e-8):
        super().__init__()
        self.num_features = validate.positive_int(num_features, "num_features", "ComplexModReLU")
        self.bias = nn.Parameter(torch.zeros(self.num_features))
        self.eps = float(eps)

    def forward(self, x: Any):
        xr, xi, ct = _split(x, "ComplexModReLU")
        fd = 0 if xr.dim() == 1 else 1
        if xr.dim() == 0 or xr.shape[fd] != self.num_features:
            raise ValueError(f"ComplexModReLU: x must have {self.num_features} features in dim {fd}, "
                             f"got shape {tuple(xr.shape)}")
        b = self.bias.reshape((-1,) + (1,) * (xr.dim() - fd - 1)).to(xr.dtype)
        mag = torch.sqrt(xr * xr + xi * xi + self.eps * self.eps)
        scale = torch.relu(mag + b) / mag
        return _join(xr * scale, xi * scale, ct)


class ComplexBatchNorm1d(nn.Module):
    """Complex batch normalization by 2x2 covariance whitening (Trabelsi et al., 2018).

    Per channel, the (real, imag) pair is centred and multiplied by the
    inverse square root of its 2x2 covariance ``V = [[Vrr, Vri], [Vri, Vii]]
    + eps I``, then scaled by a learned symmetric 2x2 ``gamma`` and shifted
    by a learned complex ``beta``. Uses batch statistics in training (and
    updates running ones), running statistics in eval mode.

    Input ``(N, C)`` or ``(N, C, L)``.

    Notes
    -----
    ``V^(-1/2) = (V + s I)^(-1) t`` with ``s = sqrt(det V)``,
    ``t = sqrt(Vrr + Vii + 2 s)`` (closed form for 2x2 SPD matrices).

    Examples
    --------
    >>> import torch, trnfft
    >>> bn = trnfft.nn.ComplexBatchNorm1d(3)
    >>> y = bn(torch.randn(64, 3, dtype=torch.complex64) * (2 + 1j) + 5)
    >>> bool(y.real.mean().abs() < 1e-5)
    True
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1, affine: bool = True,
                 track_running_stats: bool = True):
        super().__init__()
        c = validate.positive_int(num_features, "num_features", "ComplexBatchNorm1d")
        self.num_features, self.eps, self.momentum = c, float(eps), float(momentum)
        self.affine, self.track_running_stats = bool(affine), bool(track_running_stats)
        if self.affine:
            self.gamma_rr = nn.Parameter(torch.full((c,), 1 / math.sqrt(2)))
            self.gamma_ii = nn.Parameter(torch.full((c,), 1 / math.sqrt(2)))
            self.gamma_ri = nn.Parameter(torch.zeros(c))
            self.beta_real = nn.Parameter(torch.zeros(c))
            self.beta_imag = nn.Parameter(torch.zeros(c))
        if self.track_running_stats:
            self.register_buffer("running_mean", torch.zeros(2, c))
            self.register_buffer("running_cov", torch.stack((torch.ones(c), torch.zeros(c), torch.ones(c))))

    def forward(self, x: Any):
        xr, xi, ct = _split(x, "ComplexBatchNorm1d")
        if xr.dim() not in (2, 3) or xr.shape[1] != self.num_features:
            raise ValueError(f"ComplexBatchNorm1d: x must be (N, {self.num_features}) or (N, {self.num_features}, L),"
                             f" got shape {tuple(xr.shape)}")
        red = (0,) if xr.dim() == 2 else (0, 2)
        shape = (1, -1) if xr.dim() == 2 else (1, -1, 1)
        use_batch = self.training or not self.track_running_stats
        if use_batch:
            count = xr.numel() // self.num_features
            if count < 2:
                raise ValueError("ComplexBatchNorm1d: training needs more than one value per channel")
            mr, mi = xr.mean(red), xi.mean(red)
            cr, ci = xr - mr.reshape(shape), xi - mi.reshape(shape)
            vrr, vii, vri = (cr * cr).mean(red), (ci * ci).mean(red), (cr * ci).mean(red)
            if self.training and self.track_running_stats:
                with torch.no_grad():
                    m = self.momentum
                    self.running_mean.mul_(1 - m).add_(m * torch.stack((mr, mi)).to(self.running_mean.dtype))
                    unb = count / (count - 1)
                    self.running_cov.mul_(1 - m).add_(m * unb * torch.stack((vrr, vri, vii)).to(self.running_cov.dtype))
        else:
            mr, mi = self.running_mean[0].to(xr.dtype), self.running_mean[1].to(xr.dtype)
            vrr, vri, vii = (t.to(xr.dtype) for t in self.running_cov)
            cr, ci = xr - mr.reshape(shape), xi - mi.reshape(shape)
        vrr, vii = vrr + self.eps, vii + self.eps
        s = torch.sqrt(vrr * vii - vri * vri)
        t = torch.sqrt(vrr + vii + 2 * s)
        k = 1.0 / (s * t)
        wrr, wii, wri = ((vii + s) * k).reshape(shape), ((vrr + s) * k).reshape(shape), (-vri * k).reshape(shape)
        yr, yi = wrr * cr + wri * ci, wri * cr + wii * ci
        if self.affine:
            grr, gii, gri = (g.reshape(shape) for g in (self.gamma_rr, self.gamma_ii, self.gamma_ri))
            yr, yi = (grr * yr + gri * yi + self.beta_real.reshape(shape),
                      gri * yr + gii * yi + self.beta_imag.reshape(shape))
        return _join(yr, yi, ct)


__all__ = ["ComplexLinear", "ComplexConv1d", "ComplexModReLU", "ComplexBatchNorm1d"]
