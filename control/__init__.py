"""The one place that turns settings into workflow inputs and handles: sessions, training, episodes, API keys and
the audit of sessions. The API, the CLI, the stack and the benchmarks start and read workflows through it."""
