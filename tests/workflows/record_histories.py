"""Record the workflow histories that test_replay.py replays: `python -m tests.workflows.record_histories`.

Each scenario runs the real workflows with the mock activities against a fresh
time-skipping test server and writes every history it wants kept to
tests/fixtures/histories/<name>.json. The session, judge and training files were
recorded by the code before the contracts refactor (332bdbc) and replay on
today's code: that is the point of them. The general-agent files (episode_*,
task_group_*, rollout_*: EpisodeWorkflow, TaskGroupWorkflow, RolloutWorkflow)
were recorded at 2e3d4b2, before those workflows' refactor, by the scenarios of
the same names. rollout_queued and rollout_mixed_queued are the exception: they
start a group when another finishes, which RolloutWorkflow could not do before
afd0721 (`pending` was a set and workflow.wait returns lists, so `pending.add`
failed the workflow task on the first refill), so they were recorded after that
fix to pending-as-list: on afd0721's workflows, with the move of
openclaw_rl.redis_keys to store.keys (bd4a488) in the working tree, which changes
no workflow's commands. training_from_memory was recorded on the branch that
publishes from memory (PUBLISH_FROM_MEMORY, 3db328a, with the samples_trained
bookkeeping of a loss in the working tree, which changes no command).
The progress files (progress_round, progress_report: a round of the progress schedule and one user's report) were
recorded on the workflow code that introduced them (2026-11-28). The evaluation files (evaluation_*:
EvaluationWorkflow, its task-group and episode children run but only the parent's history kept) were recorded on
main 2e1ff99's workflow code, the first histories of that workflow. canary_promoted (CanaryWorkflow) was recorded on
the workflow code that introduced it (2026-11-28).
Rerunning overwrites them, so name the scenarios to run
(`python -m tests.workflows.record_histories episode_steps rollout_tasks`; none
named: all of them), record a new scenario under a new name, and keep the old
files while runs like them may still be open in production; a deliberate change
that breaks one needs a `workflow.patched` branch.
"""

from __future__ import annotations

import asyncio
import json
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator

from temporalio import activity
from temporalio.client import Client, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from api.session_gateway import session_workflow_id
from contracts.canary import CanaryInput, DecideInput, Decision, RoundAnswers, RoundVerdicts
from contracts.canary import RoundInput as CanaryRoundInput
from contracts.episodes import (
    EnvRef,
    EpisodeInput,
    EpisodeResult,
    ListTasksInput,
    Outcome,
    RolloutInput,
    RolloutPart,
    RolloutProgress,
    TaskGroupInput,
    TaskGroupResult,
    TaskList,
    episode_workflow_id,
)
from contracts.errors import ErrorType
from contracts.evaluation import (
    EpisodeTasks,
    EpisodeTasksInput,
    EvalConfig,
    EvalInput,
    EvalPlan,
    EvalResult,
    EvaluateSetInput,
    PlanInput,
    RecordResult,
    SetScores,
)
from contracts.learning import JudgeTurnInput, Method, NextState, judge_workflow_id
from contracts.progress import (
    AnswersRef,
    ProgressInput,
    ProgressSummary,
    RoundInput,
    RoundResult,
    UsersWithHeldOut,
    Verdicts,
)
from contracts.session import EndSession
from contracts.training import (
    AckInput,
    BatchSize,
    CheckpointRequest,
    ClaimResult,
    TrainingStatus,
    training_workflow_id,
)
from contracts.user_files import (
    AdapterFolder,
    ExportedUserFiles,
    ForgottenUserFiles,
    TrainedSample,
    UserFilesInput,
    UserFilesRequest,
    UserFilesResult,
)
from openclaw_rl.search_attributes import of_task
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
    trainer_workers,
    training_input,
)
from workflows.canary import CanaryWorkflow
from workflows.episode import EpisodeWorkflow
from workflows.evaluation import EvaluationWorkflow
from workflows.judge_turn import JudgeTurnWorkflow
from workflows.progress import ProgressReportWorkflow, ProgressRoundWorkflow
from workflows.rollout import RolloutWorkflow
from workflows.session import SessionWorkflow
from workflows.task_group import TaskGroupWorkflow
from workflows.training import TrainingWorkflow
from workflows.user_files import UserFilesWorkflow

HISTORIES = Path(__file__).resolve().parents[1] / "fixtures" / "histories"
SESSION_ID = "replayed"
"""Fixed ids: a replayed history must see the same workflow id as the recorded one (it names judge children and
archive keys)."""
TRAINING_POLICY = "replayed"
GROUP_ID = "replayed"
ROLLOUT_ID = "replayed"
EVAL_ID = "replayed"


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


# judge_turn_votes_*.json (retired/) and judge_turn_retired_*.json were recorded on the builds that added and then
# deprecated the `judge-votes-in-one-activity` patch (2026-11-28); that code is gone, so they are kept as recorded.


async def judge_turn_judged_and_published() -> None:
    """The same two judges with the call of the retired patch gone and plans that ask for `judge_and_publish`
    (2026-11-28): the binary one is that one activity; the combined one's hint is accepted, so it votes (without
    publishing), scores the hint, then publishes; a combined one whose hint is too short is one activity again."""
    await _judges_voting_in_one("judge_turn_now", judge_and_publish=True)
    await _judges_voting_in_one(
        "judge_turn_now", judge_and_publish=True, judges=JudgeActivities(hint="short"), kinds=(("no_hint", 1),)
    )


async def _judges_voting_in_one(
    prefix: str,
    judge_and_publish: bool = False,
    judges: JudgeActivities | None = None,
    kinds: tuple[tuple[str, int], ...] = (("binary", 0), ("in_one", 1)),
) -> None:
    """Judges with three PRM votes, binary (0 hint votes) or combined (1), each saved as `<prefix>_<name>`."""
    async with fresh_env() as env:
        q = new_queue()
        judges = judges or JudgeActivities()
        async with Worker(env.client, task_queue=q, workflows=[JudgeTurnWorkflow], activities=judges.all()):
            for name, hints in kinds:
                method = Method.COMBINED if hints else Method.BINARY
                session_key = session_workflow_id("tester", f"votes-{name}")
                inp = JudgeTurnInput(
                    plan=learning_plan(q, method, prm_votes=3, hint_votes=hints, judge_and_publish=judge_and_publish),
                    session_key=session_key,
                    user_id="tester",
                    session_id=f"votes-{name}",
                    turn_id="t0",
                    turn_index=0,
                    policy_version="3",
                    next_state=NextState(role="user", request_key=reply_to("t1").request_key, message_index=3),
                )
                outcome = await env.client.execute_workflow(
                    JudgeTurnWorkflow.run, inp, id=judge_workflow_id(session_key, 0), task_queue=q
                )
                assert outcome.judge.prm_votes == [1, 1, -1], outcome
                assert (outcome.teacher is not None) == (outcome.judge.hint is not None) == (name == "in_one"), outcome
                await save(env.client, f"{prefix}_{name}", judge_workflow_id(session_key, 0))


async def wait_acked(trainer: TrainerActivities, n: int) -> None:
    await eventually(lambda: len(trainer.acked) == n, what=f"batch {n} to be acknowledged")


async def training_steps() -> None:
    """A step (its version served from the trainer's memory), a checkpoint export, an all-stale batch (acknowledged,
    no version, the version served again), pause and resume, a batch-size change, another step. Recorded after the
    loop's patches were deprecated (2026-11-28): their markers come marked so."""
    async with fresh_env() as env:
        q = new_queue()
        trainer = TrainerActivities(stale={"2-0", "2-1"})
        wf_id = training_workflow_id(TRAINING_POLICY)
        async with Worker(env.client, task_queue=q, workflows=[TrainingWorkflow], activities=trainer.all()):
            handle: WorkflowHandle = await env.client.start_workflow(
                TrainingWorkflow.run, training_input(q), id=wf_id, task_queue=q
            )

            async def status() -> TrainingStatus:
                return await handle.query(TrainingWorkflow.status)

            trainer.feed(batch("1-0", "1-1"))
            await eventually(lambda: len(trainer.versions_published) == 1, what="version 1")
            saved = await handle.execute_update(TrainingWorkflow.checkpoint, CheckpointRequest(label="first"))
            assert saved.version == 1, saved
            trainer.feed(batch("2-0", "2-1"))
            await wait_acked(trainer, 1)
            await eventually(lambda: len(trainer.claims) == 3, what="the claim after the stale batch")
            await handle.signal(TrainingWorkflow.pause)
            trainer.feed(batch("3-0", backlog=2))

            async def waiting_paused() -> bool:
                s = await status()
                return s.paused and s.waiting_samples == 1

            await eventually(waiting_paused, what="the paused workflow to hold a short claim")
            await handle.signal(TrainingWorkflow.set_batch_size, BatchSize(batch_size=3))
            await handle.signal(TrainingWorkflow.resume)
            await eventually(lambda: len(trainer.claims) == 4, what="claiming to resume")
            trainer.feed(batch("3-0", "3-1", "3-2"))
            await eventually(lambda: len(trainer.claims) == 5, what="the claim after the last step")
            s = await status()
            assert (s.version, s.steps, s.samples_dropped_stale, s.batch_size) == (2, 2, 2, 3), s
            assert [p.version for p in trainer.versions_published] == [1, 1, 2], trainer.versions_published
            assert trainer.acked == [AckInput(ids={"test": ["2-0", "2-1"]})]  # the others wait for a checkpoint
            await handle.terminate("recorded")
            await save(env.client, "training_steps", wf_id)


async def training_claim_drops() -> None:
    """Claims that drop a stale backlog themselves (activities.stale_screen): version 1, then a claim that dropped
    3 stale samples and brought nothing fresh (counted, the version served again), then one that dropped 2 and
    brought a full batch (counted, trained as version 2). Recorded 2026-11-29, on the build that added it."""
    async with fresh_env() as env:
        q = new_queue()
        trainer = TrainerActivities()
        wf_id = training_workflow_id(f"{TRAINING_POLICY}-claim-drops")
        async with trainer_workers(env, q, trainer):
            handle: WorkflowHandle = await env.client.start_workflow(
                TrainingWorkflow.run, training_input(q), id=wf_id, task_queue=q
            )
            trainer.feed(batch("1-0", "1-1"))
            await eventually(lambda: len(trainer.versions_published) == 1, what="version 1")
            trainer.feed(ClaimResult(ids={}, dropped_stale=3))
            await eventually(lambda: len(trainer.claims) == 3, what="the claim after the drops")
            trainer.feed(ClaimResult(ids={"test": ["4-0", "4-1"]}, dropped_stale=2))
            await eventually(lambda: len(trainer.versions_published) == 3, what="version 2")
            await eventually(lambda: len(trainer.claims) == 4, what="the claim after version 2")
            status = await handle.query(TrainingWorkflow.status)
            assert (status.version, status.samples_dropped_stale, status.steps) == (2, 5, 2), status
            assert [p.version for p in trainer.versions_published] == [1, 1, 2], trainer.versions_published
            await handle.terminate("recorded")
            await save(env.client, "training_claim_drops", wf_id)


async def training_from_memory() -> None:
    """Publishing from memory (the PUBLISH_FROM_MEMORY branch), a durable checkpoint every 2 versions: versions 1
    and 2 published from the trainer's memory on its own queue, the checkpoint of version 2 started, finished and
    confirmed (its batches acknowledged there), version 3, then a TrainerLost at the next step: back to checkpoint
    2 (attached again, the next trainer asked for a newer confirmed checkpoint (none), the lost batch claimed again,
    trained from it as version 4), and the checkpoint of 4. Recorded after the loop's patches were deprecated."""
    async with fresh_env() as env:
        q = new_queue()
        trainer = TrainerActivities()
        wf_id = training_workflow_id(f"{TRAINING_POLICY}-from-memory")
        async with trainer_workers(env, q, trainer):
            handle: WorkflowHandle = await env.client.start_workflow(
                TrainingWorkflow.run, training_input(q, checkpoint_every_versions=2), id=wf_id, task_queue=q
            )

            async def durable_at(version: int) -> bool:
                return (await handle.query(TrainingWorkflow.status)).durable_version == version

            b1, b2, b3, b4 = (batch(f"{n}-0", f"{n}-1") for n in (1, 2, 3, 4))
            trainer.feed(b1)
            trainer.feed(b2)
            await eventually(lambda: durable_at(2), what="the durable checkpoint of version 2")
            trainer.feed(b3)
            await eventually(lambda: len(trainer.claims) == 4, what="the claim after version 3")
            trainer.inject("train_step", ErrorType.TRAINER_LOST)
            trainer.feed(b4)
            await eventually(lambda: len(trainer.claims) == 5, what="the claim after the loss")
            trainer.feed(b3)
            await eventually(lambda: durable_at(4), what="the durable checkpoint of version 4")
            await eventually(lambda: len(trainer.claims) == 6, what="the claim after it")
            status = await handle.query(TrainingWorkflow.status)
            assert (status.version, status.trainer_lost, status.durable_version) == (4, 1, 4), status
            assert trainer.count("find_resume_point") == 3 and trainer.acked == [], trainer.calls
            assert [c.checkpoint.version for c in trainer.confirmed] == [2, 4], trainer.confirmed
            await handle.terminate("recorded")
            await save(env.client, "training_from_memory", wf_id)


# ---- general-agent episodes: EpisodeWorkflow, TaskGroupWorkflow, RolloutWorkflow ------------------------------


def episode_mocks():
    """test_episode_workflows.py's mock pools and episode config, imported only when recording: test_replay.py
    imports this module to replay, and replaying must not depend on the episode tests' mocks."""
    from tests.workflows.test_episode_workflows import Pools, config

    return Pools, config


@activity.defn(name="env_outcome")
async def first_episode_solves(inp: EnvRef) -> Outcome:
    """Episode 0 of a group solves its task and the others do not, so the group's step buckets vary and it
    publishes (as in test_task_group_mixing_outcomes_publishes_one_sample_per_step)."""
    return Outcome(outcome=1.0 if inp.attempt_key.split("/")[-1].startswith("0") else 0.0)


@activity.defn(name="list_tasks")
async def list_tasks(inp: ListTasksInput) -> TaskList:
    return TaskList(task_ids=[f"{inp.setting}-listed"])


@asynccontextmanager
async def pool_workers(env, pools, q: str, workflows: list, env_outcome=None) -> AsyncIterator[None]:
    """The workflows and the shared pools on `q`, env_open on the shared env queue, the rest on the worker's queue."""
    on_worker = [pools.env_step, env_outcome or pools.env_outcome, pools.env_close, pools.env_finish]
    async with (
        Worker(env.client, task_queue=q, workflows=workflows, activities=pools.shared()),
        Worker(env.client, task_queue=pools.env_queue, activities=[pools.env_open, list_tasks]),
        Worker(env.client, task_queue=pools.worker_queue, activities=on_worker),
    ):
        yield


async def episode_steps() -> None:
    """Three steps on the env worker that opened the environment, one step vote each, the outcome and the close."""
    await _record_episode_steps("episode_steps", "episode/solve-replayed", now=False)


async def _record_episode_steps(name: str, wf_id: str, now: bool, in_one: bool = False) -> None:
    """`now`: as `control.episodes` started an episode from `attributes_at_start_and_end`: its setting and task
    come with the start, its policy version with the outcome in the one upsert at the end. `in_one`: as it starts
    one today, also `finish_in_one` and `votes_in_one`."""
    Pools, config = episode_mocks()
    async with fresh_env() as env:
        q, env_q = new_queue(), new_queue()
        pools = Pools(env_q, new_queue())
        pools.steps_by_task["solve"] = 3
        flags = {"attributes_at_start_and_end": now, "finish_in_one": in_one, "votes_in_one": in_one}
        cfg = config(q, env_q).model_copy(update=flags)
        async with pool_workers(env, pools, q, [EpisodeWorkflow]):
            result: EpisodeResult = await env.client.execute_workflow(
                EpisodeWorkflow.run,
                EpisodeInput(setting="terminal", task_id="t1", config=cfg),
                id=wf_id,
                task_queue=q,
                search_attributes=of_task("terminal", "t1") if now else None,
            )
            assert (result.outcome, result.end, result.attempt) == (1.0, "submitted", 1), result
            assert [s.votes for s in result.steps] == [[1], [-1], [1]], result.steps
            await save(env.client, name, wf_id)


async def episode_env_lost() -> None:
    """The first env worker is lost (its queue goes unpolled: env_step's schedule-to-start times out after 1 s, in
    real time); the episode starts over from env_open under attempt 2 and finishes there."""
    Pools, config = episode_mocks()
    async with fresh_env() as env:
        q, env_q = new_queue(), new_queue()
        pools = Pools(env_q, new_queue(), lose_first_open=True)
        wf_id = "episode/solve-replayed-lost"
        async with pool_workers(env, pools, q, [EpisodeWorkflow]):
            result: EpisodeResult = await env.client.execute_workflow(
                EpisodeWorkflow.run,
                EpisodeInput(setting="terminal", task_id="t1", config=config(q, env_q)),
                id=wf_id,
                task_queue=q,
            )
            assert (result.attempt, result.outcome) == (2, 1.0), result
            assert [o.attempt_key.rsplit(":", 1)[1] for o in pools.opens] == ["a1", "a2"], pools.opens
            await save(env.client, "episode_env_lost", wf_id)


async def episode_steps_now() -> None:
    """episode_steps as `control.episodes` starts an episode now (`attributes_at_start_and_end`)."""
    await _record_episode_steps("episode_steps_now", "episode/solve-replayed-now", now=True)


async def episode_steps_in_one() -> None:
    """episode_steps as `control.episodes` starts an episode today: attributes with the start and the end, the
    outcome and the close in one call (env_finish), the steps' votes in one (step_votes)."""
    await _record_episode_steps("episode_steps_in_one", "episode/solve-replayed-in-one", now=True, in_one=True)


async def task_group_published_now() -> None:
    """task_group_published as `control.episodes` starts a group now (`attributes_at_start_and_end`): the group and
    its episodes get their setting and task with their starts."""
    await _record_task_group("task_group_published_now", now=True)


async def task_group_published() -> None:
    """Two episodes of one task as children (one solves it), then their step samples published once; plus the
    history of child episode 0."""
    await _record_task_group("task_group_published", now=False)


async def _record_task_group(name: str, now: bool) -> None:
    Pools, config = episode_mocks()
    async with fresh_env() as env:
        q, env_q = new_queue(), new_queue()
        pools = Pools(env_q, new_queue())
        wf_id = f"group/{GROUP_ID}"
        cfg = config(q, env_q).model_copy(update={"attributes_at_start_and_end": now})
        async with pool_workers(env, pools, q, [EpisodeWorkflow, TaskGroupWorkflow], first_episode_solves):
            result: TaskGroupResult = await env.client.execute_workflow(
                TaskGroupWorkflow.run,
                TaskGroupInput(group_id=GROUP_ID, setting="terminal", task_id="t1", samples=2, config=cfg),
                id=wf_id,
                task_queue=q,
                search_attributes=of_task("terminal", "t1") if now else None,
            )
            assert sorted(result.outcomes) == [0.0, 1.0] and result.published == 6, result
            assert len(pools.published) == 1, pools.published
            await save(env.client, name, wf_id)
            await save(env.client, f"{name}_episode0", episode_workflow_id(GROUP_ID, 0))


async def rollout_tasks() -> None:
    """Two tasks, two episodes each, room for both groups at once; each group publishes its step samples.

    Not a refill (a group started when another finishes): at 2e3d4b2 that fails RolloutWorkflow's workflow task
    over and over (workflow.wait returns lists, and the loop calls `pending.add`), so no such history can be
    recorded there; the same holds for the mixed rollout below. rollout_queued and rollout_mixed_queued record
    refills on the code after the fix (afd0721)."""
    Pools, config = episode_mocks()
    async with fresh_env() as env:
        q, env_q = new_queue(), new_queue()
        pools = Pools(env_q, new_queue())
        wf_id = f"rollout/{ROLLOUT_ID}"
        workflows = [EpisodeWorkflow, TaskGroupWorkflow, RolloutWorkflow]
        async with pool_workers(env, pools, q, workflows, first_episode_solves):
            inp = RolloutInput(
                rollout_id=ROLLOUT_ID,
                setting="terminal",
                task_ids=["t1", "t2"],
                samples_per_task=2,
                parallel=4,
                config=config(q, env_q),
            )
            progress: RolloutProgress = await env.client.execute_workflow(
                RolloutWorkflow.run, inp, id=wf_id, task_queue=q
            )
            assert (progress.groups_done, progress.episodes_done, progress.published) == (2, 4, 12), progress
            assert progress.mean_outcome == 0.5, progress
            await save(env.client, "rollout_tasks", wf_id)


async def rollout_mixed() -> None:
    """A mixed rollout: a terminal part of two tasks (two episodes each) and a toolcall part whose tasks are listed
    (one episode each, its own config), interleaved round-robin; room for all five episodes at once."""
    Pools, config = episode_mocks()
    async with fresh_env() as env:
        q, env_q = new_queue(), new_queue()
        pools = Pools(env_q, new_queue())
        wf_id = f"rollout/{ROLLOUT_ID}-mixed"
        workflows = [EpisodeWorkflow, TaskGroupWorkflow, RolloutWorkflow]
        async with pool_workers(env, pools, q, workflows, first_episode_solves):
            inp = RolloutInput(
                rollout_id=f"{ROLLOUT_ID}-mixed",
                parts=[
                    RolloutPart(setting="terminal", task_ids=["t1", "t2"]),
                    RolloutPart(setting="toolcall", samples_per_task=1, config=config(q, env_q)),
                ],
                samples_per_task=2,
                parallel=5,
                config=config(q, env_q),
            )
            progress: RolloutProgress = await env.client.execute_workflow(
                RolloutWorkflow.run, inp, id=wf_id, task_queue=q
            )
            assert (progress.groups_done, progress.episodes_done) == (3, 5), progress
            assert progress.setting == "terminal+toolcall" and progress.per_setting["toolcall"].groups_done == 1
            await save(env.client, "rollout_mixed", wf_id)


async def rollout_queued() -> None:
    """More groups than slots (recorded after the fix that keeps `pending` as a list, afd0721): three tasks, two
    episodes each, parallel 2, so one group at a time, each started when the one before it finishes."""
    Pools, config = episode_mocks()
    async with fresh_env() as env:
        q, env_q = new_queue(), new_queue()
        pools = Pools(env_q, new_queue())
        wf_id = f"rollout/{ROLLOUT_ID}-queued"
        workflows = [EpisodeWorkflow, TaskGroupWorkflow, RolloutWorkflow]
        async with pool_workers(env, pools, q, workflows, first_episode_solves):
            inp = RolloutInput(
                rollout_id=f"{ROLLOUT_ID}-queued",
                setting="terminal",
                task_ids=["t1", "t2", "t3"],
                samples_per_task=2,
                parallel=2,
                config=config(q, env_q),
            )
            progress: RolloutProgress = await env.client.execute_workflow(
                RolloutWorkflow.run, inp, id=wf_id, task_queue=q
            )
            assert (progress.groups_done, progress.episodes_done, progress.published) == (3, 6, 18), progress
            assert [o.task_id for o in pools.opens] == ["t1", "t1", "t2", "t2", "t3", "t3"], pools.opens
            await save(env.client, "rollout_queued", wf_id)


async def rollout_mixed_queued() -> None:
    """A mixed rollout whose groups do not all fit at once (recorded after the fix that keeps `pending` as a list,
    afd0721): terminal t1, t2 (two episodes each) and toolcall c1, c2 (one each) interleaved, in 3 episodes; g0 and
    g1 start together, g2 and g3 as groups finish."""
    Pools, config = episode_mocks()
    async with fresh_env() as env:
        q, env_q = new_queue(), new_queue()
        pools = Pools(env_q, new_queue())
        wf_id = f"rollout/{ROLLOUT_ID}-mixed-queued"
        workflows = [EpisodeWorkflow, TaskGroupWorkflow, RolloutWorkflow]
        async with pool_workers(env, pools, q, workflows, first_episode_solves):
            inp = RolloutInput(
                rollout_id=f"{ROLLOUT_ID}-mixed-queued",
                parts=[
                    RolloutPart(setting="terminal", task_ids=["t1", "t2"]),
                    RolloutPart(setting="toolcall", task_ids=["c1", "c2"], samples_per_task=1),
                ],
                samples_per_task=2,
                parallel=3,
                config=config(q, env_q),
            )
            progress: RolloutProgress = await env.client.execute_workflow(
                RolloutWorkflow.run, inp, id=wf_id, task_queue=q
            )
            assert (progress.groups_done, progress.episodes_done) == (4, 6), progress
            assert progress.per_setting["toolcall"].groups_done == 2, progress
            await save(env.client, "rollout_mixed_queued", wf_id)


# ---- evaluation: EvaluationWorkflow ----------------------------------------------------------------------------


class EvalActivities:
    """Mock evaluation activities: version 3 is served and no set has scores for it; `moved` sets answer with other
    weights (EVAL_VERSION_MOVED)."""

    def __init__(self, moved: frozenset[str] = frozenset()):
        self.moved = moved
        self.recorded: list[SetScores] = []

    @activity.defn(name="eval_plan")
    async def eval_plan(self, inp: PlanInput) -> EvalPlan:
        return EvalPlan(version=3, sets=list(inp.sets), last_evaluated=1)

    @activity.defn(name="evaluate_set")
    async def evaluate_set(self, inp: EvaluateSetInput) -> SetScores:
        if inp.set in self.moved:
            raise ApplicationError(
                f"version {inp.version} was to be evaluated, but the policy servers answered with ['4']",
                type=ErrorType.EVAL_VERSION_MOVED,
                non_retryable=True,
            )
        metric = "accuracy" if inp.set.startswith("user-") else "score"
        return SetScores(set=inp.set, version=inp.version, metrics={metric: 0.75}, count=4, served_version="3", at=1.0)

    @activity.defn(name="eval_episode_tasks")
    async def eval_episode_tasks(self, inp: EpisodeTasksInput) -> EpisodeTasks:
        return EpisodeTasks(task_ids=["solve", "fail"][: inp.count])

    @activity.defn(name="record_eval_scores")
    async def record_eval_scores(self, scores: SetScores) -> RecordResult:
        self.recorded.append(scores)
        return RecordResult(recorded=True)

    def all(self) -> list:
        return [self.eval_plan, self.evaluate_set, self.eval_episode_tasks, self.record_eval_scores]


def eval_input(q: str, env_q: str, sets: list[str]) -> EvalInput:
    _, config = episode_mocks()
    episode = config(q, env_q).model_copy(update={"prm_votes": 0})  # as control.evaluation: no step votes
    return EvalInput(
        config=EvalConfig(
            sets=sets,
            every_versions=2,
            policy_task_queue=q,
            episodes={"terminal": episode},
            episode_tasks=2,
            episode_samples=1,
            episode_parallel=2,
        )
    )


async def evaluation_sets_and_episodes() -> None:
    """Version 3 (a multiple of 2 crossed since version 1): two answer sets scored and recorded, then the terminal
    setting's two held-out tasks as child task groups that publish nothing (one solves its task), their mean outcome
    recorded."""
    Pools, _ = episode_mocks()
    async with fresh_env() as env:
        q, env_q = new_queue(), new_queue()
        pools, evals = Pools(env_q, new_queue()), EvalActivities()
        wf_id = f"eval/{EVAL_ID}"
        async with (
            pool_workers(env, pools, q, [EvaluationWorkflow, TaskGroupWorkflow, EpisodeWorkflow]),
            Worker(env.client, task_queue=f"{q}-eval", activities=evals.all()),
        ):
            inp = eval_input(f"{q}-eval", env_q, ["personalization-student", "user-support", "episodes-terminal"])
            inp.config.episodes["terminal"] = inp.config.episodes["terminal"].model_copy(
                update={"policy_task_queue": q, "judge_task_queue": q}
            )
            result: EvalResult = await env.client.execute_workflow(EvaluationWorkflow.run, inp, id=wf_id, task_queue=q)
            assert result.skipped is None and [s.set for s in result.scores] == [
                "personalization-student",
                "user-support",
                "episodes-terminal",
            ], result
            assert result.scores[-1].metrics == {"success": 0.5} and pools.published == [], result
            assert [s.set for s in evals.recorded] == [s.set for s in result.scores], evals.recorded
            await save(env.client, "evaluation_sets_and_episodes", wf_id)


async def evaluation_moved_on() -> None:
    """The first set is scored and recorded; the second was answered by other weights: the run ends as `version 3
    moved on` and records nothing more."""
    async with fresh_env() as env:
        q = new_queue()
        evals = EvalActivities(moved=frozenset({"user-support"}))
        wf_id = f"eval/{EVAL_ID}-moved-on"
        async with Worker(env.client, task_queue=q, workflows=[EvaluationWorkflow], activities=evals.all()):
            inp = eval_input(q, new_queue(), ["personalization-student", "user-support"])
            result: EvalResult = await env.client.execute_workflow(EvaluationWorkflow.run, inp, id=wf_id, task_queue=q)
            assert result.skipped == "version 3 moved on" and len(evals.recorded) == 1, result
            await save(env.client, "evaluation_moved_on", wf_id)


# ---- a user's files: UserFilesWorkflow --------------------------------------------------------------------------


@activity.defn(name="export_user_files")
async def export_user_files(inp: UserFilesInput) -> ExportedUserFiles:
    return ExportedUserFiles(
        trained=[TrainedSample(sample_id=f"session/{inp.tenant}/s@r#0", versions=[1])],
        adapter_versions=[AdapterFolder(version="v1", path="/adapters/v1", created_at="2026-11-28T00:00:00Z")],
    )


@activity.defn(name="forget_user_files")
async def forget_user_files(inp: UserFilesInput) -> ForgottenUserFiles:
    return ForgottenUserFiles(trained_lines=2, adapter_versions=["v1"] if inp.adapters else [])


@activity.defn(name="forget_judgement_lines")
async def forget_judgement_lines(inp: UserFilesInput) -> int:
    return 3


async def user_files() -> None:
    """An export (trainer pool) and a forget (trainer and judge pools at once) of one user's files."""
    async with fresh_env() as env:
        q, trainer_q, judge_q = new_queue(), new_queue(), new_queue()
        files = UserFilesInput(tenant="u-replayed", user_digest="d" * 32, adapters=True)
        async with (
            Worker(env.client, task_queue=q, workflows=[UserFilesWorkflow]),
            Worker(env.client, task_queue=trainer_q, activities=[export_user_files, forget_user_files]),
            Worker(env.client, task_queue=judge_q, activities=[forget_judgement_lines]),
        ):
            for action in ("export", "forget"):
                wf_id = f"user-files/u-replayed/{action}-replayed"
                req = UserFilesRequest(action=action, files=files, trainer_queue=trainer_q, judge_queue=judge_q)
                out: UserFilesResult = await env.client.execute_workflow(
                    UserFilesWorkflow.run, req, id=wf_id, task_queue=q
                )
                assert (out.exported or out.forgotten) is not None, out
                await save(env.client, f"user_files_{action}", wf_id)


# ---- a user's progress report: ProgressRoundWorkflow and its ProgressReportWorkflow children ---------------------


@activity.defn(name="progress_users")
async def progress_users(inp: RoundInput) -> UsersWithHeldOut:
    return UsersWithHeldOut(tenants=["u-reported", "u-nothing-new"])


@activity.defn(name="progress_answers")
async def progress_answers(inp: ProgressInput) -> AnswersRef:
    if inp.tenant == "u-nothing-new":
        return AnswersRef(tenant=inp.tenant, version="4", skipped="nothing new since the last report")
    return AnswersRef(tenant=inp.tenant, key=f"oc:user:{inp.tenant}:progress-answers:r1", version="4", turns=6)


@activity.defn(name="progress_judge")
async def progress_judge(ref: AnswersRef) -> ProgressSummary:
    return ProgressSummary(
        tenant=ref.tenant,
        served_version=ref.version,
        judged=ref.turns,
        win_rate_vs_first=0.75,
        win_rate_vs_previous=0.5,
    )


async def progress_round() -> None:
    """A round of the progress schedule: two users with held-out turns, one reported on (answers on the policy
    queue, judging on the judge queue), one with nothing new since its last report."""
    async with fresh_env() as env:
        q, policy_q, judge_q = new_queue(), new_queue(), new_queue()
        async with (
            Worker(env.client, task_queue=q, workflows=[ProgressRoundWorkflow, ProgressReportWorkflow]),
            Worker(env.client, task_queue=policy_q, activities=[progress_answers]),
            Worker(env.client, task_queue=judge_q, activities=[progress_users, progress_judge]),
        ):
            wf_id = "progress/openclaw-rl/round-replayed"
            inp = RoundInput(max_turns=8, policy_task_queue=policy_q, judge_task_queue=judge_q, parallel=2)
            out: RoundResult = await env.client.execute_workflow(ProgressRoundWorkflow.run, inp, id=wf_id, task_queue=q)
            assert (out.users, out.reports, out.skipped, out.failed) == (2, 1, 1, 0), out
            await save(env.client, "progress_round", wf_id)
            await save(env.client, "progress_report", "progress/u-reported")


# ---- a user's canary: CanaryWorkflow ------------------------------------------------------------------------------

CANARY_ROUNDS = [0, 3, 2]
"""New turns per round of the recorded canary: none yet, then three, then two (five wins: promoted)."""


CANARY_CALLS: list[int] = []


@activity.defn(name="canary_answers")
async def canary_answers(inp: CanaryRoundInput) -> RoundAnswers:
    new = CANARY_ROUNDS[min(len(CANARY_CALLS), len(CANARY_ROUNDS) - 1)]
    CANARY_CALLS.append(new)
    key = f"oc:canary:{inp.tenant}:v3:pairs:r1:{inp.cursor}" if new else ""
    return RoundAnswers(tenant=inp.tenant, status="judging", version=3, key=key, cursor=inp.cursor + new, turns=new)


@activity.defn(name="canary_judge")
async def canary_judge(ref: RoundAnswers) -> RoundVerdicts:
    win = Verdicts(new_first="new", old_first="new")
    return RoundVerdicts(turn_ids=[f"t{ref.cursor - i}" for i in range(ref.turns)], verdicts=[win] * ref.turns)


@activity.defn(name="canary_decide")
async def canary_decide(inp: DecideInput) -> Decision:
    verdict = "promoted" if inp.promote else "rolled back"
    return Decision(tenant=inp.tenant, version=inp.version, verdict=verdict, reason=inp.reason, evidence=inp.evidence)


async def canary_promoted() -> None:
    """A user's candidate (version 3): a round with no new turn, then two rounds of wins (answers on the policy queue,
    judging and the decision on the judge queue): promoted after five."""
    async with fresh_env() as env:
        q, policy_q, judge_q = new_queue(), new_queue(), new_queue()
        async with (
            Worker(env.client, task_queue=q, workflows=[CanaryWorkflow]),
            Worker(env.client, task_queue=policy_q, activities=[canary_answers]),
            Worker(env.client, task_queue=judge_q, activities=[canary_judge, canary_decide]),
        ):
            wf_id = "canary/u-canary-replayed"
            inp = CanaryInput(
                tenant="u-canary-replayed", policy_task_queue=policy_q, judge_task_queue=judge_q, share=0.25,
                max_turns=40, worse=0.35, alpha=0.05, beta=0.10, wait_s=1.0,
            )  # fmt: skip
            out: Decision = await env.client.execute_workflow(CanaryWorkflow.run, inp, id=wf_id, task_queue=q)
            assert out.verdict == "promoted" and out.evidence.wins == 5, out
            await save(env.client, "canary_promoted", wf_id)


SCENARIOS = (
    session_paired_and_rolled,
    judge_turn_opd,
    judge_turn_judged_and_published,
    training_steps,
    training_from_memory,
    training_claim_drops,
    episode_steps,
    episode_steps_now,
    episode_steps_in_one,
    episode_env_lost,
    task_group_published,
    task_group_published_now,
    rollout_tasks,
    rollout_mixed,
    rollout_queued,
    rollout_mixed_queued,
    evaluation_sets_and_episodes,
    evaluation_moved_on,
    user_files,
    progress_round,
    canary_promoted,
)


async def main(names: list[str]) -> None:
    by_name = {s.__name__: s for s in SCENARIOS}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise SystemExit(f"unknown scenario(s) {unknown}; known: {sorted(by_name)}")
    HISTORIES.mkdir(parents=True, exist_ok=True)
    for scenario in [by_name[n] for n in names] or SCENARIOS:
        await scenario()
    # Let the Temporal core's threads drop their last Python objects: exiting at once sometimes aborts the interpreter.
    await asyncio.sleep(0.5)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
