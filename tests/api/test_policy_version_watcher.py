"""The API's policy version follows what the servers serve, including a rollback to an older checkpoint."""

from __future__ import annotations

import asyncio
import time

import redis.asyncio as aioredis

from api.policy_version import PolicyVersionWatcher
from store import keys
from tests.helpers import store_at
from tests.training.test_train_step_activity import valkey  # noqa: F401 (fixture)


async def _shows(watcher: PolicyVersionWatcher, version: int) -> None:
    deadline = time.monotonic() + 10
    while watcher.latest is None or watcher.latest.version != version:
        assert time.monotonic() < deadline, f"the watcher shows {watcher.latest}, not v{version}"
        await asyncio.sleep(0.02)


async def test_the_watcher_follows_updates_repeats_and_a_rollback(valkey):  # noqa: F811
    r = aioredis.Redis(port=valkey)
    store = store_at(valkey)
    watcher = PolicyVersionWatcher(store.policy)
    watcher.start()
    try:
        for version, checkpoint in [(1, "/c/policy-1"), (2, "/c/policy-2"), (2, "/c/policy-2")]:
            await r.xadd(keys.POLICY_UPDATES, {"version": version, "checkpoint": checkpoint, "at": time.time()})
        await _shows(watcher, 2)
        await r.xadd(keys.POLICY_UPDATES, {"version": 1, "checkpoint": "/c/policy-1", "at": time.time()})
        await _shows(watcher, 1)  # before: stuck at v2 while the servers served v1
    finally:
        await watcher.stop()
        await r.aclose()
        await store.aclose()
