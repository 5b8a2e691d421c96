"""Render a page footer such as "page 2 of 5"."""

from pager.api import Page


def footer(page: Page) -> str:
    parts = [f"page {page.number} of {page.total_pages}"]
    if page.has_previous:
        parts.insert(0, "< prev")
    if page.has_next:
        parts.append("next >")
    return " | ".join(parts)
