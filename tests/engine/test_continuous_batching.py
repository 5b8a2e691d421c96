"""Requests join a running batch and leave it when done, without changing anyone's tokens."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest


def greedy(text: str, n: int) -> dict:
    return {
        "text": text,
        "return_logprob": True,
        "sampling_params": {"max_new_tokens": n, "temperature": 0, "ignore_eos": True},
    }


async def _timed(http: httpx.AsyncClient, body: dict, delay: float = 0.0) -> tuple[dict, float]:
    await asyncio.sleep(delay)
    r = await http.post("/generate", json=body)
    assert r.status_code == 200, r.text
    return r.json(), time.perf_counter()


def test_a_short_request_joins_a_long_one_and_finishes_first(engine_url):
    long_body = greedy("Once upon a time, in a land far away", 300)
    short_body = greedy("Hi", 8)

    async def scenario():
        async with httpx.AsyncClient(base_url=engine_url, timeout=300) as http:
            alone_short, _ = await _timed(http, short_body)
            alone_long, _ = await _timed(http, long_body)
            (together_long, t_long), (together_short, t_short) = await asyncio.gather(
                _timed(http, long_body), _timed(http, short_body, delay=0.3)
            )
            return alone_short, alone_long, together_long, together_short, t_long, t_short

    alone_short, alone_long, together_long, together_short, t_long, t_short = asyncio.run(scenario())
    assert t_short < t_long, "the short request waited for the long batch instead of joining it"
    # Joining (cache padding and merging) and leaving (row eviction) change no token and no log-prob.
    assert together_short["output_ids"] == alone_short["output_ids"]
    assert together_long["output_ids"] == alone_long["output_ids"]
    for a, b in ((alone_short, together_short), (alone_long, together_long)):
        la = [e[0] for e in a["meta_info"]["output_token_logprobs"]]
        lb = [e[0] for e in b["meta_info"]["output_token_logprobs"]]
        assert lb == pytest.approx(la, abs=1e-4)
