"""Checks for files-latest-symlink (run with cwd /app)."""

import os
from pathlib import Path

APP = Path.cwd()


def test_is_symlink():
    assert (APP / "current").is_symlink()


def test_points_to_newest():
    assert (APP / "current").resolve() == (APP / "releases/v1.10.2").resolve()
    assert (APP / "current/VERSION").read_text() == "v1.10.2\n"


def test_relative_target():
    assert not os.readlink(APP / "current").startswith("/")


def test_version_file():
    assert (APP / "current_version.txt").read_text().strip() == "v1.10.2"
