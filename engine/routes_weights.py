"""Weight-update routes: /update_weights_from_disk (a checkpoint from an allowed folder),
/update_weights_from_tensor (weights handed over from memory on the same machine: shared-memory files or CUDA IPC
handles, policy_client.weight_handoff), the distributed weight sync without disk (/init_weights_update_group,
/update_weights_from_distributed, /destroy_weights_update_group), /pause_generation and /continue_generation, which
hold requests around an update instead of aborting them, and /release_memory_occupation and
/resume_memory_occupation, which give the device memory back for a train step on the same GPU and take it again.

One lock orders every change of the served weights and of their memory: an update, a release, a resume.

An update naming the version the engine serves already, from the same source (a checkpoint: the same resolved
folder; a hand-off: any, since its version names it), answers success without reloading or emptying the prefix
cache: a trainer that retries, or a launcher that reconciles, costs nothing.

Updates while the weights are released are written into their CPU copy (a checkpoint is loaded into CPU memory, a
hand-off copied there) and serve after /resume_memory_occupation. Waiting for the resume instead would block a
trainer that updates before it resumes (SGLang's order: resume weights, update, resume kv_cache) and keep its
buffers alive meanwhile; writing to the device would take memory back in the middle of a train step.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import structlog
import torch
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from engine.http_guards import _parse, _require_json
from engine.memory_release import MemoryRefused
from engine.scheduler import Scheduler
from engine.weight_group import WeightGroups, WeightSyncRefused
from engine.weights import (
    TENSOR,
    LoadedModel,
    ModelLoadError,
    WeightMismatch,
    check_manifest,
    disk_origin,
    load_model,
    read_handoff,
    serves_already,
    weight_specs,
)
from openclaw_rl.checkpoints import read_version_label
from openclaw_rl.settings import EngineSettings
from policy_client.weight_handoff import CudaIpcBucket, UpdateWeightsFromTensorRequest
from policy_client.weight_sync import (
    ContinueGenerationRequest,
    DestroyWeightsUpdateGroupRequest,
    InitWeightsUpdateGroupRequest,
    PauseGenerationRequest,
    ReleaseMemoryOccupationRequest,
    ResumeMemoryOccupationRequest,
    UpdateWeightsFromDistributedRequest,
    WeightSyncResult,
)
from policy_client.wire import UpdateWeightsFromDiskRequest, UpdateWeightsResult, is_safe_version

log = structlog.get_logger(__name__)


def _refused(message: str) -> JSONResponse:
    """SGLang's answer to a weight update it did not apply (the old weights stay)."""
    return JSONResponse(UpdateWeightsResult(success=False, message=message).model_dump(), status_code=400)


def _updated(version: str, started: float, scheduler: Scheduler) -> JSONResponse:
    """SGLang's answer to a weight update applied."""
    took = time.perf_counter() - started
    note = (
        " Written to the weights' CPU copy while they are released; they serve after /resume_memory_occupation."
        if scheduler.weights_offloaded
        else ""
    )
    message = f"Succeeded to update model weights (version {version}, {took:.2f}s).{note}"
    return JSONResponse(UpdateWeightsResult(success=True, message=message).model_dump())


def _already(version: str, source: str) -> JSONResponse:
    """The answer to an update naming the version served already from the same source: nothing reloaded."""
    message = f"Already serving weight version {version} from {source}; not reloaded, prefix cache kept."
    return JSONResponse(UpdateWeightsResult(success=True, message=message).model_dump())


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
    # One change of the served weights or of their memory at a time (disk load, hand-off, distributed commit,
    # release, resume).
    update_lock = asyncio.Lock()
    _add_disk_routes(app, scheduler, cfg, update_lock, weight_roots)
    _add_tensor_route(app, scheduler, cfg, update_lock)
    _add_distributed_routes(app, scheduler, cfg, weight_groups, update_lock)
    _add_memory_routes(app, scheduler, cfg, update_lock)


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
            version = req.weight_version or label or scheduler.weight_version
            if serves_already(scheduler.model, disk_origin(path), version):
                return _already(version, str(path))
            # Rows may still be finishing on the weights before the last update: loading a third copy now would pass
            # the engine's 2x weight memory budget, so wait for them (serving goes on meanwhile).
            await scheduler.wait_drained()
            current = scheduler.model
            started = time.perf_counter()
            try:
                new = await _load_beside(scheduler, cfg, current, path, version)
            except ModelLoadError as exc:
                return _refused(str(exc))
            if new.signature() != current.signature():
                return _refused(
                    f"checkpoint at {path} does not match the served model "
                    f"(type, vocab, hidden, layers) {new.signature()} != {current.signature()}; old weights kept"
                )
            await scheduler.swap(new)
            return _updated(version, started, scheduler)


async def _load_beside(
    scheduler: Scheduler, cfg: EngineSettings, current: LoadedModel, path: Path, version: str
) -> LoadedModel:
    """The checkpoint at `path` loaded off the event loop, on the served device; into CPU memory, in the served
    dtype, while the weights are released there (`resume_memory` moves it to the device). Raises ModelLoadError."""
    offloaded = scheduler.weights_offloaded
    device, dtype = ("cpu", _dtype_name(current)) if offloaded else (cfg.device, cfg.dtype)
    new = await asyncio.to_thread(
        _with_threads(scheduler.full_threads, load_model),
        path,
        device,
        dtype,
        version,
        current.tokenizer,
        cfg.cpu_packed_linears and not offloaded,
    )
    return replace(new, device=current.device) if offloaded else new


def _dtype_name(lm: LoadedModel) -> str:
    return str(next(lm.model.parameters()).dtype).removeprefix("torch.")


def _add_tensor_route(app: FastAPI, scheduler: Scheduler, cfg: EngineSettings, update_lock: asyncio.Lock) -> None:
    """/update_weights_from_tensor: weights handed over from memory (policy_client.weight_handoff), checked against
    the served model, copied out of the sender's buffers, then written into the served model in place between two
    forward passes (as a distributed update: rows running then go on on the new weights; a trainer pauses first).

    Unlike SGLang, one request carries every weight (tied weights once): a hand-off missing a weight is refused, so
    a version is never half applied. The copy out of the sender's buffers is a second copy of the weights, held
    until they are written in place (the engine's 2x weight memory budget, as a checkpoint load)."""

    @app.post("/update_weights_from_tensor")
    async def update_weights_from_tensor(request: Request) -> JSONResponse:
        _require_json(request)
        req = await _parse(request, UpdateWeightsFromTensorRequest, cfg.max_request_bytes)
        async with update_lock:
            current = scheduler.model
            if serves_already(current, TENSOR, req.weight_version):
                return _already(req.weight_version, "an in-memory hand-off")
            started = time.perf_counter()
            try:
                tensors = await _read_tensors(req, scheduler, current)
            except (OSError, ValueError, RuntimeError) as exc:  # WeightMismatch is a ValueError
                reason = str(exc) if isinstance(exc, WeightMismatch) else f"cannot read the hand-off: {exc}"
                log.warning("weight hand-off refused; old weights kept", reason=reason)
                return _refused(f"{reason}; nothing applied, version {current.weight_version} serves on")
            if req.abort_all_requests:
                await scheduler.abort_all()
            await scheduler.commit_weights(tensors, req.weight_version, TENSOR)
            # Emptied whatever flush_cache says: KV of the old weights must never serve the new ones (as every
            # update of this engine); a version not reloaded keeps it.
            return _updated(req.weight_version, started, scheduler)


async def _read_tensors(
    req: UpdateWeightsFromTensorRequest, scheduler: Scheduler, current: LoadedModel
) -> dict[str, torch.Tensor]:
    """The hand-off's tensors in the served dtype, on the served device (in CPU memory while the weights are
    released there), each checked first by its manifest; raises WeightMismatch, OSError or RuntimeError."""
    specs = weight_specs(current)
    check_manifest(specs, ((t.name, t.shape, t.dtype) for b in req.buckets for t in b.tensors))
    if any(isinstance(b, CudaIpcBucket) for b in req.buckets) and current.device.type != "cuda":
        raise WeightMismatch(f"CUDA IPC buckets need an engine serving on a CUDA device, not {current.device}")
    device = torch.device("cpu") if scheduler.weights_offloaded else current.device
    return await asyncio.to_thread(_with_threads(scheduler.full_threads, read_handoff), req.buckets, specs, device)


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
        scheduler.renew_pause()  # the trainer that paused is at work: each bucket starts the pause's lease again
        try:
            outcome = await weight_groups.receive(req, scheduler.model)
            scheduler.renew_pause()
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


def _add_memory_routes(app: FastAPI, scheduler: Scheduler, cfg: EngineSettings, update_lock: asyncio.Lock) -> None:
    """/release_memory_occupation and /resume_memory_occupation (SGLang's): tags kv_cache, weights, cuda_graph
    (null or empty: all; this engine has no CUDA graphs). Both are idempotent."""

    @app.post("/release_memory_occupation")
    async def release_memory_occupation(request: Request) -> JSONResponse:
        _require_json(request)
        req = await _parse(request, ReleaseMemoryOccupationRequest, cfg.max_request_bytes, empty_ok=True)
        async with update_lock:  # never in the middle of an update; an update waits for it
            try:
                message = await scheduler.release_memory(req.tag_set())
            except MemoryRefused as exc:
                return _sync_answer(False, str(exc))
        return _sync_answer(True, message + _graphs_note(req.tags))

    @app.post("/resume_memory_occupation")
    async def resume_memory_occupation(request: Request) -> JSONResponse:
        _require_json(request)
        req = await _parse(request, ResumeMemoryOccupationRequest, cfg.max_request_bytes, empty_ok=True)
        async with update_lock:
            try:
                message = await scheduler.resume_memory(req.tag_set())
            except RuntimeError as exc:  # out of device memory (the trainer still holds it): retry later
                log.warning("resuming memory failed", error=str(exc)[:400])
                body = WeightSyncResult(success=False, message=f"cannot resume now ({str(exc)[:400]}); retry")
                return JSONResponse(body.model_dump(), status_code=503)
        return _sync_answer(True, message + _graphs_note(req.tags))


def _graphs_note(tags: list[str] | None) -> str:
    # The decode graphs point into the KV pool: they go with kv_cache and are captured again on the next decode.
    return " cuda_graph: the decode graphs go and come back with kv_cache." if tags and "cuda_graph" in tags else ""


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
