"""Unified diffs in git's format, made from file contents (the oracle and test patches of built tasks)."""

from __future__ import annotations

import difflib


def file_diff(path: str, old: str | None, new: str | None) -> str:
    """A `git apply`-able diff of one file: `old` None creates it, `new` None deletes it."""
    if old == new:
        return ""
    a = (old or "").splitlines(keepends=True)
    b = (new or "").splitlines(keepends=True)
    for lines in (a, b):
        if lines and not lines[-1].endswith("\n"):
            raise ValueError(f"{path}: files must end with a newline")
    head = [f"diff --git a/{path} b/{path}\n"]
    if old is None:
        head.append("new file mode 100644\n")
    elif new is None:
        head.append("deleted file mode 100644\n")
    fromfile = "/dev/null" if old is None else f"a/{path}"
    tofile = "/dev/null" if new is None else f"b/{path}"
    body = list(difflib.unified_diff(a, b, fromfile=fromfile, tofile=tofile, n=3))
    return "".join(head + body)


def tree_diff(old: dict[str, str], new: dict[str, str]) -> str:
    """The diff that turns the files `old` (path -> text) into `new`, paths in sorted order."""
    return "".join(file_diff(p, old.get(p), new.get(p)) for p in sorted(set(old) | set(new)))
