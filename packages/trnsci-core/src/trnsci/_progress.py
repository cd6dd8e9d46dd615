"""Progress output that fits where it goes: a bar with ETA on a terminal, plain lines in a log.

On a TTY the line is redrawn in place (``\\r``) and cleared when done; in a
file, a pipe or CI each step is one line of its own, so logs never show
overprinted fragments.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """``Progress(total, stream)``; call :meth:`step` before each item and :meth:`done` at the end."""

    def __init__(self, total: int, stream: TextIO | None = None, width: int = 24, tty: bool | None = None):
        self.total = max(0, int(total))
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)()) if tty is None else tty
        self.start = time.perf_counter()
        self.count = 0
        self._shown = 0

    def eta(self) -> float | None:
        """Seconds left, from the mean time per finished item (None before the first)."""
        if self.count <= 0:
            return None
        spent = time.perf_counter() - self.start
        return spent / self.count * max(0, self.total - self.count)

    def step(self, label: str) -> None:
        """Item ``count + 1`` of ``total`` starts: show it."""
        k = self.count + 1
        if self.tty:
            eta = self.eta()
            filled = int(self.width * self.count / self.total) if self.total else self.width
            bar = "#" * filled + "." * (self.width - filled)
            tail = f" ETA {_clock(eta)}" if eta is not None else ""
            text = f"[{bar}] {k}/{self.total}{tail}  {label}"[:110]
            pad = max(0, self._shown - len(text))
            self.stream.write("\r" + text + " " * pad)
            self._shown = len(text)
        else:
            self.stream.write(f"[{k}/{self.total}] {label}\n")
        self.stream.flush()
        self.count = k

    def done(self) -> None:
        """Clear the bar (TTY) so the next output starts on a clean line."""
        if self.tty and self._shown:
            self.stream.write("\r" + " " * self._shown + "\r")
            self.stream.flush()
            self._shown = 0


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 60}:{s % 60:02d}"
