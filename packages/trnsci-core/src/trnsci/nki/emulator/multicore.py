"""Multi-program launches: grid programs as concurrent threads, ``sendrecv`` and ``core_barrier``.

AWS's simulator (``nki/guides/nki_simulator.rst``, "Execution") runs the
programs of an LNC2 launch (``kernel[2](...)``) as concurrent Python
threads, each with its own ``program_id``, sharing ``shared_hbm``; the
synchronising instructions ``nisa.sendrecv`` and ``nisa.core_barrier`` block
until their partners arrive.  The emulator does the same, deterministically:
every program is a thread, but only one runs at a time (it holds the baton).
A program runs until it finishes or blocks in a synchronising instruction;
the baton then passes to the next program (in program order) that can make
progress.  Kernels that never synchronise therefore run program 0 to the end,
then program 1, ...; kernels that exchange data interleave at exactly the
points where the hardware cores would wait for each other.  When every
unfinished program is blocked the launch is a deadlock and fails, naming
where each program waits.

Each program is its own NeuronCore: on-chip capacity is checked per program
(:meth:`memory.TraceContext.check_capacity`).  The counters of all programs
add up in the one profile (the modeled time schedules them on one core's
engines: an upper bound for a multi-core launch).
"""

import itertools
import threading

from . import memory as mem
from .errors import NkiValidationError


class _Abort(BaseException):
    """Raised in a program thread when another program failed: unwinds it quietly."""


class Scheduler:
    """The baton: which program runs, who waits for what, and the messages in flight."""

    def __init__(self, ctx, grid):
        self.ctx = ctx
        self.grid = tuple(grid)
        self.pids = list(itertools.product(*(range(g) for g in grid)))
        self.n = len(self.pids)
        self.cv = threading.Condition()
        self.current = 0
        self.done = [False] * self.n
        self.waits = {}  # program index -> (predicate, description)
        self.shared_index = [0] * self.n
        self.error = None  # (program index, exception)
        self.mail = {}  # (pipe_id, sender, receiver) -> list of payloads in flight
        self.taken = {}  # (pipe_id, sender, receiver) -> payloads the receiver consumed
        self.sent = {}  # (pipe_id, sender, receiver) -> payloads posted
        self.barrier_arrivals = {}  # (cores, generation) -> set of program indices
        self.barrier_gen = {}  # (program index, cores) -> generation it is at

    # ---- running ---------------------------------------------------------
    def run(self, fn, args, kwargs):
        results = [None] * self.n
        threads = [threading.Thread(target=self._program, args=(i, fn, args, kwargs, results),
                                    name=f"nki-program-{i}", daemon=True) for i in range(self.n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if self.error is not None:
            raise self.error[1]
        return results[-1]

    def _program(self, i, fn, args, kwargs, results):
        mem._state.ctx = self.ctx
        try:
            with self.cv:
                self.cv.wait_for(lambda: self.current == i or self.error is not None)
                if self.error is not None:
                    return
            self._enter(i)
            results[i] = fn(*args, **kwargs)
        except _Abort:
            return
        except BaseException as exc:  # noqa: BLE001 -- handed to the launching thread
            with self.cv:
                if self.error is None:
                    self.error = (i, exc)
                self.cv.notify_all()
            return
        finally:
            mem._state.ctx = None
        with self.cv:
            self.done[i] = True
            self._pass(i)

    def _enter(self, i):
        """Program ``i`` takes the baton: the context shows its program id."""
        ctx = self.ctx
        ctx.program_id = self.pids[i]
        ctx.program_index = i
        ctx.shared_index = self.shared_index[i]

    def _pass(self, i):
        """Hand the baton to the next program that can run (cv held)."""
        self.shared_index[i] = self.ctx.shared_index
        for d in range(1, self.n + 1):
            j = (i + d) % self.n
            if self.done[j]:
                continue
            w = self.waits.get(j)
            if w is None or w[0]():
                self.current = j
                self.cv.notify_all()
                return
        if not all(self.done):
            where = "; ".join(f"program {j} waits in {w[1]}" for j, w in sorted(self.waits.items()))
            self.error = (i, NkiValidationError(
                f"multi-core deadlock: every unfinished program is blocked ({where}); each nisa.sendrecv needs "
                "its partner's matching sendrecv (send_to_rank / recv_from_rank, same pipe_id) and "
                "core_barrier every core in 'cores'"))
        self.current = -1
        self.cv.notify_all()

    def block(self, predicate, what):
        """The running program waits until ``predicate()`` holds; other programs run meanwhile."""
        i = self.ctx.program_index
        if predicate():
            return
        c = self.ctx.counters
        depth, c._depth = c._depth, 0  # the instruction's own accounting resumes after the wait
        with self.cv:
            self.waits[i] = (predicate, what)
            self._pass(i)
            self.cv.wait_for(lambda: self.current == i or self.error is not None)
            self.waits.pop(i, None)
            if self.error is not None:
                raise _Abort()
        self._enter(i)
        c._reads.clear()
        c._writes.clear()
        c._events = []
        c._depth = depth

    # ---- sendrecv --------------------------------------------------------
    def exchange(self, op, payload, send_to, recv_from, pipe_id):
        """Post ``payload`` to ``send_to``; return what ``recv_from`` posted to us (same pipe_id)."""
        i = self.ctx.program_index
        out_key = (pipe_id, i, send_to)
        in_key = (pipe_id, recv_from, i)
        self.mail.setdefault(out_key, []).append(payload)
        self.sent[out_key] = self.sent.get(out_key, 0) + 1
        mine = self.sent[out_key]
        self.block(lambda: bool(self.mail.get(in_key)),
                   f"{op} (pipe_id={pipe_id}) receiving from rank {recv_from}")
        data = self.mail[in_key].pop(0)
        self.taken[in_key] = self.taken.get(in_key, 0) + 1
        # the pipe's operations complete together: wait until our payload was received too
        self.block(lambda: self.taken.get(out_key, 0) >= mine,
                   f"{op} (pipe_id={pipe_id}) until rank {send_to} receives")
        return data

    # ---- core_barrier ----------------------------------------------------
    def barrier(self, op, cores):
        i = self.ctx.program_index
        key = (i, cores)
        gen = self.barrier_gen.get(key, 0)
        self.barrier_gen[key] = gen + 1
        arrived = self.barrier_arrivals.setdefault((cores, gen), set())
        arrived.add(i)
        self.block(lambda: arrived >= set(cores), f"{op} (cores={cores})")
