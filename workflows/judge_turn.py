"""JudgeTurnWorkflow: one main-line turn, paired with its next state, becomes a training sample.

Started by the SessionWorkflow and left to run on its own (parent close policy
ABANDON), so serving never waits for judging. The votes are one activity on the
judge pool (`judge_votes`: parallel requests, each vote retried on its own): a
vote that fails or times out after its tries counts as no vote (a store outage
is waited out, not counted). An accepted hint is turned into teacher log-probs on the
policy pool. `publish_sample` applies the method's rules and writes the sample
exactly once. A judge whose plan says so votes and publishes in one activity
(`judge_and_publish`) unless a hint is accepted: its teacher pass, on another
pool, comes between.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from contracts.learning import (
        JUDGE_AND_PUBLISH,
        JUDGE_TURN_WORKFLOW,
        JUDGE_VOTES,
        PUBLISH_SAMPLE,
        TEACHER_LOGPROBS,
        JudgeAndPublishInput,
        JudgedSample,
        JudgeOutcome,
        JudgeSummary,
        JudgeTurnInput,
        Method,
        PublishInput,
        TeacherInput,
        VoteResult,
        Votes,
        VotesInput,
        sample_id,
    )
    from rlmath.signals import judge_summary
    from workflows.activity_calls import execute
    from workflows.store_outage import waiting_out_store_outages


VOTES_IN_ONE_ACTIVITY = "judge-votes-in-one-activity"
"""Retired: its call is gone (the release after the one that deprecated it), so runs write no marker and no
TemporalChangeVersion upsert. Histories with its deprecated marker replay without the call; none with the plain
marker can still be open (a judge workflow lives seconds to minutes)."""


@workflow.defn(name=JUDGE_TURN_WORKFLOW)
class JudgeTurnWorkflow:
    @workflow.run
    async def run(self, inp: JudgeTurnInput) -> JudgeOutcome:
        plan = inp.plan
        wants_prm = plan.method in (Method.BINARY, Method.COMBINED)
        wants_hint = plan.method in (Method.OPD, Method.COMBINED)
        n_prm = plan.prm_votes if wants_prm and inp.next_state is not None else 0
        n_hint = plan.hint_votes if wants_hint and inp.next_state is not None else 0
        if plan.judge_and_publish and n_prm + n_hint:
            done = await self._judge_and_publish(inp, n_prm, n_hint)
            if done.result is not None:
                return JudgeOutcome(judge=done.judge, result=done.result)
            summary = done.judge  # a hint accepted: its teacher pass first
        else:
            prm: list[VoteResult | None] = []
            hints: list[VoteResult | None] = []
            if n_prm + n_hint:
                prm, hints = await self._votes(inp, n_prm, n_hint)
            summary = judge_summary(plan.judge_name, prm, hints)
        teacher = None
        if summary.hint is not None:
            try:
                teacher = await waiting_out_store_outages(
                    lambda: execute(
                        TEACHER_LOGPROBS,
                        TeacherInput(turn_id=inp.turn_id, hint=summary.hint, user_id=inp.user_id),
                        task_queue=plan.policy_task_queue,
                        start_to_close=timedelta(seconds=plan.vote_timeout_s),
                    )
                )
            except ActivityError:
                workflow.logger.warning("teacher log-probs failed; the hint is dropped", extra={"turn_id": inp.turn_id})
        result = await execute(
            PUBLISH_SAMPLE,
            self._sample(inp, summary, teacher.key if teacher else None),
            task_queue=plan.judge_task_queue,
        )
        return JudgeOutcome(judge=summary, teacher=teacher, result=result)

    async def _judge_and_publish(self, inp: JudgeTurnInput, n_prm: int, n_hint: int) -> JudgedSample:
        plan = inp.plan
        votes = self._votes_input(inp, n_prm, n_hint)
        return await execute(
            JUDGE_AND_PUBLISH,
            JudgeAndPublishInput(votes=votes, sample=self._sample(inp, JudgeSummary(judge=plan.judge_name), None)),
            task_queue=plan.judge_task_queue,
            # The votes' bound (as judge_votes') and the publish's (as publish_sample's).
            start_to_close=_votes_bound(plan.vote_timeout_s, votes.attempts) + timedelta(seconds=60),
        )

    @staticmethod
    def _sample(inp: JudgeTurnInput, summary: JudgeSummary, teacher_key: str | None) -> PublishInput:
        plan = inp.plan
        return PublishInput(
            sample_id=sample_id(inp.session_key, inp.turn_index),
            session_key=inp.session_key,
            source=plan.source,
            method=plan.method,
            user_id=inp.user_id,
            session_id=inp.session_id,
            turn_id=inp.turn_id,
            turn_index=inp.turn_index,
            policy_version=inp.policy_version,
            has_next_state=inp.next_state is not None,
            judge=summary,
            teacher_key=teacher_key,
            w_binary=plan.w_binary,
            w_opd=plan.w_opd,
        )

    @staticmethod
    def _votes_input(inp: JudgeTurnInput, n_prm: int, n_hint: int) -> VotesInput:
        assert inp.next_state is not None
        return VotesInput(
            turn_id=inp.turn_id,
            next_state=inp.next_state,
            prm=n_prm,
            hints=n_hint,
            vote_timeout_s=inp.plan.vote_timeout_s,
            attempts=JUDGE_VOTES.retry.maximum_attempts,
        )

    async def _votes(
        self, inp: JudgeTurnInput, n_prm: int, n_hint: int
    ) -> tuple[list[VoteResult | None], list[VoteResult | None]]:
        votes = self._votes_input(inp, n_prm, n_hint)
        try:
            got: Votes = await waiting_out_store_outages(
                lambda: execute(
                    JUDGE_VOTES,
                    votes,
                    task_queue=inp.plan.judge_task_queue,
                    start_to_close=_votes_bound(inp.plan.vote_timeout_s, votes.attempts),
                )
            )
        except ActivityError:
            return [None] * n_prm, [None] * n_hint  # failed votes are ignored, never fatal
        return got.prm, got.hints


def _votes_bound(vote_timeout_s: float, attempts: int) -> timedelta:
    """Every vote's tries and their pauses (1 s, 2 s), with a margin: the votes run at once."""
    return timedelta(seconds=attempts * vote_timeout_s + 3 * attempts + 30)
