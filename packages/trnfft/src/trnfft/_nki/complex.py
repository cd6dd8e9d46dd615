"""NKI lowerings of :mod:`trnfft.complex`: the complex multiply (:mod:`trnfft.kernels.cmul`) and the complex
matmul (DFT-GEMM kernel on split parts).
"""

from __future__ import annotations

import torch

from trnsci import nki

from ..complex import CMATMUL, CMUL
from ..kernels import dft_gemm as KG
from ..kernels.cmul import cmul_counts, cmul_kernel
from .basic import F32


def _cmul_supports(ar, ai, br, bi):
    if not (ar.shape == ai.shape == br.shape == bi.shape):
        return "operands of different shapes (broadcasting runs on torch)"
    if any(t.dtype != F32 for t in (ai, br, bi)):
        return "all four planes must be float32"
    if any(t.requires_grad for t in (ar, ai, br, bi)) and torch.is_grad_enabled():
        return "an operand requires grad (the kernel has no backward)"
    if not ar.numel():
        return "empty input: nothing for a kernel to do"
    return None


def _cmul_2d(t):
    return t.reshape(-1, t.shape[-1]) if t.dim() else t.reshape(1, 1)


def _cmul_counts(ar, ai, br, bi):
    a = _cmul_2d(ar)
    return {"kernel": "cmul_kernel", **cmul_counts(a.shape[0], a.shape[1])}


@CMUL.lowering("nki", dtypes=(torch.float32,), supports=_cmul_supports, counts=_cmul_counts)
def _cmul_nki(ar, ai, br, bi):
    a = torch.stack((_cmul_2d(ar), _cmul_2d(ai))).contiguous()
    b = torch.stack((_cmul_2d(br), _cmul_2d(bi))).contiguous()
    y = nki.run(cmul_kernel, a, b, out_dtype=F32)
    return y[0].reshape(ar.shape), y[1].reshape(ar.shape)


# ------------------------------------------------------------------ complex matmul

def _cmatmul_supports(ar, ai, br, bi):
    planes = [t for t in (ar, ai, br, bi) if t is not None]
    if ar.dim() != 2 or br.dim() != 2:
        return "batched or vector operands (the kernel path takes two matrices)"
    if ar.shape[1] != br.shape[0]:
        return "the shapes do not multiply (torch says why)"
    if any(t.dtype != F32 for t in planes):
        return "the planes must be float32"
    if any(t.requires_grad for t in planes) and torch.is_grad_enabled():
        return "an operand requires grad (the kernel has no backward)"
    if not (ar.numel() and br.numel()):
        return "empty operand: nothing for a kernel to do"
    if 2 * ar.shape[1] > KG.MAX_K:
        return f"inner dimension {ar.shape[1]} > {KG.MAX_K // 2}: the block GEMM's contraction exceeds the kernel's"
    return None


def _cmatmul_counts(ar, ai, br, bi):
    (m, k), n = ar.shape, br.shape[1]
    return {"kernel": "dft_gemm_kernel", **KG.dft_gemm_counts(m, 2 * k, 2 * n, 4)}


@CMATMUL.lowering("nki", dtypes=(torch.float32,), supports=_cmatmul_supports, counts=_cmatmul_counts)
def _cmatmul_nki(ar, ai, br, bi):
    """``[yr | yi] = [ar | ai] @ [[br, bi], [-bi, br]]``: one real GEMM, contraction 2k on the partitions."""
    ai = torch.zeros_like(ar) if ai is None else ai
    bi = torch.zeros_like(br) if bi is None else bi
    n = br.shape[1]
    xt = torch.cat((ar.T, ai.T), 0).contiguous()
    w = torch.cat((torch.cat((br, bi), 1), torch.cat((-bi, br), 1)), 0).contiguous()
    y = nki.run(KG.dft_gemm_kernel, xt, w, out_dtype=F32)
    return y[:, :n].contiguous(), y[:, n:].contiguous()
