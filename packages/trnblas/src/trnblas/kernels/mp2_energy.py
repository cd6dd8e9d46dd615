"""Fused DF-MP2 pair-energy kernel: GEMM in PSUM, reduction on Vector/Scalar.

For every occupied pair ``j <= i``

    T = B_i @ B_j^T                          (nvir x nvir, contraction over naux)
    e_ij = sum_ab T_ab (2 T_ab - T_ba) / (e_i + e_j - e_a - e_b)

``T`` lives only in PSUM and SBUF: HBM sees the integrals, the orbital
energies and the pair energies, nothing else.

Dimensions
----------
``L``   : ``[naux, nocc*nvir]`` float32 or bfloat16, ``L[Q, i*nvir + a] = B[i, a, Q]``
          -- the auxiliary index Q is the partition dim (the contraction dim
          of every matmul). This is PySCF's own DF layout ``Lov``.
``eo``  : ``[1, nocc]`` float32 occupied energies (one partition).
``ev``  : ``[1, nvir]`` float32 virtual energies (one partition).
Constant ``nocc``. Output ``E`` : ``[nocc, nocc]`` float32 whose lower
triangle (``j <= i``) is written; the host mirrors it (``e_ji = e_ij``).
The upper triangle of blocks ``J > I`` is never written.

How T_ba is obtained without a transpose
----------------------------------------
With ``a`` on the partition dim, the exchange term needs ``T_ba`` in the
same layout. ``T^(ji) = B_j @ B_i^T`` has ``T^(ji)_ab = T^(ij)_ba``, so each
unordered pair ``i > j`` computes both products (stationary and moving
operands swapped) and ``i == j`` computes one (``T^(ii)`` is symmetric).
That is exactly ``nocc^2`` products -- the cost of computing every ordered
pair once -- and no transposes.

Broadcasts without partition broadcasting
-----------------------------------------
``eo`` and ``ev`` are read once, as single-partition rows. A matmul with a
``[1, 128]`` row of ones as the stationary operand copies a row onto all
128 partitions (``Erep[p, i] = e_i``, ``Vrep[p, b] = e_b``); a matmul of an
``ev`` slice against a ``[1, 1]`` one turns it into a column
(``vcol[a] = e_a``). Then ``negsum[a, b] = -(e_a + e_b)`` is one
``tensor_scalar`` per a-tile, and per pair
``recip = 1 / (negsum + (e_i + e_j))`` is two Scalar-engine ``activation``
instructions: an identity with the ``(P, 1)`` bias ``e_i + e_j``, then the
reciprocal (on trn1 the reciprocal activation takes no bias).

Reduction to pair energies
--------------------------
Per (pair, a-tile, b-tile) the Vector engine forms ``(2T - T') * T * recip``
(for ``i == j`` the Scalar engine squares ``T``: ``tensor_tensor`` may not
read both operands from PSUM)
and sums it along b into column ``j`` of a per-``i`` tile
``part[a, (at, j)]``. The sum over ``a`` (the partition dim) is a matmul:
stationary ``S_i`` (``[a, |I|]``, ones in column ``i``), moving
``part[a, |J|]``, accumulated over ``i`` and a-tiles into one PSUM tile
``[|I|, |J|]`` -- the pair-energy block, stored with one DMA.

Tiling and blocking
-------------------
TQ = 128 (naux per contraction tile), TA = 128 (a per stationary tile),
TB = 512 (b per moving tile / PSUM bank). Occupied orbitals are grouped in
blocks of ``bo`` (:func:`occ_block`, the largest that lets three L blocks
-- the current I, J and the next one being loaded -- plus the work tiles
fit the SBUF budget). Block ``I`` stays resident; blocks ``J < I`` stream.
Loops: I; J = I, then J < I; i in I; j in J (j <= i when J == I).

Pseudocode
----------
::

    Erep, Vrep, negsum = broadcasts of eo, ev         (Tensor Engine, once)
    for I in blocks of bo occupied:  L_I = load L[:, I]       (resident)
        for J in [I] + blocks before I:  L_J = L_I or load L[:, J]
            for i in I, j in J (j <= i when J == I), a-tile at:
                for b-tile bt:
                    T  = L_i[:, at]^T L_j[:, bt]          (nq matmuls; T' swapped when i != j)
                    y  = (2T - T') * T   (T * T when i == j)
                    part[at, j] += sum_b y / (negsum[at, bt] + e_i + e_j)
                E[i, J] = sum_a part                       (matmul with a one-hot selector)
            store E[I, J]

Closed forms (s = bytes per L element, nq = ceil(naux/128),
na = ceil(nvir/128), nbt = ceil(nvir/512), nb = ceil(nocc/bo),
s_I = size of block I, I = 0..nb-1)
-----------------------------------------------------------------
    HBM bytes read    = s*naux*nvir*(nocc + bo*nb*(nb-1)/2) + 4*(nocc + nvir)
                        (= bytes(B) + 4(nocc + nvir) when nb == 1)
    HBM bytes written = 4 * sum_I s_I*(I*bo + s_I)      (= 4 nocc^2 when nb == 1)
    Tensor Engine instructions
        = nocc^2 * na * nbt * nq                        T products
        + na * sum_I s_I*(I + 1)                        pair sums over a
        + ceil(nocc/512) + ceil(nvir/512) + na          broadcasts
    Scalar instructions = (2 * npairs + nocc) * na * nbt, npairs = nocc(nocc+1)/2
    matmul flops (T products) = 2 * nocc^2 * nvir^2 * naux
"""

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import cdiv, ntiles, sbuf_budget, tile, tiles

TQ = 128
TA = 128
TB = 512
SBUF_BUDGET = sbuf_budget(reserve=12 * 1024)




def _fixed_bytes(nocc, nvir, bo):
    na, nbt = cdiv(nvir, TA), cdiv(nvir, TB)
    w = min(nvir, TB)
    return 4 * (
        nocc + nvir + 2 * nvir  # eo/ev rows (partition 0), Erep, Vrep
        + na * nvir  # negsum
        + 2 * bo  # selector
        + 2 * na * bo  # part tiles (current + next)
        + 2 * nbt  # red
        + 2 * 4 * w  # recip, x, y, z work tiles, double buffered
        + 2 * w + 2  # psum->sbuf staging, eij, vcol
    ) + 3 * 4 * bo


def occ_block(nocc, nvir, naux, itemsize):
    """Occupied block size ``bo`` (<= 128): three L blocks + work tiles fit SBUF_BUDGET."""
    nq = cdiv(naux, TQ)
    per_occ = nq * nvir * itemsize
    bo = min(nocc, TA)
    while bo >= 1 and 3 * bo * per_occ + _fixed_bytes(nocc, nvir, bo) > SBUF_BUDGET:
        bo -= 1
    if bo < 1:
        raise ValueError(
            f"mp2 kernel: one occupied orbital's integrals ({per_occ} bytes per partition for "
            f"nvir={nvir}, naux={naux}) do not fit SBUF three times"
        )
    return bo


def mp2_energy_counts(nocc, nvir, naux, itemsize, bo=None):
    """The closed forms above as a dict (what the emulator must count)."""
    bo = bo or occ_block(nocc, nvir, naux, itemsize)
    nq, na, nbt, nb = cdiv(naux, TQ), cdiv(nvir, TA), cdiv(nvir, TB), cdiv(nocc, bo)
    sizes = [s for _, s in tiles(nocc, bo)]
    npairs = nocc * (nocc + 1) // 2
    return {
        "occ_block": bo,
        "hbm_read_bytes": itemsize * naux * nvir * (nocc + bo * nb * (nb - 1) // 2) + 4 * (nocc + nvir),
        "hbm_write_bytes": 4 * sum(s * (b * bo + s) for b, s in enumerate(sizes)),
        "tensor": nocc * nocc * na * nbt * nq
        + na * sum(s * (b + 1) for b, s in enumerate(sizes))
        + cdiv(nocc, TB) + cdiv(nvir, TB) + na,
        "scalar": (2 * npairs + nocc) * na * nbt,
        "flops_T": 2 * nocc * nocc * nvir * nvir * naux,
    }


def _replicate_row(dst, row, ones_row, width):
    """dst[p, x] = row[0, x] on all partitions of dst (a K=1 matmul per 512 columns)."""
    for c in nl.static_range(ntiles(width, TB)):
        c0, w = tile(c, width, TB)
        ps = nl.ndarray((dst.shape[0], w), dtype=nl.float32, buffer=nl.psum, name="bcast")
        nisa.nc_matmul(ps, ones_row, row[0:1, c0:c0 + w])
        nisa.tensor_copy(dst[:, c0:c0 + w], ps)


def _load_block(L, b0, bs, nvir, naux, nq):
    """SBUF [128, nq*bs*nvir]: q-tile t of block rows i in [b0, b0+bs) at columns t*bs*nvir."""
    width = bs * nvir
    blk = nl.ndarray((TQ, nq * width), dtype=L.dtype, buffer=nl.sbuf, name="l_block")
    for t in nl.static_range(nq):
        q0, qq = tile(t, naux, TQ)
        nisa.dma_copy(dst=blk[0:qq, t * width:(t + 1) * width], src=L[q0:q0 + qq, b0 * nvir:(b0 + bs) * nvir])
    return blk


@nki.jit
def mp2_energy_kernel(L, eo, ev, nocc, bo=None):
    """Pair energies ``e_ij`` (lower triangle) from ``L [naux, nocc*nvir]``, ``eo [1, nocc]``, ``ev [1, nvir]``.

    ``bo`` (compile-time, optional) overrides the occupied block size.
    """
    naux = L.shape[0]
    nvir = L.shape[1] // nocc
    nq, na, nbt = cdiv(naux, TQ), cdiv(nvir, TA), cdiv(nvir, TB)
    bo = min(bo or occ_block(nocc, nvir, naux, L.dtype.itemsize), nocc)
    nb = cdiv(nocc, bo)
    out = nl.ndarray((nocc, nocc), dtype=nl.float32, buffer=nl.shared_hbm)

    # ---- orbital energies: one read each, broadcast on the Tensor Engine
    eo_row = nl.load(eo)
    ev_row = nl.load(ev)
    ones_row = nl.ndarray((1, TA), dtype=nl.float32, buffer=nl.sbuf, name="ones_row")
    nisa.memset(ones_row, 1.0)
    erep = nl.ndarray((TA, nocc), dtype=nl.float32, buffer=nl.sbuf, name="erep")
    _replicate_row(erep, eo_row, ones_row, nocc)
    vrep = nl.ndarray((TA, nvir), dtype=nl.float32, buffer=nl.sbuf, name="vrep")
    _replicate_row(vrep, ev_row, ones_row, nvir)
    negsum = nl.ndarray((TA, na * nvir), dtype=nl.float32, buffer=nl.sbuf, name="negsum")
    for at in nl.static_range(na):
        a0, aa = tile(at, nvir, TA)
        ps = nl.ndarray((aa, 1), dtype=nl.float32, buffer=nl.psum, name="vcol_ps")
        nisa.nc_matmul(ps, ev_row[0:1, a0:a0 + aa], ones_row[0:1, 0:1])
        vcol = nl.ndarray((aa, 1), dtype=nl.float32, buffer=nl.sbuf, name="vcol")
        nisa.tensor_copy(vcol, ps)
        # negsum[a, b] = (e_b + e_a) * -1
        nisa.tensor_scalar(negsum[0:aa, at * nvir:(at + 1) * nvir], vrep[0:aa, :],
                           nl.add, vcol, op1=nl.multiply, operand1=-1.0)
    # selector: column bo-1 is ones, so sel[:, bo-1-ii : bo-1-ii+s] is one-hot at column ii
    sel = nl.ndarray((TA, 2 * bo - 1), dtype=nl.float32, buffer=nl.sbuf, name="selector")
    nisa.memset(sel, 0.0)
    nisa.memset(sel[:, bo - 1:bo], 1.0)

    for bi in nl.static_range(nb):
        i0, si = tile(bi, nocc, bo)
        li = _load_block(L, i0, si, nvir, naux, nq)
        # J == I first (resident block), then the earlier blocks
        for bj in [bi] + list(range(bi)):
            j0, sj = tile(bj, nocc, bo)
            diag = bj == bi
            lj = li if diag else _load_block(L, j0, sj, nvir, naux, nq)
            eblk = nl.ndarray((si, sj), dtype=nl.float32, buffer=nl.psum, name="pair_block")
            for ii in nl.static_range(si):
                part = nl.ndarray((TA, na * sj), dtype=nl.float32, buffer=nl.sbuf, name="part")
                if diag:
                    nisa.memset(part, 0.0)  # columns j > i stay zero
                for jj in nl.static_range(ii + 1 if diag else sj):
                    same = diag and jj == ii
                    eij = nl.ndarray((TA, 1), dtype=nl.float32, buffer=nl.sbuf, name="eij")
                    nisa.tensor_tensor(eij, erep[:, i0 + ii:i0 + ii + 1], erep[:, j0 + jj:j0 + jj + 1], nl.add)
                    for at in nl.static_range(na):
                        a0, aa = tile(at, nvir, TA)
                        red = nl.ndarray((TA, nbt), dtype=nl.float32, buffer=nl.sbuf, name="red") if nbt > 1 else None
                        for bt in nl.static_range(nbt):
                            b0, bb = tile(bt, nvir, TB)
                            t_ab = nl.ndarray((aa, bb), dtype=nl.float32, buffer=nl.psum, name="T")
                            for qt in nl.static_range(nq):
                                _, qq = tile(qt, naux, TQ)
                                ci = qt * si * nvir + ii * nvir
                                cj = qt * sj * nvir + jj * nvir
                                nisa.nc_matmul(t_ab, li[0:qq, ci + a0:ci + a0 + aa], lj[0:qq, cj + b0:cj + b0 + bb])
                            # recip = 1 / (negsum + e_ij): trn1's reciprocal activation takes no bias,
                            # so the (P, 1) bias goes into an identity activation first (both Scalar)
                            recip = nl.ndarray((aa, bb), dtype=nl.float32, buffer=nl.sbuf, name="recip")
                            nisa.activation(recip, nl.copy, negsum[0:aa, at * nvir + b0:at * nvir + b0 + bb],
                                            bias=eij[0:aa, :])
                            nisa.activation(recip, nl.reciprocal, recip)
                            y = nl.ndarray((aa, bb), dtype=nl.float32, buffer=nl.sbuf, name="y")
                            if same:
                                # 2T - T^T = T, so y = T * T: one Scalar square (tensor_tensor may not
                                # read both inputs from PSUM)
                                nisa.activation(y, nl.square, t_ab)
                            else:
                                t_ba = nl.ndarray((aa, bb), dtype=nl.float32, buffer=nl.psum, name="Tx")
                                for qt in nl.static_range(nq):
                                    _, qq = tile(qt, naux, TQ)
                                    ci = qt * si * nvir + ii * nvir
                                    cj = qt * sj * nvir + jj * nvir
                                    nisa.nc_matmul(t_ba, lj[0:qq, cj + a0:cj + a0 + aa],
                                                   li[0:qq, ci + b0:ci + b0 + bb])
                                x = nl.ndarray((aa, bb), dtype=nl.float32, buffer=nl.sbuf, name="x")
                                nisa.tensor_scalar(x, t_ab, nl.multiply, 2.0)
                                nisa.tensor_tensor(x, x, t_ba, nl.subtract)
                                nisa.tensor_tensor(y, x, t_ab, nl.multiply)
                            z = nl.ndarray((aa, bb), dtype=nl.float32, buffer=nl.sbuf, name="z")
                            nisa.tensor_tensor(z, y, recip, nl.multiply)
                            col = part[0:aa, at * sj + jj:at * sj + jj + 1] if red is None else red[0:aa, bt:bt + 1]
                            nisa.tensor_reduce(col, nl.add, z, axis=1)
                        if red is not None:
                            nisa.tensor_reduce(part[0:aa, at * sj + jj:at * sj + jj + 1], nl.add,
                                               red[0:aa, 0:nbt], axis=1)
                # sum over a (partitions) into row ii of the pair block
                for at in nl.static_range(na):
                    _, aa = tile(at, nvir, TA)
                    nisa.nc_matmul(eblk, sel[0:aa, bo - 1 - ii:bo - 1 - ii + si], part[0:aa, at * sj:(at + 1) * sj])
            res = nl.ndarray((si, sj), dtype=nl.float32, buffer=nl.sbuf, name="pair_sbuf")
            nisa.tensor_copy(res, eblk)
            nl.store(out[i0:i0 + si, j0:j0 + sj], value=res)
    return out
