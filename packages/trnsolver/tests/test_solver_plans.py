"""Every trnsolver op with a kernel: its plan says what the call does, kernel or torch.

Includes calls the kernels cannot take (float64, complex, empty, a Cholesky
no larger than one diagonal block). The device paths launch several kernels
per call (one Jacobi sweep per launch; three GEMMs per Newton-Schulz step),
so their plans carry no single-kernel closed form; the per-sweep closed form
is tested in test_solver_kernels.py.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trnsolver
from trnsci.backend import use_backend
from trnsci.dispatch import plan_call
from trnsci.nki import capture
from trnsci.testing import assert_plan_matches_run, check_plan_case, kernel_ops, plan_cases
from trnsolver._nki import factor as nki_factor

pytestmark = pytest.mark.simulator


def _spd(n, dtype=torch.float32):
    X = torch.randn(n, n, generator=torch.Generator().manual_seed(n), dtype=torch.float64)
    return (X @ X.T + n * torch.eye(n, dtype=torch.float64)).to(dtype)


def _sym(n, dtype=torch.float32):
    X = torch.randn(n, n, generator=torch.Generator().manual_seed(n + 1), dtype=torch.float64)
    return (X + X.T).to(dtype)


CASES = {
    "trnsolver.eigh": [
        (trnsolver.eigh, (_sym(7),)),
        (trnsolver.eigvalsh, (_sym(6),)),
        (trnsolver.eigh, (_sym(7, torch.float64),)),                      # dtype the kernel lacks
        (trnsolver.eigh, (_sym(5).to(torch.complex64),)),                 # complex Hermitian: torch
        (trnsolver.eigh, (torch.zeros(0, 0),)),                           # empty
    ],
    "trnsolver.cholesky": [
        (trnsolver.cholesky, (_spd(20),)),                                # n <= CHOL_BLOCK: one tile launch
        (trnsolver.cholesky, (torch.zeros(0, 0),)),                       # empty: torch
        (trnsolver.cholesky, (_spd(140, torch.float64),)),                # float64: torch
    ],
    "trnsolver.lu_factor": [
        (trnsolver.lu_factor, (_sym(9),)),                                # one panel launch
        (trnsolver.lu_factor, (_sym(9, torch.float64),)),                 # float64: torch
    ],
    "trnsolver.lu": [
        (trnsolver.lu, (_sym(6),)),
        (trnsolver.lu, (torch.ones(5, 3),)),                              # rectangular: torch
    ],
    "trnsolver.lu_solve": [
        (trnsolver.lu_solve, (trnsolver.lu_factor(_spd(7)), torch.ones(7, 2))),
        (trnsolver.lu_solve, (trnsolver.lu_factor(_spd(7, torch.float64)), torch.ones(7, dtype=torch.float64))),
    ],
    "trnsolver.solve": [
        (trnsolver.solve, (_spd(5), torch.ones(5))),
        (trnsolver.solve, (_spd(5).to(torch.complex64), torch.ones(5, dtype=torch.complex64))),
    ],
    "trnsolver.inv": [(trnsolver.inv, (_spd(6),)), (trnsolver.inv, (torch.zeros(0, 0),))],
    "trnsolver.slogdet": [(trnsolver.slogdet, (_sym(6),)), (trnsolver.det, (_sym(6),))],
    "trnsolver.cho_solve": [
        (trnsolver.cho_solve, ((_spd(6).tril(), True), torch.ones(6))),
        (trnsolver.cho_solve, ((_spd(6, torch.float64).triu(), False), torch.ones(6, dtype=torch.float64))),
    ],
    "trnsolver.solve_spd": [
        (trnsolver.solve_spd, (_spd(7), torch.ones(7, 2))),
        (trnsolver.solve_spd, (_spd(7), torch.ones(7)), {"iterative_refinement": True}),  # float64 residual
    ],
    "trnsolver.inv_spd": [(trnsolver.inv_spd, (_spd(5),)), (trnsolver.inv_spd, (_spd(5, torch.float64),))],
    "trnsolver.inv_sqrt_spd": [
        (trnsolver.inv_sqrt_spd, (_spd(6),)),                             # Jacobi sweeps: no closed form
        (trnsolver.inv_sqrt_spd, (_spd(6, torch.float64),)),
    ],
    "trnsolver.qr": [
        (trnsolver.qr, (_sym(9),)),
        (trnsolver.qr, (_sym(9)[:, :4],), {"mode": "complete"}),
        (trnsolver.qr, (_sym(5).to(torch.complex64),)),                   # complex: torch
    ],
    "trnsolver.lstsq": [
        (trnsolver.lstsq, (_sym(9)[:, :4], torch.ones(9))),
        (trnsolver.lstsq, (_sym(9)[:4], torch.ones(4))),                  # underdetermined: torch
    ],
    "trnsolver.svd": [
        (trnsolver.svd, (_sym(6),)),                                      # sweeps depend on data: no closed form
        (trnsolver.svd, (_sym(6)[:, :3],), {"full_matrices": True}),      # full U of a tall matrix: torch
    ],
    "trnsolver.pinv": [(trnsolver.pinv, (_sym(5),)), (trnsolver.pinv, (_sym(5, torch.float64),))],
    "trnsolver.cg": [
        (trnsolver.cg, (_spd(6), torch.ones(6)), {"tol": 1e-4}),           # iterations: no closed form
        (trnsolver.cg, (_spd(6), torch.ones(6)), {"M": torch.eye(6)}),    # preconditioned: torch
    ],
    "trnsolver.bicgstab": [
        (trnsolver.bicgstab, (_spd(6), torch.ones(6)), {"tol": 1e-4}),     # iterations: no closed form
        (trnsolver.bicgstab, (_spd(6).double(), torch.ones(6, dtype=torch.float64))),
    ],
    "trnsolver.minres": [
        (trnsolver.minres, (_sym(6) + 20 * torch.eye(6), torch.ones(6)), {"tol": 1e-4}),
        (trnsolver.minres, (_sym(6) + 20 * torch.eye(6), torch.ones(6)), {"M": torch.eye(6)}),  # M: torch
    ],
    "trnsolver.gmres": [
        (trnsolver.gmres, (_spd(6), torch.ones(6)), {"tol": 1e-4}),
        (trnsolver.gmres, (_spd(6), torch.ones(6)), {"M": torch.eye(6)}),   # M: torch
    ],
    "trnsolver.schur": [
        (trnsolver.schur, (_sym(5) + torch.triu(torch.ones(5, 5), 1),)),  # QR steps depend on data
        (trnsolver.schur, (_sym(5),), {"sort": "lhp"}),                  # block swaps: torch
        (trnsolver.schur, (_sym(5),), {"output": "complex"}),            # complex T: torch
        (trnsolver.schur, (_sym(5, torch.float64),)),                     # float64: torch
    ],
    "trnsolver.inv_sqrt_spd_ns": [
        (trnsolver.inv_sqrt_spd_ns, (_spd(9),), {"tol": 1e-4}),
        (trnsolver.inv_sqrt_spd_ns, (_spd(9, torch.float64),)),
    ],
}


def test_every_kernel_op_has_cases():
    assert kernel_ops("trnsolver") == set(CASES)


@pytest.mark.parametrize("backend", ["simulator", "torch"])
@pytest.mark.parametrize("op_name,case", plan_cases(CASES), ids=lambda x: x if isinstance(x, str) else "")
def test_plan_backend_is_what_ran(backend, op_name, case):
    check_plan_case(backend, op_name, case)


def test_unsupported_calls_say_why():
    with use_backend("simulator"):
        assert "float64" in plan_call(trnsolver.eigh, _sym(4, torch.float64)).reason
        assert plan_call(trnsolver.cholesky, _spd(10)).backend == "simulator"  # one tile kernel launch
        assert plan_call(trnsolver.eigh, _sym(4)).backend == "simulator"


def test_blocked_cholesky_plan_matches_run(monkeypatch):
    monkeypatch.setattr(nki_factor, "CHOL_BLOCK", 8)
    A = _spd(20)
    with use_backend("simulator"):
        plan = plan_call(trnsolver.cholesky, A)
        with capture() as runs:
            L = trnsolver.cholesky(A)
    assert plan.backend == "simulator" and runs and all(r.backend == "simulator" for r in runs)
    np.testing.assert_allclose(L.numpy(), np.linalg.cholesky(A.double().numpy()), atol=1e-4 * 8)


TORCH_ONLY = [
    (trnsolver.eigh_generalized, (_sym(5), _spd(5)), "trnsolver.eigh"),  # composed: its eigh step is the Op
]


@pytest.mark.parametrize("fn,args,op", TORCH_ONLY, ids=lambda x: getattr(x, "__name__", ""))
def test_ops_without_kernel_plan_torch_and_say_so(fn, args, op):
    with use_backend("simulator"):
        plan, _, runs = assert_plan_matches_run(fn, *args)
    assert plan.op == op
    if op != "trnsolver.eigh":
        assert plan.backend == "torch" and "no NKI kernel" in plan.reason and not runs
