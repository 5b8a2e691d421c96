"""Search keys: normalised text, case kept for display."""

from slugkit.normalize import normalize


def display_key(text):
    return normalize(text, keep_case=True)


def search_key(text):
    return normalize(text)
