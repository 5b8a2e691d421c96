"""Temporal activities, grouped by the worker pool that runs them."""
