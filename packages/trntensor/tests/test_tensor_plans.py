"""Plans say what runs: every trntensor op with a kernel (plan == run, incl. calls the kernel
cannot take), and every einsum step's backend/reason against the kernels that actually ran."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trnblas
import trnsci
import trntensor
from trnsci import dispatch, nki
from trnsci.testing import check_plan_case, kernel_ops, plan_cases

pytestmark = pytest.mark.simulator

F32, F64 = torch.float32, torch.float64


def _t(*shape, dtype=F32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


def _ao(nao, nocc, nvir, naux, dtype=F32):
    return (_t(nao, nao, naux, dtype=dtype), _t(nao, nocc, dtype=dtype, seed=1), _t(nao, nvir, dtype=dtype, seed=2))


CASES = {
    "trntensor.ao_to_mo_transform": [
        (trntensor.ao_to_mo_transform, _ao(9, 2, 3, 5)),
        (trntensor.ao_to_mo_transform, _ao(9, 2, 3, 5, F64)),  # float64: the kernel takes float32 only
    ],
    "trntensor.permute": [
        (trntensor.permute, (_t(3, 130, 7), (2, 0, 1))),
        (trntensor.permute, (_t(3, 4, 5, dtype=torch.bfloat16), (1, 2, 0)), {"alpha": 0.5}),
        (trntensor.permute, (_t(3, 4, 5, dtype=F64), (1, 0, 2))),  # float64: torch
    ],
    "trntensor.elementwise": [
        (trntensor.elementwise, (_t(4, 9), _t(9, 4, seed=1), _t(4, 9, seed=2)),
         {"op_b": "tanh", "op_abc": "max", "subscripts": "ab,ba,ab->ab"}),
        (trntensor.elementwise, (_t(4, 9), _t(9)), {}),  # broadcast operand: gather kernel, then elementwise
        (trntensor.elementwise, (_t(4, 9), _t(4, 9, dtype=F64)), {}),  # mixed dtypes: torch
    ],
    "trntensor.einsum": [  # the device path: every launch the plan lists ran, in order
        (trntensor.einsum, ("ij,jk->ki", _t(30, 20), _t(20, 10, seed=1))),
        (trntensor.einsum, ("ii->i", _t(20, 20))),
        (trntensor.einsum, ("ij,jk->ik", _t(30, 20, dtype=F64), _t(20, 10, dtype=F64, seed=1))),  # float64: torch
    ],
    "trntensor.reduce": [
        (trntensor.reduce, (_t(5, 131, 3), (0, 2)), {"op": "max", "alpha": 2.0}),
        (trntensor.reduce, (_t(5, 3, dtype=F64), 1)),  # float64: torch
    ],
}


def test_every_kernel_op_has_cases():
    assert kernel_ops("trntensor") == set(CASES)


@pytest.mark.parametrize("backend", ["simulator", "torch"])
@pytest.mark.parametrize("op_name,case", plan_cases(CASES), ids=lambda x: x if isinstance(x, str) else "")
def test_plan_backend_is_what_ran(backend, op_name, case):
    plan, runs = check_plan_case(backend, op_name, case)
    first = next(a for a in case[1] if isinstance(a, torch.Tensor))
    if first.dtype == F64:
        assert runs == [] and plan.backend == "torch"
        assert backend == "torch" or "float64" in plan.reason or "no launch" in plan.reason


def test_ao_to_mo_beyond_the_sbuf_plan_plans_torch_with_the_reason():
    from trntensor.chem import AO_TO_MO

    meta = [torch.empty(s, device="meta") for s in ((10**8, 10**8, 1), (10**8, 1), (10**8, 1))]
    with trnsci.use_backend("simulator"):
        p = AO_TO_MO.plan(*meta)
    assert p.backend == "torch" and "SBUF" in p.reason and p.kernel is None


# ------------------------------------------------------------------ einsum steps vs what ran

EINSUM_CASES = [
    ("ij,jk->ki", [(30, 20), (20, 10)], F32),  # one GEMM step (final operands swapped)
    ("bij,bkj->bik", [(3, 7, 5), (3, 6, 5)], F32),  # batched GEMM
    ("ibj,bjk->bik", [(4, 3, 5), (3, 5, 6)], F32),  # batched GEMM after permutes
    ("ij,jk,kl->il", [(9, 40), (40, 30), (30, 2)], F32),  # two GEMM steps
    ("ij,jk->i", [(5, 6), (6, 7)], F32),  # GEMM then a reduction
    ("ij,ij->ij", [(4, 5), (4, 5)], F32),  # elementwise: the elementwise kernel
    ("iij,jk,kx->ki", [(5, 5, 7), (7, 9), (9, 3)], F32),  # a diagonal, a pre-sum, a transpose
    ("ij,jk->ik", [(8, 9), (9, 4)], F64),  # float64: trnblas's kernels do not take it
]


def _launches(plan):
    """``[(op, kernel names, summed closed forms)]`` of every kernel launch ``plan.launches`` lists."""
    out = []
    for _, p in plan.launches:
        if p.backend != "torch" and p.kernel is not None:
            names = p.kernel.get("kernels") or [p.kernel["name"]]
            out.append((p.op, names, {k: v for k, v in p.kernel.items() if k not in ("name", "kernels")}))
    return out


@pytest.mark.parametrize("sub,shapes,dtype", EINSUM_CASES, ids=[c[0] for c in EINSUM_CASES])
def test_einsum_steps_report_what_ran(sub, shapes, dtype):
    # under a kernel backend every data movement of the plan is a launch plan.launches names
    # (trntensor._nki.einsum_device): the kernels that ran are exactly those, in order, with the closed-form counters
    ops = [_t(*s, dtype=dtype, seed=k) for k, s in enumerate(shapes)]
    with trnsci.use_backend("simulator"):
        plan = trntensor.plan_contraction(sub, *ops)
        expected = _launches(plan)
        with nki.capture() as runs:
            R = trntensor.einsum(sub, *ops)
    assert [r.kernel for r in runs] == [n for _, names, _ in expected for n in names]
    it = iter(runs)
    for op, names, figures in expected:
        group = [next(it) for _ in names]
        summed = {}
        for r in group:
            assert r.backend == "simulator"
            for key, v in {"hbm_read_bytes": r.profile.hbm_read_bytes, "hbm_write_bytes": r.profile.hbm_write_bytes,
                           "flops": r.profile.flops, **r.profile.instructions}.items():
                summed[key] = summed.get(key, 0) + v
        assert {k: summed[k] for k in figures} == figures, op
    for s in plan.steps:
        if s.strategy in ("gemm", "batched_gemm"):
            assert "trnblas." in s.reason and "backend 'simulator'" in s.reason
        assert s.backend == ("simulator" if dtype == F32 else "torch"), s.reason
    if dtype == F64:
        assert runs == []
    ref = np.einsum(sub, *[x.double().numpy() for x in ops], optimize=False)
    # fp32 GEMMs with K <= 40 (per step), error well below 1e-5 relative to max |ref|
    np.testing.assert_allclose(R.double().numpy(), ref, rtol=0, atol=1e-5 * np.abs(ref).max())


def test_einsum_steps_under_torch_and_auto(monkeypatch):
    A, B = _t(300, 200), _t(200, 250)  # 2*300*200*250 = 3e7 flops >= 2*192^3
    a, b = _t(8, 9), _t(9, 4)
    calls = []
    real = trnblas.gemm
    monkeypatch.setattr(trnblas, "gemm", lambda *x, **k: calls.append(1) or real(*x, **k))
    # trnblas could not pick a kernel: every GEMM step calls torch itself (trnblas's validation saved)
    with trnsci.use_backend("torch"), nki.capture() as runs:
        big = trntensor.plan_contraction("ij,jk->ik", A, B, autotune=False).steps[0]
        small = trntensor.plan_contraction("ij,jk->ik", a, b, autotune=False).steps[0]
        assert big.backend == small.backend == "torch" and big.plan is small.plan is None
        assert big.reason == "torch.mm M=300 N=250 K=200: trnblas's backend is 'torch'"
        trntensor.einsum("ij,jk->ik", A, B, autotune=False)
    assert runs == [] and calls == []
    if not nki.has_neuron_device():
        with trnsci.use_backend("auto"):
            s = trntensor.plan_contraction("ij,jk->ik", A, B, autotune=False).steps[0]
            assert s.backend == trnblas.plan_gemm(A, B).backend == "torch" and s.plan is None
            assert s.reason.endswith("trnblas would pick torch (backend 'auto', no NeuronCore)")
            trntensor.einsum("ij,jk->ik", A, B, autotune=False)
        assert calls == []
    with trnsci.use_backend("simulator"):  # a kernel backend: every GEMM step through trnblas
        trntensor.einsum("ij,jk->ik", A.double(), B.double())
        s = trntensor.plan_contraction("ij,jk->ik", A.double(), B.double()).steps[0]
        assert "trnblas.gemm" in s.reason and s.backend == "torch" and "float64" in s.reason
    assert calls == [1]


def test_einsum_plan_is_cached_but_decided_under_the_setting():
    a, b = _t(8, 9), _t(9, 4)
    trntensor.clear_plan_cache()
    with trnsci.use_backend("torch"):
        p1 = trntensor.plan_contraction("ij,jk->ik", a, b)
    with trnsci.use_backend("simulator"):
        p2 = trntensor.plan_contraction("ij,jk->ik", a, b)
    assert trntensor.plan_cache_info()["hits"] == 1  # one cached plan ...
    assert p1.backend == "torch" and p2.backend == "simulator"  # ... decided under each setting
    assert p2.steps[0].plan.kernel["name"] == "gemm_kernel" and p1.steps[0].plan is None


def test_kahan_steps_compute_in_float64_and_plan_torch():
    a, b = _t(8, 9), _t(9, 4)
    with trnsci.use_backend("simulator"), nki.capture() as runs:
        p = trntensor.plan_contraction("ij,jk->ik", a, b, precision="kahan")
        trntensor.einsum("ij,jk->ik", a, b, precision="kahan")
    assert runs == [] and p.steps[0].dtype == F64 and p.steps[0].backend == "torch"
    assert "float64" in p.steps[0].reason


def test_einsum_op_plan():
    from trntensor.einsum import EINSUM

    assert EINSUM.has_kernel  # its NKI lowering is the device path (trntensor._nki.einsum_device)
    with trnsci.use_backend("torch"):
        p = dispatch.plan_call(trntensor.einsum, "ij,jk->ik", _t(2, 3), _t(3, 4))
    assert p.op == "trntensor.einsum" and p.flops == 2 * 2 * 3 * 4 and "ij,jk->ik" in p.description


def test_contraction_plan_carries_the_einsum_ops_decision():
    with trnsci.use_backend("simulator"):
        p = trntensor.plan_contraction("ij,jk->ik", _t(2, 3), _t(3, 4))
    assert p.op_plan.op == "trntensor.einsum" and p.op_plan.flops == p.flops == 48
    # one decision: the einsum op runs its device path, whose launches the op's plan lists
    assert p.op_plan.backend == "simulator" and p.op_plan.kernel["kernels"] == [
        q.kernel["name"] for _, q in p.launches if q.backend != "torch" and q.kernel]
    assert p.backend == "simulator"  # the step's kernel (trnblas's gemm_kernel)


# ------------------------------------------------------------------ autotuned routes: the plan names each execution's

def test_autotuned_routes_plan_equals_run(monkeypatch, tmp_path):
    """Each execution runs the routes plan_contraction names just before it; the first one chooses
    them through trnsci.routes (timing both candidates on each step's operands)."""
    import sys

    from trnsci import routes
    from trntensor import _host

    E = sys.modules["trntensor.einsum"]
    clock, ran = [0.0], []

    def spied(route, fn):
        def call(a, b, *rest):
            # numpy.matmul "faster" exactly on steps with M > 20 (the first here, not the second): a mixed plan
            clock[0] += (1.0 if a.shape[-2] > 20 else 3.0) if route == "numpy" else 2.0
            ran.append(route)
            return fn(a, b, *rest)
        return call

    monkeypatch.setenv("TRNSCI_CALIBRATION_FILE", str(tmp_path / "cal.json"))
    monkeypatch.setattr(_host, "_clock", lambda cpu: clock[0])
    monkeypatch.setattr(E, "_np_gemm", spied("numpy", E._np_gemm))
    monkeypatch.setattr(E, "_mm", spied("torch", E._mm))
    monkeypatch.setattr(E, "_bmm", spied("torch", E._bmm))
    prev = trntensor.set_autotune(2)
    trntensor.clear_plan_cache()
    routes.forget()
    try:
        ops = [_t(9, 40, dtype=F64), _t(40, 30, dtype=F64, seed=1), _t(30, 2, dtype=F64, seed=2)]
        ref = np.einsum("ij,jk,kl->il", *[x.numpy() for x in ops])
        with trnsci.use_backend("auto"), routes.mode("measure"):
            plan = trntensor.plan_contraction("ij,jk,kl->il", *ops)
            assert [s.backend for s in plan.steps] == ["torch"] * 2
            assert all("not measured yet" in s.reason for s in plan.steps)
            R = trntensor.einsum("ij,jk,kl->il", *ops)  # chooses: per step 1 warm-up + 2 rounds each, then the run
            np.testing.assert_allclose(R.numpy(), ref, rtol=1e-12)
            timing = ["torch", "numpy", "torch", "numpy", "numpy", "torch"]  # warm-ups, then rotating rounds
            assert ran == timing + ["numpy"] + timing + ["torch"]
            for _ in range(3):
                plan = trntensor.plan_contraction("ij,jk,kl->il", *ops)
                said = [s.backend for s in plan.steps]
                ran.clear()
                R = trntensor.einsum("ij,jk,kl->il", *ops)
                assert ran == said == ["numpy", "torch"], (plan, ran)
                np.testing.assert_allclose(R.numpy(), ref, rtol=1e-12)
        for s in plan.steps:
            assert "route trntensor.gemm at" in s.reason and "(measured: " in s.reason
            assert s.reason.startswith("numpy.matmul" if s.backend == "numpy" else "torch.mm")
    finally:
        trntensor.set_autotune(prev)
        trntensor.clear_plan_cache()
        routes.forget()


def test_operand_order_avoids_copying_intermediates():
    # the AO->MO transform: taken as listed, the first step's result "inP" must be copied into "niP" to be
    # the next GEMM's operand; taking that step's operands the other way round gives "nPi", a view.
    from trntensor import plan as P

    ops = [_t(6, 2, dtype=F64), _t(6, 6, 5, dtype=F64, seed=1), _t(6, 3, dtype=F64, seed=2)]
    plan = trntensor.plan_contraction("mi,mnP,na->iaP", *ops)
    terms = [s.subscripts.split("->")[0].split(",") for s in plan.steps]
    sizes = {"m": 6, "n": 6, "i": 2, "a": 3, "P": 5}
    assert [P._copied(r[3], t, sizes) for r, t in zip(plan._exec[1], terms)] == [0, 0]
    # the listed order would copy: the search did find something
    listed = P._gemm_step("mi", "mnP", set("naiaP"), sizes)[0]
    second = P._gemm_step("na", "inP", set("iaP"), sizes)[0]
    assert P._copied(listed, ("mi", "mnP"), sizes) == 0 and P._copied(second, ("na", "inP"), sizes) == 6 * 2 * 5
    ref = np.einsum("mi,mnP,na->iaP", *[x.numpy() for x in ops])
    np.testing.assert_allclose(trntensor.einsum("mi,mnP,na->iaP", *ops).numpy(), ref, rtol=1e-12, atol=1e-12)
