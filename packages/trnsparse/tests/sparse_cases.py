"""Matrices shared by the trnsparse tests: dense NumPy references of awkward shapes."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch


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


def all_formats(D: np.ndarray):
    """The same matrix in each format, built from SciPy's arrays (an independent construction)."""
    import trnsparse

    S = sp.csr_array(D)
    out = {"csr": trnsparse.CSRMatrix(S.data, S.indices, S.indptr, S.shape)}
    C = sp.csc_array(D)
    out["csc"] = trnsparse.CSCMatrix(C.data, C.indices, C.indptr, C.shape)
    O = sp.coo_array(D)
    out["coo"] = trnsparse.COOMatrix(O.data, O.row, O.col, O.shape)
    out["bsr"] = trnsparse.BSRMatrix.from_dense(torch.from_numpy(D), block_size=3)
    return out
