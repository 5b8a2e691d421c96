"""Chunked prefill (issue 14): a long prompt is prefilled a chunk at a time between decode steps of the running
rows, with the same log-probs as one whole prefill. Steps are counted, never timed."""

from __future__ import annotations

import asyncio

import pytest
import torch

from engine.model_runner import DecodeBatch, WorkItem, WorkResult
from engine.prefix_cache import BLOCK_TOKENS, PrefixCache
from engine.scheduler import Scheduler
from policy_client.wire import SamplingParams

CHUNK = 64


def req(ids: list[int], n: int = 6, **kw) -> WorkItem:
    params = SamplingParams(max_new_tokens=n, temperature=kw.pop("temperature", 0.0), ignore_eos=True)
    return WorkItem(input_ids=list(ids), params=params, return_logprob=True, **kw)


def run(batch: DecodeBatch, items: list[WorkItem]) -> list[WorkResult]:
    done = batch.add(items)
    while len(batch):
        done += batch.step()
    by_item = {id(it): r for it, r in done}
    return [by_item[id(it)] for it in items]


def lps(entries) -> list[float]:
    return [e[0] for e in entries if e[0] is not None]


@pytest.mark.parametrize("start", [0, 5, 200, -1])
def test_chunked_prefill_gives_the_same_answer_as_one_prefill(lm, start):
    prompt = [(7 * i) % 5000 + 100 for i in range(300)]
    kw = {"logprob_start_len": start, "top_logprobs_num": 2, "temperature": 0.8}
    whole = run(DecodeBatch(lm, torch.Generator().manual_seed(1)), [req(prompt, n=8, **kw)])[0]
    chunked_batch = DecodeBatch(lm, torch.Generator().manual_seed(1), chunk_tokens=CHUNK)
    chunked = run(chunked_batch, [req(prompt, n=8, **kw)])[0]
    assert chunked_batch.prefill_chunks == -(-300 // CHUNK)  # 5 chunks, not one pass
    assert chunked.output_ids == whole.output_ids
    assert lps(chunked.output_token_logprobs) == pytest.approx(lps(whole.output_token_logprobs), abs=1e-5)
    if start < 0:
        assert chunked.input_token_logprobs == whole.input_token_logprobs == []
        return
    assert [e[1] for e in chunked.input_token_logprobs] == [e[1] for e in whole.input_token_logprobs]
    assert lps(chunked.input_token_logprobs) == pytest.approx(lps(whole.input_token_logprobs), abs=1e-5)
    assert len(chunked.input_top_logprobs) == len(whole.input_top_logprobs) == 300 - start


def test_a_long_prompt_does_not_stall_a_running_generation(lm):
    batch = DecodeBatch(lm, torch.Generator().manual_seed(0), chunk_tokens=CHUNK)
    running = req(list(range(300, 310)), n=40)
    assert batch.add([running]) == []
    for _ in range(3):
        batch.step()
    assert len(batch.rows[0].out) == 3

    long_prompt = [(11 * i) % 5000 + 100 for i in range(20 * CHUNK)]
    assert batch.add([req(long_prompt, n=4)]) == []  # admitted, not prefilled yet
    assert len(batch.pending) == 1 and len(batch.rows) == 1

    tokens_while_prefilling = []
    while batch.pending:
        before = len(batch.rows[0].out)
        chunks = batch.prefill_chunks
        batch.step()
        assert batch.prefill_chunks == chunks + 1  # one chunk per step...
        tokens_while_prefilling.append(len(batch.rows[0].out) - before)  # ...and one decode step of the running row
    assert tokens_while_prefilling == [1] * 20
    assert len(batch.rows) == 2  # the long prompt joined the batch once prefilled
    done = []
    while len(batch):
        done += batch.step()
    assert {len(it.input_ids) for it, _ in done} == {10, 20 * CHUNK}


def test_chunked_prefill_fills_the_prefix_cache_and_later_prompts_jump_ahead(lm):
    cache = PrefixCache(64 << 20)
    batch = DecodeBatch(lm, torch.Generator().manual_seed(0), prefix_cache=cache, chunk_tokens=CHUNK)
    shared = [(13 * i) % 5000 + 100 for i in range(8 * CHUNK)]
    a, b = req(shared + [1, 2, 3], n=3), req(shared + [4, 5], n=3)
    batch.add([a, b])
    assert len(batch.pending) == 2  # both too long to prefill at admission
    done = []
    while len(batch):
        done += batch.step()
    results = {id(it): r for it, r in done}
    assert results[id(a)].cached_tokens == 0
    assert results[id(b)].cached_tokens == 8 * CHUNK // BLOCK_TOKENS * BLOCK_TOKENS  # b reused what a computed
    assert batch.prefill_chunks == 9 + 1  # a's 9 chunks, then b's 2 uncached tokens in the rest of the last budget
    ref = run(DecodeBatch(lm, torch.Generator().manual_seed(0)), [req(shared + [4, 5], n=3)])[0]
    assert results[id(b)].output_ids == ref.output_ids
    assert lps(results[id(b)].output_token_logprobs) == pytest.approx(lps(ref.output_token_logprobs), abs=1e-5)


async def test_through_the_scheduler_decode_steps_interleave_with_the_chunks(lm):
    sched = Scheduler(lm, max_batch_size=4, batch_window_ms=0, prefill_chunk_tokens=CHUNK)
    sched.start()
    try:
        loop = asyncio.get_running_loop()
        seen_chunks: list[int] = []
        started = asyncio.Event()

        def progress(_snap):
            seen_chunks.append(sched._current.prefill_chunks)  # engine thread, between steps
            loop.call_soon_threadsafe(started.set)

        running = asyncio.ensure_future(sched.submit([req(list(range(300, 310)), n=60, on_progress=progress)]))
        await asyncio.wait_for(started.wait(), timeout=60)
        long_prompt = [(17 * i) % 5000 + 100 for i in range(12 * CHUNK)]
        long_result = (await sched.submit([req(long_prompt, n=2)]))[0]
        await running
        assert long_result.prompt_tokens == 12 * CHUNK
        # The running request got tokens while the long prompt was between its first and its last chunk.
        during = [c for c in seen_chunks if 0 < c < 12]
        assert len(during) >= 10, seen_chunks
    finally:
        sched.stop()
