"""The store and file pieces of forgetting a user, on a bare valkey: a stream rebuilt without deleted entries keeps
its consumer group's place and pending entries; a sample claimed by the trainer when its user is forgotten is
skipped by the step, not an error; trained.jsonl redacts a forgotten sample's id now and in lines still to come;
a publication racing a forget writes nothing."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
import redis

from contracts.chat import tenant_of
from contracts.learning import JudgeSummary
from openclaw_rl.trained_log import TRAINED_LOG, forget_samples, record_step, records_lock
from store import keys
from store.samples import PersonalTurn, TrainingSample
from tests.helpers import running_valkey, store_at

pytestmark = pytest.mark.timeout(120)


def sample(user: str, turn: int, secret: str) -> TrainingSample:
    return TrainingSample(
        sample_id=f"session/{user}/s@run#{turn}",
        source="personal",
        policy_version="1",
        temperature=1.0,
        reward=1.0,
        loss_mask=1,
        prompt_ids=[1, 2, 3],
        response_ids=[4, 5],
        rollout_logprobs=[-0.1, -0.2],
        advantages=[1.0, 1.0],
        provenance=PersonalTurn(
            method="combined",
            user_id=user,
            session_id="s",
            turn_id=f"t{turn}",
            turn_index=turn,
            use_teacher=False,
            reason=secret,
            judge=JudgeSummary(judge="heuristic", hint=secret),
        ),
    )


@pytest.fixture
def port(tmp_path: Path):
    with running_valkey(tmp_path) as p:
        yield p


def test_a_claimed_sample_of_a_forgotten_user_is_skipped_and_its_bytes_are_gone(port):
    async def main():
        async with store_at(port) as store:
            s = store.samples
            await s.ensure_group(["personal"])
            for i, user in enumerate(["ann", "bob", "ann", "bob", "bob"]):
                assert await s.publish_once(f"id{i}", "personal", sample(user, i, f"secret-{user}-{i}"))
            claimed = await s.read_new("trainer-1", "personal", 3)  # ann#0, bob#1, ann#2 claimed by a step
            entries = {e: smp for e, smp in await s.entries("personal")}
            anns = [e for e, smp in entries.items() if smp.provenance.user_id == "ann"]
            assert await s.forget("personal", anns) == (2, 2)
            await store.users.compact_stream(keys.sample_stream("personal"))
            r = redis.Redis(port=port)
            assert b"secret-ann" not in r.dump(keys.sample_stream("personal"))  # gone from memory, not just marked
            # The step that claimed them: the forgotten ones are skipped, the other is still there and pending.
            assert [await s.load("personal", e) is None for e in claimed] == [True, False, True]
            assert [await s.was_forgotten("personal", e) for e in claimed] == [True, False, True]
            assert await s.read_pending("trainer-1", "personal", 10) == [claimed[1]]
            # The group's place is kept: the two never delivered come next, nothing twice.
            rest = await s.read_new("trainer-2", "personal", 10)
            assert len(rest) == 2 and rest[0] > claimed[-1]
            assert await s.acknowledge("personal", claimed) == 1
            assert not r.exists(keys.forgotten_entries("personal"))
            # A publication racing the forget (the user's tombstone is there) writes nothing.
            await store.users.tombstone("ann")
            guard = keys.forgotten(tenant_of("ann"))
            assert not await s.publish_once("id9", "personal", sample("ann", 9, "late"), guard=guard)
            assert not r.exists(keys.sample_published("id9"))
            assert await s.publish_once("id10", "personal", sample("bob", 10, "fine"), guard=keys.forgotten("x"))

    asyncio.run(main())


def test_trained_log_redacts_a_forgotten_sample_now_and_later(tmp_path: Path):
    mine, other = "session/ann/s@run#0", "session/bob/s@run#1"
    record_step(tmp_path, 1, 0, "b1", [mine, other], [])
    with records_lock(tmp_path, exclusive=True):
        assert forget_samples(tmp_path, [mine]) == 1
    record_step(tmp_path, 2, 1, "b2", [mine, other], [mine])  # a step that had claimed it before the forget
    text = (tmp_path / TRAINED_LOG).read_text()
    assert "ann" not in text and text.count(other) == 2
    lines = [json.loads(x) for x in text.splitlines()]
    assert lines[0]["sample_ids"][0].startswith("forgotten:") and lines[1]["stale_ids"][0].startswith("forgotten:")
    with records_lock(tmp_path, exclusive=True):
        assert forget_samples(tmp_path, [mine]) == 0  # twice: nothing more to do


def test_both_forms_of_a_users_session_ids_are_found_and_the_name_record_goes_with_them(port, tmp_path: Path):
    """Workflow ids name the user by pseudonym, or by id for sessions started before (control.sessions): the forget
    finds the keys, samples and trained.jsonl ids of both, and takes the pseudonym's name record; another user's
    stay."""
    from activities.user_files import forget_trained
    from control.user_files import UserFiles
    from control.user_lookup import is_users_sample
    from openclaw_rl.settings import Settings
    from store.api_keys import KeyRecord

    new, old, other = f"session/{tenant_of('ann')}/s", "session/ann/s", f"session/{tenant_of('bob')}/s"
    assert is_users_sample(f"{new}@r#0", "ann") and is_users_sample(f"{old}@r#0", "ann")
    assert not is_users_sample(f"{other}@r#0", "ann") and not is_users_sample("episode/client-1/0#0", "ann")

    async def go() -> None:
        async with store_at(port) as store:
            await store.api_keys.add("d1", KeyRecord(key_id="k1", user_id="ann", created_at=datetime.now(timezone.utc)))
            await store.users.note_turn("bob", "t-bob")
            assert await store.users.names_of([tenant_of("ann"), tenant_of("bob"), "u-none"]) == {
                tenant_of("ann"): "ann",
                tenant_of("bob"): "bob",
            }
            r = redis.Redis(port=port)
            for session in (new, old, other):
                r.set(keys.session_effective(session), "1")
                r.set(keys.sample_published(f"{session}@r#0"), "1")
                r.set(keys.turn_log_segment(f"{session}@r", 0), "x")
                r.set(keys.sample_mismatch(f"{session}@r#0"), "{}")
            assert await store.users.forget_named("ann") == 9
            assert await store.users.names_of([tenant_of("ann"), tenant_of("bob")]) == {tenant_of("bob"): "bob"}
            left = sorted(k.decode() for k in r.scan_iter("oc:*"))
            assert [k for k in left if "session/" in k] == sorted(
                [
                    keys.session_effective(other),
                    keys.sample_published(f"{other}@r#0"),
                    keys.turn_log_segment(f"{other}@r", 0),
                    keys.sample_mismatch(f"{other}@r#0"),
                ]
            )

    asyncio.run(go())
    settings = Settings(data_dir=tmp_path / "data")
    record_step(settings.records_dir, 1, 0, "b1", [f"{new}@r#0", f"{old}@r#1", f"{other}@r#2"], [])
    # The files only, where they live (the trainer pool's activity; no Temporal, no store).
    assert forget_trained(settings.records_dir, UserFiles.request("ann")) == 1
    text = (settings.records_dir / TRAINED_LOG).read_text()
    assert "session/ann/" not in text and tenant_of("ann") not in text and f"{other}@r#2" in text


def test_an_adapter_publication_racing_a_forget_records_nothing_even_after_a_new_key(port):
    """Forget raced an adapter publication: the tombstone was checked, then the adapter saved, loaded and recorded
    with no guard, and a new key for the same id cleared the tombstone (issue 42, item 6). The record is written by
    one script that checks the tombstone and when the user's adapters were last forgotten."""
    from store.adapters import AdapterRef

    async def go() -> None:
        store = store_at(port)
        tenant, ref = tenant_of("vera"), AdapterRef(name="vera-v1", path="/nowhere/v1", version=1)
        try:
            began = 1000.0  # the trainer began this adapter long before the forget below
            assert (await store.adapters.publish(tenant, ref, began_at=began)).recorded
            await store.users.tombstone("vera")
            assert await store.adapters.forget(tenant) == ref
            late = await store.adapters.publish(tenant, ref.model_copy(update={"name": "vera-v2"}), began_at=began)
            assert not late.recorded and await store.adapters.current(tenant) is None
            await store.users.clear_tombstone("vera")  # a new key for the same id: a new user
            again = await store.adapters.publish(tenant, ref.model_copy(update={"name": "vera-v3"}), began_at=began)
            assert not again.recorded and await store.adapters.current(tenant) is None
            # The new user's own adapter, begun after the forget, is theirs to publish.
            fresh = AdapterRef(name="vera-v1", path="/nowhere/new", version=1)
            done = await store.adapters.publish(tenant, fresh, began_at=time.time() + 1)
            assert done.recorded and done.previous is None and await store.adapters.current(tenant) == fresh
        finally:
            await store.aclose()

    asyncio.run(go())


def test_a_forget_during_an_adapter_publication_leaves_no_record_no_files_nothing_loaded(port, tmp_path, monkeypatch):
    """The publication's own path (activities/weight_publication.py `_adapters`), on a real valkey, with the policy
    servers stood in for: the user is forgotten while their new adapter is being loaded. The record is refused, what
    was loaded is unloaded, the folder written is removed and the trainer drops the adapter."""
    import activities.weight_publication as wp
    from control.user_adapters import FileAdapters
    from openclaw_rl.settings import Settings
    from trainers.user_adapters import UserAdapter

    settings = Settings(data_dir=tmp_path / "data", redis={"url": f"redis://127.0.0.1:{port}/0"})
    tenant = tenant_of("wren")
    loaded: list[str] = []
    unloaded: list[str] = []

    class Servers:  # the policy servers: loading the adapter is when the forget comes in
        async def __aenter__(self):
            return self

        async def __aexit__(self, *exc):
            return None

        async def load_lora_adapter(self, name: str, path: str) -> list[str]:
            loaded.append(name)
            store = store_at(port)
            try:
                await store.users.tombstone("wren")
                await FileAdapters(settings, store).forget("wren")
            finally:
                await store.aclose()
            return ["http://policy"]

        async def unload_lora_adapter(self, name: str) -> None:
            unloaded.append(name)

    # The publication's and the forget's client alike (control.user_adapters imports the same class).
    monkeypatch.setattr(wp.WeightSyncClient, "from_settings", classmethod(lambda cls, s: Servers()))

    class Bank:
        def __init__(self):
            self.users = {tenant: UserAdapter(params={}, steps=3)}

        def adapter(self, owner):
            return self.users[owner]

        def save(self, owner, folder, version):
            folder.mkdir(parents=True)
            (folder / "adapter_model.safetensors").write_bytes(b"weights")

        def forget(self, owner):
            return self.users.pop(owner, None) is not None

    class Trainer:
        touched = {tenant}
        bank = Bank()

    trainer = Trainer()
    publisher = wp.WeightPublisher(settings, held=None, step_lock=asyncio.Lock())
    asyncio.run(publisher._adapters(trainer, 1, time.perf_counter()))

    assert loaded == [f"{tenant}-v3"] and f"{tenant}-v3" in unloaded
    assert redis.Redis(port=port).get(keys.user_adapter(tenant)) is None
    assert not (settings.data_dir / "adapters" / tenant / "v3").exists()
    assert tenant not in trainer.bank.users  # a new key for the id starts from a fresh adapter
