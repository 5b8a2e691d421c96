"""Entry points: the `openclaw-rl` command line. It stands above everything it starts; nothing imports it but the
benchmarks' command lines and progress line (bench/), for the one output style (cli/style.py)."""
