"""The generation route, /generate: prompts tokenized and checked against the engine's limits, the request's
tenant, the answer (or a server-sent event stream), and a client that disconnects stopping its generation."""

from __future__ import annotations

import asyncio
import functools
import json
from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

from engine.http_guards import BadRequest, _error, _parse
from engine.lora_adapters import AdapterError, LoraAdapter, LoraRegistry
from engine.scheduler import Scheduler
from engine.weights import LoadedModel
from engine.work import WorkItem, WorkResult, final_delta, merged_deltas
from openclaw_rl.settings import EngineSettings
from policy_client.segments import SegmentEncoder
from policy_client.wire import GenerateRequest, SamplingParams, tenant_of_rid

log = structlog.get_logger(__name__)

TOP_LOGPROBS_CAP = 20
"""Most alternatives per position a request may ask for: each costs a top-k over the vocabulary and a triple in the
answer at every position, and nothing in this system asks for more (OpenAI-compatible servers cap it at 20 too)."""
TENANT_HEADER = "x-openclaw-tenant"
STREAM_MODE_HEADER = "x-openclaw-stream"
"""`incremental`: this request's stream carries only what is new per event (SGLang's incremental streaming output,
which SGLang sets per server: engine.incremental_streaming_output sets it here for every request)."""
TENANT_MAX_CHARS = 256
"""Longest tenant token accepted: it is an opaque key (a user or session id, a hash), never a payload."""
DISCONNECT_POLL_S = 0.25
"""How often a non-streaming /generate checks whether its client is still there."""


def _fill_token_text(meta: dict, tokenizer: Any) -> None:
    """SGLang's return_text_in_logprobs: the third entry of each triple is the token's text."""
    for key in ("output_token_logprobs", "input_token_logprobs"):
        if meta.get(key):
            meta[key] = [(lp, tok, tokenizer.decode([tok])) for lp, tok, _ in meta[key]]
    for key in ("output_top_logprobs", "input_top_logprobs"):
        if meta.get(key):
            meta[key] = [
                None if tops is None else [(lp, tok, tokenizer.decode([tok])) for lp, tok, _ in tops]
                for tops in meta[key]
            ]


def add_generation_routes(
    app: FastAPI, scheduler: Scheduler, cfg: EngineSettings, loras: LoraRegistry | None = None
) -> None:
    """/generate over `scheduler`; `lora_path` names adapters of `loras` (none loaded when it is None)."""
    loras = loras if loras is not None else LoraRegistry(cfg.max_loras)

    def work_items(req: GenerateRequest, tenant: str | None) -> list[WorkItem]:
        lm: LoadedModel = scheduler.model
        try:
            items = [_work_item(req, i, prompt, lm, cfg) for i, prompt in enumerate(req.prompts())]
        except ValueError as exc:
            raise BadRequest(str(exc)) from exc
        if tenant is not None and len(items) > cfg.max_queued_per_tenant:
            raise BadRequest(
                f"a batch of {len(items)} prompts is over the {cfg.max_queued_per_tenant} one tenant may queue "
                "(engine.max_queued_per_tenant); send fewer at a time"
            )
        for item in items:
            item.tenant = tenant
        try:
            names = [_lora_name(req.per_request("lora_path", i, None), i) for i in range(len(items))]
            adapters = loras.acquire(names)  # held until the answers are out (see `release`)
        except ValueError as exc:  # AdapterError too: an adapter that is not loaded
            raise BadRequest(str(exc)) from exc
        for item, adapter in zip(items, adapters):
            item.lora = adapter
        return items

    def release(items: list[WorkItem]) -> None:
        held: list[LoraAdapter | None] = [it.lora for it in items]
        if any(a is not None for a in held):
            loras.release(held)

    @app.post("/generate")
    async def generate(request: Request) -> Any:
        req = await _parse(request, GenerateRequest, cfg.max_request_bytes)
        tenant = _tenant(request, req.rid)
        # Text is tokenized off the event loop (the Rust tokenizer releases the GIL) and by cached segments
        # (text_encoder): a new 40,000-char prompt takes ~20 ms, one that repeats a prompt seen before well under 1.
        items = await asyncio.to_thread(work_items, req, tenant) if req.text is not None else work_items(req, tenant)
        if req.stream:
            if len(items) != 1:
                release(items)
                raise BadRequest("streaming takes a single prompt, not a batch")
            # Queued before the response starts, so a full queue is still answered with a 503, not a broken stream.
            loop = asyncio.get_running_loop()
            updates: asyncio.Queue[WorkResult | None] = asyncio.Queue()
            items[0].on_progress = lambda snap: loop.call_soon_threadsafe(updates.put_nowait, snap)
            incremental = cfg.incremental_streaming_output or (
                request.headers.get(STREAM_MODE_HEADER, "").strip().lower() == "incremental"
            )
            items[0].incremental = incremental
            try:
                future = scheduler.enqueue(items)[0]
            except BaseException:
                release(items)
                raise
            future.add_done_callback(lambda _: release(items))
            return StreamingResponse(_stream(future, updates, incremental), media_type="text/event-stream")
        try:
            results = await _unless_disconnected(request, scheduler.submit(items))
        finally:
            release(items)
        if results is None:  # nobody is there to read an answer
            return _error(499, "the client disconnected; its generation was stopped")
        bodies = [r.to_wire() for r in results]
        if req.return_text_in_logprobs:
            tokenizer = scheduler.model.tokenizer
            for body in bodies:
                _fill_token_text(body["meta_info"], tokenizer)
        return bodies if req.is_batch else bodies[0]


def _lora_name(value: Any, i: int) -> str | None:
    """A prompt's `lora_path`: the name of a loaded adapter (SGLang takes the name there), or None for the base."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise AdapterError(f"prompt {i}: lora_path must be a loaded adapter's name (a string), got {value!r}")
    return value


@functools.lru_cache(maxsize=4)
def text_encoder(tokenizer: Any) -> SegmentEncoder:
    """One segment cache per tokenizer (a weight update keeps the tokenizer): clients resend long shared prompts."""
    return SegmentEncoder(tokenizer)


def _work_item(req: GenerateRequest, i: int, prompt: str | list[int], lm: LoadedModel, cfg: EngineSettings) -> WorkItem:
    """The i-th prompt of `req`, tokenized and checked against the model and the engine's limits."""
    ids = text_encoder(lm.tokenizer).encode(prompt) if isinstance(prompt, str) else list(prompt)
    if not ids:
        raise BadRequest(f"prompt {i} is empty")
    if min(ids) < 0 or max(ids) >= lm.vocab_size:
        raise BadRequest(f"prompt {i} has token ids outside the vocabulary [0, {lm.vocab_size})")
    params = req.per_request("sampling_params", i, None) or SamplingParams()
    _check_budget(i, len(ids), params.max_new_tokens, cfg)
    top = int(req.per_request("top_logprobs_num", i, 0))
    top_cap = min(TOP_LOGPROBS_CAP, lm.vocab_size)
    if not 0 <= top <= top_cap:
        raise BadRequest(f"prompt {i}: top_logprobs_num must be between 0 and {top_cap}, got {top}")
    return WorkItem(
        input_ids=ids,
        params=params,
        return_logprob=bool(req.per_request("return_logprob", i, False)),
        logprob_start_len=int(req.per_request("logprob_start_len", i, -1)),
        top_logprobs_num=top,
        **({"rid": str(req.per_request("rid", i, None))} if req.rid is not None else {}),
    )


def _check_budget(i: int, prompt_tokens: int, max_new_tokens: int, cfg: EngineSettings) -> None:
    if max_new_tokens > cfg.max_new_tokens_cap:
        raise BadRequest(
            f"prompt {i}: max_new_tokens {max_new_tokens} is over the engine's cap of {cfg.max_new_tokens_cap} "
            "(engine.max_new_tokens_cap)"
        )
    if prompt_tokens + max_new_tokens > cfg.max_total_tokens:
        raise BadRequest(
            f"prompt {i} has {prompt_tokens} tokens + max_new_tokens {max_new_tokens}, "
            f"over the engine's limit of {cfg.max_total_tokens} tokens"
        )


def _tenant(request: Request, rid: object = None) -> str | None:
    """The request's tenant token: X-Openclaw-Tenant, else the one a `tenant_rid` request id carries (behind the
    sglang-router, which forwards the body but not the header); None without either (the system bucket)."""
    raw = request.headers.get(TENANT_HEADER) or tenant_of_rid(rid)
    if raw is None or not raw.strip():
        return None
    token = raw.strip()
    if len(token) > TENANT_MAX_CHARS or not token.isprintable():
        raise BadRequest(
            f"the tenant (X-Openclaw-Tenant header or t/<tenant>/<id> rid) must be a printable token of at most "
            f"{TENANT_MAX_CHARS} chars"
        )
    return token


async def _unless_disconnected(request: Request, work: Any) -> Any:
    """Await `work`, cancelling it (so the engine drops its rows) if the client disconnects first; None then."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=DISCONNECT_POLL_S)
            if done:
                return task.result()
            if await request.is_disconnected():
                log.info("client disconnected; cancelling its generation", path=request.url.path)
                task.cancel()
                return None
    finally:
        if not task.done():
            task.cancel()


async def _stream(task: asyncio.Future, updates: asyncio.Queue[WorkResult | None], incremental: bool = False):
    """Server-sent events: each snapshot (or, `incremental`, each delta) from `updates`, then the final answer of
    `task` (cancelled if the client leaves, which drops the request's row from the engine's batch). Incremental: the
    final event carries what the answer adds to the deltas sent.

    The task's end is queued behind the progress events (both come from the engine thread through the loop, in
    order), so each event costs one queue read: waiting on the queue and the task together cost a future and a wait
    per token, which a long streamed answer paid thousands of times. Events that queued up while the last one was
    written go out as one (the latest snapshot; the deltas joined), and none once the answer is complete (its final
    event carries them): a loaded server, or a slow client, gets fewer, larger events instead of falling further
    behind. Nothing waits to gather them, so an idle server still sends every token as it comes."""
    task.add_done_callback(lambda _: updates.put_nowait(None))
    sent_ids = sent_text = 0
    try:
        while (event := await updates.get()) is not None:
            while event is not None and not updates.empty():
                queued = updates.get_nowait()
                event = None if queued is None else merged_deltas(event, queued) if incremental else queued
            if event is None:
                break
            sent_ids += len(event.output_ids)
            sent_text += len(event.text)
            yield f"data: {json.dumps(event.to_wire())}\n\n"
        final = task.result()
        if incremental:
            final = final_delta(final, sent_ids, sent_text)
        yield f"data: {json.dumps(final.to_wire())}\n\n"
        yield "data: [DONE]\n\n"
    finally:
        if not task.done():
            task.cancel()
