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


def setting_overrides(pairs: list[str]) -> dict[str, str]:
    """`--set training.batch_size=8` as the stack's environment variable OPENCLAW_RL_TRAINING__BATCH_SIZE=8."""
    env = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"--set {pair!r}: expected KEY=VALUE, e.g. training.engine_memory_during_step=all")
        env["OPENCLAW_RL_" + key.strip().upper().replace(".", "__")] = value
    return env


def add_set_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting of the stack, dotted (training.lora.enabled=true); repeatable; applied last",
    )
