"""Checks for git-cherry-pick (run with cwd /app)."""

import subprocess
from pathlib import Path

APP = Path.cwd()
FIXED = "def divide(a, b):\n    if b == 0:\n        return None\n    return a / b\n"


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=APP, capture_output=True, text=True, check=True).stdout


def test_fix_on_main():
    assert git("show", "main:calc.py") == FIXED
    assert "Fix division by zero" in git("log", "-1", "--format=%B", "main")


def test_no_other_hotfix_changes():
    assert "debug_log.py" not in git("ls-tree", "-r", "--name-only", "main").split()
    assert git("rev-list", "--merges", "main").strip() == ""


def test_main_history_kept():
    assert git("log", "--format=%s", "main").splitlines()[1:] == ["Add README", "Add calculator"]
