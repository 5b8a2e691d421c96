"""Checks for text-csv-to-json (run with cwd /app)."""

import json
from pathlib import Path

APP = Path.cwd()
EXPECTED = [
    {"sku": "A-100", "name": "Hex bolt", "qty": 250, "price": 0.15, "discontinued": False},
    {"sku": "A-101", "name": "Washer, steel", "qty": 1200, "price": 0.05, "discontinued": False},
    {"sku": "B-200", "name": "Hammer", "qty": 12, "price": 14.99, "discontinued": False},
    {"sku": "B-201", "name": 'Saw "Pro"', "qty": 3, "price": 29.5, "discontinued": True},
    {"sku": "C-300", "name": "Glue", "qty": 0, "price": 4.25, "discontinued": True},
]


def data() -> list:
    return json.loads((APP / "inventory.json").read_text())


def test_rows_in_order():
    assert [r.get("sku") for r in data()] == [r["sku"] for r in EXPECTED]


def test_quoted_names():
    assert [r.get("name") for r in data()] == [r["name"] for r in EXPECTED]


def test_types():
    for row in data():
        assert type(row["qty"]) is int
        assert isinstance(row["price"], (int, float)) and not isinstance(row["price"], bool)
        assert type(row["discontinued"]) is bool


def test_exact_content():
    assert data() == EXPECTED
