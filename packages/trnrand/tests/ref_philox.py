"""An independent scalar Philox4x32 in plain Python ints (Salmon et al., SC'11), the tests' reference."""

M0, M1, W0, W1, MASK = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85, 0xFFFFFFFF


def philox4x32(ctr, key, rounds=10):
    x0, x1, x2, x3 = ctr
    k0, k1 = key
    for _ in range(rounds):
        p0, p1 = M0 * x0, M1 * x2
        x0, x1, x2, x3 = (p1 >> 32) ^ x1 ^ k0, p1 & MASK, (p0 >> 32) ^ x3 ^ k1, p0 & MASK
        k0, k1 = (k0 + W0) & MASK, (k1 + W1) & MASK
    return [x0, x1, x2, x3]


def stream_word(seed, subsequence, j):
    """Word j of the documented stream: lane j % 4 of block j // 4."""
    b = j // 4
    ctr = (b & MASK, b >> 32, subsequence & MASK, subsequence >> 32)
    return philox4x32(ctr, (seed & MASK, seed >> 32))[j % 4]
