"""Split sequences into numbered pages."""

from pager.api import Page, paginate

__all__ = ["Page", "paginate"]
