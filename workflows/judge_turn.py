"""JudgeTurnWorkflow: one main-line turn, paired with its next state, becomes a training sample.

Started by the SessionWorkflow and left to run on its own (parent close policy
ABANDON), so serving never waits for judging. The votes are one activity on the
judge pool (`judge_votes`: parallel requests, each vote retried on its own): a
vote that fails or times out after its tries counts as no vote (a store outage
is waited out, not counted). An accepted hint is turned into teacher log-probs on the
policy pool. `publish_sample` applies the method's rules and writes the sample
exactly once.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from contracts.learning import (
        JUDGE_TURN_WORKFLOW,
        JUDGE_VOTES,
        PUBLISH_SAMPLE,
        TEACHER_LOGPROBS,
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
    from rlmath.signals import HintVote, majority_vote, representative, select_hint
    from workflows.activity_calls import execute
    from workflows.store_outage import waiting_out_store_outages


VOTES_IN_ONE_ACTIVITY = "judge-votes-in-one-activity"
"""All of a turn's votes in one `judge_votes` activity (one billable action where m votes were m). Deprecated
(`workflow.deprecate_patch`, the first of Temporal's two steps to retire a patch): a judge workflow lives seconds to
minutes, so none started before the patch is still open once the build that added it has drained. Runs recorded
with its marker replay; new runs still write the marker (marked deprecated) and its TemporalChangeVersion upsert.
The next release removes the call, and with it that upsert (one billable action a judged turn): histories with a
deprecated marker replay without it (tests/workflows/test_replay.py), those with the plain marker would not."""


@workflow.defn(name=JUDGE_TURN_WORKFLOW)
class JudgeTurnWorkflow:
    @workflow.run
    async def run(self, inp: JudgeTurnInput) -> JudgeOutcome:
        plan = inp.plan
        prm: list[VoteResult | None] = []
        hints: list[VoteResult | None] = []
        if inp.next_state is not None:
            wants_prm = plan.method in (Method.BINARY, Method.COMBINED)
            wants_hint = plan.method in (Method.OPD, Method.COMBINED)
            n_prm = plan.prm_votes if wants_prm else 0
            n_hint = plan.hint_votes if wants_hint else 0
            if n_prm + n_hint:
                workflow.deprecate_patch(VOTES_IN_ONE_ACTIVITY)
                prm, hints = await self._votes(inp, n_prm, n_hint)
        scores = [v.score if v else None for v in prm]
        eval_score = majority_vote(scores) if prm else None
        hint = select_hint([HintVote(v.score, v.hint) for v in hints if v is not None]) if hints else None
        summary = JudgeSummary(
            judge=plan.judge_name,
            prm_votes=scores,
            eval_score=eval_score,
            hint=hint,
            hint_votes=len(hints),
            failed_votes=sum(v is None for v in prm + hints),
            representative=representative(scores, [v.raw if v else "" for v in prm], eval_score)
            if prm and eval_score is not None
            else None,
        )
        teacher = None
        if hint is not None:
            try:
                teacher = await waiting_out_store_outages(
                    lambda: execute(
                        TEACHER_LOGPROBS,
                        TeacherInput(turn_id=inp.turn_id, hint=hint, user_id=inp.user_id),
                        task_queue=plan.policy_task_queue,
                        start_to_close=timedelta(seconds=plan.vote_timeout_s),
                    )
                )
            except ActivityError:
                workflow.logger.warning("teacher log-probs failed; the hint is dropped", extra={"turn_id": inp.turn_id})
        result = await execute(
            PUBLISH_SAMPLE,
            PublishInput(
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
                teacher_key=teacher.key if teacher else None,
                w_binary=plan.w_binary,
                w_opd=plan.w_opd,
            ),
            task_queue=plan.judge_task_queue,
        )
        return JudgeOutcome(judge=summary, teacher=teacher, result=result)

    async def _votes(
        self, inp: JudgeTurnInput, n_prm: int, n_hint: int
    ) -> tuple[list[VoteResult | None], list[VoteResult | None]]:
        plan = inp.plan
        attempts = JUDGE_VOTES.retry.maximum_attempts
        try:
            votes: Votes = await waiting_out_store_outages(
                lambda: execute(
                    JUDGE_VOTES,
                    VotesInput(
                        turn_id=inp.turn_id,
                        next_state=inp.next_state,
                        prm=n_prm,
                        hints=n_hint,
                        vote_timeout_s=plan.vote_timeout_s,
                        attempts=attempts,
                    ),
                    task_queue=plan.judge_task_queue,
                    # Every vote's tries and their pauses (1 s, 2 s), with a margin: the votes run at once.
                    start_to_close=timedelta(seconds=attempts * plan.vote_timeout_s + 3 * attempts + 30),
                )
            )
        except ActivityError:
            return [None] * n_prm, [None] * n_hint  # failed votes are ignored, never fatal
        return votes.prm, votes.hints
