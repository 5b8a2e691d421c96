"""Every command's `--help` says what it does and shows an example: the examples, in one place, by command path.

`with_examples(parser)` walks the built parser (openclaw_rl.console.with_examples): a command without a description
gets the one-line help its parent lists it with, and its examples go to its epilog (kept as written). The
benchmarks' subcommands keep theirs beside them (bench/cli.py). tests/test_cli_help.py checks that every command
has both.
"""

from __future__ import annotations

import argparse

from openclaw_rl import console
from openclaw_rl.console import commands

__all__ = ["EXAMPLES", "commands", "with_examples"]

EXAMPLES: dict[str, list[str]] = {
    "": ["openclaw-rl up", "openclaw-rl keys create --user alice", "openclaw-rl train status --watch"],
    "up": ["openclaw-rl up", "OPENCLAW_RL_ENGINE__MODEL_PATH=/models/Qwen3-4B openclaw-rl up"],
    "engine": ["openclaw-rl engine --model /models/Qwen3-4B --port 30000"],
    "worker": ["openclaw-rl worker --pool policy"],
    "api": ["openclaw-rl api"],
    "megatron-node": ["openclaw-rl megatron-node --device cuda"],
    "keys": ["openclaw-rl keys create --user alice", "openclaw-rl keys list"],
    "keys create": ["openclaw-rl keys create --user alice     # prints the key once"],
    "keys list": ["openclaw-rl keys list"],
    "keys revoke": ["openclaw-rl keys revoke 3f2a9c01d4e5"],
    "users export": ["openclaw-rl users export alice --out alice.json"],
    "users forget": ["openclaw-rl users forget alice --yes"],
    "users opt-out": ["openclaw-rl users opt-out alice", "openclaw-rl users opt-out --key 3f2a9c01d4e5"],
    "users opt-in": ["openclaw-rl users opt-in alice"],
    "sessions": ["openclaw-rl sessions --user alice"],
    "turns": [
        "openclaw-rl turns tour --user alice",
        "openclaw-rl turns tour --user alice --json",
        "openclaw-rl turns tour --user alice --export tour.json   # and tour.atif.json (ATIF)",
    ],
    "deploy": ["openclaw-rl deploy status", "openclaw-rl deploy promote --build-id wf-871c2146bedf"],
    "deploy status": ["openclaw-rl deploy status"],
    "deploy promote": [
        "openclaw-rl deploy promote                          # this checkout's build",
        "openclaw-rl deploy promote --build-id wf-871c2146bedf --ramp 10",
    ],
    "train": ["openclaw-rl train status", "openclaw-rl train batch-size 4"],
    "train start": ["openclaw-rl train start"],
    "train status": ["openclaw-rl train status", "openclaw-rl train status --watch --until-version 3"],
    "train checkpoint": ["openclaw-rl train checkpoint --label before-release"],
    "train curves": ["openclaw-rl train curves"],
    "train pause": ["openclaw-rl train pause"],
    "train resume": ["openclaw-rl train resume"],
    "train batch-size": ["openclaw-rl train batch-size 32"],
    "episodes": ["openclaw-rl episodes --setting terminal --status failed --since 1d"],
    "episodes list": ["openclaw-rl episodes list --status completed --limit 20"],
    "episodes show": ["openclaw-rl episodes show EPISODE_ID"],
    "episodes export": [
        "openclaw-rl episodes export EPISODE_ID --out ep.json   # and ep.atif.json (ATIF)",
        "openclaw-rl episodes export EPISODE_ID --format atif --out ep.atif.json",
    ],
    "episodes retry": [
        "openclaw-rl episodes retry --status failed --since 1d --dry-run",
        "openclaw-rl episodes retry --status failed --since 1d",
    ],
    "episodes tasks": ["openclaw-rl episodes tasks --setting terminal"],
    "episodes start": ["openclaw-rl episodes start --setting terminal --task text-top-ips --wait"],
    "episodes group": ["openclaw-rl episodes group --setting toolcall --task TASK_ID --samples 8"],
    "episodes rollout": ["openclaw-rl episodes rollout --setting terminal --tasks 16 --samples 8"],
    "episodes watch": ["openclaw-rl episodes watch"],
    "bench": [
        "openclaw-rl bench personalization --method combined --setting student",
        "openclaw-rl bench --help                 # the benchmarks, each with its own --help",
    ],
    "encryption": ["openclaw-rl encryption new-key --id k2026", "openclaw-rl encryption status"],
    "encryption new-key": ["openclaw-rl encryption new-key --id k2026"],
    "encryption codec-token": ["openclaw-rl encryption codec-token"],
    "encryption status": ["openclaw-rl encryption status"],
    "eval": ["openclaw-rl eval run", "openclaw-rl eval list"],
    "eval run": [
        "openclaw-rl eval run                                  # the latest published version, every set",
        "openclaw-rl eval run --set user-support --version 20",
    ],
    "eval list": ["openclaw-rl eval list", "openclaw-rl eval list --json"],
    "eval schedule": [
        "openclaw-rl eval schedule",
        "openclaw-rl eval schedule --every 5",
        "openclaw-rl eval schedule --pause",
    ],
    "config": ["openclaw-rl config", "OPENCLAW_RL_CONFIG=deploy/openclaw-rl.example.toml openclaw-rl config"],
}


def with_examples(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    return console.with_examples(parser, EXAMPLES)
