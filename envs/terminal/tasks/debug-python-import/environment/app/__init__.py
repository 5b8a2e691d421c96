"""A tiny slug tool."""
