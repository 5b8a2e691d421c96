"""What a turn over Anthropic Messages or OpenAI Responses costs beyond the same turn over Chat Completions.

Starts the whole local stack (`openclaw-rl up`) with a scripted policy server in SGLang's wire format standing in for
the engine (a fixed answer at once: the model's time is not what is measured), then sends the same one-message turn,
each in a session of its own, through `/v1/chat/completions`, `/v1/messages` and `/v1/responses`, the three in turn
so drift on a shared machine falls on each alike; streamed and not. Prints p50/p99 per protocol and each one's
difference to Chat Completions (issue 45's target: at most 5 ms p50).

    .venv/bin/python benchmarks/protocol_overhead.py [--turns 60]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.tiny_qwen3 import ensure_tiny_model  # noqa: E402
from tests.api.conftest import create_key  # noqa: E402
from tests.helpers import RunningStack, stack_env  # noqa: E402
from tests.scripted_policy import ScriptedPolicy  # noqa: E402

ANSWER = "Noted: the meeting moves to Thursday at ten, and I will remind you the evening before."
QUESTION = "Move my Wednesday meeting to Thursday at ten, please."


def request(protocol: str, stream: bool) -> tuple[str, dict]:
    if protocol == "chat":
        body = {"model": "policy", "messages": [{"role": "user", "content": QUESTION}], "max_tokens": 64}
        return "/v1/chat/completions", body | {"stream": stream}
    if protocol == "messages":
        body = {"model": "policy", "max_tokens": 64, "messages": [{"role": "user", "content": QUESTION}]}
        return "/v1/messages", body | {"stream": stream}
    body = {"model": "policy", "input": QUESTION, "max_output_tokens": 64}
    return "/v1/responses", body | {"stream": stream}


def one_turn(http: httpx.Client, key: str, protocol: str, stream: bool) -> float:
    path, body = request(protocol, stream)
    headers = {"Authorization": f"Bearer {key}", "x-session-id": f"overhead-{uuid.uuid4().hex[:12]}"}
    started = time.perf_counter()
    if stream:
        with http.stream("POST", path, json=body, headers=headers) as r:
            assert r.status_code == 200, (protocol, r.status_code, r.read())
            for _ in r.iter_bytes():
                pass
    else:
        r = http.post(path, json=body, headers=headers)
        assert r.status_code == 200, (protocol, r.status_code, r.text)
    return time.perf_counter() - started


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=60, help="turns per protocol and mode")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="protocol-bench-"))
    model = ensure_tiny_model(work / "tiny-qwen3")
    protocols = ("chat", "messages", "responses")
    times: dict[tuple[str, bool], list[float]] = {(p, s): [] for p in protocols for s in (False, True)}
    with ScriptedPolicy(model, lambda prompt: ANSWER) as policy:
        env = stack_env(work / "data", model_path=model) | {
            "OPENCLAW_RL_POLICY__SERVER_URLS": json.dumps([policy.url]),
            "OPENCLAW_RL_LEARNING__JUDGE": '{"type": "heuristic"}',
            "OPENCLAW_RL_TRAINING__AUTO_START": "false",
        }
        stack = RunningStack(env).start()
        try:
            key = create_key(stack, "bench")
            with httpx.Client(base_url=stack.api, timeout=60) as http:
                for protocol in protocols:  # warm each route (imports, first workflow of its kind)
                    one_turn(http, key, protocol, False)
                for _ in range(args.turns):
                    for stream in (False, True):
                        for protocol in protocols:
                            times[(protocol, stream)].append(one_turn(http, key, protocol, stream))
        finally:
            stack.stop()
    print(f"one-message turns, a scripted policy answering at once, {args.turns} turns per protocol and mode")
    print(f"{'':<22}{'p50 ms':>9}{'p99 ms':>9}{'vs chat p50':>13}{'mean ms':>9}")
    for stream in (False, True):
        base = pct(times[("chat", stream)], 0.5) * 1000
        for protocol in protocols:
            values = times[(protocol, stream)]
            p50, p99 = pct(values, 0.5) * 1000, pct(values, 0.99) * 1000
            label = f"{protocol}{' (stream)' if stream else ''}"
            mean = statistics.fmean(values) * 1000
            print(f"{label:<22}{p50:>9.1f}{p99:>9.1f}{p50 - base:>+13.1f}{mean:>9.1f}")


if __name__ == "__main__":
    main()
