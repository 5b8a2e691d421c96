"""Low-level page arithmetic. Page *indexes* here are zero-based."""


def page_bounds(index, per_page):
    """The [start, end) slice of the page with zero-based `index`."""
    if per_page < 1:
        raise ValueError("per_page must be at least 1")
    if index < 0:
        raise ValueError("index must not be negative")
    start = index * per_page
    return start, start + per_page


def page_count(total, per_page):
    """How many pages `total` items fill (the last one may be partial)."""
    if per_page < 1:
        raise ValueError("per_page must be at least 1")
    return (total + per_page - 1) // per_page
