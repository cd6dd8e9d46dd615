"""NKI lowering of :mod:`trnsparse.attention`'s block-sparse attention.

Host-side work: Q and K are passed transposed per head ([G, d, S]) so d is
the partition dim of Q K^T; the tile pattern is a compile-time constant.
"""

from __future__ import annotations

import torch

from trnsci import nki
from trnsparse._nki.ops import F32, KERNEL_DTYPES, TB, _grad
from trnsparse.attention import ATTENTION
from trnsparse.kernels.attention import attention_counts, attention_kernel
from trnsparse.kernels.attention import fits as attention_fits


def _attention_mode(Q, K, V, blocks, brow, bcol, block_size, scale, causal):
    """(causal_for_the_kernel, None) or (None, why the kernel cannot take the call)."""
    if block_size != TB:
        return None, f"block_size {block_size}: the kernel takes 128x128 tiles"
    if not attention_fits(Q.shape[2], V.shape[2]):
        return None, f"head_dim {Q.shape[2]} / value dim {V.shape[2]}: one block row's tiles exceed SBUF"
    if min(Q.shape[2], V.shape[2], Q.shape[1], K.shape[1]) == 0:
        return None, "empty operand: nothing to compute"
    if _grad(Q, K, V):
        return None, "autograd: the kernel is forward only (the torch path is differentiable)"
    if isinstance(scale, complex) or not scale > 0:
        return None, f"scale {scale!r}: the kernel's online softmax needs a positive real scale"
    if not all(bool(torch.isfinite(t).all()) for t in (Q, K, V)):
        return None, ("non-finite Q/K/V: the Tensor Engine transpose of P is not bit-accurate for NaN/Inf "
                      "on trn1")
    Sq, Sk = Q.shape[1], K.shape[1]
    ar = torch.arange(TB, device=blocks.device)
    r = brow[:, None, None] * TB + ar[None, :, None]
    c = bcol[:, None, None] * TB + ar[None, None, :]
    inb = (r < Sq) & (c < Sk)
    tri = inb & (c <= r)
    allowed = blocks & inb
    if causal:
        return (True, None) if torch.equal(allowed & tri, tri) else (None, "tiles with entry-level masks")
    if torch.equal(allowed, inb):
        return False, None
    if torch.equal(allowed, tri):
        return True, None
    return None, "tiles whose entries are neither all kept nor causal (entry-level masks)"


def _attention_supports(*args):
    return _attention_mode(*args)[1]


def _attention_counts(Q, K, V, blocks, brow, bcol, block_size, scale, causal):
    tri, why = _attention_mode(Q, K, V, blocks, brow, bcol, block_size, scale, causal)
    if why is not None:
        return None
    ptrs = _block_row_ptrs(brow, Q.shape[1])
    return {"kernel": "attention_kernel",
            **attention_counts(Q.shape[0], Q.shape[1], K.shape[1], Q.shape[2], V.shape[2], ptrs, bcol.tolist(), tri)}


def _block_row_ptrs(brow, Sq):
    counts = torch.bincount(brow.cpu(), minlength=-(-Sq // TB))
    return (0, *torch.cumsum(counts, 0).tolist())


@ATTENTION.lowering("nki", dtypes=KERNEL_DTYPES, supports=_attention_supports, counts=_attention_counts)
def _attention_nki(Q, K, V, blocks, brow, bcol, block_size, scale, causal):
    tri, _ = _attention_mode(Q, K, V, blocks, brow, bcol, block_size, scale, causal)
    O = nki.run(attention_kernel, Q.mT.contiguous(), K.mT.contiguous(), V.contiguous(),
                row_ptrs=_block_row_ptrs(brow, Q.shape[1]), cols=tuple(bcol.tolist()), scale=float(scale),
                causal=tri, out_dtype=F32)
    return O.to(Q.dtype)
