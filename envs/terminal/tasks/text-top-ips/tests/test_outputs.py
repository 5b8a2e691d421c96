"""Checks for text-top-ips (run with cwd /app)."""

from pathlib import Path

APP = Path.cwd()
EXPECTED = [(14, "10.0.3.67"), (13, "10.0.3.102"), (12, "10.0.3.139")]


def rows() -> list[tuple[int, str]]:
    out = []
    for line in (APP / "top_ips.txt").read_text().splitlines():
        if line.strip():
            count, ip = line.split()
            out.append((int(count), ip))
    return out


def test_top_ip():
    assert rows()[0] == EXPECTED[0]


def test_three_ips_with_counts():
    assert sorted(rows()) == sorted(EXPECTED)


def test_order_and_length():
    assert rows() == EXPECTED
