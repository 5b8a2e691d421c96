"""LoRA adapter routes, as SGLang's: POST /load_lora_adapter {"lora_name", "lora_path"} loads a PEFT adapter folder
from one of the engine's weight roots (engine.weight_roots, as /update_weights_from_disk) and POST
/unload_lora_adapter {"lora_name"} unloads one; /generate then takes the name in `lora_path`. Both answer SGLang's
LoRAUpdateResult: {"success", "error_message", "loaded_adapters": {name: path}}, HTTP 400 when nothing was done.

Loading reads the folder off the event loop and off the engine thread: requests decoding meanwhile are not held up,
and running requests keep the adapter objects they started with whatever is loaded, unloaded or evicted."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import structlog
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from engine.http_guards import _parse
from engine.lora_adapters import AdapterError, LoraRegistry, read_adapter
from engine.routes_weights import _allowed
from engine.scheduler import Scheduler
from openclaw_rl.settings import EngineSettings

log = structlog.get_logger(__name__)


class LoadLoraAdapterRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")  # SGLang's `pinned` and friends: accepted, not used

    lora_name: str = Field(min_length=1, max_length=256)
    lora_path: str = Field(min_length=1)


class UnloadLoraAdapterRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    lora_name: str = Field(min_length=1, max_length=256)


def _answer(loras: LoraRegistry, error: str | None = None) -> JSONResponse:
    body = {"success": error is None, "error_message": error, "loaded_adapters": loras.names()}
    return JSONResponse(body, status_code=200 if error is None else 400)


def add_lora_routes(
    app: FastAPI, scheduler: Scheduler, cfg: EngineSettings, loras: LoraRegistry, weight_roots: Sequence[Path]
) -> None:
    """/load_lora_adapter and /unload_lora_adapter over `loras`."""

    @app.post("/load_lora_adapter")
    async def load_lora_adapter(request: Request) -> JSONResponse:
        req = await _parse(request, LoadLoraAdapterRequest, cfg.max_request_bytes)
        name = req.lora_name.strip()
        if not name or not name.isprintable():
            return _answer(loras, "lora_name must be a printable, non-blank name")
        try:
            path = _allowed(req.lora_path, weight_roots)
        except ValueError as exc:
            return _answer(loras, f"lora_path {req.lora_path!r} cannot be resolved: {exc}")
        if path is None:
            return _answer(
                loras,
                f"lora_path {req.lora_path} is outside the folders adapters may be loaded from "
                f"({', '.join(map(str, weight_roots))}); engine.weight_roots sets them",
            )
        if name in loras.names():
            return _answer(loras, f"a LoRA adapter named {name!r} is loaded already; unload it first")
        try:
            adapter = await asyncio.to_thread(read_adapter, path, name, loras.next_uid(), scheduler.model.model)
            evicted = loras.add(adapter)
        except AdapterError as exc:
            return _answer(loras, str(exc))
        log.info(
            "lora adapter loaded",
            name=name,
            path=str(path),
            rank=adapter.rank,
            layers=len(adapter.weights),
            bytes=adapter.nbytes,
            version=adapter.version,
            evicted=evicted,
        )
        return _answer(loras)

    @app.post("/unload_lora_adapter")
    async def unload_lora_adapter(request: Request) -> JSONResponse:
        req = await _parse(request, UnloadLoraAdapterRequest, cfg.max_request_bytes)
        if not loras.remove(req.lora_name):
            loaded = ", ".join(loras.names()) or "none"
            return _answer(loras, f"LoRA adapter {req.lora_name!r} is not loaded (loaded: {loaded})")
        log.info("lora adapter unloaded", name=req.lora_name)
        return _answer(loras)
