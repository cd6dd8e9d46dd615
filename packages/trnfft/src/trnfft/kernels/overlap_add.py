"""Windowed overlap-add of inverse-transformed frames (the second launch of ``istft``).

Dimensions
----------
``NB`` signals (batch, times 2 for a complex output's planes), ``F`` frames
of ``n`` samples each, frame step ``hop``; ``R = ceil(n / hop)`` frame
segments, ``Rh = R hop`` (frames and window zero-extended to it),
``S = F + R - 1`` output blocks of ``hop`` samples.

Dimensions
----------
``frames`` : ``[NB, F, n]`` float32 -- the inverse transforms of the frames.
``wtab``   : ``[1, Rh]`` float32 -- the window (zero-padded to ``n`` as
             ``stft`` does, then to ``Rh``).
``ienv``   : ``[S, hop]`` float32 -- ``1 / sum_t w[j - t hop]^2`` inside the
             kept output range, 0 outside (a host table, like the twiddles).
Output ``y`` : ``[NB, S, hop]`` float32, ``y[b, s, k]`` = output sample
``s hop + k`` before trimming.

Pseudocode
----------
With ``G[t, r hop + k] = w[r hop + k] frames[t, r hop + k]``::

    y[b, s, k] = ienv[s, k] * sum_{r < R} G[s - r, r hop + k]     (frames t outside [0, F) are 0)

Output blocks are tiled by ``ms = 128 - (R - 1)`` rows, so one frame tile
of ``kt <= 128`` rows (frames ``s0 - R + 1 .. min(F, s0 + ms) - 1``; rows
before frame 0 are zeros) feeds a whole output tile. The overlap-add is a
sum of ``R`` partition shifts, done on the Tensor Engine: ``R`` matmuls
with 0/1 shift matrices ``Sh_r[p, j] = [p - j == R - 1 - r]`` (built once
by ``affine_select``) accumulate in one PSUM tile -- the products are exact,
the sum is fp32. Then one Vector multiply by ``ienv`` and the store.

Closed forms (T = ``ntiles(S, ms)`` output tiles per signal, output tile i
is ``(s0_i, ms_i) = tile(i, S, ms)`` (:mod:`trnsci.nki.tiling`), its frames
end at t_i = min(F, s0_i + ms_i), rows_i = t_i - max(0, s0_i - R + 1),
KT = min(128, S), MS = min(ms, S))
---------------------------------------------------------------------
    HBM bytes read    = 4 (KT Rh + NB (n sum_i rows_i + S hop))
    HBM bytes written = 4 NB S hop
    Tensor instructions  = NB T R
    Vector instructions  = 1 + [Rh > n] + NB [R > 1] + 2 NB T    (ones, zero tail, zero rows, window, 1/env)
    GpSimd instructions  = R                                      (shift matrices)
    DMA transfers        = 1 + 3 NB T                             (window broadcast; frames, 1/env, store)
    flops (Tensor Engine) = 2 NB R hop sum_i kt_i ms_i,   kt_i = t_i - s0_i + R - 1

SBUF per partition: 4 (2 Rh + R MS + MS + hop) bytes (frames, window, shift
matrices, ones, 1/env); PSUM: one ``(ms, hop)`` fp32 tile (``hop <= 512``).
Error: per output sample ``R`` exact products summed in fp32 plus two
rounded multiplies: relative error <= (R + 2) u of the terms' magnitudes.
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import MOVING_FMAX, PMAX, cdiv, ntiles, sbuf_budget, tile

MAX_R = 64  # output tiles keep >= 65 rows


def plan(F: int, n: int, hop: int):
    """``(R, Rh, S, ms)`` of the tiling above."""
    R = cdiv(n, hop)
    S = F + R - 1
    return R, R * hop, S, PMAX - (R - 1)


def fits(F: int, n: int, hop: int) -> str | None:
    """None when the kernel takes these sizes, else why not."""
    if hop > MOVING_FMAX:
        return f"hop_length={hop} > {MOVING_FMAX} (one PSUM bank of fp32 per output tile)"
    R, Rh, S, ms = plan(F, n, hop)
    if R > MAX_R:
        return f"n_fft / hop_length = {R} segments > {MAX_R} (output tiles of 128 - (R - 1) rows)"
    need = 4 * (2 * Rh + R * min(ms, S) + min(ms, S) + hop)
    if need > sbuf_budget(reserve=8 * 1024):
        return f"the overlap-add tiles need {need} B of SBUF per partition (n_fft={n} too long)"
    return None


def overlap_add_counts(NB: int, F: int, n: int, hop: int) -> dict:
    """The closed forms above as a dict (what the emulator must count)."""
    R, Rh, S, ms = plan(F, n, hop)
    T = cdiv(S, ms)
    rows = mm = 0
    for i in range(T):
        s0, msi = tile(i, S, ms)
        rows += min(F, s0 + msi) - max(0, s0 - R + 1)
        mm += (min(F, s0 + msi) - s0 + R - 1) * msi  # contraction x stationary free of tile i
    KT = min(PMAX, S)
    return {
        "hbm_read_bytes": 4 * (KT * Rh + NB * (n * rows + S * hop)),
        "hbm_write_bytes": 4 * NB * S * hop,
        "tensor": NB * T * R,
        "vector": 1 + (Rh > n) + NB * (R > 1) + 2 * NB * T,
        "gpsimd": R,
        "dma": 1 + 3 * NB * T,
        "flops": 2 * NB * R * hop * mm,
    }


@nki.jit
def overlap_add_kernel(frames, wtab, ienv):
    """``[NB, F, n]`` frames -> ``[NB, S, hop]`` windowed overlap-add times ``ienv``."""
    NB, F, n = frames.shape
    S, hop = ienv.shape
    Rh = wtab.shape[1]
    R = Rh // hop
    ms = PMAX - (R - 1)
    KT = min(PMAX, S)
    MS = min(ms, S)
    y = nl.ndarray((NB, S, hop), dtype=nl.float32, buffer=nl.shared_hbm)

    # window on every partition (one DMA, partition stride 0), ones, shift matrices
    wbc = nl.ndarray((KT, Rh), dtype=nl.float32, buffer=nl.sbuf, name="wbc")
    nisa.dma_copy(dst=wbc, src=wtab.ap([[0, KT], [1, Rh]]))
    ones = nl.ndarray((KT, MS), dtype=nl.float32, buffer=nl.sbuf, name="ones")
    nisa.memset(dst=ones, value=1.0)
    shifts = []
    for r in nl.static_range(R):
        sh = nl.ndarray((KT, MS), dtype=nl.float32, buffer=nl.sbuf, name=f"shift{r}")
        # sh[p, j] = 1 where p - j - (R - 1 - r) == 0
        nisa.affine_select(dst=sh, pattern=[[-1, MS]], channel_multiplier=1, on_true_tile=ones,
                           on_false_value=0.0, cmp_op=nl.equal, offset=r - (R - 1))
        shifts.append(sh)

    g = nl.ndarray((KT, Rh), dtype=nl.float32, buffer=nl.sbuf, name="frames")
    if Rh > n:
        nisa.memset(dst=g[:, n:Rh], value=0.0)  # zero extension of every frame (kept across tiles)
    env = nl.ndarray((MS, hop), dtype=nl.float32, buffer=nl.sbuf, name="ienv")
    out = nl.ndarray((MS, hop), dtype=nl.float32, buffer=nl.sbuf, name="out")
    for b in nl.static_range(NB):
        if R > 1:
            nisa.memset(dst=g[0:R - 1, :], value=0.0)  # rows before frame 0 of the first tile
        for i in nl.static_range(ntiles(S, ms)):
            s0, msi = tile(i, S, ms)
            t0 = s0 - (R - 1)  # frame of row 0
            t_end = min(F, s0 + msi)
            kt = t_end - t0
            lo = max(0, -t0)  # rows before frame 0 stay zero
            nisa.dma_copy(dst=g[lo:kt, 0:n], src=frames[b, t0 + lo:t_end, :])
            nisa.tensor_tensor(dst=g[0:kt, :], data1=g[0:kt, :], data2=wbc[0:kt, :], op=nl.multiply)
            acc = nl.ndarray((msi, hop), dtype=nl.float32, buffer=nl.psum, name="acc")
            for r in nl.static_range(R):
                nisa.nc_matmul(dst=acc, stationary=shifts[r][0:kt, 0:msi], moving=g[0:kt, r * hop:(r + 1) * hop],
                               accumulate=r > 0)
            nisa.dma_copy(dst=env[0:msi, :], src=ienv[s0:s0 + msi, :])
            nisa.tensor_tensor(dst=out[0:msi, :], data1=acc, data2=env[0:msi, :], op=nl.multiply)
            nisa.dma_copy(dst=y[b, s0:s0 + msi, :], src=out[0:msi, :])
    return y
