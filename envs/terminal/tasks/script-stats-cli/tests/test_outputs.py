"""Checks for script-stats-cli (run with cwd /app)."""

import json
import re
import subprocess
from pathlib import Path

APP = Path.cwd()


def run(stdin: str) -> subprocess.CompletedProcess:
    return subprocess.run(["python3", str(APP / "stats.py")], input=stdin, capture_output=True, text=True, timeout=10)


def test_basic():
    res = run("1\n2\n3\n4\n")
    assert res.returncode == 0
    out = json.loads(res.stdout)
    assert out["count"] == 4 and out["min"] == 1 and out["max"] == 4 and out["mean"] == 2.5


def test_decimals_negatives_blanks():
    res = run(" -2.5\n10\n\n  3 \n2.0\n1\n\n")
    assert res.returncode == 0
    assert json.loads(res.stdout) == {"count": 5, "min": -2.5, "max": 10, "mean": 2.7}


def test_mean_rounded():
    out = json.loads(run("1\n1\n2\n").stdout)
    assert out["mean"] == 1.33


def test_empty_input():
    res = run("\n\n")
    assert res.returncode == 0
    assert json.loads(res.stdout) == {"count": 0}


def test_bad_line():
    assert (APP / "stats.py").is_file()
    res = run("1\n2\nthree\n4\n")
    assert res.returncode == 2
    assert res.stdout.strip() == ""
    assert re.search(r"\b3\b", res.stderr)
