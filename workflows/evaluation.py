"""EvaluationWorkflow: one evaluation of one policy version, started by the eval schedule or `openclaw-rl eval run`.

It finds the version (the one asked for, else the latest published), skips it when it is not a multiple of
`every_versions` or every set has scores for it already, then for each set still to do: answers and scores on the
policy pool, then the scores recorded (store, curves). It carries set names and numbers, never answers. The
version and the sets evaluated are search attributes, so the Web UI finds a version's evaluations
(`WorkflowType = "EvaluationWorkflow" AND OpenclawPolicyVersion = 20`).
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from contracts.errors import ErrorType
    from contracts.evaluation import (
        EVAL_PLAN,
        EVALUATE_SET,
        EVALUATION_WORKFLOW,
        RECORD_SCORES,
        EvalInput,
        EvalPlan,
        EvalResult,
        EvaluateSetInput,
        PlanInput,
        SetScores,
    )
    from openclaw_rl.search_attributes import EVAL_SETS, POLICY_VERSION
    from workflows.activity_calls import execute


@workflow.defn(name=EVALUATION_WORKFLOW)
class EvaluationWorkflow:
    @workflow.run
    async def run(self, inp: EvalInput) -> EvalResult:
        cfg = inp.config
        queue = cfg.policy_task_queue
        plan: EvalPlan = await execute(EVAL_PLAN, PlanInput(sets=cfg.sets, version=inp.version), task_queue=queue)
        version = plan.version
        workflow.upsert_search_attributes([POLICY_VERSION.value_set(version)])
        if why := _skip(inp, plan):
            workflow.logger.info("evaluation skipped: %s", why)
            return EvalResult(version=version, skipped=why)
        scores: list[SetScores] = []
        for name in plan.sets:
            try:
                got: SetScores = await execute(
                    EVALUATE_SET,
                    EvaluateSetInput(set=name, version=version),
                    task_queue=queue,
                    start_to_close=timedelta(seconds=cfg.generate_timeout_s),
                )
            except ActivityError as exc:
                if _error_type(exc) == ErrorType.EVAL_VERSION_MOVED:  # the next scheduled run takes the newest
                    return EvalResult(version=version, scores=scores, skipped=f"version {version} moved on")
                raise
            await execute(RECORD_SCORES, got, task_queue=queue)
            scores.append(got)
            workflow.upsert_search_attributes([EVAL_SETS.value_set([s.set for s in scores])])
        return EvalResult(version=version, scores=scores)


def _skip(inp: EvalInput, plan: EvalPlan) -> str | None:
    every = inp.config.every_versions
    if plan.version == 0 and inp.version is None and inp.skip_base:
        return "no version published yet (the base model is evaluated only with --version 0)"
    if every and plan.version % every:
        return f"version {plan.version} is not a multiple of {every}"
    if not plan.sets:
        return f"version {plan.version} was evaluated already"
    return None


def _error_type(exc: ActivityError) -> str | None:
    cause = exc.cause
    return cause.type if isinstance(cause, ApplicationError) else None
