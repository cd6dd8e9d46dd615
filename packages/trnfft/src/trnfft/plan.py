"""FFT plans: decide once (algorithm, tables, backend), execute many times.

A plan fixes the transform kind, the transform axes and lengths, the
dtype, ``norm`` and precision; creating it precomputes the constant tables
the kernel algorithms need (DFT matrices, per-stage twiddles, Bluestein
chirps and chirp spectra -- float64 on the host, cast to float32 on use)
and picks the backend. Plans are cached (LRU, :data:`PLAN_CACHE_SIZE`
entries) by their arguments; :func:`clear_plan_cache` empties the cache and
the table caches.
"""

from __future__ import annotations

import math
import sys
from collections import OrderedDict
from typing import Any

import torch

from trnsci import precision as _precision_decl
from trnsci import validate

from . import _chirp, basic, real
from . import _engine as E
from . import _host as R
from . import algorithms as A

PLAN_CACHE_SIZE = 64
_cache: OrderedDict = OrderedDict()

# kind -> (Op, n-D?, real input?, half-spectrum input?, default dims)
_KINDS = {
    "fft": (basic.FFT, False, False, False),
    "ifft": (basic.IFFT, False, False, False),
    "rfft": (real.RFFT, False, True, False),
    "irfft": (real.IRFFT, False, False, True),
    "hfft": (real.HFFT, False, False, True),
    "ihfft": (real.IHFFT, False, True, False),
    "fft2": (basic.FFTN, True, False, False),
    "ifft2": (basic.IFFTN, True, False, False),
    "fftn": (basic.FFTN, True, False, False),
    "ifftn": (basic.IFFTN, True, False, False),
    "rfft2": (real.RFFTN, True, True, False),
    "irfft2": (real.IRFFTN, True, False, True),
    "rfftn": (real.RFFTN, True, True, False),
    "irfftn": (real.IRFFTN, True, False, True),
}
_DTYPES = (torch.float32, torch.float64, torch.complex64, torch.complex128)


class FFTPlan:
    """A transform with everything decided: create with :func:`create_plan`, run with :meth:`execute`.

    Attributes
    ----------
    kind : str
        ``"fft"``, ``"rfft"``, ``"irfftn"``, ... (the function it runs).
    dims : tuple of int
        Transform axes (negative: counted from the end, so any batch shape works).
    lengths : tuple of int
        Transform lengths along ``dims`` (the ``n``/``s`` of the function).
    input_lengths : tuple of int
        Lengths the input must have along ``dims``.
    dtype : torch.dtype
        Input dtype the plan was made for (single- or double-precision class).
    norm, precision : str
    algorithms : tuple of str
        The algorithm per axis of what :meth:`execute` runs for the planned
        shape under the current backend setting (read afresh, like
        ``backend``). When a kernel runs: the NKI routing
        (:func:`trnfft._nki.basic.plan_algorithms`: ``"dft_gemm"``, ``"stockham"``,
        ``"bluestein"``, ``"four_step"``, ``"bluestein_large"``). On torch:
        the reference algorithms the precision modes run
        (``"dft_gemm"``, ``"stockham"``, ``"bluestein"``; in ``"fast"`` and
        ``"double"`` mode, and for float64 data, the torch route computes the
        result -- torch.fft, or where timing on this machine chose them
        Bluestein on torch.fft (:mod:`trnfft._chirp`) or scipy.fft
        (:mod:`trnfft._host`) -- and the printed plan says which, with the
        times that chose it). A real axis done as one complex
        transform of half its length is prefixed ``"real_half+"``.
    backend : str
        Where :meth:`execute` runs a call of the planned shape under the
        current backend setting (``"torch"``, ``"nki"``, ``"simulator"``):
        the core's decision for the call (:meth:`trnsci.dispatch.Op.plan`),
        so a plan never disagrees with the call.
    reason : str
        Why that backend (setting, kernel support, size vs threshold).
    tables : dict
        The precomputed float64 tables (name -> numpy array).

    Examples
    --------
    >>> import torch, trnfft
    >>> p = trnfft.create_plan((16, 4096), dim=-1, kind="rfft")
    >>> p.algorithms, p.lengths
    (('real_half+stockham',), (4096,))
    >>> p.execute(torch.randn(16, 4096)).shape
    torch.Size([16, 2049])
    >>> print(p)  # doctest: +ELLIPSIS
    FFTPlan rfft lengths=(4096,) dims=(-1,) dtype=float32 norm=backward precision=fast
      backend: torch -- ...
      n=4096: real_half+stockham (complex length 2048) (computed by torch.fft)
      tables: ...
    """

    def __init__(self, kind, dims, lengths, input_lengths, dtype, norm, precision):
        lengths = validate.positive_ints(lengths, "lengths", "FFTPlan")
        self.kind, self.dims, self.lengths = kind, dims, lengths
        self.input_lengths, self.dtype, self.norm, self.precision = input_lengths, dtype, norm, precision
        if not isinstance(kind, str) or kind not in _KINDS:
            raise (ValueError if isinstance(kind, str) else TypeError)(
                f"FFTPlan: kind must be one of {', '.join(_KINDS)}, got {kind!r} (create plans with create_plan)")
        self._lowering, self._nd, self._real_in, _ = _KINDS[kind]
        self._single = dtype in (torch.float32, torch.complex64)
        real_kind = kind in ("rfft", "irfft", "hfft", "ihfft", "rfft2", "irfft2", "rfftn", "irfftn")
        inner, algs = [], []
        for i, n in enumerate(lengths):
            half = real_kind and i == len(lengths) - 1 and n % 2 == 0
            m = n // 2 if half else n  # real-input axis: one complex transform of half the length
            inner.append(m)
            algs.append(("real_half+" if half else "") + A.algorithm_for(m, precision))
        self._torch_algorithms, self._inner = tuple(algs), tuple(inner)
        self.tables = {}
        for n, alg in zip(inner, algs):
            alg = alg.split("+")[-1]
            if alg == "dft_gemm":
                c, s = A.dft_tables(n)
                self.tables[f"dft_{n}"] = c + 1j * s
            elif alg == "stockham":
                ls = 1
                for r in A.radices(n, A.max_radix_for(precision)):
                    c, s = A.stage_twiddles(ls, r)
                    self.tables[f"twiddle_{n}_stage{ls}x{r}"] = c + 1j * s
                    ls *= r
            else:
                c, s = A.chirp(n)
                self.tables[f"chirp_{n}"] = c + 1j * s
                br, bi = A.chirp_filter_spectrum(n)
                self.tables[f"chirp_spectrum_{n}_m{A.bluestein_length(n)}"] = br + 1j * bi

    def _args(self):
        """The lowering arguments of a call of this plan, on a meta tensor of the planned shape."""
        shape = self._shape
        x = torch.empty(shape, dtype=self.dtype, device="meta")
        nd = len(shape)
        dims = tuple(d % nd for d in self.dims)
        if self._nd:
            return (x, self.lengths, dims, self.norm, self.precision)
        return (x, self.lengths[0], dims[0], self.norm, self.precision)

    def dispatch_plan(self):
        """The core's :class:`trnsci.dispatch.Plan` for this plan's shape, under the current backend setting."""
        return self._lowering.plan(*self._args())

    @property
    def backend(self) -> str:
        """Where :meth:`execute` runs for the planned shape now: ``"torch"``, ``"nki"`` or ``"simulator"``
        (the same decision the call makes: :meth:`trnsci.dispatch.Op.plan`)."""
        return self.dispatch_plan().backend

    @property
    def reason(self) -> str:
        """Why that backend (backend setting, kernel support, size against threshold)."""
        return self.dispatch_plan().reason

    def _route(self) -> list[tuple[str, int, str]]:
        """Per axis ``(algorithm, inner length, detail)`` of what a call runs now (see ``algorithms``)."""
        if self.backend != "torch":
            from ._nki import basic as _nki

            return _nki.plan_algorithms(self.kind, self.lengths, self.precision)
        out = []
        by_torch = self.precision in ("fast", "double") or not self._single
        chosen = self.route_choice() if self.precision == "fast" else None
        route = chosen.route if chosen is not None else "torch"
        for n, m, alg in zip(self.lengths, self._inner, self._torch_algorithms):
            if by_torch:  # the route trnfft._host settled: torch.fft, Bluestein on torch.fft or scipy.fft
                if route == "bluestein" and _chirp.slow_length(n):
                    detail = (f"computed by Bluestein on torch.fft (trnfft._chirp), convolution length "
                              f"{_chirp._smooth_length(2 * n - 1)}")
                elif route == "scipy":
                    detail = "computed by scipy.fft (pocketfft)"
                else:
                    detail = "computed by torch.fft"
                if chosen is not None and chosen.times:
                    detail += f"; route {chosen}"
            elif alg.endswith("stockham"):
                detail = f"radices {A.radices(m, A.max_radix_for(self.precision))}"
            elif alg.endswith("bluestein"):
                detail = f"convolution length {A.bluestein_length(m)}"
            else:
                detail = ""
            out.append((alg, m, detail))
        return out

    def route_choice(self):
        """The :class:`trnsci.routes.Choice` of the torch route in precision "fast" (torch.fft,
        Bluestein or scipy.fft, measured where the code runs), for the planned shape on the CPU."""
        shape = self._shape
        nd = len(shape)
        dims = tuple(d % nd for d in self.dims)
        kind = {"fft2": "fftn", "ifft2": "ifftn", "rfft2": "rfftn", "irfft2": "irfftn"}.get(self.kind, self.kind)
        return R.choice_for(kind, tuple(shape), self.dtype, torch.device("cpu"), tuple(self.lengths), dims, self.norm)

    @property
    def algorithms(self) -> tuple:
        """The algorithm per axis of what :meth:`execute` runs now (see the class docstring)."""
        return tuple(a for a, _, _ in self._route())

    @property
    def flops(self) -> float:
        """Nominal work, ``5 N log2 N`` per transform (``N`` = product of lengths; halved for real kinds)."""
        N = math.prod(self.lengths)
        f = 5.0 * N * math.log2(N) if N > 1 else 0.0
        return f / 2 if self.kind.startswith(("r", "ir", "h", "ih")) else f

    def execute(self, x: Any) -> Any:
        """Run the planned transform on ``x`` (any batch shape; same rules for kinds as the function).

        Raises
        ------
        TypeError
            Wrong kind/dtype class for this plan.
        ValueError
            ``x`` has the wrong length along a planned axis.
        """
        return _execute(self, x)

    __call__ = execute

    def __repr__(self) -> str:
        d = self.dispatch_plan()
        lines = [f"FFTPlan {self.kind} lengths={self.lengths} dims={self.dims} dtype="
                 f"{str(self.dtype).replace('torch.', '')} norm={self.norm} precision={self.precision}",
                 f"  backend: {d.backend} -- {d.reason}"]
        for n, (alg, m, detail) in zip(self.lengths, self._route()):
            extra = f" (complex length {m})" if m != n else ""
            if detail.startswith("radices"):
                extra += f" {detail}"
            elif detail:
                extra += f" ({detail})"
            lines.append(f"  n={n}: {alg}{extra}")
        lines.append(f"  tables: {len(self.tables)} float64 tables, "
                     f"{sum(t.size for t in self.tables.values())} complex entries; nominal {self.flops:.3g} flop")
        return "\n".join(lines)


@_precision_decl.computes_in(E.HALF, args=("x",), note=False)
def _execute(plan: FFTPlan, x: Any):
    t, kind = E.prep(x, f"{plan.kind} plan", real_only=plan._real_in, name="x")
    if E.single(t) != plan._single:
        raise TypeError(f"{plan.kind} plan: x has dtype {str(t.dtype).replace('torch.', '')} but the plan was "
                        f"made for {str(plan.dtype).replace('torch.', '')}")
    nd = t.dim()
    try:
        dims = tuple(d % nd if -nd <= d < nd else None for d in plan.dims)
    except ZeroDivisionError:
        dims = (None,)
    if None in dims:
        raise ValueError(f"{plan.kind} plan: x with shape {tuple(t.shape)} lacks the planned dims {plan.dims}")
    got = tuple(t.shape[d] for d in dims)
    if got != plan.input_lengths:
        raise ValueError(f"{plan.kind} plan: x must have lengths {plan.input_lengths} along dims {plan.dims}, "
                         f"got {got}")
    if plan._nd:
        y = plan._lowering(t, plan.lengths, dims, plan.norm, plan.precision)
    else:
        y = plan._lowering(t, plan.lengths[0], dims[0], plan.norm, plan.precision)
    return E.wrap(y, kind)


def create_plan(shape: Any, dim: Any = None, kind: str = "fft", dtype: torch.dtype | None = None, *,
                s: Any = None, norm: str | None = None, precision: str | None = None,
                inverse: bool = False) -> FFTPlan:
    """Plan a transform: choose the algorithm per axis, precompute its tables, pick the backend.

    Parameters
    ----------
    shape : int or sequence of int
        The input's lengths along the transform axes -- an int ``n`` for a
        1-D transform, or the full input shape (then ``dim`` picks axes from
        it). Batch axes are free at :meth:`FFTPlan.execute` time.
    dim : int or sequence of int, optional
        Transform axes (default: -1 for 1-D kinds, the last two for ``*2``
        kinds, all of ``shape`` for ``*n`` kinds). Stored as negative
        indices, so inputs with extra leading batch axes work.
    kind : str, optional
        One of fft, ifft, rfft, irfft, hfft, ihfft, fft2, ifft2, rfft2,
        irfft2, fftn, ifftn, rfftn, irfftn (default "fft").
    dtype : torch.dtype, optional
        float32/float64/complex64/complex128 (default complex64, float32
        for real-input kinds). Only the precision class matters.
    s : int or sequence of int, optional
        Output transform lengths (the functions' ``n``/``s``).
    norm, precision : str, optional
        As for the functions (precision default: :func:`get_precision` now).
    inverse : bool, optional
        Published spelling: ``create_plan(n, inverse=True)`` plans an ``ifft``.

    Returns
    -------
    FFTPlan
        Cached: the same arguments return the same plan object.

    Raises
    ------
    TypeError, ValueError
        Bad kind, lengths, axes, dtype, norm or precision.

    Examples
    --------
    >>> import torch, trnfft
    >>> p = trnfft.create_plan(1000)
    >>> p.algorithms, p.backend
    (('bluestein',), 'torch')
    >>> x = torch.randn(8, 1000)
    >>> bool(torch.allclose(p.execute(x), torch.fft.fft(x), atol=1e-3))
    True
    """
    where = "create_plan"
    if not isinstance(kind, str) or kind.lower() not in _KINDS:
        raise ValueError(f"{where}: kind must be one of {', '.join(_KINDS)}; got {kind!r}")
    kind = kind.lower()
    if not isinstance(inverse, bool):
        raise TypeError(f"{where}: inverse must be a bool, got {type(inverse).__name__}")
    if inverse:
        kind = {"fft": "ifft", "fft2": "ifft2", "fftn": "ifftn"}.get(kind, kind)
    _, nd, real_in, half_in = _KINDS[kind]
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = (validate.positive_int(shape, "shape", where),)
    else:
        shape = validate.positive_ints(shape, "shape", where)
    if dim is None:
        dims = (-1,) if not nd else ((-2, -1) if kind.endswith("2") else tuple(range(-len(shape), 0)))
    elif not nd:
        dims = (validate.axis(dim, len(shape), "dim", where) - len(shape),)
    else:
        dims = tuple(d - len(shape) for d in validate.axes(dim, len(shape), "dim", where))
    if len(shape) < len(dims) or not dims:
        raise ValueError(f"{where}: shape {shape} has fewer axes than the transform needs ({len(dims)})")
    if not nd and len(dims) != 1:
        raise ValueError(f"{where}: {kind} transforms one axis")
    in_len = tuple(shape[d] for d in dims)
    if s is None:
        lengths = in_len[:-1] + ((2 * (in_len[-1] - 1)) if half_in else in_len[-1],)
        if lengths[-1] <= 0:
            raise ValueError(f"{where}: a half spectrum of length {in_len[-1]} needs s (output length)")
    else:
        lengths = (validate.positive_int(s, "s", where),) if isinstance(s, int) and not isinstance(s, bool) \
            else validate.positive_ints(s, "s", where)
        if len(lengths) != len(dims):
            raise ValueError(f"{where}: s has {len(lengths)} entries but the plan has {len(dims)} axes")
    if dtype is None:
        dtype = torch.float32 if real_in else torch.complex64
    if not isinstance(dtype, torch.dtype) or dtype not in _DTYPES:  # (an array would compare elementwise)
        raise TypeError(f"{where}: dtype must be one of float32, float64, complex64, complex128; got {dtype!r}")
    if real_in and dtype.is_complex:
        raise TypeError(f"{where}: {kind} takes real input; dtype {dtype} is complex")
    norm = E.NORM(norm, "norm", where)
    prec = E.precision(precision, where)
    key = (kind, shape, dims, lengths, in_len, dtype, norm, prec)
    plan = _cache.get(key)
    if plan is not None:
        _cache.move_to_end(key)
        return plan
    plan = FFTPlan(kind, dims, lengths, in_len, dtype, norm, prec)
    plan._shape = shape
    _cache[key] = plan
    while len(_cache) > PLAN_CACHE_SIZE:
        _cache.popitem(last=False)
    return plan


def clear_plan_cache() -> None:
    """Forget every cached plan and precomputed table.

    Examples
    --------
    >>> import trnfft
    >>> trnfft.clear_plan_cache()
    """
    _cache.clear()
    for f in (A.dft_tables, A.stage_twiddles, A.chirp, A.chirp_filter_spectrum):
        f.cache_clear()
    A._TABLE_CACHE.clear()
    A._LOW.clear()
    A._HALF.clear()
    nk = sys.modules.get("trnfft._nki.basic")  # the NKI lowerings' DFT-matrix cache, when loaded
    if nk is not None:
        nk._gemm_matrix_for.cache_clear()
