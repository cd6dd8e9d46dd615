"""Schur decomposition on the host: Householder Hessenberg reduction, Francis QR, block reordering.

The numerics of :func:`trnsolver.schur`'s torch lowering, on NumPy arrays
(float64/complex128 or float32/complex64, one matrix):

* :func:`hessenberg` -- ``A = Q H Q^H`` by ``n - 2`` Householder reflectors.
* :func:`francis_real` -- the implicit double-shift QR iteration on a real
  Hessenberg matrix (Francis; Golub & Van Loan, Algorithm 7.5.1-7.5.2):
  3x3 reflectors chase the bulge; a subdiagonal entry below
  ``eps (|h_kk| + |h_k+1,k+1|)`` deflates; exceptional shifts at
  iterations 10 and 20 of one window. Converged 2x2 blocks are put in
  standard form (:func:`_standardize`): real eigenvalues split into two
  1x1 blocks, complex pairs get equal diagonal entries.
* :func:`francis_complex` -- the implicit single-shift (Wilkinson shift) QR
  iteration on a complex Hessenberg matrix with 2x2 unitary rotations.
* :func:`reorder` -- moves the selected eigenvalues (blocks) to the top
  left by swaps of adjacent blocks: a block pair ``[[T11, T12], [0, T22]]``
  is swapped by the orthogonal factor of ``[X; -I]``, ``X`` solving the
  Sylvester equation ``T11 X - X T22 = T12`` (Bai & Demmel's direct swap).

Every transformation is applied to the whole of ``T`` and ``Z``, so
``A = Z T Z^H`` holds to rounding throughout.
"""

from __future__ import annotations

import numpy as np

__all__ = ["hessenberg", "francis_real", "francis_complex", "reorder", "blocks", "eigenvalues"]


class NoConvergence(Exception):
    """The QR iteration did not deflate a window within its iteration budget."""


def _house(x):
    """``(v, beta)`` with ``(I - beta v v^H) x = alpha e_1``, ``|alpha| = ||x||`` (beta 0: nothing to do)."""
    v = np.array(x, copy=True)
    nrm = np.linalg.norm(v)
    if nrm == 0.0 or (v.size > 1 and np.linalg.norm(v[1:]) == 0.0):
        return v, 0.0
    x0 = v[0]
    phase = x0 / abs(x0) if x0 != 0 else 1.0
    v[0] = x0 + phase * nrm  # alpha = -phase * ||x||: no cancellation in v[0]
    return v, 2.0 / np.real(np.vdot(v, v))


def hessenberg(A):
    """``(H, Q)`` with ``A = Q H Q^H``, ``H`` upper Hessenberg (entries below the subdiagonal exactly 0)."""
    H = np.array(A, copy=True)
    n = H.shape[0]
    Q = np.eye(n, dtype=H.dtype)
    for k in range(n - 2):
        v, beta = _house(H[k + 1:, k])
        if beta == 0.0:
            continue
        H[k + 1:, k:] -= beta * np.outer(v, v.conj() @ H[k + 1:, k:])
        H[:, k + 1:] -= beta * np.outer(H[:, k + 1:] @ v, v.conj())
        Q[:, k + 1:] -= beta * np.outer(Q[:, k + 1:] @ v, v.conj())
        H[k + 2:, k] = 0
    return H, Q


def _negligible(H, k, eps):
    """Whether the subdiagonal entry ``H[k, k-1]`` may be set to zero."""
    s = abs(H[k - 1, k - 1]) + abs(H[k, k])
    if s == 0.0:
        s = np.abs(H).sum() / H.shape[0]
    return abs(H[k, k - 1]) <= eps * s


def _rotate(T, Z, k, G):
    """``T <- G^H T G``, ``Z <- Z G`` on rows/columns ``k, k+1`` (``G`` a 2x2 unitary)."""
    T[k:k + 2, :] = G.conj().T @ T[k:k + 2, :]
    T[:, k:k + 2] = T[:, k:k + 2] @ G
    Z[:, k:k + 2] = Z[:, k:k + 2] @ G


def _standardize(T, Z, k):
    """Put the real 2x2 block at ``(k, k)`` in standard form; True if it stays a 2x2 (complex) block."""
    a, b, c, d = T[k, k], T[k, k + 1], T[k + 1, k], T[k + 1, k + 1]
    if c == 0.0:
        return False
    p = 0.5 * (a - d)
    disc = p * p + b * c
    if disc >= 0.0:  # real eigenvalues: rotate the eigenvector of lam onto e_1, the block becomes triangular
        r = np.sqrt(disc)
        lam = 0.5 * (a + d) + (r if p >= 0 else -r)
        x = np.array([b, lam - a]) if abs(b) + abs(lam - a) >= abs(lam - d) + abs(c) else np.array([lam - d, c])
        x = x / np.linalg.norm(x)
        _rotate(T, Z, k, np.array([[x[0], -x[1]], [x[1], x[0]]], dtype=T.dtype))
        T[k + 1, k] = 0.0
        return False
    # complex pair: the rotation by theta changes (a - d)/2 into p cos 2t + q sin 2t (q = (b + c)/2)
    q = 0.5 * (b + c)
    best = None
    for th in (0.5 * np.arctan2(-p, q), 0.5 * np.arctan2(p, q)):
        cs, sn = np.cos(th), np.sin(th)
        G = np.array([[cs, -sn], [sn, cs]], dtype=T.dtype)
        M = G.T @ T[k:k + 2, k:k + 2] @ G
        if best is None or abs(M[0, 0] - M[1, 1]) < best[0]:
            best = (abs(M[0, 0] - M[1, 1]), G)
    _rotate(T, Z, k, best[1])
    m = 0.5 * (T[k, k] + T[k + 1, k + 1])
    T[k, k] = T[k + 1, k + 1] = m
    return True


def francis_real(H, Z, eps, max_iter):
    """Real Schur form of the real Hessenberg ``H`` in place, ``Z`` updated; raises NoConvergence."""
    n = H.shape[0]
    hi = n - 1
    it = 0
    while hi > 0:
        lo = hi
        while lo > 0 and not _negligible(H, lo, eps):
            lo -= 1
        if lo > 0:
            H[lo, lo - 1] = 0.0
        if lo == hi:
            hi -= 1
            it = 0
            continue
        if lo == hi - 1:
            _standardize(H, Z, lo)
            hi -= 2
            it = 0
            continue
        it += 1
        if it > max_iter:
            raise NoConvergence(hi)
        m = hi - 1
        if it in (10, 20):  # exceptional shift: break a cycle with shifts from the last subdiagonals
            w = abs(H[hi, hi - 1]) + abs(H[hi - 1, hi - 2])
            s, t = 1.5 * w, w * w
        else:
            s = H[m, m] + H[hi, hi]
            t = H[m, m] * H[hi, hi] - H[m, hi] * H[hi, m]
        x = H[lo, lo] * H[lo, lo] + H[lo, lo + 1] * H[lo + 1, lo] - s * H[lo, lo] + t
        y = H[lo + 1, lo] * (H[lo, lo] + H[lo + 1, lo + 1] - s)
        z = H[lo + 1, lo] * H[lo + 2, lo + 1]
        for k in range(lo, hi - 1):
            v, beta = _house(np.array([x, y, z], dtype=H.dtype))
            if beta:
                r = max(lo, k - 1)
                H[k:k + 3, r:] -= beta * np.outer(v, v @ H[k:k + 3, r:])
                rr = min(k + 4, hi + 1)
                H[:rr, k:k + 3] -= beta * np.outer(H[:rr, k:k + 3] @ v, v)
                Z[:, k:k + 3] -= beta * np.outer(Z[:, k:k + 3] @ v, v)
                if k > lo:
                    H[k + 1:k + 3, k - 1] = 0.0
            x = H[k + 1, k]
            y = H[k + 2, k]
            if k < hi - 2:
                z = H[k + 3, k]
        v, beta = _house(np.array([x, y], dtype=H.dtype))
        if beta:
            H[hi - 1:hi + 1, hi - 2:] -= beta * np.outer(v, v @ H[hi - 1:hi + 1, hi - 2:])
            H[:hi + 1, hi - 1:hi + 1] -= beta * np.outer(H[:hi + 1, hi - 1:hi + 1] @ v, v)
            Z[:, hi - 1:hi + 1] -= beta * np.outer(Z[:, hi - 1:hi + 1] @ v, v)
            H[hi, hi - 2] = 0.0
    return H, Z


def _givens(x, y):
    """2x2 unitary ``G`` with ``G^H [x, y]^T = [r, 0]^T``."""
    ax = abs(x)
    r = np.hypot(ax, abs(y))
    if r == 0.0:
        return np.eye(2, dtype=np.result_type(x, y))
    if ax == 0.0:
        c, s = 0.0, np.conj(y) / abs(y)
    else:
        c, s = ax / r, (x / ax) * np.conj(y) / r
    Gh = np.array([[c, s], [-np.conj(s), c]])  # Gh @ [x, y] = [x/|x| r, 0]
    return Gh.conj().T


def francis_complex(H, Z, eps, max_iter):
    """Complex Schur form of the complex Hessenberg ``H`` in place, ``Z`` updated; raises NoConvergence."""
    n = H.shape[0]
    hi = n - 1
    it = 0
    while hi > 0:
        lo = hi
        while lo > 0 and not _negligible(H, lo, eps):
            lo -= 1
        if lo > 0:
            H[lo, lo - 1] = 0.0
        if lo == hi:
            hi -= 1
            it = 0
            continue
        it += 1
        if it > max_iter:
            raise NoConvergence(hi)
        a, b, c, d = H[hi - 1, hi - 1], H[hi - 1, hi], H[hi, hi - 1], H[hi, hi]
        if it % 10 == 0:  # exceptional shift
            mu = d + abs(c)
        else:  # Wilkinson: the eigenvalue of the trailing 2x2 nearer to d
            p = 0.5 * (a - d)
            r = np.sqrt(p * p + b * c + 0j)
            mu = d - (b * c) / (p + r) if abs(p + r) >= abs(p - r) else d - (b * c) / (p - r) if p != r else d
        x, y = H[lo, lo] - mu, H[lo + 1, lo]
        for k in range(lo, hi):
            G = _givens(x, y)
            r0 = max(lo, k - 1)
            H[k:k + 2, r0:] = G.conj().T @ H[k:k + 2, r0:]
            rr = min(k + 3, hi + 1)
            H[:rr, k:k + 2] = H[:rr, k:k + 2] @ G
            Z[:, k:k + 2] = Z[:, k:k + 2] @ G
            if k > lo:
                H[k + 1, k - 1] = 0.0
            if k < hi - 1:
                x, y = H[k + 1, k], H[k + 2, k]
    return H, Z


def blocks(T):
    """``[(start, size), ...]`` of the diagonal blocks of a quasi-triangular ``T`` (size 1 or 2)."""
    n = T.shape[0]
    out, i = [], 0
    while i < n:
        s = 2 if i + 1 < n and T[i + 1, i] != 0 else 1
        out.append((i, s))
        i += s
    return out


def eigenvalues(T):
    """The eigenvalues of the quasi-triangular ``T`` in diagonal order (complex)."""
    w = np.zeros(T.shape[0], dtype=complex)
    for i, s in blocks(T):
        if s == 1:
            w[i] = T[i, i]
        else:
            a, b, c, d = T[i, i], T[i, i + 1], T[i + 1, i], T[i + 1, i + 1]
            m, disc = 0.5 * (a + d), (0.5 * (a - d)) ** 2 + b * c
            im = np.sqrt(-disc + 0j).real if np.isrealobj(T) else 0
            if np.isrealobj(T):
                w[i], w[i + 1] = m + 1j * im, m - 1j * im
            else:
                w[i], w[i + 1] = T[i, i], T[i + 1, i + 1]
    return w


def _swap(T, Z, k, p, q):
    """Swap the adjacent diagonal blocks ``T[k:k+p]`` (p x p) and ``T[k+p:k+p+q]`` (q x q)."""
    T11 = T[k:k + p, k:k + p]
    T12 = T[k:k + p, k + p:k + p + q]
    T22 = T[k + p:k + p + q, k + p:k + p + q]
    # T11 X - X T22 = T12, column-major vec: (I_q (x) T11 - T22^T (x) I_p) vec(X) = vec(T12)
    K = np.kron(np.eye(q), T11) - np.kron(T22.T, np.eye(p))
    X = np.linalg.solve(K, T12.reshape(-1, order="F")).reshape((p, q), order="F")
    Q, _ = np.linalg.qr(np.vstack([X, -np.eye(q, dtype=T.dtype)]), mode="complete")
    s = slice(k, k + p + q)
    T[s, :] = Q.conj().T @ T[s, :]
    T[:, s] = T[:, s] @ Q
    Z[:, s] = Z[:, s] @ Q
    T[k + q:k + p + q, k:k + q] = 0.0
    if np.isrealobj(T):
        if q == 2:
            _standardize(T, Z, k)
        if p == 2:
            _standardize(T, Z, k + q)
    else:
        T[k + 1, k] = 0.0


def reorder(T, Z, select):
    """Move the blocks whose eigenvalue(s) ``select`` picks to the top left; returns ``sdim``.

    ``select(block_eigenvalues) -> bool`` is asked once per diagonal block
    (a real 2x2 block passes both eigenvalues of its pair). Moving a chosen
    block up only rearranges the blocks between its destination and its
    start, so every later chosen block still starts where it started.
    """
    chosen = [(i, s) for i, s in blocks(T) if select(eigenvalues(T[i:i + s, i:i + s]))]
    dest = 0
    for pos, size in chosen:
        while pos > dest:
            above = blocks(T[dest:pos, dest:pos])[-1]  # the block just above, within [dest, pos)
            start, q = dest + above[0], above[1]
            _swap(T, Z, start, q, size)
            pos = start
        dest += size
    return dest
