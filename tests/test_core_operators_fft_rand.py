"""trnfft's and trnrand's operations as torch operators: opcheck, fake shapes, autograd, torch.compile.

References are independent: NumPy/SciPy transforms (numpy.fft, scipy.signal.stft), explicit DFT
matrices for the adjoints, torch.autograd.gradcheck's finite differences, Random123's published
known-answer vectors for the block functions, and the eager public functions (whose values the
library's own suites check against NumPy/SciPy) for the draws' bit-identity.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trnfft
import trnrand
from trnsci import dispatch, operators
from trnsci.testing import kernel_ran

torch._dynamo = pytest.importorskip("torch._dynamo")
scipy_signal = pytest.importorskip("scipy.signal")

F64, C128 = torch.float64, torch.complex128


def _g(seed=0):
    return torch.Generator().manual_seed(seed)


def _op(name):
    return dispatch.ops()[name]


# ------------------------------------------------------------------ every trnfft / trnrand Op is an operator

def test_every_fft_and_rand_op_is_a_torch_operator_in_its_namespace():
    ops = {n: o for n, o in dispatch.ops().items() if n.split(".")[0] in ("trnfft", "trnrand")}
    assert len(ops) >= 30
    missing = [n for n, o in ops.items() if o.operator is None]
    assert missing == []
    for name, op in ops.items():
        lib, nm = name.split(".")
        assert op.operator is getattr(getattr(torch.ops, lib), nm).default
    assert {"trnfft", "trnrand"} <= set(operators.namespaces())


def test_random_draws_are_declared_not_differentiable():
    rand = [o for n, o in dispatch.ops().items() if n.startswith("trnrand.")]
    assert rand and all(not o.differentiable for o in rand)
    assert all(o.differentiable for n, o in dispatch.ops().items() if n.startswith("trnfft."))
    table = operators.autograd_table()
    assert "| `torch.ops.trnrand.uniform` | none: not differentiable" in table


# ------------------------------------------------------------------ opcheck

def _key_args(name, *lowering_args):
    """The operator's arguments for a lowering call (the generator's words cross as a key tensor)."""
    op = _op(name)
    return op._to_operator(*lowering_args) if op._to_operator is not None else lowering_args


def _opcheck_cases():
    x = torch.randn(2, 100, generator=_g(1), dtype=F64)
    w = torch.hann_window(32, dtype=F64)
    S = torch.stft(x, 32, 8, 32, w, True, "reflect", False, True, return_complex=True)
    a = [torch.randn(3, 5, generator=_g(2 + i), dtype=F64) for i in range(4)]
    m = [torch.randn(4, 6, generator=_g(10), dtype=F64), torch.randn(4, 6, generator=_g(11), dtype=F64),
         torch.randn(6, 3, generator=_g(12), dtype=F64), torch.randn(6, 3, generator=_g(13), dtype=F64)]
    cpu = torch.device("cpu")
    seed, sub, base = 2**64 - 5, 3, 2**65 + 17  # beyond int64: crosses as key words
    probs = torch.tensor([[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]], dtype=F64)
    cdf = torch.cumsum(torch.tensor([0.1, 0.6, 0.3], dtype=F64), 0)
    f32 = torch.float32
    k = lambda *rest: (seed, sub, base, 5, 40, *rest)  # noqa: E731  first sample 5, 40 samples
    cases = [
        ("stft", "trnfft.stft", (x, 32, 8, 32, w, True, "reflect", False, True)),
        ("stft_complex_nowindow", "trnfft.stft", (x.to(C128), 16, 5, 12, None, False, "reflect", True, False)),
        ("istft", "trnfft.istft", (S, 32, 8, 32, w, True, False, True, None, False)),
        ("istft_length", "trnfft.istft", (S, 32, 8, 32, w, True, True, True, 90, False)),
        ("complex_mul", "trnfft.complex_mul", tuple(a)),
        ("complex_matmul", "trnfft.complex_matmul", tuple(m)),
        ("complex_matmul_real_b", "trnfft.complex_matmul", (m[0], m[1], m[2], None)),
        ("uniform", "trnrand.uniform", k(-1.0, 2.0, f32, cpu)),
        ("uniform64", "trnrand.uniform", k(0.0, 1.0, F64, cpu)),
        ("normal", "trnrand.normal", k(1.0, 2.0, f32, cpu)),
        ("lognormal", "trnrand.lognormal", k(0.0, 0.5, F64, cpu)),
        ("exponential", "trnrand.exponential", k(2.0, f32, cpu)),
        ("bernoulli", "trnrand.bernoulli", k(0.3, torch.int64, cpu)),
        ("randint", "trnrand.randint", k(2**63 - 2**32, 2**63, torch.int64, cpu)),  # high past int64
        ("geometric", "trnrand.geometric", k(0.25, F64, cpu)),
        ("truncated_normal", "trnrand.truncated_normal", k(0.0, 1.0, -0.5, 2.0, f32, cpu)),
        ("gamma", "trnrand.gamma", k(2.5, 1.5, F64, cpu)),
        ("beta", "trnrand.beta", k(2.0, 3.0, f32, cpu)),
        ("student_t", "trnrand.student_t", k(4.0, F64, cpu)),
        ("poisson", "trnrand.poisson", k(30.0, torch.int64, cpu)),
        ("binomial", "trnrand.binomial", k(100, 0.4, torch.int64, cpu)),
        ("categorical", "trnrand.categorical", k(cdf, cpu)),
        ("randperm", "trnrand.randperm", (seed, sub, base, 33, torch.int64, cpu)),
        ("multinomial", "trnrand.multinomial", (seed, sub, base, probs, 2, False, cpu)),
        ("multinomial_repl", "trnrand.multinomial", (seed, sub, base, probs, 7, True, cpu)),
        ("latin_hypercube", "trnrand.latin_hypercube", (seed, sub, base, 9, 3, None, F64)),
        ("threefry_stream_uniform", "trnrand.threefry_stream_uniform", (seed, sub, 2**64 + 3, 21, cpu)),
        ("threefry_stream_normal", "trnrand.threefry_stream_normal", (seed, sub, 7, 21, cpu)),
        ("philox4x32", "trnrand.philox4x32", (torch.arange(12).reshape(3, 4), torch.tensor([[5, 6]] * 3), 10)),
        ("threefry4x32", "trnrand.threefry4x32", (torch.arange(12).reshape(3, 4), torch.arange(12).reshape(3, 4),
                                                  20)),
    ]
    # the quasi-random operators, with the arguments the public functions build
    import trnrand.quasi as Q

    calls = []
    with Q.SOBOL.override("torch", lambda *a: calls.append(("trnrand.sobol", a)) or Q._sobol_torch(*a)), \
            Q.HALTON.override("torch", lambda *a: calls.append(("trnrand.halton", a)) or Q._halton_torch(*a)):
        trnrand.sobol(8, 3, scramble=True, seed=1)
        trnrand.halton(8, 3, scramble=True, seed=1)
    cases += [(n.split(".")[1], n, a) for n, a in calls]
    return cases


OPCHECK = _opcheck_cases()


@pytest.mark.parametrize("name,op_name,args", OPCHECK, ids=[c[0] for c in OPCHECK])
def test_opcheck_fft_rand(name, op_name, args):
    tests = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_static")
    torch.library.opcheck(_op(op_name).operator, _key_args(op_name, *args), test_utils=tests)


@pytest.mark.parametrize("name,op_name,args", [c for c in OPCHECK if c[1].startswith("trnrand.")],
                         ids=[c[0] for c in OPCHECK if c[1].startswith("trnrand.")])
def test_rand_operator_equals_its_torch_lowering_bit_for_bit(name, op_name, args):
    op = _op(op_name)
    got = op.operator(*_key_args(op_name, *args))
    want = op.lowering_for("torch").fn(*args)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert torch.equal(got, want)


def test_block_functions_through_the_operators_match_random123_vectors():
    # Random123 kat_vectors: philox4x32-10 and threefry4x32-20 of a zero counter and key
    zero4 = torch.zeros(1, 4, dtype=torch.int64)
    p = torch.ops.trnrand.philox4x32(zero4, torch.zeros(1, 2, dtype=torch.int64), 10)
    assert [hex(v) for v in p[0].tolist()] == ["0x6627e8d5", "0xe169c58d", "0xbc57ac4c", "0x9b00dbd8"]
    t = torch.ops.trnrand.threefry4x32(zero4, zero4, 20)
    assert [hex(v) for v in t[0].tolist()] == ["0x9c6ca96a", "0xe17eae66", "0xfc10ecd4", "0x5256a7d8"]


# ------------------------------------------------------------------ meta tensors: shapes without data

def test_fft_operators_on_meta_give_shapes():
    x = torch.empty(2, 100, device="meta")
    S = torch.ops.trnfft.stft(x, 32, 8, 32, torch.empty(32, device="meta"), True, "reflect", False, True)
    assert S.device.type == "meta" and S.shape == (2, 17, 13) and S.dtype == torch.complex64
    S2 = torch.ops.trnfft.stft(x.double(), 16, 5, 16, None, False, "reflect", False, False)
    assert S2.shape == (2, 16, 1 + (100 - 16) // 5) and S2.dtype == C128
    y = torch.ops.trnfft.istft(torch.empty(3, 17, 13, device="meta", dtype=torch.complex64), 32, 8, 32, None, True,
                               False, True, None, False)
    assert y.shape == (3, 32 + 8 * 12 - 32) and y.dtype == torch.float32
    y = torch.ops.trnfft.istft(torch.empty(17, 13, device="meta", dtype=C128), 32, 8, 32, None, True, False, False,
                               77, True)
    assert y.shape == (77,) and y.dtype == C128
    a = torch.empty(4, 1, device="meta")
    yr, yi = torch.ops.trnfft.complex_mul(a, a, torch.empty(1, 5, device="meta"), torch.empty(5, device="meta"))
    assert yr.shape == yi.shape == (4, 5) and yr.device.type == "meta"
    yr, yi = torch.ops.trnfft.complex_matmul(torch.empty(4, 6, device="meta"), None, torch.empty(6, 3, device="meta"),
                                             torch.empty(6, 3, device="meta"))
    assert yr.shape == (4, 3)


def test_rand_operators_on_meta_give_shapes():
    meta = torch.device("meta")
    for name, args, shape, dtype in [
        ("trnrand.uniform", (1, 0, 0, 0, 11, 0.0, 1.0, torch.float32, meta), (11,), torch.float32),
        ("trnrand.normal", (1, 0, 0, 0, 11, 0.0, 1.0, F64, meta), (11,), F64),
        ("trnrand.randint", (1, 0, 0, 0, 6, 2**63 - 5, 2**63, torch.int32, meta), (6,), torch.int32),
        ("trnrand.randperm", (1, 0, 0, 9, torch.int64, meta), (9,), torch.int64),
        ("trnrand.threefry_stream_normal", (1, 0, 0, 5, meta), (5,), torch.float32),
    ]:
        out = _op(name).operator_call(*args)
        assert out.device.type == "meta" and out.shape == shape and out.dtype == dtype, name
    out = torch.ops.trnrand.multinomial(torch.empty(9, dtype=torch.int64, device="meta"),
                                        torch.empty(3, 4, device="meta"), 2, False, meta)
    assert out.shape == (3, 2) and out.dtype == torch.int64


def test_stft_under_fake_tensors():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        S = trnfft.stft(torch.empty(3, 200), 64, hop_length=16)
    assert S.shape == (3, 33, 13) and S.dtype == torch.complex64


# ------------------------------------------------------------------ values against NumPy / SciPy

def test_stft_operator_matches_scipy_signal_stft():
    x = torch.randn(3, 300, generator=_g(20), dtype=F64)
    n_fft, hop = 64, 16
    got = torch.ops.trnfft.stft(x, n_fft, hop, n_fft, torch.hann_window(n_fft, dtype=F64), False, "reflect", False,
                                True)
    win = scipy_signal.get_window("hann", n_fft)  # periodic (fftbins=True)
    _, _, Z = scipy_signal.stft(x.numpy(), window=win, nperseg=n_fft, noverlap=n_fft - hop, boundary=None,
                                padded=False, detrend=False)
    # SciPy scales the spectrum by 1 / sum(window); torch.stft's convention is unscaled
    np.testing.assert_allclose(got.numpy(), Z * win.sum(), rtol=1e-10, atol=1e-10)


def test_complex_operators_match_numpy():
    a = [torch.randn(3, 4, generator=_g(30 + i), dtype=F64) for i in range(4)]
    yr, yi = torch.ops.trnfft.complex_mul(*a)
    want = (a[0].numpy() + 1j * a[1].numpy()) * (a[2].numpy() + 1j * a[3].numpy())
    np.testing.assert_allclose(yr.numpy() + 1j * yi.numpy(), want, rtol=1e-13, atol=1e-13)
    b = [torch.randn(4, 5, generator=_g(40 + i), dtype=F64) for i in range(2)]
    yr, yi = torch.ops.trnfft.complex_matmul(a[0], a[1], b[0], b[1])
    want = (a[0].numpy() + 1j * a[1].numpy()) @ (b[0].numpy() + 1j * b[1].numpy())
    np.testing.assert_allclose(yr.numpy() + 1j * yi.numpy(), want, rtol=1e-12, atol=1e-12)


def _dft(n):
    j = np.arange(n)
    return np.exp(-2j * np.pi * np.outer(j, j) / n)


def _fwd_scale(norm, n):
    return {"backward": 1.0, "ortho": n ** -0.5, "forward": 1.0 / n}[norm]


@pytest.mark.parametrize("n,m,norm", [(16, 16, "backward"), (15, 15, "ortho"), (20, 16, "forward"),
                                      (12, 16, "backward"), (9, 7, "ortho")])
def test_rfft_and_ihfft_vjp_is_the_numpy_adjoint(n, m, norm):
    # y = s P F R x (R: resize to n, P: keep n//2+1 bins); for real x the vjp is Re(R^T F^H P^T g)
    x = torch.randn(2, m, generator=_g(50), dtype=F64, requires_grad=True)
    h = n // 2 + 1
    g = torch.randn(2, h, generator=_g(51), dtype=F64) + 1j * torch.randn(2, h, generator=_g(52), dtype=F64)
    s = _fwd_scale(norm, n)
    Fh = _dft(n)[:h]  # (h, n)
    R = np.eye(n, m)  # pad / truncate
    want = np.real(g.numpy() @ np.conj(s * Fh @ R))
    # the operator (its declared backward: one irfft) and the public function (torch's derivative here)
    for y in (torch.ops.trnfft.rfft(x, n, 1, norm, "fast"), trnfft.rfft(x, n=n, norm=norm)):
        np.testing.assert_allclose(y.detach().numpy(), np.fft.rfft(x.detach().numpy(), n=n, norm=norm),
                                   atol=1e-12)
        (gx,) = torch.autograd.grad(y, x, g)
        np.testing.assert_allclose(gx.resolve_conj().numpy(), want, rtol=1e-10, atol=1e-10)
    # ihfft(x) = conj(rfft(x)) with the inverse's scale: y = conj(s' P F R x), vjp Re(R^T F^T P^T g) s'
    s2 = {"backward": 1.0 / n, "ortho": n ** -0.5, "forward": 1.0}[norm]
    for y in (torch.ops.trnfft.ihfft(x, n, 1, norm, "fast"), trnfft.ihfft(x, n=n, norm=norm)):
        np.testing.assert_allclose(y.detach().resolve_conj().numpy(),
                                   np.fft.ihfft(x.detach().numpy(), n=n, norm=norm), atol=1e-12)
        (gx,) = torch.autograd.grad(y, x, g)
        np.testing.assert_allclose(gx.resolve_conj().numpy(), np.real(g.numpy() @ (s2 * Fh @ R)),
                                   rtol=1e-10, atol=1e-10)


def _c2r_matrix(n, m):
    """The real-linear map (Re X, Im X) of m stored bins -> irfft(X, n) (norm backward), as NumPy defines it:
    built column by column from numpy.fft.irfft itself."""
    cols = []
    for part in (1.0, 1j):
        for k in range(m):
            e = np.zeros(m, dtype=complex)
            e[k] = part
            cols.append(np.fft.irfft(e, n=n))
    return np.stack(cols, 1)  # (n, 2m)


@pytest.mark.parametrize("n,m,norm", [(16, 9, "backward"), (15, 8, "ortho"), (16, 12, "forward"),
                                      (20, 9, "backward"), (7, 4, "forward")])
def test_irfft_and_hfft_vjp_is_the_numpy_adjoint(n, m, norm):
    X = torch.randn(2, m, generator=_g(60), dtype=F64) + 1j * torch.randn(2, m, generator=_g(61), dtype=F64)
    X.requires_grad_()
    g = torch.randn(2, n, generator=_g(62), dtype=F64)
    M = _c2r_matrix(n, m) * {"backward": 1.0, "ortho": n ** 0.5, "forward": float(n)}[norm]
    J = g.numpy() @ M  # d loss / d (Re X, Im X); torch's convention: grad = dRe + i dIm
    # the operator (its declared backward: one rfft) and the public function (torch's derivative here)
    for y in (torch.ops.trnfft.irfft(X, n, 1, norm, "fast"), trnfft.irfft(X, n=n, norm=norm)):
        np.testing.assert_allclose(y.detach().numpy(), np.fft.irfft(X.detach().numpy(), n=n, norm=norm),
                                   atol=1e-12)
        (gX,) = torch.autograd.grad(y, X, g)
        np.testing.assert_allclose(gX.resolve_conj().numpy(), J[:, :m] + 1j * J[:, m:], rtol=1e-10, atol=1e-10)
    # hfft(X) = irfft(conj X) with the forward's scale: d/dIm flips sign
    Mh = _c2r_matrix(n, m) * {"backward": float(n), "ortho": n ** 0.5, "forward": 1.0}[norm]
    J = g.numpy() @ Mh
    for y in (torch.ops.trnfft.hfft(X, n, 1, norm, "fast"), trnfft.hfft(X, n=n, norm=norm)):
        np.testing.assert_allclose(y.detach().numpy(), np.fft.hfft(X.detach().numpy(), n=n, norm=norm),
                                   atol=1e-10)
        (gX,) = torch.autograd.grad(y, X, g)
        np.testing.assert_allclose(gX.resolve_conj().numpy(), J[:, :m] - 1j * J[:, m:], rtol=1e-10, atol=1e-10)


# ------------------------------------------------------------------ gradcheck (float64, torch path)

def _grad_cases():
    x = torch.randn(2, 40, generator=_g(70), dtype=F64)
    w = torch.rand(16, generator=_g(71), dtype=F64) + 0.5
    S = torch.stft(x, 16, 4, 16, torch.hann_window(16, dtype=F64), True, "reflect", False, True, return_complex=True)
    return [
        ("rfft_pad", lambda x: trnfft.rfft(x, n=48, norm="ortho"), (x,)),
        ("rfft_trunc_odd", lambda x: trnfft.rfft(x, n=31), (x,)),
        ("irfft_even", lambda X: trnfft.irfft(X, n=16, norm="forward"), (S[0, :, :5].T.contiguous(),)),
        ("irfft_odd_pad", lambda X: trnfft.irfft(X, n=21), (S[0, :, :5].T.contiguous(),)),
        ("hfft", lambda X: trnfft.hfft(X, n=14, norm="ortho"), (S[1, :, :3].T.contiguous(),)),
        ("ihfft", lambda x: trnfft.ihfft(x, n=33), (x,)),
        ("stft_signal_window", lambda x, w: trnfft.stft(x, 16, hop_length=4, window=w), (x, w)),
        ("stft_normalized_constant", lambda x: trnfft.stft(x, 16, hop_length=5, win_length=12, pad_mode="constant",
                                                             normalized=True), (x,)),
        ("istft", lambda S, w: trnfft.istft(S, 16, hop_length=4, window=w, length=40),
         (S, torch.hann_window(16, dtype=F64) + 0.1)),
        ("complex_mul", lambda a, b, c, d: (trnfft.ComplexTensor(a, b) * trnfft.ComplexTensor(c, d)).real
         + (trnfft.ComplexTensor(a, b) * trnfft.ComplexTensor(c, d)).imag, tuple(x[:, :5] * (i + 1)
                                                                                 for i in range(4))),
        ("complex_matmul", lambda a, b, c, d: trnfft.complex_matmul(trnfft.ComplexTensor(a, b),
                                                                    trnfft.ComplexTensor(c, d)).imag,
         (x[:, :3], x[:, 3:6], x[:, 20:26].reshape(3, 4), x[:, 26:32].reshape(3, 4))),
    ]


GRAD = _grad_cases()


@pytest.mark.parametrize("kind,n,m,norm", [("rfft", 16, 16, "backward"), ("rfft", 15, 19, "ortho"),
                                           ("ihfft", 20, 13, "forward"), ("irfft", 16, 9, "forward"),
                                           ("irfft", 15, 6, "ortho"), ("hfft", 14, 10, "backward")])
def test_gradcheck_declared_backward_of_the_real_transforms(kind, n, m, norm):
    # through the operator: its declared backward (the adjoint transform as a forward Op call)
    complex_in = kind in ("irfft", "hfft")
    shape = (2, m)
    x = torch.randn(*shape, generator=_g(75), dtype=F64)
    if complex_in:
        x = x + 1j * torch.randn(*shape, generator=_g(76), dtype=F64)
    op = getattr(torch.ops.trnfft, kind)
    assert _op(f"trnfft.{kind}")._backward is not None
    assert torch.autograd.gradcheck(lambda x: op(x, n, 1, norm, "fast"), (x.requires_grad_(),))


@pytest.mark.parametrize("name,fn,args", GRAD, ids=[c[0] for c in GRAD])
def test_gradcheck_fft_float64(name, fn, args):
    args = tuple(a.detach().clone().requires_grad_() for a in args)
    assert torch.autograd.gradcheck(fn, args)


@pytest.mark.parametrize("name,fn,args", GRAD[6:], ids=[c[0] for c in GRAD[6:]])
def test_gradients_flow_through_the_operator_under_the_simulator(name, fn, args):
    # a kernel backend with inputs that require grad takes the operator: the gradient equals the torch path's
    want_args = tuple(a.detach().clone().requires_grad_() for a in args)
    want = torch.autograd.grad(fn(*want_args).abs().sum(), want_args)
    got_args = tuple(a.detach().clone().requires_grad_() for a in args)
    from trnsci.backend import use_backend

    with use_backend("simulator"):
        got = torch.autograd.grad(fn(*got_args).abs().sum(), got_args)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("center,pad_mode,normalized,onesided,wl", [(True, "reflect", False, True, 16),
                                                                      (False, "reflect", True, True, 12),
                                                                      (True, "constant", False, False, 16)])
def test_gradcheck_declared_backward_of_stft(center, pad_mode, normalized, onesided, wl):
    # through the operator: its declared backward (an irfft/ifft Op call, then the framing's vjp)
    x = torch.randn(2, 40, generator=_g(77), dtype=F64, requires_grad=True)
    w = (torch.rand(wl, generator=_g(78), dtype=F64) + 0.5).requires_grad_()
    assert _op("trnfft.stft")._backward is not None
    assert torch.autograd.gradcheck(
        lambda x, w: torch.ops.trnfft.stft(x, 16, 4, wl, w, center, pad_mode, normalized, onesided), (x, w))


def test_rand_outputs_carry_no_gradient_through_the_operator():
    probs = torch.tensor([[0.2, 0.8], [0.5, 0.5]], dtype=F64, requires_grad=True)
    out = torch.ops.trnrand.multinomial(*_key_args("trnrand.multinomial", 1, 0, 0, probs, 3, True,
                                                   torch.device("cpu")))
    assert not out.requires_grad and out.shape == (2, 3)


# ------------------------------------------------------------------ simulator: FFT kernels in the backward

def _sim_cases():
    x = torch.randn(3, 64, generator=_g(80), dtype=F64)
    X = torch.fft.rfft(torch.randn(3, 64, generator=_g(81), dtype=F64))
    c = torch.randn(3, 33, generator=_g(82), dtype=F64)
    return [
        ("rfft", lambda x: (trnfft.rfft(x) * (c + 1j)).real.square().sum(), x),
        ("rfft_ortho_pad", lambda x: trnfft.rfft(x[:, :50], n=64, norm="ortho").abs().sum(), x),
        ("irfft", lambda X: (trnfft.irfft(X, n=64) * c.repeat(1, 2)[:, :64]).square().sum(), X),
        ("irfft_forward", lambda X: trnfft.irfft(X, n=64, norm="forward").abs().sum(), X),
        ("stft", lambda x: trnfft.stft(x, 32, hop_length=8, window=(c[0, :32] + 2).to(x.dtype)).abs().sum(), x),
        ("stft_twosided", lambda x: trnfft.stft(x, 16, hop_length=4, onesided=False, center=False).real.sum(), x),
        ("hfft", lambda X: (trnfft.hfft(X, n=64) * c.repeat(1, 2)[:, :64]).sum(), X),
        ("ihfft", lambda x: (trnfft.ihfft(x) * (c - 2j)).imag.square().sum(), x),
    ]


SIM = _sim_cases()


@pytest.mark.parametrize("name,fn,arg", SIM, ids=[c[0] for c in SIM])
def test_simulator_float32_fft_gradients_equal_the_torch_path_with_kernels_in_backward(name, fn, arg):
    want_in = arg.clone().requires_grad_()
    fn(want_in).backward()
    got_in = (arg.to(torch.complex64) if arg.is_complex() else arg.float()).requires_grad_()
    with kernel_ran() as runs:
        loss = fn(got_in)
        forward = len(runs)
        loss.backward()
    assert forward >= 1 and len(runs) > forward, [r.kernel for r in runs]  # kernels ran in the backward too
    w = want_in.grad
    scale = float(w.abs().max()) + 1.0
    # the float32 forward's tolerance (trnfft's kernel path: ~1e-6 relative per transform), gradient scale
    torch.testing.assert_close(got_in.grad.to(w.dtype), w, rtol=2e-4, atol=2e-4 * scale)


# ------------------------------------------------------------------ torch.compile programs

class SpectralConv(torch.nn.Module):
    """rfft -> per-frequency complex weights -> irfft (an FNO-style layer)."""

    def __init__(self, n, seed=0):
        super().__init__()
        g = _g(seed)
        h = n // 2 + 1
        self.wr = torch.nn.Parameter(torch.randn(h, generator=g, dtype=F64))
        self.wi = torch.nn.Parameter(torch.randn(h, generator=g, dtype=F64))
        self.n = n

    def forward(self, x):
        return trnfft.irfft(trnfft.rfft(x) * torch.complex(self.wr, self.wi), n=self.n)


def _no_breaks(fn, *args):
    torch._dynamo.reset()
    explained = torch._dynamo.explain(fn)(*args)
    assert explained.graph_break_count == 0, explained.break_reasons
    return explained


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_compiled_spectral_conv_layer_with_backward(backend):
    layer = SpectralConv(32)
    x = torch.randn(4, 32, generator=_g(90), dtype=F64, requires_grad=True)

    def step(x):
        return torch.tanh(layer(x)).square().sum()

    explained = _no_breaks(step, x)
    code = "".join(g.code for g in explained.graphs)
    assert "torch.ops.trnfft.rfft" in code and "torch.ops.trnfft.irfft" in code
    torch._dynamo.reset()
    compiled = torch.compile(step, fullgraph=True, backend=backend)
    got = torch.autograd.grad(compiled(x), (x, layer.wr, layer.wi))
    # reference: NumPy's transforms, differentiated by torch's own torch.fft (independent of trnfft)
    ref = lambda x: torch.tanh(torch.fft.irfft(torch.fft.rfft(x) * torch.complex(layer.wr, layer.wi),  # noqa: E731
                                               n=32)).square().sum()
    np.testing.assert_allclose(layer(x).detach().numpy(),
                               np.fft.irfft(np.fft.rfft(x.detach().numpy()) * (layer.wr + 1j * layer.wi)
                                            .detach().numpy(), n=32), atol=1e-12)
    want = torch.autograd.grad(ref(x), (x, layer.wr, layer.wi))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_compiled_stft_magnitude(backend):
    x = torch.randn(2, 400, generator=_g(91), dtype=F64)

    def mag(x):
        return trnfft.stft(x, 64, hop_length=16, center=False).abs()

    _no_breaks(mag, x)
    torch._dynamo.reset()
    got = torch.compile(mag, fullgraph=True, backend=backend)(x)
    win = scipy_signal.get_window("hann", 64)
    _, _, Z = scipy_signal.stft(x.numpy(), window=win, nperseg=64, noverlap=48, boundary=None, padded=False,
                                detrend=False)
    np.testing.assert_allclose(got.numpy(), np.abs(Z) * win.sum(), rtol=1e-10, atol=1e-10)


def _dropout(x, g, p=0.25):
    keep = trnrand.uniform(*x.shape, generator=g) >= p
    return x * keep / (1 - p)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_compiled_dropout_mask_from_a_seeded_generator_is_bit_identical(backend):
    x = torch.randn(8, 33, generator=_g(92))
    _no_breaks(_dropout, x, trnrand.Generator(seed=7))
    torch._dynamo.reset()
    compiled = torch.compile(_dropout, fullgraph=True, backend=backend)
    ge, gc = trnrand.Generator(seed=7), trnrand.Generator(seed=7)
    for _ in range(3):  # the generator advances outside the operator, as in eager
        want = _dropout(x, ge)
        got = compiled(x, gc)
        assert torch.equal(got, want)
        assert gc.position() == ge.position()
    # the mask itself is the public draw's, from the same stream position
    u = trnrand.uniform(8, 33, generator=trnrand.Generator(seed=7))
    assert torch.equal(_dropout(x, trnrand.Generator(seed=7)), x * (u >= 0.25) / 0.75)


def _draws(p, P, g):
    return (trnrand.categorical(p, 64, generator=g), trnrand.multinomial(P, 2, generator=g),
            trnrand.multinomial(P, 9, True, generator=g))


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_compiled_categorical_and_multinomial_are_bit_identical_without_graph_breaks(backend):
    # the checks of the probabilities' values are graph assertions, not host reads: no graph break
    p = torch.tensor([0.1, 0.0, 0.5, 0.4], dtype=F64)
    P = torch.tensor([[0.1, 0.0, 0.5, 0.4], [1.0, 2.0, 3.0, 0.0]])
    _no_breaks(_draws, p, P, trnrand.Generator(seed=3))
    torch._dynamo.reset()
    compiled = torch.compile(_draws, fullgraph=True, backend=backend)
    ge, gc = trnrand.Generator(seed=3), trnrand.Generator(seed=3)
    for _ in range(2):
        want, got = _draws(p, P, ge), compiled(p, P, gc)
        for w, c in zip(want, got):
            assert torch.equal(w, c)
        assert gc.position() == ge.position()
    cat, without, withrep = got
    assert set(cat.tolist()) <= {0, 2, 3}  # never a category of probability 0
    assert bool((without[0] != 1).all()) and bool((without[1] != 3).all())
    assert bool((without[:, 0] != without[:, 1]).all())  # without replacement: distinct
    assert without.shape == (2, 2) and withrep.shape == (2, 9)
    # bad values: eager's ValueError before any draw; compiled, the graph's assertion with the same
    # message, and the generator has not moved
    bad = p.clone()
    bad[1] = float("nan")
    with pytest.raises(ValueError, match="categorical: probs must be finite and >= 0"):
        trnrand.categorical(bad, 3, generator=ge)
    at = gc.position()
    with pytest.raises(RuntimeError, match="categorical: probs must be finite and >= 0"):
        compiled(bad, P, gc)
    assert gc.position() == at == ge.position()
    with pytest.raises(ValueError, match="multinomial: num_samples=4 exceeds the 3 categories with p > 0"):
        trnrand.multinomial(P, 4, generator=ge)
    torch._dynamo.reset()
    with pytest.raises(RuntimeError, match="multinomial: num_samples=4 exceeds the categories with p > 0"):
        torch.compile(lambda P, g: trnrand.multinomial(P, 4, generator=g), fullgraph=True, backend=backend)(P, gc)
    with pytest.raises(RuntimeError, match="each row of probs must have a positive sum"):
        compiled(p, torch.zeros(2, 4), gc)
