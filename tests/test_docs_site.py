"""The documentation site builds with --strict, the README stays short and keeps the two commands, and every
relative link of the README and the docs pages points at a file that exists."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
README = REPO / "README.md"

# [text](target) and ![alt](target); the target ends at the first space or closing parenthesis.
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~)")


def relative_links(path: Path) -> list[str]:
    """The relative link targets of a Markdown file, outside fenced code blocks and code spans."""
    targets, in_fence = [], False
    for line in path.read_text().splitlines():
        if FENCE.match(line.lstrip()):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
            scheme, netloc, link_path, _, _ = urlsplit(target)
            if not scheme and not netloc and link_path:
                targets.append(unquote(link_path))
    return targets


def readme_doc_links() -> list[str]:
    return [t for t in relative_links(README) if t.startswith("docs/")]


def test_readme_is_short_and_keeps_the_two_commands():
    text = README.read_text()
    assert len(text.splitlines()) <= 220
    assert "make up" in text and "make test" in text


@pytest.mark.parametrize("page", sorted([README, *DOCS.rglob("*.md")]), ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(page: Path):
    missing = [t for t in relative_links(page) if not (page.parent / t).exists()]
    assert not missing, f"{page.relative_to(REPO)} links to missing files: {missing}"


def test_readme_links_every_docs_page():
    linked = {(REPO / t).resolve() for t in readme_doc_links()}
    pages = {p.resolve() for p in DOCS.rglob("*.md")}
    assert pages - linked == set(), f"docs pages the README does not link: {sorted(pages - linked)}"


def test_site_builds_strict(tmp_path: Path):
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert (site / "index.html").is_file()
    for target in readme_doc_links():
        rel = Path(target).relative_to("docs")
        built = site / "index.html" if rel == Path("index.md") else site / rel.with_suffix("") / "index.html"
        assert built.is_file(), f"{target} was not built ({built})"
    # The figures travel with the pages that show them.
    for image in (DOCS / "images").glob("*.png"):
        assert (site / "images" / image.name).is_file()
