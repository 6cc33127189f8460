"""A one-line progress display for long waits, shown only on a terminal."""
from __future__ import annotations

import sys
import time


class Progress:
    """`with Progress(total, "tasks") as p: p.update(done)`. Prints nothing
    unless the stream (stderr by default) is a TTY and `total` is at least
    `minimum`."""

    def __init__(self, total: int, what: str = "tasks", stream=None, minimum: int = 100):
        self.total = total
        self.what = what
        self.stream = stream if stream is not None else sys.stderr
        try:
            tty = self.stream.isatty()
        except (AttributeError, ValueError):
            tty = False
        self.enabled = tty and total >= minimum
        self.start = time.monotonic()
        self._shown = False

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        width = 30
        frac = done / self.total if self.total else 1.0
        bar = "#" * int(frac * width)
        elapsed = time.monotonic() - self.start
        self.stream.write("\r[%-*s] %d/%d %s (%3d%%) %.1fs" % (
            width, bar, done, self.total, self.what, int(frac * 100), elapsed))
        self.stream.flush()
        self._shown = True

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        if self._shown:
            self.stream.write("\n")
            self.stream.flush()
