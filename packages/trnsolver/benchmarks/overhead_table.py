"""Before/after table of docs/trnsolver.md.

trnsolver's torch path with and without the SciPy-LAPACK route
(``trnsolver._host``) against torch.linalg and scipy.linalg on the same
inputs, best-of-N with the four calls interleaved. Run as
``OMP_NUM_THREADS=1 python overhead_table.py out.json``.
"""

import json
import sys
import time

import scipy.linalg as sl
import torch

import trnsolver
from trnsolver import _host

_ELIGIBLE = _host.eligible


def _before(f):
    """``f`` with the LAPACK route off (every call on torch.linalg)."""
    def g():
        _host.eligible = lambda *t: False
        try:
            return f()
        finally:
            _host.eligible = _ELIGIBLE
    return g


def _best(fns, reps, rounds):
    res = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, f in enumerate(fns):
            t = time.perf_counter()
            for _ in range(reps):
                f()
            res[i] = min(res[i], (time.perf_counter() - t) / reps)
    return res


def _cases(A, S, b):
    An, Sn, bn = A.numpy(), S.numpy(), b.numpy()
    return {
        "eigh": (lambda: trnsolver.eigh(A), lambda: torch.linalg.eigh(A), lambda: sl.eigh(An)),
        "cholesky": (lambda: trnsolver.cholesky(S), lambda: torch.linalg.cholesky(S),
                     lambda: sl.cholesky(Sn, lower=True)),
        "solve": (lambda: trnsolver.solve(A, b), lambda: torch.linalg.solve(A, b), lambda: sl.solve(An, bn)),
        "lu": (lambda: trnsolver.lu(A), lambda: torch.linalg.lu(A), lambda: sl.lu(An)),
        "qr": (lambda: trnsolver.qr(A), lambda: torch.linalg.qr(A), lambda: sl.qr(An, mode="economic")),
        "svd": (lambda: trnsolver.svd(A), lambda: torch.linalg.svd(A, full_matrices=False),
                lambda: sl.svd(An, full_matrices=False)),
    }


def main(out):
    torch.set_num_threads(1)
    rows = []
    for n, only in [(64, None), (256, None), (1024, None), (2048, ("eigh",))]:
        for dt in (torch.float32, torch.float64):
            g = torch.Generator().manual_seed(n)
            X = torch.randn(n, n, generator=g, dtype=dt)
            A = X + X.T
            S = A @ A.T / n + torch.eye(n, dtype=dt)
            for op, (f, ft, fs) in _cases(A, S, torch.ones(n, dtype=dt)).items():
                if only and op not in only:
                    continue
                t0 = time.perf_counter()
                f()
                reps = max(1, min(200, int(0.03 / max(time.perf_counter() - t0, 1e-6))))
                rounds = 9 if n <= 256 else (3 if n <= 1024 else 2)
                tb, ta, tt, ts = _best([_before(f), f, ft, fs], reps, rounds)
                peer = min(tt, ts)
                r = dict(op=op, n=n, dtype=str(dt)[6:], before=tb, after=ta, torch=tt, scipy=ts,
                         rb=tb / peer, ra=ta / peer)
                rows.append(r)
                print(f"{op:9s} {n:5d} {r['dtype']:8s} before {tb * 1e6:11.1f} after {ta * 1e6:11.1f} "
                      f"torch {tt * 1e6:11.1f} scipy {ts * 1e6:11.1f}  {r['rb']:5.2f} -> {r['ra']:5.2f}", flush=True)
    with open(out, "w") as fh:
        json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
