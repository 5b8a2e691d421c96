"""The wire between a trainer-pool worker (MegatronJobTrainer) and its torchrun job (trainers.megatron_job).

One Unix socket in a private folder, one connection for the job's life, one JSON
message per line: the worker sends a command, rank 0 of the job broadcasts it to
every rank, and answers once all ranks have run it. The connection closing is
the job's signal to stop, so a worker that dies takes its job with it.
"""

from __future__ import annotations

import select
import socket
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, Field, TypeAdapter

from contracts.training import StepMetrics
from openclaw_rl.settings import MegatronSettings
from store.samples import TrainingSample
from trainers.trainer_config import TrainerConfig
from trainers.weight_sync import BucketSpec, GroupSpec

RANK_FAILED = "megatron rank failed"
"""The log event a rank writes, with its error, before it exits on one (the worker quotes these lines)."""


class JobSpec(BaseModel):
    """Everything a job's ranks need to start; written by the worker as a JSON file the ranks read."""

    checkpoint: Path
    """A Hugging Face checkpoint folder; with a `megatron/` distributed checkpoint inside, the job resumes from it."""
    resume: bool
    """Load the distributed checkpoint (model, optimizer, step) when the folder has one."""
    trainer: TrainerConfig
    layout: MegatronSettings
    """Tensor / pipeline parallel sizes, torchrun's nodes and processes, the distributed optimizer."""
    socket_path: Path
    """Where rank 0 listens for the worker."""


class StepCommand(BaseModel):
    op: Literal["step"] = "step"
    samples: list[TrainingSample]


class LogprobsCommand(BaseModel):
    op: Literal["logprobs"] = "logprobs"
    sample: TrainingSample


class SaveCommand(BaseModel):
    op: Literal["save"] = "save"
    folder: Path
    """An existing folder: the job writes the Hugging Face export (weights and config) into it."""
    distributed: bool = True
    """Also the distributed checkpoint (model, optimizer, step) under `megatron/`, to resume from."""


class OpenWeightGroupCommand(BaseModel):
    """Rank 0 opens a weight-update group as its rank 0, while the pool has every server join it."""

    op: Literal["open_weight_group"] = "open_weight_group"
    group: GroupSpec


class StageWeightsCommand(BaseModel):
    """Collective: the whole model in the Hugging Face layout on rank 0, cut into buckets as they will be sent."""

    op: Literal["stage_weights"] = "stage_weights"
    bucket_bytes: int = Field(gt=0)
    wire_dtype: Literal["bfloat16", "float32"] | None = None
    """Floating-point weights travel in this dtype; None: their own."""


class SendBucketCommand(BaseModel):
    """Rank 0 broadcasts one staged bucket over the group (the pool posts its update to every server meanwhile)."""

    op: Literal["send_bucket"] = "send_bucket"
    index: int = Field(ge=0)


class CloseWeightGroupCommand(BaseModel):
    """Rank 0 leaves its weight-update group (a peer blocked in a broadcast then fails at once) and lets go of what
    it staged."""

    op: Literal["close_weight_group"] = "close_weight_group"


class IdleCommand(BaseModel):
    """Rank 0's own tick while the worker is quiet, so the other ranks never sit in one broadcast long enough for
    their process group's timeout to fire."""

    op: Literal["idle"] = "idle"


class StopCommand(BaseModel):
    op: Literal["stop"] = "stop"
    worker_gone: bool = False
    """Rank 0's own stop when the worker's connection closed: nobody is left to clean up the job's folder."""


Command = Annotated[
    StepCommand
    | LogprobsCommand
    | SaveCommand
    | OpenWeightGroupCommand
    | StageWeightsCommand
    | SendBucketCommand
    | CloseWeightGroupCommand
    | IdleCommand
    | StopCommand,
    Field(discriminator="op"),
]
COMMAND = TypeAdapter(Command)


class Ready(BaseModel):
    kind: Literal["ready"] = "ready"
    step: int
    """Optimizer steps already taken (from the distributed checkpoint; 0 on a fresh start)."""
    world_size: int
    device: str


class Stepped(BaseModel):
    kind: Literal["stepped"] = "stepped"
    metrics: StepMetrics
    weights_finite: bool
    """No NaN or Inf in any rank's updated weights."""


class Logprobs(BaseModel):
    kind: Literal["logprobs"] = "logprobs"
    logprobs: list[float]


class Saved(BaseModel):
    kind: Literal["saved"] = "saved"
    step: int


class WeightsStaged(BaseModel):
    kind: Literal["weights_staged"] = "weights_staged"
    buckets: list[BucketSpec]


class WeightSyncDone(BaseModel):
    """A weight-sync command ran on rank 0 (the group opened, the bucket sent, the group closed)."""

    kind: Literal["weight_sync_done"] = "weight_sync_done"


class WeightSyncFailed(BaseModel):
    """A weight-sync command failed on rank 0 (a server that never joined, a broken broadcast); the job goes on."""

    kind: Literal["weight_sync_failed"] = "weight_sync_failed"
    reason: str


class Refused(BaseModel):
    """A command rank 0 could not read (a bug on the worker's side); no rank ran anything."""

    kind: Literal["refused"] = "refused"
    reason: str


Reply = Annotated[
    Ready | Stepped | Logprobs | Saved | WeightsStaged | WeightSyncDone | WeightSyncFailed | Refused,
    Field(discriminator="kind"),
]
REPLY = TypeAdapter(Reply)


class LineChannel:
    """Newline-framed messages over a connected socket, with a timeout per message."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._buffer = b""

    def send(self, message: BaseModel) -> None:
        self.sock.sendall(message.model_dump_json().encode() + b"\n")

    def receive(self, timeout_s: float) -> bytes | None:
        """The next line, or None when none arrived within `timeout_s`. EOFError once the peer has closed."""
        while b"\n" not in self._buffer:
            ready, _, _ = select.select([self.sock], [], [], timeout_s)
            if not ready:
                return None
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise EOFError("the other side closed the connection")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def close(self) -> None:
        self.sock.close()
