"""The binary method's at-least-one rule against a real valkey: one score-0 turn per session is kept, as in the
reference, even when two of them are judged at once."""

from __future__ import annotations

import asyncio

from temporalio.testing import ActivityEnvironment

from activities.learning import LearningActivities
from contracts.learning import JudgeSummary, Method, PublishInput
from store.turns import TurnTokens
from tests.helpers import store_at
from tests.training.test_train_step_activity import settings_for, valkey  # noqa: F401 (fixture)


def _scored_zero(session: str, index: int) -> PublishInput:
    return PublishInput(
        sample_id=f"{session}#{index}",
        session_key=session,
        source="personal",
        method=Method.BINARY,
        user_id="u",
        session_id="s",
        turn_id=f"{session}-t{index}",
        turn_index=index,
        policy_version="0",
        has_next_state=True,
        judge=JudgeSummary(judge="test", prm_votes=[0], eval_score=0),
    )


async def _tokens(port: int, turn_ids: list[str]) -> None:
    store = store_at(port)
    for t in turn_ids:
        await store.turns.save(
            TurnTokens(
                turn_id=t,
                prompt_ids=[1, 2],
                response_ids=[3, 4],
                response_logprobs=[-1.0, -1.0],
                weight_version="0",
                finish_reason="stop",
            )
        )
    await store.aclose()


async def test_one_score_zero_turn_per_session_is_kept_even_when_two_are_judged_at_once(tmp_path, valkey, tiny_model):  # noqa: F811
    acts = LearningActivities(settings_for(tmp_path, valkey, tiny_model))
    env = ActivityEnvironment()
    turns = [_scored_zero("session/u/s", i) for i in range(4)]
    await _tokens(valkey, [t.turn_id for t in turns])
    first, second = await asyncio.gather(env.run(acts.publish_sample, turns[0]), env.run(acts.publish_sample, turns[1]))
    assert sorted([first.published, second.published]) == [False, True]  # at once: exactly one takes the slot
    later = await env.run(acts.publish_sample, turns[2])
    assert not later.published  # the promoted turn was the session's effective sample
    kept = turns[0] if first.published else turns[1]
    again = await env.run(acts.publish_sample, kept)  # a retry of the kept one: a duplicate, not a second sample
    assert again.duplicate and not again.published
    other = _scored_zero("session/u/other", 0)
    await _tokens(valkey, [other.turn_id])
    assert (await env.run(acts.publish_sample, other)).published  # another session has its own slot
    await acts.aclose()
