"""Elementwise kernel: ``D = op_abc(op_ab(alpha op_a(A), beta op_b(B)), gamma op_c(C))`` (cuTENSOR's trinary).

Dimensions
----------
``a`` (and optionally ``b``, ``c``): 1-D HBM tensors of ``n >= 1`` elements,
float32, bfloat16 or float16 (the host flattens operands already in the
output's layout). Constants: ``alpha, beta, gamma`` (floats), ``op_a``,
``op_b``, ``op_c`` (unary names of :data:`UNARY`), ``op_ab``, ``op_abc``
(binary names of :data:`BINARY`). Output: ``[n]`` in ``a``'s dtype. Tiles
are float32 (the DMA converts), so everything is computed in fp32 and
rounded once.

Tiling
------
The ``n`` elements are viewed as ``R = n // F`` rows of ``F = min(512,
ceil(n / 128))`` and a tail of ``t = n - R F`` elements: row tiles of 128
rows ``[rr, F]`` (``ceil(R/128)`` of them) and, if ``t > 0``, one ``[1, t]``
tile. ``T`` tiles in all.

Pseudocode
----------
Per tile:

    x = dma(A tile); x = op_a(x)               # Scalar Engine activation, or Vector reciprocal
    if B: y = dma(B tile); y = op_b(y); y *= beta (if != 1)
          x = (x * alpha) op_ab y              # one scalar_tensor_tensor
    else: x *= alpha (if != 1)
    if C: z = dma(C tile); z = op_c(z); z *= gamma (if != 1)
          x = x op_abc z                       # tensor_tensor
    dma(x -> D tile)

Unary ops: ``identity``/``conj`` (real data: nothing), ``rcp`` (Vector
reciprocal), ``neg`` (activation copy, scale -1), ``cos`` (activation sin
of ``pi/2 - x``, bias from a ``(128, 1)`` tile set once per kernel),
the others one activation each. Activation input ranges (sqrt
``[2^-116, 2^118]``, log ``[2^-64, 2^64]``, sin ``[-pi, pi]``) are the
lowering's to check (:func:`range_problem`).

Closed forms (s = bytes per element, k = operands present, u_s = their
Scalar-Engine unary ops, u_v = their reciprocals)
------------------------------------------------------------------
    HBM bytes read    = s * k * n
    HBM bytes written = s * n
    DMA transfers     = T * (k + 1)
    Scalar instructions = T * u_s
    Vector instructions = T * (u_v + [B] + [B and beta != 1] + [no B and alpha != 1]
                               + [C] + [C and gamma != 1]) + [cos used]
"""

import math

from trnsci.nki import nisa, nki, nl
from trnsci.nki.tiling import PMAX, cdiv, tiles

FMAX = 512  # free elements per partition per tile

#: unary op name -> how the kernel applies it ("none", "vector" or "scalar")
UNARY = {"identity": "none", "conj": "none", "rcp": "vector", "neg": "scalar", "sqrt": "scalar",
         "relu": "scalar", "sigmoid": "scalar", "tanh": "scalar", "exp": "scalar", "log": "scalar",
         "abs": "scalar", "sin": "scalar", "cos": "scalar"}
BINARY = ("add", "mul", "max", "min")

#: documented valid input ranges of the Scalar Engine activations used (closed interval, on x itself;
#: cos is sin(pi/2 - x))
RANGES = {"sqrt": (2.0**-116, 2.0**118), "log": (2.0**-64, 2.0**64), "sin": (-math.pi, math.pi),
          "cos": (-math.pi / 2, 1.5 * math.pi)}


def _act(name):
    return {"sqrt": nl.sqrt, "relu": nl.relu, "sigmoid": nl.sigmoid, "tanh": nl.tanh, "exp": nl.exp,
            "log": nl.log, "abs": nl.abs, "sin": nl.sin}[name]


def _alu(name):
    return {"add": nl.add, "mul": nl.multiply, "max": nl.maximum, "min": nl.minimum}[name]


def layout(n):
    """``(F, R, t)``: row width, full rows and tail elements of ``n`` elements."""
    f = min(FMAX, max(1, cdiv(n, PMAX)))
    return f, n // f, n % f


def tile_count(n):
    f, r, t = layout(n)
    return cdiv(r, PMAX) + (1 if t else 0)


def elementwise_counts(n, itemsize, has_b, has_c, alpha, beta, gamma, op_a, op_b, op_c):
    """The closed forms above as a dict (what the emulator must count)."""
    T = tile_count(n)
    used = [op_a] + ([op_b] if has_b else []) + ([op_c] if has_c else [])
    k = len(used)
    us = sum(UNARY[u] == "scalar" for u in used)
    uv = sum(UNARY[u] == "vector" for u in used)
    per = uv + (2 if has_b and beta != 1 else 1 if has_b else 0) + (1 if not has_b and alpha != 1 else 0)
    per += (2 if has_c and gamma != 1 else 1 if has_c else 0)
    return {"hbm_read_bytes": itemsize * k * n, "hbm_write_bytes": itemsize * n, "dma": T * (k + 1),
            "scalar": T * us, "vector": T * per + (1 if "cos" in used else 0)}


def _unary(x, op, halfpi, rows):
    kind = UNARY[op]
    if kind == "none":
        return
    if op == "rcp":
        nisa.reciprocal(dst=x, data=x)
    elif op == "neg":
        nisa.activation(dst=x, op=nl.copy, data=x, scale=-1.0)
    elif op == "cos":
        nisa.activation(dst=x, op=nl.sin, data=x, scale=-1.0, bias=halfpi[0:rows, 0:1])
    else:
        nisa.activation(dst=x, op=_act(op), data=x)


def _load(src, span, name):
    """DMA elements ``[s0, s0 + rows*w)`` of ``src`` into a fresh fp32 SBUF tile ``[rows, w]``."""
    s0, rows, w = span
    x = nl.ndarray((PMAX, FMAX), dtype=nl.float32, buffer=nl.sbuf, name=name)
    nisa.dma_copy(dst=x[0:rows, 0:w], src=src[s0:s0 + rows * w].reshape((rows, w)))
    return x[0:rows, 0:w]


@nki.jit
def elementwise_kernel(a, b, c, alpha, beta, gamma, op_a, op_b, op_c, op_ab, op_abc):
    """``op_abc(op_ab(alpha op_a(a), beta op_b(b)), gamma op_c(c))`` of 1-D operands (b, c may be None)."""
    n = a.shape[0]
    f, r, t = layout(n)
    out = nl.ndarray((n,), dtype=a.dtype, buffer=nl.shared_hbm)
    used = [op_a] + ([op_b] if b is not None else []) + ([op_c] if c is not None else [])
    halfpi = None
    if "cos" in used:
        halfpi = nl.ndarray((PMAX, 1), dtype=nl.float32, buffer=nl.sbuf, name="half_pi")
        nisa.memset(dst=halfpi, value=math.pi / 2)
    # (start, rows, width) of every tile: full row tiles, then the tail
    spans = [(r0 * f, rows, f) for r0, rows in tiles(r, PMAX)]
    if t:
        spans.append((r * f, 1, t))
    for span in spans:
        s0, rows, w = span
        x = _load(a, span, "a_tile")
        _unary(x, op_a, halfpi, rows)
        if b is not None:
            y = _load(b, span, "b_tile")
            _unary(y, op_b, halfpi, rows)
            if beta != 1.0:
                nisa.tensor_scalar(dst=y, data=y, op0=nl.multiply, operand0=beta)
            nisa.scalar_tensor_tensor(dst=x, data=x, op0=nl.multiply, operand0=alpha, op1=_alu(op_ab), operand1=y)
        elif alpha != 1.0:
            nisa.tensor_scalar(dst=x, data=x, op0=nl.multiply, operand0=alpha)
        if c is not None:
            z = _load(c, span, "c_tile")
            _unary(z, op_c, halfpi, rows)
            if gamma != 1.0:
                nisa.tensor_scalar(dst=z, data=z, op0=nl.multiply, operand0=gamma)
            nisa.tensor_tensor(dst=x, data1=x, data2=z, op=_alu(op_abc))
        nisa.dma_copy(dst=out[s0:s0 + rows * w].reshape((rows, w)), src=x)
    return out
