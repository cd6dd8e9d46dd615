"""Shared matrices for the trnsparse tests: dense NumPy references of awkward shapes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

warnings.filterwarnings("ignore", message=".*Sparse.*beta state.*")
warnings.filterwarnings("ignore", message=".*Sparse invariant checks.*")


def dense_case(name: str, dtype=np.float64) -> np.ndarray:
    """A dense matrix with a known sparsity pattern (rows that are empty, ragged shapes...)."""
    rng = np.random.default_rng(sum(map(ord, name)))
    shapes = {"rect": (7, 5), "wide": (3, 9), "square": (10, 10), "one": (1, 1), "empty": (0, 0),
              "norows": (0, 4), "nocols": (4, 0), "zeros": (4, 6), "big": (37, 29)}
    m, n = shapes[name]
    A = rng.standard_normal((m, n))
    if np.dtype(dtype).kind == "c":
        A = A + 1j * rng.standard_normal((m, n))
    keep = rng.random((m, n)) < 0.35
    if m > 2:
        keep[1] = False  # an empty row
    if n > 3:
        keep[:, 2] = False  # an empty column
    if name == "zeros":
        keep[:] = False
    if name == "one":
        keep[:] = True
    return (A * keep).astype(dtype)


CASES = ["rect", "wide", "square", "one", "empty", "norows", "nocols", "zeros", "big"]
DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


def tol(dtype) -> float:
    """Sums of <= 40 products of O(1) numbers: a few hundred ulps covers reordering."""
    return 1e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-12


@pytest.fixture(params=CASES)
def case(request):
    return request.param


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Small tensors: torch's thread pool only adds contention on a shared machine (results are unchanged)."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
