"""Checks for debug-python-average (run with cwd /app)."""

import hashlib
import subprocess
from pathlib import Path

APP = Path.cwd()
DATA_SHA256 = "1109de3cc7b371c4401288ed3ab33a4ec028a51fd601fc1f7706d20effbb4adc"


def avg(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["python3", str(APP / "avg.py"), str(path)], capture_output=True, text=True, timeout=10)


def test_given_data():
    res = avg(APP / "data.txt")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "Average: 42.50"


def test_data_unchanged():
    assert hashlib.sha256((APP / "data.txt").read_bytes()).hexdigest() == DATA_SHA256
    assert avg(APP / "data.txt").returncode == 0


def test_other_files(tmp_path):
    f = tmp_path / "nums.txt"
    f.write_text("1\n2\n\n# note\n2\n")
    assert avg(f).stdout.strip() == "Average: 1.67"
    f.write_text("-3.5\n   \n10\n")
    assert avg(f).stdout.strip() == "Average: 3.25"
