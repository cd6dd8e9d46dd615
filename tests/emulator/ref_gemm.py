"""Reference tiled GEMM kernel for the emulator's counter tests.

C[M, N] = A[M, K] @ B[K, N], with A passed already transposed as AT[K, M]
so that every load is a straight (non-transposing) DMA.

Layout and tiling
-----------------
* AT tile  [TILE_K=128 (partition), TILE_M=128]  -> the stationary operand
* B tile   [TILE_K=128 (partition), TILE_N=512]  -> the moving operand
* C tile   [TILE_M=128 (partition), TILE_N=512]  fp32 in PSUM, one 2 KiB bank
Loop order m, k, n: for each row block m, one PSUM accumulator per column
block n (N / 512 of them, so N <= 8 * 512 = 4096 to fit the 8 PSUM banks);
for each k the stationary AT tile is loaded once and reused across the
whole n loop; after the k loop each accumulator is copied PSUM -> SBUF and
stored.  Shapes need not be multiples of the tiles: edge tiles are static
slices.

Closed form (tm = ceil(M/128), tk = ceil(K/128), tn = ceil(N/512), b =
bytes per element of AT/B, c = bytes per element of C):

    HBM bytes read    = b * (K*M + tm*K*N)      (AT once, B once per row block)
    HBM bytes written = c * M*N
    Tensor Engine instructions (nc_matmul) = tm * tk * tn
    DMA transfers     = tm*tk + tm*tk*tn + tm*tn   (AT loads, B loads, C stores)
    matmul flops      = 2*M*N*K

For M = N = K = 1024 fp32: read = 4*(2**20 + 8*2**20) = 37,748,736 B,
written = 4,194,304 B, 8*8*2 = 128 nc_matmul instructions.
"""

from trnsci.nki.emulator import nisa, nl

TILE_M = 128
TILE_K = 128
TILE_N = 512


def _ceil(a, b):
    return -(-a // b)


def gemm_kernel(at, b):
    """C = AT.T @ B for HBM AT[K, M], B[K, N]; returns HBM C[M, N] (fp32)."""
    K, M = at.shape
    K2, N = b.shape
    assert K == K2
    c = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    tm, tk, tn = _ceil(M, TILE_M), _ceil(K, TILE_K), _ceil(N, TILE_N)
    for m in nl.affine_range(tm):
        m0, m1 = m * TILE_M, min((m + 1) * TILE_M, M)
        acc = [
            nl.ndarray((m1 - m0, min((n + 1) * TILE_N, N) - n * TILE_N), dtype=nl.float32, buffer=nl.psum)
            for n in range(tn)
        ]
        for k in nl.sequential_range(tk):
            k0, k1 = k * TILE_K, min((k + 1) * TILE_K, K)
            stat = nl.load(at[k0:k1, m0:m1])
            for n in nl.affine_range(tn):
                n0, n1 = n * TILE_N, min((n + 1) * TILE_N, N)
                mov = nl.load(b[k0:k1, n0:n1])
                nisa.nc_matmul(acc[n], stat, mov)
        for n in nl.affine_range(tn):
            n0, n1 = n * TILE_N, min((n + 1) * TILE_N, N)
            out = nl.ndarray((m1 - m0, n1 - n0), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(out, acc[n])
            nl.store(c[m0:m1, n0:n1], out)
        del acc  # free this row block's PSUM banks before the next one allocates
    return c


def expected_counts(M, N, K, in_bytes=4, out_bytes=4):
    """The closed form of the docstring, for the tests."""
    tm, tk, tn = _ceil(M, TILE_M), _ceil(K, TILE_K), _ceil(N, TILE_N)
    return {
        "hbm_read_bytes": in_bytes * (K * M + tm * K * N),
        "hbm_write_bytes": out_bytes * M * N,
        "tensor": tm * tk * tn,
        "dma_transfers": tm * tk + tm * tk * tn + tm * tn,
        "flops": 2 * M * N * K,
    }
