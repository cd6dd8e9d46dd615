"""Kernels written the way AWS's NKI 0.6 multi-core and inference kernels are (plain ``import nki``).

Imported by ``test_emulator_aws_style_lnc.py`` after
``trnsci.nki.install_as_nki()``.  They exercise what nki-library's MoE /
MLP / attention kernels rely on: LNC2 programs that exchange tiles with
``nisa.sendrecv`` and meet at ``nisa.core_barrier``, many PSUM tiles held by
one function but each evacuated right after its matmul (capacity by
liveness), a bf16 Tensor Engine transpose into a bf16 PSUM tile
(``is_transpose=True``, trn2), optional inputs tested with Python truth, and
``nl.NKIObject`` parameter objects with fields filled in later.
"""

from dataclasses import dataclass

import nki
import nki.isa as nisa
import nki.language as nl

P = nl.tile_size.pmax  # 128


@nki.jit
def lnc_pair_sum(x):
    """x: (2, P, F) in HBM; program r scales x[r] by 2, swaps it with the other core, out[r] = 2 x[r] + 2 x[1-r]."""
    _, p, f = x.shape
    r = nl.program_id(0)
    out = nl.ndarray((2, p, f), dtype=nl.float32, buffer=nl.shared_hbm)
    mine = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=mine, src=x[r])
    nisa.tensor_scalar(dst=mine, data=mine, op0=nl.multiply, operand0=2.0)
    theirs = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
    nisa.sendrecv(src=mine, dst=theirs, send_to_rank=1 - r, recv_from_rank=1 - r, pipe_id=0)
    total = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=total, data1=mine, data2=theirs, op=nl.add)
    nisa.dma_copy(dst=out[r], src=total)
    return out


@nki.jit
def lnc_barrier_swap(x):
    """x: (2P, F); core r writes rows [rP, (r+1)P) of a shared scratch, waits at the barrier, then
    copies the OTHER core's half: out = x with its two row halves swapped."""
    n, f = x.shape
    r = nl.program_id(0)
    scratch = nl.ndarray((n, f), dtype=x.dtype, buffer=nl.shared_hbm)
    out = nl.ndarray((n, f), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((P, f), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[r * P:(r + 1) * P, :])
    nisa.dma_copy(dst=scratch[r * P:(r + 1) * P, :], src=t)
    nisa.core_barrier(scratch, (0, 1))
    o = 1 - r
    u = nl.ndarray((P, f), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=u, src=scratch[o * P:(o + 1) * P, :])
    nisa.dma_copy(dst=out[r * P:(r + 1) * P, :], src=u)
    return out


@nki.jit
def lnc_unmatched_send(x):
    """Only core 0 sends: its partner never answers (a deadlock)."""
    r = nl.program_id(0)
    t = nl.ndarray((P, 4), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(t, 1.0)
    if r == 0:
        u = nl.ndarray((P, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.sendrecv(src=t, dst=u, send_to_rank=1, recv_from_rank=1, pipe_id=3)
    out = nl.ndarray((P, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


@nki.jit
def expert_gemms(x, w):
    """out[e] = x.T @ w[e] for E experts, x: (K, M), w: (E, K, N).  Every PSUM tile stays referenced in
    `accs` until the kernel returns; each is read once, right after its matmul."""
    k, m = x.shape
    e_count, _, n = w.shape
    out = nl.ndarray((e_count, m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    xs = nl.ndarray((k, m), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=xs, src=x)
    accs = []
    for e in range(e_count):
        ws = nl.ndarray((k, n), dtype=w.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ws, src=w[e])
        acc = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum, name=f"acc_e{e}")
        nisa.nc_matmul(dst=acc, stationary=xs, moving=ws)
        res = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc)
        nisa.dma_copy(dst=out[e], src=res)
        accs.append(acc)
    return out


@nki.jit
def expert_gemms_all_live(x, w):
    """As expert_gemms, but every matmul runs before any tile is evacuated: E PSUM tiles live at once."""
    k, m = x.shape
    e_count, _, n = w.shape
    out = nl.ndarray((e_count, m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    xs = nl.ndarray((k, m), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=xs, src=x)
    accs = []
    for e in range(e_count):
        ws = nl.ndarray((k, n), dtype=w.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ws, src=w[e])
        acc = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum, name=f"acc_e{e}")
        nisa.nc_matmul(dst=acc, stationary=xs, moving=ws)
        accs.append(acc)
    for e in range(e_count):
        res = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=accs[e])
        nisa.dma_copy(dst=out[e], src=res)
    return out


@dataclass
class RouterParams(nl.NKIObject):
    """Configuration in nki-library's style: fields without defaults, filled in by the kernel."""

    n_rows: int
    scale: float
    bias: object = None


@nki.jit
def pe_transpose_bf16(x, bias=None):
    """out = (x + bias).T of a bf16 (P, F) tile, F <= 128: Tensor Engine transpose mode into bf16 PSUM."""
    p, f = x.shape
    params = RouterParams(bias=bias)  # n_rows / scale not passed: the 0.6 NKIObject requires no field
    params.n_rows = p
    xs = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=xs, src=x)
    if params.bias and params.n_rows == p:  # Python truth of an HBM tensor: "was a bias passed?"
        bs = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=bs, src=params.bias)
        nisa.tensor_tensor(dst=xs, data1=xs, data2=bs, op=nl.add)
    ident = nl.ndarray((p, p), dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(ident, 0.0)
    nisa.affine_select(dst=ident, pattern=[[-1, p]], channel_multiplier=1, on_true_tile=ident,
                       on_false_value=1.0, cmp_op=nl.not_equal, offset=0)
    tp = nl.ndarray((f, p), dtype=x.dtype, buffer=nl.psum)
    nisa.nc_matmul(dst=tp, stationary=xs, moving=ident, is_transpose=True)
    res = nl.ndarray((f, p), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=tp)
    out = nl.ndarray((f, p), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=res)
    return out


@nki.jit
def lnc_shard_on_i_swiglu(xT, w_gate, w_up, w_down, affinity, previous):
    """One expert's SwiGLU block sharded on the intermediate dim over an LNC2 pair, in bf16 the way
    nki-library's blockwise MoE keeps its intermediates.

    Dimensions: xT (H, T) bf16, w_gate / w_up (H, I), w_down (I, H) bf16, affinity (T, 1) fp32,
    previous (T, H) bf16; H = T = P, I = 2P (core r owns intermediate rows [rP, (r+1)P)).

    Pseudocode (core r, i = its intermediate half):
        g, u = (x @ w_gate[:, i]).T, (x @ w_up[:, i]).T           # fp32 PSUM -> fp32 SBUF
        m = bf16(bf16(silu(g)) * u)                                  # (P, T)
        part_r = bf16(m.T @ w_down[i])                               # (T, H), fp32 PSUM -> bf16
        s = bf16(part_r + part_other)                                # via sendrecv
        out[rows of core r] = bf16(s * affinity + previous)          # scalar_tensor_tensor
    """
    h, t = xT.shape
    r = nl.program_id(0)
    out = nl.ndarray((t, h), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    xs = nl.ndarray((h, t), dtype=xT.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=xs, src=xT)
    proj = []
    for w in (w_gate, w_up):
        ws = nl.ndarray((h, P), dtype=w.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ws, src=w[:, r * P:(r + 1) * P])
        acc = nl.ndarray((P, t), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=ws, moving=xs)
        sb = nl.ndarray((P, t), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=sb, src=acc)
        proj.append(sb)
    act = nl.ndarray((P, t), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.activation(dst=act, op=nl.silu, data=proj[0], scale=1.0)
    mid = nl.ndarray((P, t), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=mid, data1=act, data2=proj[1], op=nl.multiply)
    wd = nl.ndarray((P, h), dtype=w_down.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=wd, src=w_down[r * P:(r + 1) * P, :])
    down = nl.ndarray((t, h), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=down, stationary=mid, moving=wd)
    part = nl.ndarray((t, h), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.tensor_copy(dst=part, src=down)
    theirs = nl.ndarray((t, h), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.sendrecv(src=part, dst=theirs, send_to_rank=1 - r, recv_from_rank=1 - r, pipe_id=0)
    total = nl.ndarray((t, h), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=total, data1=part, data2=theirs, op=nl.add)
    aff = nl.ndarray((t, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=aff, src=affinity)
    prev = nl.ndarray((t, h), dtype=previous.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=prev, src=previous)
    res = nl.ndarray((t, h), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.scalar_tensor_tensor(dst=res, data=total, op0=nl.multiply, operand0=aff, op1=nl.add, operand1=prev)
    half = t // 2
    nisa.dma_copy(dst=out[r * half:(r + 1) * half, :], src=res[r * half:(r + 1) * half, :])
    return out
