"""`openclaw-rl bench scale`: users and environments at scale, by simulation, with stand-in engines.

What it runs: `openclaw-rl up` (the one-box stack, training off: `training.auto_start = false`) with
`policy.server_urls` pointing at `--engines` stand-in engines (bench/standin_engine.py: SGLang's wire format, a
fixed `--ms-per-token` per generated token), so this box's cores measure the orchestration, not a model. Then, for
each size:
  sessions  S open sessions, one user and API key each, through the real HTTP API; about `--active` of them
            (a fraction) are active at a time: an active session sends a turn, waits for it, goes idle, and another
            becomes active; `--turns-per-session` turns each on average.
  episodes  E concurrent terminal episodes, as task groups of `--samples`, through the real workflows and the env
            pool's sandboxes (the stand-in runs `true`, then submits).
Per size: throughput, latency p50/p99 (and the added latency over the stand-in's generation time), errors, and
per-unit costs: store bytes (valkey used_memory delta) per user and per turn, Temporal history events and billable
actions (benchmarks/temporal_actions.py's counting) per turn and per step, worker RSS per open session / episode.
Last line: `scale: <S> sessions <x> turns/s p99 <y> ms, <E> episodes <z> steps/s, cost per turn flat within <k>%,
per step within <m>%, errors 0`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import httpx
import redis
import structlog
from pydantic import BaseModel

from bench.fairness import pct
from openclaw_rl.ports import free_port
from openclaw_rl.temporal_actions import actions, total
from stack.running import REPO, RunningStack, isolated_env

log = structlog.get_logger(__name__)
TERMINAL_TASKS = ["files-dedupe", "files-checksum-manifest", "debug-python-average", "files-backup-archive"]
HISTORY_SAMPLE = 200
"""Most workflow histories fetched per size (events and actions are scaled from the sample to all executions)."""


class SizeFigures(BaseModel):
    kind: str
    size: int
    units: int = 0
    seconds: float = 0.0
    latencies_ms: list[float] = []
    errors: int = 0
    store_bytes: int = 0
    executions: int = 0
    history_events: float = 0.0
    billable_actions: float = 0.0
    rss_bytes: int = 0

    @property
    def rate(self) -> float:
        return self.units / self.seconds if self.seconds else 0.0

    def per_unit(self, value: float) -> float:
        return value / self.units if self.units else 0.0


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[int]:
    try:
        out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    except OSError:
        return []
    return [int(p) for p in out.split()]


def worker_rss(stack: RunningStack) -> dict[str, int]:
    """RSS of each worker pool process (and its children) of the stack, from stack.json's pids."""
    out: dict[str, int] = {}
    for name, svc in ((stack.state() or {}).get("services") or {}).items():
        if not name.startswith("worker") or not svc.get("pid"):
            continue
        pids = [int(svc["pid"])]
        pids += _children(pids[0])
        out[name] = sum(_rss(p) for p in pids)
    return out


def used_memory(r: redis.Redis) -> int:
    return int(r.info("memory")["used_memory"])


async def history_costs(temporal: str, since: datetime) -> tuple[int, float, float]:
    """Executions started since `since`, and their history events and billable actions (sampled, scaled)."""
    from temporalio.client import Client

    client = await Client.connect(temporal)
    query = f'StartTime >= "{since.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}"'
    runs = [(w.id, w.run_id) async for w in client.list_workflows(query)]
    sample = random.Random(0).sample(runs, min(len(runs), HISTORY_SAMPLE))
    events = billed = 0
    for wid, run_id in sample:
        hist = await client.get_workflow_handle(wid, run_id=run_id).fetch_history()
        evs = hist.to_json_dict()["events"]
        events += len(evs)
        billed += total(actions(evs))
    scale = len(runs) / len(sample) if sample else 0.0
    return len(runs), events * scale, billed * scale


# ---- sessions ----
async def make_keys(stack: RunningStack, users: list[str]) -> list[str]:
    from control.api_keys import KeyStore
    from openclaw_rl.settings import load_settings
    from store.client import Store

    os.environ.update(stack.env)  # this process reads the stack's settings as its CLI would
    settings = load_settings()
    db = Store.from_settings(settings)
    store = KeyStore(db.api_keys, settings.api_key_pepper.get_secret_value())
    return [(await store.create(u))[1] for u in users]


async def run_sessions(stack: RunningStack, args: argparse.Namespace, size: int, r: redis.Redis) -> SizeFigures:
    fig = SizeFigures(kind="sessions", size=size)
    tag = f"s{size}-{os.urandom(3).hex()}"
    users = [f"scale-{tag}-{i}" for i in range(size)]
    mem0, rss0 = used_memory(r), sum(worker_rss(stack).values())
    since = datetime.now(timezone.utc)
    keys = await make_keys(stack, users)
    active = max(1, round(size * args.active))
    # Every session speaks once (all S are open), then turns go to sessions drawn at random.
    turns = round(size * args.turns_per_session)
    rng = random.Random(size)
    order = list(range(size)) + [rng.randrange(size) for _ in range(max(0, turns - size))]
    busy: set[int] = set()
    queue: asyncio.Queue[int] = asyncio.Queue()
    for s in order:
        queue.put_nowait(s)

    async def one(http: httpx.AsyncClient, s: int) -> None:
        body = {"model": "policy", "messages": [{"role": "user", "content": f"Hello from session {s}."}],
                "max_tokens": args.max_tokens}  # fmt: skip
        t = time.perf_counter()
        try:
            headers = {"Authorization": f"Bearer {keys[s]}", "X-Session-Id": f"{users[s]}-c"}
            resp = await http.post(f"{stack.api}/v1/chat/completions", json=body, headers=headers)
            ok = resp.status_code == 200
        except httpx.HTTPError:
            ok = False
        if ok:
            fig.latencies_ms.append((time.perf_counter() - t) * 1000)
            fig.units += 1
        else:
            fig.errors += 1

    async def actor(http: httpx.AsyncClient) -> None:
        while not queue.empty():
            s = queue.get_nowait()
            if s in busy:  # a session has one turn at a time: take another
                queue.put_nowait(s)
                await asyncio.sleep(0)
                continue
            busy.add(s)
            await one(http, s)
            busy.discard(s)

    t0 = time.monotonic()
    limits = httpx.Limits(max_connections=active + 8, max_keepalive_connections=active + 8)
    async with httpx.AsyncClient(timeout=600, limits=limits) as http:
        await asyncio.gather(*(actor(http) for _ in range(active)))
    fig.seconds = time.monotonic() - t0
    fig.rss_bytes = sum(worker_rss(stack).values()) - rss0  # while all S sessions are still open
    fig.store_bytes = used_memory(r) - mem0
    fig.executions, fig.history_events, fig.billable_actions = await history_costs(stack.temporal, since)
    return fig


# ---- episodes ----
async def run_episodes(stack: RunningStack, args: argparse.Namespace, size: int, r: redis.Redis) -> SizeFigures:
    from control.episodes import episode_config, start_task_group
    from openclaw_rl.settings import load_settings
    from openclaw_rl.temporal_client import connect

    os.environ.update(stack.env)
    settings = load_settings()
    client = await connect(settings.temporal, keyring=settings.keyring())
    config = episode_config(settings, "terminal", max_steps=args.max_steps)
    fig = SizeFigures(kind="episodes", size=size)
    mem0, rss0 = used_memory(r), sum(worker_rss(stack).values())
    since = datetime.now(timezone.utc)
    groups = max(1, size // args.samples)
    t0 = time.monotonic()
    handles = [
        await start_task_group(
            client,
            settings,
            "terminal",
            TERMINAL_TASKS[g % len(TERMINAL_TASKS)],
            samples=min(args.samples, size),
            config=config,
            publish=False,
        )  # fmt: skip
        for g in range(groups)
    ]
    peak = 0

    async def sample_rss() -> None:
        nonlocal peak
        while True:
            peak = max(peak, sum(worker_rss(stack).values()) - rss0)
            await asyncio.sleep(0.5)

    sampler = asyncio.create_task(sample_rss())
    try:
        results = await asyncio.gather(*(h.result() for h in handles), return_exceptions=True)
    finally:
        sampler.cancel()
    fig.seconds = time.monotonic() - t0
    for res in results:
        if isinstance(res, BaseException):
            fig.errors += min(args.samples, size)
            continue
        fig.errors += res.failed
        fig.units += res.published + res.dropped_steps
    fig.latencies_ms = [fig.seconds * 1000]
    fig.rss_bytes = peak
    fig.store_bytes = used_memory(r) - mem0
    fig.executions, fig.history_events, fig.billable_actions = await history_costs(stack.temporal, since)
    return fig


# ---- the stack ----
def start_engines(args: argparse.Namespace, tokenizer: Path, logs: Path) -> tuple[list[subprocess.Popen], list[str]]:
    procs, urls = [], []
    for i in range(args.engines):
        port = free_port()
        cmd = [sys.executable, "-m", "bench.standin_engine", "--port", str(port),
               "--ms-per-token", str(args.ms_per_token), "--tokenizer", str(tokenizer)]  # fmt: skip
        with open(logs / f"standin-{i}.log", "wb") as out:
            procs.append(subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT))
        urls.append(f"http://127.0.0.1:{port}")
    for url in urls:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the stand-in engine at {url} did not answer")
            time.sleep(0.2)
    return procs, urls


def stack_env(data_dir: Path, model: Path, urls: list[str], args: argparse.Namespace) -> dict[str, str]:
    env = isolated_env(data_dir, model)
    env.update(
        OPENCLAW_RL_POLICY__SERVER_URLS=json.dumps(urls),
        OPENCLAW_RL_LEARNING__JUDGE='{"type": "heuristic"}',  # judging measured, not a judge model
        OPENCLAW_RL_TRAINING__AUTO_START="false",  # training off: the orchestration of turns and steps only
        OPENCLAW_RL_SESSION__DEFAULT_MAX_TOKENS=str(args.max_tokens),
    )
    return env


def report(fig: SizeFigures, gen_ms: float) -> str:
    lat = fig.latencies_ms
    p50, p99 = pct(lat, 0.5), pct(lat, 0.99)
    unit = "turn" if fig.kind == "sessions" else "step"
    per = "session" if fig.kind == "sessions" else "episode"
    head = (
        f"{fig.kind:8s} {fig.size:5d}: {fig.units} {unit}s in {fig.seconds:.1f} s = {fig.rate:.2f} {unit}s/s"
        + (
            f", p50 {p50:.0f} ms p99 {p99:.0f} ms (added over generation: p50 {p50 - gen_ms:.0f} ms)"
            if fig.kind == "sessions"
            else f", all episodes done in {fig.seconds:.1f} s"
        )  # fmt: skip
        + f", errors {fig.errors}"
    )
    cost = (
        f"   store {fig.store_bytes / max(fig.size, 1):.0f} B/{'user' if fig.kind == 'sessions' else 'episode'}, "
        f"{fig.per_unit(fig.store_bytes):.0f} B/{unit}; Temporal {fig.executions} executions, "
        f"{fig.per_unit(fig.history_events):.1f} events/{unit}, {fig.per_unit(fig.billable_actions):.2f} "
        f"actions/{unit}; worker RSS {fig.rss_bytes / max(fig.size, 1) / 1024:.0f} KiB/{per}"
    )
    return head + "\n" + cost


def spread(figs: list[SizeFigures]) -> float:
    """How far the per-unit billable actions and history events move across sizes, in % of the smallest."""
    worst = 0.0
    for value in (lambda f: f.per_unit(f.billable_actions), lambda f: f.per_unit(f.history_events)):
        vals = [value(f) for f in figs if f.units]
        if len(vals) > 1 and min(vals) > 0:
            worst = max(worst, (max(vals) - min(vals)) / min(vals) * 100)
    return worst


async def main(args: argparse.Namespace) -> int:
    from engine.tiny_qwen3 import ensure_tiny_model

    root = Path(args.data_dir or tempfile.mkdtemp(prefix="scale-"))
    root.mkdir(parents=True, exist_ok=True)
    model = ensure_tiny_model(root / "models" / "tiny-qwen3")  # the tokenizer (and the trainer's model, unused)
    procs, urls = start_engines(args, model, root)
    stack = RunningStack(stack_env(root / "data", model, urls, args))
    sessions: list[SizeFigures] = []
    episodes: list[SizeFigures] = []
    gen_ms = (len(_answer_tokens(model)) + 1) * args.ms_per_token
    try:
        stack.start()
        r = redis.Redis.from_url(stack.redis)
        print(f"stack up: {args.engines} stand-in engines at {args.ms_per_token:g} ms/token "
              f"(a chat answer: {gen_ms:.0f} ms); training off", flush=True)  # fmt: skip
        for size in [int(s) for s in args.sessions.split(",") if s]:
            sessions.append(await run_sessions(stack, args, size, r))
            print(report(sessions[-1], gen_ms), flush=True)
        for size in [int(s) for s in args.episodes.split(",") if s]:
            episodes.append(await run_episodes(stack, args, size, r))
            print(report(episodes[-1], gen_ms), flush=True)
    finally:
        stack.stop()
        for p in procs:
            p.terminate()
            p.wait(timeout=10)
    errors = sum(f.errors for f in sessions + episodes)
    s, e = (sessions or [SizeFigures(kind="sessions", size=0)])[-1], (episodes or [SizeFigures(kind="e", size=0)])[-1]
    print(f"scale: {s.size} sessions {s.rate:.2f} turns/s p99 {pct(s.latencies_ms, 0.99):.0f} ms, {e.size} "
          f"episodes {e.rate:.2f} steps/s, cost per turn flat within {spread(sessions):.0f}%, per step within "
          f"{spread(episodes):.0f}%, errors {errors}")  # fmt: skip
    return 0 if errors == 0 else 1


def _answer_tokens(model: Path) -> list[int]:
    from tokenizers import Tokenizer

    from bench.standin_engine import CHAT_ANSWER

    return Tokenizer.from_file(str(model / "tokenizer.json")).encode(CHAT_ANSWER, add_special_tokens=False).ids


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("scale", help="open sessions and concurrent episodes at scale, with stand-in engines",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--sessions", default="100,1000", help="comma-separated open-session counts")
    p.add_argument("--active", type=float, default=0.1, help="fraction of the sessions active at a time")
    p.add_argument("--turns-per-session", type=float, default=2.0, help="turns per open session, on average (>= 1)")
    p.add_argument("--episodes", default="16,128", help="comma-separated concurrent-episode counts")
    p.add_argument("--samples", type=int, default=8, help="episodes per task group")
    p.add_argument("--max-steps", type=int, default=4, help="most steps per episode (the stand-in submits at 2)")
    p.add_argument("--engines", type=int, default=2, help="stand-in engines behind policy.server_urls")
    p.add_argument("--ms-per-token", type=float, default=20.0, help="the stand-in's time per generated token")
    p.add_argument("--max-tokens", type=int, default=32, help="most tokens a chat answer may have")
    p.add_argument("--data-dir", default="", help="where the stack keeps its data (default: a new /tmp/scale-*)")


def bench_command(args: argparse.Namespace, settings=None) -> int:
    return asyncio.run(main(args))
