"""Checks for git-feature-branch (run with cwd /app)."""

import subprocess
from pathlib import Path

APP = Path.cwd()


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=APP, capture_output=True, text=True, check=True).stdout


def test_branch_exists():
    assert git("branch", "--list", "feature/login").strip() != ""


def test_branch_starts_at_tag():
    assert git("rev-parse", "feature/login~1").strip() == git("rev-parse", "v1.0^{commit}").strip()


def test_login_commit():
    assert git("log", "-1", "--format=%s", "feature/login").strip() == "Add login page"
    assert git("show", "feature/login:login.txt") == "login page\n"


def test_main_unchanged():
    assert git("log", "--format=%s", "main").split("\n")[:3] == ["Add docs", "Start 1.1", "Release 1.0"]
    assert "login.txt" not in git("ls-tree", "-r", "--name-only", "main").split()
