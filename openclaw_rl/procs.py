"""Reaping the orphans of our own child processes (bwrap's namespace init) without stealing a waited-for child.

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
from pathlib import Path
from typing import Any

_PR_SET_CHILD_SUBREAPER = 36
_lock = threading.Lock()
_tracked: set[int] = set()


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
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) in _tracked:
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2 :].split()
            if fields[0] == "Z" and int(fields[1]) == me:
                try:
                    os.waitpid(int(entry.name), os.WNOHANG)
                    reaped += 1
                except ChildProcessError:
                    pass
    return reaped
