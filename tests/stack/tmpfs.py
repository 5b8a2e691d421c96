"""A small tmpfs for tests of a full data disk: mounted for the test, unmounted after; skipped where it cannot be."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def small_tmpfs(folder: Path, size: str) -> Iterator[Path]:
    """`folder` as a tmpfs of `size` (mount's syntax: "8m"); pytest.skip where tmpfs cannot be mounted (not root)."""
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.decode().strip() or done.returncode}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)
        os.rmdir(folder)


def free_bytes(folder: Path) -> int:
    st = os.statvfs(folder)
    return st.f_bavail * st.f_frsize


def fill(folder: Path, leave: int = 0, name: str = "ballast") -> Path:
    """A file that takes all of `folder`'s disk but `leave` bytes (what the disk has less, if it has less)."""
    path = folder / name
    size = max(free_bytes(folder) - leave, 0)
    with open(path, "ab", buffering=0) as f:
        chunk = b"\0" * (1 << 20)
        while size > 0:
            try:
                size -= f.write(chunk[: min(size, len(chunk))])
            except OSError:  # others wrote meanwhile: the disk is full anyway
                break
    return path
