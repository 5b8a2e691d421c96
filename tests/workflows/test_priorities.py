"""Priority and fair shares (contracts.priorities), read back from the workflow histories.

On a dev server (the time-skipping test server neither carries a priority over a continue-as-new nor merges a
parent's into its child): the session's start, its `generate` and `archive_turns`, the judge child and its votes;
a task group's episodes and their steps; the training workflow's activities by the type table.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
import pytest_asyncio
from temporalio.client import Client, WithStartWorkflowOperation, WorkflowHistory, WorkflowUpdateFailedError
from temporalio.common import Priority, SearchAttributePair, TypedSearchAttributes, WorkflowIDConflictPolicy
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from api.session_gateway import session_workflow_id
from contracts.chat import tenant_of
from contracts.episodes import RolloutInput, episode_workflow_id
from contracts.errors import ErrorType
from contracts.learning import judge_workflow_id, session_key
from contracts.priorities import WORKFLOW_RANKS, Rank, fairness_key, rank_of, rollout_fairness_key
from contracts.session import EndSession, SessionInput, TurnRequest, TurnResult
from control.sessions import session_priority
from openclaw_rl.search_attributes import SEARCH_ATTRIBUTES, SESSION_ID, USER_ID
from openclaw_rl.settings import Settings
from stack.preflight import find_temporal_binary
from stack.services import DEV_SERVER_DYNAMIC_CONFIG
from tests.workflows.mocks import (
    JudgeActivities,
    SessionActivities,
    eventually,
    learning_plan,
    main_turn,
    new_queue,
    next_run,
    reply_to,
    session_input,
)
from tests.workflows.test_episode_workflows import config, run_rollout
from workflows.judge_turn import JudgeTurnWorkflow
from workflows.session import SessionWorkflow

pytestmark = pytest.mark.timeout(120)


@pytest_asyncio.fixture(scope="module")
async def dev():
    args = [a for k, v in DEV_SERVER_DYNAMIC_CONFIG.items() for a in ("--dynamic-config-value", f"{k}={v}")]
    env = await WorkflowEnvironment.start_local(
        data_converter=pydantic_data_converter,
        dev_server_existing_path=str(find_temporal_binary()),
        dev_server_extra_args=args,
        search_attributes=[],
    )
    from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest

    await env.client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(namespace=env.client.namespace, search_attributes=SEARCH_ATTRIBUTES)
    )
    try:
        yield env
    finally:
        await env.shutdown()


def triple(p) -> tuple[int, str, float]:
    """(priority_key, fairness_key, fairness_weight) of a history event's `priority` (0 / "" / 0.0 when unset)."""
    return (p.priority_key, p.fairness_key, round(p.fairness_weight, 3))


def scheduled(history: WorkflowHistory) -> list[tuple[str, tuple[int, str, float]]]:
    return [
        (a.activity_type.name, triple(a.priority))
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
        for a in [e.activity_task_scheduled_event_attributes]
    ]


def started(history: WorkflowHistory) -> tuple[int, str, float]:
    return triple(history.events[0].workflow_execution_started_event_attributes.priority)


async def send(client: Client, inp: SessionInput, req: TurnRequest, priority: Priority) -> TurnResult:
    """As the API sends a turn (control.sessions.session_start), with the session's priority."""
    op = WithStartWorkflowOperation(
        SessionWorkflow.run,
        inp,
        id=session_workflow_id(inp.user_id, inp.session_id),
        task_queue=inp.config.workflow_task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        search_attributes=TypedSearchAttributes(
            [SearchAttributePair(USER_ID, tenant_of(inp.user_id)), SearchAttributePair(SESSION_ID, inp.session_id)]
        ),
        priority=priority,
    )
    for _ in range(100):
        try:
            return await client.execute_update_with_start_workflow(
                SessionWorkflow.turn, req, start_workflow_operation=op, id=req.turn_id
            )
        except WorkflowUpdateFailedError as exc:  # the session is continuing as new: the next run takes it
            if not (isinstance(exc.cause, ApplicationError) and exc.cause.type == ErrorType.SESSION_ROLLING):
                raise
            await asyncio.sleep(0.05)
    raise AssertionError(f"turn {req.turn_id} never reached the session's new run")


def test_ranks_go_chat_judge_episode_training_evaluation():
    assert [Rank.CHAT, Rank.JUDGE, Rank.EPISODE, Rank.TRAINING, Rank.EVALUATION] == [1, 2, 3, 4, 5]
    assert rank_of("SessionWorkflow", None) == 1 and rank_of("SessionWorkflow", 5) == 5
    assert rank_of("TrainingWorkflow", None) == 4 and rank_of("NoSuchWorkflow", None) == 3
    assert set(WORKFLOW_RANKS.values()) == set(Rank)
    assert fairness_key("u-1") == "u-1"
    long = fairness_key("rollout/" + "x" * 80)
    assert len(long.encode()) <= 64 and long == fairness_key("rollout/" + "x" * 80)


def test_session_priority_from_settings():
    on = Settings(temporal={"fairness": {"weights": {"alice": 4.0}, "default_weight": 1.5}})
    assert session_priority(on, "alice") == Priority(
        priority_key=1, fairness_key=tenant_of("alice"), fairness_weight=4.0
    )
    assert session_priority(on, "bob") == Priority(priority_key=1, fairness_key=tenant_of("bob"), fairness_weight=1.5)
    by_pseudonym = Settings(temporal={"fairness": {"weights": {tenant_of("carol"): 0.5}}})
    assert session_priority(by_pseudonym, "carol").fairness_weight == 0.5
    off = Settings(temporal={"fairness": {"enabled": False}})
    assert session_priority(off, "alice") == Priority(priority_key=1)


async def test_chat_turn_and_its_judging_carry_the_users_key_at_their_ranks(dev: WorkflowEnvironment):
    q = new_queue()
    inp = session_input(q, f"prio-{uuid.uuid4().hex[:6]}", turns_per_run=2, learning=learning_plan(q))
    settings = Settings(temporal={"fairness": {"weights": {inp.user_id: 2.0}}})
    prio = session_priority(settings, inp.user_id)
    user = (1, tenant_of(inp.user_id), 2.0)
    wf_id = session_workflow_id(inp.user_id, inp.session_id)
    session, judge = SessionActivities(), JudgeActivities()
    async with Worker(
        dev.client, task_queue=q, workflows=[SessionWorkflow, JudgeTurnWorkflow], activities=session.all() + judge.all()
    ):
        await send(dev.client, inp, main_turn("p0"), prio)
        handle = dev.client.get_workflow_handle(wf_id)
        first_run = (await handle.describe()).run_id
        await send(dev.client, inp, main_turn("p1", next_state=reply_to("p1")), prio)
        await next_run(handle, first_run)  # two turns a run: it continued as new
        await eventually(lambda: any(p.turn_id == "p0" for p in judge.published), timeout=30, what="p0 judged")
        await handle.signal(SessionWorkflow.end, EndSession())
        await handle.result()
        judge_id = judge_workflow_id(session_key(wf_id, first_run), 0)
        judge_history = await dev.client.get_workflow_handle(judge_id).fetch_history()

    runs = [e async for e in dev.client.list_workflows(f"WorkflowId = '{wf_id}'")]
    assert len(runs) == 2
    histories = {r.run_id: await dev.client.get_workflow_handle(wf_id, run_id=r.run_id).fetch_history() for r in runs}
    for h in histories.values():  # the first run's priority, and the one continue-as-new carried over
        assert started(h) == user
    activities = [s for h in histories.values() for s in scheduled(h)]
    assert ("generate", user) in activities and ("archive_turns", user) in activities
    assert {p for _, p in activities} == {user}

    jp = (2, tenant_of(inp.user_id), 2.0)  # rank 2; key and weight inherited from the session
    assert started(judge_history) == jp
    votes = scheduled(judge_history)
    assert {n for n, _ in votes} >= {"judge_votes", "publish_sample"} and {p for _, p in votes} == {jp}, votes
    initiated = [
        triple(e.start_child_workflow_execution_initiated_event_attributes.priority)
        for h in histories.values()
        for e in h.events
        if e.HasField("start_child_workflow_execution_initiated_event_attributes")
    ]
    assert initiated and set(initiated) == {(2, "", 0.0)}  # the command names only the rank


async def test_a_rollouts_episodes_share_one_fairness_key_at_the_episode_rank(dev: WorkflowEnvironment):
    q, env_q = new_queue(), new_queue()
    rollout_id = f"fair-{uuid.uuid4().hex[:6]}"
    inp = RolloutInput(
        rollout_id=rollout_id, setting="terminal", task_ids=["t1", "t2"], samples_per_task=2, parallel=4,
        config=config(q, env_q),
    )  # fmt: skip
    await run_rollout(dev, inp)
    key = rollout_fairness_key(f"rollout/{rollout_id}")
    for g in range(2):
        group = await dev.client.get_workflow_handle(f"group/{rollout_id}.g{g}").fetch_history()
        assert started(group) == (0, "", 0.0)  # no priority set: the server's default rank (3)
        assert {p for _, p in scheduled(group)} == {(3, "", 0.0)}  # publish_step_samples: the type's rank
        initiated = {
            triple(e.start_child_workflow_execution_initiated_event_attributes.priority)
            for e in group.events
            if e.HasField("start_child_workflow_execution_initiated_event_attributes")
        }
        assert initiated == {(0, key, 0.0)}
        for k in range(2):
            episode = await dev.client.get_workflow_handle(episode_workflow_id(f"{rollout_id}.g{g}", k)).fetch_history()
            assert started(episode) == (0, key, 0.0)
            steps = scheduled(episode)
            assert {"agent_step", "env_step", "step_vote"} <= {n for n, _ in steps}
            assert {p for _, p in steps} == {(3, key, 0.0)}, steps
