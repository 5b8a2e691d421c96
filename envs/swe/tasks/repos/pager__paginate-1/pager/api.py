"""The public API: pages are numbered from 1, as users see them."""

from dataclasses import dataclass

from pager.core import page_bounds, page_count


@dataclass
class Page:
    items: list
    number: int
    total_pages: int

    @property
    def has_next(self):
        return self.number < self.total_pages

    @property
    def has_previous(self):
        return self.number > 1


def paginate(items, page=1, per_page=10):
    """Page number `page` (1-based) of `items`, `per_page` items per page."""
    items = list(items)
    if page < 1:
        raise ValueError("pages are numbered from 1")
    start, end = page_bounds(page, per_page)
    return Page(items=items[start:end], number=page, total_pages=page_count(len(items), per_page))
