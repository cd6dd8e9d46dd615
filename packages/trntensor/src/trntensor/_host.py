"""Measured CPU routes of einsum's GEMM steps: torch.mm/bmm or numpy.matmul, chosen by :mod:`trnsci.routes`.

The run-time autotuner (:func:`set_autotune`): each eligible GEMM step of a plan is a route of the
family ``"trntensor.gemm"``, timed on its own operands at its first execution per torch thread count
and remembered per shape class, thread count and calibration file; each plan keeps its steps' choices
(``ContractionPlan._tune``) until the routes change.
"""

from __future__ import annotations

import os
import time
import warnings

import torch

from trnsci import hostblas, validate

from ._plan_cache import _cache, _lock

__all__ = ["set_autotune", "get_autotune"]


# torch's CPU GEMMs (MKL in the PyPI wheels) and NumPy's (OpenBLAS in the PyPI wheels) differ by shape,
# dtype, thread count and CPU, and no static rule holds across machines (docs/trntensor.md,
# docs/perf-notes.md#design-gemm-routes), so each eligible GEMM step is a route of
# the family "trntensor.gemm" in trnsci.routes, the suite's one mechanism for measured choices: the
# first execution of a plan at a torch thread count times torch and numpy.matmul on the step's own
# operands (routes.measure: interleaved rounds), keeps torch unless numpy.matmul is clearly faster
# (routes.pick), remembers the choice per shape class and thread count, and persists it in the
# calibration file, so another plan with a GEMM of that class -- or another process -- takes it untimed.
_AUTOTUNE_ENV = "TRNTENSOR_AUTOTUNE"
_AUTOTUNE_DEFAULT = 5  # measured rounds per candidate (routes.measure's default)
_NP_DTYPES = (torch.float32, torch.float64)
# OpenBLAS runs a GEMM on the calling thread while M*N*K < 2 * 65536 * 4 (interface/gemm.c: threads =
# M*N*K / (SMP_THRESHOLD_MIN * GEMM_MULTITHREAD_THRESHOLD)). Beside torch's own threads
# (torch.get_num_threads() > 1) only such GEMMs are candidates: larger ones would run on the one
# thread trnsci.hostblas holds OpenBLAS to, against torch's several.
_NP_ONE_THREAD_MNK = 2 * 65536 * 4
_ROUTE_FAMILY = "trntensor.gemm"  # decisions shared through trnsci.routes (and its calibration file)


def _clock(cpu):
    """Seconds: the calling thread's CPU time (``cpu``) or wall time (see :func:`_timed_on_caller`)."""
    return time.thread_time() if cpu else time.perf_counter()


def _timed_on_caller(threads, mnk):
    """Whether both candidates of a step run on the calling thread alone, so its CPU time is what the
    GEMM costs (and is not inflated when other processes take the core): one torch thread, and an
    OpenBLAS that runs this size on the caller (below 2^19 multiply-adds, or held at one thread)."""
    return threads == 1 and (mnk < _NP_ONE_THREAD_MNK or hostblas.OPENBLAS_ONE)


def _autotune_count(value, where, name="autotune"):
    """Rounds per candidate (0 = off) from ``True``/``False``, an int, or an environment string."""
    if isinstance(value, str):
        v = value.strip().lower()
        if v in ("", "1", "on", "true", "yes", "measure", "incremental"):
            return _AUTOTUNE_DEFAULT
        if v in ("0", "off", "false", "no", "none"):
            return 0
        if v.isdigit():
            return int(v)
        raise ValueError(f"{where}: {name} {value!r} is not one of on/off/measure or a count")
    if isinstance(value, bool):
        return _AUTOTUNE_DEFAULT if value else 0
    return validate.integer(value, name, where, minimum=0, maximum=validate.INDEX_MAX)


def _autotune_from_env():
    try:
        return _autotune_count(os.environ.get(_AUTOTUNE_ENV, "on"), f"environment variable {_AUTOTUNE_ENV}")
    except ValueError as e:  # a bad setting must not break the import
        warnings.warn(f"trntensor: {e}; autotuning stays on", stacklevel=2)
        return _AUTOTUNE_DEFAULT


_autotune = [_autotune_from_env()]


def set_autotune(mode=True) -> int:
    """Switch the measured routing of CPU GEMM steps (torch or numpy.matmul) on or off (all threads).

    Parameters
    ----------
    mode : bool or int
        True (the default at import, unless the environment variable
        ``TRNTENSOR_AUTOTUNE`` says ``off``/``0``, or a count): every
        eligible GEMM step is a measured route of :mod:`trnsci.routes`
        (family ``"trntensor.gemm"``): the first execution of a plan at a
        torch thread count times ``torch.mm``/``bmm`` and
        ``numpy.matmul`` on the step's operands in interleaved rounds
        (5), and the step keeps torch unless numpy.matmul is clearly
        faster. An int sets the number of rounds (0 = off). False: every
        step runs on torch.

    Returns
    -------
    int
        The previous count (0: it was off).

    Notes
    -----
    Eligible: a GEMM or batched-GEMM step in float32/float64 on CPU, with
    operands that are plain tensors not requiring grad, under trnblas's
    backend ``"torch"`` or ``"auto"`` without a NeuronCore, precision
    ``"fast"``, ``"sr"`` or ``"kahan"``; with more than one torch thread only steps
    that OpenBLAS runs on one thread (``M*N*K < 2^19``). As every route of
    the suite: keyed by the step's shape class (strategy, batch, M, N, K,
    dtype) and the thread count, remembered in the process and persisted
    in the calibration file (:func:`trnsci.routes.choose`), nothing timed
    under ``TRNSCI_ROUTES=estimate`` (torch runs), calls into NumPy made
    through :func:`trnsci.hostblas.call`. Times are the calling thread's
    CPU time when both candidates run on it, else wall time, and then the
    choice is robust (a candidate whose slowest round stalled longer than
    torch's is not taken, :func:`trnsci.routes.pick`). The two
    BLAS libraries round differently, so results may differ in the last
    units in the last place between machines; ``einsum(...,
    autotune=False)`` or ``set_autotune(False)`` give torch's result every
    time. :func:`plan_contraction` shows each step's route and the times
    that chose it (step backend ``"numpy"`` for numpy.matmul).

    Examples
    --------
    >>> import trntensor
    >>> previous = trntensor.set_autotune(False)
    >>> trntensor.get_autotune()
    0
    >>> _ = trntensor.set_autotune(previous)
    """
    prev = _autotune[0]
    _autotune[0] = _autotune_count(mode, "set_autotune", "mode")
    return prev


def get_autotune() -> int:
    """Measured rounds per candidate of the GEMM-step routes (0: off); see :func:`set_autotune`.

    Examples
    --------
    >>> import trntensor
    >>> trntensor.get_autotune() >= 0
    True
    """
    return _autotune[0]


def _eligible(step, threads) -> bool:
    """Whether a step is a torch/numpy.matmul route at ``threads`` torch threads."""
    Bn, M, N, K = step.dims
    return (step.strategy in ("gemm", "batched_gemm") and step.dtype in _NP_DTYPES and Bn * M * N * K > 0
            and (threads == 1 or M * N * K < _NP_ONE_THREAD_MNK))


def _step_class(step) -> tuple:
    """The route key's shape class of a GEMM step: its strategy, exact extents and dtype."""
    return (step.strategy, *step.dims, str(step.dtype).replace("torch.", ""))


def _choose_step(plan, k, threads, rounds, candidates):
    """The :class:`trnsci.routes.Choice` of step ``k``; ``candidates``: ``{"torch": thunk, "numpy": thunk}``
    on the step's operands (timed only when no choice is remembered or stored for its class)."""
    from trnsci import routes

    step = plan.steps[k]
    Bn, M, N, K = step.dims
    cpu = _timed_on_caller(threads, M * N * K)
    # robust (trnsci.routes.pick: the slowest rounds compared too) whenever a candidate runs threads of its
    # own -- torch's beside it, or OpenBLAS's at one torch thread above 2^19: on a loaded machine such a
    # call waits for a core now and then, and one quiet moment must not choose it
    return routes.choose(_ROUTE_FAMILY, _step_class(step), candidates, default="torch", rounds=max(1, rounds),
                         clock=lambda: _clock(cpu), robust=not cpu)


def _count(autotune):
    if autotune is None:
        return _autotune[0]
    return (_autotune[0] or _AUTOTUNE_DEFAULT) if autotune else 0


def _held(tensors):
    """The first tensor NumPy cannot take as it is (autograd, a subclass, a negative-bit view), or None."""
    for x in tensors:
        if type(x) is not torch.Tensor or x.requires_grad or x.is_neg():
            return x
    return None


#: routed ("use") tuples of plans whose steps were all chosen at a thread count: ``plan._tune[threads]``
#: holds per pairwise step True (numpy.matmul) / False (torch), or False when every step stays on torch.
def _route(plan, ops, autotune, kernels):
    """Per-step routes of one call: ``(use, decide)``.

    ``use``: None (every step on torch) or a tuple of flags per pairwise step (True: numpy.matmul).
    ``decide``: None, or -- on a plan's first execution at this thread count -- the rounds to measure
    with: the caller then decides each eligible step on its operands (:func:`_choose_step`) and
    stores the flags (:func:`_settle`). ``kernels``: :func:`trntensor.plan.kernels_possible` now (then nothing is
    routed: numpy.matmul replaces torch, never a kernel).
    """
    count = _autotune[0] if autotune is None else _count(autotune)
    if not count or kernels or not ops[0].is_cpu:
        return None, None
    use = plan._tune.get(torch.get_num_threads())
    if use is False:
        return None, None
    if _held(ops) is not None:
        return None, None
    if use is None:
        return None, count
    return use, None


def _settle(plan, threads, use):
    """Keep a plan's per-step routes at ``threads`` (False: all torch) until the routes change."""
    plan._tune[threads] = tuple(use) if any(use) else False


def _forget_routes():
    """:func:`trnsci.routes.forget` / ``force`` / ``mode`` were called: no plan keeps routes chosen before."""
    with _lock:
        plans = list(_cache.values())
    for p in plans:
        p._tune.clear()


def _register():
    from trnsci import routes

    routes.on_change(_forget_routes)


_register()


def _route_notes(plan, device, tensors, autotune, precision, kernels):
    """What :func:`_route` will do on the next call, per step: ``(use_numpy, note)`` or None.

    ``kernels``: :func:`trntensor.plan.kernels_possible` now (then nothing is routed)."""
    from trnsci import routes

    none = [None] * len(plan.steps)
    count = _count(autotune) if precision != "dd" else 0
    if not count or (device is not None and device.type != "cpu") or kernels:
        return none
    threads = torch.get_num_threads()
    tn = f"{threads} thread" + ("s" if threads > 1 else "")
    notes = list(none)
    held = _held(tensors)
    forced = routes.forced()
    for k, step in enumerate(plan.steps[: len(plan._exec[1])]):
        if step.strategy not in ("gemm", "batched_gemm") or step.dtype not in _NP_DTYPES:
            continue
        if not _eligible(step, threads):
            notes[k] = (False, f"numpy.matmul not a route at {tn}: M*N*K >= 2^19, where OpenBLAS would "
                               f"thread the GEMM beside torch's threads") if threads > 1 else None
        elif held is not None:
            why = "autograd" if held.requires_grad else "a tensor subclass or negative-bit view"
            notes[k] = (False, f"not routed: {why} stays on torch")
        elif forced in ("torch", "numpy"):
            notes[k] = (forced == "numpy", f"route {_ROUTE_FAMILY} forced to {forced} (trnsci.routes.force)")
        else:
            c = routes.lookup(_ROUTE_FAMILY, _step_class(step))
            if c is not None and c.route in ("torch", "numpy"):
                notes[k] = (c.route == "numpy", f"route {_ROUTE_FAMILY} at {tn}: {c}")
            elif routes.current_mode() == "estimate":
                notes[k] = (False, f"route {_ROUTE_FAMILY} at {tn}: torch (TRNSCI_ROUTES=estimate: not timed)")
            else:
                notes[k] = (False, f"route {_ROUTE_FAMILY} at {tn}: not measured yet; the next call times "
                                   f"torch and numpy.matmul on its operands and keeps the faster")
    return notes

