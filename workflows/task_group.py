"""TaskGroupWorkflow: n episodes of one task, then their step samples.

The episodes run as child workflows at once. Each step's reward is the
episode's outcome plus the mean of the step's valid votes; rewards are
standardised within (group, step index) buckets (rlmath.stepwise: singleton
buckets raw, constant buckets dropped), and the value is the advantage of every
token of that step. An episode that failed after all its attempts is left out.
`publish_step_samples` writes one sample per step, exactly once.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.common import Priority
from temporalio.exceptions import ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from contracts.episodes import (
        PUBLISH_STEP_SAMPLES,
        TASK_GROUP_WORKFLOW,
        EpisodeInput,
        EpisodeResult,
        PublishStepsInput,
        PublishStepsResult,
        StepSampleRef,
        TaskGroupInput,
        TaskGroupResult,
        episode_workflow_id,
    )
    from contracts.priorities import rollout_fairness_key
    from openclaw_rl.search_attributes import OUTCOME, SETTING, TASK_ID, missing, of_task
    from rlmath.stepwise import group_advantages, step_reward
    from workflows.activity_calls import execute
    from workflows.episode import EpisodeWorkflow


# Unsandboxed, like SessionWorkflow: the sandbox's per-task cost is on every step's path, and this code is
# deterministic by construction (no I/O, time or randomness but workflow.*).
@workflow.defn(name=TASK_GROUP_WORKFLOW, sandboxed=False)
class TaskGroupWorkflow:
    @workflow.init
    def __init__(self, inp: TaskGroupInput) -> None:
        self.finished = 0
        self.outcomes: list[float] = []

    @workflow.run
    async def run(self, inp: TaskGroupInput) -> TaskGroupResult:
        if not inp.config.attributes_at_start_and_end or missing(TASK_ID):  # a starter that did not set them
            workflow.upsert_search_attributes([SETTING.value_set(inp.setting), TASK_ID.value_set(inp.task_id)])
        self._details(inp)
        runs = [self._episode(inp, k) for k in range(inp.samples)]
        results = [r for r in await asyncio.gather(*runs) if r is not None]
        rewards = [[step_reward(r.outcome, s.votes) for s in r.steps] for r in results]
        advantages = group_advantages(rewards)
        refs = [
            StepSampleRef(
                episode_id=results[a.episode].episode_id,
                step=a.step,
                step_id=results[a.episode].steps[a.step].step_id,
                reward=a.reward,
                advantage=a.advantage,
                votes=results[a.episode].steps[a.step].votes,
                outcome=results[a.episode].outcome,
                weight_version=results[a.episode].steps[a.step].weight_version,
            )
            for a in advantages
        ]
        published = 0
        if inp.publish and refs:
            out: PublishStepsResult = await execute(
                PUBLISH_STEP_SAMPLES,
                PublishStepsInput(
                    setting=inp.setting,
                    task_id=inp.task_id,
                    group_id=inp.group_id,
                    judge_name=inp.config.judge_name,
                    steps=refs,
                    owner=inp.client.owner if inp.client else None,
                ),
                task_queue=inp.config.judge_task_queue,
            )
            published = out.published + out.duplicates  # a duplicate was published by an earlier attempt of this step
        outcomes = [r.outcome for r in results]
        if outcomes:
            workflow.upsert_search_attributes([OUTCOME.value_set(sum(outcomes) / len(outcomes))])
        return TaskGroupResult(
            group_id=inp.group_id,
            task_id=inp.task_id,
            outcomes=outcomes,
            failed=inp.samples - len(results),
            published=published,
            dropped_steps=sum(len(x) for x in rewards) - len(refs),
            weight_versions=sorted({s.weight_version for r in results for s in r.steps if s.weight_version}),
        )

    async def _episode(self, inp: TaskGroupInput, k: int) -> EpisodeResult | None:
        try:
            result: EpisodeResult = await workflow.execute_child_workflow(
                EpisodeWorkflow.run,
                EpisodeInput(
                    setting=inp.setting,
                    task_id=inp.task_id,
                    config=inp.config,
                    group_id=inp.group_id,
                    client=inp.client,
                ),
                id=episode_workflow_id(inp.group_id, k),
                static_summary=f"{inp.setting} {inp.task_id} #{k}",
                priority=self._priority(),
                search_attributes=of_task(inp.setting, inp.task_id) if inp.config.attributes_at_start_and_end else None,
            )
        except ChildWorkflowError:
            workflow.logger.warning(
                "an episode failed after all its attempts", extra={"group": inp.group_id, "index": k}
            )
            result = None
        self.finished += 1
        if result is not None:
            self.outcomes.append(result.outcome)
        self._details(inp)
        return result

    @staticmethod
    def _priority() -> Priority:
        """Episodes share the queues per rollout: one fairness key for all of a rollout's (or an evaluation's)
        episodes, whatever their task group; the rank is inherited (3 for a rollout, 5 under an evaluation)."""
        info = workflow.info()
        return Priority(fairness_key=rollout_fairness_key(info.parent.workflow_id if info.parent else info.workflow_id))

    def _details(self, inp: TaskGroupInput) -> None:
        mean = f", mean outcome {sum(self.outcomes) / len(self.outcomes):.2f}" if self.outcomes else ""
        workflow.set_current_details(f"{inp.setting} {inp.task_id}: {self.finished}/{inp.samples} episodes done{mean}")
