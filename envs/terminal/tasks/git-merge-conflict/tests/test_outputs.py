"""Checks for git-merge-conflict (run with cwd /app)."""

import subprocess
from pathlib import Path

APP = Path.cwd()


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=APP, capture_output=True, text=True, check=True).stdout


def test_merge_commit():
    parents = git("show", "-s", "--format=%P", "main").split()
    assert len(parents) == 2
    assert parents[1] == git("rev-parse", "feature").strip()


def test_conflict_resolved():
    assert git("show", "main:greeting.txt") == "Hello there\nHello, world\n"


def test_both_sides_kept():
    assert git("show", "main:feature.txt") == "feature\n"
    assert git("show", "main:version.txt") == "v2\n"


def test_clean_on_main():
    assert git("rev-parse", "--abbrev-ref", "HEAD").strip() == "main"
    assert git("status", "--porcelain").strip() == ""
    assert (APP / "greeting.txt").read_text() == "Hello there\nHello, world\n"
