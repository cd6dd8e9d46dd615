"""DF-MP2 across the ranks of a torch.distributed process group (``trnsci.chem.df_mp2(mf, process_group=...)``).

Which index to split
--------------------
The pipeline has two natural splits and needs both:

* **auxiliary functions** for the integrals: the three-centre integrals
  ``(mn|P)`` and their AO->MO transform ``V[i, a, P]`` are independent per
  auxiliary function ``P``, so splitting ``P`` shares the ``O(nao^2 naux)``
  integral work and the ``2 nocc nao naux (nao + nvir)`` transform flops
  without any communication.  Splitting the occupied index here instead
  would make every rank compute *all* the integrals (replicated work).
* **occupied orbitals** for the fit and the energy: the fit ``B = V L^{-T}``
  mixes all auxiliary functions of one ``(i, a)``, and the energy is
  *quadratic* in ``(ia|jb) = sum_Q B_iaQ B_jbQ``: with ``Q`` split, each
  rank only holds a partial sum of ``(ia|jb)``, and combining them would
  mean all-reducing ``nocc^2 nvir^2`` numbers -- more than ``B`` itself
  whenever ``nocc nvir > naux``, i.e. always in practice.

So: rank ``r`` evaluates the integrals of its block ``Q_r`` of auxiliary
shells and transforms them for all orbitals (``V[:, :, Q_r]``, ``|V|/P``
memory); one all-to-all turns that into ``V[I_r, :, :]`` for its occupied
block ``I_r`` (it sends ``sum_{s != r} nocc_s nvir naux_r`` words, about
``|V| (P-1) / P^2``); the fit runs locally (the ``naux^2`` metric is
replicated: cheap); pair energies ``e_ij`` for ``i in I_r`` need ``B_j`` of
the other blocks, which travel around a ring for ``floor(P/2)`` steps (rank
r sends ``floor(P/2)`` blocks of ``nocc_s nvir naux`` words; each unordered
block pair is computed once -- for even P the pair met in the last step is
split in half between its two ranks, which keeps the work balanced);
finally the ``nocc x nocc``
pair-energy matrix is summed over ranks with one all-reduce.  Memory per
rank: ``|V|/P`` and two ``B`` blocks, falling as ``1/P``.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from trnsci import chem as C
from trnsci import distributed as D

__all__ = ["df_mp2_distributed", "aux_shell_ranges", "scf_integrals_distributed"]


def aux_shell_ranges(auxmol, P: int) -> list[tuple[int, int, int, int]]:
    """``(s0, s1, p0, p1)`` per rank: contiguous auxiliary shells with function counts near ``naux / P``."""
    loc = np.asarray(auxmol.ao_loc_nr())
    naux = int(loc[-1])
    cuts = [0]
    for r in range(1, P):
        target = naux * r / P
        s = int(np.argmin(np.abs(loc - target)))
        cuts.append(max(cuts[-1], s))
    cuts.append(auxmol.nbas)
    return [(a, b, int(loc[a]), int(loc[b])) for a, b in zip(cuts[:-1], cuts[1:])]


def _cross_pairs(Bi, Bj, eo_i, eo_j, ev) -> torch.Tensor:
    """``e_ij`` for every ``i`` of block ``Bi`` and ``j`` of block ``Bj`` (blocks of B, (n, nvir, naux))."""
    import trnblas

    ni, nvir, naux = Bi.shape
    nj = Bj.shape[0]
    out = torch.zeros(ni, nj, dtype=torch.float64)
    if ni == 0 or nj == 0:
        return out
    Bjf = Bj.reshape(nj * nvir, naux)
    dv = ev.double()[:, None, None] + ev.double()[None, None, :]  # e_a + e_b over (a, j, b)
    for i in range(ni):
        T = trnblas.gemm(1.0, Bi[i], Bjf, transB=True).view(nvir, nj, nvir).double()  # (ia|jb) as [a, j, b]
        denom = (eo_i[i].double() + eo_j.double())[None, :, None] - dv
        out[i] = (T * (2 * T - T.permute(2, 1, 0)) / denom).sum(dim=(0, 2))
    return out


def _pair_block(pairs, B, Bs, r, s, occ_off, eo, ev, half: bool) -> None:
    """Fill ``pairs[I_r, I_s]`` (and its transpose) from this rank's ``B`` and block ``s``'s ``Bs``.

    ``half``: the last step of an even ring, where ranks r and s see each
    other's blocks at once; each computes half of the block pair (the lower
    rank the first ``ceil(n/2)`` of its own rows, the higher rank the rest).
    """
    mine, other = slice(occ_off[r], occ_off[r + 1]), slice(occ_off[s], occ_off[s + 1])
    if half:
        if r < s:
            h = -(-(mine.stop - mine.start) // 2)
            mine, B = slice(mine.start, mine.start + h), B[:h]
        else:
            h = -(-(other.stop - other.start) // 2)
            other, Bs = slice(other.start + h, other.stop), Bs[h:]
    e = _cross_pairs(B, Bs, eo[mine], eo[other], ev)
    pairs[mine, other] = e
    pairs[other, mine] = e.T


def df_mp2_distributed(mf, process_group, *, auxbasis=None, frozen=None, dtype=torch.float64, backend=None,
                       max_memory=None, pair_energies=False, timeout=None):
    """The body of ``trnsci.chem.df_mp2(..., process_group=...)``; every rank passes the same ``mf``."""
    import torch.distributed as dist

    import trnblas

    where = "df_mp2"
    g = process_group
    t_start = time.perf_counter()
    with D.agree(where, g, timeout):
        C._pyscf()
        dtype = C._check_dtype(dtype, where)
        c_occ, c_vir, eo, ev, nfrozen = C._orbitals(mf, frozen, where)
        mm = C._max_memory(max_memory, getattr(mf, "max_memory", 4000), where)
        auxmol, aux = C._auxmol(mf, auxbasis)
    P, r = dist.get_world_size(g), dist.get_rank(g)
    nocc, nvir = c_occ.shape[1], c_vir.shape[1]
    occ_sizes, occ_off = D.shard_sizes(nocc, P), D.shard_offsets(nocc, P)
    timings, backends = {}, {}
    with D.counting() as traffic:
        with C._backend_scope(backend):
            cderi = C._cached_cderi(mf, auxbasis)
            with D.agree(where, g, timeout):
                if cderi is not None:
                    off = D.shard_offsets(cderi.shape[0], P)
                    a0, a1 = off[r], off[r + 1]
                    kind, M = None, None
                    V = _v_from_cderi(cderi[a0:a1], c_occ, c_vir, timings, backends)
                else:
                    a0, a1, kind, M, V = _v_block(mf.mol, auxmol, c_occ, c_vir, mm, P, r, timings, backends)
            naux = auxmol.nao_nr() if cderi is None else cderi.shape[0]
            naux_sizes = [int(x) for x in D.all_gather(torch.tensor([a1 - a0]), 0, [1] * P, g, timeout)]
            # aux blocks -> occupied blocks: one all-to-all
            t0 = time.perf_counter()
            chunks = [V[occ_off[s]:occ_off[s + 1]] for s in range(P)]
            got = D.all_to_all(chunks, [(occ_sizes[r], nvir, naux_sizes[q]) for q in range(P)], V.dtype, g,
                               timeout, kind="transpose")
            Vo = torch.cat(got, dim=2) if got else V[:0]
            del V, chunks, got
            timings["comm"] = time.perf_counter() - t0
            with D.agree(where, g, timeout), C._stage("fit", timings, backends):
                Vf = Vo.reshape(occ_sizes[r] * nvir, naux)
                if kind is None:  # cached fit: V is B already
                    B = Vf
                elif Vf.shape[0] == 0:
                    B = Vf if kind == "cd" else Vf @ M
                elif kind == "cd":
                    B = trnblas.trsm(1.0, M, Vf, side="right", uplo="lower", trans=True)
                else:
                    B = trnblas.gemm(1.0, Vf, M)
                B = B.reshape(occ_sizes[r], nvir, B.shape[1]).to(dtype)
                nfit = B.shape[2]
            eo_t, ev_t = torch.from_numpy(eo), torch.from_numpy(ev)
            pairs = torch.zeros(nocc, nocc, dtype=torch.float64)
            mine = slice(occ_off[r], occ_off[r + 1])
            with D.agree(where, g, timeout), C._stage("energy", timings, backends):
                if occ_sizes[r]:
                    pairs[mine, mine] = trnblas.mp2_pair_energies(B, eo_t[mine], ev_t, max_memory=mm).double()
            cur = B
            for t in range(1, P // 2 + 1):
                dst, src = (r + 1) % P, (r - 1) % P
                s = (r - t) % P  # the block arriving now
                t0 = time.perf_counter()
                chunks = [torch.empty(0, dtype=dtype)] * P
                shapes = [(0,)] * P
                chunks[dst] = cur
                shapes[src] = (occ_sizes[s], nvir, nfit)
                got = D.all_to_all(chunks, shapes, dtype, g, timeout, kind="ring")
                timings["comm"] += time.perf_counter() - t0
                cur = got[src]
                with D.agree(where, g, timeout), C._stage("energy", timings, backends):
                    _pair_block(pairs, B, cur, r, s, occ_off, eo_t, ev_t, half=(2 * t == P))
            t0 = time.perf_counter()
            D.all_reduce(pairs, group=g, timeout=timeout, kind="pairs")
            timings["comm"] += time.perf_counter() - t0
    e = float(pairs.sum())
    for k in C.STAGES:
        timings.setdefault(k, 0.0)
        backends.setdefault(k, "torch")
    timings["total"] = time.perf_counter() - t_start
    return C.DFMP2Result(
        e_corr=e, e_tot=float(mf.e_tot) + e, e_hf=float(mf.e_tot), nao=mf.mol.nao_nr(), naux=nfit,
        nocc=nocc, nvir=nvir, nfrozen=nfrozen, auxbasis=aux, dtype=dtype,
        timings={k: timings[k] for k in (*C.STAGES, "comm", "total")},
        backends={k: backends[k] for k in C.STAGES}, pair_energies=pairs if pair_energies else None,
        ranks=P, bytes_sent=dict(traffic.by_kind), naux_per_rank=naux_sizes)


def _v_from_cderi(rows, c_occ, c_vir, timings, backends):
    """``V[:, :, rows]`` from a DF mean field's fitted integrals (already ``L^{-1} (P|mn)``)."""
    for name in ("metric", "int3c"):
        timings[name] = 0.0
        backends[name] = "cached (mf.with_df)"
    nocc, nvir = c_occ.shape[1], c_vir.shape[1]
    V = torch.empty((nocc, nvir, rows.shape[0]), dtype=torch.float64)
    with C._stage("ao2mo", timings, backends):
        if rows.shape[0]:
            C._ao2mo_block(np.ascontiguousarray(rows).T, (0, rows.shape[0]), Co=torch.from_numpy(c_occ),
                           Cv=torch.from_numpy(c_vir), V=V, p0=0)
    return V


def _v_block(mol, auxmol, c_occ, c_vir, max_memory_mb, P, r, timings, backends):
    """This rank's ``V[:, :, p0:p1]`` over its auxiliary shells, plus the (replicated) metric factor."""
    with C._stage("metric", timings, backends):
        j2c = torch.from_numpy(auxmol.intor("int2c2e", hermi=1))
        kind, M, _ = C._factor_metric(j2c)
    s0, s1, p0, p1 = aux_shell_ranges(auxmol, P)[r]
    nao = mol.nao_nr()
    nocc, nvir = c_occ.shape[1], c_vir.shape[1]
    V = torch.empty((nocc, nvir, p1 - p0), dtype=torch.float64)
    if p1 == p0:
        return p0, p1, kind, M, V
    per_aux = 8 * (nao * (nao + 1) // 2 + nao * nao + nocc * nao + nocc * nvir)
    budget = max_memory_mb * 2**20 - 8 * nocc * nvir * (p1 - p0)
    max_aux = max(1, int(budget / per_aux)) if budget < per_aux * (p1 - p0) else p1 - p0
    loc = auxmol.ao_loc_nr()
    read = C._int3c_reader(mol, auxmol)
    Co, Cv = torch.from_numpy(c_occ), torch.from_numpy(c_vir)
    a = s0
    while a < s1:
        b = a + 1
        while b < s1 and loc[b + 1] - loc[a] <= max_aux:
            b += 1
        with C._stage("int3c", timings, backends, "pyscf"):
            pqL = read(a, b)
        with C._stage("ao2mo", timings, backends):
            C._ao2mo(pqL, int(loc[b] - loc[a]), nao, Co, Cv, V, int(loc[a]) - p0)
        a = b
    return p0, p1, kind, M, V


# ------------------------------------------------------------------ density-fitted SCF

def scf_integrals_distributed(mol, auxmol, max_memory_mb, timings, backends, group, timeout=None):
    """``(cderi, (p0, p1))`` for ``trnsci.chem.scf(..., process_group=group)``.

    The SCF splits the auxiliary index as DF-MP2 does: rank ``r`` evaluates the
    three-centre integrals ``(P|mn)`` of its contiguous auxiliary shells
    ``[p0, p1)`` (:func:`aux_shell_ranges`), one all-gather shares those raw rows
    (rank ``r`` sends ``(P-1) naux_r npair`` words, ``npair = nao (nao+1)/2``)
    so that every rank applies the (replicated, ``naux^2``) metric factor and
    holds the fitted ``b = L^{-1} (P|mn)`` the result carries. Each cycle then
    builds J and K from its own rows ``b[p0:p1]`` only -- ``1/P`` of the J/K
    flops -- and one all-reduce of ``(1 + spins) nao^2`` words sums them
    (kind ``"jk"``; :func:`trnsci.distributed.all_reduce` counts
    ``n - c_r + (P-1) c_r`` words with ``c_r`` the rank's shard of ``n``).
    """
    import torch.distributed as dist

    from trnsci import chem_scf

    P, r = dist.get_world_size(group), dist.get_rank(group)
    ranges = aux_shell_ranges(auxmol, P)
    s0, s1, p0, p1 = ranges[r]
    with D.agree("scf", group, timeout):
        raw, (kind, M) = chem_scf._fitted_integrals(mol, auxmol, max_memory_mb, timings, backends,
                                                    aux_range=(s0, s1, p0, p1))
    t0 = time.perf_counter()
    full = D.all_gather(torch.from_numpy(raw), 0, [b[3] - b[2] for b in ranges], group, timeout)
    timings["comm"] = timings.get("comm", 0.0) + time.perf_counter() - t0
    import trnblas

    with D.agree("scf", group, timeout), C._stage("fit", timings, backends):
        b = chem_scf._apply_fit(kind, M, full, trnblas)
    return np.ascontiguousarray(b.numpy()), (p0, p1)
