"""Record the workflow histories that test_replay.py replays: `python -m tests.workflows.record_histories`.

Each scenario runs the real workflows with the mock activities against a fresh
time-skipping test server and writes every history it wants kept to
tests/fixtures/histories/<name>.json. The committed files were recorded by the
code before the contracts refactor (332bdbc) and replay on today's code: that is
the point of them. Rerunning overwrites them, so record a new scenario under a
new name, and keep the old files while runs like them may still be open in
production; a deliberate change that breaks one needs a `workflow.patched` branch.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path

from temporalio import workflow
from temporalio.client import Client, WorkflowHandle
from temporalio.common import RetryPolicy
from temporalio.worker import Worker

from api.session_gateway import session_workflow_id
from contracts.learning import JudgeTurnInput, Method, NextState, judge_workflow_id
from contracts.session import EndSession
from contracts.training import (
    AckInput,
    BatchSize,
    CheckpointRequest,
    ClaimResult,
    PublishWeightsInput,
    StepSummary,
    TrainingInput,
    TrainInput,
    training_workflow_id,
)
from openclaw_rl.search_attributes import POLICY_VERSION
from tests.workflows.mocks import (
    JudgeActivities,
    SessionActivities,
    TrainerActivities,
    batch,
    eventually,
    fresh_env,
    learning_plan,
    main_turn,
    new_queue,
    next_run,
    reply_to,
    result_skipping_time,
    send_turn,
    session_input,
    side_turn,
    training_input,
)
from workflows.judge_turn import JudgeTurnWorkflow
from workflows.session import SessionWorkflow
from workflows.training import KEEP_LOSSES, TrainingWorkflow

HISTORIES = Path(__file__).resolve().parents[1] / "fixtures" / "histories"
SESSION_ID = "replayed"
"""Fixed ids: a replayed history must see the same workflow id as the recorded one (it names judge children and
archive keys)."""
TRAINING_POLICY = "replayed"


@workflow.defn(name="TrainingWorkflow", sandboxed=False)
class TrainingWorkflowBeforePatch(TrainingWorkflow):
    """TrainingWorkflow's step as it was before "skip-publish-of-all-stale-batch": every batch was published, stale
    or not.

    `_publishes` is the decision the patch changed; test_replay.py overrides it to get the patch without its guard.
    """

    @workflow.run
    async def run(self, inp: TrainingInput):
        return await super().run(inp)

    def _publishes(self, summary: StepSummary) -> bool:
        return True

    async def _step(self, claim: ClaimResult) -> None:
        q = self.config.trainer_task_queue
        summary: StepSummary = await workflow.execute_activity(
            "train_step",
            TrainInput(ids=claim.ids, version=self.state.version, max_staleness=self.config.max_staleness),
            result_type=StepSummary,
            task_queue=q,
            start_to_close_timeout=timedelta(seconds=self.config.step_timeout_s),
            heartbeat_timeout=timedelta(seconds=self.config.heartbeat_timeout_s),
            retry_policy=RetryPolicy(
                maximum_interval=timedelta(seconds=30), non_retryable_error_types=["SampleMissing"]
            ),
        )
        if self._publishes(summary):
            await workflow.execute_activity(
                "publish_weights",
                PublishWeightsInput(checkpoint=summary.checkpoint, version=summary.version),
                task_queue=q,
                start_to_close_timeout=timedelta(minutes=10),
                heartbeat_timeout=timedelta(seconds=self.config.heartbeat_timeout_s),
                retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=30)),
            )
        await workflow.execute_activity(
            "ack_batch", AckInput(ids=claim.ids), task_queue=q, start_to_close_timeout=timedelta(seconds=60)
        )
        self.waiting = 0
        self.state.samples_dropped_stale += summary.dropped_stale
        if not summary.trained:
            return
        self.state.version = summary.version
        self.state.steps += 1
        self.state.samples_trained += summary.trained
        self.state.last = summary
        self.state.recent_losses = (self.state.recent_losses + [summary.metrics.loss if summary.metrics else 0.0])[
            -KEEP_LOSSES:
        ]
        workflow.upsert_search_attributes([POLICY_VERSION.value_set(summary.version)])
        self._show_progress()


async def save(client: Client, name: str, workflow_id: str, run_id: str | None = None) -> None:
    """Write one run's history; its workflow id goes in the started event, where a real server puts it and the test
    server does not."""
    history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
    data = json.loads(history.to_json())
    data["events"][0]["workflowExecutionStartedEventAttributes"]["workflowId"] = workflow_id
    text = json.dumps(data, indent=1) + "\n"
    (HISTORIES / f"{name}.json").write_text(text)
    print(f"{name}.json: {len(history.events)} events, {len(text) // 1024} KiB ({workflow_id})")


async def run_ids(client: Client, workflow_id: str) -> list[str]:
    """Every run of a workflow that continued as new, oldest first."""
    run_id = (await client.get_workflow_handle(workflow_id).describe()).run_id
    runs = []
    while run_id:
        runs.insert(0, run_id)
        first = (await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()).events[0]
        run_id = first.workflow_execution_started_event_attributes.continued_execution_run_id
    return runs


async def session_paired_and_rolled() -> None:
    """Main and side turns, pairing, two continue-as-new rollovers, ended by the `end` signal; plus its judge
    children."""
    async with fresh_env() as env:
        q = new_queue()
        inp = session_input(q, SESSION_ID, turns_per_run=3, learning=learning_plan(q))
        wf_id = session_workflow_id(inp.user_id, inp.session_id)
        session, judge = SessionActivities(), JudgeActivities()
        async with Worker(
            env.client,
            task_queue=q,
            workflows=[SessionWorkflow, JudgeTurnWorkflow],
            activities=session.all() + judge.all(),
        ):
            handle = env.client.get_workflow_handle_for(SessionWorkflow.run, wf_id)
            await send_turn(env.client, inp, main_turn("t0"))
            run = (await handle.describe()).run_id
            await send_turn(env.client, inp, side_turn("t1"))
            await send_turn(env.client, inp, main_turn("t2", next_state=reply_to("t2")))
            run = await next_run(handle, run)
            await send_turn(env.client, inp, main_turn("t3", next_state=reply_to("t3")))
            await send_turn(env.client, inp, main_turn("t4", next_state=reply_to("t4")))
            await next_run(handle, run)
            await handle.signal(SessionWorkflow.end, EndSession())
            summary = await result_skipping_time(env, handle)
            assert (summary.runs, summary.turns, summary.paired, summary.closed_reason) == (3, 5, 3, "requested"), (
                summary
            )
            for index in (0, 4):
                await env.client.get_workflow_handle(judge_workflow_id(wf_id, index)).result()
            for n, run_id in enumerate(await run_ids(env.client, wf_id), start=1):
                await save(env.client, f"session_paired_and_rolled_run{n}", wf_id, run_id)
            await save(env.client, "judge_turn_binary", judge_workflow_id(wf_id, 0))
            await save(env.client, "judge_turn_binary_no_next_state", judge_workflow_id(wf_id, 4))


async def judge_turn_opd() -> None:
    """An OPD judge: hint votes, the accepted hint's teacher log-probs, and the publish."""
    async with fresh_env() as env:
        q = new_queue()
        session_key = session_workflow_id("tester", "opd")
        async with Worker(env.client, task_queue=q, workflows=[JudgeTurnWorkflow], activities=JudgeActivities().all()):
            inp = JudgeTurnInput(
                plan=learning_plan(q, Method.OPD, prm_votes=0, hint_votes=2),
                session_key=session_key,
                user_id="tester",
                session_id="opd",
                turn_id="t0",
                turn_index=0,
                policy_version="3",
                next_state=NextState(role="user", request_key=reply_to("t1").request_key, message_index=3),
            )
            outcome = await env.client.execute_workflow(
                JudgeTurnWorkflow.run, inp, id=judge_workflow_id(session_key, 0), task_queue=q
            )
            assert outcome.teacher is not None and outcome.judge.hint, outcome
            await save(env.client, "judge_turn_opd", judge_workflow_id(session_key, 0))


async def wait_acked(trainer: TrainerActivities, n: int) -> None:
    await eventually(lambda: len(trainer.acked) == n, what=f"batch {n} to be acknowledged")


async def training_steps() -> None:
    """A step, a checkpoint export, an all-stale batch (the patched branch), pause and resume, a batch-size change,
    another step."""
    async with fresh_env() as env:
        q = new_queue()
        trainer = TrainerActivities(stale={"2-0", "2-1"})
        wf_id = training_workflow_id(TRAINING_POLICY)
        async with Worker(env.client, task_queue=q, workflows=[TrainingWorkflow], activities=trainer.all()):
            handle: WorkflowHandle = await env.client.start_workflow(
                TrainingWorkflow.run, training_input(q), id=wf_id, task_queue=q
            )
            trainer.feed(batch("1-0", "1-1"))
            await wait_acked(trainer, 1)
            saved = await handle.execute_update(TrainingWorkflow.checkpoint, CheckpointRequest(label="first"))
            assert saved.version == 1, saved
            trainer.feed(batch("2-0", "2-1"))
            await wait_acked(trainer, 2)
            await eventually(lambda: len(trainer.claims) == 3, what="the claim after the stale batch")
            await handle.signal(TrainingWorkflow.pause)
            trainer.feed(batch("3-0", backlog=2))

            async def waiting_paused() -> bool:
                status = await handle.query(TrainingWorkflow.status)
                return status.paused and status.waiting_samples == 1

            await eventually(waiting_paused, what="the paused workflow to hold a short claim")
            await handle.signal(TrainingWorkflow.set_batch_size, BatchSize(batch_size=3))
            await handle.signal(TrainingWorkflow.resume)
            await eventually(lambda: len(trainer.claims) == 4, what="claiming to resume")
            trainer.feed(batch("3-0", "3-1", "3-2"))
            await wait_acked(trainer, 3)
            await eventually(lambda: len(trainer.claims) == 5, what="the claim after the last step")
            status = await handle.query(TrainingWorkflow.status)
            assert (status.version, status.steps, status.samples_dropped_stale, status.batch_size) == (2, 2, 2, 3), (
                status
            )
            assert trainer.published == [
                PublishWeightsInput(checkpoint="/ckpt/policy-1", version=1),
                PublishWeightsInput(checkpoint="/ckpt/policy-2", version=2),
            ]
            await handle.terminate("recorded")
            await save(env.client, "training_steps", wf_id)


async def training_all_stale_before_patch() -> None:
    """An all-stale batch as the code before the patch ran it: published (the same version again), then acknowledged."""
    async with fresh_env() as env:
        q = new_queue()
        trainer = TrainerActivities(stale={"1-0", "1-1"})
        wf_id = training_workflow_id(f"{TRAINING_POLICY}-before-patch")
        async with Worker(env.client, task_queue=q, workflows=[TrainingWorkflowBeforePatch], activities=trainer.all()):
            handle = await env.client.start_workflow(
                TrainingWorkflowBeforePatch.run, training_input(q), id=wf_id, task_queue=q
            )
            trainer.feed(batch("1-0", "1-1"))
            await wait_acked(trainer, 1)
            trainer.feed(batch("2-0", "2-1"))
            await wait_acked(trainer, 2)
            await eventually(lambda: len(trainer.claims) == 3, what="the claim after the second batch")
            assert trainer.calls[:4] == ["claim_batch", "train_step", "publish_weights", "ack_batch"], trainer.calls
            await handle.terminate("recorded")
            await save(env.client, "training_all_stale_before_patch", wf_id)


async def main() -> None:
    HISTORIES.mkdir(parents=True, exist_ok=True)
    for scenario in (session_paired_and_rolled, judge_turn_opd, training_steps, training_all_stale_before_patch):
        await scenario()
    # Let the Temporal core's threads drop their last Python objects: exiting at once sometimes aborts the interpreter.
    await asyncio.sleep(0.5)


if __name__ == "__main__":
    asyncio.run(main())
