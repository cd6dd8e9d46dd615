"""Which backend runs a trnblas call, what the lowerings receive, and plans that say so."""

from __future__ import annotations

import contextlib

import pytest
import torch

import trnblas
import trnsci
from trnblas import level3 as L
from trnsci import dispatch

NAN = float("nan")


def test_ops_are_registered_with_their_thresholds():
    reg = dispatch.registry()
    assert reg["trnblas.gemm"].metric == "flops" and reg["trnblas.gemm"].default == 2 * 512**3
    assert reg["trnblas.batched_gemm"].default == 2 * 256**3
    assert reg["trnblas.syrk"].default == 512**3
    assert reg["trnblas.trsm"].default == 512**3
    assert {L.GEMM.name, L.BATCHED_GEMM.name, L.SYRK.name, L.TRSM.name} <= set(reg)


def test_torch_backend_decides_torch():
    A = torch.ones(64, 64)
    with trnsci.use_backend("torch"):
        p = trnblas.plan_gemm(A, A)
    assert p.backend == "torch" and "torch" in p.reason
    assert p.flops == 2 * 64**3 and p.dtype == torch.float32
    with trnblas.use_backend("pytorch"):
        assert trnblas.plan_gemm(A, A).backend == "torch"


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128, torch.float16])  # complex64: a real GEMM
def test_simulator_routes_unsupported_dtypes_to_torch_with_a_reason(dtype):
    A = torch.ones(8, 8, dtype=dtype)
    with trnsci.use_backend("simulator"):
        p = trnblas.plan_gemm(A, A)
        assert p.backend == "torch"
        assert str(dtype).replace("torch.", "") in p.reason and "float32" in p.reason
        with trnsci.nki.capture() as runs:
            R = trnblas.gemm(1.0, A, A)
        assert runs == []  # no kernel ran; nothing was downcast
        assert R.dtype == dtype


def test_simulator_float32_uses_the_kernel_when_one_is_registered():
    A = torch.ones(8, 8)
    assert L.GEMM.has_kernel  # trnblas._nki registered it on import
    with trnsci.use_backend("simulator"):
        assert trnblas.plan_gemm(A, A).backend == "simulator"
        with L.GEMM.override("nki", None):  # without a kernel the same call plans onto torch, and says so
            p = trnblas.plan_gemm(A, A)
    assert p.backend == "torch" and "no NKI kernel" in p.reason


def test_auto_decides_by_device_and_threshold():
    with trnsci.use_backend("auto"):
        p = trnblas.plan_gemm(torch.ones(4, 4), torch.ones(4, 4))
    assert p.backend == "torch"  # 128 flops: below the threshold where a NeuronCore exists
    if trnsci.nki.has_neuron_device():
        assert "below threshold" in p.reason
    else:
        assert "no NeuronCore" in p.reason


def test_require_nki_turns_a_silent_fallback_into_an_error(monkeypatch):
    monkeypatch.setenv("TRNSCI_REQUIRE_NKI", "1")
    A = torch.ones(4, 4, dtype=torch.float64)
    with trnsci.use_backend("simulator"), pytest.raises(dispatch.NkiRequiredError, match="float64"):
        trnblas.gemm(1.0, A, A)


def test_plan_report_and_other_planners():
    A = torch.ones(6, 5, dtype=torch.float64)
    with trnsci.use_backend("torch"):
        p = trnblas.plan_gemm(A, A, transA="C")  # real "C" is "T"
        text = str(p)
        assert "trnblas.gemm" in text and "op(A) 5x6 @ op(B) 6x5 -> 5x5" in text and "transA='T'" in text
        assert "backend: torch" in text and "reason:" in text
        assert trnblas.plan_gemm(torch.ones(3, 5, 6, dtype=torch.float64), A).op == "trnblas.batched_gemm"
        assert trnblas.plan("syrk", A, trans=True).flops == 5 * 5 * 6
        assert trnblas.plan("trnblas.trsm", torch.ones(3, 3), torch.ones(3, 2), side="L").flops == 9 * 2
        assert trnblas.plan_batched_gemm(torch.ones(2, 3, 4), torch.ones(2, 4, 5)).flops == 2 * 2 * 3 * 4 * 5


@pytest.fixture
def override():
    """``override(op, fn)``: swap the op's NKI lowering for this test (public hook ``Op.override``)."""
    with contextlib.ExitStack() as stack:
        yield lambda op, fn: stack.enter_context(op.override("nki", fn))


class Spy:
    """A stand-in NKI lowering that records its arguments and returns a marker."""

    def __init__(self, result):
        self.calls = []
        self.result = result

    def __call__(self, *args):
        self.calls.append(args)
        return self.result(*args)


def test_gemm_lowering_receives_canonical_arguments(override):
    spy = Spy(lambda alpha, A, B, beta, C, tA, tB: torch.full((A.shape[1], B.shape[1]), 7.0))
    override(L.GEMM, spy)
    A, B = torch.ones(3, 4), torch.ones(3, 2)
    with trnsci.use_backend("simulator"):
        R = trnblas.gemm(2, A, B, 0.0, torch.full((4, 2), NAN), transA="c")
        assert torch.equal(R, torch.full((4, 2), 7.0))
        (alpha, A_, B_, beta, C_, tA, tB), = spy.calls
        assert (alpha, beta, C_, tA, tB) == (2, 0.0, None, "T", "N")  # beta == 0: C withheld
        assert A_ is A and B_ is B  # untransposed, uncopied
        trnblas.gemm(1.0, A.double(), B.double(), transA=True)
        assert len(spy.calls) == 1  # float64 stays on torch
        trnblas.gemm(0.0, A, B, transA=True)
        trnblas.gemm(1.0, torch.ones(3, 0), torch.ones(0, 2))
        assert len(spy.calls) == 1  # quick returns never reach a lowering


def test_batched_syrk_trsm_lowerings_receive_canonical_arguments(override):
    bspy = Spy(lambda alpha, A, B, beta, C, tA, tB: torch.zeros(A.shape[0], A.shape[1], B.shape[2]))
    sspy = Spy(lambda alpha, A, beta, C, trans, uplo, full: torch.zeros(A.shape[1], A.shape[1]))
    tspy = Spy(lambda alpha, A, B, side, uplo, trans, diag: torch.zeros_like(B))
    override(L.BATCHED_GEMM, bspy)
    override(L.SYRK, sspy)
    override(L.TRSM, tspy)
    with trnsci.use_backend("simulator"):
        C = torch.ones(2, 3, 5)
        trnblas.gemm(1.0, torch.ones(2, 3, 4), torch.ones(4, 5), 0.5, C)
        alpha, A3, B3, beta, C3, tA, tB = bspy.calls[0]
        assert A3.shape == (2, 3, 4) and B3.shape == (2, 4, 5) and C3 is not None and beta == 0.5
        trnblas.syrk(1.0, torch.ones(4, 3), trans="t", uplo="lower")
        assert sspy.calls[0][2:] == (0.0, None, "T", "L", True)  # fill=None without C: the whole matrix
        trnblas.trsm(1.0, torch.eye(3), torch.ones(3, 2), side="left", uplo="lower", trans="C", diag="unit")
        assert tspy.calls[0][3:] == ("L", "L", "T", "U")


def test_syrk_beta_zero_restores_other_triangle_whatever_the_lowering(override):
    override(L.SYRK, lambda alpha, A, beta, C, trans, uplo, full: torch.ones(3, 3).triu())
    C = torch.full((3, 3), 5.0)
    with trnsci.use_backend("simulator"):
        R = trnblas.syrk(1.0, torch.ones(3, 2), 0.0, C)
    assert torch.equal(R, torch.ones(3, 3).triu() + torch.full((3, 3), 5.0).tril(-1))


def test_failing_kernel_falls_back_to_torch_with_a_warning(override):
    def broken(*args):
        raise RuntimeError("trnblas test: deliberately broken gemm kernel")

    override(L.GEMM, broken)
    A = torch.arange(6.0).reshape(2, 3)
    with trnsci.use_backend("simulator"), pytest.warns(dispatch.NkiFallbackWarning, match="deliberately broken"):
        R = trnblas.gemm(1.0, A, A, transB=True)
    assert torch.equal(R, A @ A.T)
