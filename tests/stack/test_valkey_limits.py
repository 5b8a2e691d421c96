"""The embedded valkey as `up` starts it: a memory limit that never evicts samples, and an optional password."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
import redis

from api.errors import store_failure_code
from openclaw_rl.masking import mask_url
from openclaw_rl.settings import Settings
from stack.services import valkey_service
from store import keys as store_keys
from store.errors import StoreFull, as_store_error, is_passing
from tests.helpers import free_port


def _start(settings: Settings) -> subprocess.Popen:
    spec = valkey_service(settings)
    proc = subprocess.Popen(spec.argv, stdout=subprocess.DEVNULL)
    client = redis.Redis.from_url(settings.redis.target())
    deadline = time.monotonic() + 20
    while True:
        try:
            client.ping()
            return proc
        except redis.ConnectionError:
            assert proc.poll() is None and time.monotonic() < deadline, "valkey did not start"
            time.sleep(0.05)


@pytest.fixture
def start(tmp_path: Path):
    procs: list[subprocess.Popen] = []

    def go(**redis_settings) -> tuple[Settings, redis.Redis]:
        s = Settings(data_dir=tmp_path / "data", redis={"port": free_port(), **redis_settings})
        procs.append(_start(s))
        return s, redis.Redis.from_url(s.redis.target())

    yield go
    for p in procs:
        p.terminate()
        p.wait(timeout=10)


def _fill(r: redis.Redis, stream_entries: int) -> tuple[list[bytes], Exception | None]:
    """Samples (no TTL) and expiring per-turn data until the server refuses; returns the sample ids written."""
    ids: list[bytes] = []
    blob = b"x" * 50_000
    for i in range(1_000):
        try:
            r.set(store_keys.turn_data(f"t{i}"), blob, ex=3600)
            if i < stream_entries:
                ids.append(r.xadd(store_keys.sample_stream("personal"), {"id": f"s#{i}", "prompt_ids": blob}))
        except redis.RedisError as exc:
            return ids, exc
    return ids, None


def test_at_the_limit_writes_are_refused_with_a_reason_and_nothing_is_evicted(start):
    settings, r = start(maxmemory_mb=8)
    assert r.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
    ids, refused = _fill(r, stream_entries=50)
    assert refused is not None
    seen = as_store_error(refused)  # what the store floor raises in its place
    assert isinstance(seen, StoreFull) and not seen.disk and is_passing(seen), refused  # retryable for activities
    assert store_failure_code(seen) == "storage_full"  # and a 503 with that code from the API
    assert [e[0] for e in r.xrange(store_keys.sample_stream("personal"))] == ids  # every sample still there
    # training frees room: acknowledged samples are deleted, after which writes go through again
    r.delete(*[store_keys.turn_data(f"t{i}") for i in range(200)])
    r.set("after", "1")


def test_volatile_policy_evicts_expiring_data_but_never_a_waiting_sample(start):
    settings, r = start(maxmemory_mb=8, maxmemory_policy="volatile-lru")
    ids, refused = _fill(r, stream_entries=100)
    assert refused is None  # old turn data made room
    assert r.dbsize() < 1_000 + 1  # some expiring keys were evicted
    assert [e[0] for e in r.xrange(store_keys.sample_stream("personal"))] == ids  # no sample was


def test_a_password_is_required_and_never_on_the_command_line(start, tmp_path):
    settings, r = start(password="s3cr@t/pw")
    assert r.ping()
    bare = redis.Redis(port=settings.redis.port)
    with pytest.raises(redis.AuthenticationError):
        bare.ping()
    spec = valkey_service(settings)
    assert not any("s3cr@t" in a for a in spec.argv)
    conf = settings.redis_dir / "auth.conf"
    assert conf.stat().st_mode & 0o777 == 0o600
    assert "s3cr@t" not in mask_url(settings.redis.target())
    assert "s3cr@t" not in str(settings.masked())
