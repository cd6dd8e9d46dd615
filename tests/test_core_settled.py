"""trnsci.settled: settled routes per call signature (#23) -- what is remembered, and that no check is skipped.

References are NumPy on the same data (float64 sums of products, tolerance a few float32 ulps of the
largest partial sum: 1e-5 relative for n = 37); a settled call must give exactly what the full call gave
(same torch kernel on the same tensors), so those compare with equality.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trnblas
from trnblas import level1, level2, level3_gemm
from trnsci import settled as S
from trnsci.dispatch import Op


def _routes(op, fn):
    return op.settled.get(fn, {})


@pytest.fixture
def xy():
    g = torch.Generator().manual_seed(3)
    return torch.randn(37, generator=g), torch.randn(37, generator=g)


def test_dot_settles_once_and_matches_numpy(xy):
    x, y = xy
    level1.DOT.settled.clear()
    first = trnblas.dot(x, y)
    assert len(_routes(level1.DOT, trnblas.dot)) == 1
    again = trnblas.dot(x, y)
    assert len(_routes(level1.DOT, trnblas.dot)) == 1
    ref = float(np.dot(x.numpy().astype(np.float64), y.numpy().astype(np.float64)))
    assert abs(float(first) - ref) <= 1e-5 * float(np.abs(x.numpy()) @ np.abs(y.numpy()))
    assert torch.equal(first, again)


def test_settled_dot_still_checks_everything(xy):
    x, y = xy
    trnblas.dot(x, y)
    with pytest.raises(TypeError, match="y"):
        trnblas.dot(x, y.double())
    with pytest.raises(ValueError, match="one length"):
        trnblas.dot(x, y[:-1])
    with pytest.raises(TypeError, match="sparse"):
        trnblas.dot(x.to_sparse(), y)
    with pytest.raises(TypeError, match="torch.Tensor or numpy.ndarray"):
        trnblas.dot(x.tolist(), y)
    r = trnblas.dot(x.numpy(), y.numpy())  # NumPy in, NumPy out: the full path
    assert isinstance(r, np.ndarray) and r == trnblas.dot(x, y).numpy()


def test_axpy_alpha_zero_is_its_own_signature(xy):
    x, y = xy
    trnblas.axpy(2.0, x, y)  # settles the alpha != 0 route
    bad = x.clone()
    bad[0] = float("nan")
    r = trnblas.axpy(0.0, bad, y)  # BLAS: alpha == 0 does not read x
    assert torch.equal(r, y)
    np.testing.assert_allclose(trnblas.axpy(3.0, x, y).numpy(), 3.0 * x.numpy() + y.numpy(), rtol=1e-6, atol=1e-6)
    with pytest.raises(TypeError, match="alpha"):
        trnblas.axpy(1j, x, y)
    with pytest.raises(TypeError, match="alpha"):
        trnblas.axpy(True, x, y)


def test_axpy_out_runs_in_full(xy):
    x, y = xy
    out = torch.empty_like(y)
    assert trnblas.axpy(2.0, x, y, out=out) is out
    with pytest.raises(TypeError, match="out"):
        trnblas.axpy(2.0, x, y, out=torch.empty(37, dtype=torch.float64))


def test_gemv_and_ger_routes_keep_defaults_and_flags():
    g = torch.Generator().manual_seed(5)
    A, x, y = torch.randn(9, 7, generator=g), torch.randn(7, generator=g), torch.randn(9, generator=g)
    An, xn, yn = A.double().numpy(), x.double().numpy(), y.double().numpy()
    level2.GEMV.settled.clear()
    for _ in range(2):  # the second round runs the settled routes
        np.testing.assert_allclose(trnblas.gemv(2.0, A, x).numpy(), 2.0 * An @ xn, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(trnblas.gemv(1.0, A, y, 0.0, None, "T").numpy(), An.T @ yn, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(trnblas.gemv(1.0, A, x, 0.5, y).numpy(), An @ xn + 0.5 * yn, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(trnblas.ger(2.0, y, x).numpy(), 2.0 * np.outer(yn, xn), rtol=1e-5, atol=1e-6)
    assert len(_routes(level2.GEMV, trnblas.gemv)) == 3
    with pytest.raises(ValueError, match="x must have 7"):
        trnblas.gemv(1.0, A, y)  # same dtypes, other shape: its own key, full checks
    with pytest.raises(ValueError, match="trans"):
        trnblas.gemv(1.0, A, x, 0.0, None, "Q")
    # True == 1 and "T" == "T": a transposing flag must not reach the untransposed route
    np.testing.assert_allclose(trnblas.gemv(1.0, A, y, 0.0, None, True).numpy(), An.T @ yn, rtol=1e-5, atol=1e-5)


def test_gemm_one_object_twice_is_not_settled():
    g = torch.Generator().manual_seed(6)
    A, B = torch.randn(5, 5, generator=g), torch.randn(5, 5, generator=g)
    level3_gemm.GEMM.settled.clear()
    np.testing.assert_allclose(trnblas.gemm(1.0, A, A).numpy(), A.numpy() @ A.numpy(), rtol=1e-5, atol=1e-5)
    assert not _routes(level3_gemm.GEMM, trnblas.gemm)  # which argument feeds which slot is ambiguous
    np.testing.assert_allclose(trnblas.gemm(1.0, A, B).numpy(), A.numpy() @ B.numpy(), rtol=1e-5, atol=1e-5)
    assert len(_routes(level3_gemm.GEMM, trnblas.gemm)) == 1
    np.testing.assert_allclose(trnblas.gemm(1.0, B, A).numpy(), B.numpy() @ A.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(trnblas.gemm(1.0, A, A).numpy(), A.numpy() @ A.numpy(), rtol=1e-5, atol=1e-5)


def test_replacing_a_lowering_empties_the_routes(xy):
    x, y = xy
    trnblas.dot(x, y)
    calls = []

    def spy(a, b):
        calls.append(1)
        return torch.dot(a, b)

    with level1.DOT.override("torch", spy):
        assert not _routes(level1.DOT, trnblas.dot)
        trnblas.dot(x, y)
        trnblas.dot(x, y)
    assert len(calls) == 2
    trnblas.dot(x, y)
    assert len(calls) == 2


def test_no_route_under_a_kernel_backend(xy):
    x, y = xy
    trnblas.dot(x, y)
    seen = []
    with level1.DOT.override("nki", lambda a, b: seen.append(1) or torch.dot(a, b)):
        import trnsci

        with trnsci.use_backend("simulator"):
            trnblas.dot(x, y)
    assert seen == [1]


def test_named_wrappers_bind_and_fail_as_the_public_functions_do(xy):
    """The named fast wrappers carry the public function's parameter names: keyword calls bind as they would
    to the function itself, and a missing, surplus or unknown argument gets the function's own TypeError."""
    import inspect

    x, y = xy
    xn, yn = x.double().numpy(), y.double().numpy()
    assert trnblas.dot.__code__.co_varnames[:2] == ("x", "y")
    assert str(inspect.signature(trnblas.gemm)) == str(inspect.signature(trnblas.gemm.__wrapped__))
    level1.DOT.settled.clear()
    for _ in range(2):  # the second call takes the route settled by the first, by keyword
        np.testing.assert_allclose(float(trnblas.dot(y=y, x=x)), xn @ yn, rtol=1e-5)
    assert len(_routes(level1.DOT, trnblas.dot)) == 1
    for fn, bad in ((trnblas.dot, lambda f: f(x)), (trnblas.dot, lambda f: f(x, y, x)),
                    (trnblas.dot, lambda f: f(x, z=y)), (trnblas.axpy, lambda f: f(1.0, x, y, x)),
                    (trnblas.gemm, lambda f: f(1.0, x, bogus=1))):
        with pytest.raises(TypeError) as fast:
            bad(fn)
        with pytest.raises(TypeError) as full:
            bad(fn.__wrapped__)
        assert str(fast.value) == str(full.value)


def test_exact_value_routes_follow_the_op_and_the_backend():
    """A keyword call's route kept under its exact option values is in the Op's own table: emptied with it
    when a lowering changes, unused under a kernel backend, never made for an option of another type."""
    import trnsci

    g = torch.Generator().manual_seed(14)
    A, B = torch.randn(5, 5, generator=g), torch.randn(5, 5, generator=g)
    An, Bn = A.double().numpy(), B.double().numpy()
    level3_gemm.GEMM.settled.clear()
    for _ in range(2):
        np.testing.assert_allclose(trnblas.gemm(1.0, A, B, transA=True).double().numpy(), An.T @ Bn,
                                   rtol=2e-5, atol=2e-5)
    assert [k for k in _routes(level3_gemm.GEMM, trnblas.gemm) if k[0] is S._M]
    calls = []

    def spy(*args):
        calls.append(args[5:])
        return level3_gemm._gemm_torch(*args)

    with level3_gemm.GEMM.override("torch", spy):
        assert not _routes(level3_gemm.GEMM, trnblas.gemm)
        np.testing.assert_allclose(trnblas.gemm(1.0, A, B, transA=True).double().numpy(), An.T @ Bn,
                                   rtol=2e-5, atol=2e-5)
    assert calls and calls[0] == ("T", "N")
    seen = []
    trnblas.gemm(1.0, A, B, transA=True)
    with level3_gemm.GEMM.override("nki", lambda *a: seen.append(1) or level3_gemm._gemm_torch(*a)):
        with trnsci.use_backend("simulator"):
            trnblas.gemm(1.0, A, B, transA=True)
    assert seen == [1]
    level3_gemm.GEMM.settled.clear()
    for _ in range(2):  # a float option is not an exact-value key: the keyword call takes the general path
        trnblas.gemm(1.0, A, B, beta=0.0)
    assert not [k for k in _routes(level3_gemm.GEMM, trnblas.gemm) if k[0] is S._M]


# ------------------------------------------------------------------ the mechanism on a fake op

def _fake():
    op = Op("trnsci.test_settled_fake", "elements", 1e9, size=lambda *a: 1)
    log = []

    @op.lowering("torch")
    def low(a, x, flag):
        log.append((a, flag))
        return x * a
    return op, log


def test_routes_refuse_derived_values_and_post_processing():
    op, log = _fake()

    def sig(a, x, flag="n"):
        return S.scalar_key(a), S.tensor_key(x), flag

    @S.public(op, sig)
    def plain(a, x, flag="n"):
        return S.call(op, a, x, flag)

    @S.public(op, sig)
    def derived_tensor(a, x, flag="n"):
        return S.call(op, a, x.contiguous().clone(), flag)

    @S.public(op, sig)
    def derived_number(a, x, flag="n"):
        return S.call(op, a * 1.0 + 0.0, x, flag)

    @S.public(op, sig)
    def post(a, x, flag="n"):
        return S.call(op, a, x, flag) + 0

    x = torch.arange(3.0)
    for fn in (plain, derived_tensor, derived_number, post):
        for a in (2.0, 3.0):
            assert fn(a, x).tolist() == [0.0, a, 2 * a]
    assert list(op.settled) == [plain]
    assert log[-1] == (3.0, "n")
    assert plain(2.0, x, "m").tolist() == [0.0, 2.0, 4.0] and log[-1] == (2.0, "m")  # arity joins the key
    assert len(op.settled[plain]) == 2


def test_table_is_bounded():
    op, _ = _fake()

    @S.public(op, lambda a, x: (S.scalar_key(a), S.tensor_key(x)))
    def f(a, x):
        return S.call(op, a, x, None)

    for n in range(S.LIMIT + 5):
        assert f(1.0, torch.ones(n + 1)).shape == (n + 1,)
    assert len(op.settled[f]) <= S.LIMIT


def test_keys():
    assert S.scalar_key(1) != S.scalar_key(True.__int__() + 1)
    with pytest.raises(TypeError):
        S.scalar_key(True)
    with pytest.raises(TypeError):
        S.scalar_key(np.float64(1.0))
    with pytest.raises(TypeError):
        S.scalar_key(2 ** 70)
    assert S.scalar_key(0.0) != S.scalar_key(2.0) and S.scalar_key(2.0) == S.scalar_key(3.0)
    t = torch.ones(2, 3)
    assert S.tensor_key(t) != S.tensor_key(t.double()) != S.tensor_key(t.T)
    assert S.tensor_key(None) is None
    for bad in (np.ones(2), torch.nn.Parameter(torch.ones(2)), 1.0):
        with pytest.raises(TypeError):
            S.tensor_key(bad)


def test_plan_call_after_settling_still_plans(xy):
    from trnsci.dispatch import plan_call

    x, y = xy
    trnblas.dot(x, y)
    plan = plan_call(trnblas.dot, x, y)
    assert plan.op == "trnblas.dot" and plan.backend == "torch"


def test_threads_with_different_signatures_get_their_own_routes():
    import threading

    g = torch.Generator().manual_seed(8)
    pairs = [(torch.randn(n, generator=g, dtype=dt), torch.randn(n, generator=g, dtype=dt))
             for n in (5, 6, 7) for dt in (torch.float32, torch.float64)]
    errors = []

    def work(x, y):
        ref = float(np.dot(x.double().numpy(), y.double().numpy()))
        for _ in range(200):
            r = trnblas.dot(x, y)
            if r.dtype is not x.dtype or abs(float(r) - ref) > 1e-5 * (1 + abs(ref)):
                errors.append((x.dtype, x.shape, float(r), ref))
                return

    threads = [threading.Thread(target=work, args=p) for p in pairs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


# ------------------------------------------------------------------ compiled specs and torch-call reductions

def _np64(*ts):
    return [t.double().numpy() for t in ts]


def test_compiled_routes_reduce_to_one_torch_call_with_the_full_calls_bits():
    g = torch.Generator().manual_seed(11)
    A, B, C = (torch.randn(9, 9, generator=g) for _ in range(3))
    x, y = torch.randn(9, generator=g), torch.randn(9, generator=g)
    An, Bn, Cn, xn, yn = _np64(A, B, C, x, y)
    calls = [  # (public call, NumPy reference)
        (lambda: trnblas.gemm(1.0, A, B), An @ Bn),
        (lambda: trnblas.gemm(2.0, A, B), 2 * An @ Bn),
        (lambda: trnblas.gemm(0.5, A, B, 0.25, C), 0.5 * An @ Bn + 0.25 * Cn),
        (lambda: trnblas.gemm(1.0, A, B, 0.0, C), An @ Bn),
        (lambda: trnblas.gemv(1.0, A, x), An @ xn),
        (lambda: trnblas.gemv(2, A, x, 1, y), 2 * An @ xn + yn),
        (lambda: trnblas.gemv(3, A, x, 1, y), 3 * An @ xn + yn),  # int scalars key by value
        (lambda: trnblas.axpy(2.5, x, y), 2.5 * xn + yn),
        (lambda: trnblas.dot(x, y), xn @ yn),
        (lambda: trnblas.ger(2.0, x, y, A), An + 2 * np.outer(xn, yn)),
    ]
    for op in (level1.DOT, level1.AXPY, level2.GEMV, level2.GER, level3_gemm.GEMM):
        op.settled.clear()
    first = [f() for f, _ in calls]
    again = [f() for f, _ in calls]  # settled routes
    for (_, ref), a, b in zip(calls, first, again):
        np.testing.assert_allclose(a.double().numpy(), ref, rtol=2e-5, atol=2e-5)  # float32, n = 9
        assert torch.equal(a, b)
    routes = list(_routes(level3_gemm.GEMM, trnblas.gemm).values())
    assert len(routes) == 4
    # the plain product reduced to torch.mm itself, the product with C to the written-out addmm branch
    targets = [_target(r) for r in routes]
    assert torch.mm in targets and level3_gemm._addmm in targets and level3_gemm._gemm_torch in targets


def _target(r):
    """What a route calls: the function its closure holds, or the route itself."""
    import inspect

    return inspect.getclosurevars(r).nonlocals.get("target", r) if hasattr(r, "__code__") else r


def test_compiled_routes_keep_blas_zero_semantics_and_checks():
    g = torch.Generator().manual_seed(12)
    A, x, y = torch.randn(6, 6, generator=g), torch.randn(6, generator=g), torch.randn(6, generator=g)
    level2.GEMV.settled.clear()
    for _ in range(2):
        trnblas.gemv(2.0, A, x, 0.5, y)
    bad = A.clone()
    bad[0, 0] = float("nan")
    assert torch.equal(trnblas.gemv(0.0, bad, x, 0.5, y), 0.5 * y)  # alpha == 0 reads neither A nor x
    with pytest.raises(TypeError, match="alpha"):
        trnblas.gemv(True, A, x)
    with pytest.raises(TypeError, match="alpha"):
        trnblas.gemv(1j, A, x)
    with pytest.raises(ValueError, match="x must have 6"):
        trnblas.gemv(2.0, A, x[:5], 0.5, y)
    with pytest.raises(TypeError, match="y"):
        trnblas.gemv(2.0, A, x, 0.5, y.double())
    # NumPy scalars and keyword arguments take the full path and give the same numbers
    An, xn, yn = _np64(A, x, y)
    np.testing.assert_allclose(trnblas.gemv(np.float64(2.0), A, x, beta=0.5, y=y).numpy(),
                               2 * An @ xn + 0.5 * yn, rtol=2e-5, atol=2e-5)
    # a sparse matrix with the dense route's dtype and shape is its own key (layout), refused in full
    with pytest.raises(TypeError, match="sparse"):
        trnblas.gemv(2.0, A.to_sparse(), x, 0.5, y)


def test_compiled_spec_must_match_the_parameters():
    op, _ = _fake()
    with pytest.raises(ValueError, match="2 kinds for 3"):
        S.public(op, "scalar tensor")(lambda a, x, flag="n": None)
    with pytest.raises(ValueError, match="unknown kind"):
        S.public(op, "scalar vector flag")(lambda a, x, flag="n": None)


def test_compiled_arity_is_part_of_the_key():
    op, log = _fake()

    @S.public(op, "scalar tensor flag")
    def f(a, x, flag="n"):
        return S.call(op, a, x, flag)

    x = torch.arange(3.0)
    for _ in range(2):
        assert f(2.0, x).tolist() == [0.0, 2.0, 4.0] and log[-1] == (2.0, "n")
        assert f(2.0, x, "m").tolist() == [0.0, 2.0, 4.0] and log[-1] == (2.0, "m")
        assert f(3.0, x, flag="k").tolist() == [0.0, 3.0, 6.0] and log[-1] == (3.0, "k")
    assert len(op.settled[f]) == 3  # a positional parameter given by keyword is bound by name: its own route


# ------------------------------------------------------------------ the wrapper's shortcuts

def test_held_route_table_is_emptied_in_place_and_registered_again(xy):
    """A wrapper keeps its own table; Op.settled.clear() (a route choice changed, a lowering
    replaced) must empty that very table, and the next settled call registers it again."""
    x, y = xy
    level1.DOT.settled.clear()
    trnblas.dot(x, y)
    table = level1.DOT.settled[trnblas.dot]
    assert len(table) == 1
    level1.DOT.settled.clear()
    assert table == {} and trnblas.dot not in level1.DOT.settled
    calls = []
    with level1.DOT.override("torch", lambda a, b: calls.append(1) or torch.dot(a, b)):
        r = trnblas.dot(x, y)  # the held table is empty: the spy lowering runs, not a stale torch.dot route
        assert calls == [1] and level1.DOT.settled[trnblas.dot] is table
    ref = float(np.dot(x.double().numpy(), y.double().numpy()))
    assert abs(float(r) - ref) <= 1e-5 * float(np.abs(x.numpy()) @ np.abs(y.numpy()))


def test_a_route_that_is_the_torch_call_itself(xy):
    """dot's reduction is torch.dot on the caller's (x, y): the route is torch.dot, no frame between."""
    x, y = xy
    level1.DOT.settled.clear()
    first = trnblas.dot(x, y)
    assert list(_routes(level1.DOT, trnblas.dot).values()) == [torch.dot]
    assert torch.equal(trnblas.dot(x, y), first)


def test_keyword_only_parameters_take_the_full_path_and_unknown_keywords_fail(xy):
    x, y = xy
    A = torch.outer(y, x)
    level2.GER.settled.clear()
    for _ in range(2):
        trnblas.ger(2.0, x, y, A)
    out = torch.empty_like(A)
    r = trnblas.ger(2.0, x, y, A, out=out)
    assert r is out
    np.testing.assert_allclose(out.double().numpy(), A.double().numpy() + 2 * np.outer(x.numpy(), y.numpy()),
                               rtol=1e-5, atol=1e-5)
    with pytest.raises(TypeError, match="ger.*unexpected keyword argument 'bogus'"):
        trnblas.ger(2.0, x, y, A, bogus=1)
    with pytest.raises(TypeError, match="out"):
        trnblas.ger(2.0, x, y, A, out=1)


def test_usual_state_holds_only_when_the_probe_says_torch(monkeypatch):
    """The usual-state test the wrappers write out for Op.on_torch (torch_probe's ``usual``): whenever it
    is true the probe is true, and every setting that can take a call off the torch route makes it false.
    Run in a fresh context (no backend ever set there), as a program starts."""
    import contextvars

    import trnsci
    from trnsci import dispatch
    from trnsci import nki as tnki

    probe = level1.DOT.on_torch
    usual = probe.usual

    def check():
        assert usual() and probe()
        seen = []
        dispatch.plan_call(lambda: seen.append((usual(), probe())))
        assert seen == [(False, False)]
        for var, value in (("TRNBLAS_BACKEND", "torch"), ("TRNSCI_BACKEND", "torch"), ("TRNSCI_REQUIRE_NKI", "1")):
            monkeypatch.setenv(var, value)
            assert not usual()
            monkeypatch.delenv(var)
        monkeypatch.setattr(tnki, "HAS_NKI", True)
        assert not usual()
        monkeypatch.setattr(tnki, "HAS_NKI", False)
        assert usual() and probe()
        with trnsci.use_backend("simulator"):
            assert not usual() and not probe()
        assert not usual() and probe()  # a backend was set in this context: the probe reads the variables

    contextvars.Context().run(check)


def test_required_nki_takes_a_settled_call_off_its_route(xy, monkeypatch):
    """A setting outside the usual state (TRNSCI_REQUIRE_NKI=1 on a machine without a NeuronCore) must
    reach a settled signature: the call runs in full and the Op's rule decides (here: it raises)."""
    from trnsci.dispatch import NkiRequiredError

    x, y = xy
    level1.DOT.settled.clear()
    for _ in range(2):
        trnblas.dot(x, y)
    assert len(_routes(level1.DOT, trnblas.dot)) == 1
    monkeypatch.setenv("TRNSCI_REQUIRE_NKI", "1")
    with pytest.raises(NkiRequiredError):
        trnblas.dot(x, y)


def test_keyword_calls_bind_to_their_positions_and_match_numpy():
    """A positional parameter given by keyword has the key (and route) of the positional call with the
    defaults in between; keyword-only arguments and unknown keywords run in full."""
    g = torch.Generator().manual_seed(13)
    A, B, C = (torch.randn(6, 6, generator=g) for _ in range(3))
    An, Bn, Cn = _np64(A, B, C)
    level3_gemm.GEMM.settled.clear()
    for _ in range(2):
        np.testing.assert_allclose(trnblas.gemm(1.0, A, B, transB=True).double().numpy(), An @ Bn.T,
                                   rtol=2e-5, atol=2e-5)
        np.testing.assert_allclose(trnblas.gemm(1.0, A, B, C=C, beta=0.5).double().numpy(), An @ Bn + 0.5 * Cn,
                                   rtol=2e-5, atol=2e-5)
        np.testing.assert_allclose(trnblas.gemm(alpha=2.0, A=A, B=B).double().numpy(), 2 * An @ Bn,
                                   rtol=2e-5, atol=2e-5)
    assert trnblas.gemm(1.0, A, B, 0.0, None, False, True) is not None
    routes = _routes(level3_gemm.GEMM, trnblas.gemm)
    exact = [k for k in routes if k[0] is S._M]  # the named wrapper's entry for transB=True by its exact value
    assert len(routes) - len(exact) == 3  # the first and last call share a key
    assert len(exact) == 1 and exact[0][2:] == ((type(S._M),) * 3 + (bool,), (S._M,) * 3 + (True,))
    with pytest.raises(TypeError, match="A"):
        trnblas.gemm(1.0, B=B)
    with pytest.raises(TypeError, match="bogus"):
        trnblas.gemm(1.0, A, B, bogus=1)


def test_tracebacks_show_real_files():
    """Every frame of an error raised through a settled route (and through the full call) is a real file."""
    import os
    import traceback

    op = Op("trnsci.test_settled_traceback", "elements", 1e9, size=lambda *a: 1)

    @op.lowering("torch")
    def low(x):
        if bool(x.sum() > 100):
            raise ValueError("too large")
        return x + 1

    @S.public(op, "tensor")
    def f(x):
        return S.call(op, x)

    small, large = torch.zeros(3), torch.full((3,), 50.0)
    f(small)
    assert len(op.settled[f]) == 1
    with pytest.raises(ValueError, match="too large") as info:
        f(large)  # the settled route: the lowering itself
    frames = traceback.extract_tb(info.value.__traceback__)
    assert len(frames) >= 2 and all(os.path.isfile(fr.filename) for fr in frames), frames
    with pytest.raises(TypeError) as info:
        trnblas.gemm(1.0, torch.ones(2, 2), torch.ones(2, 2, dtype=torch.float64))
    assert all(os.path.isfile(fr.filename) for fr in traceback.extract_tb(info.value.__traceback__))


def test_no_code_is_generated_from_text():
    """No library or core module runs exec/eval (nor builds code objects from source text)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "packages"
    bad = re.compile(r"(?<![\w.])(exec|eval)\(|(?<![\w.])compile\(")
    hits = [f"{p}:{i}" for p in root.glob("*/src/**/*.py")
            for i, line in enumerate(p.read_text().splitlines(), 1) if bad.search(line)]
    assert hits == []
