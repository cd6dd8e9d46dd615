"""trnsci.hostblas: OpenBLAS pools held at one thread inside trnsci's host calls while torch is multi-threaded."""

import numpy as np
import pytest
import scipy.linalg  # noqa: F401 -- loads SciPy's own OpenBLAS beside NumPy's
import torch

from trnsci import hostblas

pytestmark = pytest.mark.skipif(not hostblas.pools(),
                                reason="no OpenBLAS found in this process (not Linux, or another BLAS)")


@pytest.fixture
def torch_threads():
    old = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(old)


@pytest.fixture
def pools():
    """The pools as found now (a module imported by another test may have loaded one more copy)."""
    return hostblas.pools()


@pytest.fixture
def blas_at_two(pools):
    """Every pool at 2 threads for the test (a single-threaded build stays at 1: PySCF's own copy), then
    back to what it was; yields the counts the pools then report, which a call must restore."""
    saved = [get() for get, _ in pools]
    for _, put in pools:
        put(2)
    now = [get() for get, _ in pools]
    assert 2 in now  # NumPy's and SciPy's wheels are threaded builds
    yield now
    for (_, put), was in zip(pools, saved):
        put(was)


def _threads():
    return [get() for get, _ in hostblas.pools()]


def test_both_wheels_pools_found(pools):
    # NumPy's and SciPy's wheels each bundle an OpenBLAS; both must be held, or the other one still spins
    assert len(pools) >= 2


def test_inside_call_every_pool_runs_at_one_thread_and_is_restored(pools, torch_threads, blas_at_two):
    torch_threads(2)
    seen = hostblas.call(_threads)
    assert seen == [1] * len(pools)
    assert _threads() == blas_at_two


def test_one_torch_thread_holds_the_pools_too(pools, torch_threads, blas_at_two):
    # one torch thread asked for single-threaded work: OpenBLAS does not thread by itself inside trnsci
    torch_threads(1)
    assert hostblas.call(_threads) == [1] * len(pools)
    assert _threads() == blas_at_two


def test_pools_already_at_one_are_left_alone(pools, torch_threads):
    saved = _threads()
    try:
        for _, put in pools:
            put(1)
        torch_threads(2)
        assert hostblas.call(_threads) == [1] * len(pools)
        assert _threads() == [1] * len(pools)
    finally:
        for (_, put), was in zip(pools, saved):
            put(was)


def test_nested_calls_restore_once_and_errors_restore(pools, torch_threads, blas_at_two):
    torch_threads(2)
    inner = hostblas.serial(lambda: (_threads(), hostblas.call(_threads)))
    outer, nested = hostblas.call(inner)
    assert outer == nested == [1] * len(pools)
    assert _threads() == blas_at_two

    def boom():
        raise RuntimeError("x")

    with pytest.raises(RuntimeError):
        hostblas.call(boom)
    assert _threads() == blas_at_two


def test_results_unchanged(torch_threads):
    # the same LAPACK routine at one thread: the factor agrees with NumPy's to rounding (well-conditioned SPD, n=200)
    torch_threads(2)
    rng = np.random.default_rng(0)
    M = rng.standard_normal((200, 200))
    A = M @ M.T + 200 * np.eye(200)
    L = hostblas.call(scipy.linalg.cholesky, A, lower=True)
    np.testing.assert_allclose(L, np.linalg.cholesky(A), rtol=1e-12, atol=1e-12)


def test_finding_the_pools_leaves_blas_symbols_where_they_were():
    """Looking the pools up must not promote an OpenBLAS copy's symbols to the process's global scope:
    with RTLD_GLOBAL, PySCF's helper library (loaded afterwards) bound its dgemm_ to them and an RHF run
    crashed with a segmentation fault. In a fresh interpreter: pools(), then a small RHF must finish."""
    import subprocess
    import sys

    pytest.importorskip("pyscf")
    code = ("import scipy.linalg\n"
            "from trnsci import hostblas\n"
            "assert len(hostblas.pools()) >= 1\n"
            "from pyscf import gto, scf\n"
            "mol = gto.M(atom='O 0 0 0; H 0 -0.757 0.587; H 0 0.757 0.587', basis='sto-3g', verbose=0)\n"
            "e = scf.RHF(mol).run().e_tot\n"
            "assert -74.9 > e > -75.05, e\n")  # STO-3G water: -74.963 Eh (PySCF's own value, independent of trnsci)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])


def test_each_single_threaded_runs_every_item_in_the_callers_context(torch_threads):
    import contextvars
    import threading

    var = contextvars.ContextVar("scope", default="outside")
    seen = []

    def fn(i):
        seen.append((i, var.get(), torch.get_num_threads(), threading.get_ident()))

    torch_threads(2)
    token = var.set("inside")
    try:
        hostblas.each_single_threaded(fn, range(6))
    finally:
        var.reset(token)
    assert sorted(i for i, *_ in seen) == list(range(6))
    assert {(scope, n) for _, scope, n, _ in seen} == {("inside", 1)}  # the caller's scope, torch at one thread
    assert torch.get_num_threads() == 2
    seen.clear()
    hostblas.each_single_threaded(fn, [7])  # one item: the calling thread, torch untouched
    assert seen == [(7, "outside", 2, threading.get_ident())]
