"""Several embedded engines behind the real sglang-router, as `openclaw-rl up` runs them (engine.replicas = 2).

Traffic goes through the router and reaches both engines; weight updates go to each engine; an engine killed with
SIGKILL is withdrawn from the router while the other keeps serving, and comes back at the published version (not
the newest checkpoint on disk) before the router sends it anything.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest
import redis

from openclaw_rl.checkpoints import version_dir, write_version_info
from openclaw_rl.settings import Settings
from policy_client import PolicyClient, SamplingParams
from stack.follow import follow_once
from stack.router import RouterFront, catch_up, router_argv
from store import keys as store_keys
from tests.api.conftest import chat_stack_env, create_key
from tests.conftest import start_engine
from tests.helpers import RunningStack, free_port

pytest.importorskip("sglang_router", reason="the router extra (sglang-router) is not installed")

GREEDY = SamplingParams(max_new_tokens=4, temperature=0.0)


def _two_free_ports() -> int:
    """A port p with p + 1 free too (the engines take consecutive ports)."""
    for _ in range(50):
        port = free_port()
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise RuntimeError("no two consecutive free ports")


@pytest.fixture(scope="module")
def routed_stack(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory):
    env = chat_stack_env(
        tmp_path_factory.mktemp("routed") / "data",
        tiny_model,
        OPENCLAW_RL_ENGINE__REPLICAS="2",
        OPENCLAW_RL_ENGINE__PORT=str(_two_free_ports()),
        OPENCLAW_RL_ROUTER__PORT=str(free_port()),
        OPENCLAW_RL_ROUTER__METRICS_PORT=str(free_port()),
        OPENCLAW_RL_ROUTER__POLICY="round_robin",
        OPENCLAW_RL_LEARNING__ENABLED="false",
    )
    stack = RunningStack(env).start(timeout=300)
    yield stack
    stack.stop()


def _settings(stack: RunningStack) -> Settings:
    """The stack's settings as its processes read them (the same environment)."""
    keys = [k for k in stack.env if k.startswith("OPENCLAW_RL_")]
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update({k: stack.env[k] for k in keys})
    try:
        return Settings()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _served(url: str) -> tuple[int, str]:
    info = httpx.get(f"{url}/get_server_info", timeout=10).json()
    return info["requests_done"], info["weight_version"]


def _routed_urls(router: str) -> dict[str, bool]:
    workers = httpx.get(f"{router}/workers", timeout=10).json()["workers"]
    return {w["url"]: w["is_healthy"] for w in workers}


def _generate(settings: Settings, n: int) -> list[str]:
    async def run() -> list[str]:
        async with PolicyClient.from_settings(settings) as client:
            assert client.urls == [settings.embedded_router_url()] and client.control_urls == settings.engine_urls()
            gens = [await client.generate([1, 2, 3, 4], GREEDY, return_logprob=False) for _ in range(n)]
        return [g.text for g in gens]

    return asyncio.run(run())


def test_traffic_through_the_router_reaches_both_engines(routed_stack):
    settings = _settings(routed_stack)
    services = routed_stack.state()["services"]
    assert {"engine-0", "engine-1", "router"} <= set(services)
    engines = settings.engine_urls()
    assert _routed_urls(settings.embedded_router_url()) == {u: True for u in engines}
    before = [_served(u)[0] for u in engines]
    texts = _generate(settings, 6)
    assert len(set(texts)) == 1  # same weights, greedy: the same answer whoever served it
    after = [_served(u)[0] for u in engines]
    assert all(a - b >= 2 for a, b in zip(after, before)), (before, after)  # round robin: both took a share
    key = create_key(routed_stack, "router-user")
    r = httpx.post(
        f"{routed_stack.api}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "hello"}], "max_tokens": 4},
        headers={"Authorization": f"Bearer {key}"},
        timeout=120,
    )
    assert r.status_code == 200, r.text


def test_the_tenant_reaches_the_engines_through_the_router(routed_stack):
    """The router forwards no unknown header; the tenant rides in the request id, so fair sharing still applies."""
    settings = _settings(routed_stack)
    long = SamplingParams(max_new_tokens=1500, temperature=0.0, ignore_eos=True)

    async def tenants_seen() -> set[str | None]:
        seen: set[str | None] = set()
        async with PolicyClient.from_settings(settings) as client, httpx.AsyncClient(timeout=10) as http:
            task = asyncio.create_task(client.generate([1, 2, 3, 4], long, return_logprob=False, tenant="user/42"))
            deadline = time.monotonic() + 60
            while "user/42" not in seen and not task.done() and time.monotonic() < deadline:
                for url in settings.engine_urls():
                    info = (await http.get(f"{url}/get_server_info")).json()
                    seen |= {t["tenant"] for t in info["tenants"]}
                await asyncio.sleep(0.05)
            task.cancel()  # the client goes away: the engine drops the generation
            await asyncio.gather(task, return_exceptions=True)
        return seen

    assert "user/42" in asyncio.run(tenants_seen())


def _checkpoint(settings: Settings, model: Path, version: int) -> Path:
    folder = version_dir(settings.checkpoints_dir, version)
    shutil.copytree(model, folder)
    write_version_info(folder, {"weight_version": str(version)})
    return folder


def test_a_killed_engine_is_bypassed_and_returns_at_the_published_version(routed_stack, tiny_model):
    settings = _settings(routed_stack)
    engines, router = settings.engine_urls(), settings.embedded_router_url()
    # Version 1 published to every server (what the trainer's publish step does), version 2 only written.
    v1 = _checkpoint(settings, tiny_model, 1)

    async def publish() -> list:
        async with PolicyClient.from_settings(settings) as client:
            return await client.update_weights_from_disk(str(v1), weight_version="1")

    results = asyncio.run(publish())
    assert len(results) == 2 and all(r.success for r in results)
    assert [_served(u)[1] for u in engines] == ["1", "1"]
    redis.Redis.from_url(routed_stack.redis).set(store_keys.POLICY_VERSION, "1")
    _checkpoint(settings, tiny_model, 2)

    # Watch the router from the kill on: the engine must never be routed to while it serves another version.
    seen: list[tuple[bool, str | None]] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            try:
                routed = _routed_urls(router).get(engines[1], False)
                version = _served(engines[1])[1] if routed else None
                seen.append((routed, version))
            except httpx.HTTPError:
                pass
            time.sleep(0.1)

    old_pid = routed_stack.service_pid("engine-1")
    os.kill(old_pid, signal.SIGKILL)
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        texts = _generate(settings, 8)  # served while engine-1 is dead or restarting
        assert len(texts) == 8
        deadline = time.monotonic() + 10
        while _routed_urls(router).get(engines[1]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert engines[1] not in _routed_urls(router), "the dead engine was not withdrawn"
        routed_stack.wait_restarted("engine-1", old_pid, timeout=120)
        deadline = time.monotonic() + 120
        while not _routed_urls(router).get(engines[1]) and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        stop.set()
        watcher.join(timeout=10)
    assert _routed_urls(router) == {u: True for u in engines}
    assert _served(engines[1])[1] == "1"  # the published version, not the newest checkpoint (2)
    assert all(version == "1" for routed, version in seen if routed), seen
    before = _served(engines[1])[0]
    _generate(settings, 4)
    assert _served(engines[1])[0] > before  # back in rotation


def test_generations_held_by_an_engine_gone_silent_are_sent_again_once_it_leaves_the_rotation(routed_stack):
    """A stopped engine (as a host whose link is cut) closes no connection: what the router sent it waits. Once the
    router's health checks take it out of rotation, the quiet calls (streamed and not) are sent again and answered
    by the other engine, long before the request timeout (300 s)."""
    settings = _settings(routed_stack)
    engines, router = settings.engine_urls(), settings.embedded_router_url()
    pid = routed_stack.service_pid("engine-1")

    async def run() -> tuple[list[str], float]:
        async with PolicyClient.from_settings(settings) as client:
            await client.generate([1, 2, 3, 4], GREEDY, return_logprob=False)  # the client has seen the rotation
            await asyncio.sleep(1.5)
            os.kill(pid, signal.SIGSTOP)
            t0 = time.monotonic()

            async def streamed() -> str:
                last = None
                async for last in client.generate_stream([1, 2, 3, 4], GREEDY, return_logprob=False):
                    pass
                return last.text

            async def whole() -> str:
                return (await client.generate([1, 2, 3, 4], GREEDY, return_logprob=False)).text

            texts = await asyncio.wait_for(asyncio.gather(*(f() for f in (streamed, whole) * 2)), timeout=90)
            return list(texts), time.monotonic() - t0

    try:
        texts, took = asyncio.run(run())
        assert _routed_urls(router).get(engines[1]) is not True  # it was out of rotation when they were answered
    finally:
        os.kill(pid, signal.SIGCONT)
    assert len(texts) == 4 and len(set(texts)) == 1
    assert took < 60, f"the quiet calls waited {took:.0f} s"
    deadline = time.monotonic() + 60
    while _routed_urls(router) != {u: True for u in engines} and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _routed_urls(router) == {u: True for u in engines}  # back once it answers


def test_a_running_engine_that_missed_a_publication_is_brought_up_to_it(routed_stack):
    """The launcher checks running engines against the published version (stack.launcher.RECONCILE_S)."""
    settings = _settings(routed_stack)
    assert version_dir(settings.checkpoints_dir, 2).is_dir()  # written by the test above, never published
    redis.Redis.from_url(routed_stack.redis).set(store_keys.POLICY_VERSION, "2")  # as if loading it had been missed
    deadline = time.monotonic() + 60
    while [_served(u)[1] for u in settings.engine_urls()] != ["2", "2"]:
        assert time.monotonic() < deadline, [_served(u)[1] for u in settings.engine_urls()]
        time.sleep(0.5)


def test_weights_loaded_by_hand_are_not_replaced_by_the_published_version(routed_stack):
    """An evaluation (the personalization bench) loads a checkpoint under its own label: the launcher's
    reconciliation (`catch_up`) leaves such an engine alone, while a behind policy version is brought up."""
    settings = _settings(routed_stack)
    engine = settings.engine_urls()[0]
    key = settings.engine.api_key.get_secret_value()
    base = str(settings.served_model_path())
    auth = {"Authorization": f"Bearer {key}"} if key else {}
    r = httpx.post(f"{engine}/update_weights_from_disk", json={"model_path": base, "weight_version": "eval-base"},
                   headers=auth, timeout=120)  # fmt: skip
    assert r.json()["success"], r.text
    try:
        assert asyncio.run(catch_up(settings, engine, key)) == "eval-base"
        assert _served(engine)[1] == "eval-base"
    finally:
        r = httpx.post(f"{engine}/update_weights_from_disk", json={"model_path": base, "weight_version": "0"},
                       headers=auth, timeout=120)  # fmt: skip
        assert r.json()["success"], r.text
    assert asyncio.run(catch_up(settings, engine, key)) == "2"  # a policy version behind the published one
    assert _served(engine)[1] == "2"


def test_a_restarted_router_routes_to_every_engine_again(routed_stack):
    settings = _settings(routed_stack)
    old_pid = routed_stack.service_pid("router")
    os.kill(old_pid, signal.SIGKILL)
    routed_stack.wait_restarted("router", old_pid, timeout=60)
    deadline = time.monotonic() + 30
    while _routed_urls(settings.embedded_router_url()) != {u: True for u in settings.engine_urls()}:
        assert time.monotonic() < deadline, _routed_urls(settings.embedded_router_url())
        time.sleep(0.2)
    assert len(_generate(settings, 2)) == 2


async def test_without_a_router_a_dead_server_is_skipped(engine_url):
    dead = f"http://127.0.0.1:{free_port()}"
    async with PolicyClient([dead, engine_url], backoff_s=10.0, server_down_s=60.0) as client:
        started = time.monotonic()
        gens = [await client.generate([1, 2, 3], GREEDY, return_logprob=False) for _ in range(6)]
        elapsed = time.monotonic() - started
        assert client._pick() == engine_url  # still passed over
    assert {g.server for g in gens} == {engine_url}
    # The dead server cost one refused connection, never a retry delay (each would be 10 s or more).
    assert elapsed < 10.0, elapsed


async def test_a_followed_server_joins_at_the_published_version_and_leaves_when_it_dies(
    routed_stack, tiny_model, tmp_path
):
    """`stack.follow`, as compose and Kubernetes run it beside each SGLang server (here a third engine); a server
    behind the published version is not admitted while others can answer (a restarted one served base weights)."""
    settings = _settings(routed_stack)
    router = RouterFront(settings.embedded_router_url())
    # Its own data directory: it starts at the base model, like an SGLang server given the base checkpoint.
    roots = f'["{settings.checkpoints_dir}"]'
    proc, server = start_engine(tiny_model, tmp_path, OPENCLAW_RL_ENGINE__WEIGHT_ROOTS=roots)
    try:
        assert _served(server)[1] == "0"
        # A version only the trainer's memory holds (no folder can bring the server to it): while the two engines in
        # rotation can answer, the server behind it is kept out instead of answering from the base weights.
        store = redis.Redis.from_url(routed_stack.redis)
        published = store.get(store_keys.POLICY_VERSION)
        store.set(store_keys.POLICY_VERSION, "9")
        try:
            assert await follow_once(settings, server, router) is False
            assert await follow_once(settings, server, router) is False
            assert server not in _routed_urls(settings.embedded_router_url())
        finally:
            store.set(store_keys.POLICY_VERSION, published)
        admitted = False
        for _ in range(50):
            if admitted := await follow_once(settings, server, router):
                break
            await asyncio.sleep(0.2)
        assert admitted and _routed_urls(settings.embedded_router_url())[server]
        assert _served(server)[1] == "2"  # caught up (to the version published above) before it was admitted
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert await follow_once(settings, server, router) is False
    assert server not in _routed_urls(settings.embedded_router_url())


def test_the_router_balances_by_load_once_an_engine_leads_by_about_a_batch():
    """A system prompt every session shares matches on every engine: with SGLang's threshold (64) in front of engines
    that batch 16, cache_aware kept all 16 sessions of `bench hosts --scale` on one engine (0.98x for a second one)."""

    def threshold(**settings: object) -> str:
        argv = router_argv(Settings(**settings))
        return argv[argv.index("--balance-abs-threshold") + 1]

    assert threshold(engine={"replicas": 2, "max_batch_size": 16}) == "16"
    assert threshold(policy={"server_urls": ["http://gpu-1:30000"]}) == "64"
    assert threshold(router={"balance_abs_threshold": 3}) == "3"
