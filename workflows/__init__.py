"""Temporal workflows: deterministic orchestration only; all I/O happens in activities."""
