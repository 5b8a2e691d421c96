"""Entry points: the `openclaw-rl` command line. It stands above everything it starts, and nothing imports it; its
one output style (openclaw_rl/console.py) lives below it, where the benchmarks' command lines use it too."""
