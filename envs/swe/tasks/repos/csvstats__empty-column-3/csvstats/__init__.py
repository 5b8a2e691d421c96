"""Summaries of CSV columns."""
