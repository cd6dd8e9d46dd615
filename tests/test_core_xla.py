"""trnsci on torch-xla tensors (the trn1 stack): results stay on the XLA device, no host syncs of trnsci's own.

Runs in its own venv (``bash tools/dev.sh test-xla``: torch 2.9 + torch-xla
2.9, ``PJRT_DEVICE=CPU``); skipped where torch-xla is not installed (the
main venv, ``.ci/run``). Host transfers and compiles are read from
``torch_xla.debug.metrics``: ``TransferFromDeviceTime`` counts device-to-host
transfers (a host read such as ``.item()`` is one), ``CompileTime`` counts
graph compilations. Operators torch-xla 2.9 does not lower (``linalg_cholesky_ex``
among them) run through its CPU fallback, one transfer each; those are
torch-xla's, counted by its ``aten::*`` counters, and taken out.

Kernels: torch-xla's CPU device has no NeuronCore, so an XLA stand-in
launcher (:func:`trnsci._standin.xla_device`) runs the kernels of "nki"
decisions through the emulator; it moves the operands to the host and the
results back itself, and counts those transfers, so the test can require
that everything else trnsci does adds none.
"""

from __future__ import annotations

import numpy as np
import pytest

torch_xla = pytest.importorskip("torch_xla")
import torch  # noqa: E402
import torch_xla.debug.metrics as met  # noqa: E402

from trnsci import runtime  # noqa: E402
from trnsci.testing import tolerance  # noqa: E402

DEV = torch_xla.device()


def _transfers() -> int:
    data = met.metric_data("TransferFromDeviceTime")
    return 0 if data is None else data[0]


def _compiles() -> int:
    data = met.metric_data("CompileTime")
    return 0 if data is None else data[0]


def _fallbacks() -> int:
    """Operators torch-xla ran through its CPU fallback (each copies its operands to the host), host reads
    (``aten::_local_scalar_dense``) apart: those are the reads this file counts as trnsci's."""
    return sum(met.counter_value(n) or 0 for n in met.counter_names()
               if n.startswith("aten::") and n != "aten::_local_scalar_dense")


def _sync():
    torch_xla.sync()


def _steady(fn, *args, **kwargs):
    """Warm up (compile), then one more call: ``(result, host transfers of trnsci's own, compiles)`` of that
    call -- the transfers of torch-xla's CPU fallbacks (operators XLA does not lower) taken out."""
    fn(*args, **kwargs)
    _sync()
    t0, c0, f0 = _transfers(), _compiles(), _fallbacks()
    out = fn(*args, **kwargs)
    _sync()
    return out, _transfers() - t0 - (_fallbacks() - f0), _compiles() - c0


def test_runtime_is_torch_xla_without_kernels():
    rt = runtime.detect(refresh=True)
    assert rt.name == "torch-xla" and rt.device_type == "xla" and not rt.launches
    assert "torch-neuronx" in rt.reason and "nki" in rt.reason


def _spd(n, seed=0):
    M = np.random.default_rng(seed).standard_normal((n, n))
    return (M @ M.T + n * np.eye(n)).astype(np.float32)


def test_cholesky_reads_once_per_check_and_not_at_all_unchecked():
    import scipy.linalg

    import trnsolver

    A = _spd(64)
    a = torch.from_numpy(A).to(DEV)
    L, moved, compiles = _steady(trnsolver.cholesky, a)
    assert L.device.type == "xla"
    assert moved == 2  # the finite check's one value and the info of check=True
    assert compiles == 0  # the graphs those reads cut come from the cache after warm-up
    (L2, info), moved, compiles = _steady(trnsolver.cholesky, a, check=False, check_finite=False)
    assert moved == 0 and info.device.type == "xla"
    ref = scipy.linalg.cholesky(A.astype(np.float64), lower=True)
    np.testing.assert_allclose(L.cpu().numpy(), ref, rtol=0, atol=tolerance(torch.float32, 64) * np.abs(ref).max())


def test_nrm2_stays_on_the_device():
    import trnblas

    x = np.array([3e30, 4e30, 1.0], dtype=np.float32)  # the unscaled fp32 norm overflows
    r, moved, _ = _steady(trnblas.nrm2, torch.from_numpy(x).to(DEV))
    assert moved == 0 and r.device.type == "xla"
    np.testing.assert_allclose(r.cpu().numpy(), np.linalg.norm(x.astype(np.float64)), rtol=4 * 2.0**-23)


def test_gemm_on_xla_torch_path_and_through_the_standin_kernel():
    import trnblas
    from trnsci import _standin

    rng = np.random.default_rng(1)
    A, B = rng.standard_normal((70, 33)).astype(np.float32), rng.standard_normal((33, 20)).astype(np.float32)
    a, b = torch.from_numpy(A).to(DEV), torch.from_numpy(B).to(DEV)
    ref = A.astype(np.float64) @ B.astype(np.float64)
    bound = tolerance(torch.float32, 33) * np.abs(ref).max()
    c, moved, _ = _steady(trnblas.gemm, 1.0, a, b)  # "auto" without a device: torch on XLA
    assert moved == 0 and c.device.type == "xla"
    np.testing.assert_allclose(c.cpu().numpy(), ref, rtol=0, atol=bound)
    with _standin.xla_device() as dev:
        assert runtime.detect().launches and runtime.residency((a, b), {}) == "xla"
        trnblas.gemm(1.0, a, b)
        _sync()
        t0, own0, n0 = _transfers(), dev.launch_transfers, dev.launches
        c = trnblas.gemm(1.0, a, b)
        _sync()
        assert dev.kernels[-1:] == ["gemm_kernel"] and dev.launches == n0 + 1 and c.device.type == "xla"
        assert own0 < dev.launch_transfers  # the launcher read the operands on the host ...
        assert _transfers() - t0 == dev.launch_transfers - own0  # ... and nothing else did
    np.testing.assert_allclose(c.cpu().numpy(), ref, rtol=0, atol=bound)


def test_cg_compiles_once_for_all_iterations():
    import trnsolver
    from trnsolver import iterative

    n = 64
    M = np.random.default_rng(6).standard_normal((n, n))
    A = (M @ M.T / n + np.eye(n)).astype(np.float32)
    b = np.random.default_rng(7).standard_normal(n).astype(np.float32)
    a, bd = torch.from_numpy(A).to(DEV), torch.from_numpy(b).to(DEV)
    (x, it, _), moved, compiles = _steady(trnsolver.cg, a, bd, tol=1e-6)
    blocks = -(-it // iterative.CHECK_EVERY)
    assert it > iterative.CHECK_EVERY and x.device.type == "xla"  # more than one block ran ...
    assert compiles == 0  # ... on the graphs the first call compiled
    assert moved == 2 + blocks + 2  # A's and b's finite checks, one read per block, the true residual
    b2 = torch.from_numpy(np.random.default_rng(8).standard_normal(n).astype(np.float32)).to(DEV)
    c0 = _compiles()
    trnsolver.cg(a, b2, tol=1e-6)  # another right-hand side: no new graph
    _sync()
    assert _compiles() == c0
    ref = np.linalg.solve(A.astype(np.float64), b.astype(np.float64))
    assert np.abs(x.cpu().numpy() - ref).max() <= 10 * 1e-6 * np.linalg.norm(b) + 1e-5
