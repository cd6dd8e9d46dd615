"""Measured routes: when an operation has more than one CPU implementation, time them here.

Some operations can be computed several ways on the host -- an FFT of a
length with a large prime factor by ``torch.fft`` itself, by Bluestein on
``torch.fft``, or by SciPy's pocketfft; a small GEMM by NumPy or torch --
and which is fastest depends on the CPU, the BLAS/FFT build, the thread
count and the load. A size rule tuned on one machine is wrong on the
next, so the choice is made where the code runs, once per *route key*,
in the manner of FFTW's planner:

* ``measure`` (the default; FFTW_MEASURE): the first call of a route key
  times every candidate -- one warm-up call each, then ``rounds`` rounds
  in which the candidates run in rotating order (so a burst of load from
  another process falls on all of them), each round timing enough calls
  to last ``sample_s``. A candidate is chosen over the *default* (the
  obvious call, e.g. ``torch.fft.fft``) only when both its median and its
  best round are below ``margin`` times the default's: the library is
  never knowingly slower than the obvious call, and a near-tie or a lucky
  quiet moment does not flip the choice.
* ``estimate`` (FFTW_ESTIMATE): no timing; the default candidate. For
  one-off calls and test suites: ``TRNSCI_ROUTES=estimate`` or
  :func:`mode`.

A route key is ``(family, shape class)`` plus, added here, the thread
count (``torch.get_num_threads()``) -- the caller's shape class carries
the dtype and whatever else the choice depends on. Choices live in memory
for the process and are persisted in the calibration file
(:func:`trnsci.dispatch.calibration_path`, the ``"routes"`` section), so
a second process reads them instead of re-measuring. Every
:class:`Choice` keeps the times that chose it, for plans and reports.

Examples
--------
>>> from trnsci import routes
>>> with routes.mode("estimate"):
...     c = routes.choose("doc.add", ("n=3",), {"python": lambda: 1 + 2, "other": lambda: 3}, default="python")
>>> c.route, c.origin
('python', 'estimate')
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MODES = ("measure", "estimate")
ENV_MODE = "TRNSCI_ROUTES"

_lock = threading.RLock()
_mode_override: list[str | None] = [None]
_forced: list[str | None] = [None]
_listeners: list[Callable[[], None]] = []
_memory: dict[str, Choice] = {}
_file_cache: dict[str, Any] = {"key": None, "data": {}}


@dataclass(frozen=True)
class Choice:
    """The route chosen for one route key, and the evidence.

    Attributes
    ----------
    key : str
        The route key as stored (family, shape class, thread count).
    route : str
        The chosen candidate's name.
    origin : str
        ``"measured"`` (timed in this process), ``"estimate"`` (not timed:
        the default), ``"calibration:<path>"`` (read from the file) or
        ``"forced"`` (:func:`force`).
    times : dict
        Candidate name -> median seconds per call (empty for ``estimate``).
    spread : dict
        Candidate name -> (max - min) / median of the rounds' times.
    default : str
        The candidate that runs without evidence (the obvious call).
    """

    key: str
    route: str
    origin: str
    times: Mapping[str, float] = field(default_factory=dict)
    spread: Mapping[str, float] = field(default_factory=dict)
    default: str = ""

    def __str__(self) -> str:
        if not self.times:
            return f"{self.route} ({self.origin}: not timed)"
        shown = ", ".join(f"{name} {t * 1e6:,.1f} us" for name, t in sorted(self.times.items(), key=lambda kv: kv[1]))
        return f"{self.route} ({self.origin}: {shown})"

    def as_json(self) -> dict:
        return {"route": self.route, "times": dict(self.times), "spread": dict(self.spread), "default": self.default}


# ------------------------------------------------------------------ settings

def current_mode() -> str:
    """``"measure"`` or ``"estimate"``: :func:`mode` block first, then ``TRNSCI_ROUTES``, else measure."""
    if _mode_override[0] is not None:
        return _mode_override[0]
    raw = os.environ.get(ENV_MODE, "").strip().lower()
    if not raw:
        return "measure"
    if raw not in MODES:
        raise ValueError(f"environment variable {ENV_MODE} must be one of {', '.join(MODES)}, got {raw!r}")
    return raw


@contextlib.contextmanager
def mode(name: str) -> Iterator[None]:
    """Within the block, new route keys are chosen by ``name`` ("measure" or "estimate")."""
    if name not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {name!r}")
    old = _mode_override[0]
    _mode_override[0] = name
    _changed()
    try:
        yield
    finally:
        _mode_override[0] = old
        _changed()


@contextlib.contextmanager
def force(route: str) -> Iterator[None]:
    """Within the block, every route key that has a candidate named ``route`` takes it, untimed.

    For tests that must exercise one route (Bluestein, SciPy, ...) whatever
    this machine would choose; nothing chosen inside is remembered, and the
    libraries' settled routes are dropped on entry and exit (:func:`on_change`).
    """
    old = _forced[0]
    _forced[0] = route
    _changed()
    try:
        yield
    finally:
        _forced[0] = old
        _changed()


def forced() -> str | None:
    """The route a :func:`force` block imposes now, or None outside one (for plans that report it)."""
    return _forced[0]


def on_change(callback: Callable[[], None]) -> None:
    """Call ``callback()`` whenever choices may have changed (:func:`forget`, :func:`force`).

    A library that caches what it built from a :class:`Choice` (a settled
    per-call route) registers its cache's ``clear`` here, so the cache
    never outlives the choice.
    """
    _listeners.append(callback)


class Memo(dict):
    """A library's per-call table of route decisions in front of :func:`choose`.

    :func:`choose` looks a key up by a formatted string (family, shape
    class, threads); a hot path keeps its own decision under a cheap tuple
    key instead. A ``Memo`` is such a table that never outlives the choices
    it copies: it empties itself whenever they may change (:func:`on_change`:
    :func:`forget`, :func:`force`, :func:`mode`), and when it reaches
    ``limit`` entries. The tuple key must carry the thread count, as route
    keys do.
    """

    __slots__ = ("limit",)

    def __init__(self, limit: int = 256):
        super().__init__()
        self.limit = limit
        on_change(self.clear)

    def remember(self, key, value):
        """Store ``value`` under ``key`` (emptying a full table first); returns ``value``."""
        if len(self) >= self.limit:
            self.clear()
        self[key] = value
        return value


def _changed() -> None:
    for cb in list(_listeners):
        cb()


def threads() -> int:
    """The intra-op thread count a measurement is valid for (torch's, which the candidates share)."""
    try:
        import torch

        return int(torch.get_num_threads())
    except ImportError:  # pragma: no cover - torch is a dependency
        return os.cpu_count() or 1


def route_key(family: str, shape_class: tuple | str) -> str:
    """The stored key: ``family|shape class|threads=N``."""
    cls = shape_class if isinstance(shape_class, str) else ",".join(str(p) for p in shape_class)
    return f"{family}|{cls}|threads={threads()}"


# ------------------------------------------------------------------ measuring

def measure(candidates: Mapping[str, Callable[[], object]], *, rounds: int = 5, sample_s: float = 2e-3,
            clock: Callable[[], float] = time.perf_counter) -> tuple[dict, dict, dict]:
    """``(median, spread, best)``: per candidate the median seconds per call over the rounds, their
    spread ``(max - min) / median``, and the best (fastest) round.

    Every candidate runs once to warm up (a candidate that raises is left
    out: it cannot serve this key). Then ``rounds`` rounds, each timing
    every candidate once in an order rotated by one per round; a timing
    repeats the call enough times to last about ``sample_s`` (estimated
    from the warm-up), so microsecond calls are not lost in clock
    resolution. ``clock`` is injectable for tests.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    names = []
    reps: dict[str, int] = {}
    for name, fn in candidates.items():
        t0 = clock()
        try:
            fn()
        except Exception:  # noqa: BLE001 -- a candidate that cannot run this key is no candidate
            continue
        once = clock() - t0
        names.append(name)
        reps[name] = max(1, min(10_000, int(sample_s / once))) if once > 0 else 1
    samples: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)] if names else []
        for name in order:
            fn, k = candidates[name], reps[name]
            t0 = clock()
            for _ in range(k):
                fn()
            samples[name].append((clock() - t0) / k)
    med = {n: statistics.median(s) for n, s in samples.items()}
    spread = {n: ((max(s) - min(s)) / med[n] if med[n] > 0 else 0.0) for n, s in samples.items()}
    best = {n: min(s) for n, s in samples.items()}
    return med, spread, best


def pick(times: Mapping[str, float], default: str, margin: float = 0.9, best: Mapping[str, float] | None = None,
         worst: Mapping[str, float] | None = None) -> str:
    """The fastest candidate, if it beats the default clearly; else the default.

    Clearly: its median below ``margin`` x the default's and -- when the
    best rounds ``best`` are given -- its best round below ``margin`` x the
    default's best too. Load from other processes only ever adds time, so
    a candidate that won by luck in a quiet moment does not win both.
    With the slowest rounds ``worst`` given, its slowest round must also be
    below the default's: a candidate that stalled under the load of the
    moment (a multi-threaded call waiting at a barrier for a busy core) is
    not chosen over one that did not. Without a time for the default (it
    failed), simply the fastest.
    """
    if not times:
        return default
    key = (best or times).__getitem__
    fastest = min(times, key=key)
    if default not in times:
        return fastest
    if times[fastest] >= margin * times[default]:
        return default
    if best is not None and best[fastest] >= margin * best[default]:
        return default
    if worst is not None and worst[fastest] >= worst[default]:
        return default
    return fastest


def choose(family: str, shape_class: tuple | str, candidates: Mapping[str, Callable[[], object]], *,
           default: str, margin: float = 0.9, rounds: int = 5, sample_s: float = 2e-3,
           clock: Callable[[], float] = time.perf_counter, persist: bool = True, worth_timing: bool = True,
           robust: bool = False) -> Choice:
    """The route for ``(family, shape_class)`` at this thread count: remembered, read, or chosen now.

    Looks in this process's memory, then the calibration file; otherwise
    ``estimate`` mode returns ``default`` untimed (and remembers nothing,
    so a later ``measure`` can still time the key), and ``measure`` mode
    times ``candidates`` (thunks running the same problem), picks by
    :func:`pick`, remembers the choice and -- ``persist`` -- writes it to
    the calibration file. ``worth_timing=False`` (a problem too small for
    any route to save what timing costs) answers as ``estimate`` does.
    ``robust=True`` also compares the slowest rounds (see :func:`pick`).
    A :func:`force` block comes first. ``candidates`` must include ``default``.
    """
    if default not in candidates:
        raise ValueError(f"default route {default!r} is not among the candidates {sorted(candidates)}")
    key = route_key(family, shape_class)
    if _forced[0] is not None and _forced[0] in candidates:
        return Choice(key, _forced[0], "forced", default=default)
    with _lock:
        hit = _memory.get(key)
    if hit is not None and hit.route in candidates:
        return hit
    stored = _from_file(key)
    if stored is not None and stored.route in candidates:
        with _lock:
            _memory[key] = stored
        return stored
    if len(candidates) == 1 or not worth_timing or current_mode() == "estimate":
        return Choice(key, default, "estimate", default=default)
    times, spread, best = measure(candidates, rounds=rounds, sample_s=sample_s, clock=clock)
    worst = {n: best[n] + spread[n] * times[n] for n in times} if robust else None  # spread = (max - min) / median
    c = Choice(key, pick(times, default, margin, best, worst), "measured", times, spread, default)
    with _lock:
        _memory[key] = c
    if persist:
        try:
            save({key: c})
        except OSError:  # a read-only home does not stop the computation; the choice stays in memory
            pass
    return c


def lookup(family: str, shape_class: tuple | str) -> Choice | None:
    """A choice already made for ``(family, shape_class)`` at this thread count (memory, then the
    calibration file), or None. For tuners that time candidates themselves (:func:`record`)."""
    key = route_key(family, shape_class)
    with _lock:
        hit = _memory.get(key)
    return hit if hit is not None else _from_file(key)


def record(family: str, shape_class: tuple | str, route: str, times: Mapping[str, float], *, default: str,
           persist: bool = True) -> Choice:
    """Remember (and persist) a choice measured elsewhere -- e.g. by a library's incremental tuner
    timing real executions -- so a second process starts from it."""
    key = route_key(family, shape_class)
    c = Choice(key, route, "measured", dict(times), {}, default)
    with _lock:
        _memory[key] = c
    if persist:
        try:
            save({key: c})
        except OSError:
            pass
    return c


def remembered() -> dict[str, Choice]:
    """Every choice made or read in this process (key -> :class:`Choice`)."""
    with _lock:
        return dict(_memory)


def forget() -> None:
    """Drop this process's remembered choices (the file is untouched); tests and re-measuring use it."""
    with _lock:
        _memory.clear()
        _file_cache.update(key=None, data={})
    _changed()


# ------------------------------------------------------------------ persistence

def _path() -> Path:
    from trnsci.dispatch import calibration_path

    return calibration_path()


def _read_doc(path: Path) -> dict:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"calibration file {path} is malformed: {exc}") from None
    if not isinstance(doc, dict):
        raise ValueError(f"calibration file {path} is malformed: top level is not an object")
    return doc


def load(path: Path | None = None) -> dict[str, Choice]:
    """The routes stored in the calibration file (key -> :class:`Choice`), ``{}`` without a file."""
    path = path or _path()
    try:
        st = path.stat()
    except FileNotFoundError:
        return {}
    fkey = (str(path), st.st_mtime_ns, st.st_size)
    if _file_cache["key"] == fkey:
        return _file_cache["data"]
    raw = _read_doc(path).get("routes", {})
    if not isinstance(raw, dict):
        raise ValueError(f"calibration file {path} is malformed: 'routes' is not an object")
    out = {}
    origin = f"calibration:{path}"
    for k, v in raw.items():
        try:
            times = {str(a): float(b) for a, b in v.get("times", {}).items()}
            spread = {str(a): float(b) for a, b in v.get("spread", {}).items()}
            out[str(k)] = Choice(str(k), str(v["route"]), origin, times, spread, str(v.get("default", "")))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"calibration file {path} is malformed: route {k!r}: {exc}") from None
    _file_cache.update(key=fkey, data=out)
    return out


def _from_file(key: str) -> Choice | None:
    return load().get(key)


def save(choices: Mapping[str, Choice], path: Path | None = None) -> Path:
    """Merge ``choices`` into the calibration file's ``"routes"`` (other sections kept); returns the path."""
    path = path or _path()
    with _lock:
        doc = _read_doc(path)
        routes = doc.get("routes") if isinstance(doc.get("routes"), dict) else {}
        for k, c in choices.items():
            routes[k] = c.as_json()
        doc["routes"] = dict(sorted(routes.items()))
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(doc, indent=2) + "\n")
        tmp.replace(path)
    return path
