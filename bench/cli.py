"""`openclaw-rl bench ...` (`python -m bench ...`): the benchmarks that run the whole system, one subcommand each.

The benchmarks are a client on the top floor: the command line runs this module as its own program, and nothing
imports it.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from pydantic import ValidationError

from bench import deploy, fairness, scale
from bench import hosts as hosts_cli
from bench.agents import cli as agents_cli
from bench.personalization import canary_cli, two_users_cli
from bench.personalization import cli as personalization_cli
from openclaw_rl import console
from openclaw_rl.logs import configure_logging
from openclaw_rl.settings import ConfigError, load_settings

COMMANDS = {
    "personalization": personalization_cli,
    "two-users": two_users_cli,
    "canary": canary_cli,
    "agents": agents_cli,
    "hosts": hosts_cli,
    "fairness": fairness,
    "deploy": deploy,
    "scale": scale,
}
EXAMPLES: dict[str, list[str]] = {
    "": ["openclaw-rl bench personalization --method combined --setting student"],
    "fairness": ["openclaw-rl bench fairness --seconds 15 --modes today,on"],
    "deploy": ["openclaw-rl bench deploy --sessions 16 --modes versioned,unversioned"],
    "two-users": ["openclaw-rl bench two-users --mode both --seed 0 --steps 8,16"],
    "canary": ["openclaw-rl bench canary --seed 0"],
    "personalization": [
        "openclaw-rl bench personalization --recipe fast --method combined --setting student --steps 3",
    ],
    "hosts": ["openclaw-rl bench hosts --minutes 2  # as root (network namespaces)"],
    "scale": ["openclaw-rl bench scale --sessions 100,1000 --episodes 16,128"],
}
"""By subcommand path, as cli/examples.py keeps the command line's."""


def build_parser() -> argparse.ArgumentParser:
    bench = argparse.ArgumentParser(
        prog="openclaw-rl bench",
        description="Benchmarks that run the whole system: personalization (Table 3), two-users (an agent per "
        "user), canary (each new version earns its way to its user), agents (Table 4, Figure 4), hosts (the "
        "deployment as 8 hosts in network namespaces), fairness (one user's flood against another's chat).",
    )
    bsub = bench.add_subparsers(dest="bench_command", required=True)
    for command in COMMANDS.values():
        command.add_parser(bsub)
    return console.with_examples(bench, EXAMPLES)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def bench_command(args: argparse.Namespace, settings) -> int:
    # A benchmark killed (SIGTERM: `kill`, a CI timeout) stops its stacks as Ctrl-C does, through the runners'
    # `finally`, instead of leaving a Temporal server, an engine and workers behind.
    signal.signal(signal.SIGTERM, _interrupt)
    if args.bench_command == "hosts" and args.scale:
        from bench import hosts_scale

        return hosts_scale.bench_command(args, settings)
    return COMMANDS[args.bench_command].bench_command(args, settings)


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    try:
        settings = load_settings()
    except (ValidationError, ConfigError) as exc:
        console.error(None, f"invalid settings (`openclaw-rl config` says which): {type(exc).__name__}")
        raise SystemExit(1) from exc
    configure_logging(settings.log.level, settings.log.json_lines, process="bench")
    try:
        code = bench_command(args, settings)
    except KeyboardInterrupt:
        code = 130
    # Leave without interpreter teardown, as the command line does: the Temporal client's native threads can crash
    # a finishing interpreter after the work succeeded.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
