"""Checks for git-commit-subset (run with cwd /app)."""

import subprocess
from pathlib import Path

APP = Path.cwd()


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=APP, capture_output=True, text=True, check=True).stdout


def test_commit_message():
    assert git("log", "-1", "--format=%s", "main").strip() == "Add parser"
    assert git("rev-list", "--count", "main").strip() == "2"


def test_modified_file_committed():
    assert "tokenize" in git("show", "main:src/parser.py")
    assert git("show", "main:src/parser.py") == (APP / "src/parser.py").read_text()


def test_new_file_committed():
    assert git("show", "main:src/tokens.py") == "def tokenize(s):\n    return s.split()\n"


def test_notes_change_left_uncommitted():
    assert git("show", "main:notes.txt") == "todo list\n"
    assert (APP / "notes.txt").read_text() == "todo list\n- write parser\n"
    assert git("status", "--porcelain", "notes.txt").strip() == "M notes.txt"
