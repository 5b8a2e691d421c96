"""EpisodeWorkflow, TaskGroupWorkflow and RolloutWorkflow against the time-skipping test server, with mock activities.

The mocks stand in for the pools by activity name: an env "worker" answers env_open
on the shared queue and names its own queue for the rest; a lost worker is one whose
queue nobody polls.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from temporalio import activity
from temporalio.client import WorkflowFailureError, WorkflowHistory
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
    RolloutInput,
    RolloutPart,
    RolloutProgress,
    StepVote,
    StepVoteInput,
    StepVotes,
    StepVotesInput,
    TaskGroupInput,
)
from tests.workflows.mocks import new_queue
from workflows.episode import EpisodeWorkflow
from workflows.rollout import RolloutWorkflow
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
        self.votes_asked: list[StepVotesInput] = []

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

    @activity.defn(name="env_finish")
    async def env_finish(self, inp: EnvRef) -> Outcome:
        outcome = await self.env_outcome(inp)
        await self.env_close(inp)
        return outcome

    @activity.defn(name="step_votes")
    async def step_votes(self, inp: StepVotesInput) -> StepVotes:
        self.votes_asked.append(inp)
        return StepVotes(scores=[[1 if t % 2 == 0 else -1] * inp.votes for t in inp.steps])

    @activity.defn(name="publish_step_samples")
    async def publish_step_samples(self, inp: PublishStepsInput) -> PublishStepsResult:
        self.published.append(inp)
        return PublishStepsResult(published=len(inp.steps), duplicates=0, missing=0)

    def shared(self) -> list:
        return [self.env_open, self.agent_step, self.step_vote, self.step_votes, self.publish_step_samples]

    def on_worker(self) -> list:
        return [self.env_step, self.env_outcome, self.env_close, self.env_finish]


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


async def test_an_episode_in_one_checks_and_closes_in_one_call_and_judges_its_steps_in_another(env):
    """EpisodeConfig.finish_in_one and votes_in_one (what control.episodes starts today): the same steps, votes and
    outcome as an episode of one call each, with env_finish instead of env_outcome + env_close and one step_votes
    for every vote of every step instead of a step_vote each: 4 actions fewer for this 3-step episode of 2 votes."""
    q, env_q, worker_q = new_queue(), new_queue(), new_queue()
    pools = Pools(env_q, worker_q)
    pools.steps_by_task["solve"] = 3
    wf_id = f"episode/solve-{uuid.uuid4().hex[:6]}"
    cfg = config(q, env_q, finish_in_one=True, votes_in_one=True).model_copy(update={"prm_votes": 2})
    async with (
        Worker(env.client, task_queue=q, workflows=[EpisodeWorkflow], activities=pools.shared()),
        Worker(env.client, task_queue=env_q, activities=[pools.env_open]),
        Worker(env.client, task_queue=worker_q, activities=pools.on_worker()),
    ):
        handle = await env.client.start_workflow(
            EpisodeWorkflow.run, EpisodeInput(setting="terminal", task_id="t1", config=cfg), id=wf_id, task_queue=q
        )
        result: EpisodeResult = await handle.result()
        history = await handle.fetch_history()
    assert (result.outcome, result.end, [s.votes for s in result.steps]) == (
        1.0,
        "submitted",
        [[1, 1], [-1, -1], [1, 1]],
    )
    assert pools.closed == [result.attempt_key]
    assert [(v.steps, v.votes) for v in pools.votes_asked] == [([0, 1, 2], 2)]
    called = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert sorted(called) == sorted(["env_open"] + ["agent_step", "env_step"] * 3 + ["step_votes", "env_finish"])


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


async def test_an_env_worker_that_dies_mid_open_is_noticed_by_its_silence_and_the_open_retried(env):
    """The first open's worker goes silent (died before its completion reached Temporal): no answer, no heartbeat.
    The open's heartbeat timeout (`env_lost_after_s`) ends that attempt and the retry opens the task elsewhere,
    instead of the episode waiting out the open's 5-minute start-to-close."""
    q, env_q, worker_q = new_queue(), new_queue(), new_queue()
    pools = Pools(env_q, worker_q)
    opens: list[EnvOpenInput] = []

    @activity.defn(name="env_open")
    async def env_open(inp: EnvOpenInput) -> EnvOpened:
        opens.append(inp)
        if len(opens) == 1:
            await asyncio.sleep(3600)  # a dead worker: never answers, never beats
        return await pools.env_open(inp)

    async with (
        Worker(env.client, task_queue=q, workflows=[EpisodeWorkflow], activities=pools.shared()[1:]),
        Worker(env.client, task_queue=env_q, activities=[env_open]),
        Worker(env.client, task_queue=worker_q, activities=pools.on_worker()),
    ):
        started = time.monotonic()
        result: EpisodeResult = await env.client.execute_workflow(
            EpisodeWorkflow.run,
            EpisodeInput(setting="terminal", task_id="t1", config=config(q, env_q)),
            id=f"episode/solve-{uuid.uuid4().hex[:6]}",
            task_queue=q,
        )
        took = time.monotonic() - started
    assert result.outcome == 1.0 and result.attempt == 1 and len(opens) == 2
    assert opens[0].attempt_key == opens[1].attempt_key  # the same attempt's open, retried
    assert took < 30, took  # the 1 s heartbeat timeout, not the 5-minute start-to-close


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


# ---- RolloutWorkflow: more groups than fit at once ---------------------------------------------------------------


@activity.defn(name="env_outcome")
async def first_episode_solves(inp: EnvRef) -> Outcome:
    """Episode 0 of each group solves its task and the other does not: every group publishes its step samples."""
    return Outcome(outcome=1.0 if inp.attempt_key.split("/")[-1].startswith("0") else 0.0)


async def run_rollout(env, inp: RolloutInput) -> tuple[RolloutProgress, WorkflowHistory, Pools]:
    """Run a rollout to its end on the mock pools; its result, its history and the pools.

    Any exception out of workflow code fails the workflow (workflow_failure_exception_types), so a bug in the rollout
    loop (as `pending.add` on the list that workflow.wait returns was) fails the test at once with its cause,
    rather than failing the workflow task over and over until the test times out.
    """
    q, env_q, worker_q = inp.config.policy_task_queue, inp.config.env_task_queue, new_queue()
    pools = Pools(env_q, worker_q)
    async with (
        Worker(
            env.client,
            task_queue=q,
            workflows=[EpisodeWorkflow, TaskGroupWorkflow, RolloutWorkflow],
            activities=pools.shared(),
            workflow_failure_exception_types=[Exception],
        ),
        Worker(env.client, task_queue=env_q, activities=[pools.env_open]),
        Worker(env.client, task_queue=worker_q, activities=[pools.env_step, first_episode_solves, pools.env_close]),
    ):
        handle = await env.client.start_workflow(RolloutWorkflow.run, inp, id=f"rollout/{inp.rollout_id}", task_queue=q)
        progress: RolloutProgress = await handle.result()
        history = await handle.fetch_history()
    return progress, history, pools


def group_events(history: WorkflowHistory) -> list[tuple[str, str]]:
    """("start" | "done", child workflow id) of every child group started and completed, in history order."""
    out = []
    for e in history.events:
        if e.HasField("start_child_workflow_execution_initiated_event_attributes"):
            out.append(("start", e.start_child_workflow_execution_initiated_event_attributes.workflow_id))
        elif e.HasField("child_workflow_execution_completed_event_attributes"):
            out.append(("done", e.child_workflow_execution_completed_event_attributes.workflow_execution.workflow_id))
    return out


def most_at_once(events: list[tuple[str, str]], size: dict[str, int]) -> int:
    """The most episodes running at once: the sum of `size` over the groups started and not yet completed."""
    running, most = 0, 0
    for kind, wf_id in events:
        running += size[wf_id] if kind == "start" else -size[wf_id]
        most = max(most, running)
    return most


# A failing rollout leaves child groups behind its closed run (the time-skipping server's lock leak, conftest.py):
# each of these tests has a server of its own.
async def test_rollout_with_more_groups_than_slots_runs_them_one_after_another(skipping_env):
    """3 tasks x 2 samples with parallel 2: one slot, so each group starts when the one before it finishes."""
    q, env_q = new_queue(), new_queue()
    rollout_id = f"queued-{uuid.uuid4().hex[:6]}"
    inp = RolloutInput(
        rollout_id=rollout_id,
        setting="terminal",
        task_ids=["t1", "t2", "t3"],
        samples_per_task=2,
        parallel=2,
        config=config(q, env_q),
    )
    progress, history, pools = await run_rollout(skipping_env, inp)
    groups = [f"group/{rollout_id}.g{i}" for i in range(3)]
    # in cursor order, each started only once the one before it completed
    assert group_events(history) == [(kind, g) for g in groups for kind in ("start", "done")]
    # the episodes too: group g1's open only after g0's, and so on
    assert [o.attempt_key.split("/")[1] for o in pools.opens] == [
        f"{rollout_id}.g{i}" for i in range(3) for _ in (0, 1)
    ]
    assert [o.task_id for o in pools.opens] == ["t1", "t1", "t2", "t2", "t3", "t3"]
    assert (progress.groups_total, progress.groups_started, progress.groups_done, progress.running) == (3, 3, 3, 0)
    assert progress.episodes_done == 6 and progress.mean_outcome == 0.5
    assert progress.published == 18 and len(pools.published) == 3  # 2 episodes x 3 steps a group
    assert [r.group_id for r in progress.recent] == [f"{rollout_id}.g{i}" for i in range(3)]


async def test_mixed_rollout_whose_groups_do_not_all_fit_starts_the_rest_as_groups_finish(skipping_env):
    """Terminal groups of 2 episodes and toolcall groups of 1, interleaved, in 3 episodes: g0 and g1 fit at once, g2
    (2 more) does not, and waits for one of them to finish."""
    q, env_q = new_queue(), new_queue()
    rollout_id = f"mixed-queued-{uuid.uuid4().hex[:6]}"
    inp = RolloutInput(
        rollout_id=rollout_id,
        parts=[
            RolloutPart(setting="terminal", task_ids=["t1", "t2"]),
            RolloutPart(setting="toolcall", task_ids=["c1", "c2"], samples_per_task=1),
        ],
        samples_per_task=2,
        parallel=3,
        config=config(q, env_q),
    )
    progress, history, pools = await run_rollout(skipping_env, inp)
    groups = [f"group/{rollout_id}.g{i}" for i in range(4)]
    events = group_events(history)
    assert [g for kind, g in events if kind == "start"] == groups  # round-robin: t1, c1, t2, c2
    assert sorted(g for kind, g in events if kind == "done") == groups  # every group completed
    assert events[:2] == [("start", groups[0]), ("start", groups[1])]
    assert events[2][0] == "done"  # g2 waited for a group to finish
    assert most_at_once(events, dict(zip(groups, (2, 1, 2, 1)))) == 3
    assert sorted((o.setting, o.task_id) for o in pools.opens) == [
        ("terminal", "t1"),
        ("terminal", "t1"),
        ("terminal", "t2"),
        ("terminal", "t2"),
        ("toolcall", "c1"),
        ("toolcall", "c2"),
    ]
    assert (progress.groups_total, progress.groups_started, progress.groups_done, progress.running) == (4, 4, 4, 0)
    assert progress.setting == "terminal+toolcall" and progress.episodes_done == 6
    terminal, toolcall = progress.per_setting["terminal"], progress.per_setting["toolcall"]
    assert (terminal.groups_total, terminal.groups_done, terminal.episodes_done) == (2, 2, 4)
    assert (toolcall.groups_total, toolcall.groups_done, toolcall.episodes_done) == (2, 2, 2)
    assert terminal.mean_outcome == 0.5 and toolcall.mean_outcome == 1.0  # a toolcall group's one episode is its 0
