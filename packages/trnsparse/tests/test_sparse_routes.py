"""trnsparse's measured host routes for A @ x (sparsetools or torch's CSR product), against scipy.sparse."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import trnsparse
from trnsci import routes
from trnsparse import _host


@pytest.mark.parametrize("route", ["torch_csr", "sparsetools"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_each_route_matches_scipy(route, dtype, monkeypatch):
    S = sp.random(300, 257, density=0.03, format="csr", random_state=4, dtype=np.float64)
    A = trnsparse.from_scipy(S).to(dtype)
    X = torch.rand(257, 33, dtype=dtype)
    x = torch.rand(257, dtype=dtype)
    used = []
    for name in ("_torch_csr", "_sparsetools_spmv"):
        inner = getattr(_host, name)
        monkeypatch.setattr(_host, name, lambda *a, _i=inner, _n=name: used.append(_n) or _i(*a))
    runner = _host.spmv_runner  # the plain product's first call builds and runs the runner it settles
    monkeypatch.setattr(_host, "spmv_runner", lambda *a: used.append(
        "_torch_csr" if _host._spmv_route(*a) == "torch_csr" else "_sparsetools_spmv") or runner(*a))
    Sd = S.astype(np.float32 if dtype == torch.float32 else np.float64)
    tol = 1e-5 if dtype == torch.float32 else 1e-12  # sums of ~8 products of [0, 1) values, relative
    with routes.force(route), warnings.catch_warnings():
        warnings.simplefilter("error")  # torch's "CSR is beta" notice must not reach the caller
        Y = trnsparse.spmm(A, X, alpha=2.0)
        y = trnsparse.spmv(A, x)
    ref, refv = 2.0 * (Sd @ X.numpy()), Sd @ x.numpy()
    assert np.abs(Y.numpy() - ref).max() <= tol * np.abs(ref).max()
    assert np.abs(y.numpy() - refv).max() <= tol * np.abs(refv).max()
    want = "_torch_csr" if route == "torch_csr" else "_sparsetools_spmv"
    assert used == [want, want]
