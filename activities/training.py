"""Trainer-pool activities: claim a batch from the sample streams, train on it, publish, acknowledge.

The workflow carries only stream entry ids. Entries are acknowledged after the
new weights are served, so a crash anywhere before that re-trains the same ids
from the last checkpoint, never different ones and never twice: `train_step`
finds a checkpoint already written for this batch and returns it as is.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import shutil
import time
from pathlib import Path

import redis.asyncio as aioredis
import structlog
from pydantic import BaseModel, Field
from redis.exceptions import ResponseError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from openclaw_rl import redis_keys
from openclaw_rl.samples import decode_sample
from openclaw_rl.settings import Settings
from policy_client import PolicyClient

log = structlog.get_logger(__name__)

GROUP = "oc-trainer"
HEARTBEAT_S = 2.0


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
    metrics: dict
    sample_ids: list[str] = Field(default_factory=list)
    """The trained samples' ids (`<session>#<turn>`): the audit trail of exactly-once training."""
    stale_ids: list[str] = Field(default_factory=list)
    """Samples dropped because their policy version lagged more than `max_staleness` behind."""


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


def batch_digest(ids: dict[str, list[str]]) -> str:
    return hashlib.sha256(json.dumps(ids, sort_keys=True).encode()).hexdigest()[:16]


class TrainingActivities:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.redis = aioredis.from_url(settings.redis.target())
        self.trainer = None
        self.trainer_version: int | None = None
        # One step at a time per worker: an attempt Temporal gave up on (heartbeat timeout) may still be
        # running in its thread; the retry waits for it, then finds its checkpoint.
        self._step_lock = asyncio.Lock()

    # ---- claim --------------------------------------------------------------
    @activity.defn(name="claim_batch")
    async def claim_batch(self, inp: ClaimInput) -> ClaimResult:
        streams = {src: redis_keys.sample_stream(src) for src in inp.source_weights}
        for key in streams.values():
            try:
                await self.redis.xgroup_create(key, GROUP, id="0", mkstream=True)
            except ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise
        got: dict[str, list[str]] = {src: [] for src in streams}
        # Entries delivered to us before but never acknowledged come first (a claim or step that died).
        for src, key in streams.items():
            pending = await self.redis.xreadgroup(GROUP, inp.consumer, {key: "0"}, count=inp.batch_size)
            got[src] += [eid.decode() for _, entries in pending for eid, _ in entries]
        total_w = sum(inp.source_weights.values()) or 1.0
        quota = {src: max(1, round(inp.batch_size * w / total_w)) for src, w in inp.source_weights.items()}
        deadline = asyncio.get_running_loop().time() + inp.wait_s
        while sum(map(len, got.values())) < inp.batch_size:
            left = inp.batch_size - sum(map(len, got.values()))
            # Sources with room in their share first; once all are full, anyone may fill the rest.
            wanting = {s: k for s, k in streams.items() if len(got[s]) < quota[s]} or streams
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                break
            activity.heartbeat(sum(map(len, got.values())))
            batch = await self.redis.xreadgroup(GROUP, inp.consumer, {k: ">" for k in wanting.values()}, count=left, block=int(min(remaining, HEARTBEAT_S) * 1000))
            for key, entries in batch or []:
                src = next(s for s, k in streams.items() if k == key.decode())
                got[src] += [eid.decode() for eid, _ in entries]
        return ClaimResult(ids={s: v for s, v in got.items() if v}, backlog=await self._backlog(streams.values()))

    async def _backlog(self, keys) -> int:
        total = 0
        for key in keys:
            for group in await self.redis.xinfo_groups(key):
                if group["name"] == GROUP.encode() and group.get("lag") is not None:
                    total += int(group["lag"])
        return total

    # ---- train --------------------------------------------------------------
    @activity.defn(name="train_step")
    async def train_step(self, inp: TrainInput) -> StepSummary:
        async with heartbeating(), self._step_lock:  # beating from the start: loading the model can take a while
            return await self._train_step(inp)

    async def _train_step(self, inp: TrainInput) -> StepSummary:
        digest = batch_digest(inp.ids)
        target = self.settings.checkpoints_dir / f"policy-{inp.version + 1}"
        done = _read_summary(target)
        if done is not None and done.batch == digest:
            return done  # this batch was already trained and saved by an attempt that died afterwards
        samples, stale = [], []
        for src, ids in inp.ids.items():
            key = redis_keys.sample_stream(src)
            for eid in ids:
                entries = await self.redis.xrange(key, eid, eid)
                if not entries:
                    raise ApplicationError(f"stream entry {eid} of {key} is gone", type="SampleMissing", non_retryable=True)
                s = decode_sample(entries[0][1])
                v = int(s.meta.policy_version) if (s.meta.policy_version or "").isdigit() else inp.version
                if inp.version - v > inp.max_staleness:
                    stale.append(s.meta.sample_id)
                    continue
                samples.append(s)
        if stale:
            log.info("stale samples dropped", count=len(stale), version=inp.version, max_staleness=inp.max_staleness)
        if not samples:  # nothing left to learn from: no step, no new version; the batch is still acknowledged
            return StepSummary(version=inp.version, checkpoint="", batch=digest, trained=0, dropped_stale=len(stale), metrics={}, stale_ids=stale)
        try:
            trainer = await asyncio.to_thread(self._trainer_at, inp.version)
            metrics = await asyncio.to_thread(trainer.train_step, samples)
            summary = StepSummary(
                version=inp.version + 1, checkpoint=str(target), batch=digest, trained=len(samples), dropped_stale=len(stale),
                metrics=metrics.model_dump(), sample_ids=[s.meta.sample_id for s in samples], stale_ids=stale,
            )
            await asyncio.to_thread(self._save, trainer, target, summary)
        except BaseException:
            self.trainer = None  # its weights may be half-updated: reload from the checkpoint next time
            raise
        self.trainer_version = inp.version + 1
        self._prune(inp.version + 1)
        return summary

    def _trainer_at(self, version: int):
        from rlmath.loss import LossConfig
        from trainers import backend_class
        from trainers.base import TrainerConfig

        if self.trainer is not None and self.trainer_version == version:
            return self.trainer
        t = self.settings.training
        cfg = TrainerConfig(
            lr=t.lr, micro_batch_tokens=t.micro_batch_tokens,
            loss=LossConfig(clip_low=t.clip_low, clip_high=t.clip_high, kl_coef=t.kl_coef, entropy_coef=t.entropy_coef, tis_cap=t.tis_cap),
        )
        trainer_cls = backend_class(t.backend)
        folder = self.settings.checkpoints_dir / f"policy-{version}"
        self.trainer = trainer_cls.resume(folder, cfg) if folder.is_dir() else trainer_cls(self.settings.served_model_path(), cfg)
        self.trainer_version = version
        log.info("trainer loaded", backend=t.backend, version=version, source=str(folder if folder.is_dir() else self.settings.served_model_path()))
        return self.trainer

    @staticmethod
    def _save(trainer, target: Path, summary: StepSummary) -> None:
        trainer.save(target, version=str(summary.version), extra={"summary": summary.model_dump()})

    def _prune(self, newest: int) -> None:
        keep = self.settings.training.keep_versions
        for folder in self.settings.checkpoints_dir.glob("policy-*"):
            try:
                v = int(folder.name.split("-", 1)[1])
            except ValueError:
                continue
            if v <= newest - keep:
                shutil.rmtree(folder, ignore_errors=True)

    # ---- publish and acknowledge ------------------------------------------------
    @activity.defn(name="publish_weights")
    async def publish_weights(self, inp: PublishWeightsInput) -> list[str]:
        """Every policy server loads the checkpoint; one that refuses keeps its old weights and the activity retries.

        It heartbeats: an attempt whose result never reaches Temporal (a server restart) is retried after the
        heartbeat timeout, not after the whole start-to-close timeout. Loading the same version twice is harmless.
        """
        async with heartbeating():
            return await self._publish(inp)

    async def _publish(self, inp: PublishWeightsInput) -> list[str]:
        async with PolicyClient.from_settings(self.settings) as client:
            results = await client.update_weights_from_disk(inp.checkpoint, weight_version=str(inp.version))
        failed = [r.message for r in results if not r.success]
        if failed:
            raise ApplicationError(f"a policy server refused version {inp.version}: {failed}", type="WeightLoadFailed")
        # The serving side's signal: the version key and an update entry, together.
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.set(redis_keys.POLICY_VERSION, str(inp.version))
            pipe.xadd(
                redis_keys.POLICY_UPDATES, {"version": str(inp.version), "checkpoint": inp.checkpoint, "at": f"{time.time():.3f}"},
                maxlen=redis_keys.POLICY_UPDATES_MAXLEN, approximate=True,
            )
            await pipe.execute()
        return [r.message for r in results]

    @activity.defn(name="export_checkpoint")
    async def export_checkpoint(self, inp: ExportInput) -> SavedCheckpoint:
        """Keep a copy of a version under `checkpoints/saved/<label>`, out of reach of pruning."""
        async with heartbeating():
            return await asyncio.to_thread(self._export, inp)

    def _export(self, inp: ExportInput) -> SavedCheckpoint:
        source = self.settings.checkpoints_dir / f"policy-{inp.version}" if inp.version else self.settings.served_model_path()
        target = self.settings.checkpoints_dir / "saved" / inp.label
        saved = SavedCheckpoint(label=inp.label, version=inp.version, path=str(target))
        manifest = target / "openclaw-rl-saved.json"
        if manifest.is_file():
            if SavedCheckpoint.model_validate_json(manifest.read_text()).version == inp.version:
                return saved  # a retried export already finished
            raise ApplicationError(f"a saved checkpoint named {inp.label!r} already exists (another version)", type="LabelTaken", non_retryable=True)
        if not source.is_dir():
            raise ApplicationError(f"version {inp.version} has no checkpoint at {source}", type="CheckpointMissing", non_retryable=True)
        tmp = target.with_name(target.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(source, tmp)
        (tmp / "openclaw-rl-saved.json").write_text(saved.model_dump_json())
        tmp.rename(target)
        log.info("checkpoint saved", label=inp.label, version=inp.version, path=str(target))
        return saved

    @activity.defn(name="ack_batch")
    async def ack_batch(self, inp: AckInput) -> int:
        n = 0
        for src, ids in inp.ids.items():
            if ids:
                n += await self.redis.xack(redis_keys.sample_stream(src), GROUP, *ids)
        return n


def _read_summary(folder: Path) -> StepSummary | None:
    try:
        data = json.loads((folder / "openclaw-rl-version.json").read_text())
        return StepSummary.model_validate(data["summary"])
    except (OSError, ValueError, KeyError):
        return None


@contextlib.asynccontextmanager
async def heartbeating():
    """Heartbeat every HEARTBEAT_S while the body runs, so Temporal notices a dead or unheard attempt quickly."""

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(HEARTBEAT_S)

    task = asyncio.ensure_future(beat())
    try:
        yield
    finally:
        task.cancel()
