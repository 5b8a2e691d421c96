"""HTTP front of the embedded engine: SGLang's native API (the subset this system uses).

Same routes, request fields and answer shapes as an SGLang server, so
`PolicyClient` (and any SGLang client) cannot tell them apart.

What it refuses, and why: requests without the bearer key when one is set
(SGLang's --api-key); bodies over a size limit; weight updates from folders
outside the allowed roots, sent as anything but application/json (a web page
can POST text/plain cross-site without asking), or labelled with anything but a
short plain token; generation requests over the token caps; requests of a tenant
that already has `engine.max_queued_per_tenant` waiting (503 with Retry-After).

Weight sync without disk (engine.weight_group): /init_weights_update_group joins
a trainer's process group, /update_weights_from_distributed receives a bucket
over it (a whole version is swapped in at once, in place), and
/destroy_weights_update_group leaves it. /pause_generation and
/continue_generation hold requests around an update instead of aborting them.

Tenants: a request may carry `X-Openclaw-Tenant: <opaque token>` (SGLang ignores
unknown headers, so the wire stays SGLang's); the scheduler shares slots fairly
between tenants. No header: the shared system bucket. A client that disconnects
stops its generation (streaming or not): the engine drops its row.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from pydantic import BaseModel, ValidationError
from starlette.types import ASGIApp, Receive, Scope, Send

from engine.model_runner import (
    LoadedModel,
    ModelLoadError,
    WorkItem,
    WorkResult,
    final_delta,
    load_model,
    merged_deltas,
)
from engine.scheduler import QueueFull, Scheduler
from engine.weight_group import WeightGroups, WeightSyncRefused
from openclaw_rl.checkpoints import read_version_label
from openclaw_rl.prometheus import CONTENT_TYPE as PROMETHEUS_CONTENT_TYPE
from openclaw_rl.settings import EngineSettings
from policy_client.segments import SegmentEncoder
from policy_client.weight_sync import (
    ContinueGenerationRequest,
    DestroyWeightsUpdateGroupRequest,
    InitWeightsUpdateGroupRequest,
    PauseGenerationRequest,
    UpdateWeightsFromDistributedRequest,
    WeightSyncResult,
)
from policy_client.wire import (
    GenerateRequest,
    SamplingParams,
    UpdateWeightsFromDiskRequest,
    UpdateWeightsResult,
    is_safe_version,
    tenant_of_rid,
)

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
OPEN_PATHS = frozenset({"/health"})
"""Routes served without the key: the liveness probe of `up` and of load balancers (it reveals nothing)."""


class Refused(Exception):
    """A request the engine will not serve, answered with `status` and the reason."""

    status = 400


class BadRequest(Refused, ValueError):
    status = 400


class TooLarge(Refused):
    status = 413


class WrongMediaType(Refused):
    status = 415


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    kind = "BadRequestError" if status < 500 else "InternalServerError"
    body = {"error": {"message": message, "type": kind, "code": status}}
    return JSONResponse(body, status_code=status, headers=headers)


def _refused(message: str) -> JSONResponse:
    """SGLang's answer to a weight update it did not apply (the old weights stay)."""
    return JSONResponse(UpdateWeightsResult(success=False, message=message).model_dump(), status_code=400)


def _sync_answer(success: bool, message: str) -> JSONResponse:
    """SGLang's answer to a group or distributed-update call: 200 when it succeeded, 400 otherwise."""
    return JSONResponse(
        WeightSyncResult(success=success, message=message).model_dump(), status_code=200 if success else 400
    )


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


def create_engine_app(scheduler: Scheduler, cfg: EngineSettings, *, weight_roots: Sequence[Path]) -> FastAPI:
    """The engine's routes over `scheduler`; `weight_roots`: the folders weight updates may load from."""
    app = FastAPI(title="openclaw-rl embedded engine (SGLang API)", docs_url=None, redoc_url=None)
    if cfg.api_key.get_secret_value():
        app.add_middleware(BearerKey, key=cfg.api_key.get_secret_value())
    update_lock = asyncio.Lock()  # one change of the served weights at a time (disk load or distributed commit)
    weight_groups = WeightGroups()

    @app.exception_handler(Refused)
    async def _refuse(_: Request, exc: Refused) -> JSONResponse:
        return _error(exc.status, str(exc))

    @app.exception_handler(QueueFull)
    async def _queue_full(_: Request, exc: QueueFull) -> JSONResponse:
        return _error(503, str(exc), {"Retry-After": str(exc.retry_after_s)})

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
        return items

    @app.post("/generate")
    async def generate(request: Request) -> Any:
        req = await _parse(request, GenerateRequest, cfg.max_request_bytes)
        tenant = _tenant(request, req.rid)
        # Text is tokenized off the event loop (the Rust tokenizer releases the GIL) and by cached segments
        # (text_encoder): a new 40,000-char prompt takes ~20 ms, one that repeats a prompt seen before well under 1.
        items = await asyncio.to_thread(work_items, req, tenant) if req.text is not None else work_items(req, tenant)
        if req.stream:
            if len(items) != 1:
                raise BadRequest("streaming takes a single prompt, not a batch")
            # Queued before the response starts, so a full queue is still answered with a 503, not a broken stream.
            loop = asyncio.get_running_loop()
            updates: asyncio.Queue[WorkResult | None] = asyncio.Queue()
            items[0].on_progress = lambda snap: loop.call_soon_threadsafe(updates.put_nowait, snap)
            incremental = cfg.incremental_streaming_output or (
                request.headers.get(STREAM_MODE_HEADER, "").strip().lower() == "incremental"
            )
            items[0].incremental = incremental
            future = scheduler.enqueue(items)[0]
            return StreamingResponse(_stream(future, updates, incremental), media_type="text/event-stream")
        results = await _unless_disconnected(request, scheduler.submit(items))
        if results is None:  # nobody is there to read an answer
            return _error(499, "the client disconnected; its generation was stopped")
        bodies = [r.to_wire() for r in results]
        if req.return_text_in_logprobs:
            tokenizer = scheduler.model.tokenizer
            for body in bodies:
                _fill_token_text(body["meta_info"], tokenizer)
        return bodies if req.is_batch else bodies[0]

    @app.get("/health")
    async def health() -> PlainTextResponse:
        return PlainTextResponse("")

    @app.get("/health_generate")
    async def health_generate() -> Any:
        lm = scheduler.model
        probe = WorkItem(
            input_ids=[lm.tokenizer.encode("ok", add_special_tokens=False)[0]],
            params=SamplingParams(max_new_tokens=1, temperature=0),
        )
        try:
            await asyncio.wait_for(scheduler.submit([probe]), timeout=60)
        except Exception as exc:  # any failure means the engine cannot generate
            return _error(503, f"generation probe failed: {exc}")
        return PlainTextResponse("")

    @app.get("/get_model_info")
    async def model_info() -> dict:
        lm = scheduler.model
        return {
            "model_path": str(lm.path),
            "tokenizer_path": str(lm.path),
            "is_generation": True,
            "preferred_sampling_params": None,
            "weight_version": lm.weight_version,
            "has_image_understanding": False,
            "has_audio_understanding": False,
            "model_type": lm.model.config.model_type,
            "architectures": getattr(lm.model.config, "architectures", None),
        }

    @app.get("/get_weight_version")
    async def weight_version() -> dict:
        return {"weight_version": scheduler.weight_version}

    @app.get("/get_server_info")
    async def server_info() -> dict:
        lm = scheduler.model
        return {
            "model_path": str(lm.path),
            "device": str(lm.device),
            "max_total_num_tokens": cfg.max_total_tokens,
            "max_running_requests": scheduler.max_batch_size,
            "weight_version": lm.weight_version,
            "requests_done": scheduler.requests_done,
            "requests_cancelled": scheduler.requests_cancelled,
            "queue_depth": scheduler.queue_depth(),
            "tenant_slot_cap": scheduler.tenant_cap,
            "max_queued_per_tenant": scheduler.max_queued_per_tenant,
            "tenants": [load.model_dump() for load in scheduler.tenant_loads()],
            "incremental_streaming_output": cfg.incremental_streaming_output,
            "chunked_prefill_size": cfg.prefill_chunk_tokens or -1,
            "disable_radix_cache": not scheduler.prefix_cache.enabled,
            "prefix_cache": scheduler.prefix_cache.stats(),
            "generation_paused": scheduler.paused,
            "weight_update_groups": weight_groups.names(),
            "dtype": str(next(lm.model.parameters()).dtype).removeprefix("torch."),
            "device_memory": device_memory(lm.device),
        }

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(scheduler.metrics.render(), media_type=PROMETHEUS_CONTENT_TYPE)

    @app.post("/flush_cache")
    async def flush_cache() -> PlainTextResponse:
        # Empties the prefix cache (running requests keep the KV they hold); answered as SGLang does.
        scheduler.flush_cache()
        return PlainTextResponse("Cache flushed.")

    @app.post("/update_weights_from_disk")
    async def update_weights_from_disk(request: Request) -> JSONResponse:
        _require_json(request)
        req = await _parse(request, UpdateWeightsFromDiskRequest, cfg.max_request_bytes)
        try:
            path = _allowed(req.model_path, weight_roots)
        except ValueError as exc:
            return _refused(f"model_path {req.model_path!r} cannot be resolved: {exc}")
        if path is None:
            return _refused(
                f"model_path {req.model_path} is outside the folders this engine loads weights from "
                f"({', '.join(map(str, weight_roots))}); engine.weight_roots sets them"
            )
        label = read_version_label(path)
        if label is not None and not is_safe_version(label):
            return _refused(f"the checkpoint's weight_version {label!r} is not a plain label ([A-Za-z0-9._-])")
        async with update_lock:  # one load at a time; serving continues meanwhile
            # Rows may still be finishing on the weights before the last update: loading a third copy now would pass
            # the engine's 2x weight memory budget, so wait for them (serving goes on meanwhile).
            await scheduler.wait_drained()
            current = scheduler.model
            version = req.weight_version or label or current.weight_version
            started = time.perf_counter()
            try:
                new = await asyncio.to_thread(
                    _with_threads(scheduler.full_threads, load_model),
                    path,
                    cfg.device,
                    cfg.dtype,
                    version,
                    current.tokenizer,
                    cfg.cpu_packed_linears,
                )
            except ModelLoadError as exc:
                return _refused(str(exc))
            if new.signature() != current.signature():
                return _refused(
                    f"checkpoint at {path} does not match the served model "
                    f"(type, vocab, hidden, layers) {new.signature()} != {current.signature()}; old weights kept"
                )
            await scheduler.swap(new)
            took = time.perf_counter() - started
            return JSONResponse(
                UpdateWeightsResult(
                    success=True, message=f"Succeeded to update model weights (version {version}, {took:.2f}s)."
                ).model_dump()
            )

    @app.post("/init_weights_update_group")
    async def init_weights_update_group(request: Request) -> JSONResponse:
        _require_json(request)
        req = await _parse(request, InitWeightsUpdateGroupRequest, cfg.max_request_bytes)
        try:
            return _sync_answer(True, await weight_groups.join(req, scheduler.model))
        except WeightSyncRefused as exc:
            return _sync_answer(False, str(exc))

    @app.post("/update_weights_from_distributed")
    async def update_weights_from_distributed(request: Request) -> JSONResponse:
        _require_json(request)
        req = await _parse(request, UpdateWeightsFromDistributedRequest, cfg.max_request_bytes)
        if req.abort_all_requests:
            await scheduler.abort_all()
        try:
            outcome = await weight_groups.receive(req, scheduler.model)
        except WeightSyncRefused as exc:
            log.warning("distributed weight update refused; old weights kept", reason=str(exc))
            return _sync_answer(False, f"{exc}; old weights kept (version {scheduler.weight_version})")
        if outcome.complete is None:
            return _sync_answer(
                True,
                f"Staged {outcome.staged} of {outcome.needed} weights of version {outcome.version}; "
                "they serve once every weight has arrived.",
            )
        async with update_lock:
            version = outcome.version or scheduler.weight_version
            await scheduler.commit_weights(outcome.complete, version)
        return _sync_answer(True, f"Succeeded to update model weights (version {version}).")

    @app.post("/destroy_weights_update_group")
    async def destroy_weights_update_group(request: Request) -> JSONResponse:
        _require_json(request)
        req = await _parse(request, DestroyWeightsUpdateGroupRequest, cfg.max_request_bytes, empty_ok=True)
        try:
            return _sync_answer(True, await weight_groups.destroy(req.group_name))
        except WeightSyncRefused as exc:
            return _sync_answer(False, str(exc))

    @app.post("/pause_generation")
    async def pause_generation(request: Request) -> JSONResponse:
        _require_json(request)
        req = await _parse(request, PauseGenerationRequest, cfg.max_request_bytes, empty_ok=True)
        await scheduler.pause(req.mode)
        return JSONResponse({"message": "Generation paused successfully.", "status": "ok"})

    @app.post("/continue_generation")
    async def continue_generation(request: Request) -> JSONResponse:
        _require_json(request)
        await _parse(request, ContinueGenerationRequest, cfg.max_request_bytes, empty_ok=True)
        scheduler.resume()
        return JSONResponse({"message": "Generation continued successfully.", "status": "ok"})

    return app


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


def _allowed(model_path: str, roots: Sequence[Path]) -> Path | None:
    """`model_path` with `~`, `..` and symlinks resolved if it lies in one of `roots` (resolved too), else None.

    The resolved path is the one loaded, so a link swapped after this check cannot redirect the load. Raises
    ValueError for a path that cannot be resolved (a NUL byte, a symlink loop, an unknown ~user).
    """
    try:
        real = Path(model_path).expanduser().resolve()
    except (OSError, RuntimeError) as exc:  # RuntimeError: symlink loop or unknown home (pathlib's choice)
        raise ValueError(str(exc)) from exc
    return real if any(real.is_relative_to(root.resolve()) for root in roots) else None


def _require_json(request: Request) -> None:
    """Only application/json: browsers send it cross-site only after a CORS preflight, which this server never grants,
    so a web page the operator visits cannot make the engine load weights."""
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        raise WrongMediaType(f"the body must be sent as application/json, not {media or 'without a Content-Type'}")


async def _read_body(request: Request, limit: int) -> bytes:
    """The body, refused with 413 once it passes `limit` bytes (at once when Content-Length announces more)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise TooLarge(f"the body is {declared} bytes, over the engine's limit of {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():  # chunked bodies announce no length: count as they arrive
        size += len(chunk)
        if size > limit:
            raise TooLarge(f"the body is over the engine's limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def _parse(request: Request, model: type[BaseModel], limit: int, *, empty_ok: bool = False) -> Any:
    """JSON body, validated. /generate takes it whatever the Content-Type (curl -d sends form encoding).
    `empty_ok`: no body at all means every field at its default (the control routes)."""
    raw = await _read_body(request, limit)
    if empty_ok and not raw.strip():
        raw = b"{}"
    try:
        data = json.loads(raw or b"null")
    except ValueError as exc:
        raise BadRequest(f"the body is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise BadRequest("the body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise BadRequest(_describe(exc)) from exc


def _describe(exc: ValidationError) -> str:
    """Readable validation errors: drop union-branch names and the 'wrong branch' noise."""
    parts: list[str] = []
    for e in exc.errors():
        loc = ".".join(
            str(x) for x in e["loc"] if not (isinstance(x, str) and (x[:1].isupper() or x.startswith("list[")))
        )
        msg = f"{loc or 'body'}: {e['msg']}"
        if msg not in parts:
            parts.append(msg)
    useful = [p for p in parts if not p.endswith("Input should be a valid list")] or parts
    return "; ".join(useful[:5])


class BearerKey:
    """Refuse every request but OPEN_PATHS without `Authorization: Bearer <key>` (401), as SGLang's --api-key."""

    def __init__(self, app: ASGIApp, key: str):
        self.app = app
        self.expected = f"Bearer {key}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS or self._authorized(scope):
            await self.app(scope, receive, send)
            return
        reason = "a valid API key is required: Authorization: Bearer <key>"
        await _error(401, reason, {"WWW-Authenticate": "Bearer"})(scope, receive, send)

    def _authorized(self, scope: Scope) -> bool:
        given = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
        scheme, _, token = given.partition(b" ")
        # the scheme is case-insensitive (RFC 9110); compare_digest: no timing hint about the key
        return scheme.lower() == b"bearer" and hmac.compare_digest(b"Bearer " + token.strip(), self.expected)


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


def _with_threads(threads: int | None, fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` on a worker thread with `threads` torch threads (None: as the thread has them)."""

    def run(*args: Any) -> Any:
        if threads is not None:
            import torch  # loaded with the model already

            torch.set_num_threads(threads)
        return fn(*args)

    return run


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


def device_memory(device) -> dict | None:
    """The GPU memory torch holds for the engine (weights, KV, activations), in GiB; None on CPU."""
    if getattr(device, "type", "cpu") != "cuda":
        return None
    import torch

    return {
        "allocated_gib": round(torch.cuda.memory_allocated(device) / 2**30, 3),
        "peak_allocated_gib": round(torch.cuda.max_memory_allocated(device) / 2**30, 3),
        "reserved_gib": round(torch.cuda.memory_reserved(device) / 2**30, 3),
    }
