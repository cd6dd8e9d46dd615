"""Running kernels: ``nki.jit``, ``simulate`` and ``profile``.

Each call of a kernel creates a fresh trace context (fresh counters and
capacity tracking).  NumPy arrays (and CPU torch tensors) among the
arguments become HBM tensors, without a copy: a kernel that writes into an
argument writes into the caller's array, as on hardware.  Everything else
(Python scalars, tuples, dtypes, strings, None) is a compile-time constant
passed through unchanged.  HBM tensors the kernel returns come back as NumPy
arrays (a tuple if the kernel returns a tuple).
"""

import functools
import types

import numpy as np

from . import memory as mem
from ._blas import blas_threads
from .errors import EmulatorError
from .multicore import Scheduler


class Kernel:
    """A kernel function wrapped by ``nki.jit``.  Calling it runs the emulator."""

    def __init__(self, fn, grid=(), **options):
        self.fn = fn
        self.grid = tuple(grid)
        self.options = options
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        if mem.active() is not None:
            # a jit kernel called from inside a running kernel (nki-library's wrappers call their
            # implementation kernels this way) is traced inline: same trace, target and program
            return self.fn(*args, **kwargs)
        out, _ = run(self, args, kwargs)
        return out

    def __getitem__(self, grid):
        """SPMD launch grid: ``kernel[2, 3](...)`` runs the body per program id."""
        if not isinstance(grid, tuple):
            grid = (grid,)
        return Kernel(self.fn, grid, **self.options)

    def __repr__(self):
        return f"<nki.jit kernel {getattr(self.fn, '__name__', '?')} (emulator)>"


def jit(fn=None, **kwargs):
    """``@nki.jit`` or ``@nki.jit(mode=...)``: wrap a kernel function (options are kept, not interpreted)."""
    if fn is None:
        return lambda f: Kernel(f, **kwargs)
    if isinstance(fn, Kernel):
        return fn
    return Kernel(fn, **kwargs)


def _as_numpy(x):
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "detach") and hasattr(x, "numpy"):  # torch.Tensor
        t = x.detach()
        if getattr(t, "device", None) is not None and str(t.device) != "cpu":
            t = t.cpu()
        if str(t.dtype) == "torch.bfloat16":  # NumPy has no bf16: reinterpret the bits
            import ml_dtypes
            import torch

            return t.contiguous().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        return t.numpy()
    return None


def _wrap(x, name):
    a = _as_numpy(x)
    if a is None:
        return x
    if a.ndim == 0:
        raise EmulatorError(f"kernel argument '{name}' is a 0-d array; pass a Python scalar for compile-time constants")
    return mem.wrap_hbm(a, name)


def _unwrap(x):
    if isinstance(x, mem.Tensor):
        if x.on_chip:
            raise EmulatorError(
                f"kernel returned {x.buffer.name.upper()} tile '{x.name}'; kernels return "
                "HBM tensors (nl.ndarray(..., buffer=nl.shared_hbm) written with nl.store)"
            )
        if x.buffer is not mem.shared_hbm:
            # NKI 0.3.0 release notes ("Output tensors must use buffer=nl.shared_hbm. Using nl.hbm causes
            # compilation failures") and nki/migration/index.rst say the same; the kernel-optimization
            # tutorial's nl.hbm outputs (dated 12/02/2025) predate that release (04/09/2026)
            raise EmulatorError(
                f"kernel returned '{x.name}' allocated in nl.{x.buffer.name}; kernel outputs must be allocated "
                "with buffer=nl.shared_hbm since NKI 0.3 (release-notes/components/nki.rst 0.3.0, "
                "nki/migration/index.rst 'Output tensors must use nl.shared_hbm')"
            )
        return np.array(x._read(), copy=True)
    if isinstance(x, tuple):
        return tuple(_unwrap(v) for v in x)
    if isinstance(x, list):
        return [_unwrap(v) for v in x]
    if isinstance(x, dict):
        return {k: _unwrap(v) for k, v in x.items()}
    return x


_TARGET_ALIASES = {"trn1": "trn1", "gen2": "trn1", "trn2": "trn2", "gen3": "trn2"}


def default_target():
    """trn1, or the target NEURON_PLATFORM_TARGET_OVERRIDE names (as AWS's simulator reads it)."""
    import os

    v = os.environ.get("NEURON_PLATFORM_TARGET_OVERRIDE", "").strip().lower()
    if not v:
        return "trn1"
    if v not in _TARGET_ALIASES:
        raise EmulatorError(
            f"NEURON_PLATFORM_TARGET_OVERRIDE={v!r}: the emulator models trn1 (gen2) and trn2 (gen3) only"
        )
    return _TARGET_ALIASES[v]


def run(kernel, args, kwargs, target=None):
    """Run a kernel (Kernel or plain function); return (outputs, KernelProfile)."""
    if target is None:
        target = default_target()
    fn = kernel.fn if isinstance(kernel, Kernel) else kernel
    grid = kernel.grid if isinstance(kernel, Kernel) else ()
    if not callable(fn):
        raise TypeError(f"kernel must be callable, got {type(kernel).__name__}")
    ctx = mem.TraceContext(target)
    with ctx, blas_threads():
        names = _arg_names(fn, len(args))
        wargs = [_wrap(a, n) for a, n in zip(args, names)]
        wkw = {k: _wrap(v, k) for k, v in kwargs.items()}
        ctx.grid = grid
        if grid:  # programs as concurrent threads, one running at a time (multicore.py)
            ctx.scheduler = Scheduler(ctx, grid)
            result = ctx.scheduler.run(fn, wargs, wkw)
        else:
            ctx.program_id = ()
            ctx.shared_index = 0
            result = fn(*wargs, **wkw)
        ctx.check_capacity()
        out = _unwrap(result)
        del result, wargs, wkw
    return out, ctx.profile()


def _arg_names(fn, n):
    code = getattr(fn, "__code__", None)
    names = list(code.co_varnames[: code.co_argcount]) if code else []
    return [names[i] if i < len(names) else f"arg{i}" for i in range(n)]


def simulate(kernel, *args, **kwargs):
    """Run a kernel on NumPy arrays and return its outputs.

    Two forms: ``simulate(kernel, *arrays, **kw)`` runs now;
    ``simulate(kernel)`` (no further arguments) returns a callable, as
    ``nki.simulate(kernel)(*arrays)`` does.
    """
    if not args and not kwargs:
        return lambda *a, **k: run(kernel, a, k)[0]
    return run(kernel, args, kwargs)[0]


def profile(kernel, *args, target=None, **kwargs):
    """Run a kernel and return ``(outputs, KernelProfile)`` for ``target``."""
    return run(kernel, args, kwargs, target=target)


def simulate_kernel(kernel, *args, **kwargs):
    """Legacy NKI form: ``nki.simulate_kernel(kernel, *arrays)``."""
    return run(kernel, args, kwargs)[0]


def _torch_like(out, ref):
    """Outputs as torch tensors on ``ref``'s device when the caller passed torch tensors (as AWS's simulate)."""
    if ref is None:
        return out
    if isinstance(out, tuple):
        return tuple(_torch_like(o, ref) for o in out)
    if isinstance(out, list):
        return [_torch_like(o, ref) for o in out]
    if isinstance(out, np.ndarray):
        from trnsci.nki import from_numpy

        return from_numpy(out, device=ref.device)
    return out


def _nki_simulate(kernel):
    """``nki.simulate(kernel)``: a callable that runs the kernel on the CPU emulator.

    Called with NumPy arrays it returns NumPy arrays; called with torch tensors
    it returns torch tensors (on the first tensor's device), as the 0.6 stub
    says.  A plain function is wrapped with ``nki.jit``.
    """
    kernel = kernel if isinstance(kernel, Kernel) else jit(kernel)

    def call(*a, **k):
        ref = next((x for x in list(a) + list(k.values())
                    if not isinstance(x, np.ndarray) and hasattr(x, "detach") and hasattr(x, "device")), None)
        return _torch_like(run(kernel, a, k)[0], ref)

    return call


def _make_nki_namespace(nl, nisa):
    """The emulated top-level ``nki`` module: ``jit``, ``simulate``, ``language``, ``isa``."""
    ns = types.ModuleType("nki", "Emulated top-level nki namespace (trnsci.nki.emulator)")
    ns.jit = jit
    ns.simulate = _nki_simulate
    ns.__all__ = ["jit", "simulate"]
    ns.language = nl
    ns.isa = nisa
    return ns
