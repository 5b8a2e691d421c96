"""The trainer a trainer worker holds in memory, and which policy version its weights are.

Workflows that publish from memory train version after version here without writing a checkpoint; the versions
since the last durable checkpoint exist only in this process. A process that starts (or restarts) holds the
newest confirmed checkpoint, or the base model.
"""

from __future__ import annotations

import threading

import structlog
from temporalio.exceptions import ApplicationError

from contracts.errors import ErrorType
from contracts.training import StepSummary
from openclaw_rl.checkpoints import version_dir
from openclaw_rl.settings import GENERAL_AGENT_KL, Settings, StreamSettings
from rlmath.loss import LossConfig
from trainers import backend_class
from trainers.base import PolicyTrainer
from trainers.lora import LoraConfig
from trainers.trainer_config import TrainerConfig

log = structlog.get_logger(__name__)


def stream_settings(settings: Settings, source: str) -> StreamSettings:
    """How a trained stream's samples train: `training.streams`, else as a general-agent setting's (KL 0.01) for an
    episode stream, a plugin's included, else `training.kl_coef` (the personal agent's)."""
    t = settings.training
    if source in t.streams:
        return t.streams[source]
    if source != settings.learning.source:
        return StreamSettings(kl_coef=GENERAL_AGENT_KL)
    return StreamSettings()


def trainer_config(settings: Settings) -> TrainerConfig:
    t = settings.training
    streams = {src: stream_settings(settings, src) for src in t.source_weights}
    return TrainerConfig(
        lr=t.lr * t.lora.lr_scale if t.lora.enabled else t.lr,  # with LoRA only the adapters train
        micro_batch_tokens=t.micro_batch_tokens,
        precision=t.precision,
        activation_checkpointing=t.activation_checkpointing,
        pack_samples=t.pack_samples,
        compile=t.compile,
        optimizer_offload=t.optimizer_offload,
        reference=str(settings.served_model_path()),  # the initial policy: the KL reference after any resume
        kl_by_source={src: s.kl_coef for src, s in streams.items() if s.kl_coef is not None},
        advantage_scale_by_source={src: s.advantage_scale for src, s in streams.items() if s.advantage_scale != 1},
        loss=LossConfig(
            clip_low=t.clip_low,
            clip_high=t.clip_high,
            kl_coef=t.kl_coef,
            entropy_coef=t.entropy_coef,
            tis_cap=t.tis_cap,
            max_token_gap=t.mismatch.max_token_gap,
            mismatch_method=t.mismatch.method,
        ),
        lora=LoraConfig(
            rank=t.lora.rank,
            alpha=t.lora.alpha,
            dropout=t.lora.dropout,
            target_modules=tuple(t.lora.target_modules),
        )
        if t.lora.enabled
        else None,
    )


class CheckpointMissing(ApplicationError):
    def __init__(self, version: int, folder):
        super().__init__(
            f"the durable checkpoint of version {version} is gone from {folder}: training pauses. Restore it, or "
            "restart training from the newest checkpoint there (`openclaw-rl train start` after ending this run)",
            type=ErrorType.CHECKPOINT_MISSING,
            non_retryable=True,
        )


class HeldTrainer:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.trainer: PolicyTrainer | None = None
        self.version: int | None = None
        """The policy version the trainer's weights are (a durable checkpoint loaded again after a crash carries the
        version it replaces: version numbers only grow)."""
        self.last: StepSummary | None = None
        """The latest step: an attempt whose result never reached Temporal gets it back on retry."""
        self._lock = threading.Lock()

    def holding(self, version: int) -> PolicyTrainer | None:
        """The trainer, if its weights are `version`."""
        return self.trainer if self.trainer is not None and self.version == version else None

    def at_checkpoint(self, version: int) -> PolicyTrainer:
        """The trainer at `version`'s checkpoint folder (the base model for a version with none): runs that write a
        checkpoint at every step, and the preload."""
        with self._lock:
            if self.holding(version) is not None:
                return self.trainer
            return self._load(version, label=version)

    def from_durable(self, durable: int, label: int) -> PolicyTrainer:
        """The trainer at the durable checkpoint `durable` (0: the base model), its weights labelled `label`."""
        with self._lock:
            if self.trainer is not None and self.version == durable:  # versions only grow: these are its weights
                self.version = label
                return self.trainer
            if durable and not version_dir(self.settings.checkpoints_dir, durable).is_dir():
                raise CheckpointMissing(durable, version_dir(self.settings.checkpoints_dir, durable))
            return self._load(durable, label=label)

    def advance(self, version: int, summary: StepSummary) -> None:
        self.version, self.last = version, summary

    def drop(self) -> None:
        """Forget the trainer (its weights may be half-updated): the next step loads a checkpoint."""
        with self._lock:
            if self.trainer is not None:
                self.trainer.close()
            self.trainer, self.version = None, None

    def _load(self, version: int, label: int) -> PolicyTrainer:
        t = self.settings.training
        cls = backend_class(t.backend, t.megatron)
        if t.adapters == "per_user":
            from trainers.user_adapters import UserAdapterTrainer

            cls = UserAdapterTrainer  # the base once, each user's adapter trained in turn
        folder = version_dir(self.settings.checkpoints_dir, version)
        if self.trainer is not None:  # a megatron job holds its devices: end it before the next one starts
            self.trainer.close()
            self.trainer = None
        cfg = trainer_config(self.settings)
        base = self.settings.served_model_path()
        self.trainer = cls.resume(folder, cfg) if version and folder.is_dir() else cls(base, cfg)
        self.version = label
        log.info(
            "trainer loaded",
            backend=t.backend,
            version=label,
            source=str(folder if version and folder.is_dir() else base),
        )
        return self.trainer
