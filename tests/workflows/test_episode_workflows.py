"""EpisodeWorkflow and TaskGroupWorkflow against the time-skipping test server, with mock activities.

The mocks stand in for the pools by activity name: an env "worker" answers env_open
on the shared queue and names its own queue for the rest; a lost worker is one whose
queue nobody polls.
"""

from __future__ import annotations

import uuid

import pytest
from temporalio import activity
from temporalio.client import WorkflowFailureError
from temporalio.worker import Worker

from contracts.episodes import (
    AgentStepInput,
    AgentStepOutput,
    EnvOpened,
    EnvOpenInput,
    EnvRef,
    EnvStepInput,
    EnvStepResult,
    EpisodeConfig,
    EpisodeInput,
    EpisodeResult,
    Outcome,
    PublishStepsInput,
    PublishStepsResult,
    StepVote,
    StepVoteInput,
    TaskGroupInput,
)
from tests.workflows.mocks import new_queue
from workflows.episode import EpisodeWorkflow
from workflows.task_group import TaskGroupWorkflow

pytestmark = pytest.mark.timeout(60)


class Pools:
    """Mock policy, env and judge pools. `outcomes[task]` and `steps[task]` script each episode."""

    def __init__(self, env_queue: str, worker_queue: str, *, lose_first_open: bool = False):
        self.env_queue, self.worker_queue = env_queue, worker_queue
        self.lose_first_open = lose_first_open
        self.opens: list[EnvOpenInput] = []
        self.steps_run: list[EnvStepInput] = []
        self.closed: list[str] = []
        self.published: list[PublishStepsInput] = []
        self.outcome_by_episode: dict[str, float] = {}
        self.steps_by_task = {"solve": 2, "fail": 3}

    @activity.defn(name="env_open")
    async def env_open(self, inp: EnvOpenInput) -> EnvOpened:
        self.opens.append(inp)
        if self.lose_first_open and len(self.opens) == 1:
            return EnvOpened(worker_queue=f"{self.worker_queue}-dead", instruction="x", tools=1)  # nobody polls it
        return EnvOpened(worker_queue=self.worker_queue, instruction=f"task {inp.task_id}", tools=2)

    @activity.defn(name="agent_step")
    async def agent_step(self, inp: AgentStepInput) -> AgentStepOutput:
        return AgentStepOutput(
            action=f"bash(step {inp.step})",
            tool_calls=1,
            finish_reason="stop",
            weight_version="3",
            prompt_tokens=10,
            completion_tokens=5,
        )

    @activity.defn(name="env_step")
    async def env_step(self, inp: EnvStepInput) -> EnvStepResult:
        self.steps_run.append(inp)
        task = "solve" if ":solve" in inp.attempt_key or "solve" in inp.attempt_key else "fail"
        done = inp.step + 1 >= self.steps_by_task[task]
        return EnvStepResult(done=done, done_reason="submitted" if done else "", observation=f"ran step {inp.step}")

    @activity.defn(name="env_outcome")
    async def env_outcome(self, inp: EnvRef) -> Outcome:
        return Outcome(outcome=1.0 if "solve" in inp.attempt_key else 0.0)

    @activity.defn(name="env_close")
    async def env_close(self, inp: EnvRef) -> None:
        self.closed.append(inp.attempt_key)

    @activity.defn(name="step_vote")
    async def step_vote(self, inp: StepVoteInput) -> StepVote:
        return StepVote(score=1 if inp.step % 2 == 0 else -1, raw="\\boxed{}")

    @activity.defn(name="publish_step_samples")
    async def publish_step_samples(self, inp: PublishStepsInput) -> PublishStepsResult:
        self.published.append(inp)
        return PublishStepsResult(published=len(inp.steps), duplicates=0, missing=0)

    def shared(self) -> list:
        return [self.env_open, self.agent_step, self.step_vote, self.publish_step_samples]

    def on_worker(self) -> list:
        return [self.env_step, self.env_outcome, self.env_close]


def config(q: str, env_q: str, **kw) -> EpisodeConfig:
    # Schedule-to-start timeouts run in real time even on the time-skipping server: keep "lost" short.
    return EpisodeConfig(
        max_steps=4,
        prm_votes=1,
        policy_task_queue=q,
        judge_task_queue=q,
        env_task_queue=env_q,
        env_lost_after_s=1,
        **kw,
    )


async def test_episode_runs_steps_on_the_env_worker_that_opened_it(env):
    q, env_q, worker_q = new_queue(), new_queue(), new_queue()
    pools = Pools(env_q, worker_q)
    wf_id = f"episode/solve-{uuid.uuid4().hex[:6]}"
    async with (
        Worker(env.client, task_queue=q, workflows=[EpisodeWorkflow], activities=pools.shared()),
        Worker(env.client, task_queue=env_q, activities=[pools.env_open]),
        Worker(env.client, task_queue=worker_q, activities=pools.on_worker()),
    ):
        result: EpisodeResult = await env.client.execute_workflow(
            EpisodeWorkflow.run,
            EpisodeInput(setting="terminal", task_id="t1", config=config(q, env_q)),
            id=wf_id,
            task_queue=q,
        )
    assert result.outcome == 1.0 and result.end == "submitted" and result.attempt == 1
    assert [s.index for s in result.steps] == [0, 1]
    assert [s.votes for s in result.steps] == [[1], [-1]]  # judged in the background, gathered before the end
    assert result.steps[0].step_id == f"{wf_id}:a1:s0" and result.steps[1].observation == "ran step 1"
    assert [s.step for s in pools.steps_run] == [0, 1] and pools.closed == [result.attempt_key]


async def test_a_lost_env_worker_restarts_the_episode_under_a_new_attempt_key(skipping_env):
    env = skipping_env
    q, env_q, worker_q = new_queue(), new_queue(), new_queue()
    pools = Pools(env_q, worker_q, lose_first_open=True)
    async with (
        Worker(env.client, task_queue=q, workflows=[EpisodeWorkflow], activities=pools.shared()),
        Worker(env.client, task_queue=env_q, activities=[pools.env_open]),
        Worker(env.client, task_queue=worker_q, activities=pools.on_worker()),
    ):
        handle = await env.client.start_workflow(
            EpisodeWorkflow.run,
            EpisodeInput(setting="terminal", task_id="t1", config=config(q, env_q)),
            id=f"episode/solve-{uuid.uuid4().hex[:6]}",
            task_queue=q,
        )
        result: EpisodeResult = await handle.result()
    assert result.attempt == 2 and result.outcome == 1.0
    assert [o.attempt_key.rsplit(":", 1)[1] for o in pools.opens] == ["a1", "a2"]
    assert all(s.step_id.endswith(f":a2:s{s.index}") for s in result.steps)  # the lost attempt's data is never used


async def test_an_episode_that_loses_every_worker_fails_cleanly(skipping_env):
    env = skipping_env
    q, env_q = new_queue(), new_queue()
    pools = Pools(env_q, "nobody-polls-this", lose_first_open=False)
    async with (
        Worker(env.client, task_queue=q, workflows=[EpisodeWorkflow], activities=pools.shared()),
        Worker(env.client, task_queue=env_q, activities=[pools.env_open]),
    ):
        handle = await env.client.start_workflow(
            EpisodeWorkflow.run,
            EpisodeInput(setting="terminal", task_id="t1", config=config(q, env_q, attempts=2)),
            id=f"episode/solve-{uuid.uuid4().hex[:6]}",
            task_queue=q,
        )
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
    assert "lost in each of 2 attempts" in str(failed.value.cause)
    assert len(pools.opens) == 2


async def test_task_group_publishes_standardised_step_advantages(env):
    q, env_q, worker_q = new_queue(), new_queue(), new_queue()
    pools = Pools(env_q, worker_q)
    group_id = f"solve-{uuid.uuid4().hex[:6]}"
    async with (
        Worker(env.client, task_queue=q, workflows=[EpisodeWorkflow, TaskGroupWorkflow], activities=pools.shared()),
        Worker(env.client, task_queue=env_q, activities=[pools.env_open]),
        Worker(env.client, task_queue=worker_q, activities=pools.on_worker()),
    ):
        result = await env.client.execute_workflow(
            TaskGroupWorkflow.run,
            TaskGroupInput(group_id=group_id, setting="terminal", task_id="t1", samples=3, config=config(q, env_q)),
            id=f"group/{group_id}",
            task_queue=q,
        )
    # three identical episodes (outcome 1, votes +1/-1): every (step) bucket is constant, so nothing is published
    assert result.outcomes == [1.0, 1.0, 1.0] and result.failed == 0
    assert result.published == 0 and result.dropped_steps == 6 and pools.published == []


async def test_task_group_mixing_outcomes_publishes_one_sample_per_step(env):
    q, env_q, worker_q = new_queue(), new_queue(), new_queue()
    pools = Pools(env_q, worker_q)
    group_id = f"mixed-{uuid.uuid4().hex[:6]}"

    @activity.defn(name="env_outcome")
    async def env_outcome(inp: EnvRef) -> Outcome:  # episode 0 solves it, the others do not
        return Outcome(outcome=1.0 if inp.attempt_key.split("/")[-1].startswith("0") else 0.0)

    async with (
        Worker(env.client, task_queue=q, workflows=[EpisodeWorkflow, TaskGroupWorkflow], activities=pools.shared()),
        Worker(env.client, task_queue=env_q, activities=[pools.env_open]),
        Worker(env.client, task_queue=worker_q, activities=[pools.env_step, env_outcome, pools.env_close]),
    ):
        result = await env.client.execute_workflow(
            TaskGroupWorkflow.run,
            TaskGroupInput(group_id=group_id, setting="terminal", task_id="t1", samples=3, config=config(q, env_q)),
            id=f"group/{group_id}",
            task_queue=q,
        )
    assert sorted(result.outcomes) == [0.0, 0.0, 1.0]
    [pub] = pools.published
    # 3 steps of 3 episodes (votes +1, -1, +1): rewards {2,1,1}, {0,-1,-1}, {2,1,1} standardise to (+1.41, -0.71, -0.71)
    assert len(pub.steps) == 9 and result.published == 9
    by = {(s.episode_id.rsplit("/", 1)[1], s.step): s for s in pub.steps}
    assert by[("0", 0)].advantage == pytest.approx(2**0.5) and by[("1", 0)].advantage == pytest.approx(-(0.5**0.5))
    assert by[("0", 0)].reward == 2.0 and by[("0", 1)].reward == 0.0
    assert len({s.step_id for s in pub.steps}) == 9
