"""`openclaw-rl bench canary`: does each new version earn its way to its user, and is a bad one kept from them?

The two-user set-up (two_users.py: a student and a manager with opposite tastes, an adapter each) with canaries on
(`eval.canary`) and a share of turns held out for progress reports (`eval.progress.held_out_share`). Each user
sends an OpenClaw-style system prompt with their USER.md; the LLM judge is a stand-in on the real wire format
(standin_judge.py) that votes on next states as the heuristic judge does and compares two answers by the taste
that USER.md states.

The bad version: once the bad user's first candidate is decided, their reactions are inverted (they react with the
other user's taste: thanks for what they dislike, corrections toward it) until `flip_steps` more of their versions
are published. The newest of those is the injected bad version. Training then pauses until that version is the
user's candidate (so a later, better version cannot replace it in the queue before it is judged) and goes on.

Afterwards the benchmark measures, with its own scorer on fresh held-out problems (the user's system prompt, the
users' sampling), every judged candidate against the incumbent it was judged against (mean score difference with
its paired s.e., and the pairwise win rate), and each progress report's comparisons (whose 95% interval should
cover the independently measured win rate). The last line of the table is the headline:
`canary: bad versions served to <n>% of turns, promoted 0; good versions promoted <k>/<m>; mismatch p99 <x>`.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx
import redis

from bench.personalization import basemodel
from bench.personalization.runner import BenchConfig, Stack, Tally, run_user, sampled_answers
from bench.personalization.standin_judge import StandinJudge
from bench.personalization.two_users import USERS, adapter_folder, adapter_versions, load_adapter
from bench.personalization.users import SimulatedUser, system_prompt
from bench.progress import Progress
from bench.stats import mean_se
from contracts.chat import tenant_of
from contracts.progress import HeldOutTurn
from evals.personalization.scorer import RuleScorer
from store import keys

WORSE = 0.35
"""The sequential test's hypotheses (eval.canary.worse): a candidate is *good* for its user when it wins at least
1 - WORSE of the measured pairs one of the two versions wins (its decisive share), *bad* when at most WORSE. In
between, the test is indifferent by design: either decision is right (a candidate as good as its incumbent is
promoted about as often as not)."""


@dataclass
class CanaryBenchConfig:
    seed: int = 0
    bad_user: str = "manager"
    flip_steps: int = 5
    """The bad user's versions trained while their reactions are inverted: the last one is the injected version."""
    decisions: int = 6
    """Decisions per user to see (the bad version's included) before the users stop."""
    steps: int = 24
    """...and each user's adapter trained at least this many steps (so later candidates are far from the first)."""
    share: float = 0.25
    max_turns: int = 40
    held_out_share: float = 0.15
    batch_size: int = 16
    adapter_lr: float = 3e-3
    lora_rank: int = 16
    eval_turns: int = 36
    """Each user's newest held-out turns the benchmark measures versions on."""
    eval_samples: int = 8
    max_tokens: int = 160
    temperature: float = 1.0
    canary_wait_s: float = 5.0
    recipe: basemodel.Recipe = field(default_factory=lambda: basemodel.FAST)
    model: Path | None = None
    out_dir: Path | None = None
    keep_data: bool = False
    timeout_s: float = 3600.0

    def __post_init__(self) -> None:
        if self.bad_user not in USERS:
            raise ValueError(f"--bad-user is one of {', '.join(USERS)}, got {self.bad_user!r}")
        if self.flip_steps < 1 or self.decisions < 1:
            raise ValueError("flip_steps and decisions must be at least 1")
        if not 0 < self.share <= 0.5 or not 0 < self.held_out_share <= 0.5:
            raise ValueError("share and held_out_share are shares of a user's turns in (0, 0.5]")
        if self.eval_turns < 2:
            raise ValueError(f"eval_turns must be at least 2 (differences pair turns), got {self.eval_turns}")

    def bench_config(self) -> BenchConfig:
        return BenchConfig(
            setting="student", methods=("combined",), seed=self.seed, steps=(1,), users=len(USERS),
            batch_size=self.batch_size, lr=self.adapter_lr, eval_problems=self.eval_turns,
            eval_samples=self.eval_samples, max_tokens=self.max_tokens, temperature=self.temperature,
            recipe=self.recipe, model=self.model, timeout_s=self.timeout_s,
            judge_url="http://stand-in",  # replaced by the stand-in judge's address once it listens
        )  # fmt: skip


def stack_env(cfg: CanaryBenchConfig, judge_url: str) -> dict[str, str]:
    return {
        "OPENCLAW_RL_LEARNING__JUDGE": json.dumps({"type": "llm", "url": judge_url, "timeout_s": 30}),
        "OPENCLAW_RL_TRAINING__ADAPTERS": "per_user",
        "OPENCLAW_RL_TRAINING__LORA__ENABLED": "true",
        "OPENCLAW_RL_TRAINING__LORA__RANK": str(cfg.lora_rank),
        "OPENCLAW_RL_TRAINING__LORA__ALPHA": str(2 * cfg.lora_rank),
        "OPENCLAW_RL_TRAINING__LORA__LR_SCALE": "1",
        "OPENCLAW_RL_EVAL__CANARY__ENABLED": "true",
        "OPENCLAW_RL_EVAL__CANARY__SHARE": str(cfg.share),
        "OPENCLAW_RL_EVAL__CANARY__MAX_TURNS": str(cfg.max_turns),
        "OPENCLAW_RL_EVAL__CANARY__WAIT_S": str(cfg.canary_wait_s),
        "OPENCLAW_RL_EVAL__TEMPERATURE": str(cfg.temperature),
        "OPENCLAW_RL_EVAL__PROGRESS__HELD_OUT_SHARE": str(cfg.held_out_share),
        "OPENCLAW_RL_EVAL__PROGRESS__EVERY_S": "0",  # the benchmark asks for reports itself
    }


# ---- what the stack decided ------------------------------------------------------------------------------------


async def decisions_of(temporal: str, tenant: str) -> list[dict]:
    """Every decision (`canary_decide` result, superseded ones left out) of the user's canary workflow runs, oldest
    first, with the wall time it completed: the decisions as workflow events."""
    from temporalio.client import Client

    client = await Client.connect(temporal)
    out = []
    async for wf in client.list_workflows(f"WorkflowId = 'canary/{tenant}'"):
        history = await client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
        scheduled = {}
        for event in history.events:
            if event.HasField("activity_task_scheduled_event_attributes"):
                scheduled[event.event_id] = event.activity_task_scheduled_event_attributes.activity_type.name
            if event.HasField("activity_task_completed_event_attributes"):
                done = event.activity_task_completed_event_attributes
                if scheduled.get(done.scheduled_event_id) == "canary_decide":
                    decided = json.loads(done.result.payloads[0].data)
                    out.append(decided | {"at": event.event_time.ToDatetime().timestamp()})
    return sorted((d for d in out if d["verdict"] != "superseded"), key=lambda d: d["at"])


def decisions(stack: Stack) -> dict[str, list[dict]]:
    return {u: asyncio.run(decisions_of(stack.temporal, tenant_of(u))) for u in USERS}


def candidate_version(r: redis.Redis, user: str) -> int | None:
    v = r.hget(keys.adapter_candidate(tenant_of(user)), "version")
    return int(v) if v else None


def next_version(r: redis.Redis, user: str) -> int | None:
    raw = r.get(keys.adapter_next(tenant_of(user)))
    return int(json.loads(raw)["version"]) if raw else None


def logged_arms(r: redis.Redis, user: str, version: int) -> list[str]:
    """The arm of each turn logged while `version` was the user's candidate (its user's turns then, in order)."""
    return [json.loads(raw)["arm"] for raw in r.lrange(keys.canary_turns(tenant_of(user), version), 0, -1)]


# ---- the independent measurement -------------------------------------------------------------------------------


def held_out_turns(r: redis.Redis, user: str) -> list[HeldOutTurn]:
    """The user's held-out turns as the stack keeps them (kept out of training; what their progress reports judge)."""
    raw = r.hgetall(keys.user_held_out(tenant_of(user)))
    return sorted((HeldOutTurn.model_validate_json(v) for v in raw.values()), key=lambda t: (t.at, t.turn_id))


class Measure:
    """The benchmark's own scorer on each user's held-out turns: every version to measure answers every held-out
    turn's conversation `eval_samples` times (fresh samples at the users' sampling; the same turns for every version,
    so differences pair by turn). Independent of the canary's verdicts (other turns, another judge's reading) and of
    the reports' (many samples of both versions, not one new answer against the one served)."""

    def __init__(self, stack: Stack, model: Path, cfg: CanaryBenchConfig, turns: dict[str, list[HeldOutTurn]]):
        self.stack, self.model, self.cfg = stack, model, cfg
        self.turns = {u: ts[-cfg.eval_turns :] for u, ts in turns.items()}
        self.scores: dict[tuple[str, int], list[list[float]]] = {}
        self.scorer = RuleScorer()

    def of(self, user: str, version: int) -> list[list[float]]:
        if (user, version) not in self.scores:
            lora = None
            if version:
                lora = f"bench-{user}-v{version}"
                load_adapter(self.stack, lora, adapter_folder(self.stack.data_dir, user, version))
            chats = [t.messages for t in self.turns[user]]
            got = sampled_answers(self.stack, self.model, chats, self.cfg.bench_config(), lora=lora)
            if lora is not None:
                httpx.post(f"{self.stack.engine}/unload_lora_adapter", json={"lora_name": lora}, timeout=60)
            self.scores[(user, version)] = [[self.scorer.score(user, None, a).value for a in per] for per in got]  # type: ignore[arg-type]
        return self.scores[(user, version)]

    def compare(self, user: str, new: int, old: int, served_by: int | None = None) -> dict:
        """`new` against `old` for `user` on their held-out turns (`served_by`: only those that version served):
        mean score difference, paired by turn, with its s.e.; the pairwise win rate (each answer of one against each
        answer of the other to the same turn; a tie counts a half), and the share of the decisive pairs `new` wins,
        what the canary's test is about."""
        keep = [i for i, t in enumerate(self.turns[user]) if served_by is None or t.version == str(served_by)]
        a, b = self.of(user, new), self.of(user, old)
        a, b = [a[i] for i in keep], [b[i] for i in keep]
        if not keep:
            return {"turns": 0, "difference": 0.0, "se": 0.0, "win_rate": 0.5, "decisive": 0.5, "measured": "none"}
        diffs = [mean_se(x)[0] - mean_se(y)[0] for x, y in zip(a, b)]
        d, se = mean_se(diffs)
        pairs = [(1.0 if s > t else 0.5 if s == t else 0.0) for x, y in zip(a, b) for s in x for t in y]
        wins, losses = pairs.count(1.0), pairs.count(0.0)
        decisive = wins / (wins + losses) if wins + losses else 0.5
        verdict = "good" if decisive >= 1 - WORSE else "bad" if decisive <= WORSE else "between"
        return {
            "turns": len(keep),
            "new_mean": round(mean_se([s for x in a for s in x])[0], 4),
            "old_mean": round(mean_se([s for y in b for s in y])[0], 4),
            "difference": round(d, 4),
            "se": round(se, 4),
            "win_rate": round(sum(pairs) / len(pairs), 4),
            "decisive": round(decisive, 4),
            "measured": verdict,
        }


# ---- one run ---------------------------------------------------------------------------------------------------


@dataclass
class Flip:
    """The injection's state: who reacts for the bad user now, and which versions it touched."""

    user: str
    inverted: bool = False
    from_version: int | None = None
    """The user's newest version when their reactions were inverted: later ones trained on inverted reactions."""
    pausing_since: float | None = None
    """Training was paused after `flip_steps` versions; the version that lands last is the bad one."""
    seen: int = 0
    bad_version: int | None = None
    held: bool = False
    """Training paused until the bad version is the user's candidate (no later version can replace it in line)."""
    clearing_since: float | None = None
    """Training paused before the inversion until the user's line is clear (no candidate, none waiting next, no new
    version for SETTLE_S): the inverted versions are then trained on the incumbent, and the first is judged at once
    instead of waiting behind a candidate whose rollback would drop it."""
    started_at: float | None = None
    ended_at: float | None = None
    injections: int = 0
    """Earlier bad versions dropped unjudged (each waited behind a candidate that was rolled back)."""


SETTLE_S = 12.0
"""A pause takes effect after the step in progress (and a claim already waiting may bring one more): no new version
for this long and the newest one is the bad version."""


def run(cfg: CanaryBenchConfig, models_dir: Path, data_root: Path, progress: Progress | None = None) -> dict:
    progress = progress or Progress()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_dir = cfg.out_dir or (data_root / "bench" / "canary" / f"seed{cfg.seed}-{stamp}")
    run_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    model = cfg.model or basemodel.ensure_base_model(
        basemodel.default_dir(models_dir, cfg.recipe),
        cfg.recipe,
        lambda s, n, loss: progress.update("base policy: pretraining step", s, n, f"· loss {loss:.3f}"),
    )
    results: dict = {
        "seed": cfg.seed,
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(cfg).items() if k != "recipe"},
        "base_model": {"path": str(model), **{k: basemodel.build_info(model).get(k) for k in ("digest", "parameters")}},
    }
    with StandinJudge() as judge:
        results |= run_stack(cfg, model, run_dir, judge, progress)
        results["judge_calls"] = dict(judge.counts)
    results["total_s"] = round(time.monotonic() - t0, 1)
    write_outputs(results, run_dir)
    results["run_dir"] = str(run_dir)
    return results


def run_stack(cfg: CanaryBenchConfig, model: Path, run_dir: Path, judge: StandinJudge, progress: Progress) -> dict:
    data_dir = run_dir / "data"
    bcfg = cfg.bench_config()
    bcfg.judge_url = judge.url
    stack = Stack(data_dir, model, bcfg, "combined")
    stack.env.update(stack_env(cfg, judge.url))
    progress.note(f"starting the stack (log: {stack.log_path})")
    stack.start(timeout=600)
    out: dict = {}
    try:
        r = redis.Redis.from_url(stack.redis, decode_responses=True)
        users = {u: SimulatedUser(u, u, cfg.seed) for u in USERS}
        other = {u: SimulatedUser(next(o for o in USERS if o != u), u, cfg.seed) for u in USERS}
        flip = Flip(cfg.bad_user)
        keys_ = {u: stack.cli("keys", "create", "--user", u).split()[0] for u in USERS}
        stop, tallies = threading.Event(), {u: Tally() for u in USERS}

        def reacts_as(u: str):
            return lambda: other[u] if (u == flip.user and flip.inverted) else users[u]

        threads = [
            threading.Thread(
                target=run_user, args=(users[u], stack, keys_[u], bcfg, stop, tallies[u]),
                kwargs={"system": system_prompt(u), "reacts_as": reacts_as(u)}, daemon=True,
            )
            for u in USERS
        ]  # fmt: skip
        t0 = time.monotonic()
        for th in threads:
            th.start()
        decided: dict[str, list[dict]] = {u: [] for u in USERS}
        reports_asked: set[tuple[str, int]] = set()
        try:
            last_poll = 0.0
            while True:
                if time.monotonic() - t0 > cfg.timeout_s:
                    progress.note(f"stopped after {cfg.timeout_s:.0f}s: decisions {_counts(decided)}")
                    out["timed_out"] = True
                    break
                errors = [e for t in tallies.values() for e in t.errors]
                if len(errors) > 20:
                    raise RuntimeError(f"the users' requests keep failing: {errors[:3]}")
                published = adapter_versions(stack.data_dir)
                if time.monotonic() - last_poll > 8:
                    decided, last_poll = decisions(stack), time.monotonic()
                    for u, ds in decided.items():  # a report on each promoted version, once it serves
                        for d in ds:
                            if d["verdict"] == "promoted" and (u, d["version"]) not in reports_asked:
                                reports_asked.add((u, d["version"]))
                                _ask_report(stack, keys_[u])
                _steer(flip, cfg, stack, r, published, decided, progress)
                bad_done = flip.bad_version is not None and any(
                    d["version"] >= flip.bad_version for d in decided[flip.user]
                )
                enough = min(len(ds) for ds in decided.values()) >= cfg.decisions
                enough = enough and min(published.values()) >= cfg.steps
                if bad_done and enough:
                    break
                turns = sum(t.turns for t in tallies.values())
                progress.update(
                    "decisions", min(len(ds) for ds in decided.values()), cfg.decisions,
                    "· " + " · ".join(f"{u} v{published[u]} cand {candidate_version(r, u)}" for u in USERS)
                    + f" · turns {turns}" + (" · inverted" if flip.inverted else ""),
                )  # fmt: skip
                time.sleep(2)
            stop.set()
            stack.cli("train", "pause")
        finally:
            stop.set()
            for th in threads:
                th.join(timeout=600)
        out["interaction_s"] = round(time.monotonic() - t0, 1)
        stack.settle()
        status = stack.wait_durable()
        decided = decisions(stack)
        out["flip"] = asdict(flip)
        out["training"] = {
            k: status.get(k)
            for k in ("version", "steps", "samples_trained", "samples_dropped_stale", "mismatch_p99", "mismatch_mean")
        }
        out["mismatch_p99"] = _mismatch_p99(stack)
        out["users"] = {u: {"turns": t.turns, "reactions": dict(t.reactions)} for u, t in tallies.items()}
        out["reports"] = {u: _final_report(stack, keys_[u], progress) for u in USERS}
        measure = Measure(stack, model, cfg, {u: held_out_turns(r, u) for u in USERS})
        out["candidates"] = _candidates(cfg, r, decided, tallies, flip, measure, progress)
        out["coverage"] = _coverage(out["reports"], measure)
    finally:
        try:
            stack.stop(timeout=120)
        except subprocess.TimeoutExpired:
            progress.note("the stack did not stop within 120 s after Ctrl-C; it was killed")
        if not cfg.keep_data:
            shutil.rmtree(data_dir / "checkpoints", ignore_errors=True)
            shutil.rmtree(data_dir / "adapters", ignore_errors=True)
    return out


def _counts(decided: dict[str, list[dict]]) -> dict[str, int]:
    return {u: len(ds) for u, ds in decided.items()}


def _steer(flip: Flip, cfg: CanaryBenchConfig, stack: Stack, r: redis.Redis, published: dict, decided: dict,
           progress: Progress) -> None:  # fmt: skip
    """The injection: after the bad user's first decision, pause training until their line is clear, then invert
    their reactions until `flip_steps` more versions are out, pause training, take the version that lands last as
    the bad one, and resume once it is the user's candidate (or decided)."""
    u = flip.user
    if flip.from_version is None and flip.clearing_since is None and decided[u]:
        stack.cli("train", "pause")
        flip.clearing_since, flip.seen = time.monotonic(), published[u]
        progress.note(f"{u}: training paused until their candidates are decided (then the bad version is trained)")
    elif flip.clearing_since is not None:
        if published[u] != flip.seen or candidate_version(r, u) is not None or next_version(r, u) is not None:
            flip.seen, flip.clearing_since = published[u], time.monotonic()
        elif time.monotonic() - flip.clearing_since >= SETTLE_S:
            flip.clearing_since = None
            flip.from_version, flip.inverted, flip.started_at = published[u], True, time.time()
            stack.cli("train", "resume")
            progress.note(f"{u}: reactions inverted from v{published[u]} on (the bad version is being trained)")
    elif flip.inverted and published[u] >= (flip.from_version or 0) + cfg.flip_steps:
        stack.cli("train", "pause")
        flip.inverted, flip.ended_at, flip.pausing_since, flip.seen = False, time.time(), time.monotonic(), published[u]
        progress.note(f"{u}: v{published[u]} trained on inverted reactions; training paused, reactions back to normal")
    elif flip.pausing_since is not None:
        if published[u] != flip.seen:
            flip.seen, flip.pausing_since = published[u], time.monotonic()
        elif time.monotonic() - flip.pausing_since >= SETTLE_S:
            flip.bad_version, flip.pausing_since, flip.held = published[u], None, True
            progress.note(f"{u}: v{flip.bad_version} is the injected bad version; it waits for its judgement")
    elif flip.held:
        judged = any(d["version"] >= (flip.bad_version or 0) for d in decided[u])
        if judged or candidate_version(r, u) == flip.bad_version:
            stack.cli("train", "resume")
            flip.held = False
            progress.note(f"{u}: v{flip.bad_version} is now judged; training resumed")
        elif next_version(r, u) != flip.bad_version:  # it waited behind a candidate that was rolled back: dropped
            stack.cli("train", "resume")
            progress.note(f"{u}: v{flip.bad_version} was dropped with a rolled-back candidate; injecting again")
            flip.from_version, flip.bad_version, flip.held, flip.injections = None, None, False, flip.injections + 1


def _mismatch_p99(stack: Stack) -> float | None:
    """The train-inference mismatch p99 over the run (the largest step's: what bounds every step), from the steps'
    records (records/steps.jsonl)."""
    from activities.step_log import read_steps

    values = [line.metrics.mismatch_p99 for line in read_steps(stack.data_dir / "records")]
    values = [v for v in values if v is not None]
    return max(values) if values else None


def _ask_report(stack: Stack, key: str) -> None:
    httpx.post(f"{stack.api}/v1/me/progress", headers={"Authorization": f"Bearer {key}"}, timeout=60)


def _final_report(stack: Stack, key: str, progress: Progress, timeout_s: float = 900.0) -> dict:
    """The user's progress report on the version serving them at the end, with the earlier reports' headlines."""
    headers = {"Authorization": f"Bearer {key}"}
    before = httpx.get(f"{stack.api}/v1/me/progress", headers=headers, timeout=60).json()
    seen = (before.get("latest") or {}).get("at")
    _ask_report(stack, key)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        view = httpx.get(f"{stack.api}/v1/me/progress", headers=headers, timeout=60).json()
        latest = view.get("latest") or {}
        if latest and latest.get("at") != seen:
            return view
        time.sleep(3)
    progress.note("a progress report did not come within the time: the last one stands")
    return httpx.get(f"{stack.api}/v1/me/progress", headers=headers, timeout=60).json()


def _candidates(cfg: CanaryBenchConfig, r: redis.Redis, decided: dict, tallies: dict, flip: Flip, measure: Measure,
                progress: Progress) -> list[dict]:  # fmt: skip
    """Each judged candidate: its decision and evidence, the turns it served, and what the benchmark measured."""
    out = []
    for u, ds in decided.items():
        incumbent = 0
        for d in ds:
            v = d["version"]
            arms = logged_arms(r, u, v)
            served_after = sum(
                1 for at, fp in tallies[u].served if at > d["at"] and fp == str(v) and d["verdict"] != "promoted"
            )
            progress.note(f"measuring {u} v{v} against v{incumbent}")
            entry = {
                "user": u,
                "version": v,
                "incumbent": incumbent,
                "verdict": d["verdict"],
                "reason": d["reason"],
                "evidence": d["evidence"],
                "turns_while_candidate": len(arms),
                "turns_served": arms.count("candidate"),
                "served_after_decision": served_after,
                "injected": u == flip.user and flip.bad_version is not None and v == flip.bad_version,
                "trained_inverted": u == flip.user and flip.from_version is not None and flip.bad_version is not None
                and flip.from_version < v <= flip.bad_version,
            } | measure.compare(u, v, incumbent)  # fmt: skip
            out.append(entry)
            if d["verdict"] == "promoted":
                incumbent = v
    return out


def _coverage(reports: dict, measure: Measure) -> list[dict]:
    """Each comparison of the users' final reports against the benchmark's win rate of the same two versions."""
    out = []
    for u, view in reports.items():
        latest = view.get("latest") or {}
        try:
            served = int(latest.get("served_version", ""))
        except ValueError:
            continue
        for c in latest.get("comparisons", []):
            if c["against"] == "all":
                continue
            try:
                old = int(c["version"])
            except ValueError:
                continue
            measured = measure.compare(u, served, old, served_by=old)["win_rate"]
            out.append({
                "user": u, "served": served, "against": c["against"], "version": old, "turns": c["turns"],
                "win_rate": c["win_rate"], "low": c["low"], "high": c["high"], "measured": measured,
                "covered": c["low"] <= measured <= c["high"],
            })  # fmt: skip
    return out


# ---- the table -------------------------------------------------------------------------------------------------


def headline(results: dict) -> str:
    cands = results.get("candidates") or []
    bad = [c for c in cands if c["measured"] == "bad"]  # the injected version among them only if it is bad
    good = [c for c in cands if c["measured"] == "good"]
    bad_turns = sum(c["turns_served"] for c in bad)
    bad_all = sum(c["turns_while_candidate"] for c in bad)
    share = f"{100 * bad_turns / bad_all:.0f}%" if bad_all else "n/a (none judged)"
    promoted_bad = sum(c["verdict"] == "promoted" for c in bad)
    promoted_good = sum(c["verdict"] == "promoted" for c in good)
    p99 = results.get("mismatch_p99")
    return (
        f"canary: bad versions served to {share} of turns, promoted {promoted_bad}; good versions promoted "
        f"{promoted_good}/{len(good)}; mismatch p99 {p99:.2g}"
        if p99 is not None
        else f"canary: bad versions served to {share} of turns, promoted {promoted_bad}; good versions promoted "
        f"{promoted_good}/{len(good)}; mismatch p99 n/a"
    )


def table(results: dict) -> str:
    cfg = results["config"]
    lines = [
        f"Canary versions, two users (seed {results['seed']}; share {cfg['share']}, at most {cfg['max_turns']} judged "
        f"turns; {cfg['bad_user']}'s reactions inverted for {cfg['flip_steps']} versions; measured on "
        f"each user's {cfg['eval_turns']} newest held-out turns x {cfg['eval_samples']} answers)",
    ]
    head = (
        f"{'user':<8} {'version':>7} {'vs':>4} {'decision':<12} {'W-L-even':>9} {'turns':>9} {'score diff':>11} "
        f"{'decisive':>8} {'measured':>8}  note"
    )
    lines += [head, "-" * len(head)]
    for c in results.get("candidates") or []:
        e = c["evidence"]
        note = "injected bad version" if c["injected"] else ("trained inverted" if c["trained_inverted"] else "")
        if c["served_after_decision"]:
            note += f" served {c['served_after_decision']} turns after its rollback"
        diff = f"{c['difference']:+.2f}±{c['se']:.2f}"
        lines.append(
            f"{c['user']:<8} {'v' + str(c['version']):>7} {'v' + str(c['incumbent']):>4} {c['verdict']:<12} "
            f"{e['wins']}-{e['losses']}-{e['turns'] - e['wins'] - e['losses']:>3} "
            f"{str(c['turns_served']) + '/' + str(c['turns_while_candidate']):>9} {diff:>11} "
            f"{c['decisive']:>8.2f} {c['measured']:>8}  {note}"
        )
    cov = results.get("coverage") or []
    for c in cov:
        lines.append(
            f"  report, {c['user']}: v{c['served']} vs {c['against']} (v{c['version']}) win rate {c['win_rate']:.2f} "
            f"[{c['low']:.2f}, {c['high']:.2f}] on {c['turns']} turns; measured {c['measured']:.2f}: "
            + ("covered" if c["covered"] else "NOT covered")
        )
    if cov:
        lines.append(f"  reports' intervals cover the measured win rate in {sum(c['covered'] for c in cov)}/{len(cov)}")
    t = results.get("training") or {}
    lines.append(
        f"  trained {t.get('samples_trained')} samples in {t.get('steps')} steps; turns "
        + ", ".join(f"{u} {x['turns']}" for u, x in (results.get("users") or {}).items())
        + f"; interaction {results.get('interaction_s')} s"
    )
    for c in results.get("candidates") or []:
        if c["injected"]:
            lines.append(
                f"  injected: {c['user']}'s v{c['version']} (trained on inverted reactions) measured {c['measured']} "
                f"(decisive share {c['decisive']:.2f} against v{c['incumbent']}): {c['verdict']} after "
                f"{c['turns_while_candidate']} of the user's turns, {c['turns_served']} served by it"
            )
    lines.append(headline(results))
    return "\n".join(lines)


def write_outputs(results: dict, run_dir: Path) -> None:
    (run_dir / "results.json").write_text(json.dumps(results, indent=2, default=str))
    (run_dir / "table.txt").write_text(table(results) + "\n")
