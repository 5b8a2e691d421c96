"""`openclaw-rl bench personalization ...`: the command line of the benchmark (wired in by bench/cli.py)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from bench.arguments import add_set_argument, setting_overrides, steps_arg
from bench.progress import Progress
from openclaw_rl import console as style

if TYPE_CHECKING:
    from bench.personalization import basemodel, runner

RECIPE_NAMES = ("default", "fast")


def add_parser(bsub: argparse._SubParsersAction) -> None:
    p = bsub.add_parser(
        "personalization",
        help="simulated users teach the policy their preference; scores after 8 and 16 steps (Table 3)",
        description="Runs the real stack per method with simulated users (student or teacher), scores the first "
        "answers to 36 held-out problems before training and after 8 and 16 steps, prints Table 3's analogue "
        "beside the paper's numbers, writes results.json and learning_curve.png.",
    )
    p.add_argument("--method", choices=["binary", "opd", "combined"], help="the learning method (or --all)")
    p.add_argument("--all", action="store_true", help="all three methods, one stack each")
    p.add_argument("--setting", choices=["student", "teacher"], default="student")
    p.add_argument("--seed", type=int, default=0, help="the users' seed (tasks and reactions)")
    p.add_argument("--users", type=int, default=4, help="simulated users chatting at once")
    p.add_argument(
        "--teacher",
        choices=["policy", "frozen"],
        default="policy",
        help="who scores OPD's hint-enhanced context: the policy itself (the paper), or the base policy, frozen, "
        "on an engine of its own (the reference's choice)",
    )
    p.add_argument("--lr", type=float, default=3e-4, help="training.lr (the paper's 1e-5 is for 4B-32B models)")
    p.add_argument("--eval-problems", type=int, default=36, help="held-out problems scored per version")
    p.add_argument("--steps", type=steps_arg, default=(8, 16), help="versions to report, comma-separated (8,16)")
    p.add_argument("--batch-size", type=int, default=16, help="training.batch_size: samples per step")
    p.add_argument(
        "--recipe",
        choices=sorted(RECIPE_NAMES),
        default="default",
        help="the base policy to build: default (the table's), fast (smaller, built in 1-2 minutes)",
    )
    p.add_argument("--eval-samples", type=int, default=2, help="first answers sampled per problem and version")
    p.add_argument("--curve-every", type=int, default=4, help="also score every N-th version for the curve")
    p.add_argument("--judge-url", help="an OpenAI-compatible LLM judge (default: the heuristic judge)")
    p.add_argument("--judge-model", default="default")
    p.add_argument("--scorer-url", help="an OpenAI-compatible LLM scoring with the C.3 prompt (default: rules)")
    p.add_argument("--scorer-model", default="default")
    p.add_argument("--model", type=Path, help="serve this checkpoint instead of building the base policy")
    p.add_argument("--out", type=Path, help="output folder (default: DATA_DIR/bench/personalization/...)")
    p.add_argument("--keep-data", action="store_true", help="keep the checkpoints of each method's stack")
    p.add_argument("--timeout-s", type=float, default=3600.0, help="per method, for reaching the last step")
    add_set_argument(p)
    p.add_argument("--build-model", action="store_true", help="only build (or find) the cached base policy")
    p.add_argument("--quick", action="store_true", help=argparse.SUPPRESS)  # tests: 1 step, a miniature model


def bench_command(args: argparse.Namespace, settings) -> int:
    from bench.personalization import basemodel, runner

    progress = Progress()
    recipe = basemodel.QUICK if args.quick else basemodel.RECIPES[args.recipe]
    if args.build_model:
        target = basemodel.default_dir(settings.models_dir, recipe)
        path = basemodel.ensure_base_model(
            target, recipe, lambda s, n, loss: progress.update("pretraining step", s, n, f"· loss {loss:.3f}")
        )
        progress.note(f"base policy: {path} {basemodel.build_info(path)}")
        print(path)
        return 0
    if not args.all and not args.method:
        style.error("bench personalization", "give --method or --all")
        return 2
    try:
        cfg = _config(args, recipe)
    except ValueError as exc:
        style.error("bench personalization", str(exc))
        return 2
    if args.quick:
        cfg.steps, cfg.batch_size, cfg.users, cfg.max_tokens, cfg.curve_every = (1,), 2, 2, 32, 1
        cfg.eval_problems, cfg.eval_samples = min(cfg.eval_problems, 4), 1
    results = runner.run(cfg, settings.models_dir, settings.data_dir, progress)
    print()
    print(runner.table(results))
    print(f"\nresults: {results['run_dir']}/results.json, plot: {results['run_dir']}/learning_curve.png")
    return 0


def _config(args: argparse.Namespace, recipe: basemodel.Recipe) -> runner.BenchConfig:
    from bench.personalization import runner

    return runner.BenchConfig(
        setting=args.setting,
        methods=runner.METHODS if args.all else (args.method,),
        seed=args.seed,
        users=args.users,
        lr=args.lr,
        teacher=args.teacher,
        steps=args.steps,
        batch_size=args.batch_size,
        eval_problems=args.eval_problems,
        eval_samples=args.eval_samples,
        curve_every=args.curve_every,
        judge_url=args.judge_url,
        judge_model=args.judge_model,
        scorer_url=args.scorer_url,
        scorer_model=args.scorer_model,
        model=args.model,
        out_dir=args.out,
        keep_data=args.keep_data,
        timeout_s=args.timeout_s,
        recipe=recipe,
        settings=setting_overrides(args.set),
    )
