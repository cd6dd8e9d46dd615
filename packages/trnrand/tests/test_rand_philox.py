"""Philox known answers, the stream definition, and the generator's position/partition/state semantics."""

import numpy as np
import pytest
import ref_philox
import torch

import trnrand

# Random123 tests/kat_vectors, the philox4x32 lines: counter (4 words), key (2 words), rounds -> output
KAT = [
    ([0, 0, 0, 0], [0, 0], 10, [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]),
    ([0xFFFFFFFF] * 4, [0xFFFFFFFF] * 2, 10, [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]),
    (
        [0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344],
        [0xA4093822, 0x299F31D0],
        10,
        [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1],
    ),
    (
        [0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344],
        [0xA4093822, 0x299F31D0],
        7,
        [0x4DFCCABA, 0x190A87F0, 0xC47362BA, 0xB6B5242A],
    ),
]


@pytest.mark.parametrize("ctr,key,rounds,want", KAT)
def test_known_answers(ctr, key, rounds, want):
    assert trnrand.philox4x32(ctr, key, rounds=rounds).tolist() == want
    assert ref_philox.philox4x32(ctr, key, rounds) == want  # the test's own reference agrees too


def test_kat_batched_uint32_and_numpy():
    c = torch.tensor([k[0] for k in KAT[:3]], dtype=torch.int64).to(torch.uint32)
    k = torch.tensor([k[1] for k in KAT[:3]], dtype=torch.int64).to(torch.uint32)
    out = trnrand.philox4x32(c, k)
    assert out.dtype == torch.uint32
    assert out.to(torch.int64).tolist() == [k[3] for k in KAT[:3]]
    outn = trnrand.philox4x32(np.array([k[0] for k in KAT[:3]]), np.array([k[1] for k in KAT[:3]]))
    assert isinstance(outn, np.ndarray) and outn.tolist() == [k[3] for k in KAT[:3]]


def _words_via_uniform_fp32(g, n):
    """float32 uniforms are (w >> 8) 2**-24 exactly, so the words' top 24 bits can be read back."""
    return (trnrand.uniform(n, generator=g).double() * 2**24).long().tolist()


@pytest.mark.parametrize("seed,sub,offset", [(0, 0, 0), (2**64 - 1, 2**64 - 1, 2**34 - 3), (12345, 7, 2**32 * 4 - 2)])
def test_stream_definition_against_reference(seed, sub, offset):
    # offsets straddle a 2**32 block-index carry and the end of the counter's low word
    g = trnrand.Generator(seed=seed, subsequence=sub, offset=offset)
    got = _words_via_uniform_fp32(g, 11)
    want = [ref_philox.stream_word(seed, sub, offset + i) >> 8 for i in range(11)]
    assert got == want


def test_float64_uses_53_bits_of_two_words():
    g = trnrand.Generator(seed=9)
    x = trnrand.uniform(3, dtype=torch.float64, generator=g)
    w = [ref_philox.stream_word(9, 0, i) for i in range(6)]
    want = [((w[2 * i] >> 5) * 2**26 + (w[2 * i + 1] >> 6)) * 2.0**-53 for i in range(3)]
    assert x.tolist() == want


def test_skip_ahead_equals_generate_and_discard():
    a = trnrand.Generator(seed=3)
    full = trnrand.normal(1001, generator=a)
    for skip in (0, 1, 2, 5, 998):
        b = trnrand.Generator(seed=3)
        b.advance(skip if skip % 2 == 0 else skip - 1)  # normals pair on even word boundaries: 2 words/pair
        tail = trnrand.normal(1001 - (skip if skip % 2 == 0 else skip - 1), generator=b)
        s = skip if skip % 2 == 0 else skip - 1
        assert torch.equal(tail, full[s:])
    c = trnrand.Generator(seed=3, offset=500)
    assert torch.equal(
        trnrand.uniform(10, generator=c), trnrand.uniform(510, generator=trnrand.Generator(seed=3))[500:]
    )
    c.advance_to(2)
    assert c.position() == 2
    assert torch.equal(trnrand.uniform(3, generator=c), trnrand.uniform(5, generator=trnrand.Generator(seed=3))[2:])


@pytest.mark.parametrize("fn", ["uniform", "normal", "exponential", "gamma", "poisson", "randint", "truncated_normal"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_partitions_concatenate_to_single_process(fn, dtype):
    kw = {"gamma": {"shape": 0.7}, "poisson": {"lam": 20.0}, "randint": {"high": 10}}.get(fn, {})
    if fn == "randint" and dtype == torch.float32:
        dtype = torch.int64
    P, n = 3, 7  # odd n: rank boundaries split Box-Muller pairs
    single = trnrand.Generator(seed=11)
    whole = [getattr(trnrand, fn)(P * n, dtype=dtype, generator=single, **kw) for _ in range(2)]
    ranks = [trnrand.Generator(seed=11, partition_rank=r, partition_size=P) for r in range(P)]
    for call in range(2):
        parts = [getattr(trnrand, fn)(n, dtype=dtype, generator=g, **kw) for g in ranks]
        assert torch.equal(torch.cat(parts), whole[call])
    assert all(g.position() == single.position() for g in ranks)


def test_subsequences_differ_and_are_uncorrelated():
    x = trnrand.uniform(20000, dtype=torch.float64, generator=trnrand.Generator(seed=5, subsequence=0))
    y = trnrand.uniform(20000, dtype=torch.float64, generator=trnrand.Generator(seed=5, subsequence=1))
    assert not torch.equal(x, y)
    # |corr| of independent U(0,1) samples has sd 1/sqrt(n) = 0.007; 5 sd
    assert abs(float(torch.corrcoef(torch.stack([x, y]))[0, 1])) < 5 / 20000**0.5


def test_state_roundtrip_and_manual_seed():
    g = trnrand.Generator(seed=2**63 + 5, subsequence=9, offset=2**65 + 3, partition_rank=1, partition_size=4)
    s = g.get_state()
    a = trnrand.uniform(5, generator=g)
    h = trnrand.Generator()
    h.set_state(s)
    assert (h.seed, h.subsequence, h.position(), h.partition_rank, h.partition_size) == (2**63 + 5, 9, 2**65 + 3, 1, 4)
    assert torch.equal(trnrand.uniform(5, generator=h), a)
    g.manual_seed(2)
    assert g.position() == 0 and g.seed == 2
    trnrand.manual_seed(17)
    assert torch.equal(trnrand.uniform(4), trnrand.uniform(4, generator=trnrand.Generator(seed=17)))
    assert trnrand.get_default_generator().position() == 4
    with pytest.raises(ValueError, match="state"):
        h.set_state(torch.zeros(3, dtype=torch.uint8))


def test_program_matches_into_calls():
    g = trnrand.Generator(seed=8)
    prog = g.new_program().normal(5, mean=1.0, out="z").uniform(3, out="u").exponential(4, rate=3.0, out="e").build()
    bufs = {"z": torch.empty(5), "u": torch.empty(3, dtype=torch.float64), "e": torch.empty(2, 2)}
    prog.stream_into(bufs)
    prog.stream_into(bufs)  # second call continues the stream
    h = trnrand.Generator(seed=8)
    for _ in range(2):
        z = trnrand.normal(5, mean=1.0, generator=h)
        u = trnrand.uniform(3, dtype=torch.float64, generator=h)
        e = trnrand.exponential(2, 2, rate=3.0, generator=h)
    assert torch.equal(bufs["z"], z) and torch.equal(bufs["u"], u) and torch.equal(bufs["e"], e)
    assert g.position() == h.position()
    with pytest.raises(ValueError, match="elements"):
        prog.stream_into({"z": torch.empty(4), "u": torch.empty(3), "e": torch.empty(4)})
    with pytest.raises(ValueError, match="std"):
        g.new_program().normal(3, std=-1.0)
    with pytest.raises(ValueError, match="at least one"):
        g.new_program().build()


def test_unit_interval_ends():
    # seed chosen freely: the float maps are exact, so bounds hold for every word; check the extremes directly
    w = torch.tensor([0, 0xFFFFFFFF], dtype=torch.int64)
    from trnrand import _philox

    assert _philox._unit(w, torch.float32, False).tolist() == [0.0, 1.0 - 2**-24]
    assert _philox._unit(w, torch.float32, True).tolist() == [2**-24, 1.0]
    assert _philox._unit(torch.tensor([0, 0, 0xFFFFFFFF, 0xFFFFFFFF]), torch.float64, False).tolist() == [
        0.0,
        1 - 2**-53,
    ]


def test_limb_multiply_is_exact_and_fp32_is_not():
    """The kernel's 16-bit-limb product equals Python's exact product; an fp32-engine product does not."""
    from trnrand import _philox

    rng = np.random.default_rng(0)
    a = np.concatenate([[0, 1, 0xFFFF, 0x10000, 0xFFFFFFFF], rng.integers(0, 2**32, 2000)]).astype(np.int64)
    for m in (_philox.M0, _philox.M1, 0xFFFFFFFF):
        hi, lo = _philox._mulhilo_limbs(torch.from_numpy(a), m)
        want = [int(x) * m for x in a]
        assert hi.tolist() == [w >> 32 for w in want] and lo.tolist() == [w & 0xFFFFFFFF for w in want]
    # the naive alternative: an fp32 multiply (Vector/Scalar engine arithmetic) keeps 24 significant bits
    prod32 = torch.from_numpy(a[5:]).float() * float(_philox.M0)
    lo32 = (prod32.double().floor().long() & 0xFFFFFFFF).tolist()
    exact = [(int(x) * _philox.M0) & 0xFFFFFFFF for x in a[5:]]
    assert sum(x == y for x, y in zip(lo32, exact)) < 10  # essentially every low word is wrong


@pytest.mark.parametrize("seed,sub,block0", [(3, 2**40 + 1, 2**32 - 9000), (2**64 - 1, 5, 17)])
def test_bulk_words_and_fused_uniforms_against_reference(seed, sub, block0):
    # > 2 ufunc chunks (not the Python path for tiny draws), ragged ends, and in the first case the
    # block index carrying into counter word 1 inside the draw; checked word for word at the ends,
    # around every chunk seam and the carry against the independent pure-Python reference
    from trnrand import _philox

    start = 4 * block0 + 3
    n = 4 * (2 * _philox._CHUNK + 100) + 2
    w = _philox.words(seed, sub, start, n)
    assert w.shape == (n,) and w.dtype == torch.int64
    seams = [4 * k * _philox._CHUNK - 3 for k in (1, 2)] + [4 * (2**32 - block0) - 3]
    idx = sorted({i + d for i in [0, n - 4, *seams] for d in range(-3, 4) if 0 <= i + d < n})
    assert [int(w[i]) for i in idx] == [ref_philox.stream_word(seed, sub, start + i) for i in idx]
    # the fused float32 map equals the two-step words -> floats map bit for bit (both ends of [0, 1])
    for open_low in (False, True):
        assert torch.equal(_philox.uniform32(seed, sub, start, n, open_low=open_low),
                           _philox._unit(w, torch.float32, open_low))
    for open_low in (False, True):  # float64: 53 bits of two words, also exact; odd start (pairs across
        # blocks) and even start (pairs inside a block, mapped per chunk), bulk and tiny
        for d, k in ((0, n // 2), (1, n // 2 - 1), (1, 5)):
            assert torch.equal(_philox.uniform64(seed, sub, start + d, k, open_low=open_low),
                               _philox._unit(w[d:d + 2 * k], torch.float64, open_low))
    # tiny draws take the Python-int path: the same words
    assert torch.equal(_philox.words(seed, sub, start + 5, 9), w[5:14])


@pytest.mark.parametrize("base", [8, 9, 10, 11])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("n,first", [(5, 0), (2 * 4 * 16384 + 7, 3)])
def test_normals_from_block_fields_equal_the_word_map(n, first, dtype, base):
    # the per-chunk Box-Muller (pairs inside blocks, or straddling them when the draw's words start at
    # any other residue mod 4: chunks then carry their next block) must equal the map of the words bit for
    # bit (independent check of the words: the reference tests above), tiny (Python-int lanes) and over two
    # chunks with a rank's odd first sample
    from trnrand import _philox
    from trnrand.distributions import _box_muller, _standard_normal_pairs

    q = 4 if dtype == torch.float64 else 2
    got = _standard_normal_pairs(11, 2, base, first, n, dtype, "cpu")
    p0, p1 = first // 2, (first + n + 1) // 2
    want = _box_muller(_philox.words(11, 2, base + q * p0, q * (p1 - p0)), dtype).reshape(-1)
    lead = first - 2 * p0
    assert torch.equal(got, want[lead:lead + n])


@pytest.mark.parametrize("d", [0, 1, 2, 3])
@pytest.mark.parametrize("n", [7, 4 * 16384 + 9])
def test_float64_uniforms_at_every_word_residue(d, n):
    # odd starts pair (w1, w2) and (w3, w0 of the next block): chunks carry their next block
    from trnrand import _philox

    start = 4 * 1000 + d
    w = _philox.words(5, 1, start, 2 * n)
    for open_low in (False, True):
        assert torch.equal(_philox.uniform64(5, 1, start, n, open_low=open_low),
                           _philox._unit(w, torch.float64, open_low))


@pytest.mark.parametrize("nblocks", [3, 20, 700])
def test_draws_across_the_block_carry_in_every_path(nblocks):
    # Python-int lanes (<= 32 blocks), narrow tiled chunks: a draw that starts 2 blocks before block 2**32 (the
    # block index's low word wraps, its high word steps), word for word against the pure-Python reference
    from trnrand import _philox

    start = 4 * ((1 << 32) - 2) + 1
    n = 4 * nblocks - 2
    w = _philox.words(7, 2**63 + 5, start, n)
    idx = sorted({i for i in (*range(12), *range(n - 6, n), n // 2) if i < n})
    assert [int(w[i]) for i in idx] == [ref_philox.stream_word(7, 2**63 + 5, start + i) for i in idx]
    u = _philox.uniform32(7, 2**63 + 5, start, n)
    assert torch.equal(u, _philox._unit(w, torch.float32, False))
    # odd pairings: a chunk ends at the carry and takes its next block (the first past it) separately
    from trnrand.distributions import _box_muller

    k = n // 2 - 1
    assert torch.equal(_philox.uniform64(7, 2**63 + 5, start, k), _philox._unit(w[:2 * k], torch.float64, False))
    for dtype, q in ((torch.float32, 2), (torch.float64, 4)):
        pairs = (n - 1) // q
        z = _philox.normals(7, 2**63 + 5, start, pairs, dtype)
        assert torch.equal(z, _box_muller(w[:q * pairs], dtype).reshape(-1))


def test_concurrent_threads_get_their_own_buffers():
    # the bulk stream's buffers are per thread: draws racing in threads (NumPy releases the GIL inside the
    # rounds) equal the same draws made one after another
    import threading

    from trnrand import _philox

    jobs = [(seed, n) for seed in range(1, 5) for n in (5, 1000, 3 * 4 * 4096 + 7)]
    want = {job: _philox.uniform32(job[0], 0, 0, job[1]) for job in jobs}
    got, errors = {}, []

    def work(k):
        try:
            for _ in range(3):
                for job in jobs[k::4] + jobs:
                    got.setdefault(job, []).append(_philox.uniform32(job[0], 0, 0, job[1]))
        except Exception as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert all(torch.equal(x, want[job]) for job, xs in got.items() for x in xs)
