"""Checks for text-csv-region-totals (run with cwd /app)."""

import csv
from pathlib import Path

APP = Path.cwd()
EXPECTED = {"east": "663.45", "north": "1174.92", "south": "1005.67", "west": "1618.79"}


def rows() -> list[list[str]]:
    with open(APP / "region_totals.csv", newline="") as f:
        return [r for r in csv.reader(f) if r]


def test_header():
    assert rows()[0] == ["region", "total"]


def test_totals_close():
    got = {r[0]: float(r[1]) for r in rows()[1:]}
    assert set(got) == set(EXPECTED)
    for region, total in EXPECTED.items():
        assert abs(got[region] - float(total)) < 0.005, region


def test_exact_format_and_order():
    assert rows()[1:] == [[k, v] for k, v in EXPECTED.items()]
