import pytest

from pager.core import page_bounds, page_count
from pager.api import Page
from pager.render import footer


def test_page_bounds_zero_based():
    assert page_bounds(0, 3) == (0, 3)
    assert page_bounds(2, 3) == (6, 9)


def test_page_count_rounds_up():
    assert page_count(10, 3) == 4
    assert page_count(9, 3) == 3
    assert page_count(0, 3) == 0


def test_bad_page_size():
    with pytest.raises(ValueError):
        page_bounds(0, 0)


def test_footer():
    assert footer(Page(items=[1], number=2, total_pages=3)) == "< prev | page 2 of 3 | next >"
