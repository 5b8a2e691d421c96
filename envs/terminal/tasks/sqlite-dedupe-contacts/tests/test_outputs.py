"""Checks for sqlite-dedupe-contacts (run with cwd /app)."""

import sqlite3
from pathlib import Path

import pytest

APP = Path.cwd()
KEPT = [
    (1, "Ann", "ann@example.com"),
    (2, "Bo", "bo@example.com"),
    (4, "Cy", "cy@example.com"),
    (6, "Di", "di@example.com"),
]


def db() -> sqlite3.Connection:
    return sqlite3.connect(APP / "contacts.db")


def test_no_duplicates():
    assert db().execute("SELECT COUNT(*) - COUNT(DISTINCT lower(email)) FROM contacts").fetchone()[0] == 0


def test_smallest_ids_kept_unchanged():
    assert db().execute("SELECT id, name, email FROM contacts ORDER BY id").fetchall() == KEPT


def test_unique_index_exists():
    unique = {r[1]: r[2] for r in db().execute("PRAGMA index_list(contacts)")}
    assert unique.get("idx_contacts_email") == 1


def test_duplicate_insert_refused():
    con = db()
    with pytest.raises(sqlite3.IntegrityError):
        con.execute("INSERT INTO contacts (name, email) VALUES ('X', 'DI@example.COM')")
    con.rollback()
