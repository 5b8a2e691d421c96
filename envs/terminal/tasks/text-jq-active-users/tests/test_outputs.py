"""Checks for text-jq-active-users (run with cwd /app)."""

import json
from pathlib import Path

APP = Path.cwd()


def summary() -> dict:
    return json.loads((APP / "summary.json").read_text())


def test_active_emails():
    assert (APP / "active_emails.txt").read_text().split() == [
        "alice@example.com",
        "carol@example.org",
        "dan@example.net",
        "frank@example.com",
        "heidi@example.org",
    ]


def test_counts():
    s = summary()
    assert s["active"] == 5 and s["inactive"] == 3


def test_active_admins():
    assert summary()["admins"] == ["Alice", "Frank"]


def test_exact_keys():
    assert set(summary()) == {"active", "inactive", "admins"}
