"""Embedded engine throughput: generated tokens/s at 1, 4 and 16 concurrent requests.

Starts a real engine process on the tiny Qwen3 model (or --model PATH), sends
N concurrent /generate requests of a fixed length (ignore_eos, so every request
generates exactly --tokens tokens), and prints tokens/s and the speed-up that
dynamic batching gives over one request at a time.

    .venv/bin/python benchmarks/engine_throughput.py [--model PATH] [--tokens 64] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.helpers import CLI, REPO, free_port, wait_http  # noqa: E402


async def burst(url: str, concurrency: int, tokens: int) -> tuple[int, float]:
    body = {
        "sampling_params": {"max_new_tokens": tokens, "temperature": 1.0, "ignore_eos": True},
        "return_logprob": True,
    }
    async with httpx.AsyncClient(base_url=url, timeout=600) as http:
        started = time.perf_counter()
        answers = await asyncio.gather(
            *(http.post("/generate", json=body | {"text": f"benchmark prompt number {i}"}) for i in range(concurrency))
        )
        took = time.perf_counter() - started
    for a in answers:
        a.raise_for_status()
    return sum(len(a.json()["output_ids"]) for a in answers), took


async def measure(url: str, tokens: int, rounds: int) -> dict[int, float]:
    await burst(url, 2, 4)  # warm-up
    out = {}
    for concurrency in (1, 4, 16):
        rates = []
        for _ in range(rounds):
            n, took = await burst(url, concurrency, tokens)
            rates.append(n / took)
        out[concurrency] = sorted(rates)[len(rates) // 2]  # median
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=None, help="local HF checkpoint (default: the tiny Qwen3 model)")
    ap.add_argument("--tokens", type=int, default=64, help="tokens generated per request")
    ap.add_argument("--rounds", type=int, default=3, help="repetitions per concurrency level (median reported)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="engine-bench-"))
    model = args.model
    if model is None:
        from engine.tiny_qwen3 import ensure_tiny_model

        model = ensure_tiny_model(work / "tiny-qwen3")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENCLAW_RL_")} | {
        "OPENCLAW_RL_DATA_DIR": str(work)
    }
    proc = subprocess.Popen(
        CLI + ["engine", "--model", str(model), "--port", str(port)],
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_http(f"{url}/health", timeout=300, proc=proc)
        rates = asyncio.run(measure(url, args.tokens, args.rounds))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    print(f"model: {model}   tokens/request: {args.tokens}   cpu cores: {os.cpu_count()}")
    print(f"{'concurrency':>12} {'tokens/s':>10} {'vs 1':>6}")
    for c, r in rates.items():
        print(f"{c:>12} {r:>10.1f} {r / rates[1]:>5.2f}x")
    print(f"batching speed-up at 16 concurrent requests: {rates[16] / rates[1]:.2f}x")


if __name__ == "__main__":
    main()
