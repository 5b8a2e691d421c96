"""`openclaw-rl bench agents`: do general agents learn? Table 4 and Figure 4 through the real stack.

Per setting (tool-call, terminal) and reward mode: a fresh `openclaw-rl up` (own data directory and ports)
serving the base agent policy; a RolloutWorkflow runs task groups of episodes on training tasks (episodes on the
env pool in the sandbox, the policy's steps on the policy pool, step votes on the judge pool unless the reward is
the outcome alone), the groups standardise their steps' rewards in (group, step) buckets and publish samples,
and the TrainingWorkflow trains on them and publishes each version to the engine while the rollout goes on.
Once the policy reaches the last reported version, the rollout is stopped, training pauses, and each evaluated
version's durable checkpoint is loaded into the engine in turn: held-out tasks (never trained on, never in
pretraining) run as task groups that publish nothing, and their outcomes are the scores.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import shutil
import subprocess
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.agents import basemodel, terminal_trajectories, trajectories
from bench.agents.analysis import behaviour_rates, finished_episodes, group_episodes, reward_stats, step_metrics
from bench.progress import Progress
from bench.stack import BenchStack
from bench.stats import gain_text, mean_se, paired_gain, score_cell
from envs.terminal import counting_tasks
from envs.toolcall import held_out as toolcall_split
from envs.toolcall.held_out import HELD_OUT_FROM, MATH_COUNT
from stack.running import isolated_env

SETTINGS = ("toolcall", "terminal")
REWARDS = ("outcome", "integrated")
PAPER = {"toolcall": {"outcome": 0.17, "integrated": 0.30}, "gui": {"outcome": 0.31, "integrated": 0.33}}
"""Table 4: Qwen3-8B tool-call and Qwen3VL-8B GUI accuracy, outcome-only vs outcome + step-wise PRM rewards (the
paper reports terminal accuracy only as Figure 4's curve)."""
MAX_STEPS = {"toolcall": trajectories.MAX_STEPS, "terminal": terminal_trajectories.MAX_STEPS}
RESCORES = 3


@dataclass
class AgentBenchConfig:
    settings: tuple[str, ...] = SETTINGS
    rewards: tuple[str, ...] = REWARDS
    seed: int = 0
    """Orders the training tasks and seeds nothing else: the policy samples as it would in use."""
    steps: tuple[int, ...] = (4, 8)
    curve_every: int = 2
    eval_tasks: int = 120
    """Held-out tasks scored per version (per setting; at most what the setting holds out)."""
    eval_samples: int = 2
    """Episodes per held-out task and version."""
    samples_per_task: int = 8
    """Episodes per training task group (the paper: 8)."""
    parallel: int = 8
    """Training episodes running at once (whole groups). 16 on 2 cores made more samples stale than trained."""
    batch_size: int = 32
    lr: float = 1e-4
    """At 4e-4 this 0.9M-parameter policy's calls broke within 2-6 steps (docs/agents-benchmark.md)."""
    temperature: float = 0.6
    """Of the policy's steps, in training and scoring (at 1.0 the small base policy's copies are too noisy)."""
    max_tokens: int = 160
    judge_url: str | None = None
    judge_model: str = "default"
    build: str = "default"
    """Which base agent policy to build (`basemodel.BUILDS`) when `model` is not given."""
    model: Path | None = None
    out_dir: Path | None = None
    keep_data: bool = False
    timeout_s: float = 3600.0

    def __post_init__(self) -> None:
        if self.eval_tasks < 2:
            raise ValueError(f"eval_tasks must be at least 2 (gains pair tasks), got {self.eval_tasks}")
        if self.eval_samples < 1:
            raise ValueError(f"eval_samples must be at least 1, got {self.eval_samples}")
        for name, given, known in (("rewards", self.rewards, REWARDS), ("settings", self.settings, SETTINGS)):
            unknown = sorted(set(given) - set(known))
            if unknown or not given:
                raise ValueError(f"{name} must be among {', '.join(known)}, got {', '.join(given) or 'none'}")

    @property
    def eval_versions(self) -> list[int]:
        last = max(self.steps)
        return sorted(set(range(0, last + 1, max(1, self.curve_every))) | {0, *self.steps})


def split_tasks(cfg: AgentBenchConfig, setting: str) -> tuple[list[str], list[str]]:
    """(training task ids in the seed's order, the first `eval_tasks` held-out ids) of one setting."""
    if setting == "toolcall":
        from envs.toolcall.math_tasks import generate

        train = [p.task_id for p in generate(MATH_COUNT)[:HELD_OUT_FROM] if p.kind in trajectories.SOLVERS]
        held_out = toolcall_split.task_ids()
    else:
        train, held_out = counting_tasks.training_ids(), [t.task_id for t in counting_tasks.held_out()]
    if cfg.eval_tasks > len(held_out):
        raise ValueError(f"eval_tasks is at most {len(held_out)} (the {setting} held-out tasks), got {cfg.eval_tasks}")
    random.Random(f"agent-train-order:{cfg.seed}").shuffle(train)
    return train, held_out[: cfg.eval_tasks]


# ---- the stack -------------------------------------------------------------------------------------------------


class AgentStack(BenchStack):
    """`openclaw-rl up` for one setting and reward mode: the base agent served, the setting's stream trained."""

    def __init__(self, data_dir: Path, model: Path, cfg: AgentBenchConfig, setting: str, reward: str, tasks: Path):
        env = isolated_env(data_dir, model)
        judge = (
            {"type": "llm", "url": cfg.judge_url, "model": cfg.judge_model} if cfg.judge_url else {"type": "heuristic"}
        )
        key = f"OPENCLAW_RL_ENVS__{setting.upper()}__"
        env.update(
            OPENCLAW_RL_LEARNING__JUDGE=json.dumps(judge),
            OPENCLAW_RL_TRAINING__AUTO_START="true",
            OPENCLAW_RL_EVAL__EVERY_VERSIONS="0",  # the benchmark scores versions itself, after its users stop
            OPENCLAW_RL_TRAINING__BATCH_SIZE=str(cfg.batch_size),
            OPENCLAW_RL_TRAINING__LR=str(cfg.lr),
            OPENCLAW_RL_TRAINING__WAIT_S="2",
            OPENCLAW_RL_TRAINING__SOURCE_WEIGHTS=json.dumps({setting: 1.0}),
            OPENCLAW_RL_TRAINING__CHECKPOINT__KEEP="1000",  # every evaluated version stays on disk until scored
            OPENCLAW_RL_TRAINING__CHECKPOINT__EVERY_VERSIONS="1",
            OPENCLAW_RL_ENVS__TOOLCALL__MATH_COUNT=str(MATH_COUNT),
            OPENCLAW_RL_ENVS__TOOLCALL__BFCL="false",
            OPENCLAW_RL_ENVS__TERMINAL__TASK_DIRS=json.dumps([str(tasks)]),
            **{
                key + "MAX_STEPS": str(MAX_STEPS[setting]),
                key + "PRM_VOTES": "0" if reward == "outcome" else "1",
                key + "TEMPERATURE": str(cfg.temperature),
                key + "MAX_TOKENS": str(cfg.max_tokens),
            },
        )
        if cfg.judge_url is None:
            env["OPENCLAW_RL_LEARNING__PRM_VOTES"] = "1"  # the heuristic judge is deterministic: votes would agree
        super().__init__(env)

    def settings(self):
        """The stack's settings as its own processes read them (from its environment)."""
        from openclaw_rl.settings import Settings

        saved = dict(os.environ)
        try:  # Settings reads the process environment; the benchmark's thread is the only one reading it here
            os.environ.clear()
            os.environ.update(self.env)
            return Settings()
        finally:
            os.environ.clear()
            os.environ.update(saved)


# ---- evaluation ------------------------------------------------------------------------------------------------


async def evaluate(client, settings, setting: str, task_ids: list[str], cfg: AgentBenchConfig
                   ) -> tuple[list[list[float]], list]:  # fmt: skip
    """Outcomes of `eval_samples` episodes per task with the engine's current weights (task groups that publish
    nothing; at most `parallel` episodes at once), and the episodes. A failed episode is left out (its task then
    has fewer)."""
    from control.episodes import episode_config, start_task_group

    config = episode_config(settings, setting, prm_votes=0)
    slots = asyncio.Semaphore(max(1, cfg.parallel // cfg.eval_samples))

    async def one(task_id: str) -> tuple[list[float], list]:
        async with slots:
            handle = await start_task_group(
                client, settings, setting, task_id, samples=cfg.eval_samples, publish=False, config=config
            )
            result = await handle.result()
            episodes = await group_episodes(client, handle.id.split("/", 1)[1], cfg.eval_samples)
            return list(result.outcomes), episodes

    done = await asyncio.gather(*(one(t) for t in task_ids))
    return [o for o, _ in done], [e for _, eps in done for e in eps]


def summarize(outcomes: list[list[float]], samples: int) -> dict:
    """Per task its mean outcome (NaN when every episode of it failed); the mean over tasks with its s.e."""
    per_task = [sum(o) / len(o) if o else math.nan for o in outcomes]
    m, se = mean_se(per_task)
    return {
        "mean": round(m, 4),
        "se": round(se, 4),
        "episodes": sum(len(o) for o in outcomes),
        "failed_episodes": sum(samples - len(o) for o in outcomes),
        "per_task": [round(x, 4) for x in per_task],
    }


async def score_loaded(stack: AgentStack, client, settings, model: Path, version: int, setting: str, tasks, cfg,
                       progress) -> dict:  # fmt: skip
    """Load `version` into the engine and score it; again if other weights reached the engine meanwhile."""
    for _ in range(RESCORES):
        await asyncio.to_thread(stack.load_version, model, version)
        started = time.monotonic()
        outcomes, episodes = await evaluate(client, settings, setting, tasks, cfg)
        entry = summarize(outcomes, cfg.eval_samples)
        entry["behaviours"] = behaviour_rates(episodes)
        entry["eval_s"] = round(time.monotonic() - started, 1)
        served = await asyncio.to_thread(stack.served_weight_version)
        if served == f"eval-{version}":
            return entry
        progress.note(f"weights {served} reached the engine while v{version} was scored: scoring it again")
    raise RuntimeError(f"v{version} could not be scored: the engine's weights kept changing ({RESCORES} tries)")


# ---- one setting and reward mode ---------------------------------------------------------------------------------


async def run_reward(setting: str, reward: str, cfg: AgentBenchConfig, model: Path, run_dir: Path, tasks: Path,
                     progress: Progress) -> dict:  # fmt: skip
    from temporalio.service import RPCError

    from control.episodes import start_rollout
    from openclaw_rl.temporal_client import connect
    from workflows.rollout import RolloutWorkflow

    data_dir = run_dir / f"{setting}-{reward}-data"
    stack = AgentStack(data_dir, model, cfg, setting, reward, tasks)
    train_ids, eval_ids = split_tasks(cfg, setting)
    last = max(cfg.steps)
    label = f"{setting}/{reward}"
    result: dict = {"reward": reward, "versions": {}, "reached_version": 0}
    progress.note(f"{label}: starting the stack (log: {stack.log_path})")
    started = time.monotonic()
    await asyncio.to_thread(stack.start, 600)
    try:
        result["stack_start_s"] = round(time.monotonic() - started, 1)
        settings = stack.settings()
        client = await connect(settings.temporal, keyring=settings.keyring())
        rollout = await start_rollout(
            client, settings, setting, train_ids, samples_per_task=cfg.samples_per_task, parallel=cfg.parallel
        )
        t0 = time.monotonic()
        version, seen, metrics = 0, None, {}
        while version < last:
            if time.monotonic() - t0 > cfg.timeout_s:
                progress.note(f"{label}: stopped at version {version} after {cfg.timeout_s:.0f}s")
                break
            try:
                version = await asyncio.to_thread(stack.served_version)
                seen = await rollout.query(RolloutWorkflow.progress)
                await step_metrics(client, settings, metrics)
            except Exception as exc:  # a slow answer is not a failure of the run; the next poll tries again
                progress.note(f"{label}: polling: {type(exc).__name__}: {exc}")
            detail = ""
            if seen is not None:
                mean = seen.mean_outcome
                detail = f"· groups {seen.groups_done} · episodes {seen.episodes_done} · samples {seen.published}"
                detail += f" · mean outcome {mean:.2f}" if mean is not None else ""
            progress.update(f"{label}: training step", version, last, detail)
            if seen is not None and seen.groups_done >= seen.groups_total:
                progress.note(f"{label}: every training task was run once; stopped at version {version}")
                break
            await asyncio.sleep(2)
        try:
            await rollout.terminate("the benchmark reached its last version")
        except RPCError:  # it had finished: nothing to stop
            pass
        await asyncio.to_thread(stack.cli, "train", "pause")
        result["interaction_s"] = round(time.monotonic() - t0, 1)
        result["step_metrics"] = [metrics[k] for k in sorted(metrics)]
        if seen is not None:
            rollout_id = rollout.id.split("/", 1)[1]
            unread: Counter = Counter()
            groups = await finished_episodes(client, rollout_id, seen.groups_started, cfg.samples_per_task, unread)
            result["rewards_seen"] = reward_stats(groups, cfg.samples_per_task, integrated=reward == "integrated")
            result["rewards_seen"]["episodes_unread"] = dict(unread.most_common(5))
        await asyncio.to_thread(stack.settle)
        status = await asyncio.to_thread(stack.wait_durable)
        version = max(version, int(status.get("version") or 0))
        result["reached_version"] = version
        result["rollout"] = seen.model_dump(exclude={"recent"}) if seen is not None else {}
        result["training"] = {
            k: status.get(k)
            for k in ("version", "steps", "samples_trained", "samples_dropped_stale", "samples_dropped_bad")
        }
        versions = [v for v in cfg.eval_versions if v <= version]
        t1 = time.monotonic()
        for i, v in enumerate(versions):
            progress.update(f"{label}: scoring version", i, len(versions), f"(v{v})", force=True)
            result["versions"][str(v)] = await score_loaded(
                stack, client, settings, model, v, setting, eval_ids, cfg, progress
            )
        base = result["versions"]["0"]["per_task"]
        result["gains"] = {
            str(v): paired_gain(base, result["versions"][str(v)]["per_task"]).model_dump() for v in versions if v
        }
        result["eval_s"] = round(time.monotonic() - t1, 1)
        progress.note(f"{label}: " + ", ".join(f"v{v} {result['versions'][str(v)]['mean']:.2f}" for v in versions))
    finally:
        try:
            await asyncio.to_thread(stack.stop, 120)
        except subprocess.TimeoutExpired:
            progress.note(f"{label}: the stack did not stop within 120 s after Ctrl-C; it was killed")
        if not cfg.keep_data:
            shutil.rmtree(data_dir / "checkpoints", ignore_errors=True)
    return result


# ---- the whole run ---------------------------------------------------------------------------------------------


def ensure_model(cfg: AgentBenchConfig, models_dir: Path, progress: Progress) -> Path:
    if cfg.model is not None:
        return cfg.model
    build = basemodel.BUILDS[cfg.build]
    target = basemodel.default_dir(models_dir, build)
    if not (target / build.corpus.marker).exists():
        progress.note(f"building the base agent policy into {target} (once; cached)")

    def built(step: int, total: int, loss: float) -> None:
        progress.update("base agent policy: pretraining step", step, total, f"· loss {loss:.3f}")

    return basemodel.ensure_base_model(target, build, built)


def run(cfg: AgentBenchConfig, models_dir: Path, data_root: Path, progress: Progress | None = None) -> dict:
    progress = progress or Progress()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    label = "+".join(cfg.settings) + "-" + "+".join(cfg.rewards)
    run_dir = cfg.out_dir or (data_root / "bench" / "agents" / f"{label}-seed{cfg.seed}-{stamp}")
    run_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    model = ensure_model(cfg, models_dir, progress)
    tasks = counting_tasks.ensure_tasks(data_root / "bench" / "agents" / "tasks")
    info = basemodel.build_info(model)
    results = {
        "seed": cfg.seed,
        "judge": f"llm at {cfg.judge_url}" if cfg.judge_url else "heuristic",
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(cfg).items()},
        "base_model": {
            "path": str(model),
            **{k: info.get(k) for k in ("digest", "parameters", "final_loss", "build_s")},
        },
        "terminal_tasks": str(tasks),
        "paper": PAPER,
        "settings": {s: {"rewards": {}} for s in cfg.settings},
    }
    for setting in cfg.settings:
        for reward in cfg.rewards:
            r = asyncio.run(run_reward(setting, reward, cfg, model, run_dir, tasks, progress))
            results["settings"][setting]["rewards"][reward] = r
            write_outputs(results, run_dir)
    results["total_s"] = round(time.monotonic() - t0, 1)
    write_outputs(results, run_dir)
    results["run_dir"] = str(run_dir)
    return results


# ---- the report ------------------------------------------------------------------------------------------------


def table(results: dict) -> str:
    steps = [int(s) for s in results["config"]["steps"]]
    cfg = results["config"]
    out = []
    for setting, block in results["settings"].items():
        paper = PAPER.get(setting, {})
        head = f"{'reward':<11} {'base':>12}" + "".join(f" {f'{s} steps':>12}" for s in steps) + f" {'paper':>6}"
        lines = [
            f"Held-out success, {setting} setting, seed {results['seed']} (judge: {results['judge']}); mean ± s.e. "
            f"over {cfg['eval_tasks']} held-out tasks x {cfg['eval_samples']} episodes",
            head,
            "-" * len(head),
        ]
        rewards = block["rewards"]
        for reward, r in rewards.items():
            row = f"{reward:<11} {score_cell(r, 0):>12}" + "".join(f" {score_cell(r, s):>12}" for s in steps)
            lines.append(row + (f" {paper[reward]:>6.2f}" if reward in paper else f" {'n/a':>6}"))
        if paper:
            lines.append("paper: Qwen3-8B after RL (Table 4); the paper gives no base score")
        else:
            lines.append("paper: no Table 4 figure for this setting (Figure 4 shows its curve)")
        for reward, r in rewards.items():
            gains = r.get("gains") or {}
            if gains:
                lines.append(
                    f"  {reward}: gain over base, paired over tasks (± s.e., z): "
                    + ", ".join(f"v{v} {gain_text(g)}" for v, g in gains.items())
                )
        if all(k in rewards for k in REWARDS):
            for s in steps:
                a, b = (rewards[k].get("versions", {}).get(str(s)) for k in REWARDS)
                if a and b:
                    d = paired_gain(a["per_task"], b["per_task"])
                    lines.append(f"  integrated - outcome at {s} steps, paired over tasks: {gain_text(d.model_dump())}")
        for reward, r in rewards.items():
            t, ro = r.get("training", {}), r.get("rollout", {})
            mean = ro.get("mean_outcome")
            mean_text = f"{mean:.2f}" if isinstance(mean, float) else "n/a"
            lines.append(
                f"  {reward}: {ro.get('episodes_done')} training episodes (mean outcome {mean_text}), "
                f"samples {ro.get('published')}, trained {t.get('samples_trained')}, "
                f"dropped as stale {t.get('samples_dropped_stale')}, reached v{r.get('reached_version')}"
            )
        out.append("\n".join(lines))
    return "\n\n".join(out)


def write_outputs(results: dict, run_dir: Path) -> None:
    (run_dir / "results.json").write_text(json.dumps(results, indent=2, default=str))
    (run_dir / "table.txt").write_text(table(results) + "\n")
    for setting in results["settings"]:
        plot(results, setting, run_dir / f"{setting}_curve.png")


def plot(results: dict, setting: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    colors = {"outcome": "tab:blue", "integrated": "tab:green"}
    for reward, r in results["settings"][setting]["rewards"].items():
        pts = sorted((int(v), e["mean"], e["se"]) for v, e in r.get("versions", {}).items())
        if pts:
            xs, ys, es = zip(*pts)
            ax.errorbar(xs, ys, yerr=es, marker="o", capsize=3, label=reward, color=colors.get(reward))
    ax.set_xlabel("training steps (policy version)")
    ax.set_ylabel("held-out success rate")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"General agents learning: {setting}, seed {results['seed']} (judge: {results['judge']})",
                 fontsize=9)  # fmt: skip
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
