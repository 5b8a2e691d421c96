"""The engine's prefix cache (issue 14): KV of shared prefixes reused, LRU under a budget, invalidated on new weights.

In-process tests drive DecodeBatch / Scheduler over the tiny model; the HTTP tests check /get_server_info,
/flush_cache and a weight update on a real engine process.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
import torch

from engine.model_runner import DecodeBatch, WorkItem, WorkResult
from engine.prefix_cache import BLOCK_TOKENS, PrefixCache
from engine.scheduler import Scheduler
from policy_client.wire import SamplingParams
from tests.conftest import start_engine

SYSTEM = list(range(1000, 1000 + 5 * BLOCK_TOKENS + 3))  # a shared "system prompt" of 83 tokens


def req(ids: list[int], n: int = 6, temperature: float = 0.0, **kw) -> WorkItem:
    params = SamplingParams(max_new_tokens=n, temperature=temperature, ignore_eos=True)
    return WorkItem(input_ids=list(ids), params=params, return_logprob=True, **kw)


def run(batch: DecodeBatch, items: list[WorkItem]) -> list[WorkResult]:
    """Admit `items` together and decode them to the end; results in the order of `items`."""
    done = batch.add(items)
    while len(batch):
        done += batch.step()
    by_item = {id(it): r for it, r in done}
    return [by_item[id(it)] for it in items]


def lps(r: WorkResult, key: str = "output_token_logprobs") -> list[float]:
    return [e[0] for e in getattr(r, key) if e[0] is not None]


def assert_same(a: WorkResult, b: WorkResult) -> None:
    assert a.output_ids == b.output_ids
    assert lps(a) == pytest.approx(lps(b), abs=1e-5)


def test_a_hit_reuses_the_prefix_and_changes_no_logprob(lm):
    cache = PrefixCache(64 << 20)
    cached = DecodeBatch(lm, torch.Generator().manual_seed(0), prefix_cache=cache)
    plain = DecodeBatch(lm, torch.Generator().manual_seed(0))
    first = run(cached, [req(SYSTEM + [5, 6, 7])])[0]
    assert first.cached_tokens == 0 and cache.blocks == 5  # the whole blocks of the prompt were stored

    q = SYSTEM + [9, 10, 11, 12]
    hit, miss = run(cached, [req(q)])[0], run(plain, [req(q)])[0]
    assert hit.cached_tokens == 5 * BLOCK_TOKENS and miss.cached_tokens == 0
    assert_same(hit, miss)
    stats = cache.stats()
    assert stats["requests"] == 2 and stats["hit_requests"] == 1
    assert stats["cached_tokens"] == 80 and stats["prompt_tokens"] == len(SYSTEM) + 3 + len(q)


def test_sampled_generation_with_a_fixed_seed_is_the_same_with_and_without_hits(lm):
    prompts = [SYSTEM + [20 + i, 30 + i] for i in range(3)]

    def sample(cache: PrefixCache | None) -> list[WorkResult]:
        batch = DecodeBatch(lm, torch.Generator().manual_seed(123), prefix_cache=cache)
        return [run(batch, [req(p, n=8, temperature=0.9)])[0] for p in prompts]

    with_cache, without = sample(PrefixCache(64 << 20)), sample(None)
    assert [r.cached_tokens for r in with_cache] == [0, 80, 80]
    for a, b in zip(with_cache, without):
        assert_same(a, b)


def test_input_logprobs_of_cached_positions_are_computed_not_skipped(lm):
    """A request that wants input log-probs from position s reuses at most s-1 cached tokens (bypass, not skip)."""
    cache = PrefixCache(64 << 20)
    batch = DecodeBatch(lm, torch.Generator().manual_seed(0), prefix_cache=cache)
    run(batch, [req(SYSTEM + [1, 2])])
    prompt = SYSTEM + [3, 4, 5]
    for start in (0, 1, 40, len(SYSTEM) + 1):
        kw = {"logprob_start_len": start, "top_logprobs_num": 2}
        hit = run(batch, [req(prompt, n=2, **kw)])[0]
        ref = run(DecodeBatch(lm, torch.Generator().manual_seed(0)), [req(prompt, n=2, **kw)])[0]
        assert hit.cached_tokens == (max(start - 1, 0) // BLOCK_TOKENS) * BLOCK_TOKENS
        assert len(hit.input_token_logprobs) == len(prompt) - start == len(ref.input_token_logprobs)
        assert [e[1] for e in hit.input_token_logprobs] == prompt[start:]
        assert lps(hit, "input_token_logprobs") == pytest.approx(lps(ref, "input_token_logprobs"), abs=1e-5)
        assert [[t for _, t, _ in tops or []] for tops in hit.input_top_logprobs] == [
            [t for _, t, _ in tops or []] for tops in ref.input_top_logprobs
        ]
        assert_same(hit, ref)


def test_a_sessions_growing_history_hits_the_previous_turn_prompt_and_answer(lm):
    cache = PrefixCache(64 << 20)
    batch = DecodeBatch(lm, torch.Generator().manual_seed(0), prefix_cache=cache)
    plain = DecodeBatch(lm, torch.Generator().manual_seed(0))
    history = list(SYSTEM)
    cached_per_turn = []
    for turn in range(4):
        history += [400 + turn, 401, 402]  # the user's message
        hit, ref = run(batch, [req(history, n=20)])[0], run(plain, [req(history, n=20)])[0]
        assert_same(hit, ref)
        cached_per_turn.append(hit.cached_tokens)
        # the next turn resends the answer: all of it but its last token was cached when the turn finished
        assert cache.match(history + hit.output_ids, 10**9, cache.generation)[0] == (
            (len(history) + len(hit.output_ids) - 1) // BLOCK_TOKENS * BLOCK_TOKENS
        )
        history += hit.output_ids
    assert cached_per_turn[0] == 0
    for turn in range(1, 4):  # every later turn reuses everything before the new message, in whole blocks
        assert cached_per_turn[turn] > cached_per_turn[turn - 1] >= 0
        assert cached_per_turn[turn] >= len(SYSTEM) - BLOCK_TOKENS


def test_prompts_admitted_together_compute_a_shared_prefix_once(lm):
    cache = PrefixCache(64 << 20)
    batch = DecodeBatch(lm, torch.Generator().manual_seed(0), prefix_cache=cache)
    items = [req(SYSTEM + [50 + i] * (1 + i)) for i in range(3)]  # three lengths: three groups
    results = run(batch, items)
    assert [r.cached_tokens for r in results] == [0, 80, 80]
    refs = [run(DecodeBatch(lm, torch.Generator().manual_seed(0)), [req(it.input_ids)])[0] for it in items]
    for a, b in zip(results, refs):
        assert_same(a, b)


def test_lru_eviction_keeps_the_cache_under_its_budget(lm):
    block_bytes = PrefixCache(1 << 30)
    probe = DecodeBatch(lm, torch.Generator().manual_seed(0), prefix_cache=block_bytes)
    run(probe, [req(list(range(2000, 2000 + BLOCK_TOKENS)), n=1)])
    one_block = block_bytes.bytes
    assert one_block > 0

    cache = PrefixCache(6 * one_block)  # room for 6 blocks
    batch = DecodeBatch(lm, torch.Generator().manual_seed(0), prefix_cache=cache)
    a, b, c = ([base + i for i in range(3 * BLOCK_TOKENS + 1)] for base in (3000, 4000, 5000))
    run(batch, [req(a, n=1)])
    run(batch, [req(b, n=1)])
    assert cache.blocks == 6 and cache.bytes <= cache.budget
    run(batch, [req(a + [1], n=1)])  # touch a: b is now the least recently used
    run(batch, [req(c, n=1)])
    assert cache.bytes <= cache.budget and cache.evicted_blocks == 3
    assert cache.match(a + [1], 10**9, cache.generation)[0] == 3 * BLOCK_TOKENS  # a survived
    assert cache.match(c + [1], 10**9, cache.generation)[0] == 3 * BLOCK_TOKENS  # c is in
    assert cache.match(b + [1], 10**9, cache.generation)[0] == 0  # b was evicted, leaves first


def test_a_budget_of_zero_disables_the_cache(lm):
    cache = PrefixCache(0)
    batch = DecodeBatch(lm, torch.Generator().manual_seed(0), prefix_cache=cache)
    run(batch, [req(SYSTEM)])
    assert run(batch, [req(SYSTEM + [1])])[0].cached_tokens == 0 and cache.bytes == 0


async def test_a_weight_swap_invalidates_and_draining_rows_neither_read_nor_fill_the_new_cache(lm, lm_v1):
    sched = Scheduler(lm, max_batch_size=4, batch_window_ms=0, prefix_cache_mb=64)
    sched.start()
    try:
        loop = asyncio.get_running_loop()
        await sched.submit([req(SYSTEM + [1, 2], n=2)])  # v0 KV of SYSTEM in the cache
        assert sched.prefix_cache.blocks > 0
        progressed = asyncio.Event()
        long_item = req(
            SYSTEM + [7, 7],
            n=60,
            on_progress=lambda s: len(s.output_ids) >= 3 and loop.call_soon_threadsafe(progressed.set),
        )
        long_task = asyncio.ensure_future(sched.submit([long_item]))
        await asyncio.wait_for(progressed.wait(), timeout=60)
        await asyncio.wait_for(sched.swap(lm_v1), timeout=60)
        assert sched.prefix_cache.blocks == 0 and sched.prefix_cache.generation == 1

        fresh = (await sched.submit([req(SYSTEM + [3, 4], n=2)]))[0]  # on v1, while the old row drains
        assert fresh.weight_version == "1" and fresh.cached_tokens == 0  # no v0 KV served to v1
        old = (await long_task)[0]
        assert old.weight_version == "0" and old.cached_tokens == 80  # it started on v0 with v0's cache
        # The drained row's v0 prompt and answer were not inserted: what is cached is v1's only.
        v1_ref = run(DecodeBatch(lm_v1, torch.Generator().manual_seed(0)), [req(SYSTEM + [9], n=2)])[0]
        again = (await sched.submit([req(SYSTEM + [9], n=2)]))[0]
        assert again.cached_tokens == 80 and again.weight_version == "1"
        assert_same(again, v1_ref)
        assert sched.prefix_cache.match(SYSTEM + [7, 7] + old.output_ids, 10**9, 1)[0] == 80  # SYSTEM only
    finally:
        sched.stop()


# ---- over HTTP ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cached_engine(tiny_model, tmp_path_factory):
    proc, url = start_engine(
        tiny_model, tmp_path_factory.mktemp("prefix-engine"), OPENCLAW_RL_ENGINE__PREFIX_CACHE_MB="64"
    )
    yield url
    proc.terminate()
    proc.wait(timeout=30)


def test_server_info_reports_hit_rates_and_flush_cache_empties_it(cached_engine):
    body = {
        "input_ids": SYSTEM + [1, 2, 3],
        "sampling_params": {"max_new_tokens": 2, "temperature": 0},
        "return_logprob": True,
    }
    with httpx.Client(base_url=cached_engine, timeout=120) as http:
        first = http.post("/generate", json=body).json()
        second = http.post("/generate", json=body).json()
        assert first["meta_info"]["cached_tokens"] == 0 and second["meta_info"]["cached_tokens"] == 80
        info = http.get("/get_server_info").json()
        pc = info["prefix_cache"]
        assert pc["enabled"] and pc["requests"] == 2 and pc["hit_requests"] == 1 and pc["request_hit_rate"] == 0.5
        assert pc["cached_tokens"] == 80 and pc["token_hit_rate"] == pytest.approx(
            80 / (2 * len(body["input_ids"])), abs=1e-5
        )
        assert pc["bytes"] > 0 and info["disable_radix_cache"] is False
        # what the engine serves in: float32 on CPU, and no GPU memory to report
        assert info["device"] == "cpu" and info["dtype"] == "float32" and info["device_memory"] is None

        assert http.post("/flush_cache").text == "Cache flushed."
        assert http.get("/get_server_info").json()["prefix_cache"]["bytes"] == 0
        third = http.post("/generate", json=body).json()
        assert third["meta_info"]["cached_tokens"] == 0
        assert [e[0] for e in third["meta_info"]["output_token_logprobs"]] == pytest.approx(
            [e[0] for e in second["meta_info"]["output_token_logprobs"]], abs=1e-5
        )


def test_a_remembered_lookup_follows_inserts_evictions_and_flushes():
    def kv(tokens: int):
        return [(torch.randn(2, tokens, 8), torch.randn(2, tokens, 8))]

    block_bytes = 2 * 2 * BLOCK_TOKENS * 8 * 4
    cache = PrefixCache(4 * block_bytes)
    ids = list(range(6 * BLOCK_TOKENS))
    assert cache.match_len(ids, len(ids), 0) == 0
    cache.insert(ids[: 2 * BLOCK_TOKENS], kv(2 * BLOCK_TOKENS), 0)
    assert cache.match_len(ids, len(ids), 0) == 2 * BLOCK_TOKENS  # the same list asked again sees the insert
    assert cache.match(ids, len(ids), 0)[0] == 2 * BLOCK_TOKENS
    cache.insert(ids, kv(len(ids)), 0)  # 6 blocks into room for 4: the deepest go
    assert cache.match_len(ids, len(ids), 0) == 4 * BLOCK_TOKENS
    assert cache.match_len(ids, 3 * BLOCK_TOKENS, 0) == 3 * BLOCK_TOKENS  # another limit, another answer
    cache.clear()
    assert cache.match(ids, len(ids), 0) == (0, None)


def test_the_default_budget_holds_openclaw_prompts_of_the_served_model_on_a_gpu(monkeypatch):
    from types import SimpleNamespace

    from engine import prefix_cache

    qwen3_1_7b = SimpleNamespace(num_attention_heads=16, num_key_value_heads=8, head_dim=128, num_hidden_layers=28)
    assert prefix_cache.kv_bytes_per_token(qwen3_1_7b, torch.bfloat16) == 112 * 1024
    cpu, gpu = torch.device("cpu"), torch.device("cuda")
    assert prefix_cache.budget_bytes(64, qwen3_1_7b, torch.bfloat16, gpu) == 64 * 2**20  # a set value is the value
    assert prefix_cache.budget_bytes(None, qwen3_1_7b, torch.float32, cpu) == 512 * 2**20
    card = SimpleNamespace(total_memory=80 * 2**30)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: card)
    auto = prefix_cache.budget_bytes(None, qwen3_1_7b, torch.bfloat16, gpu)
    assert auto == 7 * 2**30 and auto // (11_000 * 112 * 1024) == 5  # five 11K-token prompts fit
    card.total_memory = 24 * 2**30  # a smaller card: at most 15% of it
    assert prefix_cache.budget_bytes(None, qwen3_1_7b, torch.bfloat16, gpu) == int(24 * 2**30 * 0.15)
