"""ProgressReportWorkflow: one user's progress report (contracts.progress), started by `openclaw-rl users report`,
`POST /v1/me/progress` or a round of the progress schedule. ProgressRoundWorkflow: a round, a report for each
user with held-out turns, a few at a time.

A report is two activities: the serving version answers the held-out turns again (policy pool), the judge compares
(judge pool). The workflow carries the user's pseudonym, a store key and the summary; the answers and the report stay in
the store. Its id is `progress/<pseudonym>`, so a second request while one runs joins it.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import ChildWorkflowError, WorkflowAlreadyStartedError

with workflow.unsafe.imports_passed_through():
    from contracts.progress import (
        PROGRESS_ANSWERS,
        PROGRESS_JUDGE,
        PROGRESS_REPORT_WORKFLOW,
        PROGRESS_ROUND_WORKFLOW,
        PROGRESS_USERS,
        AnswersRef,
        ProgressInput,
        ProgressSummary,
        RoundInput,
        RoundResult,
        UsersWithHeldOut,
        report_workflow_id,
    )
    from workflows.activity_calls import execute


@workflow.defn(name=PROGRESS_REPORT_WORKFLOW)
class ProgressReportWorkflow:
    @workflow.run
    async def run(self, inp: ProgressInput) -> ProgressSummary:
        answers: AnswersRef = await execute(
            PROGRESS_ANSWERS,
            inp,
            task_queue=inp.policy_task_queue,
            # Every held-out turn's answer, not one generation: never below the definition's bound.
            start_to_close=max(PROGRESS_ANSWERS.start_to_close, timedelta(seconds=inp.answer_timeout_s)),
        )
        if answers.skipped:
            return ProgressSummary(tenant=inp.tenant, served_version=answers.version, skipped=answers.skipped)
        return await execute(PROGRESS_JUDGE, answers, task_queue=inp.judge_task_queue)


@workflow.defn(name=PROGRESS_ROUND_WORKFLOW)
class ProgressRoundWorkflow:
    @workflow.run
    async def run(self, inp: RoundInput) -> RoundResult:
        users: UsersWithHeldOut = await execute(PROGRESS_USERS, inp, task_queue=inp.judge_task_queue)
        result = RoundResult(users=len(users.tenants))
        slots = asyncio.Semaphore(inp.parallel)

        async def report(tenant: str) -> None:
            async with slots:
                try:
                    summary: ProgressSummary = await workflow.execute_child_workflow(
                        ProgressReportWorkflow.run,
                        ProgressInput(
                            tenant=tenant,
                            max_turns=inp.max_turns,
                            policy_task_queue=inp.policy_task_queue,
                            judge_task_queue=inp.judge_task_queue,
                            answer_timeout_s=inp.answer_timeout_s,
                        ),
                        id=report_workflow_id(tenant),
                        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
                        static_summary="scheduled progress report",
                    )
                except (ChildWorkflowError, WorkflowAlreadyStartedError):
                    # One that failed, or one already running (asked for on demand): the next round tries again.
                    result.failed += 1
                    return
                if summary.skipped:
                    result.skipped += 1
                else:
                    result.reports += 1

        await asyncio.gather(*(report(t) for t in users.tenants))
        return result
