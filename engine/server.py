"""HTTP front of the embedded engine: SGLang's native API (the subset this system uses).

Same routes, request fields and answer shapes as an SGLang server, so
`PolicyClient` (and any SGLang client) cannot tell them apart.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from pydantic import BaseModel, ValidationError

from engine.model_runner import LoadedModel, ModelLoadError, WorkItem, WorkResult, load_model
from engine.scheduler import Scheduler
from openclaw_rl.checkpoints import read_version_label
from policy_client.wire import GenerateRequest, SamplingParams, UpdateWeightsFromDiskRequest, UpdateWeightsResult

log = structlog.get_logger(__name__)


class BadRequest(ValueError):
    pass


def _error(status: int, message: str) -> JSONResponse:
    kind = "BadRequestError" if status < 500 else "InternalServerError"
    return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status_code=status)


def _refused(message: str) -> JSONResponse:
    """SGLang's answer to a weight update it did not apply (the old weights stay)."""
    return JSONResponse(UpdateWeightsResult(success=False, message=message).model_dump(), status_code=400)


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


def create_engine_app(
    scheduler: Scheduler, *, max_total_tokens: int, device: str = "auto", dtype: str = "auto"
) -> FastAPI:
    app = FastAPI(title="openclaw-rl embedded engine (SGLang API)", docs_url=None, redoc_url=None)
    update_lock = asyncio.Lock()

    @app.exception_handler(BadRequest)
    async def _bad(_: Request, exc: BadRequest) -> JSONResponse:
        return _error(400, str(exc))

    def work_items(req: GenerateRequest) -> list[WorkItem]:
        lm: LoadedModel = scheduler.model
        items = []
        try:
            for i, prompt in enumerate(req.prompts()):
                ids = lm.tokenizer.encode(prompt, add_special_tokens=False) if isinstance(prompt, str) else list(prompt)
                if not ids:
                    raise BadRequest(f"prompt {i} is empty")
                if min(ids) < 0 or max(ids) >= lm.vocab_size:
                    raise BadRequest(f"prompt {i} has token ids outside the vocabulary [0, {lm.vocab_size})")
                params = req.per_request("sampling_params", i, None) or SamplingParams()
                if len(ids) + params.max_new_tokens > max_total_tokens:
                    raise BadRequest(
                        f"prompt {i} has {len(ids)} tokens + max_new_tokens {params.max_new_tokens}, "
                        f"over the engine's limit of {max_total_tokens} tokens"
                    )
                items.append(
                    WorkItem(
                        input_ids=ids,
                        params=params,
                        return_logprob=bool(req.per_request("return_logprob", i, False)),
                        logprob_start_len=int(req.per_request("logprob_start_len", i, -1)),
                        top_logprobs_num=int(req.per_request("top_logprobs_num", i, 0)),
                        **({"rid": str(req.per_request("rid", i, None))} if req.rid is not None else {}),
                    )
                )
        except ValueError as exc:
            raise BadRequest(str(exc)) from exc
        return items

    @app.post("/generate")
    async def generate(request: Request) -> Any:
        req = await _parse(request, GenerateRequest)
        items = work_items(req)
        if req.stream:
            if len(items) != 1:
                raise BadRequest("streaming takes a single prompt, not a batch")
            return StreamingResponse(_stream(scheduler, items[0]), media_type="text/event-stream")
        results = await scheduler.submit(items)
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
            "max_total_num_tokens": max_total_tokens,
            "max_running_requests": scheduler.max_batch_size,
            "weight_version": lm.weight_version,
            "requests_done": scheduler.requests_done,
            "queue_depth": scheduler.queue_depth(),
        }

    @app.post("/flush_cache")
    async def flush_cache() -> PlainTextResponse:
        # KV caches live only for the duration of a batch here, so there is nothing
        # to drop between requests; answer as SGLang does.
        return PlainTextResponse("Cache flushed.")

    @app.post("/update_weights_from_disk")
    async def update_weights_from_disk(request: Request) -> JSONResponse:
        req = await _parse(request, UpdateWeightsFromDiskRequest)
        async with update_lock:  # one load at a time; serving continues meanwhile
            path = Path(req.model_path).expanduser()
            current = scheduler.model
            version = req.weight_version or read_version_label(path) or current.weight_version
            started = time.perf_counter()
            try:
                new = await asyncio.to_thread(load_model, path, device, dtype, version, current.tokenizer)
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

    return app


async def _parse(request: Request, model: type[BaseModel]) -> Any:
    """JSON body whatever the Content-Type (curl -d sends form encoding), validated."""
    raw = await request.body()
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


async def _stream(scheduler: Scheduler, item: WorkItem):
    loop = asyncio.get_running_loop()
    updates: asyncio.Queue[WorkResult] = asyncio.Queue()
    item.on_progress = lambda snap: loop.call_soon_threadsafe(updates.put_nowait, snap)
    task = asyncio.ensure_future(scheduler.submit([item]))
    try:
        while True:
            getter = asyncio.ensure_future(updates.get())
            done, _ = await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
            if getter in done:
                yield f"data: {json.dumps(getter.result().to_wire())}\n\n"
                continue
            getter.cancel()
            while not updates.empty():
                updates.get_nowait()  # snapshots superseded by the final answer
            final = task.result()[0]
            yield f"data: {json.dumps(final.to_wire())}\n\n"
            yield "data: [DONE]\n\n"
            return
    finally:
        if not task.done():
            task.cancel()
