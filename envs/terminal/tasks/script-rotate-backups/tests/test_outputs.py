"""Checks for script-rotate-backups (run with cwd /app)."""

import os
import subprocess
from pathlib import Path

APP = Path.cwd()


def make(d: Path, names: list[str]) -> None:
    """Files in `d`, the first one oldest."""
    for age, name in enumerate(reversed(names)):
        p = d / name
        p.write_text(name)
        os.utime(p, (1_700_000_000 - age * 3600, 1_700_000_000 - age * 3600))


def rotate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(APP / "rotate.sh"), *args], capture_output=True, text=True, timeout=10)


def names(d: Path) -> set[str]:
    return {p.name for p in d.iterdir()}


def test_keeps_newest(tmp_path):
    make(tmp_path, ["a.bak", "old copy.bak", "c.bak", "d.bak", "new one.bak"])
    assert rotate(str(tmp_path), "2").returncode == 0
    assert names(tmp_path) == {"d.bak", "new one.bak"}


def test_other_files_and_folders_untouched(tmp_path):
    make(tmp_path, ["x.bak", "notes.txt", "y.bak", "backup.bak.txt", "z.bak"])
    (tmp_path / "sub.bak").mkdir()
    make(tmp_path / "sub.bak", ["inner.bak"])
    assert rotate(str(tmp_path), "1").returncode == 0
    assert names(tmp_path) == {"z.bak", "notes.txt", "backup.bak.txt", "sub.bak"}
    assert names(tmp_path / "sub.bak") == {"inner.bak"}


def test_n_larger_than_count_and_zero(tmp_path):
    make(tmp_path, ["a.bak", "b.bak"])
    assert rotate(str(tmp_path), "5").returncode == 0
    assert names(tmp_path) == {"a.bak", "b.bak"}
    assert rotate(str(tmp_path), "0").returncode == 0
    assert names(tmp_path) == set()


def test_usage_errors(tmp_path):
    make(tmp_path, ["a.bak", "b.bak"])
    for args in [(), (str(tmp_path),), (str(tmp_path), "two"), (str(tmp_path), "-1")]:
        res = rotate(*args)
        assert res.returncode == 1, args
        assert res.stderr.strip(), args
    assert names(tmp_path) == {"a.bak", "b.bak"}
