"""trnblas on a NeuronCore: each kernel on hardware against the torch path.

Marked ``neuron``: skipped (with the reason) wherever
``trnsci.nki.has_neuron_device()`` is False, which is every machine this
project is developed on today. On a trn1/trn2 instance with the Neuron SDK
these are the tests that say the kernels validated in the emulator also
hold on silicon. ``TRNSCI_REQUIRE_NKI=1`` is set so a silent fallback
cannot pass.
"""

import numpy as np
import pytest
import torch

import trnblas
import trnsci
from trnsci import nki

pytestmark = pytest.mark.neuron


@pytest.fixture
def hardware(monkeypatch):
    monkeypatch.setenv("TRNSCI_REQUIRE_NKI", "1")
    with trnsci.use_backend("nki"), nki.capture() as runs:
        yield runs


def _both(fn):
    got = fn()
    with trnsci.use_backend("torch"):
        want = fn()
    return got, want


@pytest.mark.parametrize("m,n,k", [(200, 300, 700), (1024, 1024, 1024), (130, 513, 129)])
def test_gemm_on_hardware(hardware, m, n, k):
    g = torch.Generator().manual_seed(m + n + k)
    A, B = torch.randn(m, k, generator=g), torch.randn(k, n, generator=g)
    got, want = _both(lambda: trnblas.gemm(1.0, A, B))
    assert [r.backend for r in hardware] == ["nki"]
    # fp32 inputs on the Tensor Engine: fp32 accumulation, k terms
    torch.testing.assert_close(got, want, rtol=0, atol=2e-6 * k * float(want.abs().max()))


def test_syrk_batched_trsm_mp2_on_hardware(hardware):
    g = torch.Generator().manual_seed(0)
    A = torch.randn(300, 200, generator=g)
    got, want = _both(lambda: trnblas.syrk(1.0, A))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)
    X, Y = torch.randn(4, 70, 90, generator=g), torch.randn(4, 90, 50, generator=g)
    got, want = _both(lambda: trnblas.batched_gemm(1.0, X, Y))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)
    T = torch.eye(300) * 4 + torch.randn(300, 300, generator=g).triu() * 0.1
    Bm = torch.randn(300, 20, generator=g)
    got, want = _both(lambda: trnblas.trsm(1.0, T, Bm))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    Bq = torch.randn(6, 40, 90, generator=g) * 0.1
    eo, ev = -1 - torch.rand(6, generator=g), 0.5 + torch.rand(40, generator=g)
    got, want = _both(lambda: trnblas.mp2_energy(Bq, eo, ev))
    assert abs(float(got) - float(want)) <= 1e-6 * abs(float(want))
    assert {r.backend for r in hardware} == {"nki"} and len(hardware) == 5
    assert np.isfinite(float(got))
