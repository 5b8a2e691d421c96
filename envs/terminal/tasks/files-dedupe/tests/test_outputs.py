"""Checks for files-dedupe (run with cwd /app)."""

from pathlib import Path

APP = Path.cwd()
PHOTOS = APP / "photos"
KEEP = {"a.jpg": "AAA", "b.jpg": "BBB", "c.jpg": "CCC", "sub/e.jpg": "EEE", "trip/d.jpg": "DDD"}
REMOVED = ["a_copy.jpg", "b_copy.jpg", "sub/a2.jpg", "trip/b.jpg", "trip/e.jpg"]


def remaining() -> dict[str, str]:
    return {str(p.relative_to(PHOTOS)): p.read_text().strip() for p in PHOTOS.rglob("*") if p.is_file()}


def test_no_duplicates_left():
    contents = list(remaining().values())
    assert len(contents) == len(set(contents))


def test_unique_content_kept():
    assert set(remaining().values()) == set(KEEP.values())


def test_first_copy_kept():
    assert remaining() == KEEP


def test_removed_list():
    assert (APP / "removed.txt").read_text().splitlines() == REMOVED
