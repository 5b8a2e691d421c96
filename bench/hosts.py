"""`openclaw-rl bench hosts`: the deployment as several hosts on one machine (stack.hosts), under load.

Chat sessions talk to the API host while task groups run on the two env hosts; the trainer host trains versions
from both streams and broadcasts each to the two engines over the network (gloo). At the end every sample published
is accounted for (trained, or still waiting in its stream) from the hosts' own records, and the last line says so:
`hosts: <turns> turns, <steps> env steps, <versions> versions on 2 engines, lost 0, duplicated 0, 5xx 0`.
`--failures` kills and cuts hosts under that load; `--scale` (bench/hosts_scale.py, dispatched by bench/cli.py)
measures what a second host adds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from stack.hosts import Deployment, Knobs, hosts_problem

SESSION_TURNS = 24
"""Turns in one conversation before a session starts another (the policy's context is 4096 tokens in the bench)."""
TERMINAL_TASKS = ["files-dedupe", "files-checksum-manifest", "debug-python-average", "files-backup-archive"]


@dataclass
class Load:
    """How much to ask of the hosts."""

    sessions: int = 16
    turns_per_session: int | None = 4
    """None: keep talking until `minutes` have passed."""
    minutes: float | None = None
    tokens: int = 16
    groups: int = 1
    """Task groups (terminal tasks, in turn); with `minutes`, groups keep starting until then."""
    samples: int = 2
    max_steps: int = 3
    versions: int = 2
    """Versions that must be trained and served on both engines before the run ends."""
    timeout_s: float = 900.0
    failures: list[str] = field(default_factory=list)
    """Phases, in turn, under the load (PHASES): the load runs until the last is over."""
    env_lost_after_s: float = 15.0
    """How long an episode waits on a silent env worker before it starts over on another (EpisodeConfig)."""
    cut_s: float = 30.0
    cut_host: str = "policy-1"
    resume_wait_s: float = 300.0
    """After a cut of the trainer: how long to wait for its next durable version (none is a finding, not a halt)."""
    """The host whose link the cut phase takes down (policy-1 or the trainer)."""
    down_s: float = 20.0
    """How long a killed host stays dead at least (the env host: until an episode has finished without it)."""


PHASES = {
    "env": "kill every process of env-1 (its episodes start over on env-2), then restart it",
    "engine": "kill policy-1 (engine + policy worker: sessions move to policy-2 through the router), then restart it",
    "trainer": "kill the trainer host (training resumes from its durable checkpoint when it returns)",
    "cut": "cut policy-1's link (or the trainer's) for 30 s (bridge-side veth down), then mend it",
}


@dataclass
class Phase:
    name: str
    start: float = 0.0
    fault: float = 0.0
    back: float = 0.0
    end: float = 0.0
    turns: int = 0
    p50_ms: float = 0.0
    errors: Counter = field(default_factory=Counter)
    recovery_s: float | None = None
    """Seconds from the fault until the work it hit went on (per phase: see `notes`)."""
    longest_gap_s: float = 0.0
    """The longest time without a chat turn answered, within the phase."""
    notes: dict = field(default_factory=dict)

    def line(self) -> str:
        rec = "n/a" if self.recovery_s is None else f"{self.recovery_s:.1f} s"
        notes = ", ".join(f"{k} {v}" for k, v in self.notes.items())
        return (
            f"phase {self.name}: {self.end - self.start:.0f} s, {self.turns} turns, p50 {self.p50_ms:.0f} ms, "
            f"errors {dict(self.errors) or 0}, recovery {rec}, longest chat gap {self.longest_gap_s:.1f} s; {notes}"
        )


@dataclass
class Figures:
    turns: int = 0
    chat_errors: Counter = field(default_factory=Counter)
    """By HTTP status (5xx and others); 0 transport errors expected."""
    latencies: list[float] = field(default_factory=list)
    env_steps: int = 0
    groups: int = 0
    group_failures: int = 0
    versions: int = 0
    engine_versions: dict[str, str] = field(default_factory=dict)
    published: int = 0
    trained: int = 0
    waiting: int = 0
    missing: int = 0
    stale_alone: int = 0
    """Dropped as too stale in batches that made no version (their `"dropped": true` lines of trained.jsonl)."""
    lost: int = 0
    duplicated: int = 0
    seconds: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)
    disk: dict[str, int] = field(default_factory=dict)
    answered: list[tuple[float, float]] = field(default_factory=list)
    """(when, seconds) of each turn answered."""
    failed: list[tuple[float, object, str]] = field(default_factory=list)
    """(when, status or exception name, reason) of each turn that failed."""
    phases: list[Phase] = field(default_factory=list)

    @property
    def status_5xx(self) -> int:
        return sum(n for code, n in self.chat_errors.items() if isinstance(code, int) and code >= 500)

    def last_line(self) -> str:
        return (
            f"hosts: {self.turns} turns, {self.env_steps} env steps, {self.versions} versions on "
            f"{len(self.engine_versions)} engines, lost {self.lost}, duplicated {self.duplicated}, "
            f"5xx {self.status_5xx}"
        )


class HostsBench:
    def __init__(self, deployment: Deployment, load: Load):
        self.d, self.load = deployment, load
        self.fig = Figures()
        self.key = ""
        self.deadline = 0.0
        self.load_until = 0.0
        self.phases_done = asyncio.Event()
        self.groups_done: list[float] = []

    # ---- chat ----
    def create_key(self) -> str:
        api = self.d.hosts["api"]
        out = api.run([*_cli(), "keys", "create", "--user", "bench-hosts"], timeout=180)
        if out.returncode != 0:
            raise RuntimeError(f"keys create on the API host failed: {out.stdout[-500:]}{out.stderr[-800:]}")
        self.key = out.stdout.split()[0]
        return self.key

    async def chat(self) -> None:
        async with httpx.AsyncClient(timeout=600, headers={"Authorization": f"Bearer {self.key}"}) as http:
            await asyncio.gather(*(self._session(http, s) for s in range(self.load.sessions)))

    async def _session(self, http: httpx.AsyncClient, s: int) -> None:
        sid = f"hosts-{uuid.uuid4().hex[:8]}-{s}"
        history: list[dict] = [{"role": "system", "content": "You are a helpful personal agent."}]
        turn = 0
        while self._more_turns(turn):
            if turn and turn % SESSION_TURNS == 0:  # a long run: a fresh conversation before the context is full
                sid = f"hosts-{uuid.uuid4().hex[:8]}-{s}"
                history = history[:1]
            # The reply to the previous answer judges it (the heuristic judge reads explicit feedback): +1 or -1.
            verdict = ("Thanks, that is great. " if (s + turn) % 2 else "That's wrong, try again. ") if turn else ""
            history.append({"role": "user", "content": f"{verdict}Session {s}, question {turn}: what next?"})
            body = {"model": "policy", "messages": history, "max_tokens": self.load.tokens, "temperature": 1.0}
            t = time.perf_counter()
            try:
                r = await http.post(f"{self.d.api_url}/v1/chat/completions", json=body, headers={"X-Session-Id": sid})
            except httpx.HTTPError as exc:
                self.fig.chat_errors[type(exc).__name__] += 1
                self.fig.failed.append((time.monotonic(), type(exc).__name__, str(exc)[:200]))
                history.pop()
                await asyncio.sleep(1)
                continue
            if r.status_code != 200:
                self.fig.chat_errors[r.status_code] += 1
                self.fig.failed.append((time.monotonic(), r.status_code, r.text[:200]))
                history.pop()
                await asyncio.sleep(1)
                continue
            self.fig.latencies.append(time.perf_counter() - t)
            self.fig.answered.append((time.monotonic(), time.perf_counter() - t))
            self.fig.turns += 1
            history.append({"role": "assistant", "content": r.json()["choices"][0]["message"].get("content") or ""})
            turn += 1

    def _more_turns(self, turn: int) -> bool:
        if time.monotonic() > self.deadline:
            return False
        if self.load.failures:
            return not self.phases_done.is_set()
        if self.load.turns_per_session is not None:
            return turn < self.load.turns_per_session
        return time.monotonic() < self.load_until

    # ---- task groups ----
    async def rollout(self) -> None:
        from control.episodes import episode_config, start_task_group
        from openclaw_rl.temporal_client import connect

        settings = self.d.hosts["workflow"].settings()
        client = await connect(settings.temporal, keyring=settings.keyring())
        config = episode_config(settings, "terminal").model_copy(
            update={"max_steps": self.load.max_steps, "env_lost_after_s": self.load.env_lost_after_s}
        )
        i = 0
        while (
            i < self.load.groups
            or (self.load.minutes and time.monotonic() < self.load_until)
            or (self.load.failures and not self.phases_done.is_set())
        ):
            task = TERMINAL_TASKS[i % len(TERMINAL_TASKS)]
            handle = await start_task_group(
                client, settings, "terminal", task, samples=self.load.samples, config=config
            )
            result = await handle.result()
            self.fig.groups += 1
            self.fig.group_failures += result.failed
            self.fig.env_steps += result.published + result.dropped_steps
            self.groups_done.append(time.monotonic())
            i += 1

    # ---- failures ----
    def _log_count(self, host: str, service: str, text: str) -> int:
        try:
            return (self.d.hosts[host].logs_dir / f"{service}.log").read_text(errors="replace").count(text)
        except FileNotFoundError:
            return 0

    def _answered_since(self, fault: float) -> float | None:
        """When the first turn asked after `fault` was answered (None: none yet): new turns go through again."""
        return min((t for t, took in self.fig.answered if t - took > fault), default=None)

    def _reopened(self, host: str) -> int:
        """Environments opened on `host` by an episode's second or later attempt (its attempt key ends :a<N>)."""
        try:
            text = (self.d.hosts[host].logs_dir / "worker-env.log").read_text(errors="replace")
        except FileNotFoundError:
            return 0
        return len(re.findall(r"environment opened\s+attempt_key=\S+:a(?:[2-9]|\d\d)\b", text))

    def _durable_version(self) -> int:
        return max((line["version"] for line in self.trained_lines() if line.get("durable")), default=0)

    async def _until(self, done, timeout_s: float, step_s: float = 0.5) -> float | None:
        """Seconds until `done()` is true, or None after `timeout_s`."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout_s and time.monotonic() < self.deadline:
            if done():
                return time.monotonic() - t0
            await asyncio.sleep(step_s)
        return None

    async def failures(self) -> None:
        """The phases, in turn, under the load; the load stops when the last is over."""
        try:
            # A baseline first: turns answered and an episode under way.
            await self._until(lambda: len(self.fig.answered) >= self.load.sessions, 120)
            for name in self.load.failures:
                phase = Phase(name, start=time.monotonic())
                self.fig.phases.append(phase)
                await getattr(self, f"_phase_{name}")(phase)
                await asyncio.sleep(5)  # a little of the load after each phase's recovery
                phase.end = time.monotonic()
                self._phase_figures(phase)
                print(phase.line(), flush=True)
        finally:
            self.phases_done.set()

    async def _phase_env(self, ph: Phase) -> None:
        opened = lambda h: self._log_count(h, "worker-env", "environment opened")  # noqa: E731
        before = opened("env-1")
        # Kill env-1 while one of the episodes holds an environment there.
        await self._until(lambda: opened("env-1") > before, 120)
        # ...and its env_open has completed: one killed mid-open holds its episode for env_open's start-to-close
        # (5 minutes, no heartbeat; seen 2026-11-28, docs/deployment.md), not env_lost_after_s.
        await asyncio.sleep(3.0)
        env2_before, groups_before = opened("env-2"), len(self.groups_done)
        retries_before = self._log_count("workflow", "worker-workflow", "env worker lost")
        ph.fault = time.monotonic()
        ph.notes["killed"] = self.d.kill_host("env-1")
        retried = lambda: self._log_count("workflow", "worker-workflow", "env worker lost") - retries_before  # noqa: E731
        # Recovery: the episodes env-1 held are found lost (env_lost_after_s) and start over on env-2 (an attempt
        # after the first opens its environment there).
        again = self._reopened("env-2")
        ph.recovery_s = await self._until(lambda: retried() > 0 and self._reopened("env-2") > again, 300)
        await asyncio.sleep(max(0.0, self.load.down_s - (time.monotonic() - ph.fault)))
        ph.notes["env-2 environments opened while env-1 was down"] = opened("env-2") - env2_before
        ph.notes["episodes started over"] = retried()
        ph.notes["of them reopened on env-2"] = self._reopened("env-2") - again
        ph.notes["groups finished while down"] = len(self.groups_done) - groups_before
        t = time.monotonic()
        await self.d.restart_host("env-1")
        ph.back = time.monotonic()
        ph.notes["restart s"] = round(ph.back - t, 1)

    async def _phase_engine(self, ph: Phase) -> None:
        ph.fault = time.monotonic()
        ph.notes["killed"] = self.d.kill_host("policy-1")
        await self._until(lambda: self._answered_since(ph.fault) is not None, 300)
        first = self._answered_since(ph.fault)
        ph.recovery_s = None if first is None else first - ph.fault
        await asyncio.sleep(max(0.0, self.load.down_s - (time.monotonic() - ph.fault)))
        ph.notes["turns while down"] = sum(1 for t, _ in self.fig.answered if t > ph.fault)
        t = time.monotonic()
        await self.d.restart_host("policy-1")
        await self.d.wait_routed(timeout_s=300)
        ph.back = time.monotonic()
        ph.notes["restart to routed s"] = round(ph.back - t, 1)

    async def _phase_trainer(self, ph: Phase) -> None:
        durable = self._durable_version()
        ph.fault = time.monotonic()
        ph.notes["killed"] = self.d.kill_host("trainer")
        ph.notes["durable version at kill"] = durable
        await asyncio.sleep(self.load.down_s)
        await self.d.restart_host("trainer")
        ph.back = time.monotonic()
        # Recovery: from the restart to the next durable version.
        took = await self._until(lambda: self._durable_version() > durable, 400, 1.0)
        ph.recovery_s = None if took is None else time.monotonic() - ph.fault
        ph.notes["durable version after"] = self._durable_version()

    async def _phase_cut(self, ph: Phase) -> None:
        ph.notes["host"] = self.load.cut_host
        durable = self._durable_version()
        ph.fault = time.monotonic()
        self.d.net.cut(self.load.cut_host)
        try:
            await asyncio.sleep(self.load.cut_s)
        finally:
            self.d.net.mend(self.load.cut_host)
        ph.back = time.monotonic()
        ph.notes["turns during the cut"] = sum(1 for t, _ in self.fig.answered if ph.fault < t < ph.back)
        await self._until(lambda: self._answered_since(ph.fault) is not None, 300)
        first = self._answered_since(ph.fault)
        ph.recovery_s = None if first is None else first - ph.fault
        t = time.monotonic()
        await self.d.wait_routed(timeout_s=300)
        ph.notes["mended to routed s"] = round(time.monotonic() - t, 1)
        if self.load.cut_host == "trainer":  # does training go on once the trainer is reachable again?
            took = await self._until(lambda: self._durable_version() > durable, self.load.resume_wait_s, 1.0)
            ph.notes["durable versions before / after"] = (durable, self._durable_version())
            ph.notes["next durable version after the mend, s"] = "none" if took is None else round(took, 1)

    def _phase_figures(self, ph: Phase) -> None:
        lat = sorted(s for t, s in self.fig.answered if ph.start <= t <= ph.end)
        ph.turns = len(lat)
        ph.p50_ms = lat[len(lat) // 2] * 1000 if lat else 0.0
        ph.errors = Counter(code for t, code, _ in self.fig.failed if ph.start <= t <= ph.end)
        reasons = {str(r)[:120] for t, code, r in self.fig.failed if ph.start <= t <= ph.end}
        if reasons:
            ph.notes["error reasons"] = sorted(reasons)[:3]
        times = [ph.start] + [t for t, _ in self.fig.answered if ph.start <= t <= ph.end] + [ph.end]
        times.sort()
        ph.longest_gap_s = max((b - a for a, b in zip(times, times[1:])), default=0.0)

    # ---- versions ----
    async def served_versions(self) -> dict[str, str]:
        out = {}
        auth = {"Authorization": f"Bearer {self.d.secrets['engine']}"}
        async with httpx.AsyncClient(timeout=30, headers=auth) as http:
            for url in self.d.engine_urls:
                r = await http.get(f"{url}/get_weight_version")
                r.raise_for_status()
                body = r.json()
                out[url] = str(body.get("weight_version", body) if isinstance(body, dict) else body)
        return out

    async def wait_versions(self, at_least: int) -> dict[str, str]:
        """Until both engines serve one version >= `at_least` (the trainer's broadcast reached both)."""
        while True:
            versions = await self.served_versions()
            values = set(versions.values())
            if len(values) == 1 and (v := values.pop()).isdigit() and int(v) >= at_least:
                return versions
            if time.monotonic() > self.deadline:
                raise TimeoutError(f"engines serve {versions}, wanted version {at_least} on both")
            self.d.check_alive()
            await asyncio.sleep(1)

    async def settle(self) -> None:
        """After the load: until the last version trained is durable (named in records/trained.jsonl) and served
        by both engines, and no step is under way."""
        quiet_since, last = time.monotonic(), None
        while time.monotonic() - quiet_since < 3 * self.d.knobs.wait_s + 5:
            versions = await self.served_versions()
            durable = max((line["version"] for line in self.trained_lines() if line.get("durable")), default=0)
            state = (tuple(sorted(versions.values())), durable)
            agreed = len(set(versions.values())) == 1 and str(durable) == next(iter(versions.values()))
            if state != last or not agreed:
                quiet_since, last = time.monotonic(), state
            if time.monotonic() > self.deadline:
                raise TimeoutError(f"training did not settle: engines {versions}, durable {durable}")
            await asyncio.sleep(1)

    # ---- accounting ----
    def trained_lines(self) -> list[dict]:
        path = self.d.hosts["trainer"].data_dir / "records" / "trained.jsonl"
        lines = []
        try:
            for raw in path.read_text().splitlines():
                try:
                    lines.append(json.loads(raw))
                except ValueError:
                    continue
        except FileNotFoundError:
            pass
        return lines

    async def account(self) -> None:
        """lost: samples added to a stream that are neither trained (a durable line of records/trained.jsonl names
        them, as trained or dropped stale), nor dropped stale in a batch that made no version (a `"dropped"` line),
        nor named missing, nor still in their stream; duplicated: sample ids
        named twice by the durable lines, or judged twice in the records/ mirrors of any host."""
        from store.client import Store
        from store.keys import sample_stream

        settings = self.d.hosts["trainer"].settings()
        # The streams first, then the records: an entry leaves its stream only after the line naming it is written,
        # so one that leaves between the two reads is in the lines. The other order counted a batch dropped stale
        # meanwhile as lost (16 "lost" in a run whose trainer was still draining a stale backlog, 2026-11-29).
        added, waiting = 0, set()
        async with Store.from_settings(settings) as store:
            redis = store._redis  # XINFO: how many entries a stream ever took, deleted ones too
            for source in await store.samples.sources():
                info = await redis.xinfo_stream(sample_stream(source))
                added += int(info.get("entries-added", info.get(b"entries-added", 0)))
                waiting |= {s.sample_id for _, s in await store.samples.entries(source)}
        every = self.trained_lines()
        lines = [line for line in every if line.get("durable")]
        dropped = [line for line in every if line.get("dropped")]  # batches that made no version
        named = Counter(i for line in lines for i in line.get("sample_ids", []) + line.get("stale_ids", []))
        stale_alone = {i for line in dropped for i in line.get("stale_ids", [])}
        missing = sum(len(ids) for line in lines + dropped for ids in (line.get("missing") or {}).values())
        records = Counter()
        for host in self.d.hosts.values():
            for f in (host.data_dir / "records").glob("policy-*/*.jsonl"):
                for raw in f.read_text().splitlines():
                    try:
                        records[json.loads(raw)["sample_id"]] += 1
                    except (ValueError, KeyError):
                        continue
        f = self.fig
        f.published, f.trained, f.waiting, f.missing = added, len(named), len(waiting - set(named)), missing
        f.stale_alone = len(stale_alone - set(named))
        f.lost = max(0, added - len(set(named) | stale_alone | waiting) - missing)
        f.duplicated = sum(n - 1 for n in named.values() if n > 1) + sum(n - 1 for n in records.values() if n > 1)

    # ---- the run ----
    async def run(self) -> Figures:
        started = time.monotonic()
        self.deadline = started + self.load.timeout_s
        self.load_until = started + 60 * (self.load.minutes or 0)
        self.create_key()
        cpu0 = self.d.cpu_seconds()
        await asyncio.gather(self.chat(), self.rollout(), *([self.failures()] if self.load.failures else []))
        await self.wait_versions(self.load.versions)
        await self.settle()
        self.fig.engine_versions = await self.served_versions()
        self.fig.versions = int(next(iter(self.fig.engine_versions.values())))
        await self.account()
        cpu1 = self.d.cpu_seconds()
        self.fig.cpu = {h: cpu1[h] - cpu0.get(h, 0.0) for h in cpu1}
        self.fig.disk = self.d.disk_bytes()
        self.fig.seconds = time.monotonic() - started
        return self.fig


def _cli() -> list[str]:
    from stack.services import PYTHON_CLI

    return list(PYTHON_CLI)


async def run_hosts(root: Path, load: Load, knobs: Knobs | None = None, model: Path | None = None):
    """Bring the hosts up under `root`, run `load`, take everything down; (figures, the deployment)."""
    from engine.tiny_qwen3 import ensure_tiny_model

    model = model or ensure_tiny_model(root / "image" / "tiny-qwen3")
    deployment = Deployment(root, knobs)
    try:
        t = time.monotonic()
        await deployment.start(model)
        up_s = time.monotonic() - t
        figures = await HostsBench(deployment, load).run()
        figures.cpu["(up, s)"] = up_s
        return figures, deployment
    finally:
        await deployment.close()


def report(fig: Figures, deployment: Deployment) -> str:
    lat = sorted(fig.latencies)
    p50 = lat[len(lat) // 2] * 1000 if lat else 0.0
    p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))] * 1000 if lat else 0.0
    lines = [
        f"{len(deployment.hosts)} hosts on bridge {deployment.net.bridge} ({deployment.net.subnet}.0/24), "
        f"up in {fig.cpu.get('(up, s)', 0):.0f} s, load for {fig.seconds:.0f} s",
        f"{'host':<10}{'address':<16}{'services':<44}{'cpu s':>8}{'data MB':>9}",
    ]
    for name, host in deployment.hosts.items():
        services = ",".join(p.spec.name + ("*" if p.spec.name in host.contained else "") for p in host.processes)
        lines.append(
            f"{name:<10}{host.ip:<16}{services:<44}{fig.cpu.get(name, 0):>8.1f}{fig.disk.get(name, 0) / 1e6:>9.1f}"
        )
    lines.append(
        f"chat: {fig.turns} turns, p50 {p50:.0f} ms, p99 {p99:.0f} ms, errors {dict(fig.chat_errors) or 0}; "
        f"task groups: {fig.groups} ({fig.group_failures} episodes failed), {fig.env_steps} env steps"
    )
    lines.append(
        f"training: {fig.published} samples published, {fig.trained} trained (durable), {fig.waiting} waiting, "
        f"{fig.missing} missing, {fig.stale_alone} dropped stale in batches that made no version; "
        f"engines serve {fig.engine_versions}"
    )
    if images := deployment.knobs.images:
        lines.append(f"* from its image ({images.tool}): {images.image('<role>')}, running the image's own command")
    lines += [p.line() for p in fig.phases]
    lines.append(fig.last_line())
    return "\n".join(lines)


# ---- command line (wired in by bench/cli.py) ----


def add_parser(bsub: argparse._SubParsersAction) -> None:
    p = bsub.add_parser(
        "hosts",
        help="the deployment as 8 hosts in network namespaces on this machine, under chat and rollout load (root)",
        description="Runs the deployment as hosts in Linux network namespaces, each with its own data directory and "
        "no path shared: control (Temporal, valkey, router), API, workflow+judge, two env hosts, two policy hosts "
        "(an engine and a policy worker each), a trainer. 16 chat sessions and task groups for --minutes; versions "
        "trained and broadcast to both engines; every sample accounted for. Needs root and iproute2.",
    )
    p.add_argument("--minutes", type=float, default=2.0, help="how long the chat and rollout load runs")
    p.add_argument("--sessions", type=int, default=16, help="chat sessions talking at once")
    p.add_argument("--versions", type=int, default=2, help="versions trained and served on both engines, at least")
    p.add_argument("--batch-size", type=int, default=8, help="training.batch_size")
    p.add_argument("--root", type=Path, help="the hosts' folders (default: a fresh one under /var/tmp; not /tmp)")
    p.add_argument(
        "--failures",
        nargs="?",
        const=",".join(PHASES),
        default="",
        help=f"host failures under the load, in turn; the load then runs until the last phase is over, not for "
        f"--minutes (default when given: {','.join(PHASES)}): " + "; ".join(f"{k}: {v}" for k, v in PHASES.items()),
    )
    p.add_argument("--keep", action="store_true", help="keep the hosts' folders (logs, records) afterwards")
    p.add_argument(
        "--images",
        action="store_true",
        help="the API and every worker pool from the deployment's images (deploy/build-images.sh), each a container "
        "in its host's network namespace running the image's own command (podman or docker)",
    )
    p.add_argument(
        "--scale",
        action="store_true",
        help="scale figures instead (bench/hosts_scale.py): stand-in GPU servers on the policy hosts; chat turns/s "
        "with 1 then 2 policy hosts, env steps/s with 1 then 2 env hosts, prefix-cache hits per engine, a chat turn's "
        "p50 on the hosts against the one-box stack",
    )
    p.add_argument("--seconds", type=float, default=45.0, help="with --scale: each measured window")
    p.add_argument("--json", type=Path, help="with --scale: also write the windows' figures here")


def _phases(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if unknown := [n for n in names if n not in PHASES]:
        raise SystemExit(f"bench hosts: unknown failure phase(s) {unknown}; known: {', '.join(PHASES)}")
    return names


def bench_command(args: argparse.Namespace, settings) -> int:
    from openclaw_rl import console

    if why := hosts_problem():
        console.error(None, f"bench hosts: {why}")
        return 2
    images = None
    if args.images:
        from stack.host_images import HostImages

        images = HostImages()
        if why := images.problem():
            console.error(None, f"bench hosts --images: {why}")
            return 2
    root = args.root or Path(tempfile.mkdtemp(prefix="openclaw-rl-hosts-", dir="/var/tmp"))
    load = Load(
        sessions=args.sessions,
        turns_per_session=None,
        minutes=args.minutes,
        groups=1,
        samples=4,
        max_steps=4,
        versions=args.versions,
        timeout_s=60 * args.minutes + 1200 + (1200 if args.failures else 0),
        failures=_phases(args.failures),
    )
    try:
        knobs = Knobs(batch_size=args.batch_size, images=images)
        figures, deployment = asyncio.run(run_hosts(root, load, knobs))
        print(report(figures, deployment), flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"hosts' folders kept in {root}")
    return 0
