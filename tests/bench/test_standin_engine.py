"""The stand-in engine speaks SGLang's /generate wire format, streamed and not, with its fixed time per token."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from bench.standin_engine import StandinConfig, StandinServer, answer_for
from openclaw_rl.ports import free_port
from policy_client.wire import GenerateRequest, SamplingParams

MS_PER_TOKEN = 20.0


def test_generate_in_sglang_shape_with_the_configured_delay(tiny_model: Path) -> None:
    fixture = json.loads((Path(__file__).parents[1] / "fixtures" / "sglang_generate_response.json").read_text())
    with StandinServer(StandinConfig(tokenizer_path=tiny_model, ms_per_token=MS_PER_TOKEN), free_port()) as server:
        req = GenerateRequest(input_ids=[1, 2, 3], sampling_params=SamplingParams(max_new_tokens=64),
                              return_logprob=True, logprob_start_len=0)  # fmt: skip
        t = time.perf_counter()
        body = httpx.post(f"{server.url}/generate", json=req.model_dump(exclude_none=True), timeout=30).json()
        took_ms = (time.perf_counter() - t) * 1000
        assert set(fixture) - {"_source"} <= set(body)
        meta = body["meta_info"]
        assert {"finish_reason", "prompt_tokens", "completion_tokens", "weight_version"} <= set(meta)
        n = meta["completion_tokens"]
        assert n == len(body["output_ids"]) == len(meta["output_token_logprobs"]) > 1
        assert len(meta["input_token_logprobs"]) == 3 and meta["finish_reason"]["type"] == "stop"
        assert took_ms >= n * MS_PER_TOKEN

        streamed = req.model_copy(update={"stream": True}).model_dump(exclude_none=True)
        with httpx.stream("POST", f"{server.url}/generate", json=streamed, timeout=30) as r:
            events = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
        assert events[-1] == "[DONE]" and json.loads(events[-2])["output_ids"] == body["output_ids"]

        update = {"model_path": "x", "weight_version": "7"}
        assert httpx.post(f"{server.url}/update_weights_from_disk", json=update).json()["success"]
        assert httpx.get(f"{server.url}/get_weight_version").json()["weight_version"] == "7"


def test_terminal_answers_run_a_command_then_submit() -> None:
    offered = 'tools: {"name": "bash"} {"name": "submit"}'
    assert '"bash"' in answer_for(offered) and "<tool_call>" in answer_for(offered)
    assert '"submit"' in answer_for(offered + "<tool_response>exit 0</tool_response>")
    assert "<tool_call>" not in answer_for("Hello from session 1.")


def test_batch_slots_queue_the_rest_and_the_prefix_cache_counts_what_a_conversation_shares(tiny_model: Path) -> None:
    config = StandinConfig(tokenizer_path=tiny_model, ms_per_token=MS_PER_TOKEN, max_running=1)
    with StandinServer(config, free_port()) as server:
        prompt = list(range(100, 140))  # 40 tokens: two whole blocks of 16

        def generate(ids: list[int]) -> dict:
            req = GenerateRequest(input_ids=ids, sampling_params=SamplingParams(max_new_tokens=4))
            return httpx.post(f"{server.url}/generate", json=req.model_dump(exclude_none=True), timeout=30).json()

        first = generate(prompt)["meta_info"]
        assert first["cached_tokens"] == 0
        # The next turn's prompt begins with this one's: its whole blocks are served from the cache.
        assert generate(prompt + [7, 8, 9])["meta_info"]["cached_tokens"] == 32
        assert generate([9] + prompt)["meta_info"]["cached_tokens"] == 0

        # One slot: two requests at once take two decode times, not one.
        one = first["completion_tokens"] * MS_PER_TOKEN / 1000
        with ThreadPoolExecutor(2) as pool:
            t = time.perf_counter()
            list(pool.map(generate, [[1, 2], [3, 4]]))
            assert time.perf_counter() - t >= 2 * one

        metrics = dict(line.split() for line in httpx.get(f"{server.url}/metrics").text.splitlines())
        assert metrics["sglang:cached_tokens_total"] == "32"
        assert metrics["sglang:prompt_tokens_total"] == str(40 + 43 + 41 + 2 + 2)
        assert metrics["sglang:num_requests_total"] == "5" and metrics["sglang:num_queue_reqs"] == "0"


def test_the_terminal_command_is_the_configured_one() -> None:
    offered = 'tools: {"name": "bash"} {"name": "submit"}'
    assert '"command": "sleep 1"' in answer_for(offered, "sleep 1")
