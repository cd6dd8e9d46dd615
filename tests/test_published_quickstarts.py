"""The published quickstarts of the six libraries, run here (issue 25).

One test per library carries a representative snippet of its published
quickstart / README (github.com/trnsci/<lib>, docs/quickstart.md), written
anew with the same calls and arguments, and checks every result against an
independent reference (NumPy / SciPy), so a migrating user's first lines
give the published numbers here. Where a published snippet itself was wrong
against the published package (trntensor's ``cp_reconstruct(factors)``
without weights, trnsparse's ``COOMatrix(rows, cols, vals)`` argument
order) the README's or the class's published form is used.

Tolerances: a float32 result is compared within ``c * n * eps32 * scale``
(``n`` the reduction length, ``scale`` the magnitude of the exact result),
c = 4-16 leaving room for summation order; float64 within 1e-10 relative.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import scipy.signal
import scipy.stats
import torch

EPS32 = float(np.finfo(np.float32).eps)


def _np(x):
    """A result as a NumPy array (ComplexTensor included)."""
    if not isinstance(x, (torch.Tensor, np.ndarray)) and hasattr(x, "real") and hasattr(x, "imag"):
        return _np(x.real) + 1j * _np(x.imag)
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def _close32(got, want, n):
    want = np.asarray(want)
    scale = max(np.abs(want).max(), 1.0)
    np.testing.assert_allclose(_np(got), want, rtol=0, atol=16 * n * EPS32 * scale)


def _g(seed):
    return torch.Generator().manual_seed(seed)


def test_trnblas_quickstart():
    import trnblas

    g = _g(0)
    A, B = torch.randn(256, 128, generator=g), torch.randn(128, 64, generator=g)
    a, b = A.double().numpy(), B.double().numpy()
    _close32(trnblas.gemm(alpha=1.0, A=A, B=B), a @ b, 128)
    Ab, Bb = torch.randn(32, 128, 64, generator=g), torch.randn(32, 64, 32, generator=g)
    _close32(trnblas.batched_gemm(1.0, Ab, Bb), Ab.double().numpy() @ Bb.double().numpy(), 64)
    L = torch.linalg.cholesky(A.T @ A + torch.eye(128))
    B2 = torch.randn(128, 16, generator=g)
    X = trnblas.trsm(1.0, L, B2, uplo="lower")
    ref = scipy.linalg.solve_triangular(L.double().numpy(), B2.double().numpy(), lower=True)
    _close32(X, ref, 128 * 8)  # L's condition number is ~16: a few extra units
    # the whole A^T A (issue 25: the published package returned it, its README relies on it)
    _close32(trnblas.syrk(1.0, A, trans=True), a.T @ a, 256)
    x = torch.randn(128, generator=g)
    _close32(trnblas.gemv(1.0, A, x), a @ x.double().numpy(), 128)
    u, v = torch.randn(256, generator=g), torch.randn(256, generator=g)
    un, vn = u.double().numpy(), v.double().numpy()
    _close32(trnblas.axpy(2.0, u, v), 2.0 * un + vn, 1)
    _close32(trnblas.dot(u, v), un @ vn, 256)
    _close32(trnblas.nrm2(u), np.linalg.norm(un), 256)
    # README: gemm with beta/C/transA, symm
    C0 = torch.randn(128, 64, generator=g)
    A3 = torch.randn(256, 64, generator=g)
    _close32(trnblas.gemm(alpha=1.0, A=A, B=A3, beta=0.5, C=C0, transA=True),
             a.T @ A3.double().numpy() + 0.5 * C0.double().numpy(), 256)
    D = torch.randn(64, 64, generator=g)
    D = D + D.T
    H = torch.randn(64, 16, generator=g)
    _close32(trnblas.symm(1.0, D, H, side="left"), D.double().numpy() @ H.double().numpy(), 64)
    assert trnblas.HAS_NKI in (True, False)


def test_trnfft_quickstart():
    import trnfft
    from trnfft import ComplexTensor

    g = _g(1)
    signal = torch.randn(1024, generator=g)
    s = signal.double().numpy()
    X = trnfft.fft(signal)
    _close32(X, np.fft.fft(s), 10 * 4)
    _close32(trnfft.ifft(X), s, 10 * 8)
    R = trnfft.rfft(signal)
    _close32(R, np.fft.rfft(s), 10 * 4)
    _close32(trnfft.irfft(R, n=1024), s, 10 * 8)
    image = torch.randn(256, 256, generator=g)
    _close32(trnfft.fft2(image), np.fft.fft2(image.double().numpy()), 16 * 4)
    volume = torch.randn(8, 16, 32, generator=g)
    F = trnfft.fftn(volume)
    _close32(F, np.fft.fftn(volume.double().numpy()), 12 * 4)
    _close32(trnfft.ifftn(F), volume.double().numpy(), 12 * 8)
    # STFT with the published default window (Hann) -- scipy.signal.stft's, unscaled
    waveform = torch.randn(16000, generator=g)
    S = trnfft.stft(waveform, n_fft=512, hop_length=256)
    w = waveform.double().numpy()
    _, _, Z = scipy.signal.stft(np.pad(w, 256, mode="reflect"), window="hann", nperseg=512, noverlap=256,
                                boundary=None, padded=False, scaling="spectrum")
    _close32(S, Z * scipy.signal.get_window("hann", 512).sum(), 512)
    recovered = trnfft.istft(S, n_fft=512, hop_length=256, length=16000)
    _close32(recovered, w, 512)
    # split-complex arithmetic
    zr, zi = torch.randn(4, 4, generator=g), torch.randn(4, 4, generator=g)
    z = ComplexTensor(zr, zi)
    zn = zr.double().numpy() + 1j * zi.double().numpy()
    _close32(z * z, zn * zn, 2)
    _close32(z @ z, zn @ zn, 8)
    _close32(z.conj(), zn.conj(), 1)
    _close32(z.abs(), np.abs(zn), 2)
    _close32(z.angle(), np.angle(zn), 4)
    # complex layers: shapes as published
    from trnfft.nn import ComplexLinear, ComplexModReLU

    x = ComplexTensor(torch.randn(8, 256, generator=g), torch.randn(8, 256, generator=g))
    y = ComplexModReLU(128)(ComplexLinear(256, 128)(x))
    assert isinstance(y, ComplexTensor) and tuple(y.real.shape) == (8, 128)
    assert trnfft.HAS_NKI in (True, False)


def test_trnsolver_quickstart():
    import trnsolver

    g = _g(2)
    A = torch.randn(64, 64, generator=g)
    A = A @ A.T
    an = A.double().numpy()
    w, V = trnsolver.eigh(A)
    scale = np.abs(an).max()
    _close32(w, np.linalg.eigvalsh(an), 64 * 4)
    _close32(V @ torch.diag(w) @ V.T, an, 64 * 4)
    # generalized: F C = S C e, against scipy.linalg.eigh(F, S)
    F = torch.randn(32, 32, generator=g, dtype=torch.float64)
    F = F + F.T
    M = torch.randn(32, 32, generator=g, dtype=torch.float64)
    S = M @ M.T + 32 * torch.eye(32, dtype=torch.float64)
    e, C = trnsolver.eigh_generalized(F, S)
    np.testing.assert_allclose(_np(e), scipy.linalg.eigh(F.numpy(), S.numpy(), eigvals_only=True), atol=1e-10)
    # factorizations (float64 here: reference to 1e-10 relative)
    Ad = A.double() + 64 * torch.eye(64, dtype=torch.float64)
    L = trnsolver.cholesky(Ad)
    np.testing.assert_allclose(_np(L), np.linalg.cholesky(Ad.numpy()), atol=1e-10 * scale)
    G = torch.randn(16, 16, generator=g, dtype=torch.float64)
    P, Lf, U = trnsolver.lu(G)
    Ps, Ls, Us = scipy.linalg.lu(G.numpy())
    for got, want in ((P, Ps), (Lf, Ls), (U, Us)):
        np.testing.assert_allclose(_np(got), want, atol=1e-12)
    Q, R = trnsolver.qr(G)
    np.testing.assert_allclose(_np(Q @ R), G.numpy(), atol=1e-12)
    np.testing.assert_allclose(np.abs(np.diag(_np(R))), np.abs(np.diag(np.linalg.qr(G.numpy())[1])), atol=1e-12)
    # direct solvers
    b = torch.randn(64, generator=g, dtype=torch.float64)
    ref = np.linalg.solve(Ad.numpy(), b.numpy())
    np.testing.assert_allclose(_np(trnsolver.solve(Ad, b)), ref, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_np(trnsolver.solve_spd(Ad, b)), ref, rtol=1e-10, atol=1e-12)
    wn, Vn = np.linalg.eigh(Ad.numpy())
    np.testing.assert_allclose(_np(trnsolver.inv_sqrt_spd(Ad)), (Vn / np.sqrt(wn)) @ Vn.T, atol=1e-12)
    # iterative (float64, well conditioned: both stopping rules agree)
    x, iters, res = trnsolver.cg(Ad, b, tol=1e-8)
    np.testing.assert_allclose(_np(x), ref, rtol=1e-6, atol=1e-9)
    assert 0 < int(iters) <= 64 and float(res) <= 1e-8
    N = torch.randn(64, 64, generator=g, dtype=torch.float64) + 16 * torch.eye(64, dtype=torch.float64)
    x, iters, res = trnsolver.gmres(N, b, tol=1e-6)
    np.testing.assert_allclose(_np(x), np.linalg.solve(N.numpy(), b.numpy()), rtol=1e-4, atol=1e-6)


def test_trnsparse_quickstart():
    import trnsparse

    g = _g(3)
    dense = torch.randn(512, 512, generator=g)
    dense[dense.abs() < 0.5] = 0.0
    A = trnsparse.CSRMatrix.from_dense(dense)
    d = dense.double().numpy()
    assert A.nnz == int(np.count_nonzero(d))
    assert 0.55 < A.nnz / (A.shape[0] * A.shape[1]) < 0.67  # P(|N(0,1)| >= 0.5) = 0.617
    # the published class takes (values, row_indices, col_indices, shape)
    B = trnsparse.COOMatrix(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0, 1, 2]), torch.tensor([1, 2, 0]),
                            shape=(3, 3))
    np.testing.assert_array_equal(_np(B.to_dense()), [[0, 1, 0], [0, 0, 2], [3, 0, 0]])
    x = torch.randn(512, generator=g)
    _close32(trnsparse.spmv(A, x), d @ x.double().numpy(), 512)
    X = torch.randn(512, 128, generator=g)
    _close32(trnsparse.spmm(A, X), d @ X.double().numpy(), 512)


def test_trnrand_quickstart():
    import trnrand

    g = trnrand.Generator(seed=42)
    n = 1000
    x = trnrand.normal(n, mean=0.0, std=1.0, generator=g)
    u = trnrand.uniform(n, low=-1.0, high=1.0, generator=g)
    e = trnrand.exponential(n, rate=2.0, generator=g)
    b = trnrand.bernoulli(n, p=0.3, generator=g)
    # seeded, so fixed draws: the distribution tests (SciPy) pass or fail deterministically
    assert scipy.stats.kstest(_np(x), "norm").pvalue > 1e-3
    assert scipy.stats.kstest(_np(u), "uniform", args=(-1.0, 2.0)).pvalue > 1e-3
    assert scipy.stats.kstest(_np(e), "expon", args=(0.0, 0.5)).pvalue > 1e-3
    assert set(np.unique(_np(b))) <= {0.0, 1.0} and abs(_np(b).mean() - 0.3) < 5 * np.sqrt(0.21 / n)
    again = trnrand.normal(n, mean=0.0, std=1.0, generator=trnrand.Generator(seed=42))
    np.testing.assert_array_equal(_np(again), _np(x))  # reproducible
    # quasi-random: the stratification that defines each (first Sobol/Halton dimension is base 2)
    sob = _np(trnrand.sobol(1024, n_dims=5, seed=42))
    assert sob.shape == (1024, 5)
    for k in range(5):
        np.testing.assert_array_equal(np.sort(np.floor(sob[:, k] * 1024)), np.arange(1024))
    hal = _np(trnrand.halton(1024, n_dims=3))
    assert hal.shape == (1024, 3)
    np.testing.assert_array_equal(np.sort(np.floor(hal[:, 0] * 1024)), np.arange(1024))
    lhs = _np(trnrand.latin_hypercube(100, n_dims=4))
    for k in range(4):
        np.testing.assert_array_equal(np.sort(np.floor(lhs[:, k] * 100)), np.arange(100))
    trnrand.manual_seed(42)
    z1 = _np(trnrand.standard_normal(256))
    trnrand.manual_seed(42)
    np.testing.assert_array_equal(_np(trnrand.standard_normal(256)), z1)
    assert scipy.stats.kstest(z1, "norm").pvalue > 1e-3


def test_trntensor_quickstart():
    import trntensor

    g = _g(5)
    A, B = torch.randn(32, 64, generator=g), torch.randn(48, 64, generator=g)
    C = trntensor.einsum("ap,bp->ab", A, B)
    _close32(C, A.double().numpy() @ B.double().numpy().T, 64)
    Ab, Bb = torch.randn(16, 32, 64, generator=g), torch.randn(16, 48, 64, generator=g)
    Cb = trntensor.einsum("iap,ibp->iab", Ab, Bb)
    _close32(Cb, np.einsum("iap,ibp->iab", Ab.double().numpy(), Bb.double().numpy()), 64)
    plan = trntensor.plan_contraction("ap,bp->ab", A, B)
    assert plan.strategy == "matmul" and plan.backend == "pytorch"
    assert trntensor.estimate_flops("ap,bp->ab", A, B) == 32 * 48 * 64  # published: M*K*N
    # CP on an exact rank-8 tensor (README form: factors, weights)
    fs = [torch.randn(16, 8, generator=g, dtype=torch.float64) for _ in range(3)]
    X = torch.einsum("ir,jr,kr->ijk", *fs)
    factors, weights = trntensor.cp_decompose(X, rank=8, max_iter=500, tol=1e-12)
    Xr = np.einsum("r,ir,jr,kr->ijk", _np(weights), *(_np(f) for f in factors))
    assert np.linalg.norm(Xr - X.numpy()) / np.linalg.norm(X.numpy()) < 1e-6
    np.testing.assert_allclose(_np(trntensor.cp_reconstruct(factors, weights)), Xr, atol=1e-10)
    # Tucker (HOSVD, as published): the error of NumPy's own HOSVD
    T = torch.randn(16, 16, 16, generator=g, dtype=torch.float64)
    core, tf = trntensor.tucker_decompose(T, ranks=(4, 4, 4))
    Tr = _np(trntensor.tucker_reconstruct(core, tf))
    t = T.numpy()
    Us = [np.linalg.svd(np.moveaxis(t, n, 0).reshape(16, -1), full_matrices=False)[0][:, :4] for n in range(3)]
    G = np.einsum("ijk,ia,jb,kc->abc", t, *Us)
    ref = np.einsum("abc,ia,jb,kc->ijk", G, *Us)
    np.testing.assert_allclose(Tr, ref, atol=1e-10)
    # dtype strings (published), bf16 result
    Cbf = trntensor.einsum("ap,bp->ab", A, B, dtype="bf16")
    assert Cbf.dtype == torch.bfloat16
    ref = A.bfloat16().double().numpy() @ B.bfloat16().double().numpy().T
    np.testing.assert_allclose(Cbf.double().numpy(), ref, atol=64 * 2**-8 * np.abs(ref).max() / 8)


@pytest.mark.parametrize("lib", ["trnblas", "trnfft", "trnsolver", "trnsparse", "trnrand", "trntensor"])
def test_published_backend_spelling(lib):
    mod = __import__(lib)
    with mod.use_backend("pytorch"):
        assert mod.get_backend() == "pytorch"
