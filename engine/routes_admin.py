"""Health, information, metrics and cache routes: /health (open without the key), /health_generate (a one-token
probe), /get_model_info, /get_weight_version, /get_server_info, /metrics (Prometheus) and /flush_cache.

/get_server_info's `cuda_graphs`: the decode graphs captured and replayed on the served model. Its `memory`: bytes
held by the weights (tied weights once; `weights_device`: where they are now), by old weights still finishing rows
after a swap, by the running batches' KV and by the prefix cache; on CUDA torch.cuda.memory_allocated and
memory_reserved; what is released now (/release_memory_occupation) and the bytes each released tag gave back."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import FastAPI
from fastapi.responses import PlainTextResponse, Response

from engine.http_guards import _error
from engine.scheduler import Scheduler
from engine.weight_group import WeightGroups
from engine.work import WorkItem
from openclaw_rl.prometheus import CONTENT_TYPE as PROMETHEUS_CONTENT_TYPE
from openclaw_rl.settings import EngineSettings
from policy_client.wire import SamplingParams


def add_admin_routes(app: FastAPI, scheduler: Scheduler, cfg: EngineSettings, weight_groups: WeightGroups) -> None:
    """The health, information, metrics and cache routes over `scheduler`; `weight_groups`: the weight-update groups
    /get_server_info lists."""

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
            "memory": scheduler.memory(),
            "cuda_graphs": graph_stats(lm.model),
        }

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(scheduler.metrics.render(), media_type=PROMETHEUS_CONTENT_TYPE)

    @app.post("/flush_cache")
    async def flush_cache() -> PlainTextResponse:
        # Empties the prefix cache (running requests keep the KV they hold); answered as SGLang does.
        scheduler.flush_cache()
        return PlainTextResponse("Cache flushed.")


def graph_stats(model) -> dict | None:
    """Graphs captured and replayed by the served model's CUDA-graph decoder (None: none made yet, or eager):
    a check can tell the decode steps it timed or compared were replays."""
    from engine.graph_decode import _DECODERS

    dec = _DECODERS.get(model)
    if dec is None or dec.broken:
        return None
    return {"captures": dec.captures, "replays": dec.replays, "pool_bytes": dec.pool_bytes()}


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
