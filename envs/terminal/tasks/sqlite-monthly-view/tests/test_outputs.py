"""Checks for sqlite-monthly-view (run with cwd /app)."""

import shutil
import sqlite3
from pathlib import Path

APP = Path.cwd()
EXPECTED = [("2024-01", 150.05), ("2024-02", 200.34), ("2024-04", 24.75)]


def rows(con: sqlite3.Connection) -> list[tuple]:
    return con.execute("SELECT month, revenue FROM monthly_revenue").fetchall()


def close(got: list[tuple], want: list[tuple]) -> bool:
    return [m for m, _ in got] == [m for m, _ in want] and all(abs(a - b) < 0.001 for (_, a), (_, b) in zip(got, want))


def test_is_a_view():
    con = sqlite3.connect(APP / "sales.db")
    assert con.execute("SELECT type FROM sqlite_master WHERE name = 'monthly_revenue'").fetchone() == ("view",)


def test_months():
    assert [m for m, _ in rows(sqlite3.connect(APP / "sales.db"))] == [m for m, _ in EXPECTED]


def test_revenue():
    assert close(rows(sqlite3.connect(APP / "sales.db")), EXPECTED)


def test_view_is_live(tmp_path):
    copy = tmp_path / "sales.db"
    shutil.copy(APP / "sales.db", copy)
    con = sqlite3.connect(copy)
    con.execute("INSERT INTO orders (created_at, amount, status) VALUES ('2024-03-15 10:00:00', 9.99, 'complete')")
    want = EXPECTED[:2] + [("2024-03", 9.99)] + EXPECTED[2:]
    assert close(rows(con), want)
