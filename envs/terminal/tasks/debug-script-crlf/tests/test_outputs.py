"""Checks for debug-script-crlf (run with cwd /app)."""

import os
import subprocess
from pathlib import Path

APP = Path.cwd()


def test_check_script_executable():
    assert os.access(APP / "tools/check.sh", os.X_OK)


def test_no_carriage_returns():
    assert b"\r" not in (APP / "tools/check.sh").read_bytes()
    assert (APP / "tools/check.sh").read_text().startswith("#!/bin/bash\n")


def test_run_succeeds():
    res = subprocess.run(["./run.sh"], cwd=APP, capture_output=True, text=True, timeout=10)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["data ok", "all checks passed"]
