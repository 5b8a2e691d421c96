"""Embedded engine throughput: generated tokens/s at 1, 4 and 16 concurrent requests.

Starts a real engine process on the tiny Qwen3 model (or --model PATH), sends
N concurrent /generate requests of a fixed length (ignore_eos, so every request
generates exactly --tokens tokens), and prints tokens/s and the speed-up that
dynamic batching gives over one request at a time.

    .venv/bin/python benchmarks/engine_throughput.py [--model PATH] [--tokens 64] [--rounds 3]

With --serving (issue 14's engine figures), also:
  - shared prefix: 16 simultaneous requests sharing a 2,000-char and a 40,000-char prefix (the OpenClaw system
    prompt's size), each with its own short question; p50 latency cold (the prefix is new) and warm (cached),
    the median over --rounds new prefixes;
  - sessions: 16 sessions of --turns-per-session turns over a 40,000-char system prompt, each turn resending the
    whole history (previous answers included); p50 latency and cached share of the prompt per turn index;
  - streaming: one --stream-tokens answer streamed through PolicyClient (incremental) vs the same non-streamed,
    --rounds pairs alternating; the median ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.qwen3_shapes import SHAPES, bench_model, start_engine  # noqa: E402

SYSTEM_UNIT = "You are a personal agent. Follow the user's instructions carefully and use the tools you are given. "


def system_prompt(chars: int) -> str:
    return (SYSTEM_UNIT * (chars // len(SYSTEM_UNIT) + 1))[:chars]


def p50(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


async def timed_generate(http: httpx.AsyncClient, body: dict) -> tuple[float, dict]:
    t = time.perf_counter()
    r = await http.post("/generate", json=body)
    took = time.perf_counter() - t
    r.raise_for_status()
    return took, r.json()


async def shared_prefix(url: str, chars: int, tokens: int, rounds: int) -> tuple[float, float]:
    """p50 latency of 16 simultaneous requests sharing a `chars`-char prefix: cold (a prefix the engine has not
    seen), then warm (the same prefix, other questions). Each of `rounds` rounds takes a new prefix; the median of
    the rounds' p50s is reported."""
    cold, warm = [], []
    async with httpx.AsyncClient(base_url=url, timeout=1200) as http:
        for r in range(rounds):
            system = f"Round {r}. " + system_prompt(chars)
            for phase, out in (("cold", cold), ("warm", warm)):
                bodies = [
                    {
                        "text": f"{system}\nQuestion {phase} {i}: what should I do next?",
                        "sampling_params": {"max_new_tokens": tokens, "temperature": 0, "ignore_eos": True},
                    }
                    for i in range(16)
                ]
                took = await asyncio.gather(*(timed_generate(http, b) for b in bodies))
                out.append(p50([t for t, _ in took]))
    return statistics.median(cold), statistics.median(warm)


async def sessions(url: str, chars: int, turns: int, tokens: int) -> list[tuple[float, float, int]]:
    """Per turn index: (p50 latency, cached share of the prompt, mean prompt tokens) over 16 sessions."""
    system = system_prompt(chars)
    per_turn: list[list[tuple[float, float, int]]] = [[] for _ in range(turns)]

    async def one(http: httpx.AsyncClient, s: int) -> None:
        history = f"<|im_start|>system\n{system}<|im_end|>\n"
        for t in range(turns):
            history += f"<|im_start|>user\nsession {s} question {t}: what next?<|im_end|>\n<|im_start|>assistant\n"
            body = {
                "text": history,
                "sampling_params": {"max_new_tokens": tokens, "temperature": 0, "ignore_eos": True},
            }
            took, ans = await timed_generate(http, body)
            meta = ans["meta_info"]
            per_turn[t].append((took, meta["cached_tokens"] / meta["prompt_tokens"], meta["prompt_tokens"]))
            history += ans["text"] + "<|im_end|>\n"

    async with httpx.AsyncClient(base_url=url, timeout=1200) as http:
        await asyncio.gather(*(one(http, s) for s in range(16)))
    return [
        (p50([x[0] for x in xs]), sum(x[1] for x in xs) / len(xs), sum(x[2] for x in xs) // len(xs)) for xs in per_turn
    ]


async def streaming(url: str, tokens: int, pairs: int = 1) -> list[tuple[float, float]]:
    """Seconds for one `tokens`-token answer non-streamed, then streamed (incremental) through PolicyClient; `pairs`
    times, alternating, so a drift of the machine's speed touches both sides of each ratio alike."""
    from policy_client import PolicyClient, SamplingParams

    params = SamplingParams(max_new_tokens=tokens, temperature=0, ignore_eos=True)
    out = []
    async with PolicyClient([url], request_timeout_s=1200) as client:
        ids = list(range(1000, 1020))
        await client.generate(ids, SamplingParams(max_new_tokens=4))  # warm-up
        for _ in range(pairs):
            t = time.perf_counter()
            whole = await client.generate(ids, params)
            plain = time.perf_counter() - t
            t = time.perf_counter()
            last = None
            async for g in client.generate_stream(ids, params):
                last = g
            streamed = time.perf_counter() - t
            assert last is not None and last.output_ids == whole.output_ids
            out.append((plain, streamed))
    return out


async def long_prefix(url: str, prefix_tokens: int, rows: int, tokens: int) -> dict:
    """Decode tokens/s of `rows` requests at once that share a `prefix_tokens`-token prefix (an OpenClaw prompt is
    ~11K tokens), each with its own short question, the prefix already cached (a session's next turn): the
    difference between answers of `tokens` + 1 tokens and of 1 token, so prefill is not counted."""
    prefix = [1000 + (i * 7919) % 30000 for i in range(prefix_tokens)]

    def bodies(n: int, salt: int) -> list[dict]:
        return [
            {
                "input_ids": prefix + [500 + salt, 600 + i, 700 + i],
                "sampling_params": {"max_new_tokens": n, "temperature": 1.0, "ignore_eos": True},
            }
            for i in range(rows)
        ]

    async with httpx.AsyncClient(base_url=url, timeout=1200) as http:
        await timed_generate(http, bodies(1, 0)[0])  # the prefix into the cache
        started = time.perf_counter()
        await asyncio.gather(*(timed_generate(http, b) for b in bodies(1, 1)))
        first = time.perf_counter() - started
        started = time.perf_counter()
        answers = await asyncio.gather(*(timed_generate(http, b) for b in bodies(tokens + 1, 2)))
        whole = time.perf_counter() - started
    cached = [a["meta_info"]["cached_tokens"] for _, a in answers]
    decode_s = max(whole - first, 1e-9)
    return {
        "prefix_tokens": prefix_tokens,
        "rows": rows,
        "tokens": tokens,
        "first_token_s": first,
        "whole_s": whole,
        "decode_tokens_per_s": rows * tokens / decode_s,
        "cached_share": sum(cached) / (rows * (prefix_tokens + 3)),
    }


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


async def measure(url: str, tokens: int, rounds: int, levels: list[int]) -> dict[int, float]:
    await burst(url, 2, 4)  # warm-up
    out = {}
    for concurrency in levels:
        rates = []
        for _ in range(rounds):
            n, took = await burst(url, concurrency, tokens)
            rates.append(n / took)
        out[concurrency] = sorted(rates)[len(rates) // 2]  # median
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=None, help="local HF checkpoint (default: the tiny Qwen3 model)")
    ap.add_argument("--shape", choices=sorted(SHAPES), default=None, help="a random model of a Qwen3 size (GPU)")
    ap.add_argument("--levels", default="1,4,16", help="concurrency levels, comma-separated (the first is the base)")
    ap.add_argument("--engine-log", type=Path, default=None, help="write the engine's log here")
    ap.add_argument("--tokens", type=int, default=64, help="tokens generated per request")
    ap.add_argument("--rounds", type=int, default=3, help="repetitions per concurrency level (median reported)")
    ap.add_argument("--serving", action="store_true", help="also the prefix-cache, session and streaming figures")
    ap.add_argument("--turns-per-session", type=int, default=4, help="turns of each session (--serving)")
    ap.add_argument("--stream-tokens", type=int, default=2000, help="answer length of the streaming case (--serving)")
    ap.add_argument(
        "--long-prefix",
        type=int,
        default=0,
        help="also decode tokens/s of 16 requests sharing a prefix of this many tokens (11000: OpenClaw's prompts)",
    )
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="engine-bench-"))
    model = bench_model(args.model, args.shape, work)
    levels = [int(x) for x in args.levels.split(",")]
    proc, url = start_engine(model, work, args.engine_log, timeout_s=300)
    try:
        rates = asyncio.run(measure(url, args.tokens, args.rounds, levels))
        shared = asyncio.run(long_prefix(url, args.long_prefix, 16, args.tokens)) if args.long_prefix else None
        info = httpx.get(f"{url}/get_server_info", timeout=30).json()
        if args.serving:
            prefix = {chars: asyncio.run(shared_prefix(url, chars, 16, args.rounds)) for chars in (2000, 40000)}
            turns = asyncio.run(sessions(url, 40000, args.turns_per_session, 16))
            stream_pairs = asyncio.run(streaming(url, args.stream_tokens, args.rounds))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    print(f"model: {model}   tokens/request: {args.tokens}   cpu cores: {os.cpu_count()}")
    print(f"engine device: {info.get('device', '?')}   dtype: {info.get('dtype', '?')}")
    if info.get("device_memory"):
        mem = info["device_memory"]
        print(f"GPU memory: peak {mem['peak_allocated_gib']:.1f} GiB allocated, {mem['reserved_gib']:.1f} GiB reserved")
    base, top = levels[0], levels[-1]
    print(f"{'concurrency':>12} {'tokens/s':>10} {'vs ' + str(base):>6}")
    for c, r in rates.items():
        print(f"{c:>12} {r:>10.1f} {r / rates[base]:>5.2f}x")
    print(f"batching speed-up at {top} concurrent requests: {rates[top] / rates[base]:.2f}x")
    if shared:
        print(
            f"16 requests sharing a {shared['prefix_tokens']}-token cached prefix: {shared['decode_tokens_per_s']:.0f} "
            f"decode tokens/s ({shared['cached_share'] * 100:.0f}% of prompts cached; first token "
            f"{shared['first_token_s'] * 1000:.0f} ms)"
        )
    if args.json:
        args.json.write_text(
            json.dumps({"device": info.get("device"), "dtype": info.get("dtype"), "rates": rates, "shared": shared})
        )
    if not args.serving:
        return
    print(f"\n16 simultaneous requests sharing a prefix, 16 greedy tokens each (p50 latency, median of {args.rounds}):")
    for chars, (cold, warm) in prefix.items():
        print(f"  {chars:>6}-char prefix: cold {cold * 1000:8.1f} ms   warm {warm * 1000:8.1f} ms")
    ratio_cold = prefix[40000][0] / prefix[2000][0]
    ratio_warm = prefix[40000][1] / prefix[2000][1]
    print(f"  40,000 / 2,000 chars: cold {ratio_cold:.2f}x   warm {ratio_warm:.2f}x   (target: at most 1.5x)")
    print("\n16 sessions, 40,000-char system prompt, history growing, 16 greedy tokens per turn:")
    print(f"  {'turn':>4} {'prompt tokens':>14} {'cached':>8} {'p50 latency':>12}")
    for i, (lat, cached, prompt) in enumerate(turns):
        print(f"  {i:>4} {prompt:>14} {cached * 100:>7.1f}% {lat * 1000:>10.1f}ms")
    print(f"\nstreaming one {args.stream_tokens}-token answer ({args.rounds} pairs, alternating):")
    for plain, streamed in stream_pairs:
        print(f"  non-streamed {plain:6.2f}s   streamed {streamed:6.2f}s   {streamed / plain:.2f}x")
    ratio = statistics.median(streamed / plain for plain, streamed in stream_pairs)  # even --rounds: the mean of two
    print(f"  median {ratio:.2f}x   (target: at most 1.2x)")


if __name__ == "__main__":
    main()
