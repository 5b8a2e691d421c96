"""`openclaw-rl bench agents ...`: the general-agent learning benchmark's command line (wired in by bench/cli.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.arguments import steps_arg
from bench.progress import Progress
from openclaw_rl import console as style


def add_parser(bsub: argparse._SubParsersAction) -> None:
    p = bsub.add_parser(
        "agents",
        help="tool-call and terminal episodes train the base agent policy; held-out success over versions "
        "(Table 4, Figure 4)",
        description="Runs the real stack per setting and reward mode: task groups of tool-call episodes (math with "
        "a sandboxed python tool) or terminal episodes (counting in a sandboxed shell) on training tasks, step "
        "votes, (group, step) advantages, the training workflow, new weights served. Scores held-out tasks before "
        "training and at the chosen versions, prints Table 4's analogue beside the paper's numbers, writes "
        "results.json and a curve per setting (PNG). Example: openclaw-rl bench agents --setting toolcall "
        "--reward integrated --steps 4,8",
    )
    p.add_argument(
        "--setting",
        choices=["toolcall", "terminal", "both"],
        default="both",
        help="toolcall: math with a python tool; terminal: counting tasks in a shell; both (default)",
    )
    p.add_argument(
        "--reward",
        choices=["outcome", "integrated", "both"],
        default="both",
        help="outcome: the episode's outcome alone; integrated: outcome + step-wise PRM votes; both (default)",
    )
    p.add_argument("--seed", type=int, default=0, help="orders the training tasks")
    p.add_argument("--steps", type=steps_arg, default=(4, 8), help="versions to report, comma-separated (4,8)")
    p.add_argument("--curve-every", type=int, default=2, help="also score every N-th version for the curve")
    p.add_argument("--eval-tasks", type=int, default=120, help="held-out tasks scored per version and setting")
    p.add_argument("--eval-samples", type=int, default=2, help="episodes per held-out task and version")
    p.add_argument("--samples-per-task", type=int, default=8, help="episodes per training task group")
    p.add_argument("--parallel", type=int, default=8, help="episodes running at once")
    p.add_argument("--batch-size", type=int, default=32, help="training.batch_size: step samples per train step")
    p.add_argument("--lr", type=float, default=1e-4, help="training.lr (the paper's 1e-6 is for 8B models)")
    p.add_argument(
        "--temperature",
        type=float,
        default=0.6,
        help="the policy's sampling temperature, in training and scoring (0.6: at 1.0 this small policy's number "
        "copies are too noisy for it to succeed; docs/agents-benchmark.md)",
    )
    p.add_argument("--judge-url", help="an OpenAI-compatible LLM step judge (default: the heuristic judge)")
    p.add_argument("--judge-model", default="default")
    p.add_argument("--model", type=Path, help="serve this checkpoint instead of building the base agent policy")
    p.add_argument("--out", type=Path, help="output folder (default: DATA_DIR/bench/agents/...)")
    p.add_argument("--keep-data", action="store_true", help="keep the checkpoints of each stack")
    p.add_argument("--timeout-s", type=float, default=3600.0, help="per reward mode, for reaching the last step")
    p.add_argument("--build-model", action="store_true", help="only build (or find) the cached base agent policy")
    p.add_argument(
        "--mixed",
        action="store_true",
        help="one policy, two streams: simulated personal users (the personalization benchmark's students) and "
        "tool-call episodes train the same weights at once; both held-out scores per version",
    )
    p.add_argument("--method", choices=["binary", "opd", "combined"], default="binary",
                   help="--mixed: the personal users' learning method")  # fmt: skip
    p.add_argument("--build", choices=["default", "fast"], default="default",
                   help="which base agent policy to build: default (both settings and personal chats, ~15 min once), "
                   "fast (terminal only, ~5 min: the test suite's)")  # fmt: skip
    p.add_argument("--quick", action="store_true", help=argparse.SUPPRESS)  # tests: a miniature model, 1 step


def bench_command(args: argparse.Namespace, settings) -> int:
    from bench.agents import basemodel, runner

    progress = Progress()
    build = "quick" if args.quick else args.build
    try:
        cfg = runner.AgentBenchConfig(
            settings=runner.SETTINGS if args.setting == "both" else (args.setting,),
            rewards=runner.REWARDS if args.reward == "both" else (args.reward,),
            seed=args.seed,
            steps=args.steps,
            curve_every=args.curve_every,
            eval_tasks=args.eval_tasks,
            eval_samples=args.eval_samples,
            samples_per_task=args.samples_per_task,
            parallel=args.parallel,
            batch_size=args.batch_size,
            lr=args.lr,
            temperature=args.temperature,
            judge_url=args.judge_url,
            judge_model=args.judge_model,
            build=build,
            model=args.model,
            out_dir=args.out,
            keep_data=args.keep_data,
            timeout_s=args.timeout_s,
        )
        if args.quick:
            cfg.steps, cfg.curve_every, cfg.batch_size, cfg.samples_per_task, cfg.max_tokens = (1,), 1, 4, 2, 48
            cfg.eval_tasks, cfg.eval_samples, cfg.parallel = min(cfg.eval_tasks, 4), 1, 4
        for setting in cfg.settings:
            runner.split_tasks(cfg, setting)
    except ValueError as exc:
        style.error("bench agents", str(exc))
        return 2
    if args.build_model:
        path = runner.ensure_model(cfg, settings.models_dir, progress)
        progress.note(f"base agent policy: {path} {basemodel.build_info(path)}")
        print(path)
        return 0
    if args.mixed:
        from bench.agents import mixed

        cfg.settings = ("toolcall",)
        results = mixed.run(
            cfg, mixed.MixedConfig(method=args.method), settings.models_dir, settings.data_dir, progress
        )
        print()
        print(mixed.table(results["run"], results["config"]))
        print(f"\nresults: {results['run_dir']}/results.json, plot: {results['run_dir']}/mixed_curve.png")
        return 0
    results = runner.run(cfg, settings.models_dir, settings.data_dir, progress)
    print()
    print(runner.table(results))
    plots = ", ".join(f"{results['run_dir']}/{s}_curve.png" for s in cfg.settings)
    print(f"\nresults: {results['run_dir']}/results.json, plots: {plots}")
    return 0
