"""Checks for sqlite-import-csv (run with cwd /app)."""

import sqlite3
from pathlib import Path

APP = Path.cwd()
ROWS = [
    (1, "Pencil", 0.99, 500),
    (2, "Notebook, A5", 3.49, 120),
    (3, "Stapler", 12.0, 15),
    (4, 'Tape "clear"', 1.75, 0),
    (5, "Scissors", 6.5, 42),
]


def db() -> sqlite3.Connection:
    assert (APP / "store.db").is_file()
    return sqlite3.connect(APP / "store.db")


def test_schema():
    cols = [(r[1], r[2].upper(), r[5]) for r in db().execute("PRAGMA table_info(products)")]
    assert cols == [("id", "INTEGER", 1), ("name", "TEXT", 0), ("price", "REAL", 0), ("stock", "INTEGER", 0)]


def test_no_header_row():
    assert db().execute("SELECT COUNT(*) FROM products WHERE name = 'name'").fetchone()[0] == 0
    assert db().execute("SELECT COUNT(*) FROM products").fetchone()[0] == 5


def test_rows():
    assert db().execute("SELECT id, name, price, stock FROM products ORDER BY id").fetchall() == ROWS


def test_types():
    types = db().execute("SELECT DISTINCT typeof(price), typeof(stock) FROM products").fetchall()
    assert types == [("real", "integer")]
