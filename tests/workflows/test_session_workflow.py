"""SessionWorkflow against the time-skipping test server, with mock activities: pairing, side turns, rollover, idle
close."""

from __future__ import annotations

from datetime import timedelta

import pytest
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from api.session_gateway import session_workflow_id
from contracts.chat import TurnType
from contracts.learning import JudgeOutcome, judge_workflow_id, session_key
from contracts.session import EndSession, SessionSummary, TurnsPage
from store import keys as store_keys
from tests.workflows.mocks import (
    JudgeActivities,
    SessionActivities,
    eventually,
    learning_plan,
    main_turn,
    new_queue,
    next_run,
    reply_to,
    result_skipping_time,
    send_turn,
    session_input,
    side_turn,
)
from workflows.judge_turn import JudgeTurnWorkflow
from workflows.session import SessionWorkflow

pytestmark = pytest.mark.timeout(60)  # a server that stopped skipping time would otherwise wait out the 600 s default


async def chain_key(env: WorkflowEnvironment, wf_id: str, run_id: str | None = None) -> str:
    """The session key of the run chain `run_id` belongs to (the latest run's by default)."""
    desc = await env.client.get_workflow_handle(wf_id, run_id=run_id).describe()
    return session_key(wf_id, desc.raw_description.workflow_execution_info.first_run_id)


async def judged(env: WorkflowEnvironment, wf_id: str, turn_index: int, run_id: str | None = None) -> JudgeOutcome:
    """The judge child of one turn: it must exist and have been started by the session."""
    key = await chain_key(env, wf_id, run_id)
    handle = env.client.get_workflow_handle_for(JudgeTurnWorkflow.run, judge_workflow_id(key, turn_index))

    async def started() -> bool:
        try:
            return (await handle.describe()).parent_id == wf_id
        except RPCError as exc:
            if exc.status is not RPCStatusCode.NOT_FOUND:
                raise
            return False

    await eventually(started, what=f"the judge of turn {turn_index}")
    return await handle.result()


async def never_judged(env: WorkflowEnvironment, wf_id: str, turn_index: int) -> None:
    key = await chain_key(env, wf_id)
    with pytest.raises(RPCError) as err:
        await env.client.get_workflow_handle(judge_workflow_id(key, turn_index)).describe()
    assert err.value.status is RPCStatusCode.NOT_FOUND


async def test_main_turn_is_paired_by_the_next_main_turn_and_side_turns_are_not(env: WorkflowEnvironment):
    q = new_queue()
    inp = session_input(q, "pairing", learning=learning_plan(q))
    wf_id = session_workflow_id(inp.user_id, inp.session_id)
    session, judge = SessionActivities(), JudgeActivities()
    ns = reply_to("t2")
    async with Worker(
        env.client, task_queue=q, workflows=[SessionWorkflow, JudgeTurnWorkflow], activities=session.all() + judge.all()
    ):
        first = await send_turn(env.client, inp, main_turn("t0"))
        side = await send_turn(env.client, inp, side_turn("t1"))
        second = await send_turn(env.client, inp, main_turn("t2", next_state=ns))
        assert (first.turn_index, side.turn_index, second.turn_index) == (0, 1, 2)
        assert second.output.content == "reply to t2"
        assert [g.turn_id for g in session.generated] == ["t0", "t1", "t2"]

        handle = env.client.get_workflow_handle_for(SessionWorkflow.run, wf_id)
        page = await handle.query(SessionWorkflow.turns, TurnsPage())
        assert page.total == 3 and page.archived == []
        t0, t1, t2 = page.turns
        assert (t0.next_state_status, t0.next_state) == ("paired", ns)
        assert (t1.turn_type, t1.side_kind, t1.next_state_status, t1.next_state) == (
            TurnType.SIDE,
            "memory_flush",
            "n/a",
            None,
        )
        assert t2.next_state_status == "pending"
        assert t0.status == "done" and t0.response_summary == "reply to t0" and t0.weight_version == "3"
        assert t0.request_key == store_keys.chat_request("t0") and t0.data_key == store_keys.turn_data("t0")
        assert await handle.query(SessionWorkflow.summary) == SessionSummary(
            user_id="tester", session_id="pairing", turns=3, main_turns=2, paired=1, closed_reason=None, runs=1
        )

        outcome = await judged(env, wf_id, 0)
        assert [v.next_state for v in judge.votes_for("t0")] == [ns] * 3
        assert outcome.judge.prm_votes == [1, 1, -1] and outcome.judge.eval_score == 1
        pub = next(p for p in judge.published if p.turn_id == "t0")
        assert (pub.sample_id, pub.turn_index, pub.has_next_state, pub.policy_version) == (
            f"{await chain_key(env, wf_id)}#0",
            0,
            True,
            "3",
        )

        await handle.signal(SessionWorkflow.end, EndSession())
        summary = await result_skipping_time(env, handle)
        assert (summary.closed_reason, summary.paired, summary.turns) == ("requested", 1, 3)
        await never_judged(env, wf_id, 1)
        closed = await judged(env, wf_id, 2)  # binary RL: the unpaired last turn is still submitted, with no next state
        assert closed.result.loss_mask == 0
        assert judge.votes_for("t1") == [] and judge.votes_for("t2") == []


async def test_continue_as_new_archives_finished_turns_and_carries_the_pending_one(env: WorkflowEnvironment):
    q = new_queue()
    inp = session_input(q, "rolling", turns_per_run=3, learning=learning_plan(q))
    wf_id = session_workflow_id(inp.user_id, inp.session_id)
    session, judge = SessionActivities(), JudgeActivities()
    ns2, ns3 = reply_to("t2"), reply_to("t3", "no, the other file", message_index=5)
    async with Worker(
        env.client, task_queue=q, workflows=[SessionWorkflow, JudgeTurnWorkflow], activities=session.all() + judge.all()
    ):
        handle = env.client.get_workflow_handle_for(SessionWorkflow.run, wf_id)
        await send_turn(env.client, inp, main_turn("t0"))
        first_run = (await handle.describe()).run_id
        await send_turn(env.client, inp, side_turn("t1"))
        await send_turn(env.client, inp, main_turn("t2", next_state=ns2))
        await next_run(handle, first_run)
        assert (await handle.query(SessionWorkflow.summary)).runs == 2
        assert len(session.archived) == 1
        archived = session.archived[0]
        assert archived.key == store_keys.turn_log_segment(await chain_key(env, wf_id), 0)
        assert [(r["index"], r["turn_type"], r["next_state_status"]) for r in archived.records] == [
            (0, "main", "paired"),
            (1, "side", "n/a"),
        ]

        page = await handle.query(SessionWorkflow.turns, TurnsPage())
        assert [(s.first_index, s.count) for s in page.archived] == [(0, 2)]
        assert [(r.index, r.next_state_status) for r in page.turns] == [(2, "pending")]

        result = await send_turn(env.client, inp, main_turn("t3", next_state=ns3))
        assert result.turn_index == 3
        page = await handle.query(SessionWorkflow.turns, TurnsPage())
        assert [(r.index, r.next_state_status) for r in page.turns] == [(2, "paired"), (3, "pending")]
        assert page.turns[0].next_state == ns3

        await judged(env, wf_id, 2)
        assert [v.next_state for v in judge.votes_for("t2")] == [ns3] * 3

        await handle.signal(SessionWorkflow.end, EndSession(reason="test"))
        summary = await result_skipping_time(env, handle)
        assert (summary.runs, summary.turns, summary.main_turns, summary.paired, summary.closed_reason) == (
            2,
            4,
            3,
            2,
            "test",
        )
        assert len(session.archived) == 1


async def test_idle_session_closes_and_submits_its_pending_turn_without_next_state(skipping_env: WorkflowEnvironment):
    env, q = skipping_env, new_queue()
    inp = session_input(q, "idle", idle_timeout_s=900, learning=learning_plan(q))
    wf_id = session_workflow_id(inp.user_id, inp.session_id)
    session, judge = SessionActivities(), JudgeActivities()
    async with Worker(
        env.client, task_queue=q, workflows=[SessionWorkflow, JudgeTurnWorkflow], activities=session.all() + judge.all()
    ):
        await send_turn(env.client, inp, main_turn("t0"))
        handle = env.client.get_workflow_handle_for(SessionWorkflow.run, wf_id)
        began = await env.get_current_time()
        await env.sleep(timedelta(seconds=800))
        assert (await handle.describe()).status is WorkflowExecutionStatus.RUNNING
        summary = await result_skipping_time(env, handle)
        assert await env.get_current_time() - began >= timedelta(seconds=900)
        assert (summary.closed_reason, summary.paired, summary.main_turns) == ("idle", 0, 1)
        assert (await handle.describe()).status is WorkflowExecutionStatus.COMPLETED

        page = await handle.query(SessionWorkflow.turns, TurnsPage())
        assert [(r.index, r.next_state_status) for r in page.turns] == [(0, "none")]
        outcome = await judged(env, wf_id, 0)
        assert judge.votes_for("t0") == []
        assert outcome.judge.prm_votes == [] and outcome.result.loss_mask == 0
        assert [(p.turn_index, p.has_next_state) for p in judge.published] == [(0, False)]


async def test_a_session_id_reused_after_its_session_ended_keeps_learning_and_its_audit(env: WorkflowEnvironment):
    """The second run's turn indices start at 0 again; its judges and samples must not collide with the first's."""
    q = new_queue()
    inp = session_input(q, "reused", learning=learning_plan(q, prm_votes=1))
    wf_id = session_workflow_id(inp.user_id, inp.session_id)
    session, judge = SessionActivities(), JudgeActivities()
    async with Worker(
        env.client, task_queue=q, workflows=[SessionWorkflow, JudgeTurnWorkflow], activities=session.all() + judge.all()
    ):
        await send_turn(env.client, inp, main_turn("r1t0"))
        await send_turn(env.client, inp, main_turn("r1t1", next_state=reply_to("r1t1")))
        first = env.client.get_workflow_handle_for(SessionWorkflow.run, wf_id)
        first_run = (await first.describe()).run_id
        await first.signal(SessionWorkflow.end, EndSession(reason="client"))
        await first.result()
        first_key = await chain_key(env, wf_id, first_run)

        await send_turn(env.client, inp, main_turn("r2t0"))  # the same session id, days later
        await send_turn(env.client, inp, main_turn("r2t1", next_state=reply_to("r2t1")))
        second_key = await chain_key(env, wf_id)
        assert second_key != first_key
        again = await judged(env, wf_id, 0)  # judged in the new run, not swallowed as "already started"
        assert again.result.published or again.judge is not None
        await eventually(lambda: len({p.sample_id for p in judge.published}) >= 3, what="the second run's sample")
    ids = [p.sample_id for p in judge.published]
    assert f"{first_key}#0" in ids and f"{second_key}#0" in ids and len(ids) == len(set(ids))


async def test_the_same_request_sent_again_is_a_retry_not_the_reply_it_would_pair_with(env: WorkflowEnvironment):
    """A client that retried (its answer was lost to a 503 or a dropped stream) sends the pending turn's own
    request again: that copy's last user message is not a reply to the lost answer, so nothing is paired with it;
    the retried turn's own answer is the one a real reply pairs with."""
    q = new_queue()
    inp = session_input(q, "retried", learning=learning_plan(q, prm_votes=1))
    wf_id = session_workflow_id(inp.user_id, inp.session_id)
    session, judge = SessionActivities(), JudgeActivities()
    async with Worker(
        env.client, task_queue=q, workflows=[SessionWorkflow, JudgeTurnWorkflow], activities=session.all() + judge.all()
    ):
        first = main_turn("t0").model_copy(update={"request_digest": "d-question"})
        await send_turn(env.client, inp, first)
        again = main_turn("t1", next_state=reply_to("t1")).model_copy(update={"request_digest": "d-question"})
        await send_turn(env.client, inp, again)
        reply = main_turn("t2", next_state=reply_to("t2")).model_copy(update={"request_digest": "d-reply"})
        await send_turn(env.client, inp, reply)
        handle = env.client.get_workflow_handle_for(SessionWorkflow.run, wf_id)
        page = await handle.query(SessionWorkflow.turns, TurnsPage())
        status = {t.turn_id: t.next_state_status for t in page.turns}
        assert status == {"t0": "retried", "t1": "paired", "t2": "pending"}
        outcome = await judged(env, wf_id, 1)
        assert outcome.result.published and outcome.result.loss_mask == 1
        await eventually(lambda: len(judge.published) >= 2, what="the binary submission of the retried turn")
    by_turn = {p.turn_index: p for p in judge.published}
    assert not by_turn[0].has_next_state  # submitted with loss mask 0, never paired with its own copy
