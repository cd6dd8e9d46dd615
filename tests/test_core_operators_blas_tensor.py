"""Every trnblas and trntensor operation as a torch operator: opcheck, fake/meta shapes, autograd on the
torch path and under "simulator", and torch.compile programs without graph breaks.

References are independent: ``torch.autograd.gradcheck``'s finite differences for the derivatives,
NumPy (and opt_einsum where installed) for the compiled programs' values, and the torch path's float64
gradients for the simulator's float32 ones.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import trnblas
import trntensor
from trnsci import dispatch, operators
from trnsci.testing import kernel_ran

torch._dynamo = pytest.importorskip("torch._dynamo")

F64, C128 = torch.float64, torch.complex128
O = torch.ops


def _r(*shape, dtype=F64, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g, dtype=F64)
    if dtype.is_complex:
        x = x + 1j * torch.randn(*shape, generator=g, dtype=F64)
    return x.to(dtype)


def _tri(n, dtype=F64, seed=0):
    """An upper triangle with a dominant diagonal (well conditioned)."""
    return torch.triu(_r(n, n, dtype=dtype, seed=seed)) + n * torch.eye(n, dtype=dtype)


LIBS = ("trnblas", "trntensor")


def test_every_blas_and_tensor_op_is_a_torch_operator_in_its_namespace():
    ops = {n: o for n, o in dispatch.ops().items() if n.split(".")[0] in LIBS}
    assert len(ops) >= 39  # 28 in trnblas and 11 in trntensor at the time of writing
    missing = [n for n, o in ops.items() if o.operator is None]
    assert missing == []
    table = operators.operators()
    for name in ops:
        ns, op = name.split(".", 1)
        assert table[name] is getattr(getattr(torch.ops, ns), op.replace(".", "_")).default


# ------------------------------------------------------------------ opcheck: schema, fake, autograd, AOT

# ops whose result is data-dependent (an index, a rank, an iteration count): unbacked sizes, which
# need the dynamic-shape AOT test
_DYNAMIC = {"iamax", "iamin", "cp_decompose", "tt_decompose"}


def _cases():
    A, B = _r(5, 4, seed=1), _r(4, 3, seed=2)
    x5, x4, x6 = _r(5, seed=3), _r(4, seed=4), _r(6, seed=5)
    S = _r(6, 6, seed=6)
    T = _tri(6, seed=7)
    eo = -torch.linspace(1.0, 2.0, 3, dtype=F64)
    ev = torch.linspace(1.0, 2.5, 4, dtype=F64)
    return [
        ("axpy", O.trnblas.axpy, (1.5, x5, _r(5, seed=8))),
        ("axpy_complex", O.trnblas.axpy, (1.5 - 2j, x5.to(C128), _r(5, dtype=C128, seed=9))),
        ("scal", O.trnblas.scal, (2.0, x5)),
        ("copy", O.trnblas.copy, (x5,)),
        ("swap", O.trnblas.swap, (x5, _r(5, seed=10))),
        ("rot", O.trnblas.rot, (x5, _r(5, seed=11), 0.6, 0.8)),
        ("dot", O.trnblas.dot, (x5, _r(5, seed=12))),
        ("dotc", O.trnblas.dotc, (_r(5, dtype=C128, seed=13), _r(5, dtype=C128, seed=14))),
        ("nrm2", O.trnblas.nrm2, (_r(7, dtype=C128, seed=15),)),
        ("asum", O.trnblas.asum, (x5,)),
        ("iamax", O.trnblas.iamax, (x5,)),
        ("iamin", O.trnblas.iamin, (x5,)),
        ("gemv", O.trnblas.gemv, (1.5, A, x4, 0.5, x5, "N")),
        ("gemv_T", O.trnblas.gemv, (1.5, A, x5, 0.0, None, "T")),
        ("symv", O.trnblas.symv, (1.5, S, x6, 0.5, x6, "U", False)),
        ("trmv", O.trnblas.trmv, (S, x6, "L", "T", "N")),
        ("trsv", O.trnblas.trsv, (T, x6, "U", "N", "N")),
        ("ger", O.trnblas.ger, (1.5, x5, x4, A, False)),
        ("syr", O.trnblas.syr, (1.5, x6, S, False)),
        ("syr2", O.trnblas.syr2, (1.5, x6, _r(6, seed=16), S, False)),
        ("gemm", O.trnblas.gemm, (1.5, A, B, 0.5, _r(5, 3, seed=43), "N", "N")),
        ("batched_gemm", O.trnblas.batched_gemm, (1.0, _r(2, 4, 5, seed=44), _r(2, 4, 3, seed=45), 0.0, None, "T",
                                                  "N")),
        ("gemm_fp64", O.trnblas.gemm_fp64, (1.5, A, _r(3, 4, seed=46), 0.0, None, "N", "T")),
        ("gemm_ex", O.trnblas.gemm_ex, (1.0, A.float(), B.float(), 0.0, None, "N", "N", F64)),
        ("geam", O.trnblas.geam, (1.5, A, 0.5, A, "N", "N")),
        ("dgmm", O.trnblas.dgmm, (A, x5, "L")),
        ("syrk", O.trnblas.syrk, (1.5, A, 0.5, _r(5, 5, seed=17), "N", "U", False)),
        ("syr2k", O.trnblas.syr2k, (1.5, A, _r(5, 4, seed=18), 0.5, _r(5, 5, seed=19), "N", "U", False)),
        ("trsm", O.trnblas.trsm, (1.5, T, _r(6, 3, seed=20), "L", "U", "N", "N")),
        ("mp2_energy", O.trnblas.mp2_energy, (_r(3, 4, 5, seed=21), eo, ev, 512.0)),
        ("permute", O.trntensor.permute, (_r(2, 3, 4, seed=22), [2, 0, 1], 2.0)),
        ("elementwise", O.trntensor.elementwise, (_r(2, 3, seed=23), _r(1, 3, seed=24), None, [1.0, 2.0, 1.0],
                                                  ["exp", "identity", "identity", "mul", "add"], [2, 3], F64)),
        ("reduce", O.trntensor.reduce, (_r(2, 3, 4, seed=25), [1], "sum", 2.0, 0.5, _r(2, 4, seed=26))),
        ("einsum", O.trntensor.einsum, ("ij,jk->ki", "auto", [A, B], 1.0, 0.0, None, F64, F64, "fast", None)),
        ("ao_to_mo_transform", O.trntensor.ao_to_mo_transform, (_r(4, 4, 3, seed=27), _r(4, 2, seed=28),
                                                                _r(4, 3, seed=29))),
        ("cp_reconstruct", O.trntensor.cp_reconstruct, ([_r(3, 2, seed=30), _r(4, 2, seed=31)], _r(2, seed=32))),
        ("tucker_reconstruct", O.trntensor.tucker_reconstruct, (_r(2, 2, seed=33), [_r(3, 2, seed=34),
                                                                                    _r(4, 2, seed=35)])),
        ("tt_reconstruct", O.trntensor.tt_reconstruct, ([_r(1, 3, 2, seed=36), _r(2, 4, 1, seed=37)],)),
        ("cp_decompose", O.trntensor.cp_decompose, (_r(3, 4, 5, seed=38), 2, 5, 1e-6, "0", False, None)),
        ("tucker_decompose", O.trntensor.tucker_decompose, (_r(3, 4, 5, seed=39), [2, 2, 2], "hosvd", 5, 1e-8)),
        ("tt_decompose", O.trntensor.tt_decompose, (_r(3, 4, 5, seed=40), None, None)),
    ]


CASES = _cases()


@pytest.mark.parametrize("name,op,args", CASES, ids=[c[0] for c in CASES])
def test_opcheck_blas_tensor(name, op, args):
    aot = "test_aot_dispatch_dynamic" if name in _DYNAMIC else "test_aot_dispatch_static"
    torch.library.opcheck(op, args, test_utils=("test_schema", "test_autograd_registration", "test_faketensor", aot))


def test_every_blas_tensor_operator_has_an_opcheck_case():
    checked = {c[1] for c in CASES}
    want = {o.operator.overloadpacket for n, o in dispatch.ops().items() if n.split(".")[0] in LIBS}
    assert want <= checked


def _meta(a):
    if isinstance(a, torch.Tensor):
        return a.to("meta")
    if isinstance(a, list):
        return [_meta(t) for t in a]
    return a


def _leaves(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _leaves(o)]
    return [out]


@pytest.mark.parametrize("name,op,args", [c for c in CASES if c[0] not in _DYNAMIC],
                         ids=[c[0] for c in CASES if c[0] not in _DYNAMIC])
def test_meta_tensors_give_the_real_shapes(name, op, args):
    real = _leaves(op(*args))
    meta = _leaves(op(*[_meta(a) for a in args]))
    assert len(meta) == len(real)
    for m, r in zip(meta, real):
        assert m.device.type == "meta"
        assert (tuple(m.shape), m.dtype) == (tuple(r.shape), r.dtype)


def test_data_dependent_results_are_unbacked_under_fake_tensors():
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    x, T = _r(9, seed=41), _r(3, 4, 5, seed=42)
    with FakeTensorMode(shape_env=ShapeEnv()) as mode:
        i = O.trnblas.iamax(mode.from_tensor(x))
        cores = O.trntensor.tt_decompose(mode.from_tensor(T), 2, None)
    assert isinstance(i, torch.SymInt)
    assert [c.shape[1] for c in cores] == [3, 4, 5] and cores[0].shape[0] == 1 and cores[-1].shape[2] == 1


# ------------------------------------------------------------------ gradcheck in float64 through the operators

def _grad_cases():
    T, Tc = _tri(6, seed=50), _tri(6, dtype=C128, seed=51)
    eo = -torch.linspace(1.0, 2.0, 3, dtype=F64)
    ev = torch.linspace(1.0, 2.5, 4, dtype=F64)
    c = lambda *s, seed: _r(*s, dtype=C128, seed=seed)  # noqa: E731
    return [
        ("axpy", lambda x, y: O.trnblas.axpy(1.5, x, y), (_r(5, seed=1), _r(5, seed=2))),
        ("axpy_complex", lambda x, y: O.trnblas.axpy(1.5 - 2j, x, y), (c(5, seed=3), c(5, seed=4))),
        ("scal_complex", lambda x: O.trnblas.scal(0.5 + 1j, x), (c(5, seed=5),)),
        ("copy", O.trnblas.copy, (_r(5, seed=6),)),
        ("swap", O.trnblas.swap, (_r(5, seed=7), _r(5, seed=8))),
        ("rot", lambda x, y: O.trnblas.rot(x, y, 0.6, 0.8), (_r(5, seed=9), _r(5, seed=10))),
        ("rot_complex", lambda x, y: O.trnblas.rot(x, y, 0.6, 0.8j), (c(5, seed=11), c(5, seed=12))),
        ("dot", O.trnblas.dot, (_r(5, seed=13), _r(5, seed=14))),
        ("dotu_complex", O.trnblas.dot, (c(5, seed=15), c(5, seed=16))),
        ("dotc_complex", O.trnblas.dotc, (c(5, seed=17), c(5, seed=18))),
        ("nrm2", O.trnblas.nrm2, (_r(5, seed=19),)),
        ("nrm2_complex", O.trnblas.nrm2, (c(5, seed=20),)),
        ("asum", O.trnblas.asum, (_r(5, seed=21),)),
        ("asum_complex", O.trnblas.asum, (c(5, seed=22),)),
        ("gemv", lambda A, x, y: O.trnblas.gemv(1.5, A, x, 0.5, y, "N"), (_r(5, 4, seed=23), _r(4, seed=24),
                                                                          _r(5, seed=25))),
        ("gemv_T", lambda A, x: O.trnblas.gemv(1.5, A, x, 0.0, None, "T"), (_r(5, 4, seed=26), _r(5, seed=27))),
        ("gemv_T_complex", lambda A, x: O.trnblas.gemv(1.5j, A, x, 0.0, None, "T"), (c(5, 4, seed=28),
                                                                                     c(5, seed=29))),
        ("gemv_C_complex", lambda A, x, y: O.trnblas.gemv(1.5j, A, x, 2 - 1j, y, "C"),
         (c(5, 4, seed=30), c(5, seed=31), c(4, seed=32))),
        ("symv", lambda A, x: O.trnblas.symv(1.5, A, x, 0.0, None, "U", False), (_r(6, 6, seed=33), _r(6, seed=34))),
        ("trmv", lambda A, x: O.trnblas.trmv(A, x, "L", "T", "N"), (_r(6, 6, seed=35), _r(6, seed=36))),
        ("trmv_N_unit", lambda A, x: O.trnblas.trmv(A, x, "U", "N", "U"), (_r(6, 6, seed=98), _r(6, seed=99))),
        ("trmv_T_complex", lambda A, x: O.trnblas.trmv(A, x, "U", "T", "N"), (c(6, 6, seed=100), c(6, seed=101))),
        ("trmv_C_complex", lambda A, x: O.trnblas.trmv(A, x, "L", "C", "U"), (c(6, 6, seed=102), c(6, seed=103))),
        ("symv_lower_beta", lambda A, x, y: O.trnblas.symv(1.5, A, x, 0.5, y, "L", False),
         (_r(6, 6, seed=104), _r(6, seed=105), _r(6, seed=106))),
        ("symv_complex_symmetric", lambda A, x: O.trnblas.symv(1.5j, A, x, 0.0, None, "U", False),
         (c(6, 6, seed=107), c(6, seed=108))),
        ("hemv_complex", lambda A, x, y: O.trnblas.symv(1.5j, A, x, 2 - 1j, y, "L", True),
         (c(6, 6, seed=109), c(6, seed=110), c(6, seed=111))),
        ("trsv", lambda A, x: O.trnblas.trsv(A, x, "U", "N", "N"), (T, _r(6, seed=37))),
        ("trsv_T_unit", lambda A, x: O.trnblas.trsv(A, x, "U", "T", "U"), (T, _r(6, seed=38))),
        ("trsv_T_complex", lambda A, x: O.trnblas.trsv(A, x, "U", "T", "N"), (Tc, c(6, seed=39))),
        ("trsv_C_complex", lambda A, x: O.trnblas.trsv(A, x, "U", "C", "N"), (Tc, c(6, seed=40))),
        ("ger", lambda x, y, A: O.trnblas.ger(1.5, x, y, A, False), (_r(5, seed=41), _r(4, seed=42),
                                                                     _r(5, 4, seed=43))),
        ("geru_complex", lambda x, y, A: O.trnblas.ger(1.5j, x, y, A, False), (c(5, seed=44), c(4, seed=45),
                                                                               c(5, 4, seed=46))),
        ("gerc_complex", lambda x, y, A: O.trnblas.ger(1.5j, x, y, A, True), (c(5, seed=47), c(4, seed=48),
                                                                              c(5, 4, seed=49))),
        ("syr", lambda x, A: O.trnblas.syr(1.5, x, A, False), (_r(6, seed=50), _r(6, 6, seed=51))),
        ("syr2", lambda x, y, A: O.trnblas.syr2(1.5, x, y, A, False), (_r(6, seed=52), _r(6, seed=53),
                                                                       _r(6, 6, seed=54))),
        ("syr_complex", lambda x: O.trnblas.syr(1.5j, x, None, False), (c(6, seed=112),)),
        ("her_complex", lambda x, A: O.trnblas.syr(1.5, x, A, True), (c(6, seed=113), c(6, 6, seed=114))),
        ("syr2_complex", lambda x, y: O.trnblas.syr2(1.5j, x, y, None, False), (c(6, seed=115), c(6, seed=116))),
        ("her2_complex", lambda x, y, A: O.trnblas.syr2(1.5 - 0.5j, x, y, A, True), (c(6, seed=117), c(6, seed=118),
                                                                                     c(6, 6, seed=119))),
        ("gemm_ex", lambda A, B: O.trnblas.gemm_ex(1.0, A, B, 0.0, None, "N", "T", F64), (_r(5, 4, seed=55),
                                                                                         _r(3, 4, seed=56))),
        ("geam", lambda A, B: O.trnblas.geam(1.5, A, 0.5, B, "T", "N"), (_r(4, 5, seed=57), _r(5, 4, seed=58))),
        ("geam_complex", lambda A, B: O.trnblas.geam(1.5j, A, 0.5 - 1j, B, "C", "T"), (c(4, 5, seed=59),
                                                                                       c(4, 5, seed=60))),
        ("dgmm_left", lambda A, x: O.trnblas.dgmm(A, x, "L"), (_r(5, 4, seed=61), _r(5, seed=62))),
        ("dgmm_right", lambda A, x: O.trnblas.dgmm(A, x, "R"), (_r(5, 4, seed=63), _r(4, seed=64))),
        ("syrk", lambda A, C: O.trnblas.syrk(1.5, A, 0.5, C, "N", "U", False), (_r(5, 4, seed=65),
                                                                                _r(5, 5, seed=66))),
        ("syrk_T_full", lambda A, C: O.trnblas.syrk(1.5, A, 0.5, C, "T", "L", True), (_r(4, 5, seed=67),
                                                                                      _r(5, 5, seed=68))),
        ("syrk_complex", lambda A: O.trnblas.syrk(1.5j, A, 0.0, None, "N", "L", True), (c(5, 4, seed=69),)),
        ("syr2k", lambda A, B: O.trnblas.syr2k(1.5, A, B, 0.0, None, "N", "U", True), (_r(5, 4, seed=70),
                                                                                       _r(5, 4, seed=71))),
        ("syr2k_T_C", lambda A, B, C: O.trnblas.syr2k(1.5, A, B, 0.5, C, "T", "L", False),
         (_r(4, 5, seed=120), _r(4, 5, seed=121), _r(5, 5, seed=122))),
        ("syr2k_full_C", lambda A, B, C: O.trnblas.syr2k(-0.5, A, B, 2.0, C, "N", "U", True),
         (_r(5, 4, seed=123), _r(5, 4, seed=124), _r(5, 5, seed=125))),
        ("trsm", lambda A, B: O.trnblas.trsm(1.5, A, B, "L", "U", "N", "N"), (T, _r(6, 3, seed=72))),
        ("trsm_right_T_unit", lambda A, B: O.trnblas.trsm(1.5, A, B, "R", "U", "T", "U"), (T, _r(3, 6, seed=73))),
        ("trsm_right_C_complex", lambda A, B: O.trnblas.trsm(1.5j, A, B, "R", "U", "C", "N"),
         (Tc, c(3, 6, seed=74))),
        ("trsm_T_complex", lambda A, B: O.trnblas.trsm(1.5j, A, B, "L", "U", "T", "N"), (Tc, c(6, 3, seed=75))),
        ("mp2_energy", lambda B, eo, ev: O.trnblas.mp2_energy(B, eo, ev, 512.0), (_r(3, 4, 5, seed=76), eo, ev)),
        ("permute", lambda A: O.trntensor.permute(A, [2, 0, 1], 2.0), (_r(2, 3, 4, seed=77),)),
        ("elementwise", lambda A, B: O.trntensor.elementwise(A, B, None, [1.0, 2.0, 1.0],
                                                             ["exp", "identity", "identity", "mul", "add"], [2, 3],
                                                             F64), (_r(2, 3, seed=78), _r(1, 3, seed=79))),
        ("reduce_sum", lambda A, C: O.trntensor.reduce(A, [1], "sum", 2.0, 0.5, C), (_r(2, 3, 4, seed=80),
                                                                                     _r(2, 4, seed=81))),
        ("reduce_max", lambda A: O.trntensor.reduce(A, [0, 2], "max", 2.0, 0.0, None), (_r(2, 3, 4, seed=82),)),
        ("einsum", lambda A, B: O.trntensor.einsum("ij,jk->ki", "auto", [A, B], 1.0, 0.0, None, F64, F64, "fast",
                                                   None), (_r(5, 4, seed=83), _r(4, 3, seed=84))),
        ("ao_to_mo_transform", O.trntensor.ao_to_mo_transform, (_r(4, 4, 3, seed=85), _r(4, 2, seed=86),
                                                                 _r(4, 3, seed=87))),
        ("cp_reconstruct", lambda a, b, w: O.trntensor.cp_reconstruct([a, b], w), (_r(3, 2, seed=88),
                                                                                   _r(4, 2, seed=89),
                                                                                   _r(2, seed=90))),
        ("tucker_reconstruct", lambda G, a, b: O.trntensor.tucker_reconstruct(G, [a, b]),
         (_r(2, 2, seed=91), _r(3, 2, seed=92), _r(4, 2, seed=93))),
        ("tt_reconstruct", lambda a, b: O.trntensor.tt_reconstruct([a, b]), (_r(1, 3, 2, seed=94),
                                                                             _r(2, 4, 1, seed=95))),
    ]


GRAD_CASES = _grad_cases()


@pytest.mark.parametrize("name,fn,args", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_gradcheck_float64_through_the_blas_tensor_operators(name, fn, args):
    args = tuple(a.clone().requires_grad_() for a in args)
    assert torch.autograd.gradcheck(fn, args)


def test_mp2_energy_gradient_on_the_torch_path_by_finite_differences():
    # the public function on the eager torch path (not the operator): the dense differentiable form
    B = (0.3 * _r(3, 4, 5, seed=97)).requires_grad_()
    eo = (-torch.linspace(1.0, 2.0, 3, dtype=F64)).requires_grad_()
    ev = torch.linspace(1.0, 2.5, 4, dtype=F64).requires_grad_()
    assert torch.autograd.gradcheck(trnblas.mp2_energy, (B, eo, ev))


def test_decompositions_are_marked_not_differentiable():
    T = _r(3, 4, 5, seed=96).requires_grad_()
    weights = O.trntensor.cp_decompose(T, 2, 5, 1e-6, "0", False, None)[1]
    with pytest.raises(RuntimeError, match="trntensor.cp_decompose is not differentiable"):
        weights.sum().backward()
    core, _ = O.trntensor.tucker_decompose(T, [2, 2, 2], "hosvd", 5, 1e-8)
    with pytest.raises(RuntimeError, match="trntensor.tucker_decompose is not differentiable"):
        core.sum().backward()
    table = operators.autograd_table()
    assert "| `torch.ops.trntensor.tt_decompose` | none:" in table
    assert "| `torch.ops.trnblas.iamax` | none: an index |" in table


# ----------------------------------------- autograd under "simulator": kernels in the forward and the backward

def _sim_cases():
    T = torch.triu(_r(40, 40, seed=100)) + 40 * torch.eye(40, dtype=F64)
    sq = lambda t: t.square().sum()  # noqa: E731
    return [
        # (name, loss of public calls, inputs, kernels expected in the backward)
        ("axpy", lambda x, y: sq(trnblas.axpy(1.5, x, y)), (_r(300, seed=1), _r(300, seed=2)), True),
        ("scal", lambda x: sq(trnblas.scal(-0.5, x)), (_r(300, seed=3),), True),
        ("rot", lambda x, y: sum(sq(t) for t in trnblas.rot(x, y, 0.6, 0.8)), (_r(300, seed=4), _r(300, seed=5)),
         True),
        ("dot", lambda x, y: trnblas.dot(x, y) ** 2, (_r(300, seed=6), _r(300, seed=7)), False),
        ("nrm2", trnblas.nrm2, (_r(300, seed=8),), False),
        ("asum", trnblas.asum, (_r(300, seed=9),), False),
        ("gemv", lambda A, x, y: sq(trnblas.gemv(1.5, A, x, 0.5, y)), (_r(70, 40, seed=10), _r(40, seed=11),
                                                                       _r(70, seed=12)), True),
        ("gemv_T", lambda A, x: sq(trnblas.gemv(1.5, A, x, trans=True)), (_r(70, 40, seed=13), _r(70, seed=14)),
         True),
        ("ger", lambda x, y, A: sq(trnblas.ger(1.5, x, y, A)), (_r(70, seed=15), _r(40, seed=16),
                                                                _r(70, 40, seed=17)), True),
        ("trsv", lambda A, x: sq(trnblas.trsv(A, x)), (T, _r(40, seed=18)), True),
        ("trsm", lambda A, B: sq(trnblas.trsm(1.5, A, B)), (T, _r(40, 30, seed=19)), True),
        ("syrk", lambda A: sq(trnblas.syrk(1.5, A)), (_r(50, 30, seed=20),), True),
        ("geam", lambda A, B: sq(trnblas.geam(1.5, A, 0.5, B)), (_r(70, 40, seed=21), _r(70, 40, seed=22)), True),
        ("dgmm", lambda A, x: sq(trnblas.dgmm(A, x)), (_r(70, 40, seed=23), _r(70, seed=24)), True),
        ("copy", lambda x: sq(trnblas.copy(x)), (_r(300, seed=40),), False),
        ("swap", lambda x, y: (lambda a, b: (a * b.sin()).sum())(*trnblas.swap(x, y)),
         (_r(300, seed=41), _r(300, seed=42)), False),
        ("symv", lambda A, x: sq(trnblas.symv(1.5, A, x)), (_r(40, 40, seed=43), _r(40, seed=44)), True),
        ("trmv", lambda A, x: sq(trnblas.trmv(A, x)), (_r(40, 40, seed=45), _r(40, seed=46)), True),
        ("syr", lambda x, A: sq(trnblas.syr(1.5, x, A)), (_r(40, seed=47), _r(40, 40, seed=48)), True),
        ("syr2", lambda x, y, A: sq(trnblas.syr2(1.5, x, y, A)), (_r(40, seed=49), _r(40, seed=50),
                                                                  _r(40, 40, seed=51)), True),
        ("syr2k", lambda A, B: sq(trnblas.syr2k(1.5, A, B)), (_r(50, 30, seed=52), _r(50, 30, seed=53)), True),
        ("symm", lambda A, B: sq(trnblas.symm(1.5, A, B)), (_r(40, 40, seed=54), _r(40, 30, seed=55)), True),
        ("trmm", lambda A, B: sq(trnblas.trmm(1.5, A, B)), (_r(40, 40, seed=56), _r(40, 30, seed=57)), True),
        ("mp2_energy", lambda B: trnblas.mp2_energy(B, -torch.linspace(2, 3, 6, dtype=B.dtype),
                                                    torch.linspace(2, 3, 8, dtype=B.dtype)),
         (0.1 * _r(6, 8, 20, seed=58),), False),
        ("permute", lambda A: sq(trntensor.permute(A, (2, 0, 1), 2.0)), (_r(8, 20, 30, seed=25),), True),
        ("reduce", lambda A: sq(trntensor.reduce(A, axes=(1,), alpha=2.0)), (_r(8, 20, 30, seed=26),), True),
        ("elementwise", lambda A, B: sq(trntensor.elementwise(A, B, op_a="tanh", op_ab="mul")),
         (_r(20, 30, seed=27), _r(20, 30, seed=28)), False),
        ("einsum_chain", lambda A, B, C: sq(trntensor.einsum("ij,jk,kl->il", A, B, C)),
         (_r(30, 20, seed=29), _r(20, 25, seed=30), _r(25, 10, seed=31)), True),
        ("ao_to_mo", lambda e, a, b: sq(trntensor.ao_to_mo_transform(e, a, b)),
         (_r(12, 12, 20, seed=32), _r(12, 4, seed=33), _r(12, 6, seed=34)), True),
        ("cp_reconstruct", lambda a, b, w: sq(trntensor.cp_reconstruct([a, b], w)),
         (_r(30, 4, seed=35), _r(40, 4, seed=36), _r(4, seed=37)), True),
        ("tucker_reconstruct", lambda G, a, b: sq(trntensor.tucker_reconstruct(G, [a, b])),
         (_r(4, 5, seed=38), _r(30, 4, seed=39), _r(40, 5, seed=59)), True),
        ("tt_reconstruct", lambda a, b: sq(trntensor.tt_reconstruct([a, b])),
         (_r(1, 30, 4, seed=60), _r(4, 40, 1, seed=61)), True),
    ]


SIM_CASES = _sim_cases()


@pytest.mark.parametrize("name,fn,args,in_backward", SIM_CASES, ids=[c[0] for c in SIM_CASES])
def test_simulator_float32_gradients_equal_the_torch_path_blas_tensor(name, fn, args, in_backward):
    want = [a.clone().requires_grad_() for a in args]
    fn(*want).backward()  # the torch path, float64
    got = [a.float().requires_grad_() for a in args]
    with kernel_ran() as runs:
        loss = fn(*got)
        forward = len(runs)
        loss.backward()
    assert forward >= 1
    if in_backward:  # a declared backward of forward ops (or a vjp through kernel-running calls)
        assert len(runs) > forward
    for g, w in zip(got, want):
        # the float32 forward tolerance, scaled by the gradient's magnitude
        scale = float(w.grad.abs().max()) + 1.0
        torch.testing.assert_close(g.grad.double(), w.grad, rtol=2e-4, atol=2e-4 * scale)


# ------------------------------------------------------------------ torch.compile: one program per library

def _gelu(x):
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))


def _blas_program(A, W, b, x, y):
    # a GEMM + bias + activation, then level-2/level-1 calls on its result
    h = torch.nn.functional.gelu(trnblas.gemm(1.0, A, W) + b)
    v = trnblas.gemv(1.0, h, x)
    z = trnblas.axpy(0.5, v, y)
    return trnblas.scal(2.0, z) / trnblas.nrm2(z) + trnblas.dot(v, y)


def _blas_reference(A, W, b, x, y):
    h = _gelu(A @ W + b)
    v = h @ x
    z = 0.5 * v + y
    return 2.0 * z / np.linalg.norm(z) + v @ y


def _tensor_program(A, B, C, D):
    # an einsum chain, then the tensor operations on its result
    X = trntensor.einsum("ij,jk,kl->il", A, B, C)
    Y = trntensor.permute(X, (1, 0), 2.0)
    Z = trntensor.elementwise(Y, D, op_a="tanh", op_ab="mul")
    return trntensor.reduce(Z, axes=(1,))


def _tensor_reference(A, B, C, D):
    try:
        import opt_einsum

        X = opt_einsum.contract("ij,jk,kl->il", A, B, C)
    except ImportError:
        X = np.einsum("ij,jk,kl->il", A, B, C, optimize=True)
    return (np.tanh(2.0 * X.T) * D).sum(axis=1)


def _programs():
    A, W, b = _r(6, 5, seed=60), _r(5, 3, seed=61), _r(3, seed=62)
    x, y = _r(3, seed=63), _r(6, seed=64)
    E = [_r(5, 6, seed=65), _r(6, 7, seed=66), _r(7, 4, seed=67)]
    D = _r(4, 5, seed=68)
    return [("blas", _blas_program, _blas_reference, (A, W, b, x, y),
             ("gemm", "gemv", "axpy", "scal", "nrm2", "dot")),
            ("tensor", _tensor_program, _tensor_reference, (*E, D), ("einsum", "permute", "elementwise", "reduce"))]


PROGRAMS = _programs()


@pytest.mark.parametrize("name,fn,ref,args,ops", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_compile_fullgraph_blas_tensor_program(name, fn, ref, args, ops):
    torch._dynamo.reset()
    want = torch.from_numpy(np.asarray(ref(*(a.numpy() for a in args))))
    explained = torch._dynamo.explain(fn)(*args)
    assert explained.graph_break_count == 0, explained.break_reasons
    code = "".join(g.code for g in explained.graphs)
    lib = "trnblas" if name == "blas" else "trntensor"
    assert all(f"torch.ops.{lib}.{op}" in code for op in ops), code
    for backend in ("eager", "inductor"):
        got = torch.compile(fn, fullgraph=True, backend=backend)(*args)
        # float64 throughout: a few ulps of the result's scale (inductor may reassociate)
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_compiled_blas_tensor_backward_equals_finite_differences(backend):
    # the backward traced by AOT autograd: the declared backwards' op calls on traced tensors
    torch._dynamo.reset()
    (_, blas, _, bargs, _), (_, tensor, _, targs, _) = PROGRAMS

    def f(A, W, b, x, y, E0, E1, E2, D):
        return blas(A, W, b, x, y).sum() + tensor(E0, E1, E2, D).sum()

    args = tuple(a.clone().requires_grad_() for a in (*bargs, *targs))
    compiled = torch.compile(f, fullgraph=True, backend=backend)
    got = torch.autograd.grad(compiled(*args), args)
    # the reference: central finite differences of the eager function, entry by entry (float64)
    for k, (a, g) in enumerate(zip(args, got)):
        fd = torch.zeros_like(a)
        flat, h = fd.view(-1), 1e-6
        for i in range(a.numel()):
            plus = [t.detach().clone() for t in args]
            minus = [t.detach().clone() for t in args]
            plus[k].view(-1)[i] += h
            minus[k].view(-1)[i] -= h
            flat[i] = (f(*plus) - f(*minus)) / (2 * h)
        torch.testing.assert_close(g, fd, rtol=1e-5, atol=1e-6)


def test_compile_iamax_with_captured_scalar_outputs():
    # the index is data: with Dynamo capturing scalar outputs it stays in one graph
    torch._dynamo.reset()
    x = torch.tensor([1.0, -5.0, 3.0, 5.0], dtype=F64)

    def f(x):
        return x * trnblas.iamax(x) + trnblas.iamin(x)

    with torch._dynamo.config.patch(capture_scalar_outputs=True, capture_dynamic_output_shape_ops=True):
        explained = torch._dynamo.explain(f)(x)
        assert explained.graph_break_count == 0, explained.break_reasons
        got = torch.compile(f, fullgraph=True, backend="eager")(x)
    want = x.numpy() * int(np.argmax(np.abs(x.numpy()))) + int(np.argmin(np.abs(x.numpy())))
    torch.testing.assert_close(got, torch.from_numpy(want))


def test_bad_input_inside_compile_names_the_argument_blas_tensor():
    torch._dynamo.reset()

    def mv(A, x):
        return trnblas.gemv(1.0, A, x)

    with pytest.raises(ValueError, match="x must have 4 entries"):
        torch.compile(mv, backend="eager")(torch.ones(3, 4), torch.ones(5))
    with pytest.raises(TypeError, match="x"):
        torch.compile(mv, backend="eager")(torch.ones(3, 4), torch.ones(4, dtype=torch.int64))
