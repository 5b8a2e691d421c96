"""Incremental streaming (issue 14): every event carries only what is new, and reassembles to the whole answer."""

from __future__ import annotations

import json
import random

import httpx
import pytest

from policy_client import PolicyClient, SamplingParams
from policy_client.detok import IncrementalDetokenizer

PROMPT = [9707, 1879, 11, 1246, 525, 498, 30]


@pytest.fixture()
async def client(engine_url):
    async with PolicyClient([engine_url], max_attempts=2, backoff_s=0.01) as c:
        yield c


def events(url: str, body: dict, headers: dict | None = None) -> list[dict]:
    out = []
    with httpx.stream("POST", f"{url}/generate", json=body | {"stream": True}, headers=headers, timeout=120) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data:") and line[5:].strip() != "[DONE]":
                out.append(json.loads(line[5:]))
    return out


@pytest.mark.parametrize(
    "sampling",
    [
        {"max_new_tokens": 40, "temperature": 0, "ignore_eos": True},
        {"max_new_tokens": 40, "temperature": 0, "ignore_eos": True, "stop": [" the", "."]},
        {"max_new_tokens": 1, "temperature": 0},
    ],
)
def test_incremental_events_carry_only_new_tokens_and_reassemble_to_the_answer(engine_url, sampling):
    body = {"input_ids": PROMPT, "sampling_params": sampling, "return_logprob": True}
    whole = httpx.post(f"{engine_url}/generate", json=body, timeout=120).json()
    evs = events(engine_url, body, {"X-Openclaw-Stream": "incremental"})
    ids = [t for e in evs for t in e["output_ids"]]
    lps = [x for e in evs for x in e["meta_info"]["output_token_logprobs"]]
    text = "".join(e["text"] for e in evs)
    assert ids == whole["output_ids"]
    assert [x[1] for x in lps] == ids
    assert [x[0] for x in lps] == pytest.approx([x[0] for x in whole["meta_info"]["output_token_logprobs"]], abs=1e-5)
    assert text == whole["text"]
    assert evs[-1]["meta_info"]["finish_reason"] == whole["meta_info"]["finish_reason"]
    # SGLang's incremental format: completion_tokens counts everything so far, output_ids only the new ones
    seen = 0
    for e in evs:
        seen += len(e["output_ids"])
        assert e["meta_info"]["completion_tokens"] == seen
        assert len(e["meta_info"]["output_token_logprobs"]) == len(e["output_ids"])
    # one token per event while the server keeps up; events that queued up behind a slow write go out joined
    assert all(len(e["output_ids"]) >= 1 for e in evs[:-1])


def test_without_the_header_the_stream_stays_cumulative_as_sglangs_default(engine_url):
    body = {"input_ids": PROMPT, "sampling_params": {"max_new_tokens": 5, "temperature": 0, "ignore_eos": True}}
    evs = events(engine_url, body)
    lengths = [len(e["output_ids"]) for e in evs]  # each a snapshot of all so far (queued ones: the latest)
    assert lengths == sorted(set(lengths)) and lengths[-1] == 5 and lengths[0] >= 1
    assert httpx.get(f"{engine_url}/get_server_info").json()["incremental_streaming_output"] is False


async def test_policy_client_streams_incrementally_to_the_non_streamed_answer(client):
    sampling = SamplingParams(max_new_tokens=30, temperature=0, ignore_eos=True)
    whole = await client.generate(PROMPT, sampling)
    new_ids: list[list[int]] = []
    last = None
    async for g in client.generate_stream(PROMPT, sampling):
        new_ids.append(list(g.new_ids))
        last = g
    assert all(new_ids[:-1]) and sum(len(x) for x in new_ids) == 30  # one per event unless they queued up
    assert last.output_ids == whole.output_ids == [t for x in new_ids for t in x]
    assert last.output_logprobs == pytest.approx(whole.output_logprobs, abs=1e-5)
    assert last.text == whole.text and last.finish_reason == whole.finish_reason


async def test_policy_client_still_understands_cumulative_snapshots():
    """An SGLang server without --incremental-streaming-output sends snapshots: the client takes what each adds."""
    ids = [11, 12, 13, 14]
    texts = ["a", "ab", "abc", "abcd"]

    def handler(request: httpx.Request) -> httpx.Response:
        chunks = []
        for n in range(1, 5):
            meta = {
                "id": "x",
                "finish_reason": {"type": "length", "length": 4} if n == 4 else None,
                "prompt_tokens": 3,
                "completion_tokens": n,
                "output_token_logprobs": [[-0.5 * (i + 1), t, None] for i, t in enumerate(ids[:n])],
            }
            chunks.append(f"data: {json.dumps({'text': texts[n - 1], 'output_ids': ids[:n], 'meta_info': meta})}\n\n")
        chunks.append("data: [DONE]\n\n")
        return httpx.Response(200, content="".join(chunks).encode(), headers={"content-type": "text/event-stream"})

    async with PolicyClient(["http://sglang:30000"], transport=httpx.MockTransport(handler)) as c:
        gens = [(list(g.new_ids), g.new_text) async for g in c.generate_stream([1, 2, 3], SamplingParams())]
        assert gens == [([11], "a"), ([12], "b"), ([13], "c"), ([14], "d")]
        last = None
        async for g in c.generate_stream([1, 2, 3], SamplingParams()):
            last = g
    assert last.output_ids == ids and last.output_logprobs == [-0.5, -1.0, -1.5, -2.0] and last.text == "abcd"
    assert last.finish_reason.type == "length"


def test_incremental_detokenizer_matches_a_whole_decode(tiny_model):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    samples = [tok.encode("héllo wörld 世界 🎉🎉 done"), [9707, 1879, 151645, 11, 1246]]
    rng = random.Random(5)
    samples += [[rng.randrange(0, 151000) for _ in range(200)] for _ in range(3)]
    for ids in samples:
        for skip in (True, False):
            d = IncrementalDetokenizer(tok, skip)
            text = "".join(d.push(t) for t in ids) + d.flush()
            assert text == tok.decode(ids, skip_special_tokens=skip)


async def test_events_queued_behind_a_slow_write_go_out_as_one():
    """The server's event loop fell behind the engine: three deltas wait, then the answer completes."""
    import asyncio

    from engine.model_runner import WorkResult
    from engine.server import _stream

    def result(ids: list[int], text: str, done: bool = False) -> WorkResult:
        return WorkResult(
            rid="r",
            text=text,
            output_ids=ids,
            prompt_tokens=3,
            finish_reason=None,
            weight_version="0",
            output_token_logprobs=[[-0.5, t, None] for t in ids],
            completion_tokens=None if done else 0,
        )

    async def collect(incremental: bool, finish_early: bool) -> list[dict]:
        updates: asyncio.Queue = asyncio.Queue()
        answer = asyncio.get_running_loop().create_future()
        deltas = [result([1], "a"), result([2], "b"), result([3], "c")]
        snapshots = [result([1], "a"), result([1, 2], "ab"), result([1, 2, 3], "abc")]
        for event in deltas if incremental else snapshots:
            updates.put_nowait(event)
        if finish_early:
            answer.set_result(result([1, 2, 3, 4], "abcd", done=True))
            updates.put_nowait(None)  # what the stream's done-callback queues when the engine finishes
        out = []
        async for chunk in _stream(answer, updates, incremental):
            if chunk.startswith("data: {"):
                out.append(json.loads(chunk[6:]))
            if not finish_early and not answer.done():
                answer.set_result(result([1, 2, 3, 4], "abcd", done=True))
        return out

    joined, final = await collect(incremental=True, finish_early=False)
    assert (joined["output_ids"], joined["text"]) == ([1, 2, 3], "abc")
    assert [x[1] for x in joined["meta_info"]["output_token_logprobs"]] == [1, 2, 3]
    assert (final["output_ids"], final["text"]) == ([4], "d")
    latest, final = await collect(incremental=False, finish_early=False)
    assert (latest["output_ids"], final["output_ids"]) == ([1, 2, 3], [1, 2, 3, 4])
    # The answer completed while they waited: its final event carries everything, once.
    (only,) = await collect(incremental=True, finish_early=True)
    assert (only["output_ids"], only["text"]) == ([1, 2, 3, 4], "abcd")
