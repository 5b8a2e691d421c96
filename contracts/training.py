"""The TrainingWorkflow: its input, state, status, signals and update, and the trainer pool's activities."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from pydantic import BaseModel, Field, field_validator

from contracts.activity import ActivityDef, Retry
from contracts.errors import ErrorType

TRAINING_WORKFLOW = "TrainingWorkflow"
CHECKPOINT_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
"""A saved checkpoint's name under checkpoints/saved/."""


def training_workflow_id(policy: str) -> str:
    return f"training/{policy}"


class StepMetrics(BaseModel):
    step: int
    samples: int
    tokens: int
    """Learned (masked-in) response tokens."""
    loss: float
    pg_loss: float
    kl: float
    entropy: float
    clip_fraction: float
    approx_kl: float
    mean_advantage: float
    logprob_gap: float
    """Mean |train log-prob - rollout log-prob| before the update: how far the trainer's view of the policy is
    from the server's."""
    grad_norm: float
    tokens_per_s: float
    tis_weight: float = 1.0
    """Mean truncated-importance weight (1 when TIS is off)."""
    tis_truncated: float = 0.0
    step_s: float | None = None
    """Wall time of the optimizer step alone (forward, backward, update); None in steps recorded before it was."""


class ClaimInput(BaseModel):
    consumer: str
    batch_size: int
    source_weights: dict[str, float]
    wait_s: float
    skip: dict[str, list[str]] = Field(default_factory=dict)
    """Entries trained into versions no durable checkpoint holds yet: still pending (unacknowledged), never claimed
    again unless the trainer loses them."""


class ClaimResult(BaseModel):
    ids: dict[str, list[str]] = Field(default_factory=dict)
    """Stream entry ids per source, pending for this consumer until acknowledged."""
    backlog: int = 0
    """Samples published but not yet claimed, over all sources (the training lag)."""

    @property
    def count(self) -> int:
        return sum(len(v) for v in self.ids.values())


class TrainInput(BaseModel):
    ids: dict[str, list[str]]
    version: int
    """The policy version being trained from (its checkpoint, or the served model for 0)."""
    max_staleness: int
    durable_version: int | None = None
    """Set by workflows that publish from memory: the newest durable checkpoint they know of (0: the base model).
    The step then writes nothing to disk; None (older runs): every step writes a checkpoint of its version."""
    from_durable: bool = False
    """The trainer lost the versions since `durable_version` (TrainerLost): start again from that checkpoint,
    labelled `version`, so version numbers keep growing."""


class StepSummary(BaseModel):
    version: int
    """The version this step produced."""
    checkpoint: str
    batch: str
    """Digest of the batch's entry ids (a retried step recognises its own checkpoint)."""
    trained: int
    dropped_stale: int
    metrics: StepMetrics | None = None
    """None when the whole batch was stale (no step ran)."""
    sample_ids: list[str] = Field(default_factory=list)
    """The trained samples' ids (`<session>#<turn>`): the audit trail of exactly-once training."""
    stale_ids: list[str] = Field(default_factory=list)
    """Samples dropped because their policy version lagged more than `max_staleness` behind."""
    missing: dict[str, list[str]] = Field(default_factory=dict)
    """Entries of the batch gone from their sample stream when the step read them (source -> entry ids): dropped,
    never trained, acknowledged with the batch (a forgotten user's are skipped and not listed)."""
    in_memory: bool = False
    """The version lives in the trainer's memory only (no checkpoint folder): it is published from there."""
    memory: dict[str, int] = Field(default_factory=dict)
    """Bytes the trainer holds after the step (weights, optimizer state; on CUDA the allocator's figures)."""

    @field_validator("metrics", mode="before")
    @classmethod
    def _no_step_no_metrics(cls, v: object) -> object:
        return None if v == {} else v  # histories and checkpoints written before metrics were typed say {}


class PublishWeightsInput(BaseModel):
    checkpoint: str
    version: int
    from_memory: bool = False
    """Hand the trainer's in-memory weights of `version` over (raises TrainerLost if it no longer holds them);
    False: every server loads `checkpoint` from disk."""
    durable_version: int | None = None
    """From memory: the newest durable checkpoint; a trainer holding nothing yet loads it when it is `version`."""


class PublishedWeights(BaseModel):
    """What `publish_weights` did (workflows that publish from memory; older ones get the servers' messages)."""

    version: int
    route: str
    """memory (shared memory or CUDA IPC), distributed (a process group), disk (a weights-only folder), or none
    (every server already served it)."""
    servers: list[str]
    """The servers that loaded it (the others served it already)."""
    seconds: float
    bytes: int = 0
    """Bytes of weights handed over or written."""


class DurableBatch(BaseModel):
    """A trained batch waiting for a durable checkpoint: acknowledged, and recorded as trained, with one."""

    version: int
    """The version it was trained into."""
    ids: dict[str, list[str]]
    batch: str
    sample_ids: list[str]
    stale_ids: list[str] = Field(default_factory=list)
    missing: dict[str, list[str]] = Field(default_factory=dict)
    """Its entries gone from their stream (StepSummary.missing): recorded as dropped with the checkpoint's line."""


class SaveCheckpointInput(BaseModel):
    version: int
    """The version the trainer holds now; the checkpoint is of exactly it."""
    since: int
    """The previous durable checkpoint's version (0: the base model)."""


class CheckpointStarted(BaseModel):
    version: int
    snapshot_s: float
    """Time the steps waited for: the state copied aside (or, for a backend that cannot copy it, the whole write)."""
    need_bytes: int
    pruned: list[int] = Field(default_factory=list)
    """Older durable checkpoints removed to keep within the count and the byte budget."""


class DurableCheckpoint(BaseModel):
    version: int
    path: str
    bytes: int
    snapshot_s: float
    """Time the train steps waited for (copying the state aside)."""
    write_s: float
    """Time writing it took, beside the steps."""
    pruned: list[int] = Field(default_factory=list)
    """Older durable checkpoints removed to keep within the count and the byte budget."""


class ConfirmInput(BaseModel):
    """The workflow confirms a durable checkpoint: its batches are recorded as trained and acknowledged."""

    checkpoint: DurableCheckpoint
    since: int
    batches: list[DurableBatch]


class ExportInput(BaseModel):
    version: int
    label: str


class SavedCheckpoint(BaseModel):
    label: str
    version: int
    path: str


class AckInput(BaseModel):
    ids: dict[str, list[str]]


class TrainingConfig(BaseModel):
    trainer_task_queue: str
    batch_size: int
    source_weights: dict[str, float]
    max_staleness: int
    steps_per_run: int
    wait_s: float
    step_timeout_s: float = 3600.0
    heartbeat_timeout_s: float = 30.0
    checkpoint_every_versions: int = 20
    checkpoint_every_s: float = 900.0


class TrainingState(BaseModel):
    version: int = 0
    checkpoint: str | None = None
    """The current version's checkpoint folder (None for version 0: the served base model)."""
    steps: int = 0
    samples_trained: int = 0
    samples_dropped_stale: int = 0
    samples_dropped_bad: int = 0
    """Samples of batches whose update was not finite (NaN/Inf): acknowledged, never trained on."""
    samples_dropped_missing: int = 0
    """Entries gone from their stream when a step read them (StepSummary.missing): acknowledged, never trained on;
    counted like trained samples (taken off with the versions a loss takes, counted when trained again)."""
    paused: bool = False
    pause_reason: str | None = None
    """Why training paused itself (a full disk); None when paused by request or running."""
    last: StepSummary | None = None
    saved: list[SavedCheckpoint] = Field(default_factory=list)
    """The latest checkpoints saved on request (newest last)."""
    recent_losses: list[float] = Field(default_factory=list)
    """The last steps' losses, oldest first."""
    backlog: int = 0
    durable_version: int = 0
    """The newest durable checkpoint the workflow confirmed (0: the base model). Workflows that publish from
    memory only; older runs checkpoint every version."""
    durable_checkpoint: str | None = None
    checkpoint_clock: datetime | None = None
    """Where the cadence in seconds counts from: the newest durable checkpoint's confirmation, or the first version
    trained after a start."""
    undurable: list[DurableBatch] = Field(default_factory=list)
    """Batches trained since the last durable checkpoint, oldest first: unacknowledged until one holds them."""
    trainer_queue: str | None = None
    """The task queue of the trainer worker that holds the versions since the last durable checkpoint."""
    from_durable: bool = False
    """The trainer lost those versions: the next step starts again from the durable checkpoint."""
    lost: int = 0
    """Times the trainer's in-memory versions were lost (its process restarted between durable checkpoints)."""
    uncounted: list[DurableBatch] = Field(default_factory=list)
    """Batches taken off `samples_trained` by a loss, not trained again yet: a confirmation whose answer was lost
    with its trainer may have reached the disk, and then they are held by that checkpoint (adopted, counted again)."""
    last_checkpoint: DurableCheckpoint | None = None


class TrainingInput(BaseModel):
    policy: str
    config: TrainingConfig
    state: TrainingState = Field(default_factory=TrainingState)
    resume: bool = False
    """A fresh start (not a continuation): carry on from the newest checkpoint on the trainer's disk and have every
    policy server load it, instead of training version 1 again over what exists."""


class ResumeInput(BaseModel):
    policy: str


class ResumePoint(BaseModel):
    version: int
    checkpoint: str | None
    """None: no checkpoint yet (version 0, the served base model)."""
    trainer_queue: str | None = None
    """The task queue of the trainer worker that answered (it holds the trainer in memory): later calls go there."""


class TrainingStatus(BaseModel):
    policy: str
    version: int
    steps: int
    samples_trained: int
    samples_dropped_stale: int
    paused: bool
    batch_size: int
    samples_dropped_bad: int = 0
    samples_dropped_missing: int = 0
    """Entries gone from their stream before a step read them: dropped, never trained."""
    pause_reason: str | None = None
    waiting_samples: int
    """Claimed but not yet a full batch."""
    backlog: int
    """Samples in the streams not yet claimed, as of the last claim: how far training lags behind judging."""
    recent_losses: list[float]
    last_metrics: StepMetrics | None = None
    saved_checkpoints: list[SavedCheckpoint] = Field(default_factory=list)
    durable_version: int | None = None
    """The newest confirmed durable checkpoint (None: runs that checkpoint every version)."""
    versions_since_durable: int = 0
    """Versions only the trainer's memory holds: trained again if its process dies."""
    samples_since_durable: int = 0
    """Samples trained into those versions: counted as trained, not yet recorded as such."""
    trainer_lost: int = 0
    last_checkpoint: DurableCheckpoint | None = None
    trainer_memory: dict[str, int] = Field(default_factory=dict)
    """Bytes the trainer held after its last step."""


class BatchSize(BaseModel):
    batch_size: int = Field(ge=1, le=4096)


class CheckpointRequest(BaseModel):
    label: str | None = None
    """Name under checkpoints/saved/; default `policy-<version>`."""


_KEEP_TRYING = Retry(maximum_interval=timedelta(seconds=30))
# Step, publish and export heartbeat timeouts are `training.heartbeat_timeout_s`, the step's
# start-to-close `training.step_timeout_s`: the workflow passes them at the call.
CLAIM_BATCH = ActivityDef("claim_batch", ClaimInput, ClaimResult, heartbeat=timedelta(seconds=20))
"""Start-to-close is the claim's wait plus CLAIM_SLACK."""
CLAIM_SLACK = timedelta(seconds=60)
TRAIN_STEP = ActivityDef(
    "train_step",
    TrainInput,
    StepSummary,
    retry=Retry(
        maximum_interval=timedelta(seconds=30),
        non_retryable=(
            ErrorType.SAMPLE_MISSING,
            ErrorType.NON_FINITE_UPDATE,
            ErrorType.DISK_FULL,
            ErrorType.CHECKPOINT_CORRUPT,
            ErrorType.TRAINER_LOST,
        ),
    ),
)
PUBLISH_WEIGHTS = ActivityDef(
    "publish_weights", PublishWeightsInput, list[str], start_to_close=timedelta(minutes=10), retry=_KEEP_TRYING
)
"""Every policy server loads the checkpoint; returns the servers' messages."""
PUBLISH_VERSION = ActivityDef(
    "publish_version",
    PublishWeightsInput,
    PublishedWeights,
    start_to_close=timedelta(minutes=10),
    retry=Retry(maximum_interval=timedelta(seconds=30), non_retryable=(ErrorType.TRAINER_LOST,)),
)
"""Every policy server serves the version the trainer holds in memory (workflows that publish from memory)."""
EXPORT_CHECKPOINT = ActivityDef(
    "export_checkpoint",
    ExportInput,
    SavedCheckpoint,
    start_to_close=timedelta(minutes=30),
    retry=Retry(
        maximum_interval=timedelta(seconds=30), non_retryable=(ErrorType.LABEL_TAKEN, ErrorType.CHECKPOINT_MISSING)
    ),
)
ACK_BATCH = ActivityDef("ack_batch", AckInput, int, start_to_close=timedelta(seconds=60))
START_CHECKPOINT = ActivityDef(
    "start_checkpoint",
    SaveCheckpointInput,
    CheckpointStarted,
    start_to_close=timedelta(hours=1),
    retry=Retry(
        maximum_interval=timedelta(seconds=30),
        non_retryable=(ErrorType.TRAINER_LOST, ErrorType.DISK_FULL),
    ),
)
"""Room made, then the state of the version the trainer holds copied aside and its write started (the next step
waits only for this)."""
FINISH_CHECKPOINT = ActivityDef(
    "finish_checkpoint",
    SaveCheckpointInput,
    DurableCheckpoint,
    start_to_close=timedelta(hours=2),
    retry=Retry(
        maximum_interval=timedelta(seconds=30),
        non_retryable=(ErrorType.TRAINER_LOST, ErrorType.DISK_FULL),
    ),
)
"""Until the started write of the durable checkpoint is on disk (beside the next steps)."""
CONFIRM_CHECKPOINT = ActivityDef(
    "confirm_checkpoint", ConfirmInput, int, start_to_close=timedelta(seconds=120), retry=_KEEP_TRYING
)
"""Mark the checkpoint confirmed, record its batches as trained (records/trained.jsonl, once), acknowledge the
batches; returns how many entries were acknowledged. Run again after a loss for a checkpoint the lost trainer had
confirmed (TrainingWorkflow._adopt_confirmed)."""
FIND_RESUME_POINT = ActivityDef("find_resume_point", ResumeInput, ResumePoint, start_to_close=timedelta(seconds=60))
"""The newest complete checkpoint on the trainer's disk."""
"""Returns how many entries were acknowledged."""
