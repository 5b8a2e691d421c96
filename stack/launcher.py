"""Bring the stack up in dependency order, supervise it, and take it down in reverse.

Tier 1: Temporal dev server, valkey, the embedded engines and, with several, the
sglang-router in front of them (each skipped when an external one is configured).
Tier 2: one worker per pool and the API server.
"Up" is reported only after a StackProbeWorkflow has reached every pool.
A child that dies is restarted with backoff; one that keeps dying stops the stack.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import shutil
import signal
import sys
import time
import uuid
from datetime import timedelta

import httpx
import structlog

from contracts.health import ProbeInput
from engine.tiny_qwen3 import tiny_model_built
from openclaw_rl.settings import LOOPBACK, Pool, Settings
from openclaw_rl.temporal_client import connect, ensure_search_attributes
from stack.preflight import (
    GB,
    StackError,
    check_data_dir,
    check_port_free,
    disk_room_problem,
    persistence_problem,
)
from stack.process import ManagedProcess, ServiceFailed, ServiceSpec
from stack.router import RouterCallError, RouterFront, catch_up
from stack.services import (
    api_service,
    engine_names,
    engine_services,
    mask_url,
    router_service,
    temporal_service,
    valkey_service,
    worker_service,
)
from store.errors import StoreError
from workflows.stack_probe import StackProbeWorkflow

log = structlog.get_logger(__name__)

MAX_RESTARTS = 5
RECONCILE_S = 15.0
"""How often running engines are checked against the published policy version."""
RESTART_WINDOW_S = 120.0
PROBE_TIMEOUT_S = 120.0


class Stack:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.tier1: list[ManagedProcess] = []
        self.tier2: list[ManagedProcess] = []
        self.state_path = settings.data_dir / "stack.json"
        self._stopping = asyncio.Event()
        self.failure: str | None = None
        self.warnings: list[str] = []
        """What is unsafe about the data disk or the store's set-up: logged at start and repeated in the banner."""
        self.router = RouterFront.embedded(settings) if settings.embedded_router else None
        self._engine_urls = (
            dict(zip(engine_names(settings), settings.engine_urls())) if settings.embedded_engine else {}
        )

    # ---- lifecycle -------------------------------------------------------
    def prepare_data_dir(self) -> None:
        """The data directory and the folders the stack writes in it, private to this user (0700)."""
        s = self.settings
        check_data_dir(
            s.data_dir,
            [s.logs_dir, s.temporal_db.parent, s.redis_dir, s.models_dir, s.checkpoints_dir, s.records_dir],
        )

    def preflight(self) -> None:
        s = self.settings
        self.prepare_data_dir()
        ports = [("API", s.api.host, s.api.port, "OPENCLAW_RL_API__PORT")]
        if s.temporal.embedded:
            ports.append(("Temporal gRPC", LOOPBACK, s.temporal.port, "OPENCLAW_RL_TEMPORAL__PORT"))
            if not s.temporal.headless:
                ports.append(("Temporal Web UI", LOOPBACK, s.temporal.ui_port, "OPENCLAW_RL_TEMPORAL__UI_PORT"))
        if s.redis.embedded:
            ports.append(("valkey", LOOPBACK, s.redis.port, "OPENCLAW_RL_REDIS__PORT"))
        if s.embedded_engine:
            for name, port in zip(engine_names(s), s.engine_ports()):
                ports.append((name, s.engine.host, port, "OPENCLAW_RL_ENGINE__PORT"))
        if s.embedded_router:
            ports.append(("router", LOOPBACK, s.router.port, "OPENCLAW_RL_ROUTER__PORT"))
            ports.append(("router metrics", LOOPBACK, s.router.metrics_port, "OPENCLAW_RL_ROUTER__METRICS_PORT"))
        seen: dict[int, str] = {}
        for name, host, port, hint in ports:
            if port in seen:
                raise StackError(
                    f"{name} and {seen[port]} are both configured on port {port}; set {hint} to another port"
                )
            seen[port] = name
            check_port_free(name, host, port, hint)
        if (
            s.engine.model_path is not None
            and s.embedded_engine
            and not (s.served_model_path() / "config.json").is_file()
        ):
            raise StackError(
                f"engine.model_path {s.served_model_path()} is not a Hugging Face checkpoint folder (no config.json)"
            )
        if s.embedded_router and importlib.util.find_spec("sglang_router") is None:
            raise StackError(
                f"engine.replicas={s.engine.replicas} needs the sglang-router package: pip install "
                "'openclaw-rl[router]' (or set engine.replicas = 1)"
            )
        from trainers import backend_missing

        if why := backend_missing(s.training.backend):
            raise StackError(why)
        if why := sandbox_refusal(s):
            raise StackError(why)

    def _specs(self) -> tuple[list[ServiceSpec], list[ServiceSpec], list[ServiceSpec]]:
        """The stores, the engines (with their router), and the workers and API."""
        s = self.settings
        stores = []
        if s.temporal.embedded:
            stores.append(temporal_service(s))
        if s.redis.embedded:
            stores.append(valkey_service(s))
        engines = engine_services(s, self.router) if s.embedded_engine else []
        if self.router is not None:
            engines.append(router_service(s, self.router))  # last: stopped first
        tier2 = [worker_service(p) for p in Pool] + [api_service(s)]
        return stores, engines, tier2

    async def start(self) -> None:
        self.preflight()
        logs = self.settings.logs_dir
        stores_specs, engine_specs, specs2 = self._specs()
        stores = [ManagedProcess(sp, logs) for sp in stores_specs]
        self.tier1 = stores + [ManagedProcess(sp, logs) for sp in engine_specs]
        self.tier2 = [ManagedProcess(sp, logs) for sp in specs2]
        self._write_state("starting")
        for p in self.tier1:
            p.start()
        # Workers and the API need only the stores: they import and load their tokenizers while the engine loads its
        # model (the engine took a third of a start, and the workers then started on idle cores). Except on a first
        # run, when the engine builds the tiny model the workers read (its tokenizer; the judge chosen for it).
        engines_ready = asyncio.ensure_future(asyncio.gather(*(p.wait_ready() for p in self.tier1[len(stores) :])))
        try:
            await asyncio.gather(*(p.wait_ready() for p in stores))
            if self._engine_builds_the_model():
                await engines_ready
            client = await connect(self.settings.temporal, keyring=self.settings.keyring())
            added = await ensure_search_attributes(client, self.settings.temporal.namespace)
            if added:
                log.info("registered search attributes", names=added)
            for p in self.tier2:
                p.start()
            await asyncio.gather(engines_ready, *(p.wait_ready() for p in self.tier2))
        finally:
            engines_ready.cancel()  # when the stores or the workers failed first; its own failure is read here
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await engines_ready
        await self.probe(client)
        self.warn_about_storage()  # now: on a first run the served model exists only once the engine has built it
        if self.settings.training.auto_start:
            from control.training import start_training

            wf_id = await start_training(client, self.settings)
            log.info("training workflow running", workflow_id=wf_id)
        from control.evaluation import ensure_eval_schedule

        if await ensure_eval_schedule(client, self.settings):  # off (every_versions = 0): deleted
            log.info("eval schedule set", every_versions=self.settings.eval.every_versions)
        from control.progress import ensure_progress_schedule

        if await ensure_progress_schedule(client, self.settings):  # off (no held-out share): deleted
            log.info("progress schedule set", every_s=self.settings.eval.progress.every_s)
        self._write_state("up")
        self._announce()

    def warn_about_storage(self) -> None:
        """Log what would make a full data disk hurt: too little room for training's checkpoints, or a store that
        exits on a failed write."""
        s = self.settings
        self.warnings = [
            w for w in (persistence_problem(s.redis.embedded, s.redis.appendfsync), self._disk_problem()) if w
        ]
        for warning in self.warnings:
            log.warning(warning)

    def _disk_problem(self) -> str | None:
        from openclaw_rl.checkpoints import checkpoint_bytes

        s = self.settings
        try:
            free = shutil.disk_usage(s.data_dir).free
            one = checkpoint_bytes(s.served_model_path(), lora=s.training.lora.enabled)
        except (OSError, ValueError, KeyError) as exc:  # an unreadable model: the engine says so on its own
            log.warning("cannot size a checkpoint of the served model", error=f"{type(exc).__name__}: {exc}")
            return None
        return disk_room_problem(free, one, int(s.training.checkpoint.disk_reserve_gb * GB))

    def _engine_builds_the_model(self) -> bool:
        s = self.settings
        return s.embedded_engine and s.engine.model_path is None and not tiny_model_built(s.tiny_model_dir)

    async def probe(self, client=None, delay_s: float = 0.0) -> None:
        client = client or await connect(self.settings.temporal, keyring=self.settings.keyring())
        t = self.settings.temporal
        result = await client.execute_workflow(
            StackProbeWorkflow.run,
            ProbeInput(task_queues={p.value: t.task_queue(p) for p in Pool}, delay_s=delay_s),
            id=f"stack-probe-{uuid.uuid4().hex[:12]}",
            task_queue=t.task_queue(Pool.WORKFLOW),
            execution_timeout=timedelta(seconds=PROBE_TIMEOUT_S + delay_s),
        )
        log.info("all pools answered", pools=[p.pool for p in result.pongs])

    async def supervise(self) -> None:
        """Restart children that die until asked to stop; give up on one that keeps dying.

        Each restart runs on its own: a service that takes long to come back (an engine loading a large
        checkpoint may take minutes) never holds up the restart of another one that died meanwhile.
        """
        restarting: dict[str, asyncio.Task] = {}
        reconciling: asyncio.Task | None = None
        next_reconcile = time.monotonic() + RECONCILE_S
        try:
            while not self._stopping.is_set():
                if time.monotonic() >= next_reconcile and (reconciling is None or reconciling.done()):
                    running = [p for p in self.tier1 if p.spec.name not in restarting and p.running()]
                    reconciling = asyncio.ensure_future(self._reconcile_engines(running))
                    next_reconcile = time.monotonic() + RECONCILE_S
                for name in [n for n, task in restarting.items() if task.done()]:
                    task = restarting.pop(name)
                    if not task.cancelled() and task.exception() is not None:
                        log.error("restart failed", service=name, error=repr(task.exception()))
                for p in self.tier1 + self.tier2:
                    if self._stopping.is_set() or p.spec.name in restarting or p.running():
                        continue
                    now = time.monotonic()
                    p.restarts = [t for t in p.restarts if now - t < RESTART_WINDOW_S]
                    if len(p.restarts) >= MAX_RESTARTS:
                        self.failure = (
                            f"{p.spec.name} died {MAX_RESTARTS} times within {RESTART_WINDOW_S:.0f}s; stopping the "
                            f"stack. Last lines of {p.log_path}:\n{p.tail()}"
                        )
                        self._stopping.set()
                        break
                    code = p.proc.returncode if p.proc else None
                    delay = min(2 ** len(p.restarts), 30)
                    log.error("service exited; restarting", service=p.spec.name, code=code, restart_in_s=delay)
                    p.restarts.append(now)
                    restarting[p.spec.name] = asyncio.ensure_future(self._restart(p, delay))
                try:
                    await asyncio.wait_for(self._stopping.wait(), timeout=0.5)
                except asyncio.TimeoutError:
                    pass
        finally:
            tasks = list(restarting.values()) + ([reconciling] if reconciling is not None else [])
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _reconcile_engines(self, running: list[ManagedProcess]) -> None:
        """Bring a running engine that missed a publication to the published version.

        The one way to miss it: an engine that restarts while a version is published may read the previous one
        from Redis after its old incarnation had already loaded the new one (so the publication succeeded). Never a
        step back (`catch_up`), so a publication under way is left alone.
        """
        key = self.settings.engine.api_key.get_secret_value()
        for p in running:
            url = self._engine_urls.get(p.spec.name)
            if url is None:
                continue
            try:
                await catch_up(self.settings, url, key)
            except (httpx.HTTPError, StoreError, RuntimeError, ValueError) as exc:
                log.warning("could not check the engine's policy version", engine=url, error=str(exc))

    async def _restart(self, p: ManagedProcess, delay: float) -> None:
        await self._withdraw(p)
        await asyncio.sleep(delay)
        if self._stopping.is_set():
            return
        p.start()
        try:
            await p.wait_ready()
            log.info("service back", service=p.spec.name)
        except ServiceFailed as exc:
            log.error("restart failed", service=p.spec.name, error=str(exc).splitlines()[0])
        self._write_state("up")

    async def _withdraw(self, p: ManagedProcess) -> None:
        """A dead engine leaves the router at once: back, it must not take traffic before it has caught up (the
        router's own health checks would let it in as soon as it answers). Its readiness check admits it again."""
        url = self._engine_urls.get(p.spec.name)
        if self.router is None or url is None:
            return
        try:
            await self.router.withdraw(url)
        except (httpx.HTTPError, RouterCallError) as exc:
            # The router may be down too; restarted, it admits only engines that are up and caught up.
            log.warning("could not withdraw the engine from the router", engine=url, error=str(exc))

    def request_stop(self) -> None:
        self._stopping.set()

    async def stop(self) -> None:
        self._stopping.set()
        if not (self.tier1 or self.tier2):
            return  # preflight failed: nothing was started, nothing to record
        self._write_state("stopping")
        await asyncio.gather(*(p.stop() for p in self.tier2))
        # Tier 1 in reverse dependency order: engine, then stores last.
        for p in reversed(self.tier1):
            await p.stop()
        self._write_state("stopped")

    # ---- reporting -------------------------------------------------------
    def urls(self) -> dict[str, str]:
        """Where each service answers, as printed and written to stack.json: credentials in them masked."""
        s = self.settings
        urls = {
            "api": f"http://{s.api.host}:{s.api.port}",
            "temporal": mask_url(s.temporal.target()),
            "redis": mask_url(s.redis.target()),
            "policy": ",".join(mask_url(u) for u in s.traffic_urls()),
        }
        if s.traffic_urls() != s.policy_urls():
            urls["policy_servers"] = ",".join(mask_url(u) for u in s.policy_urls())
        if s.temporal.embedded and not s.temporal.headless:
            urls["temporal_ui"] = f"http://{LOOPBACK}:{s.temporal.ui_port}"
        return urls

    def state(self, status: str) -> dict:
        """What stack.json holds for scripts and tests. A file outlives the process and is copied about: no secret
        goes in it (urls() masks credentials)."""
        return {
            "status": status,
            "launcher_pid": os.getpid(),
            "updated_at": time.time(),
            "urls": self.urls(),
            "services": {
                p.spec.name: {"pid": p.pid, "running": p.running(), "restarts": len(p.restarts), "log": str(p.log_path)}
                for p in self.tier1 + self.tier2
            },
        }

    def _write_state(self, status: str) -> None:
        tmp = self.state_path.with_suffix(".tmp")
        try:
            tmp.write_text(json.dumps(self.state(status), indent=2))
            os.replace(tmp, self.state_path)
        except OSError as exc:  # the state file is a convenience; never fail the stack over it
            log.warning("cannot write stack state", path=str(self.state_path), error=str(exc))

    def _announce(self) -> None:
        print(self.banner(), flush=True)

    def banner(self) -> str:
        """What `up` prints once the stack is up: where everything is, and what is unsafe about the set-up."""
        lines = ["openclaw-rl is up:"] + [f"  {k:<12} {v}" for k, v in self.urls().items()]
        lines.append(f"  {'logs':<12} {self.settings.logs_dir}")
        lines.append(f"  {'learning':<12} {self.settings.learning.method}, judge: {_judge_line(self.settings)}")
        sandbox = self.settings.envs.sandbox
        lines.append(
            f"  {'envs':<12} terminal, toolcall; sandbox: bubblewrap, workspaces in {sandbox.root}"
            if sandbox.mode == "bwrap"
            else f"  {'envs':<12} WARNING: agent commands run UNSANDBOXED (envs.sandbox.mode=unsandboxed), as this user"
        )
        tr = self.settings.training
        lines.append(
            f"  {'training':<12} "
            + (
                f"training/{self.settings.api.model_name}, {tr.backend} backend, a step per {tr.batch_size} samples"
                if tr.auto_start
                else "not started (training.auto_start = false)"
            )
        )
        if not self.settings.api_key_pepper.get_secret_value():
            # Not fatal: a local trial needs no pepper. Said now because keys made before one is set stop working then.
            lines.append(
                f"  {'api keys':<12} WARNING: api_key_pepper is empty: API-key hashes are stored without a server "
                "secret. Set OPENCLAW_RL_API_KEY_PEPPER to a long random string before creating keys for real users; "
                "changing it later invalidates every key"
            )
        keyring = self.settings.keyring()
        if keyring is None:
            lines.append(
                f"  {'encryption':<12} OFF: conversations are stored in the clear in Temporal's histories and the "
                "store. Set OPENCLAW_RL_ENCRYPTION_KEYS (openclaw-rl encryption new-key) to encrypt them at rest"
            )
        else:
            lines.append(
                f"  {'encryption':<12} AES-256-GCM at rest, key {keyring.current!r} ({len(keyring.key_ids)} in the "
                "keyring); the Web UI shows payloads through the API's codec server (/codec: this machine, its token, "
                "local host names and the UI's origin only; openclaw-rl encryption codec-token)"
            )
        lines += [f"  {'storage':<12} WARNING: {w}" for w in self.warnings]
        lines.append("Press Ctrl-C to stop.")
        return "\n".join(lines)


def sandbox_refusal(settings: Settings) -> str | None:
    """Why the env pool cannot start safely; None when it can (or the user opted out of the sandbox)."""
    if settings.envs.sandbox.mode != "bwrap":
        log.warning("agent commands will run UNSANDBOXED: envs.sandbox.mode=unsandboxed")
        return None
    from envs.sandbox import sandbox_problem, workspace_problem

    why = "the env pool must run as root to give each sandbox a uid of its own" if os.geteuid() != 0 else None
    why = why or sandbox_problem()
    if why is None:
        # The env worker would refuse to start the same way; said here, before anything starts.
        return workspace_problem(settings.envs.sandbox.root)
    return (
        f"the env pool needs a sandbox for agent commands: {why}. Install bubblewrap (`make install` does, as root), "
        "or set OPENCLAW_RL_ENVS__SANDBOX__MODE=unsandboxed to run them without isolation."
    )


def _judge_line(settings: Settings) -> str:
    judge = settings.judge()
    if judge.type == "heuristic":
        why = (
            "configured"
            if settings.learning.judge is not None
            else "the policy is the built-in tiny model; an LLM judge over its noise yields no signal"
        )
        return f"heuristic ({why})"
    where = judge.url or "the policy servers"
    return f"llm at {where}"


async def run_stack(settings: Settings) -> int:
    stack = Stack(settings)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stack.request_stop)
    try:
        start = asyncio.ensure_future(stack.start())
        stop_wait = asyncio.ensure_future(stack._stopping.wait())
        done, _ = await asyncio.wait({start, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
        if start in done:
            stop_wait.cancel()
            start.result()  # raises start-up failures
            await stack.supervise()
        else:
            start.cancel()
            try:
                await start
            except (asyncio.CancelledError, Exception):
                pass
    except (StackError, ServiceFailed) as exc:
        stack.failure = str(exc)
    finally:
        await stack.stop()
    if stack.failure:
        print(f"openclaw-rl: {stack.failure}", file=sys.stderr, flush=True)
        return 1
    print("openclaw-rl stopped cleanly.", flush=True)
    return 0
