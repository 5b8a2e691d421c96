"""`openclaw-rl bench ...`: the benchmarks that run the whole system, one subcommand each (wired in by cli/main.py)."""

from __future__ import annotations

import argparse
import signal

from bench.agents import cli as agents_cli
from bench.personalization import cli as personalization_cli
from bench.personalization import two_users_cli

COMMANDS = {"personalization": personalization_cli, "two-users": two_users_cli, "agents": agents_cli}


def add_parser(sub: argparse._SubParsersAction, func) -> None:
    bench = sub.add_parser(
        "bench",
        help="benchmarks that run the whole system: personalization (Table 3), two-users (an agent per user), "
        "agents (Table 4, Figure 4)",
    )
    bsub = bench.add_subparsers(dest="bench_command", required=True)
    for command in COMMANDS.values():
        command.add_parser(bsub)
    bench.set_defaults(func=func, exits_hard=True)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def bench_command(args: argparse.Namespace, settings) -> int:
    # A benchmark killed (SIGTERM: `kill`, a CI timeout) stops its stacks as Ctrl-C does, through the runners'
    # `finally`, instead of leaving a Temporal server, an engine and workers behind.
    signal.signal(signal.SIGTERM, _interrupt)
    return COMMANDS[args.bench_command].bench_command(args, settings)
