"""Checks for files-sort-by-extension (run with cwd /app)."""

from pathlib import Path

APP = Path.cwd()
NAMES = [
    "report.txt",
    "notes.TXT",
    "Photo.JPG",
    "scan.jpg",
    "logo.png",
    "data.csv",
    "backup.tar.gz",
    "README",
    "Makefile",
]


def names_in(folder: str) -> set[str]:
    d = APP / "sorted" / folder
    return {p.name for p in d.iterdir()} if d.is_dir() else set()


def test_inbox_exists_and_is_empty():
    assert (APP / "inbox").is_dir()
    assert list((APP / "inbox").iterdir()) == []


def test_text_files_sorted():
    assert names_in("txt") == {"report.txt", "notes.TXT"}


def test_images_sorted():
    assert names_in("jpg") == {"Photo.JPG", "scan.jpg"}
    assert names_in("png") == {"logo.png"}


def test_last_extension_and_no_extension():
    assert names_in("gz") == {"backup.tar.gz"}
    assert names_in("other") == {"README", "Makefile"}


def test_every_file_kept_with_its_content():
    found = {p.name: p for p in (APP / "sorted").rglob("*") if p.is_file()}
    assert sorted(found) == sorted(NAMES)
    for name, path in found.items():
        assert path.read_text() == f"content of {name}\n"
