"""trntensor.einsum against numpy.einsum(optimize=False), the unplanned ground truth."""

from __future__ import annotations

import math
import string
from fractions import Fraction

import numpy as np
import pytest
import torch

import trntensor

# float64 results of contractions with <= ~10^4 summed terms of O(1) values:
# rounding differs by order only, |err| <= n u max|terms| ~ 1e-12 relative.
RTOL, ATOL = 1e-10, 1e-11


def _rand(shape, seed, dtype=np.float64):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _check(eq, *arrays, **kw):
    ref = np.einsum(eq, *arrays, optimize=False)
    got = trntensor.einsum(eq, *[torch.from_numpy(a) for a in arrays], **kw)
    assert tuple(got.shape) == ref.shape, eq
    np.testing.assert_allclose(got.numpy(), ref, rtol=RTOL, atol=ATOL, err_msg=eq)
    return got


LAYOUTS = [
    ("ij,jk->ki", [(3, 4), (4, 5)]),
    ("ij,jk->i", [(3, 4), (4, 5)]),
    ("bij,bjk->bki", [(2, 3, 4), (2, 4, 5)]),
    ("bij,bkj->bik", [(2, 3, 4), (2, 5, 4)]),
    ("ibj,bjk->bik", [(3, 2, 4), (2, 4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("ji,jk->ik", [(4, 3), (4, 5)]),
    ("ij,kj->ik", [(3, 4), (5, 4)]),
    ("i,i->", [(7,), (7,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("i,i->i", [(5,), (5,)]),
    ("ij,ij->ij", [(3, 4), (3, 4)]),
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("iij->j", [(3, 3, 5)]),
    ("ijji->", [(2, 3, 3, 2)]),
    ("ii,jj->ij", [(3, 3), (2, 2)]),
    ("ijk,jil->kl", [(3, 4, 5), (4, 3, 2)]),
    ("abcd,cdef->abef", [(2, 3, 4, 5), (4, 5, 3, 2)]),
    ("iaP,jbP->iajb", [(3, 4, 6), (3, 4, 6)]),
    ("mi,mnP,na->iaP", [(6, 2), (6, 6, 5), (6, 3)]),
    ("ij,jk,kl,lm->im", [(2, 3), (3, 4), (4, 5), (5, 2)]),
    ("a,b,c,d,e->", [(2,), (3,), (2,), (3,), (2,)]),
    ("ab,ab,ab->b", [(3, 4)] * 3),
    ("i j , j k -> i k", [(3, 4), (4, 5)]),
    ("ijk,ik->j", [(3, 4, 5), (3, 5)]),
    ("bi,bj,bk->ijk", [(4, 2), (4, 3), (4, 2)]),
    ("pqrs,pi,qj,rk,sl->ijkl", [(3, 3, 3, 3), (3, 2), (3, 2), (3, 2), (3, 2)]),
    ("ab,bc,cd,de,ef,fg,gh,ha->", [(2, 3), (3, 2), (2, 3), (3, 2), (2, 3), (3, 2), (2, 3), (3, 2)]),
    ("i,jk->", [(0,), (2, 3)]),
    ("ij,jk->ik", [(0, 3), (3, 2)]),
    ("ij,jk->ik", [(2, 0), (0, 3)]),
]


@pytest.mark.parametrize("eq,shapes", LAYOUTS, ids=[e for e, _ in LAYOUTS])
def test_layouts_match_numpy(eq, shapes):
    _check(eq, *[_rand(s, k) for k, s in enumerate(shapes)])


@pytest.mark.parametrize("eq,shapes", [
    ("...ij,...jk->...ik", [(5, 2, 3), (3, 4)]),
    ("...ij,...jk", [(2, 1, 2, 3), (4, 3, 4)]),
    ("i...,i...->...", [(3, 2, 4), (3, 2, 4)]),
    ("...ii->...i", [(2, 3, 3)]),
    ("...,...->...", [(2, 3), (1, 3)]),
    ("ij...->...", [(2, 3, 4, 5)]),
    ("...i,i", [(2, 3), (3,)]),
])
def test_ellipsis_broadcasting(eq, shapes):
    _check(eq, *[_rand(s, k) for k, s in enumerate(shapes)])


def _random_equation(rng, n_ops, max_rank=4, repeat=True):
    """Random (equation, shapes) like opt_einsum's test helper: shared and private indices, traces."""
    letters = list(string.ascii_letters[: 2 + 2 * n_ops])
    sizes = {ch: int(rng.integers(1, 5)) for ch in letters}
    terms = []
    for _ in range(n_ops):
        r = int(rng.integers(0, max_rank + 1))
        t = "".join(rng.choice(letters, size=r))
        if not repeat:
            t = "".join(dict.fromkeys(t))
        terms.append(t)
    used = sorted(set("".join(terms)))
    out = "".join(ch for ch in used if rng.random() < 0.3)
    eq = ",".join(terms) + "->" + "".join(rng.permutation(list(out))) if out else ",".join(terms) + "->"
    return eq, [tuple(sizes[ch] for ch in t) for t in terms]


@pytest.mark.parametrize("n_ops", [1, 2, 3, 4, 5, 6, 7, 8])
def test_random_equations(n_ops):
    rng = np.random.default_rng(100 + n_ops)
    for trial in range(12):
        eq, shapes = _random_equation(rng, n_ops)
        arrays = [_rand(s, 17 * trial + k) for k, s in enumerate(shapes)]
        for opt in ("auto", "greedy", "optimal", "none"):
            _check(eq, *arrays, optimize=opt)


def test_implicit_output_is_alphabetical():
    a, b = _rand((3, 4), 0), _rand((4, 2), 1)
    got = _check("jk,ij", b, a)  # implicit output: "ik" in alphabetical order
    assert got.shape == (3, 2)


def test_mixed_dtypes_promote_like_torch():
    a = torch.ones(2, 3, dtype=torch.float32)
    b = torch.ones(3, 2, dtype=torch.float64)
    assert trntensor.einsum("ij,jk->ik", a, b).dtype == torch.float64
    i = torch.ones(2, 3, dtype=torch.int64)
    r = trntensor.einsum("ij,jk->ik", i, a.T.contiguous())
    assert r.dtype == torch.float32 and r.tolist() == [[3.0, 3.0], [3.0, 3.0]]
    assert trntensor.einsum("ij,jk->ik", i, i.T).dtype == torch.int64
    z = torch.ones(2, 3, dtype=torch.complex64) * 1j
    assert trntensor.einsum("ij,jk->ik", z, a.T).dtype == torch.complex64


def test_dtype_argument_sets_compute_and_result_dtype():
    a = torch.ones(2, 3)
    assert trntensor.einsum("ij->i", a, dtype=torch.float64).dtype == torch.float64


def test_alpha_beta_out():
    a, b = _rand((3, 4), 0), _rand((4, 5), 1)
    out = torch.full((3, 5), float("nan"), dtype=torch.float64)
    r = trntensor.einsum("ij,jk->ik", torch.from_numpy(a), torch.from_numpy(b), alpha=2.0, out=out)
    assert r is out  # beta = 0: NaNs in out are never read
    np.testing.assert_allclose(out.numpy(), 2 * a @ b, rtol=1e-12)
    c = torch.ones(3, 5, dtype=torch.float64)
    trntensor.einsum("ij,jk->ik", torch.from_numpy(a), torch.from_numpy(b), alpha=-1, beta=3, out=c)
    np.testing.assert_allclose(c.numpy(), 3 - a @ b, rtol=1e-12)


def test_numpy_in_numpy_out_and_inputs_untouched():
    a, b = _rand((3, 4), 0), _rand((4, 5), 1)
    a0, b0 = a.copy(), b.copy()
    r = trntensor.einsum("ij,jk->ki", a, b)
    assert isinstance(r, np.ndarray)
    np.testing.assert_allclose(r, (a @ b).T, rtol=1e-12)
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(b, b0)


def test_kahan_accumulates_in_float64():
    # float32 inputs, 10^5 terms: float32 accumulation loses ~1e-4 relative, float64 keeps ~1e-7
    # (only the final rounding to float32 remains).
    rng = np.random.default_rng(3)
    x = (rng.random(100_000) + 1.0).astype(np.float32)
    exact = float(np.dot(x.astype(np.float64), x.astype(np.float64)))
    got = float(trntensor.einsum("i,i->", torch.from_numpy(x), torch.from_numpy(x), precision="kahan"))
    assert abs(got - exact) <= 2 * np.finfo(np.float32).eps * exact


def _exact_dot(x, y):
    return float(sum(Fraction(float(a)) * Fraction(float(b)) for a, b in zip(x, y)))


def test_dd_is_exact_under_cancellation():
    # sum of products that cancels to ~1e-16 of its terms: float64 loses every digit,
    # double-double must give the correctly rounded exact value (Fraction arithmetic).
    rng = np.random.default_rng(4)
    x = rng.standard_normal(200) * np.exp(rng.uniform(-20, 20, 200))
    y = rng.standard_normal(200)
    x = np.concatenate([x, -x, [1e-3]])
    y = np.concatenate([y, y * (1 + 2.0**-40), [1.0]])
    exact = _exact_dot(x, y)
    got = float(trntensor.einsum("i,i->", torch.from_numpy(x), torch.from_numpy(y), precision="dd"))
    assert abs(got - exact) <= 2 * np.finfo(np.float64).eps * abs(exact)
    # a matrix product chain in dd vs exact rational arithmetic entry by entry
    A, B, C = _rand((3, 6), 5) * 1e8, _rand((6, 4), 6), _rand((4, 2), 7)
    R = trntensor.einsum("ij,jk,kl->il", torch.from_numpy(A), torch.from_numpy(B), torch.from_numpy(C), precision="dd")
    FA = [[Fraction(float(v)) for v in row] for row in A]
    FB = [[Fraction(float(v)) for v in row] for row in B]
    FC = [[Fraction(float(v)) for v in row] for row in C]
    for i in range(3):
        for l in range(2):
            ex = sum(FA[i][j] * FB[j][k] * FC[k][l] for j in range(6) for k in range(4))
            assert abs(float(R[i, l]) - float(ex)) <= 2 * np.finfo(np.float64).eps * abs(float(ex))


def test_dd_rejects_complex():
    z = torch.ones(2, dtype=torch.complex128)
    with pytest.raises(TypeError, match="precision='dd'"):
        trntensor.einsum("i,i->", z, z, precision="dd")


def test_multi_einsum_batches_and_matches():
    B = torch.from_numpy(_rand((3, 4, 5), 0))
    C = torch.from_numpy(_rand((3, 4, 5), 1))
    J, K, L = trntensor.multi_einsum(("iaP,jbP->iajb", B, B), ("ibP,jaP->iajb", B, B), ("iaP,jbP->iajb", B, C))
    Bn, Cn = B.numpy(), C.numpy()
    np.testing.assert_allclose(J.numpy(), np.einsum("iaP,jbP->iajb", Bn, Bn), rtol=1e-12)
    np.testing.assert_allclose(K.numpy(), np.einsum("ibP,jaP->iajb", Bn, Bn), rtol=1e-12)
    np.testing.assert_allclose(L.numpy(), np.einsum("iaP,jbP->iajb", Bn, Cn), rtol=1e-12)


@pytest.mark.parametrize("dims,bshape", [(2, (4, 5, 2)), (0, (2, 3)), (1, (5, 2)), (([1, 0], [0, 1]), (4, 3, 5)),
                                         (([2], [0]), (5, 4, 2))])
def test_tensordot_matches_numpy(dims, bshape):
    a, b = _rand((3, 4, 5), 0), _rand(bshape, 1)
    np.testing.assert_allclose(trntensor.tensordot(a, b, dims), np.tensordot(a, b, dims), rtol=1e-12)


def test_float32_within_float32_tolerance():
    # float32: K=64 terms of O(1): error <= K u ~ 64 * 6e-8 relative to sum|terms|
    a, b = _rand((16, 64), 0, np.float32), _rand((64, 16), 1, np.float32)
    r = trntensor.einsum("ij,jk->ik", torch.from_numpy(a), torch.from_numpy(b))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    bound = 64 * np.finfo(np.float32).eps * (np.abs(a) @ np.abs(b))
    assert np.all(np.abs(r.numpy() - ref) <= bound)


def test_steps_go_through_trnblas_where_it_could_pick_a_kernel(monkeypatch):
    import trnblas
    import trnsci

    calls = []
    real = trnblas.gemm
    monkeypatch.setattr(trnblas, "gemm", lambda *a, **k: calls.append(1) or real(*a, **k))
    a, b = _rand((192, 192), 0), _rand((192, 192), 1)
    with trnsci.use_backend("simulator"):
        _check("ij,jk->ik", a, b)
        plan = trntensor.plan_contraction("ij,jk->ik", a.shape, b.shape)
    assert calls and "trnblas.gemm" in plan.steps[0].reason
    assert math.isclose(plan.flops, 2 * 192**3)
    calls.clear()
    with trnsci.use_backend("torch"):  # trnblas would pick torch: the step calls torch itself
        _check("ij,jk->ik", a, b, autotune=False)
        plan = trntensor.plan_contraction("ij,jk->ik", a.shape, b.shape)
    assert not calls and plan.steps[0].reason.startswith("torch.mm")


def test_dd_propagates_inf_and_nan_like_numpy():
    a = np.ones((2, 2))
    x = np.array([np.inf, 1.0])
    ref = np.einsum("ij,j->i", a, x)
    got = trntensor.einsum("ij,j->i", torch.from_numpy(a), torch.from_numpy(x), precision="dd")
    np.testing.assert_array_equal(got.numpy(), ref)


def test_multi_einsum_runs_a_homogeneous_group_as_one_contraction(monkeypatch):
    import sys

    E = sys.modules["trntensor.einsum"]  # the module (the package attribute is the function)

    calls = []
    real = E.einsum
    monkeypatch.setattr(E, "einsum", lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    Bs = [_rand((2, 3, 4), k) for k in range(4)]
    out = E.multi_einsum(*[("iaP,jbP->iajb", b, b) for b in Bs])
    assert len(calls) == 1  # four contractions, one dispatch
    for b, r in zip(Bs, out):
        assert isinstance(r, np.ndarray)
        np.testing.assert_allclose(r, np.einsum("iaP,jbP->iajb", b, b), rtol=1e-12)


def test_dd_one_step_is_within_one_ulp_whatever_the_cancellation():
    """issue 19: the docstring's claim, vs exact rational arithmetic (the old scheme was 4 ulp off on the
    first case, ~5e3 ulp on the second, and up to 1e17 ulp on random cancelling dots)."""
    cases = [([1e16, -1e16, 1e-3], [1.0, 1.0, 1.0]),
             ([1e16 + 2, -(1e16 + 2), 1e-3], [1.0, 1.0, 1.0]),  # long mantissas above a small term
             ([np.pi * 1e16, -np.pi * 1e16, np.e * 1e-3], [1.0, 1.0, 1.0])]
    rng = np.random.default_rng(11)
    for _ in range(40):  # entries over 2^-30..2^30, then a term cancelling the float64 dot
        n = int(rng.integers(2, 40))
        x = rng.standard_normal(n) * 2.0 ** rng.integers(-30, 30, n)
        y = rng.standard_normal(n) * 2.0 ** rng.integers(-30, 30, n)
        cases.append((np.append(x, -np.dot(x, y)), np.append(y, 1.0)))
    for x, y in cases:
        x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
        exact = _exact_dot(x, y)
        got = float(trntensor.einsum("i,i->", torch.from_numpy(x), torch.from_numpy(y), precision="dd"))
        assert abs(got - exact) <= np.spacing(abs(exact)), (x, y, got, exact)
    # a sum of one operand and a matrix product, entry by entry
    x = np.array([1e16 + 2, 3e-5, -(1e16 + 2), np.pi * 1e-9])
    assert float(trntensor.einsum("i->", torch.from_numpy(x), precision="dd")) == float(
        sum(Fraction(float(v)) for v in x))
    A = rng.standard_normal((3, 5)) * 2.0 ** rng.integers(-30, 30, (3, 5))
    B = rng.standard_normal((5, 2))
    B[-1] = -(A[:, :-1] @ B[:-1])[0] / A[0, -1]  # row 0 of A @ B cancels to rounding level
    R = trntensor.einsum("ij,jk->ik", torch.from_numpy(A), torch.from_numpy(B), precision="dd").numpy()
    for i in range(3):
        for k in range(2):
            ex = _exact_dot(A[i], B[:, k])
            assert abs(R[i, k] - ex) <= np.spacing(abs(ex))
