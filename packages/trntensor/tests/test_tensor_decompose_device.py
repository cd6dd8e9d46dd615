"""CP / Tucker: their SVD, QR and pinv steps on trnsolver's kernels (backend "simulator").

Every call of trnsolver's public ``svd``/``qr``/``pinv`` made by a decomposition
is recorded with trnsolver's own plan of it (``steps`` fixture), so a test sees
that each step reached trnsolver and which lowering it chose; ``kernel_ran``
sees which kernels ran. References are NumPy / tensorly in float64.

Tolerances (fp32 kernels, ``u = 2^-24``):
* subspaces: the Jacobi SVD's vectors are accurate to ``~ n u sigma_1 / gap``;
  the test tensors are low multilinear rank plus 1e-3 noise, so the gap is
  ``> 0.1 sigma_1`` and the projectors agree to ``1e-4`` (measured ~1e-6);
* fits: ``||T - X|| / ||T||`` in fp32 carries ~``sqrt(N) u`` of rounding per
  step (N <= 700 entries): the fit matches tensorly's to ``1e-5``;
* orthonormality of Householder-completed factors: ``m u`` -> ``1e-5``;
* CP-ALS on an exact rank-2 tensor: fp32 ALS stalls near ``1e-6`` relative;
  ``1e-4`` leaves room for the stopping rule.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trnsci
import trntensor
from trnsci.dispatch import plan_call
from trnsci.testing import kernel_ran

tl = pytest.importorskip("tensorly")
from tensorly.decomposition import tucker as tl_tucker  # noqa: E402

SVD_KERNEL = "svd_sweep_kernel"


@pytest.fixture
def steps(monkeypatch):
    """Records ``(function, matrix shape, trnsolver's plan of the call)`` for every trnsolver svd/qr/pinv
    call a decomposition makes."""
    import trnsolver
    from trnsolver.factor import PINV, QR, SVD

    log = []

    def spy(name, op, args_of):
        orig = getattr(trnsolver, name)

        def wrapper(*a, **k):
            log.append((name, tuple(a[0].shape), op.plan(*args_of(*a, **k))))
            return orig(*a, **k)

        monkeypatch.setattr(trnsolver, name, wrapper)

    spy("svd", SVD, lambda A, full_matrices=False, **k: (A, full_matrices))
    spy("qr", QR, lambda A, mode="reduced": (A, mode))
    spy("pinv", PINV, lambda A, rcond=None, **k: (A, rcond))
    return log


def _plan_matches_steps(fn, steps, *args, **kwargs):
    """The decomposition's plan (its description) lists exactly the (function, shape, lowering) of the
    trnsolver steps the run made (``steps`` from the run just before)."""
    with trnsci.use_backend("simulator"):
        desc = plan_call(fn, *args, **kwargs).description
    listed = {tuple(part.split(": ", 1)) for part in desc.split("trnsolver steps: ", 1)[1].split(" | ")}
    ran = {(f"{name} {m}x{n}", p.backend if p.backend != "torch" else f"torch ({p.reason})")
           for name, (m, n), p in steps}
    assert listed == ran, (listed, ran)


def _low_rank(shape, ranks, seed=0, noise=1e-3):
    rng = np.random.default_rng(seed)
    G = rng.standard_normal(ranks)
    Us = [rng.standard_normal((n, r)) for n, r in zip(shape, ranks)]
    T = np.einsum("abc,ia,jb,kc->ijk", G, *Us) + noise * rng.standard_normal(shape)
    return T.astype(np.float32).astype(np.float64)  # fp32-exact, so both sides see the same data


def _rel_err(T, core, factors):
    X = np.einsum("abc,ia,jb,kc->ijk", core, *factors)
    return np.linalg.norm(T - X) / np.linalg.norm(T)


def _np(xs):
    return [x.double().numpy() for x in xs]


def _unfold(T, n):
    return np.moveaxis(T, n, 0).reshape(T.shape[n], -1)


@pytest.mark.simulator
def test_tucker_hosvd_and_hooi_run_every_svd_on_the_kernel(steps):
    T = _low_rank((9, 7, 11), (3, 2, 4))
    Tt = torch.from_numpy(T).float()
    with kernel_ran() as runs:
        core, factors = trntensor.tucker_decompose(Tt, (3, 2, 4))
    assert {r.kernel for r in runs} == {SVD_KERNEL, "gemm_kernel"}
    assert [name for name, _, _ in steps] == ["svd"] * 3 and all(p.backend == "simulator" for _, _, p in steps)
    _plan_matches_steps(trntensor.tucker_decompose, steps, Tt, (3, 2, 4))
    for n, U in enumerate(_np(factors)):  # leading left singular subspace of each unfolding
        Ur = np.linalg.svd(_unfold(T, n))[0][:, :U.shape[1]]
        assert np.linalg.norm(U @ U.T - Ur @ Ur.T, 2) <= 1e-4

    steps.clear()
    with kernel_ran() as runs:
        core, factors = trntensor.tucker_decompose(Tt, (3, 2, 4), "hooi", max_iter=5)
    assert {r.kernel for r in runs} == {SVD_KERNEL, "gemm_kernel"}
    assert len(steps) >= 6 and all(name == "svd" and p.backend == "simulator" for name, _, p in steps)
    _plan_matches_steps(trntensor.tucker_decompose, steps, Tt, (3, 2, 4), "hooi", max_iter=5)
    ref = tl_tucker(tl.tensor(T), rank=[3, 2, 4], n_iter_max=50, init="svd", tol=1e-12)
    assert abs(_rel_err(T, core.double().numpy(), _np(factors)) - _rel_err(T, ref.core, ref.factors)) <= 1e-5


@pytest.mark.simulator
def test_hooi_rank_past_the_other_modes_completes_on_the_qr_kernel(steps):
    # ranks (5, 2, 2): mode 0's projected unfolding is (9, 4), so the thin SVD gives 4 vectors and the
    # fifth comes from the complete Q (Householder kernel) -- the fit is that of ranks (4, 2, 2)
    T = _low_rank((9, 7, 11), (4, 2, 2), seed=1)
    with kernel_ran() as runs:
        core, factors = trntensor.tucker_decompose(torch.from_numpy(T).float(), (5, 2, 2), "hooi", max_iter=3)
    assert {"qr_panel_kernel", SVD_KERNEL, "gemm_kernel"} <= {r.kernel for r in runs}
    assert {name for name, _, _ in steps} == {"svd", "qr"} and all(p.backend == "simulator" for _, _, p in steps)
    _plan_matches_steps(trntensor.tucker_decompose, steps, torch.from_numpy(T).float(), (5, 2, 2), "hooi", max_iter=3)
    U0 = factors[0].double().numpy()
    assert U0.shape == (9, 5) and np.linalg.norm(U0.T @ U0 - np.eye(5)) <= 1e-5
    ref = tl_tucker(tl.tensor(T), rank=[4, 2, 2], n_iter_max=50, init="svd", tol=1e-12)
    assert abs(_rel_err(T, core.double().numpy(), _np(factors)) - _rel_err(T, ref.core, ref.factors)) <= 1e-5


@pytest.mark.simulator
def test_cp_als_runs_init_svds_and_normal_equation_pinvs_on_kernels(steps):
    rng = np.random.default_rng(3)
    A, B, C = (rng.standard_normal((n, 2)) for n in (9, 7, 5))
    T = np.einsum("ir,jr,kr->ijk", A, B, C)  # exact rank 2
    with kernel_ran() as runs:
        factors, weights = trntensor.cp_decompose(torch.from_numpy(T).float(), 2, max_iter=10, tol=1e-7)
    assert {r.kernel for r in runs} == {SVD_KERNEL, "gemm_kernel"}
    names = [name for name, _, _ in steps]
    assert names[:3] == ["svd"] * 3 and set(names[3:]) == {"pinv"} and len(names) % 3 == 0
    assert all(p.backend == "simulator" for _, _, p in steps)
    _plan_matches_steps(trntensor.cp_decompose, steps, torch.from_numpy(T).float(), 2, 10, 1e-7)
    X = np.einsum("r,ir,jr,kr->ijk", weights.double().numpy(), *_np(factors))
    assert np.linalg.norm(X - T) <= 1e-4 * np.linalg.norm(T)


@pytest.mark.simulator
def test_unfolding_past_the_svd_kernel_falls_back_with_the_reason(steps):
    # both dims of every unfolding > 128: trnsolver's plan says why and runs torch -- the right answer
    rng = np.random.default_rng(4)
    T = (rng.standard_normal((130, 3)) @ rng.standard_normal((3, 131))).astype(np.float32).astype(np.float64)
    with trnsci.use_backend("simulator"):
        core, factors = trntensor.tucker_decompose(torch.from_numpy(T).float(), (3, 3))
    assert len(steps) == 2
    for _, _, plan in steps:
        assert plan.backend == "torch" and "min(m, n)=130 > 128" in plan.reason
    _plan_matches_steps(trntensor.tucker_decompose, steps, torch.from_numpy(T).float(), (3, 3))
    for n, U in enumerate(_np(factors)):
        Ur = np.linalg.svd(_unfold(T, n))[0][:, :3]
        assert np.linalg.norm(U @ U.T - Ur @ Ur.T, 2) <= 1e-4


@pytest.mark.parametrize("backend,dtype", [("torch", torch.float32), ("simulator", torch.float64)])
def test_no_trnsolver_call_where_it_could_not_pick_a_kernel(steps, backend, dtype):
    # backend "torch", or float64 (trnsolver's kernels are fp32-only): plain torch.linalg, nothing dispatched
    T = torch.from_numpy(_low_rank((5, 4, 6), (2, 2, 2))).to(dtype)
    with trnsci.use_backend(backend):
        trntensor.tucker_decompose(T, (2, 2, 2), "hooi", max_iter=2)
        trntensor.cp_decompose(T, 2, max_iter=2)
    assert steps == []


@pytest.mark.simulator
def test_tt_svd_truncations_run_on_the_kernel(steps):
    # exact TT of a random 5 x 6 x 7 tensor: ranks (5, 7), then the product of the cores is T up to fp32
    # rounding of two Jacobi SVDs and the GEMMs (~ sqrt(N) u relative per step) -> 1e-5
    T = np.random.default_rng(5).standard_normal((5, 6, 7)).astype(np.float32).astype(np.float64)
    with kernel_ran() as runs:
        cores = trntensor.tt_decompose(torch.from_numpy(T).float())
    assert {r.kernel for r in runs} == {SVD_KERNEL}
    assert [name for name, _, _ in steps] == ["svd"] * 2 and all(p.backend == "simulator" for _, _, p in steps)
    _plan_matches_steps(trntensor.tt_decompose, steps, torch.from_numpy(T).float())
    assert [tuple(c.shape) for c in cores] == [(1, 5, 5), (5, 6, 7), (7, 7, 1)]
    G0, G1, G2 = _np(cores)
    X = np.einsum("ia,ajb,bk->ijk", G0[0], G1, G2[:, :, 0])
    assert np.linalg.norm(X - T) <= 1e-5 * np.linalg.norm(T)
