"""Checks for debug-python-import (run with cwd /app)."""

import subprocess
from pathlib import Path

APP = Path.cwd()


def py(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["python3", *args], cwd=APP, capture_output=True, text=True, timeout=10)


def test_main_runs():
    res = py("-m", "app.main", "Hello World")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "hello-world\n"


def test_several_arguments():
    res = py("-m", "app.main", "  Many   Spaces!", "Ready, Set... GO 42")
    assert res.stdout.splitlines() == ["many-spaces", "ready-set-go-42"]


def test_helpers_import_alone():
    res = py("-c", "from app.helpers import slugify; print(slugify('A b'))")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "a-b\n"
