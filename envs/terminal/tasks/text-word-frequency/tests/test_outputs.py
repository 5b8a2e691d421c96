"""Checks for text-word-frequency (run with cwd /app)."""

from pathlib import Path

APP = Path.cwd()
EXPECTED = [(16, "the"), (7, "river"), (4, "and"), (4, "water"), (3, "goes")]


def rows() -> list[tuple[int, str]]:
    out = []
    for line in (APP / "top_words.txt").read_text().splitlines():
        if line.strip():
            count, word = line.split()
            out.append((int(count), word))
    return out


def test_most_frequent_word():
    assert rows()[:1] == EXPECTED[:1]


def test_split_on_punctuation():
    assert (7, "river") in rows()


def test_top_four():
    assert sorted(rows()[:4]) == sorted(EXPECTED[:4])


def test_ties_broken_alphabetically():
    assert rows() == EXPECTED
