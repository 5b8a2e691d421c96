"""Checks for files-backup-archive (run with cwd /app)."""

import tarfile
from pathlib import Path

APP = Path.cwd()
KEPT = {
    "project/src/main.py": 'print("main")\n',
    "project/src/util.py": "def helper():\n    return 1\n",
    "project/docs/readme.md": "# Project\n",
    "project/logs/notes.txt": "keep me\n",
    "project/changelog.md": "catalog\n",
}


def members() -> dict[str, str]:
    with tarfile.open(APP / "backup.tar.gz", "r:gz") as tar:
        return {m.name.removeprefix("./"): tar.extractfile(m).read().decode() for m in tar.getmembers() if m.isfile()}


def test_is_gzip_tar():
    assert tarfile.is_tarfile(APP / "backup.tar.gz")
    with open(APP / "backup.tar.gz", "rb") as f:
        assert f.read(2) == b"\x1f\x8b"


def test_files_kept_with_content():
    got = members()
    for name, content in KEPT.items():
        assert got.get(name) == content, name


def test_no_log_files():
    assert not [n for n in members() if n.endswith(".log")]


def test_project_untouched():
    assert (APP / "project/logs/app.log").read_text() == "started\n"
    assert (APP / "project/src/main.py").is_file()
