"""`openclaw-rl worker --pool NAME`: run one pool's Temporal worker until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from datetime import timedelta

import structlog
from temporalio.service import RPCError
from temporalio.worker import PollerBehaviorSimpleMaximum, Worker

from openclaw_rl.settings import Pool, Settings
from openclaw_rl.temporal_client import connect, metrics_runtime
from workers.backlog import BacklogPoller
from workers.pools import components_for
from workers.versioning import deployment_config

log = structlog.get_logger(__name__)

GRACEFUL_SHUTDOWN_S = 10


async def _route_to(client, settings: Settings, build_id: str) -> None:
    """One box (`make_current_on_start`): this build is the roll-out, and the one before it is gone with the restart
    (what was pinned to it moves here). A fleet: only its first build makes itself current; later ones wait for
    `openclaw-rl deploy promote`. A failure is logged, not fatal: the worker polls on, and `promote` can route to
    it."""
    from control.deployments import make_current, make_current_if_none, release_pinned_elsewhere

    try:
        if not settings.temporal.makes_current_on_start():
            if await make_current_if_none(client, settings, build_id):
                log.info("the deployment's first build: made current", build_id=build_id)
            return
        await make_current(client, settings, build_id)
        if settings.temporal.address is None:  # the embedded server: no other build's worker can be alive
            await release_pinned_elsewhere(client, settings, build_id)
    except (RuntimeError, RPCError) as exc:
        log.error("could not make this build current", build_id=build_id, error=str(exc))


async def run_worker(settings: Settings, pool: Pool) -> None:
    address = settings.metrics.address(pool)
    runtime = metrics_runtime(address, pool.value) if address else None
    client = await connect(settings.temporal, runtime, keyring=settings.keyring())
    if runtime is not None:
        from activities import pool_metrics

        pool_metrics.declare(runtime.metric_meter, pool.value)
        log.info("metrics endpoint", pool=pool.value, url=f"http://{address}/metrics")
    parts = components_for(pool, settings)
    queue = settings.temporal.task_queue(pool)
    versioned = deployment_config(settings) if parts.workflows else None
    polls = PollerBehaviorSimpleMaximum(settings.temporal.worker_pollers)
    workers = [
        Worker(
            client,
            task_queue=queue,
            workflows=parts.workflows,
            activities=parts.activities,
            graceful_shutdown_timeout=timedelta(seconds=GRACEFUL_SHUTDOWN_S),
            workflow_task_poller_behavior=polls,
            # A slot-limited queue (the env pool's) polls only while it has room: more polls would only wait on
            # the slot supplier, each in a loop of its own.
            **({"tuner": parts.shared_tuner} if parts.shared_tuner else {"activity_task_poller_behavior": polls}),
            **({"deployment_config": versioned} if versioned else {}),
        )
    ]
    if parts.own_queue is not None:
        workers.append(
            Worker(
                client,
                task_queue=parts.own_queue,
                activities=parts.activities,
                graceful_shutdown_timeout=timedelta(seconds=GRACEFUL_SHUTDOWN_S),
                max_concurrent_activities=parts.own_queue_slots or 100,
                activity_task_poller_behavior=polls,
            )
        )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log.info(
        "worker polling",
        pool=pool.value,
        task_queue=queue,
        own_queue=parts.own_queue,
        workflows=len(parts.workflows),
        activities=len(parts.activities),
    )
    try:
        async with contextlib.AsyncExitStack() as running:
            for worker in workers:
                await running.enter_async_context(worker)
            if versioned is not None:
                await _route_to(client, settings, versioned.version.build_id)
            if runtime is not None:  # the autoscalers' signal, served with the pool's metrics
                poller = BacklogPoller(client, runtime.metric_meter, [queue], settings.metrics.backlog_interval_s)
                await running.enter_async_context(poller.running())
            await stop.wait()
            log.info("worker stopping", pool=pool.value)
    finally:
        for close in parts.closers:
            await close()
