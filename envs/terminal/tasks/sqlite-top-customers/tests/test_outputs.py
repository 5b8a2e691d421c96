"""Checks for sqlite-top-customers (run with cwd /app)."""

import csv
from pathlib import Path

APP = Path.cwd()
COUNTRIES = [["UK", "460.50"], ["DE", "635.10"], ["BR", "345.25"], ["CN", "150.00"], ["JP", "5.00"]]


def revenue_rows() -> list[list[str]]:
    with open(APP / "revenue_by_country.csv", newline="") as f:
        return [r for r in csv.reader(f) if r]


def test_top_customer():
    assert (APP / "top_customers.txt").read_text().split()[:1] == ["Fatima"]


def test_top_three_paid_only():
    assert (APP / "top_customers.txt").read_text().split() == ["Fatima", "Bruno", "Dara"]


def test_revenue_values():
    rows = revenue_rows()
    assert rows[0] == ["country", "revenue"]
    assert {r[0]: float(r[1]) for r in rows[1:]} == {c: float(v) for c, v in COUNTRIES}


def test_revenue_order_and_format():
    assert revenue_rows()[1:] == sorted(COUNTRIES, key=lambda r: -float(r[1]))
