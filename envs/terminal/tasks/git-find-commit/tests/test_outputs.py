"""Checks for git-find-commit (run with cwd /app)."""

import re
import subprocess
from pathlib import Path

APP = Path.cwd()


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=APP, capture_output=True, text=True, check=True).stdout


def answer() -> str:
    return (APP / "answer.txt").read_text().strip()


def test_answer_is_full_hash():
    assert re.fullmatch(r"[0-9a-f]{40}", answer())


def test_answer_is_the_commit():
    assert git("show", "-s", "--format=%s", answer()).strip() == "Add settings loader"
    assert git("merge-base", "--is-ancestor", answer(), "main") == ""
    assert len(git("rev-list", "main").split()) == 7


def test_author():
    assert (APP / "author.txt").read_text().strip() == "Cleo Park"
