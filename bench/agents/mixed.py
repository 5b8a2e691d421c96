"""`openclaw-rl bench agents --mixed`: one policy learns from two streams at once (the paper's central claim).

One `openclaw-rl up` serves the base agent policy (which also answers homework chats: its corpus holds the
personalization benchmark's chats). At the same time, simulated personal users (the personalization benchmark's
students) chat through the OpenAI-compatible endpoint, their turns judged into the `personal` stream, and a
RolloutWorkflow runs tool-call task groups whose steps go to the `toolcall` stream. One TrainingWorkflow drains
both streams into mixed batches (each stream with its own KL coefficient: the paper's 0 for personal agents and
0.01 for general agents) and publishes each version to the engine serving both. Once the policy reaches the last
version, users and rollout stop, training pauses, and each evaluated version is scored on both held-out sets: the
personalization score of first answers to held-out problems, and held-out tool-call success.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.agents import runner
from bench.agents.runner import AgentBenchConfig, AgentStack
from bench.personalization import runner as personal
from bench.personalization.users import SimulatedUser
from bench.progress import Progress
from bench.stats import gain_text, paired_gain, score_cell
from evals.personalization.scorer import RuleScorer

SETTING = "toolcall"
PERSONAL_SETTING = "student"


@dataclass
class MixedConfig:
    """The personal side of a mixed run (the tool-call side is `AgentBenchConfig`)."""

    method: str = "binary"
    users: int = 4
    eval_problems: int = 36
    personal_weight: float = 1.0
    """The personal stream's share of a batch against the tool-call stream's 1.0 (`training.source_weights`)."""


class MixedStack(AgentStack):
    """The tool-call stack, with personal learning on and both streams trained by one workflow."""

    def __init__(self, data_dir: Path, model: Path, cfg: AgentBenchConfig, mixed: MixedConfig, tasks: Path):
        super().__init__(data_dir, model, cfg, SETTING, "integrated", tasks)
        self.env.update(
            OPENCLAW_RL_LEARNING__METHOD=mixed.method,
            OPENCLAW_RL_TRAINING__SOURCE_WEIGHTS=json.dumps({SETTING: 1.0, "personal": mixed.personal_weight}),
            OPENCLAW_RL_SESSION__DEFAULT_MAX_TOKENS=str(cfg.max_tokens),
            OPENCLAW_RL_SESSION__TURNS_PER_RUN="50",
        )


def _personal_cfg(cfg: AgentBenchConfig, mixed: MixedConfig) -> personal.BenchConfig:
    """What the personalization benchmark's users and scoring read from their config."""
    return personal.BenchConfig(
        setting=PERSONAL_SETTING,
        methods=(mixed.method,),
        seed=cfg.seed,
        steps=cfg.steps,
        eval_problems=mixed.eval_problems,
        eval_samples=cfg.eval_samples,
        users=mixed.users,
        temperature=cfg.temperature,
        max_tokens=cfg.max_tokens,
    )


async def run_mixed(cfg: AgentBenchConfig, mixed: MixedConfig, model: Path, run_dir: Path, tasks: Path,
                    progress: Progress) -> dict:  # fmt: skip
    from temporalio.service import RPCError

    from control.episodes import start_rollout
    from openclaw_rl.temporal_client import connect
    from workflows.rollout import RolloutWorkflow

    data_dir = run_dir / "mixed-data"
    stack = MixedStack(data_dir, model, cfg, mixed, tasks)
    pcfg = _personal_cfg(cfg, mixed)
    train_ids, eval_ids = runner.split_tasks(cfg, SETTING)
    problems = personal.eval_tasks(PERSONAL_SETTING, mixed.eval_problems)
    scorer = RuleScorer()
    last = max(cfg.steps)
    result: dict = {"method": mixed.method, "versions": {}, "reached_version": 0}
    progress.note(f"mixed: starting the stack (log: {stack.log_path})")
    await asyncio.to_thread(stack.start, 600)
    stop, tally, threads = threading.Event(), personal.Tally(), []
    try:
        settings = stack.settings()
        client = await connect(settings.temporal, keyring=settings.keyring())
        users = [SimulatedUser(PERSONAL_SETTING, f"{PERSONAL_SETTING}{i}", cfg.seed) for i in range(mixed.users)]
        keys = {u.name: stack.cli("keys", "create", "--user", u.name).split()[0] for u in users}
        threads = [
            threading.Thread(target=personal.run_user, args=(u, stack, keys[u.name], pcfg, stop, tally), daemon=True)
            for u in users
        ]
        rollout = await start_rollout(
            client, settings, SETTING, train_ids, samples_per_task=cfg.samples_per_task, parallel=cfg.parallel
        )
        for th in threads:
            th.start()
        t0 = time.monotonic()
        version, seen = 0, None
        while version < last and time.monotonic() - t0 < cfg.timeout_s:
            if len(tally.errors) > 20:
                raise RuntimeError(f"the users' requests keep failing: {tally.errors[:3]}")
            try:
                version = await asyncio.to_thread(stack.served_version)
                seen = await rollout.query(RolloutWorkflow.progress)
            except Exception as exc:  # a slow answer is not a failure of the run; the next poll tries again
                progress.note(f"mixed: polling: {type(exc).__name__}: {exc}")
            episodes = seen.episodes_done if seen is not None else 0
            progress.update("mixed: training step", version, last, f"· turns {tally.turns} · episodes {episodes}")
            await asyncio.sleep(2)
        stop.set()
        try:
            await rollout.terminate("the benchmark reached its last version")
        except RPCError:
            pass
        await asyncio.to_thread(stack.cli, "train", "pause")
        for th in threads:
            await asyncio.to_thread(th.join, 600)
        result["interaction_s"] = round(time.monotonic() - t0, 1)
        await asyncio.to_thread(stack.settle)
        status = await asyncio.to_thread(stack.wait_durable)
        version = max(version, int(status.get("version") or 0))
        result["reached_version"] = version
        result["turns"], result["reactions"] = tally.turns, dict(tally.reactions)
        result["rollout"] = seen.model_dump(exclude={"recent"}) if seen is not None else {}
        result["training"] = {
            k: status.get(k)
            for k in ("version", "steps", "samples_trained", "samples_dropped_stale", "samples_dropped_bad")
        }
        result["samples_by_stream"] = trained_by_stream(data_dir)
        result["judging"] = personal.judging_stats(data_dir)
        versions = [v for v in cfg.eval_versions if v <= version]
        for i, v in enumerate(versions):
            progress.update("mixed: scoring version", i, len(versions), f"(v{v})", force=True)
            entry = {
                SETTING: await runner.score_loaded(
                    stack, client, settings, model, v, SETTING, eval_ids, cfg, progress
                ),  # loads v, then scores tool-call episodes; the personal answers are scored on the same weights
                "personal": await asyncio.to_thread(personal.score_version, stack, model, problems, scorer, pcfg),
            }
            if await asyncio.to_thread(stack.served_weight_version) != f"eval-{v}":
                raise RuntimeError(f"the engine's weights changed while v{v} was scored")
            result["versions"][str(v)] = entry
        base = result["versions"]["0"]
        result["gains"] = {
            stream: {
                str(v): paired_gain(base[stream][key], result["versions"][str(v)][stream][key]).model_dump()
                for v in versions
                if v
            }
            for stream, key in ((SETTING, "per_task"), ("personal", "per_problem"))
        }
    finally:
        stop.set()
        try:
            await asyncio.to_thread(stack.stop, 120)
        except subprocess.TimeoutExpired:
            progress.note("mixed: the stack did not stop within 120 s after Ctrl-C; it was killed")
        if not cfg.keep_data:
            shutil.rmtree(data_dir / "checkpoints", ignore_errors=True)
    return result


def trained_by_stream(data_dir: Path) -> dict[str, int]:
    """Samples trained per stream, from the training workflow's record of each version's sample ids (a personal
    turn's id starts with `session/`, an episode step's with `episode/`)."""
    counts = {"personal": 0, SETTING: 0}
    path = data_dir / "records" / "trained.jsonl"
    for line in path.read_text().splitlines() if path.exists() else []:
        for sid in json.loads(line).get("sample_ids", []):
            counts["personal" if sid.startswith("session/") else SETTING] += 1
    return counts


def table(result: dict, cfg: dict) -> str:
    steps = [int(s) for s in cfg["steps"]]
    head = f"{'stream':<28} {'base':>12}" + "".join(f" {f'{s} steps':>12}" for s in steps)
    lines = [
        f"One policy, two streams at once (seed {cfg['seed']}): personal users ({result['method']}) and tool-call "
        "episodes train the same weights; each held-out set scored per version",
        head,
        "-" * len(head),
    ]
    for stream, label in ((SETTING, "tool-call success"), ("personal", "personalization score")):
        runs = {"versions": {v: e[stream] for v, e in result.get("versions", {}).items()}}
        lines.append(f"{label:<28} {score_cell(runs, 0):>12}" + "".join(f" {score_cell(runs, s):>12}" for s in steps))
    for stream, gains in (result.get("gains") or {}).items():
        lines.append(
            f"  {stream}: gain over base (± s.e., z): " + ", ".join(f"v{v} {gain_text(g)}" for v, g in gains.items())
        )
    t, ro = result.get("training", {}), result.get("rollout", {})
    lines.append(
        f"  {result.get('turns')} chat turns {result.get('reactions')}, {ro.get('episodes_done')} tool-call episodes; "
        f"trained {t.get('samples_trained')} samples {result.get('samples_by_stream')}, "
        f"reached v{result.get('reached_version')}"
    )
    return "\n".join(lines)


def run(cfg: AgentBenchConfig, mixed: MixedConfig, models_dir: Path, data_root: Path,
        progress: Progress | None = None) -> dict:  # fmt: skip
    progress = progress or Progress()
    run_dir = cfg.out_dir or (
        data_root / "bench" / "agents" / f"mixed-{mixed.method}-seed{cfg.seed}-{time.strftime('%Y%m%d-%H%M%S')}"
    )
    run_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    model = runner.ensure_model(cfg, models_dir, progress)
    tasks = runner.counting_tasks.ensure_tasks(data_root / "bench" / "agents" / "tasks")
    info = runner.basemodel.build_info(model)
    results = {
        "seed": cfg.seed,
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(cfg).items()},
        "mixed": asdict(mixed),
        "base_model": {"path": str(model), **{k: info.get(k) for k in ("digest", "parameters", "build_s")}},
    }
    results["run"] = asyncio.run(run_mixed(cfg, mixed, model, run_dir, tasks, progress))
    results["total_s"] = round(time.monotonic() - t0, 1)
    (run_dir / "results.json").write_text(json.dumps(results, indent=2, default=str))
    (run_dir / "table.txt").write_text(table(results["run"], results["config"]) + "\n")
    plot(results, run_dir / "mixed_curve.png")
    results["run_dir"] = str(run_dir)
    return results


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    versions = results["run"].get("versions", {})
    for stream, label, color in (
        (SETTING, "tool-call success", "tab:green"),
        ("personal", "personal score", "tab:purple"),
    ):
        pts = sorted((int(v), e[stream]["mean"], e[stream]["se"]) for v, e in versions.items())
        if pts:
            xs, ys, es = zip(*pts)
            ax.errorbar(xs, ys, yerr=es, marker="o", capsize=3, label=label, color=color)
    ax.set_xlabel("training steps (policy version)")
    ax.set_ylabel("held-out score")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"One policy, two streams: personal users + tool-call episodes, seed {results['seed']}", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
