"""Checks for debug-bash-deploy (run with cwd /app)."""

import subprocess
from pathlib import Path

APP = Path.cwd()
PAGES = {"index.html": "<h1>Home</h1>\n", "about us.html": "<h1>About us</h1>\n", "contact.html": "<h1>Contact</h1>\n"}


def deploy(*args: str, cwd: Path = APP) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(APP / "deploy.sh"), *args], cwd=cwd, capture_output=True, text=True, timeout=10)


def pages(name: str) -> dict[str, str]:
    d = APP / "out" / name
    return {p.name: p.read_text() for p in d.iterdir()} if d.is_dir() else {}


def test_name_with_spaces():
    res = deploy("My Site")
    assert res.returncode == 0, res.stderr
    assert set(pages("My Site")) >= {"index.html", "contact.html"}


def test_pages_with_spaces_copied():
    deploy("plain")
    assert pages("plain") == PAGES


def test_from_another_directory(tmp_path):
    res = deploy("elsewhere test", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert pages("elsewhere test") == PAGES


def test_usage_without_name():
    res = deploy()
    assert res.returncode == 1
    assert "usage" in res.stderr.lower()
