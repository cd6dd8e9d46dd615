"""Block-sparse attention on a BSR block pattern, and the pattern builders.

Only the stored ``b x b`` tiles of the score matrix are ever formed, so
memory and work are proportional to the stored tiles, never to
``seq_len**2``. Within a stored tile the tile's entries act as an element
mask (nonzero = may attend), which is how ragged sequence ends and causal
diagonal tiles are exact.
"""

from __future__ import annotations

import math

import torch

from trnsci import validate
from trnsci.dispatch import Op

from . import arrays
from .formats import BSRMatrix, SparseMatrix

_ATTN_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)


def _pattern(mb: int, nb: int, keep, b: int, m: int, n: int, causal: bool) -> BSRMatrix:
    """A BSR mask of ones from a block predicate; padding and (if causal) j > i entries are zero."""
    bi = torch.arange(mb)[:, None]
    bj = torch.arange(nb)[None, :]
    idx = torch.nonzero(keep(bi, bj) & torch.ones(mb, nb, dtype=torch.bool))
    brow, bcol = idx[:, 0], idx[:, 1]
    r = brow[:, None, None] * b + torch.arange(b)[None, :, None]
    c = bcol[:, None, None] * b + torch.arange(b)[None, None, :]
    ok = (r < m) & (c < n)
    if causal:
        ok &= c <= r
    return BSRMatrix._make(ok.to(torch.float32), bcol, arrays.ptrs_from_sorted(brow, mb), (m, n), b)


def local_window_mask(seq_len: int, window: int, block_size: int = 128, causal: bool = False) -> BSRMatrix:
    """Banded block pattern: query block i attends key blocks j with ``|i - j| < window``.

    ``window=1`` is the diagonal tiles only, ``window=2`` adds one neighbour
    tile on each side. With ``causal=True`` only ``j <= i`` and, inside the
    diagonal tiles, only keys at or before the query.

    Examples
    --------
    >>> import trnsparse
    >>> M = trnsparse.local_window_mask(10, window=2, block_size=4)
    >>> M.n_blocks, M.block_col_indices.tolist()
    (7, [0, 1, 0, 1, 2, 1, 2])
    """
    where = "local_window_mask"
    s = validate.integer(seq_len, "seq_len", where, minimum=0, maximum=validate.INDEX_MAX)
    w = validate.integer(window, "window", where, minimum=1, maximum=validate.INDEX_MAX)
    b = validate.integer(block_size, "block_size", where, minimum=1, maximum=max(s, 128))
    c = _flag(causal, "causal", where)
    nb = -(-s // b)

    def keep(i, j):
        band = (i - j).abs() < w
        return band & (j <= i) if c else band

    return _pattern(nb, nb, keep, b, s, s, c)


def causal_mask(seq_len: int, block_size: int = 128) -> BSRMatrix:
    """Causal pattern: every tile with ``j <= i``; diagonal tiles lower-triangular.

    Examples
    --------
    >>> import trnsparse
    >>> trnsparse.causal_mask(5, block_size=2).to_dense()[:3, :3]
    tensor([[1., 0., 0.],
            [1., 1., 0.],
            [1., 1., 1.]])
    """
    where = "causal_mask"
    s = validate.integer(seq_len, "seq_len", where, minimum=0, maximum=validate.INDEX_MAX)
    b = validate.integer(block_size, "block_size", where, minimum=1, maximum=max(s, 128))
    nb = -(-s // b)
    return _pattern(nb, nb, lambda i, j: j <= i, b, s, s, True)


def _flag(x, name, where):
    if isinstance(x, bool):
        return x
    raise TypeError(f"{where}: {name} must be True or False, got {x!r}")


ATTENTION = Op(
    # No hardware here to calibrate: the kernel pays off once a few 128x128
    # score tiles per head need computing (launch cost amortized).
    "trnsparse.block_sparse_attention", "flops", 8 * 2 * 128 * 128 * 128,
    size=lambda Q, K, V, blocks, brow, bcol, b, *r: 2.0 * Q.shape[0] * blocks.shape[0] * b * b
    * (Q.shape[2] + V.shape[2]),
    describe=lambda Q, K, V, blocks, brow, bcol, b, scale, causal: f"{Q.shape[0]} head(s), Sq={Q.shape[1]}, "
    f"Sk={K.shape[1]}, d={Q.shape[2]}, dv={V.shape[2]}, {blocks.shape[0]} stored {b}x{b} tiles, causal={causal}",
    doc="softmax(Q K^T scale) V over the stored tiles; flops = 2 G n_blocks b^2 (d + dv)",
    schema="(Tensor Q, Tensor K, Tensor V, Tensor blocks, Tensor brow, Tensor bcol, int block_size, float scale, "
           "bool causal) -> Tensor",
    fake=lambda Q, K, V, blocks, brow, bcol, b, scale, causal: Q.new_empty((Q.shape[0], Q.shape[1], V.shape[2])),
)


@ATTENTION.lowering("torch")
def _block_sparse_attention_torch(Q, K, V, blocks, brow, bcol, block_size, scale, causal):
    """Attention over the stored tiles; Q (G, Sq, d), K (G, Sk, d), V (G, Sk, dv), blocks (nblk, b, b) bool.

    Softmax per query row over the allowed keys of its block row (max
    subtracted, detached: softmax is shift-invariant so gradients are
    exact). Rows with no allowed key give zeros.
    """
    G, Sq, d = Q.shape
    Sk, dv = K.shape[1], V.shape[2]
    b = block_size
    mb, nb = -(-Sq // b), -(-Sk // b)
    Qp = torch.nn.functional.pad(Q, (0, 0, 0, mb * b - Sq)).reshape(G, mb, b, d)
    Kp = torch.nn.functional.pad(K, (0, 0, 0, nb * b - Sk)).reshape(G, nb, b, d)
    Vp = torch.nn.functional.pad(V, (0, 0, 0, nb * b - Sk)).reshape(G, nb, b, dv)
    out = Q.new_zeros(G, mb, b, dv)
    nblk = blocks.shape[0]
    if nblk == 0:
        return out.reshape(G, mb * b, dv)[:, :Sq]
    allowed = blocks
    r = brow[:, None, None] * b + torch.arange(b, device=Q.device)[None, :, None]
    c = bcol[:, None, None] * b + torch.arange(b, device=Q.device)[None, None, :]
    allowed = allowed & (r < Sq) & (c < Sk)
    if causal:
        allowed = allowed & (c <= r)
    S = torch.matmul(Qp[:, brow], Kp[:, bcol].transpose(-1, -2)) * scale  # (G, nblk, b, b)
    S = S.masked_fill(~allowed, float("-inf"))
    tile_max = S.detach().amax(-1)  # (G, nblk, b)
    row_max = torch.full((G, mb, b), float("-inf"), dtype=S.dtype, device=S.device)
    row_max = row_max.scatter_reduce(1, brow[None, :, None].expand(G, nblk, b), tile_max, "amax")
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros((), dtype=S.dtype, device=S.device))
    P = torch.exp(S - row_max[:, brow][..., None])
    denom = Q.new_zeros(G, mb, b).index_add(1, brow, P.sum(-1))
    out = out.index_add(1, brow, torch.matmul(P, Vp[:, bcol]))
    inv = torch.where(denom > 0, 1.0 / torch.where(denom > 0, denom, torch.ones_like(denom)),
                      torch.zeros_like(denom))
    out = out * inv[..., None]
    return out.reshape(G, mb * b, dv)[:, :Sq]


def _attention_backward(inputs, output, g, needs):
    """dQ, dK, dV of the tile softmax attention, per head, from BSR forward ops on the stored tiles.

    With ``P`` the normalised probabilities on the stored tiles (recomputed: the scores ``S = scale Q K^T``
    by one BSR SDDMM), ``O`` the output and ``g`` its gradient: ``dP = g V^T`` (a second BSR SDDMM),
    ``dS = P (dP - rowsum(g O))``, ``dQ = scale dS K``, ``dK = scale dS^T Q``, ``dV = P^T g`` (three BSR
    SpMMs, the last two on the transposed tiles).
    """
    from .ops import BSR_SDDMM, BSR_SPMM, _bsr_transpose

    Q, K, V, blocks, brow, bcol, b, scale, causal = inputs
    G, Sq, _ = Q.shape
    Sk = K.shape[1]
    mb = -(-Sq // b)
    nblk = blocks.shape[0]
    want = [needs[0], needs[1], needs[2]]
    if nblk == 0 or g is None:
        return tuple(torch.zeros_like(t) if w else None for t, w in zip((Q, K, V), want)) + (None,) * 6
    idx = bcol.dtype
    ptrs = torch.cumsum(torch.zeros(mb + 1, dtype=idx, device=Q.device).index_add_(
        0, brow.to(idx) + 1, torch.ones_like(brow, dtype=idx)), 0)
    ar = torch.arange(b, device=Q.device)
    r = brow[:, None, None] * b + ar[None, :, None]
    c = bcol[:, None, None] * b + ar[None, None, :]
    allowed = blocks & (r < Sq) & (c < Sk)
    if causal:
        allowed = allowed & (c <= r)
    pattern = Q.new_zeros(nblk, b, b)  # the tiles' positions only: beta = 0 never reads them
    shape, shape_t = (Sq, Sk), (Sk, Sq)
    g = g.contiguous()
    Dall = torch.nn.functional.pad((g * output).sum(-1), (0, mb * b - Sq)).reshape(G, mb, b)
    dQ, dK, dV = [], [], []
    for h in range(G):
        S = BSR_SDDMM(pattern, bcol, ptrs, shape, b, Q[h].contiguous(), K[h].mT.contiguous(), scale, 0.0)
        S = S.masked_fill(~allowed, float("-inf"))
        row_max = torch.full((mb, b), float("-inf"), dtype=S.dtype, device=S.device).scatter_reduce(
            0, brow[:, None].expand(nblk, b), S.amax(-1), "amax")
        row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros((), dtype=S.dtype, device=S.device))
        P = torch.exp(S - row_max[brow][..., None])
        denom = S.new_zeros(mb, b).index_add(0, brow, P.sum(-1))
        inv = torch.where(denom > 0, 1.0 / torch.where(denom > 0, denom, torch.ones_like(denom)),
                          torch.zeros_like(denom))
        P = P * inv[brow][..., None]
        dP = BSR_SDDMM(pattern, bcol, ptrs, shape, b, g[h], V[h].mT.contiguous(), 1.0, 0.0)
        dS = P * (dP - Dall[h][brow][..., None])
        if want[0]:
            dQ.append(BSR_SPMM(dS.contiguous(), bcol, ptrs, shape, b, K[h].contiguous()) * scale)
        if want[1]:
            st, ct, pt = _bsr_transpose(dS, bcol, ptrs, shape, b)
            dK.append(BSR_SPMM(st.contiguous(), ct, pt, shape_t, b, Q[h].contiguous()) * scale)
        if want[2]:
            pt_, ct, pt = _bsr_transpose(P, bcol, ptrs, shape, b)
            dV.append(BSR_SPMM(pt_.contiguous(), ct, pt, shape_t, b, g[h]))
    out = tuple(torch.stack(x) if w else None for x, w in zip((dQ, dK, dV), want))
    return out + (None,) * 6


ATTENTION.backward(_attention_backward,
                   formula="P recomputed on the stored tiles; dP = g V^T, dS = P (dP - rowsum(g O)); dQ = scale dS K, "
                           "dK = scale dS^T Q, dV = P^T g",
                   runs="per head two `trnsparse.bsr_sddmm` and three `trnsparse.bsr_spmm` calls")


def _attn_args(where, Q, K, V, mask, scale, causal, mask_name="mask"):
    Q = validate.tensor(Q, "Q", where)
    K = validate.tensor(K, "K", where)
    V = validate.tensor(V, "V", where)
    for name, t in (("Q", Q), ("K", K), ("V", V)):
        validate.dtype(t, name, _ATTN_DTYPES, where)
        validate.ndim(t, name, (2, 3, 4), where)
    validate.same_dtype(where, Q=Q, K=K, V=V)
    validate.same_device(where, Q=Q, K=K, V=V)
    if not (Q.dim() == K.dim() == V.dim()) or Q.shape[:-2] != K.shape[:-2] or K.shape[:-2] != V.shape[:-2]:
        raise ValueError(f"{where}: Q, K, V must share their leading (batch, heads) dimensions: Q has shape "
                         f"{tuple(Q.shape)}, K has shape {tuple(K.shape)}, V has shape {tuple(V.shape)}")
    if Q.shape[-1] != K.shape[-1]:
        raise ValueError(f"{where}: Q and K must have one head_dim: Q has shape {tuple(Q.shape)}, "
                         f"K has shape {tuple(K.shape)}")
    if K.shape[-2] != V.shape[-2]:
        raise ValueError(f"{where}: K and V must have one sequence length: K has shape {tuple(K.shape)}, "
                         f"V has shape {tuple(V.shape)}")
    Sq, Sk = Q.shape[-2], K.shape[-2]
    if isinstance(mask, torch.Tensor) and mask.layout == torch.strided:
        if mask.dim() != 2 or tuple(mask.shape) != (Sq, Sk):
            raise ValueError(f"{where}: {mask_name} must have shape {(Sq, Sk)}, got {tuple(mask.shape)}")
        mask = BSRMatrix.from_dense(mask.to(torch.float32), block_size=min(128, max(Sq, Sk, 1)))
    if not isinstance(mask, SparseMatrix):
        raise TypeError(f"{where}: {mask_name} must be a BSRMatrix pattern (see local_window_mask, causal_mask) or a "
                        f"boolean (seq_q, seq_k) tensor, got {type(mask).__name__}")
    if not isinstance(mask, BSRMatrix):
        mask = mask.to_bsr(128)
    if mask.shape != (Sq, Sk):
        raise ValueError(f"{where}: {mask_name} has shape {mask.shape} but Q and K give {(Sq, Sk)}")
    d = Q.shape[-1]
    if scale is None:
        scale = 1.0 / math.sqrt(d) if d else 1.0
    else:
        scale = validate.scalar(scale, "scale", where, complex_ok=False)
    causal = _flag(causal, "causal", where)
    return Q, K, V, mask, float(scale), causal


@validate.numpy_io
def block_sparse_attention(Q, K, V, mask, scale=None, causal=False):
    """Attention restricted to a block pattern: ``softmax(Q K^T * scale, masked) V``.

    Parameters
    ----------
    Q : (..., seq_q, head_dim), ``...`` = (), (heads,) or (batch, heads)
    K : (..., seq_k, head_dim); V : (..., seq_k, dv)
    mask : BSRMatrix (seq_q, seq_k) or bool tensor
        Query i may attend key j iff (i, j) lies in a stored tile and that
        tile's entry is nonzero (see :func:`local_window_mask`, :func:`causal_mask`).
    scale : float, default ``1 / sqrt(head_dim)``
    causal : bool, default False -- additionally require ``j <= i``.

    Returns
    -------
    (..., seq_q, dv) tensor. Query rows with no allowed key are zero.
    Differentiable in Q, K and V.

    Notes
    -----
    Scores exist only for stored tiles: memory ``O(n_blocks * b**2)``.
    This is the torch lowering of the planned online-softmax kernel.
    The NKI kernel (128 x 128 tiles, float32) takes any ``head_dim``: the
    ``Q K^T`` product runs over 128-row slices of ``head_dim`` accumulating
    in PSUM, and ``P V`` over 512-column slices of ``dv``.

    Examples
    --------
    >>> import torch, trnsparse
    >>> g = torch.Generator().manual_seed(0)
    >>> Q, K, V = (torch.randn(6, 4, generator=g, dtype=torch.float64) for _ in range(3))
    >>> out = trnsparse.block_sparse_attention(Q, K, V, trnsparse.causal_mask(6, block_size=4))
    >>> ref = torch.nn.functional.scaled_dot_product_attention(Q, K, V, is_causal=True)
    >>> torch.allclose(out, ref)
    True
    """
    return _attention("block_sparse_attention", "mask", Q, K, V, mask, scale, causal)


def _attention(where, mask_name, Q, K, V, mask, scale, causal):
    Q, K, V, mask, scale, causal = _attn_args(where, Q, K, V, mask, scale, causal, mask_name)
    lead = Q.shape[:-2]
    G = 1
    for s in lead:
        G *= s
    blocks = (mask.blocks != 0).to(Q.device)
    out = ATTENTION(Q.reshape(G, *Q.shape[-2:]), K.reshape(G, *K.shape[-2:]),
                                        V.reshape(G, *V.shape[-2:]), blocks, mask.block_row_indices.to(Q.device),
                                        mask.block_col_indices.to(Q.device), mask.block_size, scale, causal)
    return out.reshape(*lead, Q.shape[-2], V.shape[-1])


@validate.numpy_io
def block_sparse_attention_tiled(Q, K, V, mask_bsr, scale=None):
    """Block-sparse attention over the tiles of ``mask_bsr`` (same as :func:`block_sparse_attention`).

    Kept for the published API; it never forms the full score matrix.

    Examples
    --------
    >>> import torch, trnsparse
    >>> Q = torch.zeros(4, 2); V = torch.arange(8.).reshape(4, 2)
    >>> trnsparse.block_sparse_attention_tiled(Q, Q, V, trnsparse.local_window_mask(4, 1, block_size=2))
    tensor([[1., 2.],
            [1., 2.],
            [5., 6.],
            [5., 6.]])
    """
    return _attention("block_sparse_attention_tiled", "mask_bsr", Q, K, V, mask_bsr, scale, False)
