"""`openclaw-rl bench ...`: the benchmarks that run the whole system, one subcommand each (wired in by cli/main.py)."""

from __future__ import annotations

import argparse

from bench.agents import cli as agents_cli
from bench.personalization import cli as personalization_cli

COMMANDS = {"personalization": personalization_cli, "agents": agents_cli}


def add_parser(sub: argparse._SubParsersAction, func) -> None:
    bench = sub.add_parser(
        "bench",
        help="benchmarks that run the whole system: personalization (Table 3), agents (Table 4, Figure 4)",
    )
    bsub = bench.add_subparsers(dest="bench_command", required=True)
    for command in COMMANDS.values():
        command.add_parser(bsub)
    bench.set_defaults(func=func, exits_hard=True)


def bench_command(args: argparse.Namespace, settings) -> int:
    return COMMANDS[args.bench_command].bench_command(args, settings)
