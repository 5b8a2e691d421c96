"""`openclaw-rl engine`: load a checkpoint and serve it over SGLang's HTTP API."""

from __future__ import annotations

import os
from pathlib import Path

import structlog

from openclaw_rl.settings import Settings

log = structlog.get_logger(__name__)


def prepare_model(settings: Settings, model_path: Path | None = None) -> Path:
    """The checkpoint to serve: the given/configured one, or the built-in tiny model (built on first run)."""
    if model_path is not None:
        return Path(model_path).expanduser().absolute()
    if settings.engine.model_path is not None:
        return settings.served_model_path()
    from engine.tiny_qwen3 import ensure_tiny_model

    return ensure_tiny_model(settings.tiny_model_dir)


PUBLISHED_WAIT_S = 3.0
"""How long a starting engine retries Redis for the published version: `up` starts valkey beside the engines, and
it answers within a fraction of this."""


def newest_trained(settings: Settings, base: Path) -> Path:
    """After a restart, serve the version the other servers serve, rather than the base model.

    The servers load each new version as the trainer publishes it; an engine that restarts would otherwise serve the
    base weights as version 0 while training is at vN, and every sample it then generates would be stale. The
    published version (Redis `POLICY_VERSION`, set once every server has loaded it) is the one, not the newest
    folder on disk: a checkpoint is written before it is published, and may never be (its publication failed).
    Without Redis (an engine run on its own), the newest complete checkpoint.
    """
    from openclaw_rl.checkpoints import newest_version, read_version_label, served_dir, version_dir

    def servable(folder: Path) -> bool:
        return (folder / "config.json").is_file() and read_version_label(folder) is not None

    newest = newest_version(settings.checkpoints_dir)
    if not newest:
        return base  # nothing trained: no need to ask anyone
    published = published_version(settings)
    if published is None:
        folder = version_dir(settings.checkpoints_dir, newest)
        if servable(folder):
            log.warning("published version unknown (Redis unreachable): serving the newest checkpoint", version=newest)
            return folder
        return base
    for folder in (version_dir(settings.checkpoints_dir, published), served_dir(settings.checkpoints_dir, published)):
        if published and servable(folder):
            log.info("serving the published version", version=published, path=str(folder), base=str(base))
            return folder
    # Published from the trainer's memory (no folder holds it): the newest durable checkpoint until the trainer
    # hands the version over again (the supervisor asks it to, stack.router.catch_up).
    folder = version_dir(settings.checkpoints_dir, newest)
    if published and servable(folder):
        log.info(
            "the published version lives in the trainer's memory; serving the newest durable checkpoint meanwhile",
            published=published,
            version=newest,
        )
        return folder
    if published:
        log.warning("the published version has no servable checkpoint; serving the base model", version=published)
    return base


def published_version(settings: Settings, wait_s: float = PUBLISHED_WAIT_S) -> int | None:
    """The policy version every server has loaded (0: none published yet); None when the store does not answer."""
    from store.errors import StoreUnavailable
    from store.policy import served_version_now

    try:
        return served_version_now(settings.redis.target(), wait_s)
    except StoreUnavailable as exc:
        log.warning("the store is unreachable; the published version is unknown", error=str(exc))
        return None


def serve_engine(
    settings: Settings, model_path: Path | None = None, port: int | None = None, weight_version: str = "0"
) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a hub: checkpoints are local paths
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch
    import uvicorn
    from transformers.utils import logging as hf_logging

    from engine.graph_decode import GraphSettings
    from engine.model_runner import load_model
    from engine.scheduler import Scheduler
    from engine.server import create_engine_app
    from openclaw_rl.checkpoints import read_version_label

    hf_logging.disable_progress_bar()
    if settings.engine.torch_threads:
        torch.set_num_threads(settings.engine.torch_threads)
    path = prepare_model(settings, model_path)
    if model_path is None:
        path = newest_trained(settings, path)
    cfg = settings.engine
    model = load_model(
        path,
        cfg.device,
        cfg.dtype,
        read_version_label(path) or weight_version,
        cpu_packed_linears=cfg.cpu_packed_linears,
    )
    log.info("engine model loaded", path=str(path), device=str(model.device), weight_version=model.weight_version)
    scheduler = Scheduler(
        model,
        max_batch_size=cfg.max_batch_size,
        batch_window_ms=cfg.batch_window_ms,
        tenant_slot_share=cfg.tenant_slot_share,
        max_queued_per_tenant=cfg.max_queued_per_tenant,
        prefix_cache_mb=cfg.prefix_cache_mb,
        prefill_chunk_tokens=cfg.prefill_chunk_tokens,
        one_thread_for_one_row=model.device.type == "cpu" and not cfg.torch_threads,
        graphs=GraphSettings(cfg.cuda_graphs, max_rows=cfg.max_batch_size, max_tokens=cfg.cuda_graph_max_tokens),
        pause_lease_s=cfg.pause_lease_s,
    )
    scheduler.start()
    roots = settings.engine_weight_roots(path)
    app = create_engine_app(scheduler, cfg, weight_roots=roots)
    _warn_if_open(cfg.host, bool(cfg.api_key.get_secret_value()))
    log.info("engine weight updates allowed from", roots=[str(r) for r in roots])
    try:
        uvicorn.run(app, host=cfg.host, port=port or cfg.port, log_level="warning", access_log=False)
    finally:
        scheduler.stop()


def _warn_if_open(host: str, keyed: bool) -> None:
    """Anyone who reaches a keyless engine can generate and swap its weights: say so when it leaves loopback."""
    if not keyed and host not in ("127.0.0.1", "localhost", "::1"):
        log.warning("engine listens beyond loopback without engine.api_key: anyone reaching it can use it", host=host)
