"""One user can neither starve nor crash the engine (issue 12, item 7).

Fair share of slots between tenants, a bounded queue per tenant, prefill without padding to the longest prompt,
weight swaps that do not wait for the longest generation, and generations that stop when their client leaves.
In-process tests drive the Scheduler / DecodeBatch over the tiny model (deterministic, no HTTP timing); the HTTP
tests run a real engine process with 4 slots.
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
import torch

from engine.model_runner import DecodeBatch, LoadedModel, WorkItem, WorkResult
from engine.scheduler import QueueFull, Scheduler
from policy_client import PolicyClient
from policy_client.wire import SamplingParams, tenant_of_rid
from tests.conftest import start_engine

SLOTS = 4
QUEUE_BOUND = 16  # the flood test queues 12 at once: leave room for all of them to arrive before admission
TENANT = "X-Openclaw-Tenant"


def greedy(n: int) -> SamplingParams:
    return SamplingParams(max_new_tokens=n, temperature=0, ignore_eos=True)


def item(n_new: int, prompt_len: int = 8, *, tenant: str | None = None, first: int = 100, **kw) -> WorkItem:
    return WorkItem(input_ids=list(range(first, first + prompt_len)), params=greedy(n_new), tenant=tenant, **kw)


@pytest.fixture()
def scheduler(lm: LoadedModel):
    """An in-process scheduler over the tiny model, not yet started (tests queue work first when order matters)."""
    sched = Scheduler(lm, max_batch_size=SLOTS, batch_window_ms=0, tenant_slot_share=0.5, max_queued_per_tenant=64)
    yield sched
    sched.stop()


# ---- 1. fair share ---------------------------------------------------------------------------------------------


def _loads(sched: Scheduler) -> dict[str | None, tuple[int, int]]:
    return {x.tenant: (x.running, x.queued) for x in sched.tenant_loads()}


async def test_while_both_wait_no_tenant_runs_more_than_its_share(scheduler):
    """A queued 8 long requests before B queued 4: FIFO would give A all 4 slots; fair share gives each 2."""
    snapshots: list[dict] = []
    record = lambda _snap: snapshots.append(_loads(scheduler))  # noqa: E731 (engine thread, between steps)
    a = [item(12, tenant="A", first=100 + i, on_progress=record) for i in range(8)]
    b = [item(12, tenant="B", first=200 + i, on_progress=record) for i in range(4)]
    futures = scheduler.enqueue(a) + scheduler.enqueue(b)
    assert _loads(scheduler) == {"A": (0, 8), "B": (0, 4)}
    scheduler.start()
    await asyncio.wait_for(asyncio.gather(*futures), timeout=60)

    contended = [s for s in snapshots if s.get("A", (0, 0))[1] and s.get("B", (0, 0))[1]]
    assert contended, "the test never saw both tenants waiting"
    assert all(s["A"][0] <= scheduler.tenant_cap == 2 for s in contended), contended
    assert max(s.get("B", (0, 0))[0] for s in snapshots) == 2  # B got its share at once, not after A's queue
    # Work-conserving: once B has nothing left waiting, A takes every slot.
    assert max(s.get("A", (0, 0))[0] for s in snapshots) == SLOTS
    assert scheduler.requests_done == 12 and scheduler.tenant_loads() == []


async def test_a_lone_tenant_uses_every_slot(scheduler):
    seen: list[int] = []
    futures = scheduler.enqueue(
        [
            item(6, tenant="solo", first=100 + i, on_progress=lambda _s: seen.append(len(scheduler._current)))
            for i in range(6)
        ]
    )
    scheduler.start()
    await asyncio.wait_for(asyncio.gather(*futures), timeout=60)
    assert max(seen) == SLOTS


def test_queue_bound_refuses_all_of_a_batch_and_spares_the_system_bucket(lm):
    sched = Scheduler(lm, max_batch_size=SLOTS, max_queued_per_tenant=3)  # not started: everything stays queued

    async def scenario():
        sched.enqueue([item(1, tenant="t") for _ in range(2)])
        with pytest.raises(QueueFull, match="max_queued_per_tenant is 3") as refused:
            sched.enqueue([item(1, tenant="t") for _ in range(2)])  # 2 + 2 > 3: none of the batch is queued
        assert refused.value.retry_after_s >= 1
        sched.enqueue([item(1, tenant="other") for _ in range(3)])  # bounds are per tenant
        sched.enqueue([item(1) for _ in range(10)])  # the system bucket (judges, teacher, training) is not bounded
        return _loads(sched)

    assert asyncio.run(scenario()) == {"t": (0, 2), "other": (0, 3), None: (0, 10)}


# ---- 2. prefill per prompt, not padded to the longest ----------------------------------------------------------


def _run_alone_or_together(lm: LoadedModel, items: list[WorkItem]) -> tuple[dict[int, WorkResult], list[tuple]]:
    """Decode `items` admitted together to the end; results by prompt length, and the decoder's prefill input shapes."""
    shapes: list[tuple] = []
    decoder = lm.model.get_decoder()
    hook = decoder.register_forward_pre_hook(
        lambda _m, _a, kw: shapes.append(tuple(kw["input_ids"].shape)), with_kwargs=True
    )
    try:
        batch = DecodeBatch(lm, torch.Generator().manual_seed(0))
        done = batch.add(items)
        prefill_shapes = list(shapes)
        while len(batch):
            done += batch.step()
    finally:
        hook.remove()
    return {len(it.input_ids): r for it, r in done}, prefill_shapes


def test_short_and_long_prompts_admitted_together_are_prefilled_apart_with_identical_logprobs(lm):
    def pair():
        kw = {"return_logprob": True, "top_logprobs_num": 2}
        # log-probs of the long prompt's last 20 positions only: all 600 would be a [600, 151936] logits tensor
        return item(6, 12, first=300, logprob_start_len=0, **kw), item(6, 600, first=1000, logprob_start_len=580, **kw)

    short, long_ = pair()
    alone = {**_run_alone_or_together(lm, [short])[0], **_run_alone_or_together(lm, [long_])[0]}
    together, prefill_shapes = _run_alone_or_together(lm, list(pair()))

    # Each prompt had its own forward pass: the short one was not padded to 600 positions.
    assert sorted(prefill_shapes) == [(1, 12), (1, 600)]
    for length in (12, 600):
        a, b = alone[length], together[length]
        assert b.input_token_logprobs == a.input_token_logprobs  # same computation: bit-identical
        assert b.input_top_logprobs == a.input_top_logprobs
        assert b.output_ids == a.output_ids
        assert [e[0] for e in b.output_token_logprobs] == pytest.approx(
            [e[0] for e in a.output_token_logprobs], abs=1e-5
        )


def test_a_long_row_that_leaves_takes_its_padding_with_it(lm):
    batch = DecodeBatch(lm, torch.Generator().manual_seed(0))
    batch.add([item(20, 10, first=300), item(2, 800, first=1000)])
    assert batch.mask.shape[1] == 800  # the short row is left-padded while the long one decodes with it
    while len(batch) == 2:
        batch.step()
    # The short row alone again: its cache is its own prompt plus what it generated, no columns of padding.
    assert len(batch) == 1 and batch.mask.shape[1] == 10 + len(batch.rows[0].out) and bool(batch.mask.all())


def test_equal_length_prompts_still_share_one_prefill(lm):
    _, shapes = _run_alone_or_together(lm, [item(1, 16, first=100 + i) for i in range(3)])
    assert shapes == [(3, 16)]


# ---- 3. weight swaps do not wait for the longest generation ----------------------------------------------------


async def test_a_swap_serves_new_requests_at_once_while_the_long_one_finishes_on_the_old_weights(lm, lm_v1):
    LONG = 80  # noqa: N806 (tokens of the long generation)
    sched = Scheduler(lm, max_batch_size=SLOTS, batch_window_ms=0)
    sched.start()
    try:
        loop = asyncio.get_running_loop()
        progressed = asyncio.Event()
        long_kw = {"return_logprob": True}
        reference = (await sched.submit([item(LONG, 20, first=500, **long_kw)]))[0]  # the long request alone, on v0

        long_item = item(
            LONG,
            20,
            first=500,
            on_progress=lambda s: len(s.output_ids) >= 5 and loop.call_soon_threadsafe(progressed.set),
            **long_kw,
        )
        long_task = asyncio.ensure_future(sched.submit([long_item]))
        await asyncio.wait_for(progressed.wait(), timeout=30)
        await asyncio.wait_for(sched.swap(lm_v1), timeout=30)
        assert not long_task.done(), "the swap waited for the running generation to finish"
        assert sched.weight_version == "1"

        short = (await asyncio.wait_for(sched.submit([item(4, 6, first=700)]), timeout=30))[0]
        assert not long_task.done(), "the request after the swap waited for the long one"
        assert short.weight_version == "1"

        long_result = (await asyncio.wait_for(long_task, timeout=60))[0]
        assert long_result.weight_version == "0"
        # No token of the long request came from the new weights: it matches its run on v0 alone.
        assert long_result.output_ids == reference.output_ids
        lps = [e[0] for e in long_result.output_token_logprobs]
        assert lps == pytest.approx([e[0] for e in reference.output_token_logprobs], abs=1e-5)

        await asyncio.wait_for(sched.wait_drained(), timeout=10)
        assert sched._draining is None  # the old model is released once its last row left
        again = (await sched.submit([item(4, 6, first=700)]))[0]
        assert again.weight_version == "1" and again.output_ids == short.output_ids
    finally:
        sched.stop()


# ---- 4. a caller that leaves stops its generation --------------------------------------------------------------


async def test_a_cancelled_request_leaves_the_batch_before_the_next_step(scheduler):
    loop = asyncio.get_running_loop()
    tokens_seen: list[int] = []
    holder: dict[str, asyncio.Future] = {}

    def on_progress(snap: WorkResult) -> None:
        tokens_seen.append(len(snap.output_ids))
        if len(snap.output_ids) == 5:  # the client goes away mid-generation
            loop.call_soon_threadsafe(holder["future"].cancel)

    keep = scheduler.enqueue([item(40, tenant="stays", first=900)])
    holder["future"] = scheduler.enqueue([item(2000, tenant="leaves", on_progress=on_progress)])[0]
    scheduler.start()
    await asyncio.wait_for(asyncio.gather(*keep), timeout=60)  # 40 steps later

    assert scheduler.requests_cancelled == 1
    # A step or two may pass before the cancellation reaches the engine thread; never the 40 steps of the other row.
    assert max(tokens_seen) <= 15, f"the abandoned row kept decoding: {max(tokens_seen)} tokens"
    assert "leaves" not in _loads(scheduler)


async def test_a_request_cancelled_while_queued_leaves_the_queue(scheduler):
    futures = scheduler.enqueue([item(1, tenant="q") for _ in range(3)])
    futures[1].cancel()
    await asyncio.sleep(0)  # done-callbacks run on the loop
    assert _loads(scheduler) == {"q": (0, 2)} and scheduler.requests_cancelled == 1


# ---- HTTP: a real engine with 4 slots -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def engine_4(tiny_model, tmp_path_factory) -> str:
    proc, url = start_engine(
        tiny_model,
        tmp_path_factory.mktemp("fair-engine"),
        OPENCLAW_RL_ENGINE__MAX_BATCH_SIZE=str(SLOTS),
        OPENCLAW_RL_ENGINE__TENANT_SLOT_SHARE="0.5",
        OPENCLAW_RL_ENGINE__MAX_QUEUED_PER_TENANT=str(QUEUE_BOUND),
    )
    yield url
    proc.terminate()
    proc.wait(timeout=30)


def body(n_new: int, text: str = "a flood of words", **extra) -> dict:
    return {"text": text, "sampling_params": {"max_new_tokens": n_new, "temperature": 0, "ignore_eos": True}} | extra


async def info(http: httpx.AsyncClient) -> dict:
    return (await http.get("/get_server_info")).json()


def tenant_load(server_info: dict, tenant: str) -> tuple[int, int]:
    for x in server_info["tenants"]:
        if x["tenant"] == tenant:
            return x["running"], x["queued"]
    return 0, 0


async def until(http: httpx.AsyncClient, check, timeout: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        current = await info(http)
        if check(current):
            return current
        assert time.monotonic() < deadline, f"engine state never reached: {current}"
        await asyncio.sleep(0.02)


async def test_a_short_request_of_another_tenant_overtakes_a_flood(engine_4):
    order: list[str] = []

    async def send(http: httpx.AsyncClient, who: str, n_new: int, i: int) -> dict:
        r = await http.post("/generate", json=body(n_new, f"request {i}"), headers={TENANT: who})
        assert r.status_code == 200, r.text
        order.append(who)
        return r.json()

    async with httpx.AsyncClient(base_url=engine_4, timeout=120) as http:
        flood = [asyncio.ensure_future(send(http, "A", 30, i)) for i in range(16)]
        # A holds every slot (alone, it may) and most of its flood waits (a wave of A lasts 30 steps: time to look).
        seen = await until(http, lambda s: tenant_load(s, "A")[0] == SLOTS and tenant_load(s, "A")[1] >= 10)
        assert seen["tenant_slot_cap"] == 2 and seen["max_running_requests"] == SLOTS
        short = asyncio.ensure_future(send(http, "B", 4, 99))
        waiting = await until(http, lambda s: tenant_load(s, "B") != (0, 0) or short.done())
        await asyncio.gather(short, *flood)

    assert tenant_load(waiting, "B") in ((0, 1), (1, 0))
    a_before_b = order.index("B")
    # FIFO serves B only after every A request queued before it: 12 A answers would come first. Fair admission gives B
    # the first slot that frees, so only the A wave running when B came (and at most one more) finishes before it.
    assert a_before_b <= 2 * SLOTS, order
    assert len(order) - 1 - a_before_b >= 16 - 2 * SLOTS, order


async def test_a_tenant_over_its_queue_bound_gets_503_with_retry_after(engine_4):
    async with httpx.AsyncClient(base_url=engine_4, timeout=120) as http:
        cancelled_before = (await info(http))["requests_cancelled"]

        def hog(i: int) -> asyncio.Future:
            return asyncio.ensure_future(http.post("/generate", json=body(4000, f"hog {i}"), headers={TENANT: "C"}))

        # In two steps: requests that all arrive before the engine admits any would meet the bound early.
        hogs = [hog(i) for i in range(SLOTS)]
        await until(http, lambda s: tenant_load(s, "C") == (SLOTS, 0))
        hogs += [hog(i) for i in range(SLOTS, SLOTS + QUEUE_BOUND)]
        await until(http, lambda s: tenant_load(s, "C") == (SLOTS, QUEUE_BOUND))
        assert not any(h.done() for h in hogs)

        refused = await http.post("/generate", json=body(4), headers={TENANT: "C"})
        assert refused.status_code == 503, refused.text
        assert int(refused.headers["Retry-After"]) >= 1
        assert "max_queued_per_tenant" in refused.json()["error"]["message"]
        streamed = await http.post("/generate", json=body(4, stream=True), headers={TENANT: "C"})
        assert streamed.status_code == 503  # refused before any event is sent, not a broken stream
        # Another tenant is not refused: it is queued, and will be admitted in turn.
        other = asyncio.ensure_future(http.post("/generate", json=body(4), headers={TENANT: "D"}))
        await until(http, lambda s: tenant_load(s, "D") == (0, 1))

        # The hogging client goes away (non-streaming requests): every one of its requests is dropped.
        for h in hogs:
            h.cancel()
        await asyncio.gather(*hogs, return_exceptions=True)
        after = await until(http, lambda s: tenant_load(s, "C") == (0, 0), timeout=10)
        assert after["requests_cancelled"] - cancelled_before == SLOTS + QUEUE_BOUND
        assert (await other).status_code == 200


async def test_a_client_that_disconnects_mid_stream_stops_its_generation(engine_4):
    async with httpx.AsyncClient(base_url=engine_4, timeout=120) as http:
        before = await until(http, lambda s: s["tenants"] == [])
        events = 0
        async with http.stream("POST", "/generate", json=body(4000, stream=True), headers={TENANT: "S"}) as r:
            assert r.status_code == 200
            async for line in r.aiter_lines():
                events += line.startswith("data:")
                if events == 3:
                    break  # leaving the block closes the connection mid-stream
        # 4,000 tokens take many seconds; the row must leave within a few steps of the disconnect.
        after = await until(http, lambda s: tenant_load(s, "S") == (0, 0), timeout=5)
        assert after["requests_cancelled"] == before["requests_cancelled"] + 1
        assert after["requests_done"] == before["requests_done"]


async def test_the_engine_checks_the_tenant_header(engine_4):
    async with httpx.AsyncClient(base_url=engine_4, timeout=60) as http:
        r = await http.post("/generate", json=body(2), headers={TENANT: "x" * 300})
        assert r.status_code == 400 and "X-Openclaw-Tenant" in r.json()["error"]["message"]
        r = await http.post("/generate", json=body(2, text=["a", "b"]), headers={TENANT: "t"})
        assert r.status_code == 200 and len(r.json()) == 2


ANSWER = {"text": "", "output_ids": [5], "meta_info": {"id": "x", "prompt_tokens": 1, "completion_tokens": 1}}


async def test_the_policy_client_sends_the_tenant_header():
    seen: list[str | None] = []
    rids: list[str | None] = []

    async def engine(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get(TENANT))
        rids.append(tenant_of_rid(json.loads(request.content).get("rid")))
        if b'"stream":true' in request.content.replace(b" ", b""):
            return httpx.Response(200, text=f"data: {json.dumps(ANSWER)}\n\ndata: [DONE]\n\n")
        return httpx.Response(200, json=ANSWER)

    async with PolicyClient(["http://engine"], transport=httpx.MockTransport(engine)) as client:
        assert (await client.generate([1, 2], greedy(1), tenant="user-7")).output_ids == [5]
        assert [s.output_ids async for s in client.generate_stream([1, 2], greedy(1), tenant="user-7")] == [[5]]
        await client.generate([1, 2], greedy(1))
    assert seen == ["user-7", "user-7", None]
    assert rids == ["user-7", "user-7", None]  # also in the request id: the sglang-router forwards only that


async def test_the_policy_client_waits_as_long_as_retry_after_says():
    calls: list[float] = []

    async def busy_then_ok(request: httpx.Request) -> httpx.Response:
        calls.append(time.monotonic())
        if len(calls) == 1:
            err = {"error": {"message": "queue full", "type": "InternalServerError", "code": 503}}
            return httpx.Response(503, json=err, headers={"Retry-After": "1"})
        return httpx.Response(200, json=ANSWER)

    async with PolicyClient(["http://engine"], transport=httpx.MockTransport(busy_then_ok), backoff_s=0.01) as client:
        await client.generate([1, 2], greedy(1), tenant="t")
    assert len(calls) == 2 and calls[1] - calls[0] >= 0.9


async def test_a_request_id_naming_a_tenant_counts_for_that_tenant_without_the_header(engine_4):
    """What arrives from behind the sglang-router: no tenant header, the tenant in the rid."""
    from policy_client.wire import tenant_rid

    rid = tenant_rid("a user/with spaces")
    assert tenant_of_rid(rid) == "a user/with spaces" and tenant_of_rid("t/x/not-hex") is None
    async with httpx.AsyncClient(base_url=engine_4, timeout=60) as http:
        r = await http.post("/generate", json=body(2) | {"rid": rid})
        assert r.status_code == 200 and r.json()["meta_info"]["id"] == rid
        r = await http.post("/generate", json=body(2) | {"rid": f"t/{'x' * 300}/{'0' * 32}"})
        assert r.status_code == 400 and "X-Openclaw-Tenant" in r.json()["error"]["message"]
