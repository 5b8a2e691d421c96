"""The services of the local stack and how to tell each is ready."""

from __future__ import annotations

import sys

import httpx
import redis.asyncio as aioredis

from openclaw_rl.masking import mask_url  # noqa: F401  (re-exported: the launcher and tests use it from here)
from openclaw_rl.settings import LOOPBACK, Pool, Settings
from stack.preflight import find_temporal_binary, find_valkey_binary, private_dir
from stack.process import ServiceSpec
from stack.router import ROUTER_API_KEY_ENV, RouterFront, admit_caught_up, catch_up, router_argv

PYTHON_CLI = [sys.executable, "-m", "cli"]


def http_ok(url: str):
    """A readiness check: `url` answers 200."""

    async def check() -> bool:
        async with httpx.AsyncClient(timeout=2.0) as http:
            return (await http.get(url)).status_code == 200

    return check


DEV_SERVER_DYNAMIC_CONFIG = {
    # The history service reads new transfer tasks at most 20 times a second by
    # default, so an activity on another task queue than its workflow's waits
    # ~65 ms before it is dispatched. Measured on this machine's dev server, an
    # Update whose handler runs an activity on another queue: p50 100 ms at the
    # default, 33 ms with this (same-queue eager dispatch: 30-34 ms either way).
    "history.transferProcessorMaxPollRPS": 1000,
    # One partition per task queue: a local server gains nothing from more, and a poll on another partition
    # than the task's waits for forwarding (measured with the rollout benchmark: dispatch 6.4 -> 2.8 ms).
    "matching.numTaskqueueReadPartitions": 1,
    "matching.numTaskqueueWritePartitions": 1,
    "matching.enableFairness": "true",  # per-key fair shares within a rank (contracts.priorities); JSON true
    # A closed workflow's deletion (a user's forget, control.user_forget) waits until the history service has saved
    # that the workflow's close task is done, which it does every 30 s by default: a forget took ~35-60 s. Measured
    # on this machine's dev server, a completed workflow's delete until describe answers NOT_FOUND: 35.5 s at the
    # default, 4.1 s with this (the rest is the delete task's retry backoff).
    "history.transferProcessorUpdateAckInterval": '"1s"',
}


def temporal_service(settings: Settings) -> ServiceSpec:
    t = settings.temporal
    private_dir(settings.temporal_db.parent)  # workflow histories: conversations and their judgements
    argv = [
        str(find_temporal_binary()),
        "server",
        "start-dev",
        "--db-filename",
        str(settings.temporal_db),
        "--ip",
        t.bind_host,
        "--port",
        str(t.port),
        "--namespace",
        t.namespace,
        "--log-level",
        "warn",
    ]
    # Write-ahead log, still fsynced at every commit (synchronous=full: durable as before): one sync per history
    # write instead of the rollback journal's several. A workflow task took 18 ms -> 11 ms (rollout benchmark).
    argv += ["--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=full"]
    # Deleted rows overwritten with zeros, not left in free pages: a forgotten user's histories (control.user_data)
    # are gone from the file, not just unlinked.
    argv += ["--sqlite-pragma", "secure_delete=on"]
    for key, value in DEV_SERVER_DYNAMIC_CONFIG.items():
        argv += ["--dynamic-config-value", f"{key}={value}"]
    argv += ["--headless"] if t.headless else ["--ui-port", str(t.ui_port), "--ui-disable-news-fetch"]
    secrets: tuple[str, ...] = ()
    if not t.headless and settings.keyring() is not None:  # the UI shows encrypted payloads through the API's codec
        # The UI sends no header of its own (it passes an access token only from its own OIDC login), so the codec
        # token travels in the endpoint's path (api.codec). It is on this process's command line: readable by this
        # machine's users, as Temporal's own histories are (the dev server has no auth); its log masks it.
        token = settings.codec_token() or ""
        secrets = (token,)
        argv += ["--ui-codec-endpoint", f"http://{LOOPBACK}:{settings.api.port}/codec/{token}"]

    async def ready() -> bool:
        from temporalio.client import Client

        client = await Client.connect(t.target(), namespace=t.namespace)
        return bool(await client.service_client.check_health())

    return ServiceSpec("temporal", argv, ready, ready_timeout_s=90, secrets=secrets)


def valkey_service(settings: Settings) -> ServiceSpec:
    r = settings.redis
    private_dir(settings.redis_dir)  # the append-only file: samples, turns and API-key hashes
    argv = [
        str(find_valkey_binary()),
        "--bind",
        r.bind_host,
        "--port",
        str(r.port),
        "--dir",
        str(settings.redis_dir),
        "--appendonly",
        "yes",
        "--appendfsync",
        # `everysec` by default: a failed write (a full disk) makes valkey refuse writes until one succeeds again;
        # under `always` it exits instead. The trade-off is in RedisSettings.appendfsync.
        r.appendfsync,
        "--save",
        "",  # the append-only file is the persistence; no RDB snapshots
        "--protected-mode",
        "yes",
        "--maxmemory",
        f"{r.maxmemory_mb}mb",
        "--maxmemory-policy",
        r.maxmemory_policy,
    ]
    secret = r.password.get_secret_value()
    if secret:
        # In a private file, not on the command line, where every local user could read it with `ps`.
        conf = settings.redis_dir / "auth.conf"
        conf.touch(mode=0o600)
        conf.chmod(0o600)
        conf.write_text(f'requirepass "{_conf_quote(secret)}"\n')
        argv.insert(1, str(conf))  # the config file is valkey's first argument; the flags after it still apply

    async def ready() -> bool:
        client = aioredis.from_url(r.target())
        try:
            return bool(await client.ping())
        finally:
            await client.aclose()

    return ServiceSpec("valkey", argv, ready, ready_timeout_s=30)


def _conf_quote(value: str) -> str:
    """A value inside a double-quoted valkey.conf string."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


ENGINE_READY_TIMEOUT_S = 900
"""First run builds the tiny model (~15 s); a real checkpoint may take minutes to load."""


def engine_services(settings: Settings, router: RouterFront | None) -> list[ServiceSpec]:
    """The embedded engines: one named `engine`, or `engine-<i>` per replica behind the router.

    An engine is ready once it answers and serves the published policy version (`catch_up`), and, behind the router,
    once the router routes to it: a (re)started engine takes no traffic before it has the current weights.
    """
    names, ports, urls = engine_names(settings), settings.engine_ports(), settings.engine_urls()
    if router is None:
        return [
            ServiceSpec(
                names[0], PYTHON_CLI + ["engine"], _engine_ready(settings, urls[0], None), ENGINE_READY_TIMEOUT_S
            )
        ]
    # The router does not forward the per-request stream-mode header: the engines stream incrementally themselves.
    env = {"OPENCLAW_RL_ENGINE__INCREMENTAL_STREAMING_OUTPUT": "true"}
    return [
        ServiceSpec(
            name,
            PYTHON_CLI + ["engine", "--port", str(port)],
            _engine_ready(settings, url, router),
            ENGINE_READY_TIMEOUT_S,
            env=env,
        )
        for name, port, url in zip(names, ports, urls)
    ]


def engine_names(settings: Settings) -> list[str]:
    """The supervised names of the embedded engines (in stack.json and the log files): `engine`, or `engine-<i>`."""
    if settings.engine.replicas == 1:
        return ["engine"]
    return [f"engine-{i}" for i in range(settings.engine.replicas)]


def _engine_ready(settings: Settings, url: str, router: RouterFront | None):
    health = http_ok(f"{url}/health")

    async def ready() -> bool:
        if not await health():
            return False
        key = settings.engine.api_key.get_secret_value()
        if router is None:
            await catch_up(settings, url, key)
            return True
        return await admit_caught_up(settings, url, router, key)

    return ready


def router_service(settings: Settings, router: RouterFront) -> ServiceSpec:
    """The sglang-router in front of the engines. Once it answers, it is given every engine that is up and caught up
    (after a restart it knows none); an engine still starting is admitted by its own readiness check."""
    engines = settings.engine_urls()

    async def ready() -> bool:
        if not await router.live():
            return False
        for url in engines:
            try:
                up = await http_ok(f"{url}/health")()
            except httpx.HTTPError:
                continue  # down or starting: it joins when its own restart is ready
            if up:
                await admit_caught_up(settings, url, router, router.key)
        return True

    key = settings.engine.api_key.get_secret_value()
    return ServiceSpec(
        "router",
        router_argv(settings),
        ready,
        ready_timeout_s=settings.router.ready_timeout_s,
        env={ROUTER_API_KEY_ENV: key} if key else {},
    )


def worker_service(pool: Pool) -> ServiceSpec:
    async def ready() -> bool:
        return True  # proven by the probe workflow once all pools run

    return ServiceSpec(f"worker-{pool.value}", PYTHON_CLI + ["worker", "--pool", pool.value], ready, ready_timeout_s=5)


def api_service(settings: Settings) -> ServiceSpec:
    host = LOOPBACK if settings.api.host in ("0.0.0.0", "::", "") else settings.api.host
    return ServiceSpec(
        "api", PYTHON_CLI + ["api"], http_ok(f"http://{host}:{settings.api.port}/healthz"), ready_timeout_s=60
    )
