"""Test helpers every trnsci library uses, so tests state their tolerances and prove what ran.

* :func:`random` -- reproducible standard-normal data (complex when asked) as
  NumPy, for feeding both the code under test and an independent reference.
* :func:`tolerance` / :func:`assert_close` -- compare with a reference under
  a stated tolerance (default: ``16 (k + 1) eps`` of the dtype, the
  rounding-error bound of a length-``k`` dot product with room for a
  different summation order; Higham, *Accuracy and Stability*, ch. 3).
* :func:`kernel_ran` -- a context that runs the block under the simulator
  backend and fails unless an NKI kernel (not the torch fallback) ran.
* :func:`assert_counts` -- the emulator's counters equal closed forms; a key
  the profile does not have is a failure, not a skip.
* :func:`assert_plan_matches_run` -- what a plan says is what the call does.
* :func:`neuron_device` -- a stand-in TorchNeuron ``neuron`` device (CPU memory,
  kernels through the emulator) counting host transfers and kernel launches.

Examples
--------
>>> import torch
>>> from trnsci import testing
>>> x = testing.random((3,), torch.complex64, seed=1)
>>> x.dtype
dtype('complex64')
>>> testing.assert_close(x * 1, x, dtype=torch.complex64)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import torch

__all__ = ["random", "tolerance", "assert_close", "kernel_ran", "assert_counts", "assert_plan_matches_run",
           "torch_threads", "choice_at_cost", "neuron_device", "NUMPY_DTYPES", "TORCH_DTYPES"]

#: torch dtype -> NumPy dtype (bfloat16 through ml_dtypes when installed).
NUMPY_DTYPES = {torch.float16: np.float16, torch.float32: np.float32, torch.float64: np.float64,
                torch.complex64: np.complex64, torch.complex128: np.complex128}
try:
    import ml_dtypes

    NUMPY_DTYPES[torch.bfloat16] = ml_dtypes.bfloat16
except ImportError:  # pragma: no cover
    pass
TORCH_DTYPES = {np.dtype(v): k for k, v in NUMPY_DTYPES.items()}


def _np_dtype(dtype) -> np.dtype:
    return np.dtype(NUMPY_DTYPES[dtype]) if isinstance(dtype, torch.dtype) else np.dtype(dtype)


def _real_torch_dtype(dtype) -> torch.dtype:
    if not isinstance(dtype, torch.dtype):
        dtype = TORCH_DTYPES[np.dtype(dtype)]
    return dtype.to_real() if dtype.is_complex else dtype


def random(shape, dtype=torch.float64, seed: int = 0) -> np.ndarray:
    """Standard-normal entries (real and imaginary parts for complex dtypes) as a NumPy array.

    ``dtype`` is a torch or NumPy dtype; ``torch.from_numpy`` turns the result
    into a tensor sharing memory.
    """
    rng = np.random.default_rng(seed)
    np_dt = _np_dtype(dtype)
    a = rng.standard_normal(shape)
    if np_dt.kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(np_dt)


def tolerance(dtype, k: int = 1) -> float:
    """``16 (k + 1) eps``: the relative error allowed for a length-``k`` dot product in ``dtype``.

    A length-``k`` dot product has error at most about ``k eps sum|a_i b_i|``;
    the factor 16 leaves room for a different summation order while an O(1)
    mistake still fails.
    """
    return 16 * (k + 1) * torch.finfo(_real_torch_dtype(dtype)).eps


def _numpy(x) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu()
        if x.dtype == torch.bfloat16:
            x = x.float()
        return x.numpy()
    return np.asarray(x)


def assert_close(actual, desired, *, dtype=None, k: int = 1, rtol: float | None = None,
                 atol: float | None = None) -> None:
    """Fail unless ``actual`` matches the reference ``desired`` within a stated tolerance.

    Shapes must be equal. By default ``rtol = tolerance(dtype, k)`` and
    ``atol = rtol * max(1, max|desired|)`` (errors scale with the largest
    entry, so small entries are not held to a relative bound they cannot
    meet). ``dtype`` defaults to ``actual``'s. Pass ``rtol``/``atol`` to
    state another bound -- and say why in a comment.
    """
    a, d = _numpy(actual), _numpy(desired)
    if a.shape != d.shape:
        raise AssertionError(f"shape {a.shape} differs from the reference's {d.shape}")
    if rtol is None:
        rtol = tolerance(dtype if dtype is not None else TORCH_DTYPES.get(a.dtype, torch.float64), k)
    if atol is None:
        finite = np.abs(d[np.isfinite(d)]) if d.size else d
        scale = max(1.0, float(finite.max())) if finite.size else 1.0
        atol = rtol * scale
    np.testing.assert_allclose(a, d, rtol=rtol, atol=atol)


@contextlib.contextmanager
def kernel_ran(*kernels: str, backend: str = "simulator") -> Iterator[list]:
    """Run the block under ``backend`` and fail unless an NKI kernel ran in it.

    Yields the list of :class:`trnsci.nki.KernelRun` filled in by the block.
    With ``kernels`` given, the kernel names that ran must equal them, in
    order. A torch fallback -- silent or with a warning -- fails the test.

    >>> import torch, trnblas
    >>> with kernel_ran("gemm_kernel"):
    ...     _ = trnblas.gemm(1.0, torch.ones(3, 2), torch.ones(2, 4))
    """
    from trnsci import nki
    from trnsci.backend import use_backend

    with use_backend(backend), nki.capture() as runs:
        yield runs
    names = [r.kernel for r in runs]
    if not names:
        raise AssertionError(f"no NKI kernel ran under backend {backend!r}: the torch path computed the result")
    if kernels and names != list(kernels):
        raise AssertionError(f"kernels run: {names}; expected {list(kernels)}")


@contextlib.contextmanager
def neuron_device() -> Iterator[Any]:
    """A stand-in for TorchNeuron's ``neuron`` device, active inside the block.

    Yields an object with the counters ``host_transfers`` (copies between the
    device and the CPU, host reads such as ``.item()`` included) and
    ``launches`` (kernels run on device tensors), ``kernels`` (their names),
    ``device`` (``torch.device("neuron")``) and ``reset()``. Inside the block
    :mod:`trnsci.runtime` reports the stand-in as the runtime and kernels of
    ``"nki"`` decisions run on the resident tensors through the emulator;
    ATen operators on ``neuron`` tensors run on their CPU memory. See
    :mod:`trnsci._standin`.

    >>> import torch, trnblas
    >>> with neuron_device() as dev:
    ...     a = torch.ones(4, 3, device="neuron"); b = torch.ones(3, 2, device="neuron")
    ...     dev.reset()
    ...     c = trnblas.gemm(1.0, a, b)
    >>> c.device.type, dev.launches, dev.host_transfers
    ('neuron', 1, 0)
    """
    from trnsci import _standin

    with _standin.device() as dev:
        yield dev


def _profile_counters(prof) -> dict[str, Any]:
    return {"hbm_read_bytes": prof.hbm_read_bytes, "hbm_write_bytes": prof.hbm_write_bytes,
            "flops": prof.flops, **prof.instructions}


def assert_counts(profile, expected: Mapping[str, int], *, ignore: tuple[str, ...] = ()) -> None:
    """Fail unless every closed-form figure in ``expected`` equals the profile's counter.

    ``profile`` is a :class:`trnsci.nki.emulator.profile.KernelProfile` (from
    :func:`trnsci.nki.profile` or a captured ``KernelRun.profile``). A key of
    ``expected`` the profile does not count is a failure -- name it in
    ``ignore`` if it is a planning figure rather than a counter.
    """
    got = _profile_counters(profile)
    missing = sorted(k for k in expected if k not in got and k not in ignore)
    if missing:
        raise AssertionError(f"the profile has no counter for {missing}; it counts {sorted(got)}")
    wrong = {k: (got[k], v) for k, v in expected.items() if k not in ignore and got[k] != v}
    if wrong:
        raise AssertionError("emulator counted != closed form: "
                             + ", ".join(f"{k}: {g} != {w}" for k, (g, w) in sorted(wrong.items())))


def assert_plan_matches_run(fn, *args, **kwargs):
    """Plan ``fn(*args, **kwargs)``, run it, and fail unless the plan said what ran.

    The plan's backend must be the backend the call used (``"torch"`` when no
    kernel ran, else the kernel's backend), and ``plan.kernels`` the kernels it
    launched (each once, in the order of its first launch); when the plan names a kernel and
    its closed-form figures, exactly that kernel ran once and its counters
    equal them. Runs under whatever backend is in effect. Returns
    ``(plan, result, runs)``.
    """
    from trnsci import nki
    from trnsci.dispatch import plan_call

    plan = plan_call(fn, *args, **kwargs)
    with nki.capture() as runs:
        result = fn(*args, **kwargs)
    ran = runs[0].backend if runs else "torch"
    if plan.backend != ran:
        raise AssertionError(f"{plan.op}: the plan said {plan.backend!r} ({plan.reason}) but the call ran on "
                             f"{ran!r} (kernels: {[r.kernel for r in runs]})")
    launched = tuple(dict.fromkeys(r.kernel for r in runs))
    if plan.kernels != launched:
        raise AssertionError(f"{plan.op}: the plan named kernels {plan.kernels}; the call launched {launched}")
    if plan.kernel is not None and plan.kernel.get("kernels"):  # several launches, summed figures
        names = [r.kernel for r in runs]
        if names != list(plan.kernel["kernels"]):
            raise AssertionError(f"{plan.op}: the plan listed launches {plan.kernel['kernels']}; ran {names}")
        if all(r.profile is not None for r in runs):
            figures = {k: v for k, v in plan.kernel.items() if k not in ("name", "kernels")}
            summed: dict = {}
            for r in runs:
                for k, v in _profile_counters(r.profile).items():
                    summed[k] = summed.get(k, 0) + v
            wrong = {k: (summed.get(k), v) for k, v in figures.items() if summed.get(k) != v}
            if wrong:
                raise AssertionError(f"{plan.op}: summed counters != closed form: {wrong}")
    elif plan.kernel is not None:
        names = [r.kernel for r in runs]
        if names != [plan.kernel["name"]]:
            raise AssertionError(f"{plan.op}: the plan named kernel {plan.kernel['name']!r}; ran {names}")
        if runs[0].profile is not None:
            figures = {k: v for k, v in plan.kernel.items() if k != "name"}
            counters = _profile_counters(runs[0].profile)
            assert_counts(runs[0].profile, figures, ignore=tuple(k for k in figures if k not in counters
                                                                 and not k.startswith("hbm")))
    return plan, result, runs


def kernel_ops(library: str) -> set[str]:
    """Names of ``library``'s ops that have an NKI lowering (what its plans test must cover)."""
    from trnsci import dispatch

    return {name for name, op in dispatch.ops(library).items() if op.has_kernel}


def plan_cases(cases: Mapping[str, list]) -> list:
    """``{op_name: [case, ...]}`` as ``(op_name, case)`` pairs for ``pytest.mark.parametrize``.

    A case is ``(fn, args)`` or ``(fn, args, kwargs)``; ``args`` may be a
    zero-argument callable that builds them when the test runs (large inputs).
    """
    return [(name, case) for name, group in cases.items() for case in group]


def check_plan_case(backend: str, op_name: str, case, *, also: tuple[str, ...] = ()):
    """Run one plan case under ``backend`` with :func:`assert_plan_matches_run`.

    Also requires that the plan is of ``op_name`` (or one of ``also``, for a
    public function that may dispatch a different op) and that under
    ``"torch"`` no kernel ran. Returns ``(plan, runs)`` for further checks.
    """
    from trnsci.backend import use_backend

    fn, args, kwargs = (*case, {})[:3]
    args = args() if callable(args) else args
    with use_backend(backend):
        plan, _, runs = assert_plan_matches_run(fn, *args, **kwargs)
    if plan.op != op_name and plan.op not in also:
        raise AssertionError(f"planned op {plan.op!r}, expected {op_name!r}")
    if backend == "torch" and (runs or plan.backend != "torch"):
        raise AssertionError(f"{op_name}: backend 'torch' but the plan said {plan.backend!r} / kernels ran")
    return plan, runs


@contextlib.contextmanager
def scratch_ops() -> Iterator[None]:
    """Forget every :class:`~trnsci.dispatch.Op` (and its threshold) created inside the block.

    Tests that build throw-away ops under a real library's prefix (to pick
    up that library's backend scope) use it, so that a library's own
    "every kernel op has plan cases" test never sees them.
    """
    from trnsci import dispatch

    with dispatch._lock:
        ops_before, reg_before = set(dispatch._OPS), set(dispatch._REGISTRY)
    try:
        yield
    finally:
        with dispatch._lock:
            for name in set(dispatch._OPS) - ops_before:
                del dispatch._OPS[name]
            for name in set(dispatch._REGISTRY) - reg_before:
                del dispatch._REGISTRY[name]


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """torch's intra-op thread count set to ``n`` inside the block, restored after it."""
    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def choice_at_cost(family: str, cls, candidates: Mapping, default: str, cost_ms: Mapping[str, float],
                   rounds: int = 3):
    """The :class:`trnsci.routes.Choice` that measuring ``candidates`` gives when candidate ``name`` takes
    ``cost_ms[name]`` milliseconds per call: every candidate really runs (so its side effects and
    errors show), the clock advances by the stated costs only. For tests of a library's route choice."""
    from trnsci import routes

    state = {"t": 0.0}

    def timed(name, fn):
        def run():
            fn()
            state["t"] += cost_ms[name] * 1e-3
        return run

    times = routes.measure({k: timed(k, f) for k, f in candidates.items()}, rounds=rounds,
                           clock=lambda: state["t"])[0]
    return routes.Choice(routes.route_key(family, cls), routes.pick(times, default), "measured", default=default)


# ------------------------------------------------------------------ multi-rank checks

class RankChecks(list):
    """Named pass/fail checks one rank of a spawned job collects (``check(name, cond, detail)``).

    A rank's check function returns it; :func:`trnsci.distributed.spawn` brings
    every rank's list back to the test, which :func:`assert_ranks_passed`
    judges, so one failing check on one rank is reported by name and rank
    instead of deadlocking the others on an assertion.
    """

    def check(self, name: str, cond, detail="") -> None:
        self.append((name, bool(cond), str(detail)))


def assert_ranks_passed(results, count: int | None = None, at_least: int = 1) -> None:
    """Every check of every rank passed, and every rank ran the same number of them.

    ``count``: the exact number expected; else at least ``at_least``.
    """
    bad = [(r, name, detail) for r, res in enumerate(results) for name, ok, detail in res if not ok]
    assert not bad, bad
    sizes = [len(res) for res in results]
    assert len(set(sizes)) == 1, f"the ranks ran different numbers of checks: {sizes}"
    if count is not None:
        assert sizes[0] == count, f"{sizes[0]} checks ran, {count} expected"
    else:
        assert sizes[0] >= at_least, f"{sizes[0]} checks ran, at least {at_least} expected"
