"""Every `openclaw-rl` command's --help says what it does and shows an example, and every example parses."""

from __future__ import annotations

import shlex

import pytest

from bench.cli import COMMANDS as BENCH_COMMANDS
from bench.cli import EXAMPLES as BENCH_EXAMPLES
from bench.cli import build_parser as bench_parser
from cli.examples import EXAMPLES, commands
from cli.main import build_parser

PARSER = build_parser()
ALL = [(path or "(top)", sub) for path, sub, _ in commands(PARSER)]


@pytest.mark.parametrize("path, sub", ALL, ids=[p for p, _ in ALL])
def test_every_command_says_what_it_does_with_an_example(path, sub):
    text = sub.format_help()
    assert "example" in text.lower(), f"`openclaw-rl {path} --help` shows no example"
    assert path == "(top)" or sub.description, f"`openclaw-rl {path} --help` does not say what it does"


@pytest.mark.parametrize(
    "example", sorted({e for es in EXAMPLES.values() for e in es}), ids=lambda e: e.split("#")[0].strip()
)
def test_every_example_parses(example):
    argv = shlex.split(example, comments=True)
    while argv and "=" in argv[0]:  # an environment variable in front
        argv.pop(0)
    assert argv[0] == "openclaw-rl"
    if len(argv) == 1:
        return
    args = build_parser().parse_args(argv[1:])
    assert callable(args.func)


BENCH = bench_parser()
BENCH_ALL = [(f"bench {path}".strip(), sub) for path, sub, _ in commands(BENCH)]


@pytest.mark.parametrize("path, sub", BENCH_ALL, ids=[p for p, _ in BENCH_ALL])
def test_every_benchmark_says_what_it_does_with_an_example(path, sub):
    """`openclaw-rl bench ...` runs the benchmarks as their own program (python -m bench): the same help rules."""
    text = sub.format_help()
    assert "example" in text.lower(), f"`openclaw-rl {path} --help` shows no example"
    assert sub.description, f"`openclaw-rl {path} --help` does not say what it does"


@pytest.mark.parametrize(
    "example", sorted({e for es in BENCH_EXAMPLES.values() for e in es}), ids=lambda e: e.split("#")[0].strip()
)
def test_every_benchmark_example_parses_and_the_command_line_passes_it_on(example):
    argv = shlex.split(example, comments=True)
    assert argv[:2] == ["openclaw-rl", "bench"]
    args = bench_parser().parse_args(argv[2:])
    assert args.bench_command in BENCH_COMMANDS
    passed = build_parser().parse_args(argv[1:])
    assert passed.bench_args == argv[2:]  # every word, options too, goes to the benchmarks' own parser
