"""Weight-update routes: /update_weights_from_disk (a checkpoint from an allowed folder), the distributed weight
sync without disk (/init_weights_update_group, /update_weights_from_distributed, /destroy_weights_update_group), and
/pause_generation and /continue_generation, which hold requests around an update instead of aborting them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from engine.http_guards import _parse, _require_json
from engine.scheduler import Scheduler
from engine.weight_group import WeightGroups, WeightSyncRefused
from engine.weights import ModelLoadError, load_model
from openclaw_rl.checkpoints import read_version_label
from openclaw_rl.settings import EngineSettings
from policy_client.weight_sync import (
    ContinueGenerationRequest,
    DestroyWeightsUpdateGroupRequest,
    InitWeightsUpdateGroupRequest,
    PauseGenerationRequest,
    UpdateWeightsFromDistributedRequest,
    WeightSyncResult,
)
from policy_client.wire import UpdateWeightsFromDiskRequest, UpdateWeightsResult, is_safe_version

log = structlog.get_logger(__name__)


def _refused(message: str) -> JSONResponse:
    """SGLang's answer to a weight update it did not apply (the old weights stay)."""
    return JSONResponse(UpdateWeightsResult(success=False, message=message).model_dump(), status_code=400)


def _sync_answer(success: bool, message: str) -> JSONResponse:
    """SGLang's answer to a group or distributed-update call: 200 when it succeeded, 400 otherwise."""
    return JSONResponse(
        WeightSyncResult(success=success, message=message).model_dump(), status_code=200 if success else 400
    )


def add_weight_routes(
    app: FastAPI,
    scheduler: Scheduler,
    cfg: EngineSettings,
    weight_groups: WeightGroups,
    *,
    weight_roots: Sequence[Path],
) -> None:
    """The weight-update routes over `scheduler`; `weight_roots`: the folders weight updates may load from;
    `weight_groups`: the process groups distributed updates arrive over."""
    update_lock = asyncio.Lock()  # one change of the served weights at a time (disk load or distributed commit)
    _add_disk_routes(app, scheduler, cfg, update_lock, weight_roots)
    _add_distributed_routes(app, scheduler, cfg, weight_groups, update_lock)


def _add_disk_routes(
    app: FastAPI, scheduler: Scheduler, cfg: EngineSettings, update_lock: asyncio.Lock, weight_roots: Sequence[Path]
) -> None:
    """/update_weights_from_disk: a checkpoint from one of `weight_roots`, loaded beside the served model, then
    swapped in."""

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


def _add_distributed_routes(
    app: FastAPI, scheduler: Scheduler, cfg: EngineSettings, weight_groups: WeightGroups, update_lock: asyncio.Lock
) -> None:
    """Weight sync without disk (over a trainer's process group, `weight_groups`), and generation paused around an
    update."""

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


def _with_threads(threads: int | None, fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` on a worker thread with `threads` torch threads (None: as the thread has them)."""

    def run(*args: Any) -> Any:
        if threads is not None:
            import torch  # loaded with the model already

            torch.set_num_threads(threads)
        return fn(*args)

    return run
