"""Command-line argument types the benchmarks share."""

from __future__ import annotations

import argparse


def steps_arg(text: str) -> tuple[int, ...]:
    try:
        steps = tuple(sorted({int(x) for x in text.split(",") if x.strip()}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--steps takes comma-separated step counts like 8,16, got {text!r}") from None
    if not steps or steps[0] < 1:
        raise argparse.ArgumentTypeError(f"--steps needs step counts of at least 1, got {text!r}")
    return steps
