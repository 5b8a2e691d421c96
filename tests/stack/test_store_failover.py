"""The store survives losing its host (stack.store_replication: real valkey processes, three sentinels). A `Store`
reached through the Sentinel URL with `min_replicas_acked=1` keeps publishing samples while the master is killed:
the sentinels promote the replica, the same client reaches it, and every sample whose publication returned is there
exactly once. And the retry of a publication that too few replicas acknowledged waits for them again, on any
connection."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path

import pytest

from stack.store_replication import ReplicatedStore
from store import keys
from store.client import Store, StoreAddress
from store.errors import NotReplicated, StoreUnavailable
from store.samples import ReplicaAcks
from tests.samples import personal_sample

pytestmark = pytest.mark.timeout(120)

PASSWORD = "s3cret/with:odd@chars"
ACK_TIMEOUT_MS = 500
FAILOVER_BOUND_S = 15.0


def sample(sample_id: str):
    return personal_sample(sample_id, [1, 2, 3, 4], [5, 6], [-0.5, -0.25], [1.0, 1.0])


async def publish_until_acknowledged(store: Store, sample_id: str, give_up_at: float) -> None:
    """As the publishing activity does: a passing store failure (down, failing over, too few replicas) is retried;
    a repeat after a write that was not acknowledged returns False and counts as published."""
    while True:
        try:
            await store.samples.publish_once(sample_id, "personal", sample(sample_id))
            return
        except StoreUnavailable:
            if time.monotonic() > give_up_at:
                raise
            await asyncio.sleep(0.05)


async def test_acknowledged_samples_survive_the_master_host_dying(tmp_path: Path):
    with ReplicatedStore(tmp_path, password=PASSWORD) as rs:
        old_master, replica = rs.nodes["master"].port, rs.nodes["replica-1"].port
        assert await asyncio.to_thread(rs.master_port) == old_master
        acks = ReplicaAcks(replicas=1, timeout_ms=ACK_TIMEOUT_MS)
        give_up_at = time.monotonic() + 60
        acknowledged: list[str] = []
        after_promotion: list[str] = []
        promoted_at: float | None = None
        reached_new_master_at: float | None = None
        stop = asyncio.Event()

        async with Store.connect(StoreAddress(rs.url, 3600, acks)) as store:
            for i in range(20):
                await publish_until_acknowledged(store, f"before-{i}", give_up_at)
                acknowledged.append(f"before-{i}")
            killed_at: float | None = None

            async def publisher(w: int) -> None:
                nonlocal reached_new_master_at
                n = 0
                while not stop.is_set():
                    sample_id = f"w{w}-{n}"
                    while True:
                        try:
                            await store.samples.publish_once(sample_id, "personal", sample(sample_id))
                            break
                        except NotReplicated:  # the master took it: after the kill, that is the new master
                            if killed_at is not None and reached_new_master_at is None:
                                reached_new_master_at = time.monotonic()
                        except StoreUnavailable:
                            pass
                        assert time.monotonic() < give_up_at, "publishing never recovered"
                        await asyncio.sleep(0.05)
                    acknowledged.append(sample_id)
                    if promoted_at is not None:
                        after_promotion.append(sample_id)
                    n += 1

            tasks = [asyncio.create_task(publisher(w)) for w in range(4)]
            await asyncio.sleep(1.0)
            written_before_kill = len(acknowledged)
            rs.kill("master")  # SIGKILL: the host is gone, nothing flushed or handed over
            killed_at = time.monotonic()
            while await asyncio.to_thread(rs.master_port) != replica:
                assert time.monotonic() - killed_at < FAILOVER_BOUND_S, "the sentinels did not promote the replica"
                await asyncio.sleep(0.1)
            promoted_at = time.monotonic()
            # The lost host comes back: the sentinels make it a replica of the new master, and with a replica to
            # acknowledge them, publications are acknowledged again, through the same client.
            await asyncio.to_thread(rs.restart, "master")
            while len(after_promotion) < 20:
                assert time.monotonic() < give_up_at, "no acknowledged publication after the failover"
                assert not any(t.done() for t in tasks), [t.exception() for t in tasks if t.done()]
                await asyncio.sleep(0.1)
            stop.set()
            await asyncio.gather(*tasks)
            assert await store.server.ping()

        failover_s = promoted_at - killed_at
        assert failover_s < FAILOVER_BOUND_S
        assert reached_new_master_at is None or reached_new_master_at - killed_at < FAILOVER_BOUND_S
        assert written_before_kill > 20, "the publishers wrote nothing before the kill"

        new_master = rs.node_client("replica-1")
        try:
            assert new_master.info("replication")["role"] == "master"
            entries = new_master.xrange(keys.sample_stream("personal"))
            on_new_master = Counter(fields[b"id"].decode() for _, fields in entries)
            missing = [s for s in acknowledged if on_new_master[s] == 0]
            doubled = [s for s, count in on_new_master.items() if count > 1]
            assert not missing, f"{len(missing)} acknowledged samples lost in the failover: {missing[:10]}"
            assert not doubled, f"samples written twice: {doubled[:10]}"
            assert all(new_master.exists(keys.sample_published(s)) for s in acknowledged)
        finally:
            new_master.close()
        # the old master rejoined as a replica of the new one
        old = rs.node_client("master")
        try:
            assert old.info("replication")["role"] == "slave"
        finally:
            old.close()


async def test_a_retried_publication_waits_for_the_replicas_again(tmp_path: Path):
    """The first try's write reached the master but not the stalled replica (NotReplicated). A retry on a fresh
    connection finds the sample published and writes nothing new: its WAIT must still cover the first write, not
    return at once as a WAIT after no write does."""
    with ReplicatedStore(tmp_path, password=PASSWORD, sentinels=1, quorum=1, down_after_ms=30_000) as rs:
        address = StoreAddress(rs.url, 3600, ReplicaAcks(replicas=1, timeout_ms=300))
        async with Store.connect(address) as store:
            assert await store.samples.publish_once("s0", "personal", sample("s0"))
            rs.pause("replica-1")  # stalled: still connected, acknowledging nothing
            try:
                with pytest.raises(NotReplicated) as raised:
                    await store.samples.publish_once("s1", "personal", sample("s1"))
                assert (raised.value.acked, raised.value.wanted) == (0, 1)
                async with Store.connect(address) as fresh:
                    with pytest.raises(NotReplicated):
                        await fresh.samples.publish_once("s1", "personal", sample("s1"))
            finally:
                rs.resume("replica-1")
        async with Store.connect(address) as fresh:
            assert not await fresh.samples.publish_once("s1", "personal", sample("s1"))  # acknowledged, not rewritten
        replica = rs.node_client("replica-1")
        try:
            ids = [fields[b"id"] for _, fields in replica.xrange(keys.sample_stream("personal"))]
            assert ids == [b"s0", b"s1"]
        finally:
            replica.close()
