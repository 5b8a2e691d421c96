"""`openclaw-rl bench two-users`: two users with opposite tastes chat at once; one shared policy against an adapter
per user (issue 31's benchmark).

The student of the personalization benchmark wants homework answers that do not look AI-written (one plain
paragraph); the manager wants the opposite (bold numbered steps and an answer line). Both ask about the same kind
of problem, in the same words, through the same endpoint, each with their own API key, at the same time. Per mode,
a fresh `openclaw-rl up` with the combined method:
- shared: today's default, every user's samples train one policy (full fine-tuning);
- shared_lora: one shared LoRA adapter with the per-user adapters' rank and rate (the control: the same capacity
  and step size, one policy);
- per_user: `training.adapters = per_user`, each user's samples train their own LoRA adapter on the frozen base
  and each user's turns are served by their adapter (trainers/user_adapters.py).
Once every policy that serves a user reached the last step, the users stop and training pauses; then each
evaluated version answers the held-out problems and each user's scorer scores the answers their policy gives:
the shared mode's one checkpoint answers for both, the per-user mode loads each user's adapter at that version
into the engine and generates through it. The rule scorer makes the two tastes exact opposites (an answer's two
scores add to 1), so one policy cannot score high for both, whatever it learns.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

from bench.personalization import basemodel
from bench.personalization.runner import (
    RESCORES,
    BenchConfig,
    Stack,
    Tally,
    eval_tasks,
    first_answers,
    judging_stats,
    run_user,
)
from bench.personalization.users import SimulatedUser
from bench.progress import Progress
from bench.stats import gain_text, mean_se, paired_gain, score_cell
from contracts.chat import tenant_of
from evals.personalization.scorer import RuleScorer

MODES = ("per_user", "shared", "shared_lora")
USERS = ("student", "manager")
"""Each user's preference, which is also their user id in the run."""


@dataclass
class TwoUserConfig:
    modes: tuple[str, ...] = MODES
    seed: int = 0
    steps: tuple[int, ...] = (8, 16)
    batch_size: int = 16
    method: str = "combined"
    lr: float = 3e-4
    """The shared policy's rate (full fine-tuning; the personalization benchmark's)."""
    adapter_lr: float = 3e-3
    """Each adapter's rate: LoRA updates few parameters and wants a larger one."""
    lora_rank: int = 16
    eval_problems: int = 36
    eval_samples: int = 2
    curve_every: int = 4
    max_tokens: int = 160
    temperature: float = 1.0
    recipe: basemodel.Recipe = field(default_factory=lambda: basemodel.DEFAULT)
    model: Path | None = None
    out_dir: Path | None = None
    keep_data: bool = False
    timeout_s: float = 3600.0

    def __post_init__(self) -> None:
        unknown = set(self.modes) - set(MODES)
        if unknown or not self.modes:
            raise ValueError(f"modes are {', '.join(MODES)}; got {', '.join(self.modes) or 'none'}")
        if self.eval_problems < 2:
            raise ValueError(f"eval_problems must be at least 2 (gains pair problems), got {self.eval_problems}")

    @property
    def eval_versions(self) -> list[int]:
        last = max(self.steps)
        return sorted(set(range(0, last + 1, max(1, self.curve_every))) | {0, *self.steps})

    def bench_config(self) -> BenchConfig:
        """The personalization benchmark's settings this run shares (its stack, users' loop and sampling)."""
        return BenchConfig(
            setting="student", methods=(self.method,), seed=self.seed, steps=self.steps, users=len(USERS),
            batch_size=self.batch_size, lr=self.lr, eval_problems=self.eval_problems, eval_samples=self.eval_samples,
            curve_every=self.curve_every, max_tokens=self.max_tokens, temperature=self.temperature,
            recipe=self.recipe, model=self.model, timeout_s=self.timeout_s,
        )  # fmt: skip


# ---- answers and scores ----------------------------------------------------------------------------------------


def answers(stack: Stack, model: Path, tasks: list, cfg: TwoUserConfig, lora: str | None = None) -> list[list[str]]:
    """First answers per held-out problem, asked as both users ask (the personalization benchmark's one-message
    chats), through `lora` when given."""
    return first_answers(stack, model, "student", tasks, cfg, lora=lora)  # type: ignore[arg-type]: the same fields


def scored(user: str, tasks: list, per_task: list[list[str]]) -> dict:
    """`user`'s scores of the answers (mean ± s.e., per problem for paired gains, two examples)."""
    scorer = RuleScorer()
    values = [[scorer.score(user, t, a).value for a in per] for t, per in zip(tasks, per_task)]
    flat = [v for per in values for v in per]
    m, se = mean_se(flat)
    return {
        "mean": round(m, 4),
        "se": round(se, 4),
        "per_problem": [round(mean_se(per)[0], 4) for per in values],
        "examples": [per_task[j][0] for j in range(min(2, len(per_task)))],
    }


def load_adapter(stack: Stack, name: str, folder: Path) -> None:
    r = httpx.post(f"{stack.engine}/load_lora_adapter", json={"lora_name": name, "lora_path": str(folder)}, timeout=300)
    if r.status_code != 200 or not r.json().get("success", True):
        raise RuntimeError(f"the engine refused adapter {folder}: {r.text[:300]}")


def adapter_folder(data_dir: Path, user: str, version: int) -> Path:
    """Where publication wrote `user`'s adapter after its `version`-th step (activities/weight_publication.py)."""
    return data_dir / "adapters" / tenant_of(user) / f"v{version}"


def adapter_versions(data_dir: Path) -> dict[str, int]:
    """Each user's latest published adapter step (0 before the first)."""
    out = {}
    for user in USERS:
        folder = data_dir / "adapters" / tenant_of(user)
        steps = [int(p.name[1:]) for p in folder.glob("v*") if p.name[1:].isdigit()] if folder.is_dir() else []
        out[user] = max(steps, default=0)
    return out


def score_shared(stack: Stack, model: Path, version: int, tasks: list, cfg: TwoUserConfig, progress) -> dict:
    """One checkpoint answers for both users; scored again if other weights reached the engine meanwhile."""
    for _ in range(RESCORES):
        stack.load_version(model, version)
        got = answers(stack, model, tasks, cfg)
        if stack.served_weight_version() == f"eval-{version}":
            return {user: scored(user, tasks, got) for user in USERS}
        progress.note(f"new weights reached the engine while v{version} was scored: scoring it again")
    raise RuntimeError(f"v{version} could not be scored: the engine's weights kept changing ({RESCORES} tries)")


def score_per_user(stack: Stack, model: Path, version: int, tasks: list, cfg: TwoUserConfig) -> dict:
    """Each user's adapter at its `version`-th step answers for that user (version 0: the base, the same for both)."""
    if version == 0:
        got = answers(stack, model, tasks, cfg)
        return {user: scored(user, tasks, got) for user in USERS}
    out = {}
    for user in USERS:
        name, folder = f"eval-{user}-v{version}", adapter_folder(stack.data_dir, user, version)
        load_adapter(stack, name, folder)
        out[user] = scored(user, tasks, answers(stack, model, tasks, cfg, lora=name)) | {"adapter": str(folder)}
        httpx.post(f"{stack.engine}/unload_lora_adapter", json={"lora_name": name}, timeout=60).raise_for_status()
    return out


# ---- one mode --------------------------------------------------------------------------------------------------


def mode_env(mode: str, cfg: TwoUserConfig) -> dict[str, str]:
    if mode == "shared":
        return {}
    return {
        "OPENCLAW_RL_TRAINING__ADAPTERS": "per_user" if mode == "per_user" else "shared",
        "OPENCLAW_RL_TRAINING__LORA__ENABLED": "true",
        "OPENCLAW_RL_TRAINING__LORA__RANK": str(cfg.lora_rank),
        "OPENCLAW_RL_TRAINING__LORA__ALPHA": str(2 * cfg.lora_rank),
        "OPENCLAW_RL_TRAINING__LR": str(cfg.adapter_lr),
        "OPENCLAW_RL_TRAINING__LORA__LR_SCALE": "1",  # adapter_lr is the adapters' own rate, given whole
    }


def reached(mode: str, stack: Stack) -> dict[str, int]:
    """How many steps trained the policy serving each user: the shared version, or each user's adapter's."""
    if mode == "per_user":
        return adapter_versions(stack.data_dir)
    try:
        version = stack.served_version()
    except httpx.HTTPError:
        version = 0
    return dict.fromkeys(USERS, version)


def run_mode(mode: str, cfg: TwoUserConfig, model: Path, run_dir: Path, progress: Progress) -> dict:
    data_dir = run_dir / f"{mode}-data"
    bcfg = cfg.bench_config()
    stack = Stack(data_dir, model, bcfg, cfg.method)
    stack.env.update(mode_env(mode, cfg))
    tasks = eval_tasks("student", cfg.eval_problems)
    last = max(cfg.steps)
    result: dict = {"mode": mode, "versions": {}, "reached": {}}
    progress.note(f"{mode}: starting the stack (log: {stack.log_path})")
    stack.start(timeout=600)
    try:
        users = [SimulatedUser(u, u, cfg.seed) for u in USERS]
        keys = {u.name: stack.cli("keys", "create", "--user", u.name).split()[0] for u in users}
        stop, tallies = threading.Event(), {u.name: Tally() for u in users}
        threads = [
            threading.Thread(target=run_user, args=(u, stack, keys[u.name], bcfg, stop, tallies[u.name]), daemon=True)
            for u in users
        ]
        t0 = time.monotonic()
        for th in threads:
            th.start()
        steps = dict.fromkeys(USERS, 0)
        try:
            while min(steps.values()) < last:
                if time.monotonic() - t0 > cfg.timeout_s:
                    progress.note(f"{mode}: stopped at {steps} after {cfg.timeout_s:.0f}s")
                    break
                errors = [e for t in tallies.values() for e in t.errors]
                if len(errors) > 20:
                    raise RuntimeError(f"the users' requests keep failing: {errors[:3]}")
                steps = reached(mode, stack)
                turns = sum(t.turns for t in tallies.values())
                progress.update(
                    f"{mode}: training step", min(steps.values()), last,
                    "· " + " · ".join(f"{u} v{v}" for u, v in steps.items()) + f" · turns {turns}",
                )  # fmt: skip
                time.sleep(2)
            stop.set()
            stack.cli("train", "pause")
        finally:
            stop.set()
            for th in threads:
                th.join(timeout=600)
        result["interaction_s"] = round(time.monotonic() - t0, 1)
        stack.settle()
        status = stack.wait_durable()
        result["reached"] = reached(mode, stack)
        result["users"] = {
            u: {"turns": t.turns, "reactions": dict(t.reactions), "errors": t.errors[:3]} for u, t in tallies.items()
        }
        result["training"] = {
            k: status.get(k) for k in ("version", "steps", "samples_trained", "samples_dropped_stale")
        }
        result["judging"] = judging_stats(data_dir)
        progress.note(f"{mode}: reached {result['reached']} in {result['interaction_s']:.0f}s")
        versions = [v for v in cfg.eval_versions if v <= min(result["reached"].values())]
        t1 = time.monotonic()
        for i, v in enumerate(versions):
            progress.update(f"{mode}: scoring version", i, len(versions), f"(v{v})", force=True)
            if mode != "per_user":
                result["versions"][str(v)] = score_shared(stack, model, v, tasks, cfg, progress)
            else:
                result["versions"][str(v)] = score_per_user(stack, model, v, tasks, cfg)
        result["gains"] = {
            user: {
                str(v): paired_gain(
                    result["versions"]["0"][user]["per_problem"], result["versions"][str(v)][user]["per_problem"]
                ).model_dump()
                for v in versions
                if v
            }
            for user in USERS
        }
        result["eval_s"] = round(time.monotonic() - t1, 1)
        progress.note(
            f"{mode}: "
            + "; ".join(
                f"{u} " + ", ".join(f"v{v} {result['versions'][str(v)][u]['mean']:.2f}" for v in versions)
                for u in USERS
            )
        )
    finally:
        try:
            stack.stop(timeout=120)
        except subprocess.TimeoutExpired:
            progress.note(f"{mode}: the stack did not stop within 120 s after Ctrl-C; it was killed")
        if not cfg.keep_data:
            shutil.rmtree(data_dir / "checkpoints", ignore_errors=True)
            shutil.rmtree(data_dir / "adapters", ignore_errors=True)
    return result


# ---- the whole run ---------------------------------------------------------------------------------------------


def run(cfg: TwoUserConfig, models_dir: Path, data_root: Path, progress: Progress | None = None) -> dict:
    progress = progress or Progress()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_dir = cfg.out_dir or (data_root / "bench" / "two-users" / f"{'-'.join(cfg.modes)}-seed{cfg.seed}-{stamp}")
    run_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    model = cfg.model or basemodel.ensure_base_model(
        basemodel.default_dir(models_dir, cfg.recipe),
        cfg.recipe,
        lambda s, n, loss: progress.update("base policy: pretraining step", s, n, f"· loss {loss:.3f}"),
    )
    results: dict = {
        "seed": cfg.seed,
        "method": cfg.method,
        "scorer": "rule (student / manager: opposite tastes)",
        "judge": "heuristic",
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(cfg).items() if k != "recipe"},
        "base_model": {"path": str(model), **{k: basemodel.build_info(model).get(k) for k in ("digest", "parameters")}},
        "modes": {},
    }
    for mode in cfg.modes:
        results["modes"][mode] = run_mode(mode, cfg, model, run_dir, progress)
        write_outputs(results, run_dir)
    results["total_s"] = round(time.monotonic() - t0, 1)
    write_outputs(results, run_dir)
    results["run_dir"] = str(run_dir)
    return results


def table(results: dict) -> str:
    steps = [int(s) for s in results["config"]["steps"]]
    head = f"{'mode':<12} {'user':<9} {'base':>12}" + "".join(f" {f'{s} steps':>12}" for s in steps)
    cfg = results["config"]
    lines = [
        f"Two users with opposite tastes, seed {results['seed']}, {results['method']} method (scorer: "
        f"{results['scorer']}; judge: {results['judge']}); mean ± s.e. over {cfg['eval_problems']} held-out problems "
        f"x {cfg['eval_samples']} first answers",
        head,
        "-" * len(head),
    ]
    for mode, r in results["modes"].items():
        for user in USERS:
            cells = {"versions": {v: e[user] for v, e in r.get("versions", {}).items()}}
            lines.append(
                f"{mode:<12} {user:<9} {score_cell(cells, 0):>12}"
                + "".join(f" {score_cell(cells, s):>12}" for s in steps)
            )
    for mode, r in results["modes"].items():
        for user, gains in (r.get("gains") or {}).items():
            if gains:
                lines.append(
                    f"  {mode}, {user}: gain over base " + ", ".join(f"v{v} {gain_text(g)}" for v, g in gains.items())
                )
        t = r.get("training") or {}
        lines.append(
            f"  {mode}: steps reached {r.get('reached')}, samples trained {t.get('samples_trained')}, turns "
            + ", ".join(f"{u} {x.get('turns')}" for u, x in (r.get("users") or {}).items())
        )
    return "\n".join(lines)


def write_outputs(results: dict, run_dir: Path) -> None:
    (run_dir / "results.json").write_text(json.dumps(results, indent=2, default=str))
    (run_dir / "table.txt").write_text(table(results) + "\n")
    plot(results, run_dir / "two_users.png")


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    colors = {"student": "tab:blue", "manager": "tab:red"}
    for mode, r in results["modes"].items():
        for user in USERS:
            pts = sorted((int(v), e[user]["mean"], e[user]["se"]) for v, e in r.get("versions", {}).items())
            if pts:
                xs, ys, es = zip(*pts)
                marker, ls = {"per_user": ("o", "-"), "shared": ("s", "--")}.get(mode, ("^", ":"))
                ax.errorbar(xs, ys, yerr=es, marker=marker, capsize=3, ls=ls, color=colors[user],
                            label=f"{user}, {mode}")  # fmt: skip
    ax.set_xlabel("training steps of the policy serving the user")
    ax.set_ylabel("personalization score (the user's own scorer)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(
        f"Two users with opposite tastes: one shared policy vs an adapter each (seed {results['seed']})", fontsize=9
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
