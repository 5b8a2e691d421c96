"""The benchmarks' progress line."""

from __future__ import annotations

import sys
import time

from openclaw_rl.console import bar  # the bar every command draws (openclaw_rl/console.py)


class Progress:
    """One status line with a bar, redrawn in place on a terminal, printed now and then otherwise."""

    def __init__(self, stream=sys.stderr):
        self.stream = stream
        self.tty = stream.isatty()
        self.last = 0.0
        self.started = time.monotonic()

    def update(self, label: str, done: float, total: float, detail: str = "", force: bool = False) -> None:
        now = time.monotonic()
        if not self.tty and not force and now - self.last < 30:
            return
        self.last = now
        el = int(now - self.started)
        line = f"{bar(done, total)} {label} {done:g}/{total:g} {detail} ({el // 60}m{el % 60:02d}s)"
        if self.tty:
            self.stream.write("\r\x1b[2K" + line[:200])
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def note(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r\x1b[2K")
        el = int(time.monotonic() - self.started)
        self.stream.write(f"[{el // 60}m{el % 60:02d}s] {text}\n")
        self.stream.flush()
