"""Benchmarks that run the whole system and report what it learns (`openclaw-rl bench ...`)."""
