"""Entry points: the `openclaw-rl` command line. It stands above everything it starts; nothing imports it."""
