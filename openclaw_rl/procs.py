"""Processes as /proc shows them (`processes`: the one reading of it), and reaping the orphans of our child
processes (bwrap's namespace init) without stealing a waited-for child.

A process that spawns sandboxes marks itself a child subreaper: orphaned
descendants are reparented to it rather than to PID 1 (which, in a container,
may never reap them). `reap_orphans` then reaps zombie children that no
`subprocess.Popen` is waiting for: those started with `tracked_popen` are left to
their Popen, so an exit status is never lost.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

_PR_SET_CHILD_SUBREAPER = 36
_lock = threading.Lock()
_tracked: set[int] = set()


class ProcStat(NamedTuple):
    """A process as /proc/<pid>/stat shows it (the fields after the command name, whatever the name holds)."""

    pid: int
    state: str
    """`R`, `S`, ..., `Z` (a zombie)."""
    ppid: int
    pgrp: int


def processes() -> Iterator[ProcStat]:
    """Every process /proc lists now; one that ends while it is read is left out."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        yield ProcStat(int(entry.name), fields[0], int(fields[1]), int(fields[2]))


def become_subreaper() -> bool:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def tracked_popen(*args: Any, **kwargs: Any) -> subprocess.Popen:
    """`subprocess.Popen`, with its pid kept from the reaper until `untrack(pid)` (after it has been waited for)."""
    with _lock:  # no reap runs between the fork and the registration
        proc = subprocess.Popen(*args, **kwargs)
        _tracked.add(proc.pid)
    return proc


def untrack(pid: int) -> None:
    with _lock:
        _tracked.discard(pid)


def reap_orphans() -> int:
    """Reap zombie children not started with `tracked_popen` (or already waited for); returns how many."""
    me, reaped = os.getpid(), 0
    with _lock:
        for proc in processes():
            if proc.pid in _tracked:
                continue
            if proc.state == "Z" and proc.ppid == me:
                try:
                    os.waitpid(proc.pid, os.WNOHANG)
                    reaped += 1
                except ChildProcessError:
                    pass
    return reaped
