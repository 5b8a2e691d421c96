"""Slugs and search keys."""

from slugkit.slug import slugify

__all__ = ["slugify"]
