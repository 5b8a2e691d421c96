"""A keyed turn that failed on a policy outage lets the next copy with the key run a fresh turn.

Temporal keeps an update's outcome by its id, and the turn id is the update id: without a fresh id every later copy
of the request (an SDK's retries, a person pressing retry) got the same 503 back for the key's whole day.
"""

from __future__ import annotations

from api import idempotency
from api.idempotency import IdempotencyRecord
from tests.helpers import store_at
from tests.training.test_train_step_activity import valkey  # noqa: F401 (fixture)


async def test_after_a_failed_attempt_the_same_key_names_a_fresh_turn_and_keeps_its_session(valkey):  # noqa: F811
    store = store_at(valkey)
    r = store.idempotency
    key_id = idempotency.turn_id_for("u", "retry-me")
    first = IdempotencyRecord(session_id="s1", request_digest="d", created=1)
    record, fresh = await idempotency.claim(r, key_id, first)
    assert fresh and idempotency.attempt_turn_id(key_id, record.attempt) == key_id

    await idempotency.move_on(r, key_id, record)  # the turn failed with policy_unavailable
    copy = IdempotencyRecord(session_id="elsewhere", request_digest="d", created=2)
    record, fresh = await idempotency.claim(r, key_id, copy)
    assert not fresh and record.attempt == 1 and record.session_id == "s1" and record.created == 1
    second = idempotency.attempt_turn_id(key_id, record.attempt)
    assert second != key_id and second == idempotency.attempt_turn_id(key_id, 1)  # every copy agrees on it
    assert idempotency.attempt_turn_id(idempotency.turn_id_for("v", "retry-me"), 1) != second  # users never share
    await store.aclose()
