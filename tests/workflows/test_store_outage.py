"""A store (Redis) outage while a turn is judged: votes are asked again and the sample is published once it is back.

Before: a vote's 3 attempts failed and it counted as no vote; `publish_sample` gave up after 10 attempts
(about 90 s) and the sample was lost.
"""

from __future__ import annotations

import time
import uuid

import pytest
from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from contracts.errors import ErrorType
from contracts.learning import JudgeTurnInput, PublishInput, PublishResult, Votes, VotesInput
from tests.workflows.mocks import JudgeActivities, learning_plan, new_queue, reply_to
from workflows.judge_turn import JudgeTurnWorkflow


class StoreDownFor(JudgeActivities):
    """The judge pool's activities while Redis is down for the first `vote_failures` votes and `publish_failures`
    publishes (each raises what `store_outage_is_retryable` raises for a connection error)."""

    def __init__(self, vote_failures: int, publish_failures: int):
        super().__init__(prm_scores=(1, 1, 1))
        self.vote_failures, self.publish_failures = vote_failures, publish_failures
        self.calls = {"judge_votes": 0, "publish_sample": 0}

    def _down(self, name: str, failures: int) -> None:
        self.calls[name] += 1
        if self.calls[name] <= failures:
            raise ApplicationError("the store (Redis) is unavailable", type=ErrorType.STORE_UNAVAILABLE)

    @activity.defn(name="judge_votes")
    async def judge_votes(self, inp: VotesInput) -> Votes:
        self._down("judge_votes", self.vote_failures)
        return await super().judge_votes(inp)

    @activity.defn(name="publish_sample")
    async def publish_sample(self, inp: PublishInput) -> PublishResult:
        self._down("publish_sample", self.publish_failures)
        return await super().publish_sample(inp)


@pytest.mark.asyncio
async def test_votes_and_the_publish_wait_out_a_store_outage(skipping_env):
    env = skipping_env
    q = new_queue()
    acts = StoreDownFor(vote_failures=4, publish_failures=11)  # the votes' 3 attempts and the old 10 are not enough
    inp = JudgeTurnInput(
        plan=learning_plan(q, prm_votes=1),
        session_key="s@r",
        user_id="u",
        session_id="s",
        turn_id=uuid.uuid4().hex,
        turn_index=0,
        policy_version="0",
        next_state=reply_to("t0"),
    )
    started = time.monotonic()
    async with Worker(env.client, task_queue=q, workflows=[JudgeTurnWorkflow], activities=acts.all()):
        outcome = await env.client.execute_workflow(JudgeTurnWorkflow.run, inp, id=f"judge-{inp.turn_id}", task_queue=q)
    assert outcome.judge.prm_votes == [1] and outcome.judge.failed_votes == 0
    assert outcome.result.published and len(acts.published) == 1
    assert acts.calls == {"judge_votes": 5, "publish_sample": 12}
    print(f"took {time.monotonic() - started:.1f} s")
