"""Checks for files-normalize-names (run with cwd /app)."""

from pathlib import Path

APP = Path.cwd()
RENAMES = {
    "My Report (Final).TXT": "my-report-final.txt",
    "Budget 2024 - draft.xlsx": "budget-2024-draft.xlsx",
    "meeting_notes.md": "meeting-notes.md",
    "ALL CAPS.PDF": "all-caps.pdf",
    "  Team Photo!.JPG": "team-photo.jpg",
    "already-fine.txt": "already-fine.txt",
}


def names() -> set[str]:
    return {p.name for p in (APP / "docs").iterdir()}


def test_simple_names():
    assert {"meeting-notes.md", "all-caps.pdf", "already-fine.txt"} <= names()


def test_punctuation_collapsed():
    assert {"my-report-final.txt", "budget-2024-draft.xlsx", "team-photo.jpg"} <= names()


def test_nothing_else_left():
    assert names() == set(RENAMES.values())


def test_contents_unchanged():
    for old, new in RENAMES.items():
        path = APP / "docs" / new
        assert path.is_file() and path.read_text() == f"original name: {old}\n", new
