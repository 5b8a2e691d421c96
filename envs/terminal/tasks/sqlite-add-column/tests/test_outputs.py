"""Checks for sqlite-add-column (run with cwd /app)."""

import sqlite3
from pathlib import Path

APP = Path.cwd()


def db() -> sqlite3.Connection:
    return sqlite3.connect(APP / "app.db")


def test_column_added():
    cols = {row[1]: row[2] for row in db().execute("PRAGMA table_info(users)")}
    assert cols.get("email", "").upper() == "TEXT"
    assert {"id", "username", "created"} <= set(cols)


def test_emails_filled():
    got = dict(db().execute("SELECT username, email FROM users"))
    assert got == {"alice": "alice@example.com", "bob": "bob@example.org", "carol": None, "dave": "dave@example.net"}


def test_rows_kept():
    rows = db().execute("SELECT id, username, created FROM users ORDER BY id").fetchall()
    assert rows == [
        (1, "alice", "2024-01-02"),
        (2, "bob", "2024-01-05"),
        (3, "carol", "2024-02-11"),
        (4, "dave", "2024-03-01"),
    ]


def test_index():
    names = [r[1] for r in db().execute("PRAGMA index_list(users)")]
    assert "idx_users_email" in names
    assert [r[2] for r in db().execute("PRAGMA index_info(idx_users_email)")] == ["email"]
