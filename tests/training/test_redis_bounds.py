"""Redis stays bounded: per-turn data expires, and trained sample-stream entries are deleted once acknowledged."""

from __future__ import annotations

import redis
import redis.asyncio as aioredis
from temporalio.testing import ActivityEnvironment

from activities.learning import LearningActivities
from activities.training import TrainingActivities
from contracts.learning import JudgeSummary, Method, PublishInput
from contracts.training import AckInput, ClaimInput
from store import keys
from store.turns import TurnTokens
from tests.helpers import store_at
from tests.training.test_train_step_activity import publish, settings_for, valkey  # noqa: F401 (fixture)


def _publish_input() -> PublishInput:
    """A judged turn t1 of session/u/s, ready to publish as a binary sample."""
    return PublishInput(
        sample_id="session/u/s#0",
        session_key="session/u/s",
        source="personal",
        method=Method.BINARY,
        user_id="u",
        session_id="s",
        turn_id="t1",
        turn_index=0,
        policy_version="0",
        has_next_state=True,
        judge=JudgeSummary(judge="test", prm_votes=[1], eval_score=1),
    )


async def test_every_per_turn_key_of_a_published_sample_expires(tmp_path, valkey, tiny_model):  # noqa: F811
    settings = settings_for(tmp_path, valkey, tiny_model)
    settings.redis.data_ttl_s = ttl_s = 2 * 3600  # the setting, not the default, bounds every key
    r = aioredis.Redis(port=valkey)
    store = store_at(valkey, ttl_s)
    await store.turns.save(
        TurnTokens(
            turn_id="t1",
            prompt_ids=[1, 2],
            response_ids=[3, 4],
            response_logprobs=[-1.0, -1.0],
            weight_version="0",
            finish_reason="stop",
        ),
    )
    await store.turns.save_teacher_logprobs("t1", [-0.5, -0.5])
    await store.aclose()
    acts = LearningActivities(settings)
    inp = _publish_input()
    result = await ActivityEnvironment().run(acts.publish_sample, inp)
    assert result.published
    for key in (
        keys.turn_data("t1"),
        keys.teacher_logprobs("t1"),
        keys.sample_published("session/u/s#0"),
        keys.judgement("t1"),
        keys.session_effective("session/u/s"),
        keys.record_stream("personal", "0"),
    ):
        ttl = await r.ttl(key)
        assert 0 < ttl <= ttl_s, (key, ttl)
    assert await r.ttl(keys.sample_stream("personal")) == -1  # samples wait for training however long it takes
    await acts.aclose()
    await r.aclose()


async def test_acknowledged_entries_leave_the_sample_stream(tmp_path, valkey, tiny_model):  # noqa: F811
    publish(valkey, 0, 6)
    acts = TrainingActivities(settings_for(tmp_path, valkey, tiny_model))
    env = ActivityEnvironment()
    claim = await env.run(
        acts.claim_batch, ClaimInput(consumer="t", batch_size=4, source_weights={"personal": 1.0}, wait_s=1.0)
    )
    assert await env.run(acts.ack_batch, AckInput(ids=claim.ids)) == 4
    r = redis.Redis(port=valkey)
    assert r.xlen(keys.sample_stream("personal")) == 2  # the two never claimed stay
    claim = await env.run(
        acts.claim_batch, ClaimInput(consumer="t", batch_size=2, source_weights={"personal": 1.0}, wait_s=1.0)
    )
    assert claim.count == 2 and claim.backlog == 0
    await acts.aclose()


async def test_a_store_outage_is_a_retryable_typed_failure(tmp_path, tiny_model):
    """Redis down: publish_sample fails as STORE_UNAVAILABLE (retried until the store is back), not a generic error."""
    from temporalio.exceptions import ApplicationError

    from contracts.errors import ErrorType
    from tests.helpers import free_port

    acts = LearningActivities(settings_for(tmp_path, free_port(), tiny_model))  # nothing listens there
    inp = _publish_input()
    try:
        await ActivityEnvironment().run(acts.publish_sample, inp)
    except ApplicationError as exc:
        assert exc.type == ErrorType.STORE_UNAVAILABLE and not exc.non_retryable
    else:
        raise AssertionError("publish_sample succeeded with no store")
    finally:
        await acts.aclose()
