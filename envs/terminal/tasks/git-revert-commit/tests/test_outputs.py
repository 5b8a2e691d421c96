"""Checks for git-revert-commit (run with cwd /app)."""

import subprocess
from pathlib import Path

APP = Path.cwd()
ORIGINAL = ["Add README", "Change timeout setting", "Add cache settings", "Initial config"]


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=APP, capture_output=True, text=True, check=True).stdout


def test_timeout_restored_in_head():
    assert "timeout: 30\n" in git("show", "main:config.yaml")


def test_history_kept():
    subjects = git("log", "--format=%s", "main").splitlines()
    assert len(subjects) == 5
    assert subjects[1:] == ORIGINAL


def test_other_changes_kept():
    assert git("show", "main:config.yaml") == "name: shop\ntimeout: 30\ncache:\n  size: 512\n"
    assert git("show", "main:README.md") == "# Shop\n"


def test_work_tree_clean():
    assert git("status", "--porcelain").strip() == ""
    assert (APP / "config.yaml").read_text() == "name: shop\ntimeout: 30\ncache:\n  size: 512\n"
