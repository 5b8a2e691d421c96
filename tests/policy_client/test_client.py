"""PolicyClient against the real engine and against SGLang's recorded wire format."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from policy_client import PolicyClient, PolicyRequestError, PolicyUnavailableError, SamplingParams
from policy_client.chat import ChatRenderer

FIXTURE = json.loads((Path(__file__).parents[1] / "fixtures" / "sglang_generate_response.json").read_text())


@pytest.fixture()
async def client(engine_url):
    async with PolicyClient([engine_url], max_attempts=2, backoff_s=0.01) as c:
        yield c


async def test_generate_returns_server_tokens_and_logprobs(client, tiny_model):
    chat = ChatRenderer(tiny_model)
    prompt = chat.render([{"role": "user", "content": "hello"}])
    gen = await client.generate(prompt, SamplingParams(max_new_tokens=10, temperature=0.9))
    assert len(gen.output_ids) == len(gen.output_logprobs) == 10
    assert all(lp <= 0 for lp in gen.output_logprobs)
    assert gen.weight_version == "0" and gen.prompt_tokens == len(prompt)


async def test_stream_ends_with_the_non_streamed_answer(client):
    greedy = SamplingParams(max_new_tokens=7, temperature=0)
    snaps = [s async for s in client.generate_stream([9707, 1879], greedy)]
    whole = await client.generate([9707, 1879], greedy)
    assert snaps[-1].output_ids == whole.output_ids and snaps[-1].finish_reason is not None
    # incremental: each event carries only its new tokens, which add up to the answer. One token per event when the
    # client keeps up; tokens that queue behind a slow write go out as one event (the engine's rule), so on a busy
    # machine an event may carry two: the count of events is not asserted, only that it streamed.
    assert all(s.new_ids for s in snaps) and len(snaps) > 1
    assert [t for s in snaps for t in s.new_ids] == whole.output_ids


async def test_score_equals_the_engines_input_logprobs(client, engine_url):
    ids = [9707, 1879, 11, 1246, 525, 498, 30]
    scores = await client.score(ids, start=3)
    raw = httpx.post(
        f"{engine_url}/generate",
        json={
            "input_ids": ids,
            "sampling_params": {"max_new_tokens": 0},
            "return_logprob": True,
            "logprob_start_len": 3,
        },
    ).json()
    assert scores == [e[0] for e in raw["meta_info"]["input_token_logprobs"]]
    assert len(scores) == 4


async def test_4xx_fails_at_once_with_the_servers_reason(client):
    with pytest.raises(PolicyRequestError) as err:
        await client.update_weights_from_disk("/missing/checkpoint", "3")
    assert err.value.status == 400 and "/missing/checkpoint" in err.value.reason


async def test_model_info_and_health(client, tiny_model):
    assert (await client.model_info()).model_path == str(tiny_model)
    assert all((await client.health()).values())


# ---- the recorded SGLang wire format, replayed (stands in for a GPU server) ----


def _replaying(handler) -> PolicyClient:
    return PolicyClient(
        ["http://sglang-gpu:30000"], transport=httpx.MockTransport(handler), max_attempts=3, backoff_s=0.0
    )


async def test_parses_a_recorded_sglang_answer():
    seen: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(200, json=FIXTURE)

    async with _replaying(handler) as c:
        gen = await c.generate(
            [1, 2, 3], SamplingParams(max_new_tokens=64, temperature=0.6, top_p=0.95, stop=["</answer>"])
        )
    assert gen.output_ids == FIXTURE["output_ids"]
    assert gen.output_logprobs == [e[0] for e in FIXTURE["meta_info"]["output_token_logprobs"]]
    assert gen.finish_reason.type == "stop" and gen.finish_reason.matched == 151645
    assert gen.weight_version == "default"
    # the request is SGLang's native shape: token ids in, only non-default sampling fields
    assert seen[0] == {
        "input_ids": [1, 2, 3],
        "sampling_params": {"max_new_tokens": 64, "temperature": 0.6, "top_p": 0.95, "stop": ["</answer>"]},
        "return_logprob": True,
    }


async def test_retries_5xx_and_connection_errors_then_succeeds():
    calls = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] == 1:
            raise httpx.ConnectError("connection refused", request=request)
        if calls["n"] == 2:
            return httpx.Response(503, json={"error": {"message": "server busy"}})
        return httpx.Response(200, json=FIXTURE)

    async with _replaying(handler) as c:
        gen = await c.generate([1], SamplingParams())
    assert calls["n"] == 3 and gen.text == FIXTURE["text"]


async def test_gives_up_after_max_attempts():
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, text="boom")

    async with _replaying(handler) as c:
        with pytest.raises(PolicyUnavailableError, match="3 attempts"):
            await c.generate([1], SamplingParams())


async def test_400_is_not_retried():
    calls = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        return httpx.Response(
            400,
            json={
                "error": {
                    "message": "The input (40000 tokens) is longer than the model's context length (32768 tokens)."
                }
            },
        )

    async with _replaying(handler) as c:
        with pytest.raises(PolicyRequestError, match="context length"):
            await c.generate([1], SamplingParams())
    assert calls["n"] == 1


async def test_update_goes_to_every_server():
    hits: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        hits.append(f"{request.url.host}{request.url.path}")
        return httpx.Response(
            200, json={"success": True, "message": "Succeeded to update model weights.", "num_paused_requests": 0}
        )

    c = PolicyClient(["http://gpu-a:30000", "http://gpu-b:30000"], transport=httpx.MockTransport(handler))
    async with c:
        results = await c.update_weights_from_disk("/ckpt/v3", "3")
    assert sorted(hits) == ["gpu-a/update_weights_from_disk", "gpu-b/update_weights_from_disk"]
    assert all(r.success for r in results)
