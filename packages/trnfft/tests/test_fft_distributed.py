"""trnfft.distributed on 4 gloo ranks: slab (1-D mesh of 4) and pencil (2 x 2) FFTs against numpy.fft.

Shapes do not divide by the mesh (7 x 5 x 6 over 4 ranks leaves one rank
an empty slab after the transpose).  Tolerance, norm-wise (Parseval):
``max |err| <= testing.tolerance(float64, log2 N) * ||ref||_2`` -- the
FFT's rounding error grows like ``eps log2 N ||x||``.  Bytes each rank
sends are asserted exactly against the transpose formulas in
trnfft.distributed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from trnsci import distributed as D
from trnsci import testing

P = 4


def _checks():
    import torch
    import torch.distributed as dist
    from torch.distributed.tensor import Shard

    from trnfft import distributed as FD

    r = dist.get_rank()
    out = testing.RankChecks()
    check = out.check

    def close(name, got, ref):
        g = got.full_tensor().numpy()
        tol = testing.tolerance(torch.float64, math.ceil(math.log2(ref.size))) * np.linalg.norm(ref)
        err = float(np.max(np.abs(g - ref)))
        check(name, g.shape == ref.shape and err <= tol, (err, tol))

    def dist_(x, m, pl):
        return D.distribute(torch.from_numpy(x) if r == 0 else None, m, pl)

    def moved(t):
        return t.by_kind.get("redistribute", 0)

    sz = D.shard_sizes
    # ---- slab
    m1 = D.mesh()
    shape = (7, 5, 6)
    x = testing.random(shape, torch.complex128, seed=1)
    n0, n1 = sz(7, P)[r], sz(5, P)[r]
    fwd, back = n0 * (5 - n1) * 6 * 16, n1 * (7 - n0) * 6 * 16
    xd = dist_(x, m1, [Shard(0)])
    with D.counting() as t:
        y = FD.fftn(xd)
    close("slab fftn", y, np.fft.fftn(x))
    check("slab fftn natural bytes", moved(t) == fwd + back and y.placements == (Shard(0),), t.by_kind)
    with D.counting() as t:
        yt = FD.fftn(xd, out_layout="transposed")
    close("slab fftn transposed", yt, np.fft.fftn(x))
    check("slab fftn transposed bytes", moved(t) == fwd and yt.placements == (Shard(1),), t.by_kind)
    with D.counting() as t:
        xb = FD.ifftn(yt)
    close("slab ifftn from transposed", xb, x)
    check("slab ifftn from transposed bytes", moved(t) == back and xb.placements == (Shard(0),), t.by_kind)
    close("slab fftn ortho", FD.fftn(xd, norm="ortho"), np.fft.fftn(x, norm="ortho"))
    close("slab ifftn forward-norm", FD.ifftn(xd, norm="forward"), np.fft.ifftn(x, norm="forward"))
    x2 = testing.random((9, 6), torch.complex128, seed=2)
    close("slab 2-D fftn", FD.fftn(dist_(x2, m1, [Shard(0)])), np.fft.fftn(x2))
    xr = testing.random((7, 5, 5), torch.float64, seed=3)
    yr = FD.rfftn(dist_(xr, m1, [Shard(0)]), out_layout="transposed")
    close("slab rfftn", yr, np.fft.rfftn(xr))
    close("slab irfftn odd", FD.irfftn(yr, n_last=5), xr)
    # ---- pencil, 2 x 2
    m2 = D.mesh((2, 2))
    i, j = m2.get_coordinate()
    shape = (5, 7, 6)
    x = testing.random(shape, torch.complex128, seed=4)
    n0i, n1j, n2j, n1i = sz(5, 2)[i], sz(7, 2)[j], sz(6, 2)[j], sz(7, 2)[i]
    want = (n0i * n1j * (6 - n2j) + n0i * (7 - n1i) * n2j) * 16
    xd = dist_(x, m2, [Shard(0), Shard(1)])
    with D.counting() as t:
        yt = FD.fftn(xd, out_layout="transposed")
    close("pencil fftn transposed", yt, np.fft.fftn(x))
    check("pencil fftn bytes", moved(t) == want and yt.placements == (Shard(1), Shard(2)), (t.by_kind, want))
    close("pencil ifftn", FD.ifftn(yt), x)
    close("pencil fftn natural", FD.fftn(xd), np.fft.fftn(x))
    close("pencil ifftn from natural", FD.ifftn(xd, norm="ortho"), np.fft.ifftn(x, norm="ortho"))
    xr = testing.random(shape, torch.float64, seed=5)
    yr = FD.rfftn(dist_(xr, m2, [Shard(0), Shard(1)]))
    close("pencil rfftn", yr, np.fft.rfftn(xr))
    close("pencil irfftn", FD.irfftn(yr), xr)
    # ---- bad input: the same error on every rank
    try:
        FD.fftn(dist_(xr, m1, [Shard(0)]))
        check("fftn real input", False, "no error")
    except TypeError as e:
        check("fftn real input", "must be complex" in str(e), e)
    try:
        FD.irfftn(yr, n_last=9)
        check("irfftn bad n_last", False, "no error")
    except ValueError as e:
        check("irfftn bad n_last", "n_last" in str(e), e)
    return out


@pytest.fixture(scope="module")
def results():
    return D.spawn(_checks, P, timeout=300, collective_timeout=60)


def test_fft_distributed(results):
    testing.assert_ranks_passed(results, at_least=18)
