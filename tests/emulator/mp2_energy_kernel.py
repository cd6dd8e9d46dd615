"""Calibration kernel: the fused MP2 energy reduction, shaped like the published trn1 profile.

The one NKI kernel profile measured on a trn1 NeuronCore that has been
published (trnblas's fused MP2 energy reduction, Neuron Profiler, issue #24)
streams, per occupied pair block (i, j), the fp32 amplitude tiles
T[i, j] and their transposed partners T[j, i] in strips of P_TILE = 112 rows
by NVIR = 448 columns, and accumulates

    E = sum_{i in chunk, j, a, b} T[i,j,a,b] (2 T[i,j,a,b] - T[j,i,a,b]) / (e_i + e_j - e_a - e_b)

on the Vector Engine.  This kernel has that structure, written for NKI 0.6:
the expression tree of the published kernel's source (2T by a multiply,
minus the partner, times T, times the reciprocal of the denominator built
per strip, free-axis sum, accumulate) with one Scalar Engine instruction per
strip as in the profile (16,407 ACT instructions for 16,384 strips).  The
published kernel's compiled instruction mix is unknown (its profile shows
~24.6 Vector instructions per strip; this kernel issues 7).

Dimensions
----------
t        HBM [NOCC, NOCC, NVIR, NVIR] fp32, T[i, j, a, b]; T[j, i] is the
         transposed partner of T[i, j] for real amplitudes.
eps_occ  compile-time tuple of NOCC orbital energies; eps_vir: NVIR.
i0, ic   the occupied chunk: i in [i0, i0 + ic); j runs over all NOCC.
P_TILE   rows per strip (112 for NVIR = 448), NSTRIP = NVIR / P_TILE.

Pseudocode
----------
setup (once):   C[p, b] = e_b                 NVIR column memsets      (Vector)
                for s: A_s = transpose(C[:, strip s])[:, 0] -> e_a(s)  (Tensor + Vector copy)
                       G_s = -(C + A_s)       = -(e_a + e_b)          (Vector)
                acc = 0                                               (Vector)
for i in chunk, j < NOCC, strip s:
    x  = load T[i, j, strip s];  y = load T[j, i, strip s]            (2 DMA)
    x2 = 2 x                                  tensor_scalar            (Scalar)
    d  = G_s + (e_i + e_j)                    tensor_scalar            (Vector)
    r  = 1 / d                                reciprocal               (Vector)
    u  = x2 - y;  w = u * x;  v = w * r       3 tensor_tensor          (Vector)
    acc += sum_b v                            tensor_reduce + add      (Vector)
E = sum over partitions of acc                tensor_partition_reduce  (GpSimd); store 4 B

Closed form (K = ic * NOCC pair blocks, NSTRIP strips per block)
-----------------------------------------------------------------
HBM read bytes   = K * NSTRIP * 2 * P_TILE * NVIR * 4 (the T tiles only; the
                   orbital energies are compile-time constants)
HBM write bytes  = 4
DMA transfers    = 2 * NSTRIP * K + 1
Vector           = 7 * NSTRIP * K + NVIR + 2 * NSTRIP + 1
Scalar           = NSTRIP * K
Tensor           = NSTRIP
GpSimd           = 1
Every count is affine in K, so quadratic in the pair count when ic = NOCC.
"""

from trnsci.nki.emulator import nisa, nl

P_TILE = 112


def closed_form(ic, nocc, nvir=448, p_tile=P_TILE):
    """The kernel's exact counters for a chunk of ic occupied orbitals."""
    nstrip = nvir // p_tile
    k = ic * nocc
    return {
        "hbm_read_bytes": k * nstrip * 2 * p_tile * nvir * 4,
        "hbm_write_bytes": 4,
        "dma_transfers": 2 * nstrip * k + 1,
        "vector": 7 * nstrip * k + nvir + 2 * nstrip + 1,
        "scalar": nstrip * k,
        "tensor": nstrip,
        "gpsimd": 1,
    }


def mp2_energy_kernel(t, eps_occ, eps_vir, i0=0, ic=None, p_tile=P_TILE):
    """E_MP2 contribution of occupied chunk [i0, i0 + ic) (see the module doc)."""
    nocc, _, nvir, _ = t.shape
    ic = nocc - i0 if ic is None else ic
    nstrip = nvir // p_tile
    assert nstrip * p_tile == nvir and len(eps_occ) == nocc and len(eps_vir) == nvir
    f32 = nl.float32

    # denominators' virtual part, built once from the compile-time energies
    col = nl.ndarray((p_tile, nvir), dtype=f32, buffer=nl.sbuf)
    for b in range(nvir):
        nisa.memset(col[:, b:b + 1], float(eps_vir[b]))
    neg = []
    for s in range(nstrip):
        tp = nl.ndarray((p_tile, p_tile), dtype=f32, buffer=nl.psum)
        nisa.nc_transpose(tp, col[:, s * p_tile:(s + 1) * p_tile])
        ea = nl.ndarray((p_tile, 1), dtype=f32, buffer=nl.sbuf)
        nisa.tensor_copy(ea, tp[:, 0:1])
        g = nl.ndarray((p_tile, nvir), dtype=f32, buffer=nl.sbuf)
        nisa.tensor_scalar(g, col, nl.add, ea, op1=nl.multiply, operand1=-1.0)
        neg.append(g)
        del tp, ea
    acc = nl.ndarray((p_tile, 1), dtype=f32, buffer=nl.sbuf)
    nisa.memset(acc, 0.0)

    for i in range(i0, i0 + ic):
        for j in range(nocc):
            eij = float(eps_occ[i]) + float(eps_occ[j])
            for s in range(nstrip):
                rows = slice(s * p_tile, (s + 1) * p_tile)
                x = nl.ndarray((p_tile, nvir), dtype=f32, buffer=nl.sbuf)
                y = nl.ndarray((p_tile, nvir), dtype=f32, buffer=nl.sbuf)
                nisa.dma_copy(x, t[i, j, rows, :])
                nisa.dma_copy(y, t[j, i, rows, :])
                x2 = nl.ndarray((p_tile, nvir), dtype=f32, buffer=nl.sbuf)
                nisa.tensor_scalar(x2, x, nl.multiply, 2.0, engine=nisa.engine.scalar)
                d = nl.ndarray((p_tile, nvir), dtype=f32, buffer=nl.sbuf)
                nisa.tensor_scalar(d, neg[s], nl.add, eij)
                r = nl.ndarray((p_tile, nvir), dtype=f32, buffer=nl.sbuf)
                nisa.reciprocal(r, d)
                u = nl.ndarray((p_tile, nvir), dtype=f32, buffer=nl.sbuf)
                nisa.tensor_tensor(u, x2, y, nl.subtract)
                w = nl.ndarray((p_tile, nvir), dtype=f32, buffer=nl.sbuf)
                nisa.tensor_tensor(w, u, x, nl.multiply)
                nisa.tensor_tensor(u, w, r, nl.multiply)
                part = nl.ndarray((p_tile, 1), dtype=f32, buffer=nl.sbuf)
                nisa.tensor_reduce(part, nl.add, u, axis=1)
                nisa.tensor_tensor(acc, acc, part, nl.add)
                del x, y, x2, d, r, u, w, part

    tot = nl.ndarray((1, 1), dtype=f32, buffer=nl.sbuf)
    nisa.tensor_partition_reduce(tot, nl.add, acc)
    out = nl.ndarray((1, 1), dtype=f32, buffer=nl.shared_hbm)
    nisa.dma_copy(out, tot)
    return out
