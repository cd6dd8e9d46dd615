"""The host stream's read-ahead for small sequential draws and its threaded chunk route, against the
independent pure-Python Philox (ref_philox): both must give exactly the documented stream's bits.

Both belong to the NumPy route, which runs where numba is absent: every test here runs with the compiled
route (``_host._JIT``) switched off (test_rand_jit.py checks the two routes give the same bits)."""

import random

import pytest
import ref_philox
import torch

import trnrand
from trnrand import _host, _philox
from trnsci import routes
from trnsci.testing import torch_threads

F24, F53 = 2.0**-24, 2.0**-53


@pytest.fixture(autouse=True)
def _numpy_route(monkeypatch):
    monkeypatch.setattr(_host, "_JIT", None)


def _u32(seed, sub, j, open_low=False):
    return ((ref_philox.stream_word(seed, sub, j) >> 8) + open_low) * F24


def _u64(seed, sub, j, open_low=False):
    w0, w1 = ref_philox.stream_word(seed, sub, j), ref_philox.stream_word(seed, sub, j + 1)
    return (((w0 >> 5) << 26 | (w1 >> 6)) + open_low) * F53


_RNG = random.Random(0)  # which inner samples are checked


def _check(x, seed, sub, start, wps, open_low=False, picks=4):
    """Samples at both ends and a few inside equal the reference (exact: every value is a dyadic rational)."""
    n = x.numel()
    ref = _u32 if wps == 1 else _u64
    for i in sorted({0, n - 1, *(_RNG.randrange(n) for _ in range(picks))}):
        assert float(x[i]) == ref(seed, sub, start + wps * i, open_low), (start, i)


def _buffered(seed, sub):
    st = _philox._local.__dict__.get("ahead")
    return st is not None and st.key == (seed, sub) and st.n > 0


def test_sequential_small_draws_read_ahead_and_cross_refills():
    seed, sub = 2**63 + 11, 3
    g = trnrand.Generator(seed=seed, subsequence=sub)
    sizes = [1000, 1000, 7, 1, 3001] + [4096] * 17 + [333, 1000]  # past one refill (4 * _AHEAD words)
    assert sum(sizes) > 4 * _philox._AHEAD
    used = 0
    for k, n in enumerate(sizes):
        dtype = torch.float64 if k % 5 == 3 else torch.float32
        start = g.position()
        x = trnrand.uniform(n, dtype=dtype, generator=g)
        _check(x, seed, sub, start, 2 if dtype == torch.float64 else 1)
        used += _buffered(seed, sub)
    assert used >= len(sizes) - 2  # every draw after the first (and the one that starts the run) read the buffer


def test_refills_in_a_row_grow_and_a_jump_starts_small_again():
    # a run's refills double from _AHEAD_MAX to _AHEAD blocks; a jump (or another stream) starts over, so two
    # small draws after every jump never compute a full chunk they do not use
    seed, g = 12, trnrand.Generator(seed=12)
    st = None
    sizes = []
    for _ in range(80):
        start = g.position()
        _check(trnrand.uniform(1024 * 4, generator=g), seed, 0, start, 1, picks=1)
        st = _philox._local.ahead
        if not sizes or st.n != sizes[-1]:
            sizes.append(st.n)
    blocks = [n // 4 for n in sizes if n]
    assert blocks[:3] == [_philox._AHEAD_MAX, 2 * _philox._AHEAD_MAX, 4 * _philox._AHEAD_MAX]
    assert blocks[-1] == _philox._AHEAD
    g.advance(10**6)
    trnrand.uniform(1000, generator=g)  # the jump: computed directly
    assert st.n == 0 and st.size == _philox._AHEAD_MAX
    start = g.position()
    _check(trnrand.uniform(1000, generator=g), seed, 0, start, 1)  # the run's second draw: a small refill
    assert st.n == 4 * _philox._AHEAD_MAX


def test_open_low_maps_from_the_buffer():
    seed, sub, start = 5, 0, 4 * 1000 + 1
    for open_low in (False, True):
        pos = start
        for n in (900, 900, 901):  # the second and third come from the buffer
            x = _philox.uniform32(seed, sub, pos, n, open_low=open_low)
            _check(x, seed, sub, pos, 1, open_low)
            pos += n
        assert _buffered(seed, sub)
        for n in (450, 451):
            x = _philox.uniform64(seed, sub, pos, n, open_low=open_low)
            _check(x, seed, sub, pos, 2, open_low)
            pos += 2 * n


def test_the_buffer_does_not_outlive_a_reseed_or_another_stream():
    g = trnrand.Generator(seed=1)
    for _ in range(3):
        trnrand.uniform(1000, generator=g)
    assert _buffered(1, 0)
    g.manual_seed(2)  # the same positions of another key
    for _ in range(3):
        start = g.position()
        _check(trnrand.uniform(1000, generator=g), 2, 0, start, 1)
    assert _buffered(2, 0) and not _buffered(1, 0)
    g.manual_seed(1)  # back to the first key from word 0
    _check(trnrand.uniform(1000, generator=g), 1, 0, 0, 1)
    # two generators of different seeds, alternating on one thread: each gets its own stream
    a, b = trnrand.Generator(seed=7), trnrand.Generator(seed=8, subsequence=1)
    for _ in range(3):
        for gen, seed, sub in ((a, 7, 0), (b, 8, 1)):
            start = gen.position()
            _check(trnrand.uniform(1000, generator=gen), seed, sub, start, 1)
    # a jump back inside the buffered range, and a set_state restore, read the same words again
    g = trnrand.Generator(seed=9)
    first = [trnrand.uniform(1000, generator=g) for _ in range(3)]
    g.advance_to(1000)
    assert torch.equal(trnrand.uniform(1000, generator=g), first[1])


def test_draws_at_the_end_of_the_counter_read_no_block_past_it():
    seed, sub = 3, 2**64 - 1
    start = 4 * 2**64 - 3000
    g = trnrand.Generator(seed=seed, subsequence=sub, offset=start)
    for n in (1000, 1000, 999):
        pos = g.position()
        _check(trnrand.uniform(n, generator=g), seed, sub, pos, 1)
    assert g.position() == 4 * 2**64 - 1


@pytest.fixture
def two_threads():
    with torch_threads(2):
        yield


def test_threaded_chunks_give_the_stream(two_threads):
    # chunks of one draw on two threads (forced): the words at every chunk seam are the reference's
    seed, sub, start = 2**64 - 5, 9, 4 * (2**32 - 20000) + 3  # odd start; the block index carries in the draw
    n = 4 * (3 * _philox._CHUNK + 50)
    with routes.force("threads"):
        w = _philox.words(seed, sub, start, n)
        u = _philox.uniform32(seed, sub, start, n)
        v = _philox.uniform64(seed, sub, start, n // 2)
    seams = [4 * k * _philox._CHUNK for k in (1, 2, 3)] + [4 * 20000 - 3]
    idx = sorted({i + d for i in [0, n - 4, *seams] for d in range(-4, 4) if 0 <= i + d < n})
    assert [int(w[i]) for i in idx] == [ref_philox.stream_word(seed, sub, start + i) for i in idx]
    assert [float(u[i]) for i in idx] == [_u32(seed, sub, start + i) for i in idx]
    assert [float(v[i // 2]) for i in idx[::2]] == [_u64(seed, sub, start + 2 * (i // 2)) for i in idx[::2]]
    # normals: the same per-chunk map on either route (their reference is the word map, tested elsewhere)
    for dtype in (torch.float32, torch.float64):
        with routes.force("threads"):
            z = _philox.normals(seed, sub, start, 3 * _philox._CHUNK, dtype)
        with routes.force("serial"):
            assert torch.equal(z, _philox.normals(seed, sub, start, 3 * _philox._CHUNK, dtype))


def test_measure_mode_times_both_chunk_routes(two_threads, monkeypatch):
    monkeypatch.setenv("TRNSCI_ROUTES", "measure")
    routes.forget()
    seed, n = 4, 4 * (2 * _philox._CHUNK) + 1
    u = _philox.uniform32(seed, 0, 0, n)
    _check(u, seed, 0, 0, 1)
    (choice,) = [c for k, c in routes.remembered().items() if k.startswith("trnrand.stream|uniform32,")]
    assert choice.origin == "measured" and set(choice.times) == {"serial", "threads"}
    routes.forget()
    torch.set_num_threads(1)  # one thread: no route to choose, nothing timed
    _philox.uniform32(seed, 0, 0, n)
    assert not [k for k in routes.remembered() if k.startswith("trnrand.stream|")]
    routes.forget()


def test_route_timing_of_a_large_draw_runs_only_its_first_chunks(two_threads, monkeypatch):
    # a draw of 10 chunks is timed on its first _ROUTE_CHUNKS and keyed in the largest class; the draw itself
    # is still complete and right at its last chunk
    monkeypatch.setenv("TRNSCI_ROUTES", "measure")
    routes.forget()
    seen = []
    real = _philox._chunks
    monkeypatch.setattr(_philox, "_chunks", lambda args, spans: (seen.append(len(spans)), real(args, spans)))
    seed, n = 6, 4 * (10 * _philox._CHUNK) - 1
    u = _philox.uniform32(seed, 0, 0, n)
    _check(u, seed, 0, 0, 1)
    chosen = {k: c for k, c in routes.remembered().items() if k.startswith("trnrand.stream|uniform32,")}
    assert list(chosen) == [f"trnrand.stream|uniform32,{_host._ROUTE_CHUNKS}|threads=2"]
    final = 1 if next(iter(chosen.values())).route == "serial" else 2  # the draw: all 10 chunks, or 5 + 5
    assert sum(seen[-final:]) == 10 and max(seen[:-final]) <= _host._ROUTE_CHUNKS
    routes.forget()
