"""Decompositions: exact recovery of low-rank tensors, fits vs tensorly, AO->MO vs einsum."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trntensor

F64 = torch.float64


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _rel(a, b):
    return float(torch.linalg.norm(a - b) / torch.linalg.norm(b))


def _cp_tensor(shape, rank, seed, dtype=F64):
    g = _gen(seed)
    fs = [torch.randn(n, rank, generator=g, dtype=F64) for n in shape]
    return torch.einsum(",".join(f"{c}r" for c in "ijkl"[: len(shape)]) + "->" + "ijkl"[: len(shape)], *fs).to(dtype)


@pytest.mark.parametrize("shape,rank", [((5, 6, 7), 2), ((4, 5, 6, 3), 2)])
def test_cp_recovers_exact_low_rank_fp64(shape, rank):
    # exact rank-R data, well conditioned factors: ALS converges linearly to the exact
    # decomposition; 1e-10 relative is the brief's bar (fp64 rounding ~1e-15).
    T = _cp_tensor(shape, rank, 1)
    f, w = trntensor.cp_decompose(T, rank, max_iter=1000, tol=1e-14)
    assert _rel(trntensor.cp_reconstruct(f, w), T) < 1e-10
    assert all(fk.shape == (n, rank) for fk, n in zip(f, shape))


def test_cp_float32():
    T = _cp_tensor((5, 6, 7), 2, 2, torch.float32)
    f, w = trntensor.cp_decompose(T, 2, max_iter=500, tol=1e-7)
    assert f[0].dtype == torch.float32 and _rel(trntensor.cp_reconstruct(f, w), T) < 1e-4  # fp32 eps 1.2e-7


def test_cp_reconstruct_matches_explicit_sum():
    g = _gen(3)
    fs = [torch.randn(n, 4, generator=g, dtype=F64) for n in (2, 3, 4)]
    w = torch.randn(4, generator=g, dtype=F64)
    ref = np.einsum("r,ir,jr,kr->ijk", w.numpy(), *[x.numpy() for x in fs])
    np.testing.assert_allclose(trntensor.cp_reconstruct(fs, w).numpy(), ref, rtol=1e-12)


@pytest.mark.parametrize("method", ["hosvd", "hooi"])
def test_tucker_recovers_exact_multilinear_rank(method):
    g = _gen(4)
    G = torch.randn(2, 3, 2, generator=g, dtype=F64)
    Us = [torch.linalg.qr(torch.randn(n, r, generator=g, dtype=F64))[0] for n, r in ((6, 2), (7, 3), (5, 2))]
    T = torch.einsum("abc,ia,jb,kc->ijk", G, *Us)
    core, factors = trntensor.tucker_decompose(T, (2, 3, 2), method=method)
    assert core.shape == (2, 3, 2)
    assert _rel(trntensor.tucker_reconstruct(core, factors), T) < 1e-10


def test_hooi_fit_not_worse_than_hosvd():
    T = torch.randn(6, 7, 8, generator=_gen(5), dtype=F64)
    e = {m: _rel(trntensor.tucker_reconstruct(*trntensor.tucker_decompose(T, (3, 3, 3), method=m)), T)
         for m in ("hosvd", "hooi")}
    assert e["hooi"] <= e["hosvd"] + 1e-12


def test_tt_exact_and_truncated():
    g = _gen(6)
    cores = [torch.randn(1, 4, 2, generator=g, dtype=F64), torch.randn(2, 5, 3, generator=g, dtype=F64),
             torch.randn(3, 6, 2, generator=g, dtype=F64), torch.randn(2, 3, 1, generator=g, dtype=F64)]
    T = trntensor.tt_reconstruct(cores)
    ref = np.einsum("aib,bjc,ckd,dle->ijkl", *[c.numpy() for c in cores])
    np.testing.assert_allclose(T.numpy(), ref, rtol=1e-12)
    got = trntensor.tt_decompose(T, tol=1e-12)
    assert [c.shape[2] for c in got[:-1]] == [2, 3, 2]  # exact TT ranks found
    assert _rel(trntensor.tt_reconstruct(got), T) < 1e-10
    capped = trntensor.tt_decompose(T, max_rank=1)
    assert max(c.shape[2] for c in capped) == 1
    R = torch.randn(5, 6, 7, generator=g, dtype=F64)
    for tol in (0.5, 0.1):
        assert _rel(trntensor.tt_reconstruct(trntensor.tt_decompose(R, tol=tol)), R) <= tol


def test_fits_vs_tensorly():
    tl = pytest.importorskip("tensorly")
    from tensorly.decomposition import parafac, tucker

    tl.set_backend("numpy")
    T = torch.randn(6, 7, 8, generator=_gen(7), dtype=F64)
    Tn = T.numpy()
    # same data, same rank: CP-ALS fits agree to within a few percent of the error
    # (ALS converges to local minima; we ask for no worse than tensorly + 2% of ||T||)
    f, w = trntensor.cp_decompose(T, 3, max_iter=100, tol=1e-10)
    ours = _rel(trntensor.cp_reconstruct(f, w), T)
    cp = parafac(Tn, 3, n_iter_max=100, tol=1e-10, init="svd")
    theirs = np.linalg.norm(tl.cp_to_tensor(cp) - Tn) / np.linalg.norm(Tn)
    assert ours <= theirs + 0.02
    core, factors = trntensor.tucker_decompose(T, (3, 4, 3), method="hooi")
    ours = _rel(trntensor.tucker_reconstruct(core, factors), T)
    tk = tucker(Tn, rank=[3, 4, 3], n_iter_max=50, tol=1e-8)
    theirs = np.linalg.norm(tl.tucker_to_tensor(tk) - Tn) / np.linalg.norm(Tn)
    assert ours <= theirs + 1e-6


@pytest.mark.parametrize("dtype,rtol", [(F64, 1e-12), (torch.float32, 1e-4)])
def test_ao_to_mo_matches_explicit_einsum(dtype, rtol):
    # fp32: sums of nao^2 = 144 terms, error ~ 144 * 6e-8 relative to sum|terms|
    g = _gen(8)
    nao, nocc, nvir, naux = 12, 3, 7, 20
    eri3 = torch.randn(nao, nao, naux, generator=g, dtype=F64)
    eri3 = eri3 + eri3.transpose(0, 1)
    Co = torch.randn(nao, nocc, generator=g, dtype=F64)
    Cv = torch.randn(nao, nvir, generator=g, dtype=F64)
    ref = np.einsum("mi,mnP,na->iaP", Co.numpy(), eri3.numpy(), Cv.numpy(), optimize=False)
    B = trntensor.ao_to_mo_transform(eri3.to(dtype), Co.to(dtype), Cv.to(dtype))
    assert B.shape == (nocc, nvir, naux) and B.dtype == dtype
    np.testing.assert_allclose(B.double().numpy(), ref, rtol=rtol, atol=rtol * np.abs(ref).max())


def test_mp2_energy_matches_explicit_formula():
    g = _gen(9)
    nocc, nvir, naux = 3, 5, 8
    B = torch.randn(nocc, nvir, naux, generator=g, dtype=F64) * 0.1
    eo = -1 - torch.rand(nocc, generator=g, dtype=F64)
    ev = 0.5 + torch.rand(nvir, generator=g, dtype=F64)
    Bn, o, v = B.numpy(), eo.numpy(), ev.numpy()
    t = np.einsum("iaP,jbP->iajb", Bn, Bn)
    d = o[:, None, None, None] - v[None, :, None, None] + o[None, None, :, None] - v[None, None, None, :]
    ref = (t * (2 * t - t.transpose(0, 3, 2, 1)) / d).sum()
    assert abs(float(trntensor.mp2_energy(B, eo, ev)) - ref) <= 1e-12 * abs(ref)


@pytest.mark.filterwarnings("ignore:Trying to compute SVD")  # tensorly's note about the same case
def test_hooi_core_has_the_requested_shape_when_one_rank_exceeds_the_others_product():
    """issue 19: ranks (2, 2, 5) on a 3 x 4 x 20 tensor: 5 > 2 * 2, the HOOI unfolding has 4 columns."""
    tl = pytest.importorskip("tensorly")
    from tensorly.decomposition import tucker

    T = torch.randn(3, 4, 20, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    ranks = (2, 2, 5)
    G, U = trntensor.tucker_decompose(T, ranks, method="hooi", tol=1e-12)
    Gh, _ = trntensor.tucker_decompose(T, ranks, method="hosvd")
    core, factors = tucker(T.numpy(), rank=list(ranks), init="svd", n_iter_max=200, tol=1e-12)
    assert tuple(G.shape) == tuple(Gh.shape) == core.shape == ranks
    assert [tuple(u.shape) for u in U] == [(3, 2), (4, 2), (20, 5)]
    for u in U:  # orthonormal columns, the extra one included
        np.testing.assert_allclose(u.T @ u, np.eye(u.shape[1]), atol=1e-13)
    err = float(torch.linalg.norm(trntensor.tucker_reconstruct(G, U) - T) / torch.linalg.norm(T))
    err_tl = np.linalg.norm(tl.tucker_to_tensor((core, factors)) - T.numpy()) / np.linalg.norm(T.numpy())
    # both converge to the same HOOI fixed point from the same HOSVD start (here 0.698);
    # 1e-6 allows for the two stopping rules
    assert abs(err - err_tl) <= 1e-6


def test_cp_nonneg_and_warm_start_published_keywords():
    """Issue 25: the published cp_decompose(T, rank, nonneg=True) and factors= warm start.

    Reference: the reconstruction is rebuilt with numpy.einsum from the returned factors.
    Non-negative exact rank-3 data: multiplicative updates reach ~1e-3 relative in a few
    hundred sweeps (they converge sublinearly; 2e-2 is a loose bar a wrong update fails by
    far -- a random non-negative rank-3 guess sits near 0.3).
    """
    g = _gen(11)
    fs = [torch.rand(n, 3, generator=g, dtype=F64) + 0.1 for n in (6, 7, 8)]
    T = torch.einsum("ir,jr,kr->ijk", *fs)
    f, w = trntensor.cp_decompose(T, 3, max_iter=400, tol=1e-10, nonneg=True)
    assert all(bool((F >= 0).all()) for F in f) and bool((w >= 0).all())
    X = np.einsum("r,ir,jr,kr->ijk", w.numpy(), *(F.numpy() for F in f))
    assert np.linalg.norm(X - T.numpy()) / np.linalg.norm(T.numpy()) < 2e-2
    # warm start from the exact factors: converges at once, caller's tensors untouched
    before = [F.clone() for F in fs]
    f2, w2 = trntensor.cp_decompose(T, 3, max_iter=2, tol=1e-12, factors=fs)
    X2 = np.einsum("r,ir,jr,kr->ijk", w2.numpy(), *(F.numpy() for F in f2))
    assert np.linalg.norm(X2 - T.numpy()) / np.linalg.norm(T.numpy()) < 1e-10
    assert all(torch.equal(a, b) for a, b in zip(fs, before))
    f3, _ = trntensor.cp_decompose(T, 3, max_iter=3, nonneg=True, factors=fs)
    assert all(bool((F >= 0).all()) for F in f3)
    with pytest.raises(ValueError, match=r"factors\[1\] has shape"):
        trntensor.cp_decompose(T, 3, factors=[fs[0], fs[1][:, :2], fs[2]])
    with pytest.raises(ValueError, match="factors has 2 matrices"):
        trntensor.cp_decompose(T, 3, factors=fs[:2])
    with pytest.raises(TypeError, match="nonneg must be a bool"):
        trntensor.cp_decompose(T, 3, nonneg="yes")
