"""Checks for script-organize-reports (run with cwd /app)."""

import subprocess
from pathlib import Path

APP = Path.cwd()


def files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def test_reports_organized():
    assert files(APP / "reports") == {
        "2023/04/report_2023-04-05.txt",
        "2023/11/report_2023-11-30.txt",
        "2024/01/report_2024-01-15.txt",
        "2024/01/report_2024-01-02.txt",
        "notes.txt",
        "report_final.txt",
    }
    assert (APP / "reports/2023/04/report_2023-04-05.txt").read_text() == "this is report_2023-04-05.txt\n"


def test_script_on_another_folder(tmp_path):
    d = tmp_path / "my reports"
    d.mkdir()
    for name in ["report_1999-12-31.txt", "report_2000-01-01.txt", "readme.md", "report_2000-1-1.txt"]:
        (d / name).write_text(name)
    res = subprocess.run(["bash", str(APP / "organize.sh"), str(d)], capture_output=True, text=True, timeout=10)
    assert res.returncode == 0, res.stderr
    assert files(d) == {"1999/12/report_1999-12-31.txt", "2000/01/report_2000-01-01.txt", "readme.md"} | {
        "report_2000-1-1.txt"
    }


def test_script_on_empty_folder(tmp_path):
    res = subprocess.run(["bash", str(APP / "organize.sh"), str(tmp_path)], capture_output=True, text=True, timeout=10)
    assert res.returncode == 0, res.stderr
    assert files(tmp_path) == set()
