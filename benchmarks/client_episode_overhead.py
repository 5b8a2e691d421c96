"""What a client-driven episode adds to each model call, against the chat turn it is made of.

Starts the whole local stack (`openclaw-rl up`) on the tiny Qwen3 model, with learning off (no judging on the
side), and times the same greedy generation, the same growing conversation, two ways, alternating:
  - a chat turn: POST /v1/chat/completions (a SessionWorkflow update, the generate activity);
  - an episode step: POST /v1/episodes/{id}/chat/completions of a free-form episode (an EpisodeWorkflow update,
    the client_step activity: the step's action, its previous step's next state and its token data kept).
Each round opens a fresh session and a fresh episode and sends --steps calls to each; prints p50/p90 of both and
the p50 difference (the issue's target: at most 25 ms).

    .venv/bin/python benchmarks/client_episode_overhead.py [--rounds 6] [--steps 6] [--tokens 8]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stack.running import CLI, RunningStack, isolated_env  # noqa: E402


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--steps", type=int, default=6, help="calls per session and per episode in a round")
    ap.add_argument("--tokens", type=int, default=8, help="tokens generated per call (greedy)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="client-episode-bench-"))
    from engine.tiny_qwen3 import ensure_tiny_model

    model = ensure_tiny_model(work / "tiny-qwen3")
    env = isolated_env(work / "data", model) | {
        "OPENCLAW_RL_TRAINING__AUTO_START": "false",
        "OPENCLAW_RL_LEARNING__ENABLED": "false",
        "OPENCLAW_RL_ENVS__CLIENT__PRM_VOTES": "0",  # the chat turn is not judged either: like for like
    }
    stack = RunningStack(env).start()
    try:
        key = subprocess.run(
            CLI + ["keys", "create", "--user", "bench"], env=stack.env, capture_output=True, text=True, check=True
        ).stdout.split()[0]
        auth = {"Authorization": f"Bearer {key}"}
        chat_s: list[float] = []
        step_s: list[float] = []
        with httpx.Client(base_url=stack.api, headers=auth, timeout=300) as http:
            for r in range(args.rounds):
                ep = http.post("/v1/episodes", json={"samples": 1}).json()["episodes"][0]
                session = f"bench-{uuid.uuid4().hex[:8]}"
                msgs: list[dict] = [{"role": "user", "content": f"Round {r}: count to ten."}]
                for _ in range(args.steps):
                    body = {"messages": msgs, "max_tokens": args.tokens, "temperature": 0}
                    t0 = time.perf_counter()
                    a = http.post("/v1/chat/completions", json=body, headers={"X-Session-Id": session})
                    t1 = time.perf_counter()
                    b = http.post(f"/v1/episodes/{ep['id']}/chat/completions", json=body)
                    t2 = time.perf_counter()
                    a.raise_for_status(), b.raise_for_status()
                    if r:  # the first round warms both paths up
                        chat_s.append(t1 - t0)
                        step_s.append(t2 - t1)
                    reply = b.json()["choices"][0]["message"]["content"] or "..."
                    msgs += [{"role": "assistant", "content": reply}, {"role": "user", "content": "go on"}]
                http.post(f"/v1/episodes/{ep['id']}/outcome", json={"outcome": 1.0})
    finally:
        stack.stop()
    ms = lambda v: f"{1000 * v:7.1f} ms"  # noqa: E731
    print(f"{len(chat_s)} calls each, {args.tokens} tokens, tiny model on the embedded engine")
    print(f"chat turn      p50 {ms(statistics.median(chat_s))}  p90 {ms(pct(chat_s, 0.9))}")
    print(f"episode step   p50 {ms(statistics.median(step_s))}  p90 {ms(pct(step_s, 0.9))}")
    print(f"added per step p50 {ms(statistics.median(step_s) - statistics.median(chat_s))}")


if __name__ == "__main__":
    main()
