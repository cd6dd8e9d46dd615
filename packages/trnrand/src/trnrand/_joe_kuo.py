"""Joe-Kuo Sobol' direction numbers (21201 dimensions), shipped with trnrand in a bit-packed file.

Source and licence of the data
------------------------------
S. Joe and F. Y. Kuo, "Constructing Sobol sequences with better
two-dimensional projections", SIAM J. Sci. Comput. 30 (2008) 2635-2654;
table ``new-joe-kuo-6.21201`` from https://web.maths.unsw.edu.au/~fkuo/sobol/
(the same numbers SciPy ships as ``scipy/stats/_sobol_direction_numbers.npz``;
the tests check equality with SciPy's table). Copyright (c) 2008, Frances Y.
Kuo and Stephen Joe; distributed by the authors under a BSD-style licence
(SciPy's bundled-licence list records it as BSD-3-Clause) that permits
redistribution in source and binary form provided the copyright notice,
the list of conditions and the disclaimer are retained, and forbids using
the authors' or their universities' names to endorse derived products. The
data are provided "as is", without any warranty. trnrand's code (this
module's encoder/decoder) is Apache-2.0 like the rest of the package.

File format (``_joe_kuo.bin``)
------------------------------
``b"JK6\\0"``, then the dimension count D (uint32 little-endian), then D
degree bytes ``s_d`` (dimension 0, the van der Corput sequence, has
``s = 0``), then one bit stream (MSB first, zero-padded to a byte): for
each dimension ``d >= 1`` the ``s - 1`` inner coefficients ``a`` of its
primitive polynomial ``x^s + a_1 x^(s-1) + ... + a_(s-1) x + 1`` and its
initial direction integers ``m_1 .. m_s`` in ``1, 2, ..., s`` bits
(``m_k < 2**k``). 3.5 million bits for 21201 dimensions: 428 KiB, the
information content of the table, against 1.6 MB for SciPy's arrays.

``poly`` is returned in SciPy's encoding (``(1 << s) | (a << 1) | 1``; 1
for dimension 0) and ``vinit`` as ``[D, 18]`` with ``vinit[d, k-1] = m_k``
(zeros past ``s``; dimension 0 has ``m_1 = 1``).
"""

from __future__ import annotations

import functools
import os

import numpy as np

MAGIC = b"JK6\0"
MAX_DEGREE = 18
PATH = os.path.join(os.path.dirname(__file__), "_joe_kuo.bin")


def _fields(s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(dim, slot, start bit, width) of every packed field; slot 0 is a, slot k is m_k."""
    s = s.astype(np.int64)
    dims, slots, widths = [], [], []
    for k in range(0, MAX_DEGREE + 1):
        sel = np.nonzero((s >= 1) & (s >= k))[0] if k else np.nonzero(s >= 1)[0]
        dims.append(sel)
        slots.append(np.full(sel.size, k))
        widths.append(s[sel] - 1 if k == 0 else np.full(sel.size, k))
    dim, slot, width = (np.concatenate(v) for v in (dims, slots, widths))
    order = np.lexsort((slot, dim))
    dim, slot, width = dim[order], slot[order], width[order]
    start = np.concatenate([[0], np.cumsum(width)[:-1]])
    return dim, slot, start, width


def encode(poly: np.ndarray, vinit: np.ndarray) -> bytes:
    """Pack SciPy-encoded (poly, vinit) into the file format above."""
    poly = np.asarray(poly, dtype=np.int64)
    s = np.array([int(p).bit_length() - 1 for p in poly], dtype=np.int64)
    dim, slot, start, width = _fields(s)
    val = np.where(slot == 0, (poly[dim] >> 1) & ((1 << np.maximum(s[dim] - 1, 0)) - 1),
                   np.asarray(vinit, dtype=np.int64)[dim, np.maximum(slot - 1, 0)])
    nbits = int(width.sum())
    bits = np.zeros(nbits, dtype=np.uint8)
    for b in range(MAX_DEGREE):  # bit b (from the MSB) of every field at least b+1 wide
        sel = width > b
        bits[start[sel] + b] = (val[sel] >> (width[sel] - 1 - b)) & 1
    head = MAGIC + np.uint32(poly.size).astype("<u4").tobytes() + s.astype(np.uint8).tobytes()
    return head + np.packbits(bits).tobytes()


def decode(data: bytes, n_dims: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(poly [D] int64, vinit [D, 18] int64) of the first ``n_dims`` (default all) dimensions."""
    if data[:4] != MAGIC:
        raise ValueError("not a Joe-Kuo direction-number file (bad magic)")
    total = int(np.frombuffer(data[4:8], dtype="<u4")[0])
    d = total if n_dims is None else min(n_dims, total)
    s = np.frombuffer(data[8:8 + d], dtype=np.uint8).astype(np.int64)
    dim, slot, start, width = _fields(s)
    nbytes = (int(width.sum()) + 7) // 8  # fields are in dimension order: a prefix of the stream
    bits = np.unpackbits(np.frombuffer(data[8 + total:8 + total + nbytes], dtype=np.uint8)).astype(np.int64)
    val = np.zeros(dim.size, dtype=np.int64)
    for b in range(MAX_DEGREE):
        sel = width > b
        val[sel] |= bits[start[sel] + b] << (width[sel] - 1 - b)
    poly = np.ones(d, dtype=np.int64)
    a = slot == 0
    poly[dim[a]] = (1 << s[dim[a]]) | (val[a] << 1) | 1
    vinit = np.zeros((d, MAX_DEGREE), dtype=np.int64)
    m = ~a
    vinit[dim[m], slot[m] - 1] = val[m]
    vinit[0, 0] = 1
    return poly, vinit


@functools.lru_cache(maxsize=1)
def _data() -> bytes:
    with open(PATH, "rb") as f:
        return f.read()


def table(n_dims: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The shipped table's first ``n_dims`` dimensions (default: all 21201)."""
    return decode(_data(), n_dims)
