"""`openclaw-rl bench two-users ...`: the command line of the two-user benchmark (wired in by bench/cli.py)."""

from __future__ import annotations

import argparse
import sys

from bench.arguments import steps_arg
from bench.progress import Progress


def add_parser(bsub: argparse._SubParsersAction) -> None:
    from pathlib import Path

    p = bsub.add_parser(
        "two-users",
        help="two users with opposite tastes at once: one shared policy against an adapter per user",
        description="Runs the real stack per mode with two simulated users at once, a student who wants one plain "
        "paragraph and a manager who wants bold numbered steps, scores each user's held-out answers from the policy "
        "that serves them before training and after 8 and 16 steps, writes results.json and two_users.png.",
    )
    p.add_argument(
        "--mode",
        choices=["shared", "shared_lora", "per_user", "both", "all"],
        default="both",
        help="both: per_user and shared (today's default); all: also shared_lora, one shared adapter with the "
        "per-user adapters' rank and rate",
    )
    p.add_argument("--seed", type=int, default=0, help="the users' seed (tasks and reactions)")
    p.add_argument("--steps", type=steps_arg, default=(8, 16), help="steps to report, comma-separated (8,16)")
    p.add_argument("--batch-size", type=int, default=16, help="training.batch_size: samples per step")
    p.add_argument("--lr", type=float, default=3e-4, help="the shared policy's training.lr")
    p.add_argument("--adapter-lr", type=float, default=3e-3, help="the per-user adapters' training.lr")
    p.add_argument("--lora-rank", type=int, default=16, help="the per-user adapters' rank")
    p.add_argument("--eval-problems", type=int, default=36, help="held-out problems scored per version")
    p.add_argument("--eval-samples", type=int, default=2, help="first answers sampled per problem and version")
    p.add_argument("--curve-every", type=int, default=4, help="also score every N-th step for the curve")
    p.add_argument("--recipe", choices=["default", "fast"], default="default", help="the base policy to build")
    p.add_argument("--model", type=Path, help="serve this checkpoint instead of building the base policy")
    p.add_argument("--out", type=Path, help="output folder (default: DATA_DIR/bench/two-users/...)")
    p.add_argument("--keep-data", action="store_true", help="keep each mode's checkpoints and adapters")
    p.add_argument("--timeout-s", type=float, default=3600.0, help="per mode, for reaching the last step")
    p.add_argument("--quick", action="store_true", help=argparse.SUPPRESS)  # tests: 1 step, a miniature model


def bench_command(args: argparse.Namespace, settings) -> int:
    from bench.personalization import basemodel, two_users

    recipe = basemodel.QUICK if args.quick else basemodel.RECIPES[args.recipe]
    try:
        cfg = two_users.TwoUserConfig(
            modes={"both": ("per_user", "shared"), "all": two_users.MODES}.get(args.mode, (args.mode,)),
            seed=args.seed, steps=args.steps, batch_size=args.batch_size, lr=args.lr, adapter_lr=args.adapter_lr,
            lora_rank=args.lora_rank, eval_problems=args.eval_problems, eval_samples=args.eval_samples,
            curve_every=args.curve_every, recipe=recipe, model=args.model, out_dir=args.out,
            keep_data=args.keep_data, timeout_s=args.timeout_s,
        )  # fmt: skip
    except ValueError as exc:
        print(f"openclaw-rl bench two-users: {exc}", file=sys.stderr)
        return 2
    if args.quick:
        cfg.steps, cfg.batch_size, cfg.max_tokens, cfg.curve_every = (1,), 2, 32, 1
        cfg.eval_problems, cfg.eval_samples = min(cfg.eval_problems, 4), 1
    results = two_users.run(cfg, settings.models_dir, settings.data_dir, Progress())
    print()
    print(two_users.table(results))
    print(f"\nresults: {results['run_dir']}/results.json, plot: {results['run_dir']}/two_users.png")
    return 0
