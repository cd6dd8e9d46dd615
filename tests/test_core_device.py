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
    from trnsolver import iterative
    from trnsolver._nki import iterative as _nki_krylov

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


def test_lazy_conjugate_and_negative_views_are_honoured_on_neuron(dev):
    """``u.conj()`` and ``-u`` are lazy views on a device as on the CPU: products, copies to the host and
    kernel operands see the conjugated values (NumPy the reference)."""
    u = np.array([1 + 2j, 3 - 1j, -2 + 0.5j], dtype=np.complex64)
    w = np.array([2 + 0j, 1 + 1j, 0.5 - 3j], dtype=np.complex64)
    ud, wd = torch.from_numpy(u).to(NEURON), torch.from_numpy(w).to(NEURON)
    np.testing.assert_array_equal(_host(ud.conj()), np.conj(u))
    np.testing.assert_allclose(_host((ud.conj() * wd).sum()), np.vdot(u, w), rtol=1e-6)
    np.testing.assert_array_equal(_host(torch.neg(ud.conj())), -np.conj(u))


def test_trnsolver_complex_cg_on_neuron(dev):
    import trnsolver

    n = 24
    rng = _rng(12)
    M = rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))
    A = (M @ M.conj().T / n + np.eye(n)).astype(np.complex128)  # Hermitian positive definite, cond < 10
    b = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex128)
    ref = np.linalg.solve(A, b)
    with trnsolver.use_backend("torch"):
        x, info = trnsolver.cg(torch.from_numpy(A).to(NEURON), torch.from_numpy(b).to(NEURON), tol=1e-10,
                               return_info=True)
    assert x.device.type == NEURON and info.converged and info.iterations <= 2 * n
    # ||r|| < 1e-10 ||b||: the error is within cond(A) (< 10) times that
    assert np.abs(_host(x) - ref).max() <= 10 * 1e-10 * np.linalg.norm(b)


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


# --------------------------------------------------------------- the LU family: pivots on the device


def _lu_case(n=200, k=3, seed=8):
    rng = _rng(seed)
    A = rng.standard_normal((n, n)).astype(np.float32)  # two panels: 128 + 72 columns, pivoting in both
    B = rng.standard_normal((n, k)).astype(np.float32)
    return A, B


def _backward(A, X, B):
    """||A X - B|| / (||A|| ||X|| + ||B||) (inf-norms): LU with partial pivoting keeps it at a small multiple
    of n eps whatever cond(A) is, while a wrong pivot or permutation makes it O(1)."""
    A, X, B = (np.asarray(m, np.float64) for m in (A, X, B))
    norm = lambda m: np.abs(m).sum(axis=-1).max()  # noqa: E731
    return norm(A @ X - B) / (norm(A) * norm(X) + norm(B))


@pytest.mark.parametrize("name,reads", [
    # the finite check's read; lu and lu_factor return info (a device tensor) with check=False
    ("lu_factor", 1), ("lu", 1),
    # the finite check's read and the singularity info, which decides whether the call raises
    ("solve", 2), ("inv", 2),
    # lu_solve: the finite check of lu and b (one read) and the factor's singularity info
    ("lu_solve", 2),
    ("det", 0),  # no finite check (as SciPy's det), sign and log on the device
])
def test_trnsolver_lu_family_on_neuron_keeps_pivots_on_the_device(dev, name, reads):
    import trnsolver

    A, B = _lu_case()
    a, b = torch.from_numpy(A).to(NEURON), torch.from_numpy(B).to(NEURON)
    fac = trnsolver.lu_factor(a)
    call = {"lu_factor": lambda: trnsolver.lu_factor(a), "lu": lambda: trnsolver.lu(a),
            "solve": lambda: trnsolver.solve(a, b), "inv": lambda: trnsolver.inv(a),
            "lu_solve": lambda: trnsolver.lu_solve(fac, b), "det": lambda: trnsolver.det(a)}[name]
    out, kernels = _steady(dev, call)
    assert "lu_panel_kernel" in kernels or name == "lu_solve", kernels
    assert "row_gather_kernel" in kernels and "trsm_kernel" in kernels
    assert dev.host_transfers == reads, dev.transfer_sites
    outs = out if isinstance(out, tuple) else (out,)
    assert all(o.device.type == NEURON for o in outs)
    A64, B64 = A.astype(np.float64), B.astype(np.float64)
    tol = tolerance(torch.float32, 200)  # a backward error: length-200 dot products in fp32
    if name == "lu_factor":
        piv = _host(out[1])
        np.testing.assert_array_equal(piv, scipy.linalg.lu_factor(A64)[1])  # random matrix: no near ties
        LU = _host(out[0]).astype(np.float64)
        L, U = np.tril(LU, -1) + np.eye(200), np.triu(LU)
        PA = A64.copy()
        for i, p in enumerate(piv):  # apply the LAPACK swaps in order
            PA[[i, p]] = PA[[p, i]]
        assert _backward(L, U, PA) <= tol
    elif name == "lu":
        P, L, U = (_host(o).astype(np.float64) for o in out)
        np.testing.assert_array_equal(P, scipy.linalg.lu(A64)[0])
        assert np.abs(np.tril(L, -1)).max() <= 1 and np.array_equal(np.diag(L), np.ones(200))
        assert _backward(P @ L, U, A64) <= tol
    elif name in ("solve", "lu_solve"):
        assert _backward(A64, _host(out), B64) <= tol
        # and the forward error against SciPy, within cond(A) (~800 here) times that
        ref = scipy.linalg.solve(A64, B64)
        assert np.abs(_host(out) - ref).max() <= np.linalg.cond(A64) * tol * np.abs(ref).max()
    elif name == "inv":
        assert _backward(A64, _host(out), np.eye(200)) <= tol
    else:
        # |det(A)| ~ 1e187 overflows fp32: the scaled matrix A / 8 (exact) has det(A) / 8^200
        d = _host(trnsolver.det(a * 0.125))
        ref = np.linalg.det(A64 / 8)
        # log|det| sums 200 pivots' logs, each pivot within cond(A) * tol relative
        assert np.sign(d) == np.sign(ref) and abs(d / ref - 1) <= 200 * tol, (d, ref)


def test_trnsolver_lu_solve_transposed_and_singular_on_neuron(dev):
    import trnsolver
    from trnsolver import LinAlgError

    A, B = _lu_case(n=150, k=2, seed=9)
    a, b = torch.from_numpy(A).to(NEURON), torch.from_numpy(B).to(NEURON)
    fac = trnsolver.lu_factor(a)
    x, kernels = _steady(dev, trnsolver.lu_solve, fac, b, trans=1)
    assert kernels.count("row_gather_kernel") == 1 and dev.host_transfers == 2, dev.transfer_sites
    assert _backward(A.astype(np.float64).T, _host(x), B) <= tolerance(torch.float32, 150)
    ref = scipy.linalg.solve(A.astype(np.float64).T, B.astype(np.float64))  # cond(A) ~ 290
    assert np.abs(_host(x) - ref).max() <= 300 * tolerance(torch.float32, 150) * np.abs(ref).max()
    S = A.copy()
    S[:, 7] = 0.0  # exactly singular: a zero column gives an exactly zero pivot
    s = torch.from_numpy(S).to(NEURON)
    with pytest.raises(LinAlgError, match="singular"):
        trnsolver.solve(s, b)
    with pytest.raises(LinAlgError, match="singular"):
        trnsolver.inv(s)
    assert float(trnsolver.det(s)) == 0.0
    _, _, info = trnsolver.lu_factor(s, check=False)
    first_zero = scipy.linalg.lu_factor(S.astype(np.float64))[0].diagonal().tolist().index(0.0) + 1
    assert info.device.type == NEURON and int(info) == first_zero


# --------------------------------------------------------------- torch.compile on the stand-in


def _compile_cases():
    import trnblas
    import trnfft
    import trnsolver

    rng = _rng(11)
    A, B = rng.standard_normal((70, 33)).astype(np.float32), rng.standard_normal((33, 20)).astype(np.float32)
    X = (rng.standard_normal((8, 64)) + 1j * rng.standard_normal((8, 64))).astype(np.complex64)
    Xr = rng.standard_normal((8, 64)).astype(np.float32)
    M = rng.standard_normal((40, 40))
    S = (M @ M.T + 40 * np.eye(40)).astype(np.float32)
    Sp = scipy.sparse.random(50, 40, density=0.1, random_state=12, format="csr", dtype=np.float32)
    D = rng.standard_normal((40, 6)).astype(np.float32)
    return [
        ("trnblas.gemm", lambda a, b: trnblas.gemm(1.0, a, b), (A, B),
         lambda: A.astype(np.float64) @ B.astype(np.float64), 33),
        ("trnfft.fft", lambda x: trnfft.fft(x, dim=1), (X,), lambda: np.fft.fft(X.astype(np.complex128), axis=1), 64),
        ("trnfft.rfft", lambda x: trnfft.rfft(x, dim=1), (Xr,), lambda: np.fft.rfft(Xr.astype(np.float64), axis=1), 64),
        ("trnsolver.cholesky", lambda s: trnsolver.cholesky(s, check=False, check_finite=False)[0], (S,),
         lambda: scipy.linalg.cholesky(S.astype(np.float64), lower=True), 40),
        ("trnsparse.spmm", None, (Sp, D), lambda: Sp.astype(np.float64) @ D.astype(np.float64), 40),
    ]


@pytest.mark.parametrize("i", range(5), ids=["gemm", "fft", "rfft", "cholesky", "spmm"])
def test_compile_fullgraph_on_neuron_is_one_trnsci_node(dev, i):
    import trnsparse

    name, fn, args, ref, k = _compile_cases()[i]
    lib = name.split(".")[0]
    if name == "trnsparse.spmm":
        A = trnsparse.from_scipy(args[0]).to(device=NEURON)
        fn = lambda d: trnsparse.spmm(A, d)  # noqa: E731
        args = (args[1],)
    dargs = tuple(torch.from_numpy(a).to(NEURON) for a in args)
    graphs = []

    def capture(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    out = torch.compile(fn, fullgraph=True, backend=capture)(*dargs)
    import operator

    calls = [n for n in graphs[0].graph.nodes if n.op == "call_function" and n.target is not operator.getitem]
    # one node: the library's torch operator (no guard, check or layout glue around it; picking an output
    # of a tuple-valued operator is a getitem)
    assert len(graphs) == 1 and len(calls) == 1, graphs[0].code
    assert getattr(calls[0].target, "namespace", None) == lib, graphs[0].code
    # run on the device: the operator's decision launched its kernel on the resident tensors
    assert out.device.type == NEURON and dev.kernels, dev.kernels
    got, want = _host(out), ref()
    # fp32 kernels: length-k dot products on the result's scale (the DFT and GEMM bounds of the eager tests)
    assert np.abs(got - want).max() <= tolerance(torch.float32, k) * np.abs(want).max()


# --------------------------------------------------------------- every family's kernel on the device


def _walk_cases():
    """One call per kernel family of every library on resident operands (the LU family, gemm, fft, spmv,
    cholesky, cg, uniform and einsum have their own tests above)."""
    import trnblas
    import trnfft
    import trnrand
    import trnsolver
    import trnsparse
    import trntensor

    g = torch.Generator().manual_seed(0)

    def r(*s, dt=torch.float32):
        return torch.randn(*s, generator=g, dtype=dt).to(NEURON)

    M = torch.randn(48, 48, generator=g)
    S = (M @ M.T + 48 * torch.eye(48)).to(NEURON)  # SPD, cond < 10
    Sp = scipy.sparse.random(60, 48, density=0.1, random_state=1, format="csr", dtype=np.float32)
    Sq = (scipy.sparse.random(48, 48, density=0.1, random_state=2, format="csr", dtype=np.float32)
          + 4 * scipy.sparse.eye(48, dtype=np.float32)).tocsr()
    A = trnsparse.from_scipy(Sp).to(device=NEURON)
    Q = trnsparse.from_scipy(Sq).to(device=NEURON)
    L = trnsparse.from_scipy(scipy.sparse.tril(Sq).tocsr()).to(device=NEURON)

    def gen():
        return trnrand.Generator(seed=1, device=NEURON)

    return {
        "trnblas.axpy": lambda: trnblas.axpy(2.0, r(100), r(100)),
        "trnblas.dot": lambda: trnblas.dot(r(100), r(100)),
        "trnblas.iamax": lambda: trnblas.iamax(r(100)),
        "trnblas.gemv": lambda: trnblas.gemv(1.0, r(40, 30), r(30)),
        "trnblas.ger": lambda: trnblas.ger(1.0, r(40), r(30), r(40, 30)),
        "trnblas.trsv": lambda: trnblas.trsv(S, r(48)),
        "trnblas.batched_gemm": lambda: trnblas.batched_gemm(1.0, r(3, 20, 10), r(3, 10, 5)),
        "trnblas.syrk": lambda: trnblas.syrk(1.0, r(30, 20)),
        "trnblas.trsm": lambda: trnblas.trsm(1.0, S, r(48, 5)),
        "trnblas.geam": lambda: trnblas.geam(1.0, r(20, 30), 2.0, r(20, 30)),
        "trnblas.dgmm": lambda: trnblas.dgmm(r(20, 30), r(20)),
        "trnfft.ifft": lambda: trnfft.ifft(r(4, 64, dt=torch.complex64)),
        "trnfft.irfft": lambda: trnfft.irfft(r(4, 33, dt=torch.complex64)),
        "trnfft.fftn": lambda: trnfft.fftn(r(16, 16, dt=torch.complex64)),
        "trnfft.complex_matmul": lambda: trnfft.complex_matmul(r(16, 8, dt=torch.complex64),
                                                               r(8, 4, dt=torch.complex64)),
        "trnfft.stft": lambda: trnfft.stft(r(512), 64),
        "trnsparse.spmm": lambda: trnsparse.spmm(A, r(48, 4)),
        "trnsparse.spgemm": lambda: trnsparse.spgemm(A, Q),
        "trnsparse.sddmm": lambda: trnsparse.sddmm(A, r(60, 8), r(8, 48)),
        "trnsparse.spsv": lambda: trnsparse.spsv(L, r(48)),
        "trnsparse.sparse_add": lambda: trnsparse.sparse_add(Q, Q),
        "trnsolver.cho_solve": lambda: trnsolver.cho_solve(trnsolver.cho_factor(S), r(48, 2)),
        "trnsolver.solve_spd": lambda: trnsolver.solve_spd(S, r(48, 2)),
        "trnsolver.inv_spd": lambda: trnsolver.inv_spd(S),
        "trnsolver.qr": lambda: trnsolver.qr(r(60, 40)),
        "trnsolver.svd": lambda: trnsolver.svd(r(40, 30)),
        "trnsolver.eigh": lambda: trnsolver.eigh(S),
        "trnsolver.lstsq": lambda: trnsolver.lstsq(r(60, 40), r(60)),
        "trnsolver.pinv": lambda: trnsolver.pinv(r(40, 30)),
        "trnsolver.schur": lambda: trnsolver.schur(r(30, 30)),
        "trnsolver.inv_sqrt_spd": lambda: trnsolver.inv_sqrt_spd(S),
        "trnsolver.bicgstab": lambda: trnsolver.bicgstab(S, r(48)),
        "trnsolver.minres": lambda: trnsolver.minres(S, r(48)),
        "trnsolver.gmres": lambda: trnsolver.gmres(S, r(48)),
        "trnrand.normal": lambda: trnrand.normal(100, generator=gen()),
        "trnrand.randint": lambda: trnrand.randint(100, low=0, high=10, generator=gen()),
        "trnrand.gamma": lambda: trnrand.gamma(100, shape=2.0, generator=gen()),
        "trntensor.permute": lambda: trntensor.permute(r(8, 9, 10), (2, 0, 1)),
        "trntensor.reduce": lambda: trntensor.reduce(r(8, 9), axes=(1,)),
    }


def test_walk_covers_every_library():
    from trnsci import backend

    with neuron_device():
        names = set(_walk_cases())
    assert {n.split(".")[0] for n in names} == set(backend.LIBRARIES)
    ops = {n for lib in backend.LIBRARIES for n, o in dispatch.ops(lib).items() if "nki" in o._lowerings}
    assert names <= ops  # each name is an Op with an NKI lowering


@pytest.mark.parametrize("lib", ["trnblas", "trnfft", "trnsparse", "trnsolver", "trnrand", "trntensor"])
def test_every_family_runs_its_kernel_on_neuron_without_fallback(dev, lib):
    with warnings.catch_warnings():
        warnings.simplefilter("error", dispatch.NkiFallbackWarning)  # a fallback is a failure here
        for name, call in _walk_cases().items():
            if not name.startswith(lib + "."):
                continue
            dev.reset()
            out = call()
            assert dev.launches >= 1, f"{name}: no kernel ran ({trnsci.dispatch.ops(lib)[name]})"
            first = out[0] if isinstance(out, tuple) else out
            first = first.values if hasattr(first, "values") and not isinstance(first, torch.Tensor) else first
            if isinstance(first, torch.Tensor):
                assert first.device.type == NEURON, name


def test_trnsolver_bicgstab_kernel_on_neuron_reads_every_k_iterations(dev):
    import trnsolver
    from trnsolver._nki import iterative as _nki_krylov

    n = 64
    rng = _rng(13)
    A = (np.eye(n) * 4 + rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)  # non-symmetric, cond < 10
    b = rng.standard_normal(n).astype(np.float32)
    ref = np.linalg.solve(A.astype(np.float64), b.astype(np.float64))
    with trnsolver.use_backend("nki"):  # the host loop of the same kernel: one read per iteration
        _, info = trnsolver.bicgstab(torch.from_numpy(A), torch.from_numpy(b), tol=1e-6, return_info=True)
    a, bd = torch.from_numpy(A).to(NEURON), torch.from_numpy(b).to(NEURON)
    (x, got), kernels = _steady(dev, trnsolver.bicgstab, a, bd, tol=1e-6, return_info=True)
    k = _nki_krylov.CHECK_EVERY
    blocks = -(-got.iterations // k)
    assert x.device.type == NEURON and got.converged and got.iterations == info.iterations
    assert kernels.count("bicgstab_step_kernel") == blocks * k
    # reads: A's and b's finite checks, the threshold's ||b||, one per block of k iterations, the true residual (2)
    assert dev.host_transfers == 2 + 1 + blocks + 2, dev.transfer_sites
    np.testing.assert_allclose(got.residuals, info.residuals, rtol=1e-3)  # fp32, the same kernel
    # the recursion stopped at ||r|| < 1e-6 ||b||: the error is within cond(A) (< 10) times that
    assert np.abs(_host(x) - ref).max() <= 10 * 1e-6 * np.linalg.norm(b) + 1e-5


def test_trnsolver_bicgstab_torch_loop_on_neuron_reads_every_k_iterations(dev):
    import trnsolver
    from trnsolver import iterative

    n = 64
    rng = _rng(14)
    A = (np.eye(n) * 4 + rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)  # non-symmetric, cond < 10
    b = rng.standard_normal(n).astype(np.float32)
    ref = np.linalg.solve(A.astype(np.float64), b.astype(np.float64))
    with trnsolver.use_backend("torch"):
        _, info = trnsolver.bicgstab(torch.from_numpy(A), torch.from_numpy(b), tol=1e-6, return_info=True)
        a, bd = torch.from_numpy(A).to(NEURON), torch.from_numpy(b).to(NEURON)
        (x, got), kernels = _steady(dev, trnsolver.bicgstab, a, bd, tol=1e-6, return_info=True)
    blocks = -(-got.iterations // iterative.CHECK_EVERY)
    assert x.device.type == NEURON and got.converged and got.iterations == info.iterations and kernels == []
    # reads: A's and b's finite checks, one per block of k iterations, the final true residual (2)
    assert dev.host_transfers == 2 + blocks + 2, dev.transfer_sites
    np.testing.assert_allclose(got.residuals, info.residuals, rtol=1e-3)  # fp32, another summation order
    # the recursion stopped at ||r|| < 1e-6 ||b||: the error is within cond(A) (< 10) times that
    assert np.abs(_host(x) - ref).max() <= 10 * 1e-6 * np.linalg.norm(b) + 1e-5


def test_trnsolver_minres_torch_loop_on_neuron_reads_every_k_iterations(dev):
    import trnsolver
    from trnsolver import iterative

    n = 64
    rng = _rng(15)
    Q = np.linalg.qr(rng.standard_normal((n, n)))[0]
    d = np.concatenate([np.linspace(1, 5, n // 2), -np.linspace(1, 5, n // 2)])  # indefinite, cond = 5
    A = (Q * d) @ Q.T
    A = (A + A.T) / 2
    b = rng.standard_normal(n)
    ref = np.linalg.solve(A, b)
    with trnsolver.use_backend("torch"):
        _, info = trnsolver.minres(torch.from_numpy(A), torch.from_numpy(b), tol=1e-8, return_info=True)
        a, bd = torch.from_numpy(A).to(NEURON), torch.from_numpy(b).to(NEURON)
        (x, got), kernels = _steady(dev, trnsolver.minres, a, bd, tol=1e-8, return_info=True)
    blocks = -(-got.iterations // iterative.CHECK_EVERY)
    assert x.device.type == NEURON and got.converged and got.iterations == info.iterations and kernels == []
    # reads: A's and b's finite checks, one per block of k iterations, the confirmation of the estimate by
    # the true residual (once: it confirms here), the final true residual (2)
    assert dev.host_transfers == 2 + blocks + 1 + 2, dev.transfer_sites
    # float64, another summation order; the last entry is the true residual ||b - A x|| / ||b||, whose
    # rounding is ~ n eps ||A|| ||x|| / ||b|| ~ 1e-13 absolute
    np.testing.assert_allclose(got.residuals, info.residuals, rtol=1e-6, atol=1e-12)
    # ||b - A x|| < 1e-8 ||b|| with cond(A) = 5: the error is within 5e-8 ||b|| (and the slack of rounding)
    assert np.abs(_host(x) - ref).max() <= 5 * 1e-8 * np.linalg.norm(b) + 1e-12


def test_trnsolver_minres_on_neuron_resumes_after_an_unconfirmed_estimate(dev):
    import trnsolver

    # float32 and tol = 1e-7: the estimate meets the tolerance before the true residual can, so the
    # device loop resumes after a confirmation read, as the host loop does; both stop at maxiter
    n = 48
    rng = _rng(16)
    Q = np.linalg.qr(rng.standard_normal((n, n)))[0]
    A = ((Q * np.linspace(1, 100, n)) @ Q.T).astype(np.float32)
    A = (A + A.T) / 2
    b = rng.standard_normal(n).astype(np.float32)
    with trnsolver.use_backend("torch"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, info = trnsolver.minres(torch.from_numpy(A), torch.from_numpy(b), tol=1e-7, maxiter=80,
                                   return_info=True)
        a, bd = torch.from_numpy(A).to(NEURON), torch.from_numpy(b).to(NEURON)
        (x, got), _ = _steady(dev, trnsolver.minres, a, bd, tol=1e-7, maxiter=80, return_info=True)
    assert got.iterations == info.iterations == 80 and not got.converged and not info.converged
    assert len(got.residuals) == len(info.residuals) == 81
    # more than the one confirmation a converging call reads (2 + 10 blocks + 1 + 2), at most a block read
    # and a confirmation per iteration
    assert 2 + 10 + 1 + 2 < dev.host_transfers <= 2 + 2 * 80 + 2, dev.transfer_sites


@pytest.mark.parametrize("restart", [30, 5])
def test_trnsolver_gmres_torch_loop_on_neuron_reads_every_k_iterations(dev, restart):
    import trnsolver
    from trnsolver import iterative

    n = 64
    rng = _rng(17)
    A = np.eye(n) * 4 + rng.standard_normal((n, n)) / np.sqrt(n)  # non-symmetric, cond < 10
    b = rng.standard_normal(n)
    ref = np.linalg.solve(A, b)
    with trnsolver.use_backend("torch"):
        _, info = trnsolver.gmres(torch.from_numpy(A), torch.from_numpy(b), tol=1e-10, restart=restart,
                                  return_info=True)
        a, bd = torch.from_numpy(A).to(NEURON), torch.from_numpy(b).to(NEURON)
        (x, got), kernels = _steady(dev, trnsolver.gmres, a, bd, tol=1e-10, restart=restart, return_info=True)
    assert x.device.type == NEURON and got.converged and got.iterations == info.iterations and kernels == []
    # cycles of `restart` products, the last one shorter; one read per block of k inner iterations of a cycle
    k, its = iterative.CHECK_EVERY, got.iterations
    cycles = [restart] * (its // restart) + ([its % restart] if its % restart else [])
    blocks = sum(-(-c // k) for c in cycles)
    # reads: A's and b's finite checks, the blocks, the restart residual after the last (early-stopped)
    # cycle, the final true residual (2)
    assert dev.host_transfers == 2 + blocks + 1 + 2, dev.transfer_sites
    np.testing.assert_allclose(got.residuals, info.residuals, rtol=1e-6, atol=1e-14)  # float64
    # ||b - A x|| <= 1e-10 ||b|| with cond(A) < 10: the error is within 1e-9 ||b||
    assert np.abs(_host(x) - ref).max() <= 10 * 1e-10 * np.linalg.norm(b)


def test_trnsolver_minres_kernel_on_neuron_reads_every_k_iterations(dev):
    import trnsolver
    from trnsolver._nki import iterative as _nki_krylov

    n = 64
    rng = _rng(18)
    Q = np.linalg.qr(rng.standard_normal((n, n)))[0]
    d = np.concatenate([np.linspace(1, 5, n // 2), -np.linspace(1, 5, n // 2)])  # indefinite, cond = 5
    A = ((Q * d) @ Q.T).astype(np.float32)
    A = (A + A.T) / 2
    b = rng.standard_normal(n).astype(np.float32)
    ref = np.linalg.solve(A.astype(np.float64), b.astype(np.float64))
    with trnsolver.use_backend("nki"):  # the host loop of the same kernel: reads every iteration
        _, info = trnsolver.minres(torch.from_numpy(A), torch.from_numpy(b), tol=1e-5, return_info=True)
    a, bd = torch.from_numpy(A).to(NEURON), torch.from_numpy(b).to(NEURON)
    (x, got), kernels = _steady(dev, trnsolver.minres, a, bd, tol=1e-5, return_info=True)
    k = _nki_krylov.CHECK_EVERY
    blocks = -(-got.iterations // k)
    assert x.device.type == NEURON and got.converged and got.iterations == info.iterations
    assert kernels.count("minres_step_kernel") == blocks * k
    # reads: A's and b's finite checks, the threshold's ||b||, one per block of k iterations, the
    # confirmation by the true residual (once), the final true residual (2)
    assert dev.host_transfers == 2 + 1 + blocks + 1 + 2, dev.transfer_sites
    np.testing.assert_allclose(got.residuals, info.residuals, rtol=1e-3)  # fp32, the same kernel
    # ||b - A x|| < 1e-5 ||b|| with cond(A) = 5: the error is within 5e-5 ||b|| (+ fp32 rounding)
    assert np.abs(_host(x) - ref).max() <= 5 * 1e-5 * np.linalg.norm(b) + 1e-5


@pytest.mark.parametrize("restart", [30, 5])
def test_trnsolver_gmres_kernel_on_neuron_reads_every_k_iterations(dev, restart):
    import trnsolver
    from trnsolver._nki import iterative as _nki_krylov

    n = 64
    rng = _rng(19)
    A = (np.eye(n) * 4 + rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)  # cond < 10
    b = rng.standard_normal(n).astype(np.float32)
    ref = np.linalg.solve(A.astype(np.float64), b.astype(np.float64))
    with trnsolver.use_backend("nki"):  # the host loop of the same kernel: reads every inner iteration
        _, info = trnsolver.gmres(torch.from_numpy(A), torch.from_numpy(b), tol=1e-5, restart=restart,
                                  return_info=True)
    a, bd = torch.from_numpy(A).to(NEURON), torch.from_numpy(b).to(NEURON)
    (x, got), kernels = _steady(dev, trnsolver.gmres, a, bd, tol=1e-5, restart=restart, return_info=True)
    k, its = _nki_krylov.CHECK_EVERY, got.iterations
    assert x.device.type == NEURON and got.converged and its == info.iterations
    cycles = [restart] * (its // restart) + ([its % restart] if its % restart else [])
    blocks = sum(-(-c // k) for c in cycles)
    # masked inner iterations still launch: each block runs min(k, what is left of the cycle) kernels
    assert kernels.count("gmres_arnoldi_kernel") == sum(min(c + (-c) % k, restart) for c in cycles)
    # reads: A's and b's finite checks, the threshold's ||b||, the blocks, the restart residual after the
    # last (early-stopped) cycle, the final true residual (2)
    assert dev.host_transfers == 2 + 1 + blocks + 1 + 2, dev.transfer_sites
    np.testing.assert_allclose(got.residuals, info.residuals, rtol=1e-3)  # fp32 rotations vs the host's fp64
    # ||b - A x|| <= 1e-5 ||b|| with cond(A) < 10: the error is within 1e-4 ||b|| (+ fp32 rounding)
    assert np.abs(_host(x) - ref).max() <= 10 * 1e-5 * np.linalg.norm(b) + 1e-5


@pytest.mark.parametrize("name", ["minres", "gmres"])
def test_trnsolver_minres_gmres_complex_on_neuron_match_the_host_loop(dev, name):
    import trnsolver

    n = 40
    rng = _rng(20)
    Z = rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))
    if name == "minres":  # Hermitian, eigenvalues in about [1, 7]
        A, kw = (Z + Z.conj().T) / 2 / np.sqrt(n) + np.diag(np.linspace(2, 6, n)), {}
    else:  # non-Hermitian, restarted
        A, kw = np.eye(n) * 4 + Z / np.sqrt(n), {"restart": 7}
    b = rng.standard_normal(n) + 1j * rng.standard_normal(n)
    x0 = rng.standard_normal(n) + 0j
    fn = getattr(trnsolver, name)
    with trnsolver.use_backend("torch"):
        _, info = fn(torch.from_numpy(A), torch.from_numpy(b), torch.from_numpy(x0), tol=1e-10, return_info=True, **kw)
        x, got = fn(torch.from_numpy(A).to(NEURON), torch.from_numpy(b).to(NEURON), torch.from_numpy(x0).to(NEURON),
                    tol=1e-10, return_info=True, **kw)
    assert x.device.type == NEURON and got.converged and got.iterations == info.iterations
    # ||b - A x|| <= 1e-10 ||b||, cond(A) < 10: the error is within 1e-9 ||b||
    assert np.abs(_host(x) - np.linalg.solve(A, b)).max() <= 10 * 1e-10 * np.linalg.norm(b)
