"""`openclaw-rl bench canary ...`: the command line of the canary benchmark (wired in by bench/cli.py)."""

from __future__ import annotations

import argparse
import sys


def add_parser(bsub: argparse._SubParsersAction) -> None:
    from pathlib import Path

    p = bsub.add_parser(
        "canary",
        help="two users with canaries on and a bad version injected: promoted to nobody, good ones earn their way",
        description="Runs the two-user set-up with canary versions (eval.canary) and progress reports on, a stand-in "
        "LLM judge that compares answers by each user's USER.md, and one user's reactions inverted for a few "
        "versions (the injected bad version). Prints per user and version the decision, the turns it served and "
        "what the benchmark's own scorer measured; the reports' intervals against the measured win rates; and a "
        "last line: bad versions served to n% of turns, promoted 0; good versions promoted k/m; mismatch p99.",
    )
    p.add_argument("--seed", type=int, default=0, help="the users' seed (tasks and reactions)")
    p.add_argument("--bad-user", choices=["student", "manager"], default="manager", help="whose version goes bad")
    p.add_argument("--flip-steps", type=int, default=5, help="versions trained on the inverted reactions")
    p.add_argument("--decisions", type=int, default=6, help="decisions per user before the users stop")
    p.add_argument("--share", type=float, default=0.25, help="eval.canary.share: the candidate's share of turns")
    p.add_argument("--max-turns", type=int, default=40, help="eval.canary.max_turns: judged turns at most")
    p.add_argument("--held-out-share", type=float, default=0.15, help="eval.progress.held_out_share")
    p.add_argument("--batch-size", type=int, default=16, help="training.batch_size")
    p.add_argument("--adapter-lr", type=float, default=3e-3, help="the adapters' training.lr")
    p.add_argument("--steps", type=int, default=24, help="each user's adapter steps at least before the users stop")
    p.add_argument("--eval-turns", type=int, default=36, help="each user's held-out turns the benchmark measures on")
    p.add_argument("--eval-samples", type=int, default=8, help="answers per problem and version")
    p.add_argument("--recipe", choices=["default", "fast"], default="fast", help="the base policy to build")
    p.add_argument("--model", type=Path, help="serve this checkpoint instead of building the base policy")
    p.add_argument("--out", type=Path, help="output folder (default: DATA_DIR/bench/canary/...)")
    p.add_argument("--keep-data", action="store_true", help="keep the checkpoints and adapters")
    p.add_argument("--timeout-s", type=float, default=3600.0, help="for the decisions to come")
    p.add_argument("--quick", action="store_true", help=argparse.SUPPRESS)  # tests: a miniature model, 1 decision


def bench_command(args: argparse.Namespace, settings) -> int:
    from bench.personalization import basemodel, canary_bench
    from bench.progress import Progress

    recipe = basemodel.QUICK if args.quick else basemodel.RECIPES[args.recipe]
    try:
        cfg = canary_bench.CanaryBenchConfig(
            seed=args.seed, bad_user=args.bad_user, flip_steps=args.flip_steps, decisions=args.decisions,
            share=args.share, max_turns=args.max_turns, held_out_share=args.held_out_share,
            batch_size=args.batch_size, adapter_lr=args.adapter_lr, eval_turns=args.eval_turns, steps=args.steps,
            eval_samples=args.eval_samples, recipe=recipe, model=args.model, out_dir=args.out,
            keep_data=args.keep_data, timeout_s=args.timeout_s,
        )  # fmt: skip
    except ValueError as exc:
        print(f"openclaw-rl bench canary: {exc}", file=sys.stderr)
        return 2
    if args.quick:
        cfg.flip_steps, cfg.decisions, cfg.batch_size, cfg.max_tokens = 1, 1, 4, 24
        cfg.max_turns, cfg.eval_turns, cfg.eval_samples, cfg.canary_wait_s, cfg.steps = 6, 4, 2, 2.0, 2
        cfg.share, cfg.held_out_share = 0.5, 0.3
    results = canary_bench.run(cfg, settings.models_dir, settings.data_dir, Progress())
    print()
    print(canary_bench.table(results))
    print(f"\nresults: {results['run_dir']}/results.json")
    return 0
