"""EvaluationWorkflow: one evaluation of one policy version, started by the eval schedule or `openclaw-rl eval run`.

It finds the version (the one asked for, else the latest published), skips it when no multiple of `every_versions`
was crossed since the last evaluated version (scheduled runs), training is per user, or every set has scores for it
already, then for each set still to do: answers and scores on the policy pool (an `episodes-<setting>` set: its
held-out tasks as child task groups that publish nothing, scored by their outcomes), then the scores recorded
(store, curves). It carries set names, task ids and numbers, never answers. The version and the sets evaluated are
search attributes, so the Web UI finds a version's evaluations
(`WorkflowType = "EvaluationWorkflow" AND OpenclawPolicyVersion = 20`).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from contracts.episodes import TaskGroupInput, TaskGroupResult
    from contracts.errors import ErrorType
    from contracts.evaluation import (
        EPISODES_PREFIX,
        EVAL_EPISODE_TASKS,
        EVAL_PLAN,
        EVALUATE_SET,
        EVALUATION_WORKFLOW,
        RECORD_SCORES,
        EpisodeTasks,
        EpisodeTasksInput,
        EvalConfig,
        EvalInput,
        EvalPlan,
        EvalResult,
        EvaluateSetInput,
        PlanInput,
        SetScores,
    )
    from openclaw_rl.search_attributes import EVAL_SETS, POLICY_VERSION
    from workflows.activity_calls import execute
    from workflows.task_group import TaskGroupWorkflow


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
            if name.startswith(EPISODES_PREFIX):
                episodes = await self._episode_set(cfg, name, version)
                if episodes is None:  # as for the answers below: these outcomes are not this version's
                    return EvalResult(version=version, scores=scores, skipped=f"version {version} moved on")
                await execute(RECORD_SCORES, episodes, task_queue=queue)
                scores.append(episodes)
                workflow.upsert_search_attributes([EVAL_SETS.value_set([s.set for s in scores])])
                continue
            try:
                got: SetScores = await execute(
                    EVALUATE_SET,
                    EvaluateSetInput(set=name, version=version),
                    task_queue=queue,
                    # The whole set's answers, not one generation's: never below the definition's bound (its
                    # heartbeat finds a dead worker sooner).
                    start_to_close=max(EVALUATE_SET.start_to_close, timedelta(seconds=cfg.generate_timeout_s)),
                )
            except ActivityError as exc:
                if _error_type(exc) == ErrorType.EVAL_VERSION_MOVED:  # the next scheduled run takes the newest
                    return EvalResult(version=version, scores=scores, skipped=f"version {version} moved on")
                raise
            await execute(RECORD_SCORES, got, task_queue=queue)
            scores.append(got)
            workflow.upsert_search_attributes([EVAL_SETS.value_set([s.set for s in scores])])
        return EvalResult(version=version, scores=scores)

    async def _episode_set(self, cfg: EvalConfig, name: str, version: int) -> SetScores | None:
        """The setting's first held-out tasks as task groups that publish nothing, `episode_parallel` episodes at
        once; their mean outcome. None: some step was generated with other weights than `version`."""
        setting = name.removeprefix(EPISODES_PREFIX)
        episode = cfg.episodes.get(setting)
        if episode is None:
            raise ApplicationError(
                f"no episode configuration for {name!r} in the evaluation's input", non_retryable=True
            )
        tasks: EpisodeTasks = await execute(
            EVAL_EPISODE_TASKS,
            EpisodeTasksInput(setting=setting, count=cfg.episode_tasks),
            task_queue=cfg.policy_task_queue,
        )
        slots = asyncio.Semaphore(max(1, cfg.episode_parallel // cfg.episode_samples))
        run = workflow.info().run_id[:8]  # two evaluations of one version (a rerun after it moved on) never share ids

        async def group(task_id: str) -> TaskGroupResult | None:
            group_id = f"eval-{version}-{setting}-{task_id}-{run}"
            async with slots:
                try:
                    return await workflow.execute_child_workflow(
                        TaskGroupWorkflow.run,
                        TaskGroupInput(
                            group_id=group_id,
                            setting=setting,
                            task_id=task_id,
                            samples=cfg.episode_samples,
                            config=episode,
                            publish=False,  # evaluation only: nothing reaches the sample streams
                        ),
                        id=f"group/{group_id}",
                        static_summary=f"evaluation of version {version}: {setting} {task_id}",
                    )
                except ChildWorkflowError:
                    workflow.logger.warning("a held-out task group failed", extra={"group": group_id})
                    return None

        groups = await asyncio.gather(*(group(t) for t in tasks.task_ids))
        outcomes = [o for g in groups if g is not None for o in g.outcomes]
        served = {v for g in groups if g is not None for v in g.weight_versions}
        if served - {str(version)}:
            workflow.logger.info("episodes ran on other weights", extra={"version": version, "served": sorted(served)})
            return None
        failed = len(tasks.task_ids) * cfg.episode_samples - len(outcomes)
        if not outcomes:
            raise ApplicationError(
                f"{name}: none of its {failed} episodes finished (are {setting}'s held-out tasks, "
                f"{', '.join(tasks.task_ids[:3])}, ..., served by the env pool? docs/evaluation.md)",
                type=ErrorType.EVAL_SET_INVALID,
                non_retryable=True,
            )
        if failed:
            workflow.logger.warning("held-out episodes failed", extra={"set": name, "failed": failed})
        return SetScores(
            set=name,
            version=version,
            metrics={"success": sum(outcomes) / len(outcomes)},
            count=len(outcomes),
            served_version=min(served, default=None),  # a set's order is the process's: min is stable
            at=workflow.now().timestamp(),
        )


def _skip(inp: EvalInput, plan: EvalPlan) -> str | None:
    every = inp.config.every_versions
    if plan.not_evaluable:
        return plan.not_evaluable
    if plan.version == 0 and inp.version is None and inp.skip_base:
        return "no version published yet (the base model is evaluated only with --version 0)"
    # Scheduled: the newest version once it has crossed a multiple of N since the last evaluated one. Waiting for
    # an exact multiple would miss it whenever versions come faster than the schedule's checks.
    if every and inp.version is None and plan.version // every <= (plan.last_evaluated or 0) // every:
        last = plan.last_evaluated
        since = f"since version {last}" if last is not None else "yet"
        return f"version {plan.version}: no multiple of {every} crossed {since}"
    if not plan.sets:
        return f"version {plan.version} was evaluated already"
    return None


def _error_type(exc: ActivityError) -> str | None:
    cause = exc.cause
    return cause.type if isinstance(cause, ApplicationError) else None
