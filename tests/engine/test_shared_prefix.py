"""A prefix shared by rows of a decode batch is kept once and read once per step (engine.shared_prefix, issue 14).

Rows that start with it must decode exactly what rows with their own copy of its KV decode.
"""

from __future__ import annotations

import random

import pytest
import torch

from engine import shared_prefix
from engine.attention import engine_attention
from engine.model_runner import DecodeBatch, WorkItem, WorkResult
from engine.prefix_cache import BLOCK_TOKENS, PrefixCache
from engine.shared_prefix import MIN_SHARED_TOKENS, SharedPrefix, SharedView, common_prefix
from policy_client.wire import SamplingParams

SYSTEM = list(range(2000, 2000 + MIN_SHARED_TOKENS + 3 * BLOCK_TOKENS + 5))  # 309 tokens: worth sharing


def req(ids: list[int], n: int = 8, temperature: float = 0.0) -> WorkItem:
    params = SamplingParams(max_new_tokens=n, temperature=temperature, ignore_eos=True)
    return WorkItem(input_ids=list(ids), params=params, return_logprob=True)


def staggered(batch: DecodeBatch, items: list[WorkItem], watch=None) -> list[WorkResult]:
    """One request joins per decode step (as HTTP arrivals do), then all run to the end."""
    done = []
    for it in items:
        done += batch.add([it])
        done += batch.step()
        if watch:
            watch(batch)
    while len(batch):
        done += batch.step()
    by_item = {id(it): r for it, r in done}
    return [by_item[id(it)] for it in items]


def assert_same(a: WorkResult, b: WorkResult) -> None:
    assert a.output_ids == b.output_ids
    assert [e[0] for e in a.output_token_logprobs] == pytest.approx([e[0] for e in b.output_token_logprobs], abs=1e-5)


def prompts() -> list[list[int]]:
    mine = [SYSTEM + [60 + i] * (1 + i % 3) for i in range(5)]
    other = [list(range(5000, 5000 + MIN_SHARED_TOKENS + 40))]  # long, but shares nothing with the others
    return mine[:2] + other + mine[2:]


@pytest.mark.parametrize("temperature", [0.0, 0.9])
def test_rows_sharing_a_prefix_decode_what_rows_with_their_own_copy_decode(lm, temperature):
    seen = []

    def watch(batch: DecodeBatch) -> None:
        if batch.shared is not None:
            own = batch.mask.shape[1]
            seen.append((len(batch.shared), int(batch.uses.sum()), len(batch.rows), own))

    cache = PrefixCache(64 << 20)
    shared = staggered(
        DecodeBatch(lm, torch.Generator().manual_seed(7), prefix_cache=cache),
        [req(p, temperature=temperature) for p in prompts()],
        watch,
    )
    plain = staggered(
        DecodeBatch(lm, torch.Generator().manual_seed(7)), [req(p, temperature=temperature) for p in prompts()]
    )
    for a, b in zip(shared, plain):
        assert_same(a, b)
    # the prefix was set up when the second row arrived (whole blocks of what the first two have in common) and
    # used by every row that starts with it, not by the unrelated one
    prefix = len(SYSTEM) // BLOCK_TOKENS * BLOCK_TOKENS
    assert seen and {s[0] for s in seen} == {prefix}
    assert max(s[1] for s in seen) == 5 and all(s[1] < s[2] for s in seen if s[2] > 2)
    # the unrelated row (~300 tokens) is the widest own cache; without it the sharing rows keep a few tokens each
    assert seen[-1][3] < len(SYSTEM)


def test_the_prefix_goes_with_its_last_user_and_another_can_follow(lm):
    batch = DecodeBatch(lm, torch.Generator().manual_seed(0), prefix_cache=PrefixCache(64 << 20))
    staggered(batch, [req(SYSTEM + [1]), req(SYSTEM + [2, 3])])
    assert batch.shared is None and len(batch) == 0
    other = list(range(7000, 7000 + MIN_SHARED_TOKENS + BLOCK_TOKENS))
    results = staggered(batch, [req(other + [4], n=30), req(other + [5], n=30)])
    assert [r.cached_tokens for r in results] == [0, len(other)]
    ref = staggered(DecodeBatch(lm, torch.Generator().manual_seed(0)), [req(other + [4], n=30), req(other + [5], n=30)])
    for a, b in zip(results, ref):
        assert_same(a, b)


def test_a_finished_row_that_shared_the_prefix_is_cached_whole_for_its_sessions_next_turn(lm):
    cache = PrefixCache(64 << 20)
    batch = DecodeBatch(lm, torch.Generator().manual_seed(0), prefix_cache=cache)
    a, b = staggered(batch, [req(SYSTEM + [11], n=40), req(SYSTEM + [12, 13], n=40)])
    for prompt, r in ((SYSTEM + [11], a), (SYSTEM + [12, 13], b)):
        history = prompt + r.output_ids
        assert cache.match(history, 10**9, cache.generation)[0] == (len(history) - 1) // BLOCK_TOKENS * BLOCK_TOKENS


@pytest.mark.parametrize("kernel", ["flash", "matmul"])
def test_split_attention_equals_attention_over_the_whole_cache(kernel, monkeypatch):
    if kernel == "matmul":  # what runs where the CPU flash kernel is not (CUDA, other dtypes)
        monkeypatch.setattr(shared_prefix, "FLASH_CPU", None)
    elif shared_prefix.FLASH_CPU is None:
        pytest.skip("this torch build has no CPU flash kernel")
    torch.manual_seed(0)
    b, heads, kv_heads, dim, prefix, own = 5, 4, 2, 16, 37, 11

    class Layer(torch.nn.Module):
        layer_idx, num_key_value_groups = 0, heads // kv_heads

    pk, pv = torch.randn(kv_heads, prefix, dim), torch.randn(kv_heads, prefix, dim)
    q = torch.randn(b, heads, 1, dim)
    k, v = torch.randn(b, kv_heads, own, dim), torch.randn(b, kv_heads, own, dim)
    mask = torch.ones(b, 1, 1, own, dtype=torch.bool)
    mask[1, ..., :4] = False  # row 1 is left-padded
    uses = torch.tensor([True, True, False, True, False])
    view = SharedView(SharedPrefix(list(range(prefix)), [(pk, pv)]), uses)
    out, _ = engine_attention(Layer(), q, k, v, mask, scaling=dim**-0.5, shared_prefix=view)
    for i in range(b):
        keys, values, m = k[i], v[i], mask[i, 0, 0]
        if uses[i]:
            keys, values = torch.cat([pk, keys], dim=1), torch.cat([pv, values], dim=1)
            m = torch.cat([torch.ones(prefix, dtype=torch.bool), m])
        keys, values = keys.repeat_interleave(2, dim=0)[:, m], values.repeat_interleave(2, dim=0)[:, m]
        want = torch.softmax(q[i] @ keys.transpose(-1, -2) * dim**-0.5, dim=-1) @ values  # [heads, 1, dim]
        torch.testing.assert_close(out[i, 0], want[:, 0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("batch,past", [(1, 50), (3, 7)])
def test_a_prefill_chunk_after_past_tokens_split_in_two_equals_sdpa_with_its_mask(batch, past):
    torch.manual_seed(1)
    heads, kv_heads, dim, chunk = 4, 2, 16, 9

    class Layer(torch.nn.Module):
        layer_idx, num_key_value_groups, is_causal = 0, heads // kv_heads, True

    q = torch.randn(batch, heads, chunk, dim)
    k, v = torch.randn(batch, kv_heads, past + chunk, dim), torch.randn(batch, kv_heads, past + chunk, dim)
    mask = torch.ones(chunk, past + chunk, dtype=torch.bool).tril(diagonal=past)[None, None].expand(batch, 1, -1, -1)
    want, _ = engine_attention(Layer(), q, k, v, mask, scaling=dim**-0.5)  # plain SDPA with the causal mask
    got, _ = engine_attention(Layer(), q, k, v, mask, scaling=dim**-0.5, chunk_after_past=True)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("past", [0, 6])
def test_a_prefill_against_the_shared_prefix_equals_sdpa_over_the_whole_prompt(past):
    torch.manual_seed(2)
    batch, heads, kv_heads, dim, prefix, chunk = 3, 4, 2, 16, 40, 5

    class Layer(torch.nn.Module):
        layer_idx, num_key_value_groups, is_causal = 0, heads // kv_heads, True

    pk, pv = torch.randn(kv_heads, prefix, dim), torch.randn(kv_heads, prefix, dim)
    view = SharedView(SharedPrefix(list(range(prefix)), [(pk, pv)]), torch.ones(batch, dtype=torch.bool))
    q = torch.randn(batch, heads, chunk, dim)
    k, v = torch.randn(batch, kv_heads, past + chunk, dim), torch.randn(batch, kv_heads, past + chunk, dim)
    got, _ = engine_attention(Layer(), q, k, v, None, scaling=dim**-0.5, shared_prefix=view, chunk_after_past=True)
    whole_k = torch.cat([pk.expand(batch, -1, -1, -1), k], dim=2)
    whole_v = torch.cat([pv.expand(batch, -1, -1, -1), v], dim=2)
    total = prefix + past + chunk
    mask = torch.ones(chunk, total, dtype=torch.bool).tril(diagonal=total - chunk)[None, None].expand(batch, 1, -1, -1)
    want, _ = engine_attention(Layer(), q, whole_k, whole_v, mask, scaling=dim**-0.5)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_a_request_admitted_after_an_in_place_weight_update_never_reads_the_old_prefix(lm, lm_v1):
    """An in-place update (the scheduler's `_commit`) keeps the running rows and their shared prefix, made by the
    old weights; a request admitted afterwards must be served entirely by the new ones, as in a fresh batch."""
    cache = PrefixCache(64 << 20)
    batch = DecodeBatch(lm, torch.Generator().manual_seed(0), prefix_cache=cache)
    for ids in (SYSTEM + [1], SYSTEM + [2, 3]):
        batch.add([req(ids, n=40)])
        batch.step()
    assert batch.shared is not None and len(batch) == 2
    cache.invalidate()  # what the scheduler's _commit does: the cache's KV is the old weights'
    batch.lm = lm_v1  # and the running batch serves the new weights
    late = staggered(batch, [req(SYSTEM + [4, 5], n=6)])[0]
    fresh = staggered(DecodeBatch(lm_v1, torch.Generator().manual_seed(0)), [req(SYSTEM + [4, 5], n=6)])[0]
    assert_same(late, fresh)


def test_common_prefix_finds_the_first_difference_wherever_it_is():
    rng = random.Random(0)
    base = [rng.randrange(150_000) for _ in range(700)]
    for cut in [0, 1, 2, 255, 256, 257, 511, 698, 699]:
        other = [int(str(t)) for t in base]  # equal values, other int objects: compared by value
        other[cut] += 1
        assert common_prefix(base, other) == common_prefix(other, base) == cut
    assert common_prefix(base, base[:300]) == 300  # one a prefix of the other
    assert common_prefix(base, []) == 0
    assert common_prefix(base, list(base)) == 700


@pytest.mark.parametrize("temperature", [0.0, 0.9])
def test_prompts_admitted_together_share_their_cached_prefix_straight_from_the_cache(lm, temperature):
    cache = PrefixCache(64 << 20)
    batch = DecodeBatch(lm, torch.Generator().manual_seed(3), prefix_cache=cache)
    staggered(batch, [req(SYSTEM + [90])])  # the system prompt is in the prefix cache now
    group = [req(SYSTEM + [70 + i, 71], temperature=temperature) for i in range(4)]
    copied = []
    match = cache.match

    def counting_match(*args, **kwargs):
        n, kv = match(*args, **kwargs)
        copied.append(0 if kv is None else kv[0][0].shape[2])  # tokens of KV copied out of the cache
        return n, kv

    cache.match = counting_match
    batch.add(group)
    cached = len(SYSTEM) // BLOCK_TOKENS * BLOCK_TOKENS
    # the batch took the prefix's KV out of the cache once; no row took a copy of its own
    assert sum(copied) == cached
    assert batch.shared is not None and len(batch.shared) == cached
    assert bool(batch.uses.all()) and batch.mask.shape[1] == len(SYSTEM) + 2 - cached
    done = []
    while len(batch):
        done += batch.step()
    got = {id(it): r for it, r in done}
    ref = DecodeBatch(lm, torch.Generator().manual_seed(3))
    ref_done = ref.add([req(SYSTEM + [70 + i, 71], temperature=temperature) for i in range(4)])
    while len(ref):
        ref_done += ref.step()
    want = sorted(ref_done, key=lambda x: x[0].input_ids)
    for (it, w), g in zip(want, sorted(group, key=lambda x: x.input_ids)):
        assert got[id(g)].cached_tokens == cached
        assert_same(got[id(g)], w)
    assert batch.shared is None  # its last user left


def test_a_lone_row_gives_up_its_copy_when_a_group_shares_the_prefix_from_the_cache(lm):
    """A request admitted alone (its cached prefix copied out: nobody to share with yet), then a group that shares
    that prefix straight from the cache: the lone row's copy must go too, or every row of the batch is left-padded to
    the prefix's width and attends over it at every step."""
    cache = PrefixCache(64 << 20)
    batch = DecodeBatch(lm, torch.Generator().manual_seed(5), prefix_cache=cache)
    staggered(batch, [req(SYSTEM + [90])])  # the system prompt is in the prefix cache now
    prompts = [SYSTEM + [80], *(SYSTEM + [70 + i, 71] for i in range(4))]
    lone, *group = [req(p, n=12) for p in prompts]
    done = batch.add([lone])
    assert batch.shared is None  # one row: nothing to share with
    done += batch.add(group)
    cached = len(SYSTEM) // BLOCK_TOKENS * BLOCK_TOKENS
    assert batch.shared is not None and len(batch.shared) == cached
    assert bool(batch.uses.all()) and batch.mask.shape[1] < len(SYSTEM) - cached + 8
    while len(batch):
        done += batch.step()
    got = {id(it): r for it, r in done}
    ref = DecodeBatch(lm, torch.Generator().manual_seed(5))
    want = ref.add([req(p, n=12) for p in prompts])
    while len(ref):
        want += ref.step()
    by_prompt = {tuple(it.input_ids): r for it, r in want}
    for it in (lone, *group):
        assert_same(got[id(it)], by_prompt[tuple(it.input_ids)])
