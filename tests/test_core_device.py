"""Kernels on resident device tensors: the stand-in ``neuron`` device (trnsci.testing.neuron_device).

For one op of each kernel family of the six libraries: under backend
"auto", operands on ``neuron`` run the NKI kernel on the device (no torch
fallback), the result is a ``neuron`` tensor, no host transfer happens after
warm-up, and the numbers equal an independent reference (NumPy/SciPy) within
the tolerance stated at each call. Also: the runtime report, host operands
under "nki" (moved once, cost in the plan), a kernel failure falling back on
the device, and checks that read nothing on the host.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse
import torch

import trnsci
from trnsci import dispatch, runtime
from trnsci.testing import neuron_device, tolerance

NEURON = "neuron"  # a device string: the stand-in registers the type when first entered


@pytest.fixture
def dev():
    with neuron_device() as d:
        yield d


def _steady(dev, fn, *args, **kwargs):
    """Warm up (route tables, settled routes), zero the counters, call again; the result and the kernels run."""
    fn(*args, **kwargs)
    dev.reset()
    out = fn(*args, **kwargs)
    return out, list(dev.kernels)


def _host(t):
    """Read a device result on the host (after the counters were taken)."""
    return t.cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)


def _rng(seed=0):
    return np.random.default_rng(seed)


# --------------------------------------------------------------- the runtime


def test_runtime_reports_the_standin_only_inside_the_block():
    assert runtime.detect(refresh=True).standin is None
    with neuron_device():
        rt = runtime.detect()
        assert (rt.name, rt.device_type, rt.launches) == ("torchneuron", "neuron", True)
        assert "stand-in" in rt.standin
    rt = runtime.detect()
    assert rt.standin is None and rt.name == "none" and not rt.launches
    assert "torch-neuronx" in rt.reason  # why kernels do not run here


def test_info_names_runtime_nki_and_why(capsys):
    from trnsci.cli import main

    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "runtime         none" in out
    assert "NKI             0.6.0 modeled (emulator); kernels support 0.6, 0.7" in out
    assert "kernels         do not run on a device: neither torch-neuronx" in out


def test_standin_counts_transfers_and_rejects_mixed_devices(dev):
    a = torch.ones(3, 2).to("neuron")
    assert dev.host_transfers == 1 and a.device.type == NEURON
    b = (a * 2).sum()  # on the device
    assert dev.host_transfers == 1
    assert float(b) == 12.0 and dev.host_transfers == 2  # a host read
    with pytest.raises(RuntimeError, match="same device"):
        _ = a + torch.ones(3, 2)


# --------------------------------------------------------------- one op per library


def test_trnblas_gemm_on_neuron(dev):
    import trnblas

    rng = _rng(1)
    A, B = rng.standard_normal((70, 33)).astype(np.float32), rng.standard_normal((33, 20)).astype(np.float32)
    a, b = torch.from_numpy(A).to(NEURON), torch.from_numpy(B).to(NEURON)
    c, kernels = _steady(dev, trnblas.gemm, 1.5, a, b)
    assert kernels == ["gemm_kernel"] and dev.host_transfers == 0
    assert c.device.type == NEURON
    ref = 1.5 * (A.astype(np.float64) @ B.astype(np.float64))
    # fp32 dot products of length 33: 16 (k + 1) eps relative, scaled by the largest entry
    np.testing.assert_allclose(_host(c), ref, rtol=tolerance(torch.float32, 33),
                               atol=tolerance(torch.float32, 33) * np.abs(ref).max())


def test_trnblas_nrm2_on_neuron_reads_nothing_on_the_host(dev):
    import trnblas

    x = np.array([3e30, 4e30, 1.0], dtype=np.float32)  # the unscaled fp32 norm overflows
    t = torch.from_numpy(x).to(NEURON)
    r, _ = _steady(dev, trnblas.nrm2, t)
    assert dev.host_transfers == 0 and r.device.type == NEURON and dev.launches == 1, dev.transfer_sites
    # the norm of x is 5e30 exactly up to fp32 rounding of the inputs: 4 ulp
    np.testing.assert_allclose(_host(r), np.linalg.norm(x.astype(np.float64)), rtol=4 * 2.0**-23)
    with trnblas.use_backend("torch"):  # the torch lowering's scaled path, on the device
        r, kernels = _steady(dev, trnblas.nrm2, t)
    assert kernels == [] and dev.host_transfers == 0
    np.testing.assert_allclose(_host(r), np.linalg.norm(x.astype(np.float64)), rtol=4 * 2.0**-23)


def test_trnfft_fft_on_neuron(dev):
    import trnfft

    rng = _rng(2)
    X = (rng.standard_normal((130, 64)) + 1j * rng.standard_normal((130, 64))).astype(np.complex64)
    x = torch.from_numpy(X).to(NEURON)
    y, kernels = _steady(dev, trnfft.fft, x, dim=1)
    assert kernels and dev.host_transfers == 0 and y.device.type == NEURON, dev.transfer_sites
    ref = np.fft.fft(X.astype(np.complex128), axis=1)
    # an fp32 DFT-as-GEMM of length 64: error bounded by the length-64 dot product bound times max|X|
    err = np.abs(_host(y) - ref).max() / np.abs(ref).max()
    assert err <= tolerance(torch.float32, 64)


def test_trnsparse_spmv_on_neuron(dev):
    import trnsparse

    S = scipy.sparse.random(260, 150, density=0.03, random_state=7, format="csr", dtype=np.float32)
    x = _rng(3).standard_normal(150).astype(np.float32)
    A = trnsparse.from_scipy(S)
    Ad = A.to(device=NEURON)
    xd = torch.from_numpy(x).to(NEURON)
    y, kernels = _steady(dev, trnsparse.spmv, Ad, xd)
    assert kernels == ["csr_spmv_kernel"] and dev.host_transfers == 0 and y.device.type == NEURON, dev.transfer_sites
    ref = S.astype(np.float64) @ x.astype(np.float64)
    # row sums of at most 150 products in fp32
    bound = tolerance(torch.float32, 150) * (abs(S).astype(np.float64) @ np.abs(x)).max()
    np.testing.assert_allclose(_host(y), ref, rtol=0, atol=bound)


def test_trnsolver_cholesky_on_neuron(dev):
    import trnsolver

    rng = _rng(4)
    M = rng.standard_normal((300, 300))  # three blocks of the blocked factorization
    A = (M @ M.T + 300 * np.eye(300)).astype(np.float32)
    a = torch.from_numpy(A).to(NEURON)
    L, kernels = _steady(dev, trnsolver.cholesky, a)
    assert kernels and L.device.type == NEURON
    # the finite check and the positive-definiteness check (check=True) read one value each: nothing else
    assert dev.host_transfers == 2, dev.transfer_sites
    dev.reset()
    L = trnsolver.cholesky(a, check_finite=False)
    assert dev.host_transfers == 1, dev.transfer_sites  # the info read of check=True only
    dev.reset()
    L2, info = trnsolver.cholesky(a, check=False, check_finite=False)
    assert dev.host_transfers == 0 and info.device.type == NEURON, dev.transfer_sites
    ref = scipy.linalg.cholesky(A.astype(np.float64), lower=True)
    # fp32 Cholesky of a well-conditioned matrix (cond < 10): errors of length-300 dot products on the
    # factor's scale
    np.testing.assert_allclose(_host(L), ref, rtol=0, atol=tolerance(torch.float32, 300) * np.abs(ref).max())
    np.testing.assert_array_equal(_host(L2), _host(L))


def test_trnrand_uniform_on_neuron(dev):
    import trnrand

    def draw():
        return trnrand.uniform(517, generator=trnrand.Generator(seed=2024, device="neuron"))

    u, kernels = _steady(dev, draw)
    assert kernels == ["philox_kernel"] and dev.host_transfers == 0 and u.device.type == NEURON, dev.transfer_sites
    want = trnrand.uniform(517, generator=trnrand.Generator(seed=2024))  # the CPU torch path: bit for bit
    assert np.array_equal(_host(u), want.numpy())


def test_trntensor_einsum_on_neuron(dev):
    import trntensor

    rng = _rng(5)
    A, B = rng.standard_normal((40, 30)).astype(np.float32), rng.standard_normal((30, 20)).astype(np.float32)
    a, b = torch.from_numpy(A).to(NEURON), torch.from_numpy(B).to(NEURON)
    c, kernels = _steady(dev, trntensor.einsum, "ij,jk->ik", a, b)
    # resident operands: the GEMM step runs trnblas's kernel whatever its size (no transfer to amortize)
    assert "gemm_kernel" in kernels and dev.host_transfers == 0 and c.device.type == NEURON, dev.transfer_sites
    ref = A.astype(np.float64) @ B.astype(np.float64)
    np.testing.assert_allclose(_host(c), ref, rtol=0, atol=tolerance(torch.float32, 30) * np.abs(ref).max())


# --------------------------------------------------------------- decisions, plans, failures


def test_resident_operands_skip_the_threshold_host_operands_keep_it(dev):
    import trnblas

    a, b = torch.ones(4, 3), torch.ones(3, 2)
    p = trnsci.plan_call(trnblas.gemm, 1.0, a, b)  # host operands: tiny, below the threshold
    assert p.backend == "torch" and "below threshold" in p.reason
    p = trnsci.plan_call(trnblas.gemm, 1.0, a.to(NEURON), b.to(NEURON))
    assert p.backend == "nki" and "resident on 'neuron'" in p.reason and p.transfer_bytes == 0
    assert "transfer" in str(p)


def test_host_operands_under_nki_move_once_with_the_cost_in_the_plan(dev):
    import trnblas

    A, B = np.ones((8, 5), np.float32), np.full((5, 3), 2.0, np.float32)
    a, b = torch.from_numpy(A), torch.from_numpy(B)
    with trnblas.use_backend("nki"):
        p = trnsci.plan_call(trnblas.gemm, 1.0, a, b)
        assert p.backend == "nki" and p.transfer_bytes == A.nbytes + B.nbytes
        dev.reset()
        c = trnblas.gemm(1.0, a, b)
    assert c.device.type == "cpu" and dev.launches == 1
    assert dev.host_transfers == 3  # two operands to the device, one result back
    np.testing.assert_array_equal(c.numpy(), A @ B)  # small integers: exact


def test_kernel_failure_falls_back_on_the_device(dev, monkeypatch):
    import trnblas
    from trnblas.level3 import GEMM

    def broken(*args, **kwargs):
        raise RuntimeError("stand-in kernel failure")

    a, b = torch.ones(4, 3).to(NEURON), torch.ones(3, 2).to(NEURON)
    dispatch._warned.clear()
    with GEMM.override("nki", broken), warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        dev.reset()
        c = trnblas.gemm(1.0, a, b)
        c2 = trnblas.gemm(1.0, a, b)
    assert c.device.type == NEURON and c2.device.type == NEURON and dev.host_transfers == 0
    assert sum(issubclass(x.category, dispatch.NkiFallbackWarning) for x in w) == 1  # one per cause
    monkeypatch.setenv("TRNSCI_REQUIRE_NKI", "1")
    with GEMM.override("nki", broken), pytest.raises(dispatch.NkiRequiredError):
        trnblas.gemm(1.0, a, b)


def test_finite_check_on_device_reads_once_and_still_catches_nan(dev):
    from trnsci import linalg as la

    a = torch.ones(5, 5).to(NEURON)
    b = torch.ones(5).to(NEURON)
    dev.reset()
    la.finite("f", A=a, B=b)
    assert dev.host_transfers == 1
    bad = b.clone()
    bad[2] = float("nan")
    with pytest.raises(ValueError, match="B contains NaN or Inf"):
        la.finite("f", A=a, B=bad)


def test_trnsolver_cg_on_neuron_reads_every_k_iterations(dev):
    import trnsolver
    from trnsolver import _nki_krylov, iterative

    n = 64
    M = _rng(6).standard_normal((n, n))
    A = (M @ M.T / n + np.eye(n)).astype(np.float32)
    b = _rng(7).standard_normal(n).astype(np.float32)
    ref = np.linalg.solve(A.astype(np.float64), b.astype(np.float64))
    _, info = trnsolver.cg(torch.from_numpy(A), torch.from_numpy(b), tol=1e-6, return_info=True)
    a, bd = torch.from_numpy(A).to(NEURON), torch.from_numpy(b).to(NEURON)
    for backend, k in (("auto", _nki_krylov.CHECK_EVERY), ("torch", iterative.CHECK_EVERY)):
        with trnsolver.use_backend(backend):
            (x, got), kernels = _steady(dev, trnsolver.cg, a, bd, tol=1e-6, return_info=True)
        it = got.iterations
        blocks = -(-it // k)
        assert x.device.type == NEURON and it == info.iterations and got.converged
        assert len(got.residuals) == it + 1
        assert kernels == (["cg_step_kernel"] * (blocks * k) if backend == "auto" else [])
        # reads: A's and b's finite checks, ||b|| for the kernel loop's threshold, one per block of k
        # iterations, the final true residual (2)
        assert dev.host_transfers == 2 + (backend == "auto") + blocks + 2, dev.transfer_sites
        # the recursion stopped at ||r|| < 1e-6 ||b||: the error is within cond(A) (< 10 here) times that
        assert np.abs(_host(x) - ref).max() <= 10 * 1e-6 * np.linalg.norm(b) + 1e-5
        np.testing.assert_allclose(got.residuals, info.residuals, rtol=1e-3)  # fp32, another summation order


@pytest.mark.parametrize("installed,facts,core,want,why", [
    # trn2/trn3: TorchNeuron with NKI 0.7 and a device node -> kernels launch on 'neuron' tensors
    ({"torch-neuronx": "2.13.0", "nki": "0.7.0"}, ("0.7.0", "neuron"), True, ("torchneuron", True),
     "'neuron' tensors"),
    # trn1: torch-neuronx 2.9 + torch-xla, whose Neuron 2.31 brings NKI 0.5 (refused: the emulator is used)
    ({"torch-neuronx": "2.9.0.2.15", "torch-xla": "2.9.0", "nki": "0.5.0"}, ("0.6.0 modeled", "emulator"), True,
     ("torch-xla", False), "nki 0.5.0 is older than 0.6 (torch-neuronx 2.9 / torch-xla is pinned to Neuron 2.31"),
    # TorchNeuron installed on a machine without a Neuron device
    ({"torch-neuronx": "2.14.0", "nki": "0.7.0"}, ("0.7.0", "neuron"), False, ("torchneuron", False),
     "no Neuron device node"),
])
def test_runtime_detection_of_the_two_stacks(monkeypatch, installed, facts, core, want, why):
    from trnsci import nki as tnki

    monkeypatch.setattr(runtime, "_version", lambda dist: installed.get(dist))
    monkeypatch.setattr(runtime, "_nki_facts", lambda: facts)
    monkeypatch.setattr(runtime, "_device_node", lambda: core)
    monkeypatch.setattr(tnki, "has_neuron_device", lambda: core)
    try:
        rt = runtime.detect(refresh=True)
        assert (rt.name, rt.launches) == want and why in rt.reason, rt
        assert any(line.strip().startswith("runtime") for line in rt.lines())
    finally:
        monkeypatch.undo()
        runtime.detect(refresh=True)
