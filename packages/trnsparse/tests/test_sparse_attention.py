"""Block-sparse attention vs dense masked softmax attention (NumPy reference), and its gradients."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trnsparse


def _dense_reference(Q, K, V, allowed, scale):
    """softmax over allowed keys in float64 NumPy; rows with no allowed key -> 0."""
    Q, K, V = (np.asarray(t, dtype=np.float64) for t in (Q, K, V))
    S = Q @ np.swapaxes(K, -1, -2) * scale
    S = np.where(allowed, S, -np.inf)
    mx = S.max(-1, keepdims=True)
    mx = np.where(np.isfinite(mx), mx, 0)
    P = np.exp(S - mx)
    den = P.sum(-1, keepdims=True)
    return np.where(den > 0, (P / np.where(den > 0, den, 1)) @ V, 0)


def _qkv(shape_q, sk, dv=None, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    *lead, sq, d = shape_q
    Q = torch.randn(*lead, sq, d, generator=g, dtype=dtype)
    K = torch.randn(*lead, sk, d, generator=g, dtype=dtype)
    V = torch.randn(*lead, sk, dv or d, generator=g, dtype=dtype)
    return Q, K, V


@pytest.mark.parametrize("seq,b", [(16, 4), (13, 4), (5, 8), (1, 4)])  # whole tiles, ragged last tile, one tile
@pytest.mark.parametrize("window", [1, 2])
@pytest.mark.parametrize("causal", [False, True])
def test_local_window_matches_dense_masked_softmax(seq, b, window, causal):
    Q, K, V = _qkv((2, 3, seq, 5), seq)
    M = trnsparse.local_window_mask(seq, window, block_size=b, causal=causal)
    i = np.arange(seq)
    allowed = np.abs(i[:, None] // b - i[None, :] // b) < window
    if causal:
        allowed &= i[None, :] <= i[:, None]
    out = trnsparse.block_sparse_attention(Q, K, V, M)
    ref = _dense_reference(Q, K, V, allowed, 1 / np.sqrt(5))
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-12, atol=1e-12)  # float64, <= 16 terms per row


@pytest.mark.parametrize("seq,b", [(12, 4), (11, 4)])
def test_causal_mask_and_causal_flag_equal_sdpa(seq, b):
    Q, K, V = _qkv((seq, 6), seq, dv=3, dtype=torch.float32)
    ref = torch.nn.functional.scaled_dot_product_attention(Q, K, V, is_causal=True)
    out = trnsparse.block_sparse_attention(Q, K, V, trnsparse.causal_mask(seq, block_size=b))
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)  # float32 softmax of 12 terms
    full = trnsparse.local_window_mask(seq, 100, block_size=b)
    torch.testing.assert_close(trnsparse.block_sparse_attention(Q, K, V, full, causal=True), ref, rtol=1e-5,
                               atol=1e-5)


def test_ragged_block_rows_and_empty_block_rows_are_exact():
    """Block rows holding 0, 1 and 3 tiles; rectangular seq_q != seq_k; explicit scale."""
    b, sq, sk = 4, 10, 14
    allowed = np.zeros((sq, sk), dtype=bool)
    allowed[0:4, 4:8] = True                       # block row 0: one tile
    allowed[8:10, :] = True                        # block row 2: four tiles, last one ragged
    allowed[8, 13] = False                         # element mask inside a stored tile
    M = trnsparse.BSRMatrix.from_dense(torch.from_numpy(allowed.astype(np.float32)), block_size=b)
    assert M.block_row_ptrs.tolist() == [0, 1, 1, 5]  # block row 1 empty
    Q, K, V = _qkv((sq, 3), sk, dv=2)
    out = trnsparse.block_sparse_attention(Q, K, V, M, scale=0.7)
    np.testing.assert_allclose(out.numpy(), _dense_reference(Q, K, V, allowed, 0.7), rtol=1e-12, atol=1e-12)
    assert (out[4:8] == 0).all()
    out2 = trnsparse.block_sparse_attention(Q, K, V, torch.from_numpy(allowed), scale=0.7)  # a bool mask
    np.testing.assert_allclose(out2.numpy(), out.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(trnsparse.block_sparse_attention_tiled(Q, K, V, M, scale=0.7).numpy(), out.numpy())


def test_gradcheck_on_ragged_window():
    Q, K, V = _qkv((1, 7, 3), 7)
    for t in (Q, K, V):
        t.requires_grad_(True)
    M = trnsparse.local_window_mask(7, 2, block_size=3, causal=True)
    torch.autograd.gradcheck(lambda q, k, v: trnsparse.block_sparse_attention(q, k, v, M), (Q, K, V))
    # and the gradient equals dense masked attention's gradient
    out = trnsparse.block_sparse_attention(Q, K, V, M)
    g = torch.autograd.grad(out.square().sum(), (Q, K, V))
    i = torch.arange(7)
    allowed = ((i[:, None] // 3 - i[None, :] // 3).abs() < 2) & (i[None, :] <= i[:, None])
    ref = torch.nn.functional.scaled_dot_product_attention(Q, K, V, attn_mask=allowed)
    gr = torch.autograd.grad(ref.square().sum(), (Q, K, V))
    for a, r in zip(g, gr):
        torch.testing.assert_close(a, r, rtol=1e-10, atol=1e-12)


def test_mask_helpers_patterns():
    M = trnsparse.local_window_mask(9, 2, block_size=4)
    assert M.block_row_ptrs.tolist() == [0, 2, 5, 7] and M.block_col_indices.tolist() == [0, 1, 0, 1, 2, 1, 2]
    dense = M.to_dense().numpy()
    assert dense.shape == (9, 9) and dense[0, 8] == 0 and dense[8, 0] == 0 and dense[8, 4] == 1
    C = trnsparse.causal_mask(9, block_size=4).to_dense().numpy()
    np.testing.assert_array_equal(C, np.tril(np.ones((9, 9))))


@pytest.mark.parametrize("call,exc,pattern", [
    (lambda Q: trnsparse.block_sparse_attention(Q, Q[:5], Q, trnsparse.causal_mask(8, 4)), ValueError,
     r"K and V must have one sequence length"),
    (lambda Q: trnsparse.block_sparse_attention(Q, Q, Q, trnsparse.causal_mask(6, 4)), ValueError,
     r"mask has shape \(6, 6\)"),
    (lambda Q: trnsparse.block_sparse_attention(Q, Q[:, :2], Q, trnsparse.causal_mask(8, 4)), ValueError,
     r"one head_dim"),
    (lambda Q: trnsparse.block_sparse_attention(Q, Q, Q, "local"), TypeError, r"mask must be a BSRMatrix"),
    (lambda Q: trnsparse.block_sparse_attention(Q.long(), Q, Q, trnsparse.causal_mask(8, 4)), TypeError,
     r"Q has dtype int64"),
    (lambda Q: trnsparse.block_sparse_attention(Q, Q, Q, trnsparse.causal_mask(8, 4), causal=1), TypeError,
     r"causal must be True or False"),
    (lambda Q: trnsparse.local_window_mask(8, 0), ValueError, r"window must be >= 1"),
    (lambda Q: trnsparse.causal_mask(8, block_size=0), ValueError, r"block_size must be >= 1"),
])
def test_bad_attention_input(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call(torch.ones(8, 3))
