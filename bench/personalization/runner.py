"""`openclaw-rl bench personalization`: Table 3 through the real stack.

Per method: a fresh `openclaw-rl up` (own data directory and ports) serving the base policy, with
`learning.method` set and the heuristic judge (or an LLM judge at --judge-url); simulated users chat through
the endpoint (HTTP, `X-Session-Id`), their sessions are judged, samples go to the stream, the TrainingWorkflow
trains and publishes weights while the users go on. Once the policy reaches the last step, the users stop,
training pauses, and every evaluated version's checkpoint is loaded into the engine in turn: the first answer to
each held-out problem (a fresh one-message chat, the engine's own sampling at the users' temperature) is scored.
"""

from __future__ import annotations

import json
import random
import shutil
import statistics
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

from activities.judgement_log import read_judgements
from bench.personalization import basemodel
from bench.personalization.users import TASKS_PER_SESSION, SimulatedUser
from bench.progress import Progress
from bench.stack import BenchStack
from bench.stats import gain_text, mean_se, paired_gain, score_cell
from evals.personalization import styles
from evals.personalization.problems import HELD_OUT_SEED, eval_grading_tasks, eval_problems
from evals.personalization.scorer import LlmScorer, RuleScorer
from openclaw_rl.ports import free_port
from openclaw_rl.settings import Settings
from stack.running import CLI, REPO, isolated_env

PAPER = {"base": 0.17, "binary": {8: 0.25, 16: 0.23}, "opd": {8: 0.25, 16: 0.72}, "combined": {8: 0.76, 16: 0.81}}
METHODS = ("binary", "opd", "combined")
RESCORES = 3
"""Times a version is scored again when a late weight update lands during its scoring."""
EVAL_SEED = HELD_OUT_SEED
"""The held-out problems are the same for every run and seed (the paper: the first 36 of GSM8K)."""


@dataclass
class BenchConfig:
    setting: str
    methods: tuple[str, ...]
    seed: int = 0
    steps: tuple[int, ...] = (8, 16)
    eval_problems: int = 36
    eval_samples: int = 2
    """First answers sampled per held-out problem and version (each one a fresh chat's first answer)."""
    curve_every: int = 4
    users: int = 4
    batch_size: int = 16
    lr: float = 3e-4
    teacher: str = "policy"
    """policy: the served policy scores OPD's hint-enhanced context (the paper); frozen: the base policy does, on an
    engine of its own (the reference)."""
    temperature: float = 1.0
    max_tokens: int = 160
    judge_url: str | None = None
    judge_model: str = "default"
    scorer_url: str | None = None
    scorer_model: str = "default"
    recipe: basemodel.Recipe = basemodel.DEFAULT
    model: Path | None = None
    out_dir: Path | None = None
    keep_data: bool = False
    timeout_s: float = 3600.0
    """Per method: give up on reaching the last step after this long (the table then says how far it got)."""
    settings: dict[str, str] = field(default_factory=dict)
    """Settings of each method's stack as environment variables (`--set`), applied after the benchmark's own."""

    def __post_init__(self) -> None:
        if self.eval_problems < 2:
            raise ValueError(f"eval_problems must be at least 2 (gains pair problems), got {self.eval_problems}")
        if self.eval_samples < 1:
            raise ValueError(f"eval_samples must be at least 1, got {self.eval_samples}")

    @property
    def eval_versions(self) -> list[int]:
        last = max(self.steps)
        return sorted(set(range(0, last + 1, max(1, self.curve_every))) | {0, *self.steps})


# ---- the stack -------------------------------------------------------------------------------------------------


class Stack(BenchStack):
    """`openclaw-rl up` for one method: the base policy served, the method's learning on, training started."""

    def __init__(self, data_dir: Path, model: Path, cfg: BenchConfig, method: str):
        env = isolated_env(data_dir, model)
        judge = (
            {"type": "llm", "url": cfg.judge_url, "model": cfg.judge_model} if cfg.judge_url else {"type": "heuristic"}
        )
        env.update(
            OPENCLAW_RL_LEARNING__METHOD=method,
            OPENCLAW_RL_LEARNING__JUDGE=json.dumps(judge),
            OPENCLAW_RL_TRAINING__AUTO_START="true",
            OPENCLAW_RL_EVAL__EVERY_VERSIONS="0",  # the benchmark scores versions itself, after its users stop
            OPENCLAW_RL_TRAINING__BATCH_SIZE=str(cfg.batch_size),
            OPENCLAW_RL_TRAINING__LR=str(cfg.lr),
            OPENCLAW_RL_TRAINING__WAIT_S="2",
            OPENCLAW_RL_TRAINING__CHECKPOINT__KEEP="1000",  # every evaluated version stays on disk until scored
            # Versions live in the trainer's memory; each one is scored from its durable checkpoint afterwards.
            OPENCLAW_RL_TRAINING__CHECKPOINT__EVERY_VERSIONS="1",
            OPENCLAW_RL_SESSION__DEFAULT_MAX_TOKENS=str(cfg.max_tokens),
            OPENCLAW_RL_SESSION__TURNS_PER_RUN="50",
        )
        if not cfg.judge_url:
            env["OPENCLAW_RL_LEARNING__PRM_VOTES"] = "1"  # the heuristic judge is deterministic: votes would agree
        if shutil.which("bwrap") is None:  # this benchmark runs no environments; `up` needs a sandbox otherwise
            env["OPENCLAW_RL_ENVS__SANDBOX__MODE"] = "unsandboxed"
        env.update(cfg.settings)
        self.model = model
        self.teacher_port = free_port() if cfg.teacher == "frozen" else None
        self.teacher_proc: subprocess.Popen | None = None
        if self.teacher_port is not None:
            env["OPENCLAW_RL_LEARNING__TEACHER"] = json.dumps({"url": f"http://127.0.0.1:{self.teacher_port}"})
        super().__init__(env)

    def start(self, timeout: float = 240.0) -> "Stack":
        if self.teacher_port is not None:  # the frozen teacher: the base policy on an engine the trainer never updates
            self.data_dir.mkdir(parents=True, exist_ok=True)
            log = open(self.data_dir.parent / f"{self.data_dir.name}-teacher.log", "ab")
            self.teacher_proc = subprocess.Popen(
                CLI + ["engine", "--model", str(self.model), "--port", str(self.teacher_port), "--weight-version", "0"],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=REPO,
            )
            url, deadline = f"http://127.0.0.1:{self.teacher_port}/get_weight_version", time.monotonic() + timeout
            while True:
                try:
                    if httpx.get(url, timeout=5).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if self.teacher_proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the frozen teacher's engine did not start (log: {log.name})")
                time.sleep(0.5)
        super().start(timeout)
        return self

    def stop(self, timeout: float = 60.0) -> int:
        try:
            return super().stop(timeout)
        finally:
            if self.teacher_proc is not None and self.teacher_proc.poll() is None:
                self.teacher_proc.terminate()
                try:
                    self.teacher_proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    self.teacher_proc.kill()


# ---- users -----------------------------------------------------------------------------------------------------


@dataclass
class Tally:
    turns: int = 0
    reactions: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    online_scores: list[tuple[str, float]] = field(default_factory=list)
    """(serving policy version, score of a task's first answer) as the users saw them."""
    served: list[tuple[float, str]] = field(default_factory=list)
    """(wall time it was sent, serving version) of every turn."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, kind: str) -> None:
        with self.lock:
            self.reactions[kind] = self.reactions.get(kind, 0) + 1


def run_user(
    user: SimulatedUser,
    stack: Stack,
    key: str,
    cfg: BenchConfig,
    stop: threading.Event,
    tally: Tally,
    system: str | None = None,
    reacts_as: Callable[[], SimulatedUser] | None = None,
):
    """One simulated user's chats until `stop`. `system`: the system prompt of every session (the user's USER.md);
    `reacts_as`: who judges each answer now (another taste: the user's reactions, hence their rewards, inverted)."""
    http = httpx.Client(timeout=600)
    session = 0
    task_index = 0
    try:
        while not stop.is_set():
            session += 1
            sid = f"{user.name}-s{cfg.seed}-{session}"
            history: list[dict] = [{"role": "system", "content": system}] if system else []
            turn = 0
            task = user.task(task_index)
            request = user.ask(task, user.rng(session, -1))
            attempts, re_asked, done_tasks = 0, False, 0
            while not stop.is_set():
                history.append({"role": "user", "content": request})
                sent = time.time()
                r = http.post(
                    f"{stack.api}/v1/chat/completions",
                    json={"messages": history, "max_tokens": cfg.max_tokens, "temperature": cfg.temperature},
                    headers={"Authorization": f"Bearer {key}", "X-Session-Id": sid},
                )
                if r.status_code == 400:  # the session outgrew the model's context: start a new one
                    tally.add("context_full")
                    break
                if r.status_code != 200:
                    tally.errors.append(f"{r.status_code}: {r.text[:300]}")
                    if len(tally.errors) > 20:
                        return
                    time.sleep(2)
                    history.pop()
                    continue
                body = r.json()
                answer = body["choices"][0]["message"].get("content") or ""
                history.append({"role": "assistant", "content": answer})
                attempts += 1
                turn += 1
                with tally.lock:
                    tally.turns += 1
                    tally.served.append((sent, str(body.get("system_fingerprint") or "?")))
                if done_tasks + 1 >= TASKS_PER_SESSION:  # the session's last answer gets no reaction
                    break
                rng = user.rng(session, turn)
                next_task = user.task(task_index + 1)
                next_request = user.ask(next_task, rng)
                reaction = (reacts_as() if reacts_as is not None else user).react(
                    task, answer, last_request=request, attempts=attempts, re_asked=re_asked,
                    next_request=next_request, rng=rng,
                )  # fmt: skip
                if attempts == 1:
                    with tally.lock:
                        tally.online_scores.append((str(body.get("system_fingerprint") or "?"), reaction.score))
                tally.add(reaction.kind)
                request = reaction.message
                if reaction.next_task:
                    task_index += 1
                    done_tasks += 1
                    task, attempts, re_asked = next_task, 0, False
                else:
                    re_asked = re_asked or reaction.kind == "re_ask"
            task_index += 1
    except httpx.HTTPError as exc:
        if not stop.is_set():
            tally.errors.append(f"{type(exc).__name__}: {exc}")
    finally:
        http.close()


# ---- evaluation ------------------------------------------------------------------------------------------------


def eval_tasks(setting: str, n: int) -> list:
    return eval_problems(EVAL_SEED, n) if setting == "student" else eval_grading_tasks(EVAL_SEED, n)


def first_answers(
    stack: Stack, model: Path, setting: str, tasks: list, cfg: BenchConfig, lora: str | None = None
) -> list[list[str]]:
    """`eval_samples` first answers per task from the engine as it serves now (through `lora`, an adapter loaded
    under that name, when given): one-message chats."""
    chats = [
        [{"role": "user", "content": styles.ask(setting, task, random.Random(f"eval-ask:{i}"))}]
        for i, task in enumerate(tasks)
    ]
    return sampled_answers(stack, model, chats, cfg, lora)


def sampled_answers(
    stack: Stack, model: Path, chats: list[list[dict]], cfg: BenchConfig, lora: str | None = None
) -> list[list[str]]:
    """`eval_samples` answers to each conversation from the engine as it serves now (through `lora` when given),
    rendered by the policy's chat template exactly as the endpoint renders them, at the users' sampling."""
    from policy_client.chat import renderer_for

    renderer = renderer_for(str(model))
    tok = renderer.tokenizer
    stop_ids = [tok.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")]
    prompts = [renderer.render(chat) for chat in chats]
    flat = [p for p in prompts for _ in range(cfg.eval_samples)]
    out: list[str] = []
    with httpx.Client(timeout=900) as http:
        for i in range(0, len(flat), 16):
            body: dict = {
                "input_ids": flat[i : i + 16],
                "sampling_params": {
                    "max_new_tokens": cfg.max_tokens,
                    "temperature": cfg.temperature,
                    "stop_token_ids": stop_ids,
                },
            }
            if lora is not None:
                body["lora_path"] = [lora] * len(body["input_ids"])
            r = http.post(f"{stack.engine}/generate", json=body)
            r.raise_for_status()
            out += [item["text"] for item in r.json()]
    k = cfg.eval_samples
    return [out[i * k : (i + 1) * k] for i in range(len(chats))]


def score_version(stack: Stack, model: Path, tasks: list, scorer, cfg: BenchConfig) -> dict:
    """Score the engine's current weights: `eval_samples` first answers per held-out task."""
    answers = first_answers(stack, model, cfg.setting, tasks, cfg)
    scored = [[scorer.score(cfg.setting, t, a).value for a in per] for t, per in zip(tasks, answers)]
    flat = [s for per in scored for s in per]
    m, se = mean_se(flat)
    return {
        "mean": round(m, 4),
        "se": round(se, 4),
        "first_sample_mean": round(mean_se([per[0] for per in scored])[0], 4),
        "per_problem": [round(mean_se(per)[0], 4) for per in scored],
        "distribution": {str(x): sum(1 for s in flat if s == x) for x in (0.0, 0.25, 0.5, 0.75, 1.0)},
        "examples": [answers[j][0] for j in range(min(3, len(answers)))],
    }


def score_loaded(stack: Stack, model: Path, version: int, tasks: list, scorer, cfg: BenchConfig, progress) -> dict:
    """Load `version` into the engine and score it; again if other weights reached the engine meanwhile."""
    for _ in range(RESCORES):
        stack.load_version(model, version)
        entry = score_version(stack, model, tasks, scorer, cfg)
        served = stack.served_weight_version()
        if served == f"eval-{version}":
            return entry
        progress.note(f"weights {served} reached the engine while v{version} was scored: scoring it again")
    raise RuntimeError(f"v{version} could not be scored: the engine's weights kept changing ({RESCORES} tries)")


# ---- one method ------------------------------------------------------------------------------------------------


def run_method(method: str, cfg: BenchConfig, model: Path, run_dir: Path, progress: Progress) -> dict:
    data_dir = run_dir / f"{method}-data"
    stack = Stack(data_dir, model, cfg, method)
    scorer = LlmScorer(cfg.scorer_url, cfg.scorer_model) if cfg.scorer_url else RuleScorer()
    tasks = eval_tasks(cfg.setting, cfg.eval_problems)
    last = max(cfg.steps)
    result: dict = {"method": method, "versions": {}, "reached_version": 0}
    progress.note(f"{method}: starting the stack (log: {stack.log_path})")
    started = time.monotonic()
    stack.start(timeout=600)
    try:
        result["stack_start_s"] = round(time.monotonic() - started, 1)
        users = [SimulatedUser(cfg.setting, f"{cfg.setting}{i}", cfg.seed) for i in range(cfg.users)]
        keys = {u.name: stack.cli("keys", "create", "--user", u.name).split()[0] for u in users}
        stop = threading.Event()
        tally = Tally()
        threads = [
            threading.Thread(target=run_user, args=(u, stack, keys[u.name], cfg, stop, tally), daemon=True)
            for u in users
        ]
        t0 = time.monotonic()
        for th in threads:
            th.start()
        version = 0
        try:
            while version < last:
                if time.monotonic() - t0 > cfg.timeout_s:
                    progress.note(f"{method}: stopped at version {version} after {cfg.timeout_s:.0f}s")
                    break
                if len(tally.errors) > 20:
                    raise RuntimeError(f"the users' requests keep failing: {tally.errors[:3]}")
                try:
                    version = stack.served_version()
                except httpx.HTTPError:
                    pass
                r = tally.reactions
                progress.update(
                    f"{cfg.setting}/{method}: training step",
                    version,
                    last,
                    f"· turns {tally.turns} · corrections {r.get('correction', 0)} · re-asks {r.get('re_ask', 0)}"
                    f" · thanks {r.get('satisfied', 0)}",
                )
                time.sleep(2)
            stop.set()
            # Paused before the users' last turns finish: fewer steps past the last evaluated version.
            stack.cli("train", "pause")
        finally:
            stop.set()
            for th in threads:
                th.join(timeout=600)
        result["interaction_s"] = round(time.monotonic() - t0, 1)
        stack.settle()
        status = stack.wait_durable()
        version = max(version, int(status.get("version") or 0))
        result["reached_version"] = version
        result["turns"] = tally.turns
        result["reactions"] = dict(tally.reactions)
        result["user_errors"] = tally.errors[:5]
        result["training"] = {
            k: status.get(k)
            for k in ("version", "steps", "samples_trained", "samples_dropped_stale", "samples_dropped_bad")
        }
        result["online_first_answer_scores"] = _online(tally)
        result["judging"] = judging_stats(data_dir)
        progress.note(
            f"{method}: reached v{version} after {tally.turns} turns in {result['interaction_s']:.0f}s; "
            f"reactions {dict(tally.reactions)}; samples {result['judging'].get('samples')}"
        )
        versions = [v for v in cfg.eval_versions if v <= version]
        t1 = time.monotonic()
        for i, v in enumerate(versions):
            progress.update(f"{cfg.setting}/{method}: scoring version", i, len(versions), f"(v{v})", force=True)
            result["versions"][str(v)] = score_loaded(stack, model, v, tasks, scorer, cfg, progress)
            if v == 0:  # the same weights sampled again: how far evaluation noise alone moves the score
                result["base_repeat"] = score_loaded(stack, model, v, tasks, scorer, cfg, progress)
        base = result["versions"]["0"]["per_problem"]
        result["noise"] = paired_gain(base, result["base_repeat"]["per_problem"]).model_dump()
        result["gains"] = {
            str(v): paired_gain(base, result["versions"][str(v)]["per_problem"]).model_dump() for v in versions if v
        }
        result["eval_s"] = round(time.monotonic() - t1, 1)
        progress.update(f"{cfg.setting}/{method}: scoring version", len(versions), len(versions), force=True)
        progress.note(f"{method}: " + ", ".join(f"v{v} {result['versions'][str(v)]['mean']:.2f}" for v in versions))
    finally:
        try:
            stack.stop(timeout=120)
        except subprocess.TimeoutExpired:
            progress.note(f"{method}: the stack did not stop within 120 s after Ctrl-C; it was killed")
        if not cfg.keep_data:
            shutil.rmtree(data_dir / "checkpoints", ignore_errors=True)
    return result


def _online(tally: Tally) -> dict:
    by: dict[str, list[float]] = {}
    for v, s in tally.online_scores:
        by.setdefault(v, []).append(s)
    return {v: {"n": len(s), "mean": round(statistics.fmean(s), 4)} for v, s in sorted(by.items())}


def judging_stats(data_dir: Path) -> dict:
    """What the judge made of the users' replies, from its records (records/policy-*/personal.jsonl): judged
    turns, their PRM scores, accepted hints, and the samples published (with their rewards)."""
    out = {"judged": 0, "score+1": 0, "score-1": 0, "score0": 0, "hints": 0, "samples": 0, "reward+1": 0, "reward-1": 0}
    keyring = Settings().keyring()  # lines are sealed when the run had encryption keys (activities.judgement_log)
    for path in (data_dir / "records").glob("policy-*/personal.jsonl"):
        for judged in read_judgements(path, keyring):
            rec = judged.model_dump(mode="json")
            judge, res = rec.get("judge") or {}, rec.get("result") or {}
            out["judged"] += 1
            score = judge.get("eval_score")
            out["score+1" if score == 1 else "score-1" if score == -1 else "score0"] += 1
            out["hints"] += bool(judge.get("hint"))
            if res.get("published"):
                out["samples"] += 1
                out["reward+1"] += (res.get("reward") or 0) > 0
                out["reward-1"] += (res.get("reward") or 0) < 0
    return out


# ---- the whole run ---------------------------------------------------------------------------------------------


def run(cfg: BenchConfig, models_dir: Path, data_root: Path, progress: Progress | None = None) -> dict:
    progress = progress or Progress()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    label = "all" if len(cfg.methods) > 1 else cfg.methods[0]
    run_dir = cfg.out_dir or (data_root / "bench" / "personalization" / f"{cfg.setting}-{label}-seed{cfg.seed}-{stamp}")
    run_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    if cfg.model is not None:
        model = cfg.model
    else:
        target = basemodel.default_dir(models_dir, cfg.recipe)
        if not (target / basemodel.MARKER).exists():
            progress.note(f"building the base policy into {target} (once; cached)")

        def built(step: int, total: int, loss: float) -> None:
            progress.update("base policy: pretraining step", step, total, f"· loss {loss:.3f}")

        model = basemodel.ensure_base_model(target, cfg.recipe, built)
    info = basemodel.build_info(model)
    results = {
        "setting": cfg.setting,
        "seed": cfg.seed,
        "scorer": "llm (appendix C.3 prompt) at " + cfg.scorer_url if cfg.scorer_url else "rule (README)",
        "judge": f"llm at {cfg.judge_url}" if cfg.judge_url else "heuristic",
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(cfg).items() if k != "recipe"},
        "base_model": {
            "path": str(model),
            **{k: info.get(k) for k in ("digest", "parameters", "final_loss", "build_s")},
        },
        "paper": PAPER,
        "methods": {},
    }
    for method in cfg.methods:
        results["methods"][method] = run_method(method, cfg, model, run_dir, progress)
        write_outputs(results, run_dir)
    results["total_s"] = round(time.monotonic() - t0, 1)
    write_outputs(results, run_dir)
    results["run_dir"] = str(run_dir)
    return results


def table(results: dict) -> str:
    steps = [int(s) for s in results["config"]["steps"]]
    head = f"{'method':<10} {'base':>12}" + "".join(f" {f'{s} steps':>12} {'paper':>6}" for s in steps)
    lines = [
        f"Personalization score, {results['setting']} setting, seed {results['seed']} "
        f"(scorer: {results['scorer']}; judge: {results['judge']}); mean ± s.e. over "
        f"{results['config']['eval_problems']} held-out problems x {results['config']['eval_samples']} first answers",
        head,
        "-" * len(head),
    ]
    for method, r in results["methods"].items():
        row = f"{method:<10} {score_cell(r, 0):>12}"
        for s in steps:
            paper = PAPER.get(method, {}).get(s)
            row += f" {score_cell(r, s):>12} {'-' if paper is None else f'{paper:.2f}':>6}"
        lines.append(row)
    lines.append(f"paper base score: {PAPER['base']:.2f}")
    for method, r in results["methods"].items():
        gains = r.get("gains") or {}
        if not gains or "noise" not in r:
            continue
        lines.append(
            f"  {method}: gain over base, paired over problems (± s.e., z): "
            + ", ".join(f"v{v} {gain_text(g)}" for v, g in gains.items())
            + f"; the base scored again: {gain_text(r['noise'])}"
        )
    for method, r in results["methods"].items():
        j, t = r.get("judging", {}), r.get("training", {})
        lines.append(
            f"  {method}: {r.get('turns', 0)} turns, reactions {r.get('reactions', {})}, "
            f"judged {j.get('judged')} (+1 {j.get('score+1')}, -1 {j.get('score-1')}, hints {j.get('hints')}), "
            f"samples {j.get('samples')}, trained {t.get('samples_trained')}, reached v{r.get('reached_version')}"
        )
    return "\n".join(lines)


def write_outputs(results: dict, run_dir: Path) -> None:
    (run_dir / "results.json").write_text(json.dumps(results, indent=2, default=str))
    (run_dir / "table.txt").write_text(table(results) + "\n")
    plot(results, run_dir / "learning_curve.png")


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    colors = {"binary": "tab:blue", "opd": "tab:orange", "combined": "tab:green"}
    for method, r in results["methods"].items():
        pts = sorted((int(v), e["mean"], e["se"]) for v, e in r.get("versions", {}).items())
        if not pts:
            continue
        xs, ys, es = zip(*pts)
        ax.errorbar(xs, ys, yerr=es, marker="o", capsize=3, label=f"{method} (this run)", color=colors.get(method))
        paper = PAPER.get(method, {})
        if paper:
            px = [0, *sorted(paper)]
            ax.plot(px, [PAPER["base"], *(paper[s] for s in sorted(paper))], ls=":", marker="x", alpha=0.6,
                    color=colors.get(method), label=f"{method} (paper)")  # fmt: skip
    ax.set_xlabel("training steps (policy version)")
    ax.set_ylabel("personalization score")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"Personalization, {results['setting']} setting, seed {results['seed']}\n"
                 f"scorer: {results['scorer']}; judge: {results['judge']}", fontsize=9)  # fmt: skip
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
