"""The TrainingWorkflow: its input, state, status, signals and update, and the trainer pool's activities."""

from __future__ import annotations

import re
from datetime import timedelta

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


class ClaimInput(BaseModel):
    consumer: str
    batch_size: int
    source_weights: dict[str, float]
    wait_s: float


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

    @field_validator("metrics", mode="before")
    @classmethod
    def _no_step_no_metrics(cls, v: object) -> object:
        return None if v == {} else v  # histories and checkpoints written before metrics were typed say {}


class PublishWeightsInput(BaseModel):
    checkpoint: str
    version: int


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


class TrainingState(BaseModel):
    version: int = 0
    checkpoint: str | None = None
    """The current version's checkpoint folder (None for version 0: the served base model)."""
    steps: int = 0
    samples_trained: int = 0
    samples_dropped_stale: int = 0
    samples_dropped_bad: int = 0
    """Samples of batches whose update was not finite (NaN/Inf): acknowledged, never trained on."""
    paused: bool = False
    pause_reason: str | None = None
    """Why training paused itself (a full disk); None when paused by request or running."""
    last: StepSummary | None = None
    saved: list[SavedCheckpoint] = Field(default_factory=list)
    """The latest checkpoints saved on request (newest last)."""
    recent_losses: list[float] = Field(default_factory=list)
    """The last steps' losses, oldest first."""
    backlog: int = 0


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


class TrainingStatus(BaseModel):
    policy: str
    version: int
    steps: int
    samples_trained: int
    samples_dropped_stale: int
    paused: bool
    batch_size: int
    samples_dropped_bad: int = 0
    pause_reason: str | None = None
    waiting_samples: int
    """Claimed but not yet a full batch."""
    backlog: int
    """Samples in the streams not yet claimed, as of the last claim: how far training lags behind judging."""
    recent_losses: list[float]
    last_metrics: StepMetrics | None = None
    saved_checkpoints: list[SavedCheckpoint] = Field(default_factory=list)


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
        ),
    ),
)
PUBLISH_WEIGHTS = ActivityDef(
    "publish_weights", PublishWeightsInput, list[str], start_to_close=timedelta(minutes=10), retry=_KEEP_TRYING
)
"""Every policy server loads the checkpoint; returns the servers' messages."""
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
FIND_RESUME_POINT = ActivityDef("find_resume_point", ResumeInput, ResumePoint, start_to_close=timedelta(seconds=60))
"""The newest complete checkpoint on the trainer's disk."""
"""Returns how many entries were acknowledged."""
