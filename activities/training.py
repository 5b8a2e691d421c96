"""Trainer-pool activities: claim a batch from the sample streams, train on it, publish, acknowledge.

The workflow carries only stream entry ids. Entries are acknowledged after the
new weights are served, so a crash anywhere before that re-trains the same ids
from the last checkpoint, never different ones and never twice: `train_step`
finds a checkpoint already written for this batch and returns it as is.

Publication (`training.weight_sync.mode`): disk, every server loads the saved
checkpoint; distributed, the trainer in this process broadcasts its weights to
the servers over a process group kept across versions (trainers.weight_sync),
generation paused in place meanwhile, and falls back to disk on any failure.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import json
import math
import os
import shutil
import threading
import time
import weakref
from pathlib import Path

import structlog
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.heartbeat import heartbeating
from contracts.errors import ErrorType
from contracts.training import (
    ACK_BATCH,
    CLAIM_BATCH,
    EXPORT_CHECKPOINT,
    FIND_RESUME_POINT,
    PUBLISH_WEIGHTS,
    TRAIN_STEP,
    AckInput,
    ClaimInput,
    ClaimResult,
    ExportInput,
    PublishWeightsInput,
    ResumeInput,
    ResumePoint,
    SavedCheckpoint,
    StepMetrics,
    StepSummary,
    TrainInput,
)
from openclaw_rl.checkpoints import (
    SAVED_MANIFEST,
    atomic_dir,
    newest_version,
    prune_versions,
    read_version_info,
    saved_dir,
    version_dir,
)
from openclaw_rl.settings import Settings
from policy_client import PolicyClient
from policy_client.weight_sync import WeightSyncClient, WeightSyncError
from rlmath.loss import LossConfig
from store.client import Store
from trainers import backend_class
from trainers.base import CheckpointCorrupt, PolicyTrainer, TrainerConfig
from trainers.lora import LoraConfig
from trainers.weight_sync import GenerationStillPaused, WeightBroadcaster, hf_state_dict

log = structlog.get_logger(__name__)

HEARTBEAT_S = 2.0


def batch_digest(ids: dict[str, list[str]]) -> str:
    return hashlib.sha256(json.dumps(ids, sort_keys=True).encode()).hexdigest()[:16]


class TrainingActivities:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.store = Store.from_settings(settings)
        self.trainer: PolicyTrainer | None = None
        self.trainer_version: int | None = None
        # One step at a time per worker: an attempt Temporal gave up on (heartbeat timeout) may still be
        # running in its thread; the retry waits for it, then finds its checkpoint.
        self._step_lock = asyncio.Lock()
        self._load_lock = threading.Lock()
        self._broadcaster: WeightBroadcaster | None = None  # distributed weight sync: its group outlives a version
        self._sender_of: weakref.ref | None = None  # the trainer the broadcaster was made for (not kept alive)
        # Load the trainer now, at the newest checkpoint (the version the next step trains from), so the first
        # step does not pay for it: while it loads, samples pile up and the oldest go stale before training.
        threading.Thread(target=self._preload, name="trainer-preload", daemon=True).start()

    def _preload(self) -> None:
        try:
            self._trainer_at(newest_version(self.settings.checkpoints_dir))
        except Exception as exc:  # the first step loads it again and reports any error where it matters
            log.warning("trainer preload failed", error=str(exc))

    async def aclose(self) -> None:
        if self._broadcaster is not None:
            await self._broadcaster.close()
            await self._broadcaster.client.aclose()
        await asyncio.to_thread(self._drop_trainer)
        await self.store.aclose()

    def _drop_trainer(self) -> None:
        if self.trainer is not None:
            self.trainer.close()
        self.trainer = None

    # ---- claim --------------------------------------------------------------
    @activity.defn(name=CLAIM_BATCH.name)
    async def claim_batch(self, inp: ClaimInput) -> ClaimResult:
        samples = self.store.samples
        sources = list(inp.source_weights)
        await samples.ensure_group(sources)
        got: dict[str, list[str]] = {src: [] for src in sources}

        def room() -> int:
            return inp.batch_size - sum(map(len, got.values()))

        # Entries delivered to us before but never acknowledged come first (a claim or step that died). Every read
        # names one stream with its own count: Redis applies COUNT per stream, so one read over several streams
        # could return up to COUNT from each and overshoot the batch and its shares.
        for src in sources:
            if room() <= 0:
                break
            got[src] += await samples.read_pending(inp.consumer, src, room())
        total_w = sum(inp.source_weights.values()) or 1.0
        quota = {src: max(1, round(inp.batch_size * w / total_w)) for src, w in inp.source_weights.items()}
        deadline = asyncio.get_running_loop().time() + inp.wait_s
        while room() > 0:
            # Each source up to its share first; then, if the batch is still short (a source had too little),
            # any source fills the rest, so a quiet source never holds a batch back.
            read = 0
            for src in sources:
                new = await samples.read_new(inp.consumer, src, min(room(), quota[src] - len(got[src])))
                got[src] += new
                read += len(new)
            for src in sources:
                new = await samples.read_new(inp.consumer, src, room())
                got[src] += new
                read += len(new)
            if read:
                continue
            remaining = deadline - asyncio.get_running_loop().time()
            if room() <= 0 or remaining <= 0:
                break
            activity.heartbeat(sum(map(len, got.values())))
            await samples.wait_for_new(sources, min(remaining, HEARTBEAT_S))
        return ClaimResult(ids={s: v for s, v in got.items() if v}, backlog=await samples.backlog(sources))

    # ---- train --------------------------------------------------------------
    @activity.defn(name=TRAIN_STEP.name)
    async def train_step(self, inp: TrainInput) -> StepSummary:
        async with (
            heartbeating(HEARTBEAT_S),
            self._step_lock,
        ):  # beating while it waits for the lock too: loading the model can take a while
            return await self._train_step(inp)

    async def _train_step(self, inp: TrainInput) -> StepSummary:
        digest = batch_digest(inp.ids)
        target = version_dir(self.settings.checkpoints_dir, inp.version + 1)
        done = _read_summary(target)
        if done is not None and done.batch == digest:
            # this batch was already trained and saved by an attempt that died afterwards
            await asyncio.to_thread(record_trained, self.settings.records_dir, done, inp.version)
            return done
        samples, stale = [], []
        for src, ids in inp.ids.items():
            for eid in ids:
                s = await self.store.samples.load(src, eid)
                if s is None:
                    raise ApplicationError(
                        f"entry {eid} of the {src} sample stream is gone",
                        type=ErrorType.SAMPLE_MISSING,
                        non_retryable=True,
                    )
                v = int(s.policy_version) if (s.policy_version or "").isdigit() else inp.version
                if inp.version - v > inp.max_staleness:
                    stale.append(s.sample_id)
                    continue
                samples.append(s)
        if stale:
            log.info("stale samples dropped", count=len(stale), version=inp.version, max_staleness=inp.max_staleness)
        if not samples:  # nothing left to learn from: no step, no new version; the batch is still acknowledged
            return StepSummary(
                version=inp.version, checkpoint="", batch=digest, trained=0, dropped_stale=len(stale), stale_ids=stale
            )
        try:
            trainer = await asyncio.to_thread(self._trainer_at, inp.version)
            metrics = await asyncio.to_thread(trainer.train_step, samples)
            if not await asyncio.to_thread(_finite, trainer, metrics):
                raise ApplicationError(
                    f"the update of version {inp.version} is not finite (loss {metrics.loss}, gradient norm "
                    f"{metrics.grad_norm}): nothing saved or published; the batch is dropped",
                    type=ErrorType.NON_FINITE_UPDATE,
                    non_retryable=True,
                )
            summary = StepSummary(
                version=inp.version + 1,
                checkpoint=str(target),
                batch=digest,
                trained=len(samples),
                dropped_stale=len(stale),
                metrics=metrics,
                sample_ids=[s.sample_id for s in samples],
                stale_ids=stale,
            )
            try:
                await asyncio.to_thread(self._save, trainer, target, summary)
            except Exception as exc:
                if not _disk_full(exc):
                    raise
                raise ApplicationError(
                    f"no space left to write {target}: training pauses; free space, then `openclaw-rl train resume`",
                    type=ErrorType.DISK_FULL,
                    non_retryable=True,
                ) from exc
        except CheckpointCorrupt as exc:
            self._drop_trainer()
            raise ApplicationError(str(exc), type=ErrorType.CHECKPOINT_CORRUPT, non_retryable=True) from exc
        except BaseException:
            self._drop_trainer()  # its weights may be half-updated: reload from the checkpoint next time
            raise
        self.trainer_version = inp.version + 1
        await asyncio.to_thread(record_trained, self.settings.records_dir, summary, inp.version)
        prune_versions(self.settings.checkpoints_dir, inp.version + 1, self.settings.training.keep_versions)
        return summary

    def _trainer_at(self, version: int) -> PolicyTrainer:
        with self._load_lock:
            return self._load_trainer(version)

    def _load_trainer(self, version: int) -> PolicyTrainer:
        if self.trainer is not None and self.trainer_version == version:
            return self.trainer
        t = self.settings.training
        cfg = TrainerConfig(
            lr=t.lr,
            micro_batch_tokens=t.micro_batch_tokens,
            precision=t.precision,
            loss=LossConfig(
                clip_low=t.clip_low,
                clip_high=t.clip_high,
                kl_coef=t.kl_coef,
                entropy_coef=t.entropy_coef,
                tis_cap=t.tis_cap,
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
        trainer_cls = backend_class(t.backend, t.megatron)
        folder = version_dir(self.settings.checkpoints_dir, version)
        self._drop_trainer()  # a megatron job holds its devices: end it before the next one starts
        self.trainer = (
            trainer_cls.resume(folder, cfg) if folder.is_dir() else trainer_cls(self.settings.served_model_path(), cfg)
        )
        self.trainer_version = version
        log.info(
            "trainer loaded",
            backend=t.backend,
            version=version,
            source=str(folder if folder.is_dir() else self.settings.served_model_path()),
        )
        return self.trainer

    @staticmethod
    def _save(trainer, target: Path, summary: StepSummary) -> None:
        trainer.save(target, version=str(summary.version), extra={"summary": summary.model_dump()})

    # ---- publish and acknowledge ------------------------------------------------
    @activity.defn(name=PUBLISH_WEIGHTS.name)
    async def publish_weights(self, inp: PublishWeightsInput) -> list[str]:
        """Every policy server loads the checkpoint; one that refuses keeps its old weights and the activity retries.

        It heartbeats: an attempt whose result never reaches Temporal (a server restart) is retried after the
        heartbeat timeout, not after the whole start-to-close timeout. Loading the same version twice is harmless.
        """
        async with heartbeating(HEARTBEAT_S):
            return await self._publish(inp)

    async def _publish(self, inp: PublishWeightsInput) -> list[str]:
        messages = None
        if self.settings.training.weight_sync.mode == "distributed":
            messages = await self._publish_distributed(inp)
        if messages is None:
            messages = await self._publish_from_disk(inp)
        await self.store.policy.announce(inp.version, inp.checkpoint)  # the serving side's signal
        return messages

    async def _publish_from_disk(self, inp: PublishWeightsInput) -> list[str]:
        async with PolicyClient.from_settings(self.settings) as client:
            results = await client.update_weights_from_disk(inp.checkpoint, weight_version=str(inp.version))
        failed = [r.message for r in results if not r.success]
        if failed:
            raise ApplicationError(
                f"a policy server refused version {inp.version}: {failed}", type=ErrorType.WEIGHT_LOAD_FAILED
            )
        return [r.message for r in results]

    async def _publish_distributed(self, inp: PublishWeightsInput) -> list[str] | None:
        """Broadcast the in-memory trainer's weights as `inp.version`; None when the checkpoint must be loaded from
        disk instead (the trainer here is not at that version, or the sync failed: logged, generation continued)."""
        async with self._step_lock:  # the weights must not move while they are on the wire
            trainer = self.trainer
            if trainer is None or self.trainer_version != inp.version:
                log.info(
                    "distributed weight sync: this process does not hold the version; the servers load it from disk",
                    version=inp.version,
                    trainer_version=self.trainer_version,
                )
                return None
            broadcaster = await self._broadcaster_for(trainer)
            try:
                own = broadcaster.rank0.sends_own_weights  # a megatron job's rank 0 gathers and sends them itself
                state = None if own else await asyncio.to_thread(hf_state_dict, trainer)
                await broadcaster.publish(state, str(inp.version))
            except GenerationStillPaused as exc:
                # Falling back to disk would not help: a server may be holding its requests. Retrying sends the
                # version again and continues generation again.
                raise ApplicationError(
                    f"version {inp.version}: a policy server could not be told to continue generation: {exc}",
                    type=ErrorType.WEIGHT_LOAD_FAILED,
                ) from exc
            except (WeightSyncError, TypeError) as exc:
                log.warning(
                    "distributed weight sync failed; the servers load the checkpoint from disk",
                    version=inp.version,
                    error=str(exc),
                )
                return None
        sender = " from the megatron job's rank 0" if broadcaster.rank0.sends_own_weights else ""
        return [
            f"version {inp.version} broadcast to {len(broadcaster.client.urls)} servers ({broadcaster.group_name})"
            + sender
        ]

    async def _broadcaster_for(self, trainer: PolicyTrainer) -> WeightBroadcaster:
        """One broadcaster, its group kept across versions; a megatron job's group ends with its job, so another
        trainer gets another broadcaster (the old group is dropped on the servers too)."""
        job_rank0 = getattr(trainer, "weight_rank_zero", None)  # a megatron job: its rank 0 sends
        old = self._broadcaster
        made_for = self._sender_of() if self._sender_of is not None else None
        if old is not None and made_for is not trainer and (old.rank0.sends_own_weights or job_rank0):
            await old.close()
            await old.client.aclose()
            self._broadcaster = None
        if self._broadcaster is None:
            rank0 = job_rank0() if job_rank0 is not None else None
            self._broadcaster = WeightBroadcaster(
                self.settings.training.weight_sync,
                WeightSyncClient.from_settings(self.settings),
                rank0.device if rank0 is not None else trainer.device,
                bf16_on_cuda=trainer.bf16_on_cuda,
                rank0=rank0,
            )
            self._sender_of = weakref.ref(trainer)
        return self._broadcaster

    @activity.defn(name=EXPORT_CHECKPOINT.name)
    async def export_checkpoint(self, inp: ExportInput) -> SavedCheckpoint:
        """Keep a copy of a version under `checkpoints/saved/<label>`, out of reach of pruning."""
        async with heartbeating(HEARTBEAT_S):
            return await asyncio.to_thread(self._export, inp)

    def _export(self, inp: ExportInput) -> SavedCheckpoint:
        root = self.settings.checkpoints_dir
        source = version_dir(root, inp.version) if inp.version else self.settings.served_model_path()
        target = saved_dir(root, inp.label)
        saved = SavedCheckpoint(label=inp.label, version=inp.version, path=str(target))
        manifest = target / SAVED_MANIFEST
        if manifest.is_file():
            if SavedCheckpoint.model_validate_json(manifest.read_text()).version == inp.version:
                return saved  # a retried export already finished
            raise ApplicationError(
                f"a saved checkpoint named {inp.label!r} already exists (another version)",
                type=ErrorType.LABEL_TAKEN,
                non_retryable=True,
            )
        if not source.is_dir():
            raise ApplicationError(
                f"version {inp.version} has no checkpoint at {source}",
                type=ErrorType.CHECKPOINT_MISSING,
                non_retryable=True,
            )
        with atomic_dir(target) as tmp:
            shutil.copytree(source, tmp, dirs_exist_ok=True)
            (tmp / SAVED_MANIFEST).write_text(saved.model_dump_json())
        log.info("checkpoint saved", label=inp.label, version=inp.version, path=str(target))
        return saved

    @activity.defn(name=FIND_RESUME_POINT.name)
    async def find_resume_point(self, inp: ResumeInput) -> ResumePoint:
        """The newest checkpoint folder is complete by construction (written whole, then renamed into place)."""
        version = newest_version(self.settings.checkpoints_dir)
        folder = version_dir(self.settings.checkpoints_dir, version)
        return ResumePoint(version=version, checkpoint=str(folder) if version else None)

    @activity.defn(name=ACK_BATCH.name)
    async def ack_batch(self, inp: AckInput) -> int:
        """Acknowledge, then delete: a trained entry's checkpoint is already served, and the sample stream must not
        grow with every sample ever trained (the record streams and the JSONL files keep what was judged)."""
        return sum([await self.store.samples.acknowledge(src, ids) for src, ids in inp.ids.items()])


TRAINED_LOG = "trained.jsonl"
"""records/trained.jsonl: one line per saved train step (the version it made, its batch digest, the sample ids it
trained on), appended and fsynced once its checkpoint is in place. Checkpoints are pruned; this log is not, so which
sample went into which version stays answerable (and a sample trained twice shows)."""


def record_trained(records_dir: Path, summary: StepSummary, from_version: int) -> None:
    """Append the step's line once: a retried step whose checkpoint was already saved finds its line there."""
    path = Path(records_dir) / TRAINED_LOG
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(
        {
            "version": summary.version,
            "from_version": from_version,
            "batch": summary.batch,
            "sample_ids": summary.sample_ids,
            "stale_ids": summary.stale_ids,
            "at": round(time.time(), 3),
        }
    )
    try:
        with open(path, "rb") as f:  # only a retry can find its line, and only near the end
            start = f.seek(max(0, f.seek(0, 2) - 64 * 1024))
            tail = f.read().decode("utf-8", errors="replace").splitlines()[1 if start else 0 :]
    except FileNotFoundError:
        tail = []
    for prev in tail:
        try:
            rec = json.loads(prev)
        except ValueError:
            continue
        if rec.get("version") == summary.version and rec.get("batch") == summary.batch:
            return
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def _finite(trainer: PolicyTrainer, metrics: StepMetrics) -> bool:
    """No NaN/Inf in the step's loss, gradient norm or the updated weights: only then may it be saved and served."""
    if not (math.isfinite(metrics.loss) and math.isfinite(metrics.grad_norm)):
        return False
    return trainer.weights_finite()


def _read_summary(folder: Path) -> StepSummary | None:
    info = read_version_info(folder)
    try:
        return StepSummary.model_validate(info["summary"]) if info else None
    except (KeyError, ValueError):
        return None


_NO_SPACE = ("No space left on device", "os error 28", "Disk quota exceeded", "os error 122")


def _disk_full(exc: BaseException) -> bool:
    """ENOSPC/EDQUOT however the writer reports it: an OSError from Python, a SafetensorError or torch's
    RuntimeError that carry only the message (they wrap the errno in their own text)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if any(text in str(seen) for text in _NO_SPACE):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
