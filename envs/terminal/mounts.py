"""Host folders shown inside a sandbox for one command: a task's setup script, oracle, checker tests, results.

They are copied to a fresh temporary folder first, for two reasons: the sandbox
runs as a uid of its own, which may not read the task folder where it lies (a
checkout under a home directory), and the checker must not be able to change the
task's own files even through a bug. The copy dies with the command.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from envs.sandbox import Sandbox


@dataclass
class Mount:
    host: Path
    """The temporary folder on the host (read the results here)."""
    path: str
    """Where commands see it: the path inside the sandbox, or the host path when the pool runs unsandboxed."""
    ro_binds: dict[Path, str] = field(default_factory=dict)
    rw_binds: dict[Path, str] = field(default_factory=dict)


@contextmanager
def mounted(box: Sandbox, inside: str, source: Path | None = None, writable: bool = False) -> Iterator[Mount]:
    """A copy of `source` (a folder or one file; None: empty) that a command of `box` sees at `inside`."""
    host = Path(tempfile.mkdtemp(prefix="oc-terminal-"))
    try:
        if source is not None and source.is_dir():
            shutil.copytree(source, host, dirs_exist_ok=True)
        elif source is not None:
            shutil.copy2(source, host / source.name)
        _open_to(box, host, writable)
        sandboxed = box.pool.mode == "bwrap"
        binds = {host: inside} if sandboxed else {}
        yield Mount(
            host=host,
            path=inside if sandboxed else str(host),
            ro_binds={} if writable else binds,
            rw_binds=binds if writable else {},
        )
    finally:
        shutil.rmtree(host, ignore_errors=True)


def _open_to(box: Sandbox, host: Path, writable: bool) -> None:
    """Let the sandbox's uid read the copy (and write it when `writable`); nobody else gets write access."""
    if writable and box.uid is not None:
        for p in [host, *host.rglob("*")]:
            os.chown(p, box.uid, box.uid, follow_symlinks=False)
        return
    for p in [host, *host.rglob("*")]:
        if p.is_symlink():
            continue
        mode = p.stat().st_mode
        p.chmod(mode | 0o555 if p.is_dir() else mode | 0o444)
