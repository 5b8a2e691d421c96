"""`openclaw-rl bench hosts --scale`: what adding a host adds, from the several-hosts harness (stack.hosts).

The policy hosts run stand-ins for remote GPU servers (bench/standin_engine.py: SGLang's wire format, a fixed time
per token, `--max-running` requests at a time as a GPU's batch allows, a prefix cache), and the stand-in's terminal
episodes run a command that takes time, not CPU (`sleep 6`, as a test suite or a build would), with
`envs.envs_per_worker` environments per env worker. A pool's capacity is then set by its hosts, not by this
machine's 2 cores, and the figures measure the orchestration: does a second host double what the pool does?

Measured windows, each with only its own load, one after another on one deployment (training off):
  one-box  one session's turns in turn on the one-box stack (`up`, the same stand-in), then
  hosts    the same on the hosts: the cost of the network hops per chat turn, p50 against p50.
  chat 1   policy-2 stopped (engine and policy worker; the router withdraws its engine): `sessions` conversations
           talk without pause for `seconds`; turns/s, p50, and the prefix-cache hits of each engine.
  chat 2   policy-2 back and routed: the same.
  env 1    env-2 stopped: `groups` task groups of `samples` terminal episodes at a time for `seconds`; env steps/s.
  env 2    env-2 back: the same.
Each window also says how busy the machine's cores were: a window near 100% is capped by the machine, not the
design. Last line: `hosts scale: chat <a> -> <b> turns/s (<x>x), env <c> -> <d> steps/s (<y>x), hop +<h> ms p50,
cache hits <p>% -> <q>%, errors <n>`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

from bench.fairness import pct
from bench.hosts import HostsBench, Load
from bench.standin_engine import StandinConfig, StandinServer
from openclaw_rl.ports import free_port
from stack.hosts import ENGINE_PORT, Deployment, Knobs, hosts_problem
from stack.running import REPO, RunningStack, isolated_env


@dataclass
class ScaleLoad:
    seconds: float = 45.0
    """Each chat and env window."""
    sessions: int = 16
    ms_per_token: float = 60.0
    max_running: int = 2
    """Requests each stand-in generates at once: with `ms_per_token`, one policy host's capacity."""
    step_command: str = "sleep 6"
    """Long beside an episode's generations (two, about 2 s together): the env hosts, not the stand-ins' batch
    slots, bound the env windows."""
    envs_per_worker: int = 4
    """Environments each env worker holds at once: one env host's capacity."""
    groups: int = 4
    """Task groups under way at once: with `samples`, twice what two env hosts hold, so no host waits for work
    while a group waits for its last episode."""
    samples: int = 4
    max_steps: int = 3
    hop_turns: int = 30
    tokens: int = 16


@dataclass
class Window:
    name: str
    hosts: int
    seconds: float = 0.0
    units: int = 0
    unit: str = "turns"
    latencies: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    cpu_busy: float | None = None
    """The machine's cores, busy over the window (not measured for the one-conversation windows)."""
    cache: dict[str, list[int]] = field(default_factory=dict)
    """Per engine: [prompt tokens, cached tokens] over the window."""

    @property
    def rate(self) -> float:
        return self.units / self.seconds if self.seconds else 0.0

    @property
    def p50_ms(self) -> float:
        return pct(self.latencies, 0.5) * 1000 if self.latencies else 0.0

    @property
    def cache_share(self) -> float | None:
        prompt = sum(p for p, _ in self.cache.values())
        return sum(c for _, c in self.cache.values()) / prompt if prompt else None

    def line(self) -> str:
        share = self.cache_share
        per_engine = ", ".join(f"{e} {c / p:.0%} of {p}" for e, (p, c) in self.cache.items() if p)
        cache = f"{share:.0%} ({per_engine})" if share is not None else "-"
        busy = "-" if self.cpu_busy is None else f"{self.cpu_busy:.0%}"
        return (
            f"{self.name:<8}{self.hosts:>6}{self.seconds:>9.1f}{self.units:>7} {self.unit:<6}{self.rate:>8.2f}/s"
            f"{self.p50_ms:>9.0f}{sum(self.errors.values()):>8}{busy:>9}   {cache}"
        )


def cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine (/proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def _busy_since(mark: tuple[int, int]) -> float:
    busy, total = cpu_ticks()
    return (busy - mark[0]) / max(1, total - mark[1])


async def sequential_turns(api_url: str, key: str, turns: int, tokens: int) -> tuple[list[float], Counter]:
    """One conversation, a turn at a time: each turn's seconds (the first three warm up and are not counted)."""
    took, errors = [], Counter()
    history = [{"role": "system", "content": "You are a helpful personal agent."}]
    sid = f"hop-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient(timeout=120, headers={"Authorization": f"Bearer {key}"}) as http:
        for turn in range(turns + 3):
            history.append({"role": "user", "content": f"Question {turn}: what next?"})
            body = {"model": "policy", "messages": history, "max_tokens": tokens, "temperature": 1.0}
            t = time.perf_counter()
            r = await http.post(f"{api_url}/v1/chat/completions", json=body, headers={"X-Session-Id": sid})
            if r.status_code != 200:
                errors[str(r.status_code)] += 1
                history.pop()
                continue
            if turn >= 3:
                took.append(time.perf_counter() - t)
            history.append({"role": "assistant", "content": r.json()["choices"][0]["message"].get("content") or ""})
    return took, errors


def one_box_hop(root: Path, model: Path, load: ScaleLoad) -> Window:
    """The one-box stack (`up`) in front of the same stand-in: one conversation's turns in turn."""
    config = StandinConfig(tokenizer_path=model, ms_per_token=load.ms_per_token, max_running=load.max_running)
    with StandinServer(config, free_port()) as standin:
        env = isolated_env(root / "one-box" / "data", model)
        env.update(
            OPENCLAW_RL_POLICY__SERVER_URLS=json.dumps([standin.url]),
            OPENCLAW_RL_LEARNING__JUDGE='{"type": "heuristic"}',
            OPENCLAW_RL_TRAINING__AUTO_START="false",
        )
        with RunningStack(env) as stack:  # __enter__ starts it
            out = subprocess.run(
                [sys.executable, "-m", "cli", "keys", "create", "--user", "bench-hop"],
                env=env, cwd=REPO, capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            if out.returncode != 0:
                raise RuntimeError(f"keys create on the one-box stack failed: {out.stderr[-800:]}")
            t = time.monotonic()
            took, errors = asyncio.run(sequential_turns(stack.api, out.stdout.split()[0], load.hop_turns, load.tokens))
    return Window("one-box", 1, time.monotonic() - t, len(took), "turns", took, dict(errors))


class ScaleBench:
    def __init__(self, deployment: Deployment, load: ScaleLoad):
        self.d, self.load = deployment, load
        self.windows: list[Window] = []
        self.hosts = HostsBench(
            deployment,
            Load(
                sessions=load.sessions, turns_per_session=None, minutes=load.seconds / 60, tokens=load.tokens, groups=0,
                samples=load.samples, max_steps=load.max_steps, timeout_s=3600,
            ),
        )  # fmt: skip

    async def cache_counts(self) -> dict[str, list[int]]:
        """Each running stand-in's prompt and cached tokens so far (its /metrics)."""
        counts: dict[str, list[int]] = {}
        async with httpx.AsyncClient(timeout=5) as http:
            for name in ("policy-1", "policy-2"):
                if name in self.d.down:
                    continue
                text = (await http.get(f"http://{self.d.ip(name)}:{ENGINE_PORT}/metrics")).text
                values = dict(line.split() for line in text.splitlines() if line and not line.startswith("#"))
                counts[name] = [int(values["sglang:prompt_tokens_total"]), int(values["sglang:cached_tokens_total"])]
        return counts

    def _open_window(self) -> None:
        fig = self.hosts.fig
        fig.answered.clear()
        fig.chat_errors.clear()
        fig.env_steps = 0
        self.hosts.deadline = time.monotonic() + self.load.seconds + 900
        self.hosts.load_until = time.monotonic() + self.load.seconds

    async def chat_window(self, hosts: int) -> Window:
        self._open_window()
        before, mark, t = await self.cache_counts(), cpu_ticks(), time.monotonic()
        await self.hosts.chat()
        w = Window(f"chat {hosts}", hosts, time.monotonic() - t, cpu_busy=_busy_since(mark))
        after = await self.cache_counts()
        w.cache = {e: [after[e][0] - before.get(e, [0, 0])[0], after[e][1] - before.get(e, [0, 0])[1]] for e in after}
        # Turns asked and answered within the window: the sessions stop asking at its end.
        w.latencies = [took for _, took in self.hosts.fig.answered]
        w.units, w.errors = len(w.latencies), {str(k): n for k, n in self.hosts.fig.chat_errors.items()}
        return w

    async def env_window(self, hosts: int) -> Window:
        self._open_window()
        failures0, mark, t = self.hosts.fig.group_failures, cpu_ticks(), time.monotonic()
        # `groups` rollouts side by side, each starting its next task group as the last one ends, until the window
        # closes; the groups under way then finish, and count.
        await asyncio.gather(*(self.hosts.rollout() for _ in range(self.load.groups)))
        w = Window(f"env {hosts}", hosts, time.monotonic() - t, self.hosts.fig.env_steps, "steps")
        w.cpu_busy = _busy_since(mark)
        if failed := self.hosts.fig.group_failures - failures0:
            w.errors = {"episodes failed": failed}
        return w

    async def run(self) -> list[Window]:
        self.hosts.create_key()
        t = time.monotonic()
        took, errors = await sequential_turns(self.d.api_url, self.hosts.key, self.load.hop_turns, self.load.tokens)
        self.windows.append(
            Window("hosts", len(self.d.hosts), time.monotonic() - t, len(took), "turns", took, dict(errors))
        )
        await self.d.stop_host("policy-2")
        await self.d.wait_routed(timeout_s=120)
        self.windows.append(await self.chat_window(1))
        await self.d.restart_host("policy-2")
        await self.d.wait_routed(timeout_s=300)
        self.windows.append(await self.chat_window(2))
        await self.d.stop_host("env-2")
        self.windows.append(await self.env_window(1))
        await self.d.restart_host("env-2")
        self.windows.append(await self.env_window(2))
        return self.windows


def knobs_for(load: ScaleLoad) -> Knobs:
    standin = [sys.executable, "-m", "bench.standin_engine", "--ms-per-token", str(load.ms_per_token)]
    standin += ["--max-running", str(load.max_running), "--command", load.step_command]
    return Knobs(
        policy_server=standin,
        train=False,
        extra_env={
            "OPENCLAW_RL_ENVS__ENVS_PER_WORKER": str(load.envs_per_worker),
            # The stand-ins batch `max_running` requests, not SGLang's usual dozens: the router balances by load
            # once one engine leads by that much (its default, 64, would keep every session on the first engine).
            "OPENCLAW_RL_ROUTER__BALANCE_ABS_THRESHOLD": str(load.max_running),
        },
    )


async def run_scale(root: Path, load: ScaleLoad, model: Path) -> list[Window]:
    deployment = Deployment(root, knobs_for(load))
    try:
        await deployment.start(model)
        return await ScaleBench(deployment, load).run()
    finally:
        await deployment.close()


def ratio(after: Window, before: Window) -> float:
    return after.rate / before.rate if before.rate else 0.0


def report(windows: list[Window], load: ScaleLoad) -> str:
    w = {x.name: x for x in windows}
    lines = [
        f"stand-in engines: {load.ms_per_token:g} ms per token, {load.max_running} requests at a time each; env steps "
        f"run `{load.step_command}`, {load.envs_per_worker} environments per env worker; {load.seconds:g} s windows",
        f"{'window':<8}{'hosts':>6}{'seconds':>9}{'units':>7} {'':<6}{'rate':>10}{'p50 ms':>9}{'errors':>8}"
        f"{'cpu busy':>9}   prefix-cache hits",
        *(x.line() for x in windows),
    ]
    chat, env = ratio(w["chat 2"], w["chat 1"]), ratio(w["env 2"], w["env 1"])
    hop = w["hosts"].p50_ms - w["one-box"].p50_ms
    for name in ("chat 2", "env 2"):
        if (w[name].cpu_busy or 0.0) >= 0.9:
            lines.append(f"{name}: the cores were {w[name].cpu_busy:.0%} busy: this machine, not the design, caps it")
    errors = sum(sum(x.errors.values()) for x in windows)
    hits = [w[n].cache_share or 0.0 for n in ("chat 1", "chat 2")]
    lines.append(
        f"hosts scale: chat {w['chat 1'].rate:.2f} -> {w['chat 2'].rate:.2f} turns/s ({chat:.2f}x), env "
        f"{w['env 1'].rate:.2f} -> {w['env 2'].rate:.2f} steps/s ({env:.2f}x), hop {hop:+.0f} ms p50, cache hits "
        f"{hits[0]:.0%} -> {hits[1]:.0%}, errors {errors}"
    )
    return "\n".join(lines)


def scale_command(root: Path, load: ScaleLoad, json_out: Path | None) -> str:
    from engine.tiny_qwen3 import ensure_tiny_model

    model = ensure_tiny_model(root / "image" / "tiny-qwen3")
    one_box = one_box_hop(root, model, load)
    windows = [one_box, *asyncio.run(run_scale(root / "hosts", load, model))]
    if json_out is not None:
        json_out.write_text(json.dumps({"load": asdict(load), "windows": [asdict(x) for x in windows]}, indent=1))
    return report(windows, load)


def bench_command(args: argparse.Namespace, settings) -> int:
    """`bench hosts --scale` (its options are `bench hosts`' own: bench/hosts.py)."""
    from openclaw_rl import console

    if why := hosts_problem():
        console.error(None, f"bench hosts: {why}")
        return 2
    root = args.root or Path(tempfile.mkdtemp(prefix="openclaw-rl-hosts-", dir="/var/tmp"))
    try:
        print(scale_command(root, ScaleLoad(seconds=args.seconds, sessions=args.sessions), args.json), flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0
