"""Threefry4x32 and the Threefry stream, in uint32 word arithmetic (private).

Threefry4x32-R (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as
easy as 1, 2, 3", SC'11; the Random123 library) is the Skein block cipher's
add-rotate-xor network on four 32-bit words: no multiplies. That is why
trnrand ships it beside Philox: on a NeuronCore the only exact 32-bit
integer arithmetic is the GpSimd engine's ``tensor_tensor`` (add, multiply,
wrapping mod 2**32), the Vector/Scalar engines compute in fp32, and no
instruction gives the high word of a product -- Philox's two 32 x 32 -> 64
products per round cost 10 GpSimd + 8 Vector instructions each (16-bit
limbs, :mod:`trnrand.kernels.philox`), Threefry's round is 2 GpSimd adds and
8 Vector bitvec instructions (:mod:`trnrand.kernels.threefry`).

The block function (``rounds`` R, key ``k0..k3``, counter ``x0..x3``)::

    ks = (k0, k1, k2, k3, k0 ^ k1 ^ k2 ^ k3 ^ 0x1BD11BDA)
    inject(s): x_i += ks[(s + i) % 5] for i = 0..3, then x3 += s      (mod 2**32)
    inject(0)
    for r in 0 .. R-1:
        (a, b, c, d) = (0, 1, 2, 3) if r even else (0, 3, 2, 1)
        x_a += x_b;  x_b = rotl(x_b, ROT[r % 8][0]) ^ x_a
        x_c += x_d;  x_d = rotl(x_d, ROT[r % 8][1]) ^ x_c
        if r % 4 == 3: inject((r + 1) // 4)

with the eight rotation pairs ``ROT`` of Random123's ``threefry4x32``
(rounds 0..7, then again). Tests pin it to Random123's known answers for
13, 20 and 72 rounds.

The stream (the Philox generator's layout, :mod:`trnrand._philox`): word
``j`` of subsequence ``s`` under ``seed`` is lane ``j % 4`` of
``threefry4x32_20(counter=(b mod 2**32, b >> 32, s mod 2**32, s >> 32),
key=(seed mod 2**32, seed >> 32, 0, 0))``, ``b = j // 4``. Floats: a float32
uniform is ``(w >> 8) 2**-24`` of one word; a float32 normal pair is the
Box-Muller map of two words (the Philox stream's, :func:`box_muller`).
"""

from __future__ import annotations

import numpy as np
import torch

from .kernels.threefry import PARITY, ROT  # Random123's constants, as the kernel has them

MASK = 0xFFFFFFFF
ROUNDS = 20
MAX_ROUNDS = 72
QUARTER = 1 << 30


def _rotl(v, r: int):
    return ((v << r) | (v >> (32 - r))) & MASK


def threefry_words(x, k, rounds: int):
    """Threefry4x32-``rounds`` of four counter words ``x`` and four key words ``k``: ints or int64 tensors
    holding uint32 (broadcasting); returns the four output words."""
    x0, x1, x2, x3 = x
    ks = (k[0], k[1], k[2], k[3], k[0] ^ k[1] ^ k[2] ^ k[3] ^ PARITY)

    def inject(s, x0, x1, x2, x3):
        return ((x0 + ks[s % 5]) & MASK, (x1 + ks[(s + 1) % 5]) & MASK, (x2 + ks[(s + 2) % 5]) & MASK,
                (x3 + ks[(s + 3) % 5] + s) & MASK)

    x0, x1, x2, x3 = inject(0, x0, x1, x2, x3)
    for r in range(rounds):
        ra, rb = ROT[r % 8]
        if r % 2 == 0:
            x0 = (x0 + x1) & MASK
            x1 = _rotl(x1, ra) ^ x0
            x2 = (x2 + x3) & MASK
            x3 = _rotl(x3, rb) ^ x2
        else:
            x0 = (x0 + x3) & MASK
            x3 = _rotl(x3, ra) ^ x0
            x2 = (x2 + x1) & MASK
            x1 = _rotl(x1, rb) ^ x2
        if r % 4 == 3:
            x0, x1, x2, x3 = inject((r + 1) // 4, x0, x1, x2, x3)
    return x0, x1, x2, x3


def _threefry_torch(counter: torch.Tensor, key: torch.Tensor, rounds: int) -> torch.Tensor:
    """Torch lowering of ``threefry4x32``: int64 (..., 4), (..., 4) -> (..., 4)."""
    out = threefry_words(tuple(counter[..., i] for i in range(4)), tuple(key[..., i] for i in range(4)), rounds)
    return torch.stack(out, dim=-1)


def blocks(seed: int, subsequence: int, block0: int, nblocks: int, device="cpu") -> torch.Tensor:
    """``[nblocks, 4]`` int64 words of stream blocks ``block0 ..`` (see the module docstring)."""
    b = torch.arange(block0, block0 + nblocks, dtype=torch.int64) if block0 + nblocks < 1 << 63 else None
    if b is None:  # blocks beyond int64: Python ints for the high word
        lo = torch.tensor([(block0 + i) & MASK for i in range(nblocks)], dtype=torch.int64)
        hi = torch.tensor([(block0 + i) >> 32 for i in range(nblocks)], dtype=torch.int64)
    else:
        lo, hi = b & MASK, b >> 32
    x = (lo, hi, subsequence & MASK, subsequence >> 32)
    k = (seed & MASK, seed >> 32, 0, 0)
    return torch.stack([torch.as_tensor(w, dtype=torch.int64).expand(nblocks)
                        for w in threefry_words(x, k, ROUNDS)], 1).to(device)


def uniform_words(w: torch.Tensor) -> torch.Tensor:
    """float32 ``(w >> 8) 2**-24`` in [0, 1): exact (a 24-bit integer times a power of two)."""
    return ((w >> 8).to(torch.float32) * 2.0**-24)


def box_muller(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """float32 normals ``(z, z')`` of word pairs ``(a, b)``, the Philox stream's map: ``u1 = ((a >> 8) + 1)
    2**-24`` in (0, 1], ``r = sqrt(-2 ln u1 + 2**-100)``, ``z = r sin(m S - C)``, ``z' = r sin(m' S - C)``
    with ``m = b >> 8``, ``m' = ((b + 2**30) mod 2**32) >> 8``, ``C`` the largest float32 below pi,
    ``S = 2 C 2**-24``; each step one float32 operation in the kernel's order, with NumPy's float32
    log/sqrt/sin (those of the Philox stream's torch path and of the emulator)."""
    from ._philox import C_PI, R_BIAS, S_ANGLE

    f32 = np.float32
    an, bn = a.cpu().numpy(), b.cpu().numpy()
    u1 = ((an >> 8) + 1).astype(f32) * f32(2.0**-24)
    r = np.sqrt(np.log(u1) * f32(-2.0) + f32(R_BIAS))
    out = []
    for w in (bn, (bn + QUARTER) & MASK):
        ang = (w >> 8).astype(f32) * f32(S_ANGLE) - f32(C_PI)
        out.append(torch.from_numpy(r * np.sin(ang)))
    return out[0], out[1]


def normal_blocks(w: torch.Tensor) -> torch.Tensor:
    """``[nb, 4]`` words -> ``[nb, 4]`` float32 normals: pairs (w0, w1) and (w2, w3) of each block, row
    ``(z_A, z'_A, z_B, z'_B)`` (the Box-Muller kernel's layout)."""
    za, za2 = box_muller(w[:, 0], w[:, 1])
    zb, zb2 = box_muller(w[:, 2], w[:, 3])
    return torch.stack((za, za2, zb, zb2), 1)
