"""Checks for git-untrack-secret (run with cwd /app)."""

import subprocess
from pathlib import Path

APP = Path.cwd()


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=APP, capture_output=True, text=True, check=True).stdout


def test_secret_not_in_any_commit():
    for commit in git("rev-list", "main").split():
        assert ".env" not in git("ls-tree", "-r", "--name-only", commit).split(), commit


def test_gitignore_committed():
    assert ".env" in git("show", "main:.gitignore").split()


def test_commit_amended_not_added():
    assert git("log", "--format=%s", "main").splitlines() == ["Add config", "Initial"]
    assert "config.py" in git("ls-tree", "-r", "--name-only", "main").split()


def test_env_file_kept():
    assert (APP / ".env").read_text() == "SECRET_KEY=s3cr3t-value\n"
    assert git("status", "--porcelain", "--ignored", ".env").strip() == "!! .env"
