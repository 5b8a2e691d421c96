"""Checks for text-log-error-counts (run with cwd /app)."""

from pathlib import Path

APP = Path.cwd()
EXPECTED = [("api", 16), ("db", 13), ("auth", 11), ("billing", 4), ("cache", 4)]


def rows() -> list[tuple[str, int]]:
    out = []
    for line in (APP / "error_counts.txt").read_text().splitlines():
        if line.strip():
            name, count = line.split()
            out.append((name, int(count)))
    return out


def test_counts_per_service():
    assert dict(rows()) == dict(EXPECTED)


def test_warnings_mentioning_error_not_counted():
    assert dict(rows()).get("db") == 13


def test_services_without_errors_left_out():
    assert "search" not in dict(rows())


def test_order():
    assert rows() == EXPECTED
