"""Operands shared by ``trnsparse.bench`` and the pytest-benchmark suite (one definition of each case)."""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
import torch

import trnsparse


def csr_pair(n: int, density: float, seed: int = 0, dtype=torch.float64):
    """(trnsparse CSR, SciPy csr_array with SciPy's own int32 indices, torch sparse CSR) of one matrix."""
    A = trnsparse.random_sparse(n, n, density=density, dtype=dtype, seed=seed)
    S = sp.csr_array((A.values.numpy(), A.col_indices.numpy().astype(np.int32),
                      A.row_ptrs.numpy().astype(np.int32)), shape=(n, n))
    T = torch.sparse_csr_tensor(A.row_ptrs.to(torch.int32), A.col_indices.to(torch.int32), A.values,
                                size=(n, n), check_invariants=False)
    return A, S, T


def bsr_case(n: int, block_density: float, b: int = 128, seed: int = 0):
    """A BSR matrix with a given fraction of stored tiles, and its dense twin."""
    g = torch.Generator().manual_seed(seed)
    nb = n // b
    keep = torch.rand(nb, nb, generator=g) < block_density
    keep |= torch.eye(nb, dtype=torch.bool)
    D = torch.randn(n, n, generator=g, dtype=torch.float32) * keep.repeat_interleave(b, 0).repeat_interleave(b, 1)
    return trnsparse.BSRMatrix.from_dense(D, block_size=b), D


def attention_case(seq: int, window: int, heads: int = 4, d: int = 64, b: int = 128, seed: int = 0):
    """Q, K, V (heads, seq, d), the banded BSR mask and the equivalent dense boolean mask."""
    g = torch.Generator().manual_seed(seed)
    Q, K, V = (torch.randn(heads, seq, d, generator=g) for _ in range(3))
    M = trnsparse.local_window_mask(seq, window, block_size=b)
    i = torch.arange(seq)
    dense = (i[:, None] // b - i[None, :] // b).abs() < window
    return Q, K, V, M, dense


def dense_attention(Q, K, V, mask):
    return torch.nn.functional.scaled_dot_product_attention(Q, K, V, attn_mask=mask, scale=1 / math.sqrt(Q.shape[-1]))
