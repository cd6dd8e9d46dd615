"""The operators' Autograd kernel: one shared autograd.Function (trnsci.operators._Kernel), and torch's
``torch.library.register_autograd`` on a torch without the dispatch-keyset API -- both checked against
torch's own derivatives of the defining formula, each in a fresh process (the choice is made when the
libraries define their operators)."""

import subprocess
import sys

import pytest

_CODE = r'''
import sys, torch
import trnsci.operators as O
O._SHARED = sys.argv[1] == "shared"
import trnblas, trntensor

torch.manual_seed(0)
r = lambda *s: torch.randn(*s, dtype=torch.float64, requires_grad=True)
close = lambda a, b: torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)

# syrk called without its defaulted last argument (full=False): the backward sees all seven inputs
A, C = r(5, 4), r(5, 5)
y = torch.ops.trnblas.syrk(1.5, A, 0.5, C, "N", "U")
ref = torch.triu(1.5 * A @ A.T + 0.5 * C) + torch.tril(C, -1)
close(y, ref)
g = torch.randn(5, 5, dtype=torch.float64)
close(torch.autograd.grad(y, (A, C), g), torch.autograd.grad(ref, (A, C), g))
print(type(y.grad_fn).__name__)

# only C requires grad: A gets none (needs_input_grad reaches the declared backward)
A0 = A.detach()
y = torch.ops.trnblas.syrk(1.5, A0, 0.5, C, "N", "U")
ref = torch.triu(1.5 * A0 @ A0.T + 0.5 * C) + torch.tril(C, -1)
close(torch.autograd.grad(y, C, g)[0], torch.autograd.grad(ref, C, g)[0])

# a Tensor[] input: each entry has its gradient
a, b, w = r(3, 2), r(4, 2), r(2)
y = torch.ops.trntensor.cp_reconstruct([a, b], w)
ref = torch.einsum("ir,jr,r->ij", a, b, w)
close(y, ref)
g = torch.randn(3, 4, dtype=torch.float64)
close(torch.autograd.grad(y, (a, b, w), g), torch.autograd.grad(ref, (a, b, w), g))

# grad mode off: no graph
with torch.no_grad():
    assert torch.ops.trntensor.cp_reconstruct([a, b], w).grad_fn is None
print("ok")
'''


@pytest.mark.parametrize("mode,backward_class", [("shared", "TrnsciOperatorBackward"),
                                                 ("torch", "GeneratedBackwardFor_trnblas_syrk_defaultBackward")])
def test_autograd_kernel_matches_torch_derivatives(mode, backward_class):
    r = subprocess.run([sys.executable, "-c", _CODE, mode], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == [backward_class, "ok"]
