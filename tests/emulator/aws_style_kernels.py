"""Kernels written the way AWS's NKI 0.6 kernels are, against plain ``import nki``.

Imported by ``test_aws_style_kernels.py`` only after
``trnsci.nki.install_as_nki()``, so ``nki``, ``nki.language`` and
``nki.isa`` below are the emulator registered under AWS's names: the file
would run unchanged on AWS's toolchain.  Style: tiles allocated with
``nl.ndarray``, every instruction a ``nisa`` call with an explicit ``dst``,
loops over ragged tiles with ``nl.affine_range`` / ``nl.sequential_range``,
HBM outputs in ``nl.shared_hbm``.
"""

import nki
import nki.isa as nisa
import nki.language as nl
from nki.isa.constants import oob_mode

P = nl.tile_size.pmax  # 128
FMAX = nl.tile_size.gemm_moving_fmax  # 512


def _ceil(a, b):
    return (a + b - 1) // b


@nki.jit
def matmul_tiles(lhsT, rhs):
    """out[M, N] = lhsT[K, M].T @ rhs[K, N]: 128 x 512 output tiles, K accumulated in PSUM."""
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for mi in nl.affine_range(_ceil(M, P)):
        m0, mw = mi * P, min(P, M - mi * P)
        for ni in nl.affine_range(_ceil(N, FMAX)):
            n0, nw = ni * FMAX, min(FMAX, N - ni * FMAX)
            acc = nl.ndarray((mw, nw), dtype=nl.float32, buffer=nl.psum)
            for ki in nl.affine_range(_ceil(K, P)):
                k0, kw = ki * P, min(P, K - ki * P)
                a = nl.ndarray((kw, mw), dtype=lhsT.dtype, buffer=nl.sbuf)
                b = nl.ndarray((kw, nw), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=a, src=lhsT[k0:k0 + kw, m0:m0 + mw])
                nisa.dma_copy(dst=b, src=rhs[k0:k0 + kw, n0:n0 + nw])
                nisa.nc_matmul(dst=acc, stationary=a, moving=b, accumulate=ki > 0)
            res = nl.ndarray((mw, nw), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(dst=out[m0:m0 + mw, n0:n0 + nw], src=res)
    return out


@nki.jit
def softmax_rows(x):
    """Row softmax; rows on partitions: max, exp(x - max) with its row sum, times 1/sum."""
    R, F = x.shape
    out = nl.ndarray((R, F), dtype=x.dtype, buffer=nl.shared_hbm)
    for ri in nl.affine_range(_ceil(R, P)):
        r0, rw = ri * P, min(P, R - ri * P)
        t = nl.ndarray((rw, F), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[r0:r0 + rw, :])
        mx = nl.ndarray((rw, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=mx, op=nl.maximum, data=t, axis=1, negate=True, keepdims=True)
        e = nl.ndarray((rw, F), dtype=nl.float32, buffer=nl.sbuf)
        s = nl.ndarray((rw, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=e, op=nl.exp, data=t, bias=mx, reduce_op=nl.add, reduce_res=s,
                        reduce_cmd=nisa.reduce_cmd.reset_reduce)
        inv = nl.ndarray((rw, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv, data=s)
        y = nl.ndarray((rw, F), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y, data=e, op0=nl.multiply, operand0=inv)
        nisa.dma_copy(dst=out[r0:r0 + rw, :], src=y)
    return out


@nki.jit
def rmsnorm_rows(x, w, eps):
    """y = x / sqrt(mean(x^2) + eps) * w; the weight row is DMA-broadcast to all partitions."""
    R, H = x.shape
    out = nl.ndarray((R, H), dtype=x.dtype, buffer=nl.shared_hbm)
    for ri in nl.affine_range(_ceil(R, P)):
        r0, rw = ri * P, min(P, R - ri * P)
        t = nl.ndarray((rw, H), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[r0:r0 + rw, :])
        wt = nl.ndarray((rw, H), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=wt, src=w.ap([[0, rw], [1, H]]))  # partition stride 0: one row to every partition
        sq = nl.ndarray((rw, H), dtype=nl.float32, buffer=nl.sbuf)
        ss = nl.ndarray((rw, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=sq, op=nl.square, data=t, reduce_op=nl.add, reduce_res=ss,
                        reduce_cmd=nisa.reduce_cmd.reset_reduce)
        ms = nl.ndarray((rw, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=ms, data=ss, op0=nl.multiply, operand0=1.0 / H, op1=nl.add, operand1=eps)
        rstd = nl.ndarray((rw, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=rstd, op=nl.rsqrt, data=ms)
        y = nl.ndarray((rw, H), dtype=nl.float32, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=y, data=t, op0=nl.multiply, operand0=rstd, op1=nl.multiply, operand1=wt)
        nisa.dma_copy(dst=out[r0:r0 + rw, :], src=y)
    return out


@nki.jit
def cumsum_rows(x, chunk=256):
    """Inclusive prefix sum along the free dim, in chunks: a scan whose initial value carries over."""
    R, F = x.shape
    out = nl.ndarray((R, F), dtype=nl.float32, buffer=nl.shared_hbm)
    for ri in nl.affine_range(_ceil(R, P)):
        r0, rw = ri * P, min(P, R - ri * P)
        ones = nl.ndarray((rw, chunk), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=ones, value=1.0)
        carry = nl.ndarray((rw, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=carry, value=0.0)
        for ci in nl.sequential_range(_ceil(F, chunk)):
            c0, cw = ci * chunk, min(chunk, F - ci * chunk)
            t = nl.ndarray((rw, cw), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[r0:r0 + rw, c0:c0 + cw])
            s = nl.ndarray((rw, cw), dtype=nl.float32, buffer=nl.sbuf)
            # s[i] = ones[i] * s[i-1] + t[i], s[-1] = carry
            nisa.tensor_tensor_scan(dst=s, data0=ones[:, 0:cw], data1=t, initial=carry, op0=nl.multiply,
                                    op1=nl.add)
            nisa.tensor_copy(dst=carry, src=s[:, cw - 1:cw])
            nisa.dma_copy(dst=out[r0:r0 + rw, c0:c0 + cw], src=s)
    return out


@nki.jit
def topk_rows(x, rounds):
    """Top 8 * rounds values per row, descending, and their indices: max8, then match_replace8 knocks them out."""
    R, F = x.shape
    k = 8 * rounds
    vals = nl.ndarray((R, k), dtype=nl.float32, buffer=nl.shared_hbm)
    idxs = nl.ndarray((R, k), dtype=nl.uint32, buffer=nl.shared_hbm)
    for ri in nl.affine_range(_ceil(R, P)):
        r0, rw = ri * P, min(P, R - ri * P)
        work = nl.ndarray((rw, F), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=work, src=x[r0:r0 + rw, :])
        v = nl.ndarray((rw, k), dtype=nl.float32, buffer=nl.sbuf)
        ix = nl.ndarray((rw, k), dtype=nl.uint32, buffer=nl.sbuf)
        for j in nl.sequential_range(rounds):
            top = v[:, 8 * j:8 * j + 8]
            nisa.max8(dst=top, src=work)
            nisa.nc_match_replace8(dst=work, data=work, vals=top, imm=-3.0e38, dst_idx=ix[:, 8 * j:8 * j + 8])
        nisa.dma_copy(dst=vals[r0:r0 + rw, :], src=v)
        nisa.dma_copy(dst=idxs[r0:r0 + rw, :], src=ix)
    return vals, idxs


@nki.jit
def find_index8_rows(x, v):
    """Indices of the 8 given values per row (duplicates: successive occurrences; absent: all-ones)."""
    R, F = x.shape
    out = nl.ndarray((R, 8), dtype=nl.uint32, buffer=nl.shared_hbm)
    d = nl.ndarray((R, F), dtype=nl.float32, buffer=nl.sbuf)
    vals = nl.ndarray((R, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=d, src=x)
    nisa.dma_copy(dst=vals, src=v)
    ix = nl.ndarray((R, 8), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.nc_find_index8(dst=ix, data=d, vals=vals)
    nisa.dma_copy(dst=out, src=ix)
    return out


@nki.jit
def depthwise_conv1d(x, w):
    """out[c, i] = sum_t w[c, t] * x[c, i + t] ('valid'); one diagonal-weight matmul per tap, summed in PSUM."""
    C, L = x.shape
    _, T = w.shape
    Lo = L - T + 1
    out = nl.ndarray((C, Lo), dtype=nl.float32, buffer=nl.shared_hbm)
    for ci in nl.affine_range(_ceil(C, P)):
        c0, cw = ci * P, min(P, C - ci * P)
        xt = nl.ndarray((cw, L), dtype=nl.float32, buffer=nl.sbuf)
        wt = nl.ndarray((cw, T), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[c0:c0 + cw, :])
        nisa.dma_copy(dst=wt, src=w[c0:c0 + cw, :])
        eye = nl.shared_identity_matrix(cw, dtype=nl.float32)
        for oi in nl.affine_range(_ceil(Lo, FMAX)):
            o0, ow = oi * FMAX, min(FMAX, Lo - oi * FMAX)
            acc = nl.ndarray((cw, ow), dtype=nl.float32, buffer=nl.psum)
            for t in nl.affine_range(T):
                diag = nl.ndarray((cw, cw), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_scalar(dst=diag, data=eye, op0=nl.multiply, operand0=wt[:, t:t + 1])
                nisa.nc_matmul(dst=acc, stationary=diag, moving=xt[:, o0 + t:o0 + t + ow])
            res = nl.ndarray((cw, ow), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(dst=out[c0:c0 + cw, o0:o0 + ow], src=res)
    return out


@nki.jit
def gather_rows(table, idx):
    """out[i] = table[idx[i]]: indices to SBUF, then one indirect DMA per 128 rows; bad indices skipped."""
    V, D = table.shape
    (n, _one) = idx.shape
    out = nl.ndarray((n, D), dtype=table.dtype, buffer=nl.shared_hbm)
    for gi in nl.affine_range(_ceil(n, P)):
        g0, gw = gi * P, min(P, n - gi * P)
        it = nl.ndarray((gw, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=it, src=idx[g0:g0 + gw, :])
        rows = nl.ndarray((gw, D), dtype=table.dtype, buffer=nl.sbuf)
        nisa.memset(dst=rows, value=0.0)
        nisa.dma_copy(dst=rows, src=table.ap([[D, gw], [1, D]], vector_offset=it, indirect_dim=0),
                      oob_mode=oob_mode.skip)
        nisa.dma_copy(dst=out[g0:g0 + gw, :], src=rows)
    return out


# ---- kernels that break a documented rule (each must be rejected naming it)

@nki.jit
def matmul_moving_too_wide(lhsT, rhs):
    """One nc_matmul with a 600-wide moving tile: its fp32 PSUM result (2400 B) exceeds a 2 KiB bank."""
    K, M = lhsT.shape
    _, N = rhs.shape
    a = nl.ndarray((K, M), dtype=lhsT.dtype, buffer=nl.sbuf)
    b = nl.ndarray((K, N), dtype=rhs.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=lhsT)
    nisa.dma_copy(dst=b, src=rhs)
    acc = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=a, moving=b)
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    return out


@nki.jit
def sin_out_of_range(x):
    """sin on the Scalar Engine with inputs up to 10: the activation's valid input range is [-pi, pi]."""
    t = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.activation(dst=t, op=nl.sin, data=t)
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


@nki.jit
def tile_too_tall(x):
    """An SBUF tile of 200 partitions: the partition dim is at most 128."""
    t = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    return x


@nki.jit
def psum_store_to_hbm(x):
    """A DMA out of PSUM: DMAs move HBM <-> SBUF only."""
    t = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    acc = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.psum)
    nisa.tensor_copy(dst=acc, src=t)
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=acc)
    return out
