"""Soak: many sessions talking at once for minutes, with judging and training on.

Starts the whole local stack (`openclaw-rl up`) on the tiny Qwen3 model in a
temporary data directory, training on (a step per --batch-size samples) and
the stack's default learning set-up (the heuristic judge on the tiny model),
then runs --sessions scripted sessions at once for --minutes. Each session
sends --turns-per-session turns, every follow-up pairing the previous turn
with feedback a judge scores ("thanks" or a correction), then starts a fresh
session; every other turn is streamed. Clients retry connection errors, 5xx
and 429 with an `Idempotency-Key`, as a careful client does (each refusal is
counted). Once the time is up the load stops and judging is given
--drain-s seconds to catch up. Prints:
  - turns served, and errors by status (every failed attempt, retried or not);
  - samples expected (paired turns: every turn that got a follow-up in its
    session), judged (a record each), published; duplicates: sample ids
    recorded twice, and samples trained twice (`records/trained.jsonl`);
  - train steps, samples trained, the policy version reached;
  - p50/p99 of the endpoint latency (request to last byte, non-streamed and
    streamed turns), of the engine time, and their difference, the added latency.
    The engine time is measured as benchmarks/chat_latency.py does, straight
    at the engine with the same rendered prompt, during the same load: after
    every --probe-every-th served turn, a direct POST /generate of that turn's
    prompt ids, generating exactly as many tokens as the turn did (ignore_eos), under the soak user's engine
    tenant, so it waits for a slot behind that user's turns as they do (the engine shares slots by tenant);
  - Redis memory (INFO memory used_memory) at the start, after the load and
    after draining;
  - the training loop, per version (from the TrainingWorkflow's histories): the train step, its compute, the time
    from the end of its compute until every server serves the version, durable checkpoint writes; trained against
    judged samples/s; bytes the trainer process wrote per version; GPU memory per process (with a GPU).

--model / --shape run it on another model than the tiny one (a checkpoint, or a random model of a Qwen3 shape,
benchmarks/qwen3_shapes.py), e.g. on one GPU with the 1.7B shape.

    .venv/bin/python benchmarks/soak.py [--sessions 50] [--minutes 5] [--tokens 16] [--shape qwen3-1.7b]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.arguments import add_set_argument, setting_overrides  # noqa: E402
from benchmarks.loop_figures import (  # noqa: E402
    gpu_memory_by_pid,
    loop_figures,
    median,
    training_activities,
    written_bytes,
)
from benchmarks.qwen3_shapes import SHAPES, bench_model  # noqa: E402
from contracts.chat import tenant_of  # noqa: E402
from store.client import Store, StoreAddress  # noqa: E402
from store.keys import DATA_TTL_S  # noqa: E402
from tests.helpers import CLI, REPO, RunningStack, stack_env  # noqa: E402

FEEDBACK = ("Thanks, perfect!", "Don't repeat yourself, that was wrong.")
RETRYABLE = (429, 500, 502, 503, 504)
USER = "soak"
TENANT = tenant_of(USER)
"""The engine tenant the policy workers send for the soak user's turns."""


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


class Soak:
    def __init__(self, stack: RunningStack, key: str, model: Path, args: argparse.Namespace):
        from policy_client.chat import renderer_for

        self.stack, self.key, self.args = stack, key, args
        self.renderer = renderer_for(str(model))
        limits = httpx.Limits(max_connections=args.sessions + 8, max_keepalive_connections=args.sessions + 8)
        self.http = httpx.AsyncClient(timeout=httpx.Timeout(300.0, connect=10.0), limits=limits)
        self.statuses: Counter[str] = Counter()
        self.served = 0
        self.paired = 0  # turns that got a follow-up in their session: each should become one judged record
        self.endpoint: list[float] = []
        self.engine: list[float] = []
        self.pairs: list[float] = []  # endpoint minus engine time of the same prompt, per probed turn
        self.gave_up = 0
        self.unloaded_tps: float | None = None  # --burst before the load, and during it
        self.loaded_tps: list[float] = []
        self.probes: set[asyncio.Task] = set()

    async def turn(self, sid: str, history: list[dict], stream: bool) -> tuple[float, dict] | None:
        """One turn, retried with its idempotency key until it is answered; its latency (the attempt that
        succeeded) and the response."""
        body = {"messages": history, "max_tokens": self.args.tokens, "temperature": 0.8, "stream": stream}
        headers = {
            "Authorization": f"Bearer {self.key}",
            "X-Session-Id": sid,
            "Idempotency-Key": uuid.uuid4().hex,
        }
        url = f"{self.stack.api}/v1/chat/completions"
        for _ in range(20):
            t = time.perf_counter()
            try:
                if stream:
                    status, out = await self._stream(url, body, headers)
                else:
                    r = await self.http.post(url, json=body, headers=headers)
                    status, out = r.status_code, (r.json() if r.status_code == 200 else None)
            except httpx.TransportError as exc:
                status, out = f"transport:{type(exc).__name__}", None
            took = time.perf_counter() - t
            if status == 200:
                return took, out
            self.statuses[str(status)] += 1
            if isinstance(status, int) and status not in RETRYABLE:
                return None
            await asyncio.sleep(1.0)
        return None

    async def _stream(self, url: str, body: dict, headers: dict) -> tuple[int | str, dict | None]:
        text, usage, finish = "", None, None
        body = body | {"stream_options": {"include_usage": True}}
        async with self.http.stream("POST", url, json=body, headers=headers) as r:
            if r.status_code != 200:
                await r.aread()
                return r.status_code, None
            async for line in r.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                if "error" in chunk:
                    return f"sse:{chunk['error'].get('type')}", None
                usage = chunk.get("usage") or usage
                for ch in chunk["choices"]:
                    text += ch["delta"].get("content") or ""
                    finish = ch.get("finish_reason") or finish
        if finish is None:
            return "sse:cut-off", None
        return 200, {"choices": [{"message": {"content": text}}], "usage": usage or {}}

    async def probe(self, messages: list[dict], tokens: int, endpoint_s: float) -> None:
        """The engine's own time for the same prompt and as many tokens, under the same load."""
        body = {
            "input_ids": self.renderer.render(messages),
            "sampling_params": {
                "max_new_tokens": max(1, tokens),
                "temperature": 0.8,
                "ignore_eos": True,
            },
        }
        t = time.perf_counter()
        try:
            # As the soak user's tenant: the probe queues for an engine slot behind the same user's turns, as they do.
            r = await self.http.post(f"{self.stack.engine}/generate", json=body, headers={"X-Openclaw-Tenant": TENANT})
        except httpx.TransportError:
            return
        took = time.perf_counter() - t
        if r.status_code == 200:
            self.engine.append(took)
            self.pairs.append(endpoint_s - took)

    async def burst(self) -> float | None:
        """Engine tokens/s of --burst requests at once straight at the engine (--burst-tokens each, the system
        bucket: no tenant share applies), whatever else it serves meanwhile; None when one failed."""

        async def one(i: int) -> int:
            body = {
                "input_ids": list(range(1000 + i, 1040 + i)),
                "sampling_params": {"max_new_tokens": self.args.burst_tokens, "temperature": 0.8, "ignore_eos": True},
            }
            r = await self.http.post(f"{self.stack.engine}/generate", json=body)
            r.raise_for_status()
            return int(r.json()["meta_info"]["completion_tokens"])

        t = time.perf_counter()
        try:
            tokens = await asyncio.gather(*(one(i) for i in range(self.args.burst)))
        except (httpx.HTTPError, KeyError, ValueError):
            return None
        return sum(tokens) / (time.perf_counter() - t)

    async def bursts_under_load(self, until: float) -> None:
        """A burst at a third and at two thirds of the load (training steps run by then)."""
        span = until - time.monotonic()
        for at in (span / 3, span / 3):
            await asyncio.sleep(at)
            if time.monotonic() >= until:
                return
            got = await self.burst()
            if got is not None:
                self.loaded_tps.append(got)

    async def session_loop(self, slot: int, until: float) -> None:
        n = 0
        while time.monotonic() < until:
            n += 1
            sid = f"soak-{slot}-{n}-{uuid.uuid4().hex[:6]}"
            history: list[dict] = []
            question = f"Session {slot}.{n}: tell me about the weather."
            for t in range(self.args.turns_per_session):
                if time.monotonic() >= until:
                    break
                history.append({"role": "user", "content": question})
                got = await self.turn(sid, history, stream=(slot + t) % 2 == 1)
                if got is None:
                    self.gave_up += 1
                    break
                if t > 0:
                    self.paired += 1  # this request was the previous turn's next state
                took, out = got
                self.served += 1
                self.endpoint.append(took)
                content = out["choices"][0]["message"].get("content") or ""
                if self.served % self.args.probe_every == 0:
                    tokens = int((out.get("usage") or {}).get("completion_tokens") or self.args.tokens)
                    task = asyncio.create_task(self.probe(list(history), tokens, took))
                    self.probes.add(task)
                    task.add_done_callback(self.probes.discard)
                history.append({"role": "assistant", "content": content})
                question = f"{FEEDBACK[(slot + t) % 2]} Next, question {t + 1}."

    async def run(self) -> None:
        if self.args.burst:
            self.unloaded_tps = await self.burst()
        until = time.monotonic() + self.args.minutes * 60
        tasks = [self.session_loop(s, until) for s in range(self.args.sessions)]
        if self.args.burst:
            tasks.append(self.bursts_under_load(until))
        await asyncio.gather(*tasks)
        if self.probes:
            await asyncio.gather(*self.probes)
        await self.http.aclose()


def from_store(stack: RunningStack, read):
    """`await read(store)` on a store client of its own (the benchmark's main loop is synchronous)."""

    async def go():
        async with Store.connect(StoreAddress(stack.redis, DATA_TTL_S)) as store:
            return await read(store)

    return asyncio.run(go())


def used_memory(stack: RunningStack) -> int:
    return from_store(stack, lambda s: s.server.memory_used())


def records(stack: RunningStack) -> list[dict]:
    return [r.record.model_dump(mode="json") for r in from_store(stack, lambda s: s.judgements.records("personal"))]


def caught_up(stack: RunningStack, paired: int, batch_size: int) -> bool:
    """Every paired turn judged, and fewer published samples than a batch left untrained. Counted by the training
    workflow, not by the stream's length: an entry stays in the stream, unacknowledged, until a durable checkpoint
    holds it, so the length kept the drain waiting to its end whenever training ran ahead of checkpoints."""
    recs = records(stack)
    if len(recs) < paired:
        return False
    published = sum(1 for x in recs if x["result"]["published"])
    s = train_status(stack)
    ends = ("trained", "dropped_stale", "dropped_bad", "dropped_missing")
    settled = sum(s.get(f"samples_{end}", 0) for end in ends)
    return bool(s) and published - settled < batch_size


def trained_steps(stack: RunningStack) -> list[dict]:
    path = stack.data_dir / "records" / "trained.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.is_file() else []


def train_status(stack: RunningStack) -> dict:
    out = subprocess.run(
        CLI + ["train", "status", "--json"], env=stack.env, capture_output=True, text=True, cwd=REPO, timeout=120
    )
    return json.loads(out.stdout) if out.returncode == 0 else {}


async def read_loop(stack: RunningStack):
    from temporalio.client import Client
    from temporalio.contrib.pydantic import pydantic_data_converter

    client = await Client.connect(stack.temporal, data_converter=pydantic_data_converter)
    return loop_figures(await training_activities(client))


def seconds(values: list[float | None]) -> str:
    m = median([v for v in values if v is not None])
    known = [v for v in values if v is not None]
    return "-" if m is None else f"median {m:.2f} s (min {min(known):.2f}, max {max(known):.2f})"


def mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=50, help="sessions talking at once")
    ap.add_argument("--minutes", type=float, default=5.0, help="how long the load runs")
    ap.add_argument("--tokens", type=int, default=16, help="max_tokens of every turn (temperature 0.8)")
    ap.add_argument("--turns-per-session", type=int, default=6, help="turns of a session before a fresh one starts")
    ap.add_argument("--batch-size", type=int, default=16, help="samples per train step (training.batch_size)")
    ap.add_argument("--probe-every", type=int, default=4, help="time the engine directly after every n-th turn")
    ap.add_argument("--drain-s", type=float, default=180.0, help="longest wait for judging to catch up afterwards")
    ap.add_argument("--model", type=Path, help="a local Hugging Face checkpoint to serve and train")
    ap.add_argument("--shape", choices=sorted(SHAPES), help="a random model of a Qwen3 shape (default: the tiny one)")
    ap.add_argument(
        "--burst", type=int, default=0, help="engine tokens/s of this many requests at once, before and during the load"
    )
    ap.add_argument("--burst-tokens", type=int, default=64, help="tokens each burst request generates")
    add_set_argument(ap)
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="soak-"))
    model = bench_model(args.model, args.shape, work)
    env = (
        stack_env(work / "data", model_path=model)
        | {
            "OPENCLAW_RL_TRAINING__AUTO_START": "true",
            "OPENCLAW_RL_TRAINING__BATCH_SIZE": str(args.batch_size),
            "OPENCLAW_RL_TRAINING__WAIT_S": "5",
            "OPENCLAW_RL_TEMPORAL__HEADLESS": "true",
        }
        | setting_overrides(args.set)
    )
    stack = RunningStack(env).start()
    try:
        key = subprocess.run(
            CLI + ["keys", "create", "--user", USER],
            env=stack.env,
            capture_output=True,
            text=True,
            cwd=REPO,
            check=True,
        ).stdout.split()[0]
        mem_start = used_memory(stack)
        trainer_pid = stack.service_pid("worker-trainer")
        written_start = written_bytes(trainer_pid) or 0
        start_status = train_status(stack)
        load_start = os.getloadavg()[0]  # the machine's other work weighs on every figure
        soak = Soak(stack, key, model, args)
        t0 = time.monotonic()
        asyncio.run(soak.run())
        load_s = time.monotonic() - t0
        mem_load = used_memory(stack)
        gpu = {name: gpu_memory_by_pid().get(svc["pid"]) for name, svc in stack.state()["services"].items()}
        # Drain: judging catches up with every paired turn and training with every full batch (or the wait ends).
        deadline = time.monotonic() + args.drain_s
        while time.monotonic() < deadline and not caught_up(stack, soak.paired, args.batch_size):
            time.sleep(2)
        drain_s = args.drain_s - max(0.0, deadline - time.monotonic())
        recs = records(stack)
        mem_end = used_memory(stack)
        status = train_status(stack)
        steps = trained_steps(stack)
        pid_now = stack.service_pid("worker-trainer")
        now = written_bytes(pid_now) if pid_now == trainer_pid else None  # a restarted trainer: unknown
        written = None if now is None else now - written_start
        loop = asyncio.run(read_loop(stack))
        judge_line = next((ln for ln in stack.output().splitlines() if "learning" in ln and "judge" in ln), "").strip()
    finally:
        stack.stop()

    ids = [x["sample_id"] for x in recs]
    published = [x for x in recs if x["result"]["published"]]
    durable = [i for st in steps for i in st["sample_ids"]]  # recorded once a durable checkpoint holds them
    trained = loop.trained_ids  # every completed train step's samples, from the training workflow's histories
    dup_records = sum(c - 1 for c in Counter(ids).values() if c > 1)
    dup_trained = sum(c - 1 for c in Counter(durable).values() if c > 1)  # what counts: the durable record
    not_published = len(set(trained) - {x["sample_id"] for x in published})
    added = [e - d for e, d in ((pct(soak.endpoint, q), pct(soak.engine, q)) for q in (0.5, 0.99))]
    print(
        f"soak: {args.sessions} sessions x {args.minutes:g} min (load ran {load_s:.0f}s), model {model.name}, "
        f"{args.tokens} tokens/turn, {args.turns_per_session} turns/session, train batch {args.batch_size}, "
        f"cpu cores: {os.cpu_count()}, load average at start/end: {load_start:.1f}/{os.getloadavg()[0]:.1f}"
    )
    print(f"  {judge_line}")
    print(f"turns served        {soak.served} ({soak.served / load_s:.1f}/s); sessions given up on: {soak.gave_up}")
    print(f"errors by status    {dict(soak.statuses) or 'none'} (every failed attempt; all retried)")
    print(
        f"samples             expected {soak.paired} (paired turns), judged {len(recs)}, published {len(published)}"
        f" ({len(recs) - len(published)} judged but not published by the method's rules)"
    )
    print(
        f"duplicates          records {dup_records}, trained twice {dup_trained}, trained but not published "
        f"{not_published}"
    )
    print(
        f"training            {status.get('steps', 0) - start_status.get('steps', 0)} steps, "
        f"{len(trained)} samples trained ({len(durable)} of them under a durable checkpoint), "
        f"{status.get('samples_dropped_stale', 0)} stale dropped, "
        f"policy v{status.get('version')}, backlog {status.get('backlog')}"
    )
    print(
        f"latency             endpoint p50 {pct(soak.endpoint, 0.5) * 1000:.0f} ms, p99 "
        f"{pct(soak.endpoint, 0.99) * 1000:.0f} ms (n={len(soak.endpoint)}); engine p50 "
        f"{pct(soak.engine, 0.5) * 1000:.0f} ms, p99 {pct(soak.engine, 0.99) * 1000:.0f} ms (n={len(soak.engine)})"
    )
    print(
        f"added latency       p50 {added[0] * 1000:.0f} ms, p99 {added[1] * 1000:.0f} ms (endpoint minus engine "
        f"percentiles); per probed turn p50 {pct(soak.pairs, 0.5) * 1000:.0f} ms, p99 "
        f"{pct(soak.pairs, 0.99) * 1000:.0f} ms"
    )
    print(
        f"redis used_memory   start {mib(mem_start)}, after the load {mib(mem_load)}, "
        f"after draining ({drain_s:.0f}s) {mib(mem_end)}"
    )
    v = loop.versions
    print(f"versions            {len(v)} made ({', '.join(str(x.version) for x in v) or 'none'})")
    print(f"  train step        {seconds([x.train_s for x in v])}")
    print(f"  of which compute  {seconds([x.compute_s for x in v])}")
    served = [
        x.train_s - x.compute_s + x.served_after_s
        for x in v
        if x.compute_s is not None and x.served_after_s is not None
    ]
    print(f"  served after the step's compute: {seconds(served)}")
    print(f"    the publication activity {seconds(loop.publish_s)}; the hand-over in it {seconds(loop.handover_s)}")
    print(f"  published through {loop.routes or 'checkpoint folders (one per version)'}")
    print(f"  durable checkpoints {len(loop.checkpoints)}: written in {seconds(loop.checkpoints)}")
    print(f"    steps held up by each: {seconds(loop.snapshots)}")
    per_version = f"{mib(written / len(v))} per version" if written is not None and v else "unknown"
    print(f"  trainer wrote     {mib(written) if written is not None else 'unknown'} in all, {per_version}")
    print(f"  failed attempts   {loop.failed or 'none'}")
    span = load_s + drain_s
    print(
        f"samples/s           judged {len(recs) / span:.2f}, trained {len(trained) / span:.2f} "
        f"(over the load and the drain, {span:.0f}s)"
    )
    if any(gpu.values()):
        print("gpu memory (MiB)    " + ", ".join(f"{k} {m}" for k, m in gpu.items() if m))
    loaded = sorted(soak.loaded_tps)[len(soak.loaded_tps) // 2] if soak.loaded_tps else None
    ratio = loaded / soak.unloaded_tps if loaded and soak.unloaded_tps else None
    if args.burst:
        print(
            f"engine tokens/s     {args.burst} requests at once: unloaded {soak.unloaded_tps or 0:.0f}, under the soak "
            f"{loaded or 0:.0f} (median of {len(soak.loaded_tps)}; {ratio or 0:.2f} of unloaded)"
        )
    if args.json:
        figures = {
            "model": model.name,
            "sessions": args.sessions,
            "minutes": args.minutes,
            "batch_size": args.batch_size,
            "settings": setting_overrides(args.set),
            "load_s": load_s,
            "drain_s": drain_s,
            "turns_served": soak.served,
            "gave_up": soak.gave_up,
            "errors_by_status": {str(k): v for k, v in soak.statuses.items()},
            "samples_expected": soak.paired,
            "samples_judged": len(recs),
            "samples_published": len(published),
            "duplicate_records": dup_records,
            "trained_twice": dup_trained,
            "trained_not_published": not_published,
            "train_steps": status.get("steps", 0) - start_status.get("steps", 0),
            "samples_trained": len(trained),
            "samples_trained_durable": len(durable),
            "stale_dropped": status.get("samples_dropped_stale", 0),
            "policy_version": status.get("version"),
            "judged_per_s": len(recs) / span,
            "trained_per_s": len(trained) / span,
            "endpoint_p50_s": pct(soak.endpoint, 0.5),
            "endpoint_p99_s": pct(soak.endpoint, 0.99),
            "versions": [vars(x) for x in v],
            "served_after_compute_s": served,
            "publish_s": loop.publish_s,
            "handover_s": loop.handover_s,
            "routes": loop.routes,
            "trainer_wrote_bytes": written,
            "failed_attempts": loop.failed,
            "gpu_memory_mib": gpu,
            "engine_tps_unloaded": soak.unloaded_tps,
            "engine_tps_loaded": soak.loaded_tps,
            "engine_tps_ratio": ratio,
        }
        args.json.write_text(json.dumps(figures, indent=2, default=str))


if __name__ == "__main__":
    main()
