"""Checks for files-find-large (run with cwd /app)."""

from pathlib import Path

APP = Path.cwd()
EXPECTED = ["Zeta.dat", "images/2024/photo.raw", "logs/big.log", "logs/just-over.log", "old stuff/archive copy.txt"]


def lines() -> list[str]:
    return (APP / "large_files.txt").read_text().splitlines()


def test_list_exists():
    assert (APP / "large_files.txt").is_file()


def test_right_files():
    assert set(lines()) == set(EXPECTED)


def test_boundary_excluded():
    assert "logs/exact.log" not in lines()
    assert "tmp/cache.bin" not in lines()


def test_sorted_relative_paths():
    assert lines() == EXPECTED
