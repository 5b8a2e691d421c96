"""Checks for text-extract-emails (run with cwd /app)."""

from pathlib import Path

APP = Path.cwd()
EXPECTED = [
    "alice.smith@example.com",
    "bob_92@mail.example.net",
    "carol+news@lists.example.io",
    "dave-o@sub.domain.example.co.uk",
    "help@corp.example.org",
    "team@corp.example.org",
]


def lines() -> list[str]:
    return [line.strip() for line in (APP / "emails.txt").read_text().splitlines() if line.strip()]


def test_all_addresses_found():
    assert set(EXPECTED) <= set(lines())


def test_no_false_addresses():
    assert set(lines()) <= set(EXPECTED)


def test_lowercase_unique_sorted():
    assert lines() == EXPECTED
