"""The store's user content sealed with encryption keys (store/sealing.py), on a bare valkey: token streams, turn
token ids, judgements and their record streams, training samples and episode data round-trip with keys and without;
with keys nothing of the user's text or token ids is in Redis in the clear; without keys the layout is as before;
a value written in the clear still reads once keys are added; a sealed value does not open under another key."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import redis

from contracts.learning import JudgementRecord, JudgeSummary, PublishResult
from envs.base import Action, Observation
from openclaw_rl.encryption import DecryptError, Keyring
from store import keys
from store.client import Store, StoreAddress
from store.episodes import EpisodeOpening, StepAction, StepObservation
from store.judgements import judged_turn_writes
from store.samples import PersonalTurn, TrainingSample, decode_sample
from store.sealing import Sealer, pack_fields, unpack_fields
from store.token_streams import StreamChunk
from store.turns import TurnTokens
from tests.helpers import running_valkey

pytestmark = pytest.mark.timeout(120)

KEYRING = Keyring([("k1", bytes(range(32)))])
SECRET = "my-secret-pet-is-a-marmoset-named-Ximena"
SECRET_IDS = [91_234, 91_235, 91_236, 91_237]
"""Token ids of the secret (unusual ones, so their bytes are not found by chance)."""


@pytest.fixture
def port(tmp_path: Path):
    with running_valkey(tmp_path) as p:
        yield p


def stores(port: int) -> tuple[Store, Store]:
    """The same valkey through a store without keys and one with them."""
    address = StoreAddress(f"redis://127.0.0.1:{port}/0", 3600)
    return Store.connect(address), Store.connect(address, keyring=KEYRING)


def everything(port: int) -> list[bytes]:
    """Every key name and value in the store, every type read back whole."""
    r = redis.Redis(port=port)
    out = []
    for name in r.scan_iter(count=1000):
        kind = r.type(name)
        if kind == b"string":
            blobs = [r.get(name) or b""]
        elif kind == b"hash":
            blobs = [b for kv in r.hgetall(name).items() for b in kv]
        elif kind == b"stream":
            blobs = [b for _, fields in r.xrange(name) for kv in fields.items() for b in kv]
        else:
            blobs = []
        out += [name, *blobs]
    return out


def in_clear(port: int) -> list[bytes]:
    """Blobs that show the secret: its text, its token ids as JSON, or packed int32."""
    needles = [SECRET.encode(), json.dumps(SECRET_IDS)[1:-1].encode()]
    packed = b"".join(i.to_bytes(4, "little") for i in SECRET_IDS)
    return [b for b in everything(port) if any(n in b for n in needles) or packed in b]


def sample(turn: int = 0) -> TrainingSample:
    return TrainingSample(
        sample_id=f"session/ann/s@run#{turn}",
        source="personal",
        policy_version="1",
        temperature=1.0,
        reward=1.0,
        loss_mask=1,
        prompt_ids=[1, *SECRET_IDS],
        response_ids=SECRET_IDS,
        rollout_logprobs=[-0.5, -0.25, -0.125, -0.75],
        advantages=[1.0, 1.0, 1.0, 1.0],
        teacher_logprobs=[-0.5, -0.5, -0.5, -0.5],
        provenance=PersonalTurn(
            method="combined",
            user_id="ann",
            session_id="s",
            turn_id=f"t{turn}",
            turn_index=turn,
            use_teacher=True,
            reason="hint",
            judge=JudgeSummary(judge="heuristic", hint=SECRET, representative=SECRET),
        ),
    )


def record(turn: int = 0) -> JudgementRecord:
    s = sample(turn)
    return JudgementRecord(
        sample_id=s.sample_id,
        user_id="ann",
        session_id="s",
        turn_id=f"t{turn}",
        turn_index=turn,
        policy_version="1",
        method="combined",
        judge=s.provenance.judge,
        result=PublishResult(published=True, reason="hint"),
    )


async def publish(store: Store, turn: int = 0) -> None:
    also = judged_turn_writes(record(turn), "personal", "session/ann/s@run", effective=True)
    assert await store.samples.publish_once(sample(turn).sample_id, "personal", sample(turn), also)


async def check_samples_and_judgements(store: Store, turns: list[int]) -> None:
    got = await store.samples.entries("personal")
    assert [s for _, s in got] == [sample(t) for t in turns]
    assert await store.samples.load("personal", got[0][0]) == sample(turns[0])
    assert await store.judgements.of_turns([f"t{t}" for t in turns] + ["nope"]) == [*map(record, turns), None]
    assert [j.record for j in await store.judgements.records("personal")] == [record(t) for t in turns]


def test_the_fields_framing_round_trips_binary_values():
    fields = {"a": b"\x00\x01ocx1", "empty": b"", "text": "é"}
    assert unpack_fields(pack_fields(fields)) == {b"a": b"\x00\x01ocx1", b"empty": b"", b"text": "é".encode()}


def test_samples_and_judgements_sealed_with_keys_and_as_before_without(port):
    async def main():
        plain, sealed = stores(port)
        async with plain, sealed:
            await publish(plain, 0)
            r = redis.Redis(port=port)
            ((_, fields),) = r.xrange(keys.sample_stream("personal"))
            assert set(fields) == {
                b"id",
                b"core",
                b"provenance",
                b"prompt_ids",
                b"response_ids",
                b"rollout_logprobs",
                b"advantages",
                b"teacher_logprobs",
            }  # the layout as before
            assert decode_sample(fields) == sample(0)
            assert r.get(keys.judgement("t0")) == record(0).model_dump_json().encode()
            await check_samples_and_judgements(plain, [0])

            await publish(sealed, 1)
            _, (_, fields) = r.xrange(keys.sample_stream("personal"))
            assert set(fields) == {b"id", b"sealed"} and fields[b"sealed"].startswith(b"ocx1")
            assert r.get(keys.judgement("t1")).startswith(b"ocx1")
            assert all(SECRET.encode() not in b for b in everything(port) if b"t1" in b or b"#1" in b)
            # The keyed store reads both, the clear entries written before the keys too.
            await check_samples_and_judgements(sealed, [0, 1])
            # Forgetting reads sealed records to find the user's.
            assert await sealed.users.forget_records("ann") == 2
            # Without the keys a sealed sample is a clear error, not garbage.
            with pytest.raises(DecryptError, match="no encryption_keys"):
                await plain.samples.entries("personal")

    asyncio.run(main())


def test_with_keys_no_sample_judgement_or_record_shows_the_users_content(port):
    async def main():
        _, sealed = stores(port)
        async with sealed:
            await publish(sealed, 0)
            assert in_clear(port) == []
            await check_samples_and_judgements(sealed, [0])

    asyncio.run(main())


def test_a_sealed_value_moved_under_another_key_does_not_open(port):
    async def main():
        _, sealed = stores(port)
        async with sealed:
            await publish(sealed, 0)
            r = redis.Redis(port=port)
            r.set(keys.judgement("t9"), r.get(keys.judgement("t0")))
            with pytest.raises(DecryptError, match="authenticate"):
                await sealed.judgements.of_turns(["t9"])
            ((_, fields),) = r.xrange(keys.sample_stream("personal"))
            r.xadd(keys.sample_stream("personal"), {b"id": b"session/bob/s@run#0", b"sealed": fields[b"sealed"]})
            with pytest.raises(DecryptError, match="authenticate"):
                await sealed.samples.entries("personal")

    asyncio.run(main())


def test_token_streams_sealed_with_keys_and_as_before_without(port):
    chunk = StreamChunk(attempt=1, ids=SECRET_IDS, lps=[-0.1] * 4, text=SECRET)
    last = StreamChunk(attempt=1, ids=[7], lps=[-0.2], text=".", finish="stop")

    async def main():
        plain, sealed = stores(port)
        async with plain, sealed:
            await plain.streams.take_over("t0", 1)
            assert await plain.streams.append("t0", chunk)
            r = redis.Redis(port=port)
            ((_, fields),) = r.xrange(keys.token_stream("t0"))
            assert fields == {
                b"a": b"1",
                b"ids": json.dumps(SECRET_IDS).encode(),
                b"lps": b"[-0.1, -0.1, -0.1, -0.1]",
                b"text": SECRET.encode(),
                b"done": b"0",
            }  # as before
            # Keys added mid-answer: the clear chunk and the sealed one both read.
            assert await sealed.streams.append("t0", last)
            assert await sealed.streams.chunks("t0") == [chunk, last]
            assert [c for _, c in await sealed.streams.follow("t0", "0-0", None)] == [chunk, last]

            await sealed.streams.take_over("t1", 2)
            assert await sealed.streams.append("t1", chunk.model_copy(update=dict(attempt=2)))
            assert not await sealed.streams.append("t1", chunk)  # a stale attempt is still fenced off
            ((_, fields),) = r.xrange(keys.token_stream("t1"))
            assert set(fields) == {b"a", b"sealed", b"done"}
            assert SECRET.encode() not in fields[b"sealed"] and b"91234" not in fields[b"sealed"]
            assert await sealed.streams.chunks("t1") == [chunk.model_copy(update=dict(attempt=2))]
            with pytest.raises(DecryptError):
                await plain.streams.chunks("t1")

    asyncio.run(main())


def test_turn_token_ids_and_text_sealed_with_keys_and_clear_ones_still_read(port):
    def tokens(turn_id: str) -> TurnTokens:
        return TurnTokens(
            turn_id=turn_id,
            prompt_ids=[1, *SECRET_IDS],
            response_ids=SECRET_IDS,
            response_logprobs=[-0.5] * 4,
            weight_version="1",
            finish_reason="stop",
            response_text=SECRET,
        )

    async def main():
        plain, sealed = stores(port)
        async with plain, sealed:
            await plain.turns.save(tokens("t0"))
            await sealed.turns.save(tokens("t1"))
            r = redis.Redis(port=port)
            assert r.hget(keys.turn_data("t0"), "response_text") == SECRET.encode()  # as before
            assert in_clear(port) == [
                r.hget(keys.turn_data("t0"), f) for f in ("prompt_ids", "response_ids", "response_text")
            ]
            for turn_id in ("t0", "t1"):
                assert await sealed.turns.load(turn_id) == tokens(turn_id)
                assert await sealed.turns.response_text(turn_id) == SECRET
            assert await plain.turns.load("t0") == tokens("t0")
            with pytest.raises(DecryptError):
                await plain.turns.load("t1")

    asyncio.run(main())


def test_episode_data_sealed_with_keys_and_clear_ones_still_read(port):
    opening = EpisodeOpening(messages=[{"role": "user", "content": SECRET}], tools=[])
    action = StepAction(message={"role": "assistant", "content": SECRET}, action=Action(text=SECRET))
    observation = StepObservation(observation=Observation(user_message=SECRET), messages=[])

    async def main():
        plain, sealed = stores(port)
        async with plain, sealed:
            for store, attempt in ((plain, "oc:ep:e:a0"), (sealed, "oc:ep:e:a1")):
                await store.episodes.open(attempt, opening)
                await store.episodes.save_action(attempt, 0, action)
                await store.episodes.save_observation(attempt, 0, observation)
            r = redis.Redis(port=port)
            sealed_values = [r.get(keys.episode_opening("oc:ep:e:a1")), *r.hvals(keys.episode_steps("oc:ep:e:a1"))]
            assert len(sealed_values) == 3 and all(
                v.startswith(b"ocx1") and SECRET.encode() not in v for v in sealed_values
            )
            assert r.get(keys.episode_opening("oc:ep:e:a0")) == opening.model_dump_json().encode()  # as before
            assert r.get(keys.episode_opening("oc:ep:e:a1")).startswith(b"ocx1")
            for attempt in ("oc:ep:e:a0", "oc:ep:e:a1"):
                got, steps = await sealed.episodes.history(attempt, 1)
                assert got == opening and steps[0].action == action and steps[0].observation == observation
                _, (step,) = await sealed.episodes.steps(attempt, [0])
                assert step.action == action
                assert await sealed.episodes.action(attempt, 0) == action
                assert await sealed.episodes.observations(attempt, [0, 0]) == {0: observation.observation}

    asyncio.run(main())


def test_a_sealer_without_keys_passes_values_through():
    s = Sealer()
    assert not s.enabled and s.seal("k", "v") == "v" and s.open("k", b"v") == b"v"
    with pytest.raises(ValueError):
        s.seal_fields("k", {"a": "b"})


def test_forgetting_leaves_records_sealed_under_a_retired_key_and_takes_the_rest(port):
    """A record sealed under a key since dropped from the keyring cannot be read, nor told whose it is: a forget
    leaves it (nobody can open it) instead of failing, and still takes the user's readable records."""

    async def main():
        address = StoreAddress(f"redis://127.0.0.1:{port}/0", 3600)
        old = Store.connect(address, keyring=KEYRING)
        new = Store.connect(address, keyring=Keyring([("k2", bytes(range(1, 33)))]))
        async with old, new:
            await publish(old, 0)  # sealed under k1, which the next keyring no longer has
            await publish(new, 1)
            assert await new.users.forget_records("ann") == 1
            assert len(redis.Redis(port=port).xrange(keys.record_stream("personal", "1"))) == 1  # the unreadable one

    asyncio.run(main())
