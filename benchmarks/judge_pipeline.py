"""Judging throughput, and chat latency while judging runs.

For each judge (the offline heuristic, and a scripted OpenAI-compatible LLM judge
answering after a fixed delay, standing in for a GPU judge): starts the whole
stack on the tiny model, opens --sessions sessions of --turns turns at once (every
turn but the last gets its next state, so each is judged), and reports:
  - turns judged per second end to end (first to last record of the run);
  - p50 of a chat turn on an idle stack vs right after the load, while its
    judging backlog is still being worked off (the backlog is printed).

    .venv/bin/python benchmarks/judge_pipeline.py [--sessions 16] [--turns 6] [--judge-latency-ms 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from store.client import Store, StoreAddress  # noqa: E402
from store.keys import DATA_TTL_S  # noqa: E402
from tests.helpers import CLI, REPO, RunningStack, stack_env  # noqa: E402
from tests.learning.conftest import ScriptedJudge  # noqa: E402


async def turn(http: httpx.AsyncClient, api: str, key: str, sid: str, messages: list[dict]) -> tuple[float, dict]:
    t = time.perf_counter()
    r = await http.post(
        f"{api}/v1/chat/completions",
        json={"messages": messages, "max_tokens": 8},
        headers={"Authorization": f"Bearer {key}", "X-Session-Id": sid},
    )
    r.raise_for_status()
    return time.perf_counter() - t, r.json()["choices"][0]["message"]


async def session(http, api, key, turns: int) -> None:
    sid = f"judge-bench-{uuid.uuid4().hex[:8]}"
    history = [{"role": "user", "content": "hello"}]
    for t in range(turns):
        _, msg = await turn(http, api, key, sid, history)
        feedback = "thanks, perfect" if t % 2 else "That's wrong, you should answer in one sentence instead."
        history = history + [{"role": "assistant", "content": msg["content"]}, {"role": "user", "content": feedback}]


async def latency(http, api, key, n: int) -> list[float]:
    sid = f"latency-{uuid.uuid4().hex[:8]}"
    return [(await turn(http, api, key, sid, [{"role": "user", "content": f"question {i}"}]))[0] for i in range(n)]


async def run(stack: RunningStack, key: str, sessions: int, turns: int) -> dict:
    store = Store.connect(StoreAddress(stack.redis, DATA_TTL_S))
    async with httpx.AsyncClient(timeout=300) as http:
        await latency(http, stack.api, key, 3)  # warm-up
        idle = await latency(http, stack.api, key, 20)
        started = time.time()
        await asyncio.gather(*(session(http, stack.api, key, turns) for _ in range(sessions)))
        # The chat load is over; judging of its turns goes on. Chat now, against that backlog only.
        backlog_before = await expected_left(store, started, sessions * (turns - 1))
        busy = await latency(http, stack.api, key, 20)
        backlog_after = await expected_left(store, started, sessions * (turns - 1))
    expected = sessions * (turns - 1)
    deadline = time.time() + 600
    while time.time() < deadline:
        entries = await ours(store, started)
        if len(entries) >= expected:
            break
        await asyncio.sleep(0.5)
    await store.aclose()
    stamps = sorted(e.at for e in entries)
    span = stamps[-1] - stamps[0] if len(stamps) > 1 else float("nan")
    return {
        "judged": len(entries),
        "rate": (len(entries) - 1) / span,
        "idle_p50": statistics.median(idle) * 1000,
        "busy_p50": statistics.median(busy) * 1000,
        "backlog": f"{backlog_before}->{backlog_after}",
    }


async def ours(store: Store, started: float) -> list:
    """This run's judged turns (version 0: nothing is trained here)."""
    recs = await store.judgements.records("personal", "0")
    return [e for e in recs if "judge-bench-" in e.record.sample_id and e.at >= started]


async def expected_left(store: Store, started: float, expected: int) -> int:
    return expected - len(await ours(store, started))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=16)
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--judge-latency-ms", type=float, default=1000.0, help="answer delay of the scripted LLM judge")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="judge-bench-"))
    from engine.tiny_qwen3 import ensure_tiny_model

    model = ensure_tiny_model(work / "tiny-qwen3")
    results = {}
    with ScriptedJudge(
        ["The reply shows satisfaction. \\boxed{1} [HINT_START]Answer in one short sentence.[HINT_END]"],
        delays={"": args.judge_latency_ms / 1000},
    ) as server:
        for name, extra in (
            ("heuristic", {}),
            (
                f"llm (scripted, {args.judge_latency_ms:.0f} ms)",
                {"OPENCLAW_RL_LEARNING__JUDGE": json.dumps({"type": "llm", "url": server.url})},
            ),
        ):
            env = (
                stack_env(work / f"data-{len(results)}", model_path=model)
                | extra
                | {"OPENCLAW_RL_TRAINING__AUTO_START": "false"}
            )
            stack = RunningStack(env).start()
            try:
                key = subprocess.run(
                    CLI + ["keys", "create", "--user", "bench"],
                    env=env,
                    capture_output=True,
                    text=True,
                    cwd=REPO,
                    check=True,
                ).stdout.split()[0]
                results[name] = asyncio.run(run(stack, key, args.sessions, args.turns))
            finally:
                stack.stop()
    print(
        f"{args.sessions} sessions x {args.turns} turns (combined method, 1 PRM + 1 hint vote per turn), "
        f"tiny model, cpu cores: {os.cpu_count()}"
    )
    print(
        f"{'judge':<30}{'judged':>7}{'turns/s':>9}{'chat p50 idle':>15}{'while judging':>15}"
        "   turns left to judge during it"
    )
    for name, r in results.items():
        print(
            f"{name:<30}{r['judged']:>7}{r['rate']:>9.2f}"
            f"{r['idle_p50']:>13.1f}ms{r['busy_p50']:>13.1f}ms   {r['backlog']}"
        )


if __name__ == "__main__":
    main()
