"""The embedded valkey as `up` starts it, on a data disk that fills: it refuses writes with the reason and keeps
running (reads go on), writes again by itself once there is room, and loses nothing it acknowledged before."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
import redis

from activities.store_errors import store_failure
from api.session_gateway import turn_error
from contracts.chat import StoredChatRequest
from contracts.errors import ErrorType
from openclaw_rl.settings import Settings
from stack.preflight import persistence_problem
from stack.services import valkey_service
from store.errors import StoreFull, as_store_error
from tests.helpers import free_port, store_at
from tests.stack.tmpfs import fill, small_tmpfs

pytestmark = pytest.mark.timeout(120)

VALUE = b"x" * 50_000


@pytest.fixture
def small_disk(tmp_path: Path):
    with small_tmpfs(tmp_path / "small-disk", "8m") as disk:
        yield disk


def _start(settings: Settings) -> subprocess.Popen:
    spec = valkey_service(settings)
    log = open(settings.data_dir / "valkey.log", "ab")
    proc = subprocess.Popen(spec.argv, stdout=log, stderr=subprocess.STDOUT)
    client = redis.Redis.from_url(settings.redis.target())
    deadline = time.monotonic() + 20
    while True:
        try:
            client.ping()
            return proc
        except redis.ConnectionError:
            assert proc.poll() is None and time.monotonic() < deadline, "valkey did not start"
            time.sleep(0.05)


def _write_until_refused(r: redis.Redis) -> tuple[list[str], redis.RedisError | None]:
    acked: list[str] = []
    for i in range(400):
        try:
            r.set(f"k{i}", VALUE)
        except redis.RedisError as exc:
            return acked, exc
        acked.append(f"k{i}")
    return acked, None


async def test_a_full_disk_makes_valkey_refuse_writes_and_it_writes_again_once_there_is_room(small_disk):
    settings = Settings(data_dir=small_disk / "data", redis={"port": free_port()})
    assert settings.redis.appendfsync == "everysec"  # the default `up` starts valkey with
    proc = _start(settings)
    try:
        r = redis.Redis.from_url(settings.redis.target())
        ballast = fill(small_disk, leave=1_000_000)
        acked, refused = _write_until_refused(r)
        assert isinstance(refused, redis.ResponseError) and str(refused).startswith("MISCONF"), refused
        time.sleep(1.5)  # valkey retries its file every second: still refusing, still there
        assert proc.poll() is None, "valkey exited on a full disk"

        # What each side makes of it: the store floor raises StoreFull(disk), an activity STORAGE_FULL, the API a 503.
        store = store_at(settings.redis.port)
        with pytest.raises(StoreFull) as full:
            await store.requests.save("turn-1", StoredChatRequest(messages=[{"role": "user", "content": "hi"}]))
        assert full.value.disk and "No space left on device" in str(full.value)
        assert isinstance(as_store_error(refused), StoreFull)
        failure = store_failure(full.value)
        assert failure.type == ErrorType.STORAGE_FULL and not failure.non_retryable
        answer = turn_error(failure.type, failure.message)
        assert (answer.status, answer.code) == (503, "storage_full") and "No space left" in answer.message

        assert all(r.get(k) == VALUE for k in acked)  # reads go on
        ballast.unlink()
        deadline = time.monotonic() + 10
        while True:  # no restart: the next successful write of its file ends the refusal
            try:
                r.set("after", "1")
                break
            except redis.ResponseError:
                assert time.monotonic() < deadline, "valkey still refuses writes with room on its disk"
                time.sleep(0.1)
        await store.requests.save("turn-1", StoredChatRequest(messages=[{"role": "user", "content": "hi"}]))
        await store.aclose()
        assert proc.poll() is None

        proc.kill()  # a crash of the process: everything acknowledged since room came back is on disk
        proc.wait()
        proc = _start(settings)
        r = redis.Redis.from_url(settings.redis.target())
        assert r.get("after") == b"1" and all(r.get(k) == VALUE for k in acked)
    finally:
        proc.kill()
        proc.wait()


def test_under_appendfsync_always_a_full_disk_ends_valkey_and_up_warns_of_it(small_disk):
    """Why `always` is no longer the default: valkey cannot refuse a write it already answered, so it exits."""
    settings = Settings(data_dir=small_disk / "data", redis={"port": free_port(), "appendfsync": "always"})
    proc = _start(settings)
    try:
        fill(small_disk, leave=1_000_000)
        _, refused = _write_until_refused(redis.Redis.from_url(settings.redis.target()))
        assert isinstance(refused, redis.ConnectionError), refused
        assert proc.wait(timeout=10) == 1
        assert "Can't recover from AOF write error" in (settings.data_dir / "valkey.log").read_text()
    finally:
        proc.kill()
        proc.wait()
    assert "full data disk ends the store" in persistence_problem(True, "always")
    assert persistence_problem(True, "everysec") is None and persistence_problem(False, "always") is None


def test_a_full_disk_reported_inside_a_pipeline_is_storage_full():
    """The turn's token data goes in a pipeline, where redis-py wraps the MISCONF reply: still StoreFull (a plain
    StoreError made the API answer a 500). Without a tmpfs, so it runs where one cannot be mounted too."""
    wrapped = redis.ResponseError(
        "Command # 1 (HSET oc:turn:t x) of pipeline caused error: "
        "('MISCONF Errors writing to the AOF file: No space left on device',)"
    )
    assert isinstance(as_store_error(wrapped), StoreFull)


@pytest.mark.parametrize("stream", [True, False])
async def test_the_generate_activity_fails_typed_on_a_full_disk_and_gives_up_after_a_few_attempts(
    small_disk, engine_url, tiny_model, stream
):
    """The real activity, the real engine, the real store on a full disk: STORAGE_FULL (the API's 503 storage_full),
    retried on the first attempts (room may come back within seconds), given up on at STORAGE_FULL_ATTEMPTS.
    Before: the store floor's StoreFull escaped untyped; the gateway answered a 500 `turn_failed` after 20 attempts."""
    import dataclasses

    from temporalio.exceptions import ApplicationError
    from temporalio.testing import ActivityEnvironment

    from activities.generate import STORAGE_FULL_ATTEMPTS, GenerateActivities
    from contracts.chat import ChatSampling, GenerateInput

    settings = Settings(
        data_dir=small_disk / "data",
        redis={"port": free_port()},
        engine={"model_path": str(tiny_model)},
        policy={"server_urls": [engine_url]},
    )
    proc = _start(settings)
    acts = GenerateActivities(settings)
    try:
        inp = GenerateInput(turn_id="turn-1", sampling=ChatSampling(max_tokens=8), stream=stream)
        await acts.store.requests.save(inp.turn_id, StoredChatRequest(messages=[{"role": "user", "content": "hi"}]))
        assert (await ActivityEnvironment().run(acts.generate, inp)).completion_tokens > 0  # room: it works
        ballast = fill(small_disk, leave=0)
        _, refused = _write_until_refused(redis.Redis.from_url(settings.redis.target()))  # valkey notices the disk
        assert str(refused).startswith("MISCONF"), refused
        for attempt, gives_up in ((1, False), (STORAGE_FULL_ATTEMPTS, True)):
            env = ActivityEnvironment()
            env.info = dataclasses.replace(env.info, attempt=attempt)
            with pytest.raises(ApplicationError) as err:
                await env.run(acts.generate, inp)
            assert err.value.type == ErrorType.STORAGE_FULL and err.value.non_retryable is gives_up, err.value
            assert "No space left on device" in err.value.message
        assert proc.poll() is None
        ballast.unlink()
        deadline = time.monotonic() + 10
        while True:  # the next attempt once there is room again (valkey retries its file every second)
            try:
                assert (await ActivityEnvironment().run(acts.generate, inp)).completion_tokens > 0
                break
            except ApplicationError as exc:
                assert exc.type == ErrorType.STORAGE_FULL and time.monotonic() < deadline, exc
                time.sleep(0.2)
    finally:
        await acts.aclose()
        proc.kill()
        proc.wait()
