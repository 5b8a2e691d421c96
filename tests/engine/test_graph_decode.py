"""The CUDA-graph decode step (engine.graph_decode), run eagerly on a CPU: the same logits as the Hugging Face forward
with its own cache, and a batch on the pool decoding the same greedy tokens as one on the eager cache."""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache

from engine import graph_decode
from engine.graph_decode import GraphSettings, GraphUnavailable, StaticDecoder, decoder_for
from engine.model_runner import DecodeBatch, LoadedModel, WorkItem
from engine.prefix_cache import PrefixCache
from policy_client.wire import SamplingParams

EAGER = GraphSettings(max_rows=8, max_tokens=64, eager=True)


class _Reference:
    """One row decoded by the Hugging Face model alone, with its own cache (no batching, no padding)."""

    def __init__(self, lm: LoadedModel, prompt: list[int]):
        self.model = lm.model
        self.cache = DynamicCache()
        out = self.model(input_ids=torch.tensor([prompt]), past_key_values=self.cache, use_cache=True)
        self.logits = out.logits[0, -1]
        self.length = len(prompt)

    def kv(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [(layer.keys, layer.values) for layer in self.cache.layers]

    def step(self, token: int) -> None:
        out = self.model(
            input_ids=torch.tensor([[token]]),
            position_ids=torch.tensor([[self.length]]),
            past_key_values=self.cache,
            use_cache=True,
        )
        self.logits = out.logits[0, -1]
        self.length += 1


@torch.inference_mode()
def test_static_step_matches_the_model_with_rows_joining_and_leaving(lm: LoadedModel) -> None:
    dec = StaticDecoder(lm.model, EAGER)
    prompts = {"a": list(range(300, 305)), "b": list(range(500, 509)), "c": list(range(700, 703))}
    refs: dict[str, _Reference] = {}
    slots: dict[str, int] = {}

    def join(name: str, slot: int) -> None:
        refs[name] = _Reference(lm, prompts[name])
        slots[name] = slot
        dec.write_rows([slot], refs[name].kv(), [refs[name].length])

    def step(names: list[str]) -> None:
        tokens = [int(refs[n].logits.argmax()) for n in names]
        got = dec.step(
            [slots[n] for n in names],
            torch.tensor(tokens),
            torch.tensor([refs[n].length for n in names]),  # RoPE position = KV length here (no shared prefix)
            [refs[n].length for n in names],
        )
        for i, (n, tok) in enumerate(zip(names, tokens)):
            refs[n].step(tok)
            torch.testing.assert_close(got[i], refs[n].logits, atol=1e-4, rtol=1e-4)

    join("a", 0)
    join("b", 1)
    for _ in range(3):
        step(["a", "b"])
    join("c", 2)  # joins while a and b are 3 tokens in
    for _ in range(2):
        step(["a", "b", "c"])
    for _ in range(3):  # a left: slot 0 is dead, the step still runs over slots 0..2
        step(["b", "c"])
    # what the pool holds equals the model's own cache, and reading it back left-pads it as the eager path expects
    kv = dec.read_rows([slots["b"], slots["c"]], [refs["b"].length, refs["c"].length])
    width = refs["b"].length
    ck, _ = refs["c"].kv()[0]
    torch.testing.assert_close(kv[0][0][1, :, width - refs["c"].length :], ck[0])
    assert bool((kv[0][0][1, :, : width - refs["c"].length] == 0).all())


def _greedy(lm: LoadedModel, graphs: GraphSettings | None, prefix_cache: PrefixCache | None = None):
    """A batch whose rows join at different steps and finish at different lengths; every row's tokens."""
    batch = DecodeBatch(lm, torch.Generator().manual_seed(0), prefix_cache=prefix_cache, graphs=graphs)
    items = [
        WorkItem(
            input_ids=list(range(100 + 3 * i, 107 + 5 * i)),
            params=SamplingParams(max_new_tokens=6 + 3 * i, temperature=0, ignore_eos=True),
        )
        for i in range(4)
    ]
    late = WorkItem(input_ids=list(range(900, 930)), params=SamplingParams(max_new_tokens=5, temperature=0))
    done = {id(it): r for it, r in batch.add(items[:3])}
    steps = pooled = 0
    while len(batch):
        if steps == 2:
            done |= {
                id(it): r for it, r in batch.add([items[3], late])
            }  # join the running rows (they leave the pool and return)
        done |= {id(it): r for it, r in batch.step()}
        steps += 1
        pooled += batch._pool is not None
    return [done[id(it)].output_ids for it in items + [late]], pooled, batch


@torch.inference_mode()
def test_batch_on_the_pool_decodes_the_eager_tokens(lm: LoadedModel) -> None:
    eager, pooled_eager, _ = _greedy(lm, None)
    static, pooled, _ = _greedy(lm, EAGER)
    assert pooled_eager == 0 and pooled > 5  # the second batch really decoded on the pool
    assert static == eager
    assert [len(t) for t in static] == [6, 9, 12, 15, 5]


@torch.inference_mode()
def test_rows_join_the_pool_in_free_slots(lm: LoadedModel) -> None:
    def item(n: int) -> WorkItem:
        return WorkItem(input_ids=list(range(60, 60 + n)), params=SamplingParams(max_new_tokens=8, temperature=0))

    batch = DecodeBatch(lm, torch.Generator().manual_seed(0), graphs=EAGER)
    batch.add([item(10), item(11)])
    batch.step()
    batch.remove([0])  # slot 0 free again
    assert batch._pool is not None and batch._slots == [1] and batch._lens == [12]
    batch.add([item(12), item(5)])
    assert batch._pool is not None and batch.cache is None  # no detour through the eager cache
    assert batch._slots == [1, 0, 2] and batch._lens == [12, 5, 12]  # admitted shortest first


@torch.inference_mode()
def test_rows_too_long_for_the_pool_decode_eagerly(lm: LoadedModel) -> None:
    eager, _, _ = _greedy(lm, None)
    short = GraphSettings(max_rows=8, max_tokens=30, eager=True)  # the late 30-token prompt does not fit
    static, pooled, _ = _greedy(lm, short)
    assert static == eager and pooled > 0


@torch.inference_mode()
def test_a_finished_row_on_the_pool_fills_the_prefix_cache(lm: LoadedModel) -> None:
    plain, pooled = PrefixCache(1 << 24, block_tokens=4), PrefixCache(1 << 24, block_tokens=4)
    _greedy(lm, None, plain)
    _, count, _ = _greedy(lm, EAGER, pooled)
    assert count > 0 and pooled.bytes == plain.bytes > 0


def test_no_decoder_on_a_cpu_unless_asked(lm: LoadedModel) -> None:
    assert decoder_for(lm.model, GraphSettings()) is None  # CPU: graphs need CUDA
    assert decoder_for(lm.model, GraphSettings(enabled=False, eager=True)) is None
    assert decoder_for(lm.model, EAGER) is not None


@pytest.mark.parametrize("reset", [True, False])
@torch.inference_mode()
def test_reset_frees_the_pool(lm: LoadedModel, reset: bool) -> None:
    _, _, batch = _greedy(lm, EAGER)
    dec = decoder_for(lm.model, EAGER)
    batch.add([WorkItem(input_ids=list(range(40, 50)), params=SamplingParams(max_new_tokens=8, temperature=0))])
    batch.step()
    batch.step()
    assert batch._pool is dec and dec.keys and batch.kv_bytes() >= dec.pool_bytes()
    if reset:
        batch.reset()
        assert not dec.keys and dec.owner is None
    else:
        batch.remove([0])
        assert dec.keys and dec.owner is None  # kept for the next batch


@torch.inference_mode()
def test_a_failed_capture_falls_back_to_eager_for_good(lm: LoadedModel, monkeypatch: pytest.MonkeyPatch) -> None:
    eager, _, _ = _greedy(lm, None)
    failures = []

    def fail(self: StaticDecoder, *args, **kwargs) -> torch.Tensor:
        failures.append(1)
        self.broken = True  # as a failed capture leaves it
        raise GraphUnavailable("capture failed (test)")

    monkeypatch.setattr(StaticDecoder, "step", fail)
    settings = GraphSettings(max_rows=8, max_tokens=63, eager=True)  # a decoder of its own
    static, pooled, _ = _greedy(lm, settings)
    assert static == eager  # served anyway, eagerly
    assert failures == [1] and pooled == 0  # tried once, never again
    assert decoder_for(lm.model, settings) is None
    assert not graph_decode._DECODERS[lm.model].keys  # its pool given back


def _alone(lm: LoadedModel, prompt: list[int], n: int) -> list[int]:
    batch = DecodeBatch(lm, torch.Generator().manual_seed(0))
    done = batch.add([WorkItem(input_ids=prompt, params=SamplingParams(max_new_tokens=n, temperature=0))])
    while len(batch):
        done += batch.step()
    return done[0][1].output_ids


async def test_through_the_scheduler_on_the_pool(tiny_model, lm_v1: LoadedModel) -> None:
    """Requests queued beyond the batch join it on the pool; a memory release frees the pool; after an in-place
    weight update the pool decodes with the new weights."""
    from engine.scheduler import Scheduler
    from engine.weights import load_model

    served = load_model(tiny_model, "cpu", "float32", weight_version="0")
    settings = GraphSettings(max_rows=4, max_tokens=64, eager=True)
    sched = Scheduler(served, max_batch_size=4, batch_window_ms=0, prefix_cache_mb=4, graphs=settings)
    prompts = [list(range(200 + 11 * i, 209 + 13 * i)) for i in range(6)]
    budgets = [4 + 3 * i for i in range(6)]

    def items() -> list[WorkItem]:
        return [
            WorkItem(input_ids=p, params=SamplingParams(max_new_tokens=n, temperature=0))
            for p, n in zip(prompts, budgets)
        ]

    sched.start()
    try:
        got = [r.output_ids for r in await sched.submit(items())]
        with torch.inference_mode():
            assert got == [_alone(served, p, n) for p, n in zip(prompts, budgets)]
        dec = graph_decode._DECODERS[served.model]
        assert dec.keys and dec.settings == settings  # decoded on the pool, which stays for the next batch
        await sched.release_memory(frozenset({"kv_cache"}))
        assert not dec.keys  # the pool's memory given back with the rest of the KV
        await sched.resume_memory(frozenset({"kv_cache"}))
        await sched.commit_weights(dict(lm_v1.model.state_dict()), "1")
        got = [r.output_ids for r in await sched.submit(items())]
        with torch.inference_mode():
            assert got == [_alone(lm_v1, p, n) for p, n in zip(prompts, budgets)]
        assert dec.keys
    finally:
        sched.stop()


@torch.inference_mode()
def test_an_architecture_it_does_not_cover_decodes_eagerly(lm: LoadedModel, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(graph_decode, "SUPPORTED", frozenset({"llama"}))
    settings = GraphSettings(max_rows=8, max_tokens=62, eager=True)
    eager, _, _ = _greedy(lm, None)
    static, pooled, _ = _greedy(lm, settings)
    assert static == eager and pooled == 0
    assert decoder_for(lm.model, settings) is None
