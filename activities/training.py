"""Trainer-pool activities: claim a batch from the sample streams, train on it, publish, checkpoint, acknowledge.

The workflow carries only stream entry ids. Workflows that publish from memory (TrainInput.durable_version set)
train version after version in this process's memory and publish each one from there (activities.
weight_publication); a durable checkpoint is written every so many versions or minutes, beside the next steps
(activities.durable_checkpoints), and only once the workflow confirms it are its batches recorded as trained and
acknowledged. A crash between two durable checkpoints loses the versions since the last one: the next step finds
this trainer does not hold the version it trains from (TRAINER_LOST), the workflow goes back to that checkpoint,
and the unacknowledged entries are claimed and trained again, never lost and never counted twice.

Runs started before (durable_version None) write a checkpoint at every step and publish it, as they always did.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import json
import math
import shutil
import threading
import time
from pathlib import Path

import structlog
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities import durable_checkpoints, pool_metrics
from activities.curves import CurveWriter
from activities.heartbeat import heartbeating
from activities.held_trainer import HeldTrainer
from activities.stale_screen import StaleScreen
from activities.step_log import record_train_step
from activities.weight_publication import TrainerLost, WeightPublisher
from contracts.errors import ErrorType
from contracts.training import (
    ACK_BATCH,
    CLAIM_BATCH,
    CONFIRM_CHECKPOINT,
    EXPORT_CHECKPOINT,
    FIND_RESUME_POINT,
    FINISH_CHECKPOINT,
    PUBLISH_VERSION,
    PUBLISH_WEIGHTS,
    START_CHECKPOINT,
    TRAIN_STEP,
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
from openclaw_rl.trained_log import record_dropped, record_step
from policy_client.weight_sync import WeightSyncClient, WeightSyncError
from store.client import Store
from store.errors import StoreError
from store.samples import TrainingSample
from trainers.base import PolicyTrainer
from trainers.trainer_state import CheckpointCorrupt

log = structlog.get_logger(__name__)

HEARTBEAT_S = 2.0


def batch_digest(ids: dict[str, list[str]]) -> str:
    return hashlib.sha256(json.dumps(ids, sort_keys=True).encode()).hexdigest()[:16]


class TrainingActivities:
    def __init__(self, settings: Settings, worker_queue: str | None = None):
        self.settings = settings
        self.worker_queue = worker_queue
        """This worker's own task queue: workflows that publish from memory send every call about the trainer
        there (the versions it holds live in this process only)."""
        self.store = Store.from_settings(settings)
        self.held = HeldTrainer(settings)
        self.curves = CurveWriter(settings.data_dir, wandb=settings.curves.wandb)
        # One step at a time per worker: an attempt Temporal gave up on (heartbeat timeout) may still be
        # running in its thread; the retry waits for it, then finds its result.
        self._step_lock = asyncio.Lock()
        self.publisher = WeightPublisher(settings, self.held, self._step_lock)
        self._writes: dict[int, tuple[asyncio.Future, CheckpointStarted]] = {}
        """Durable checkpoint writes under way (or done, not yet collected), by version."""
        # Load the trainer now, at the newest checkpoint (the version the next step trains from), so the first
        # step does not pay for it: while it loads, samples pile up and the oldest go stale before training.
        threading.Thread(target=self._preload, name="trainer-preload", daemon=True).start()

    def _record_step(self, summary: StepSummary, samples: list[TrainingSample], trained_from: int) -> None:
        """The step's line in records/steps.jsonl and its points on the curves (TensorBoard, W&B offline)."""
        line = record_train_step(self.settings.records_dir, summary, samples, trained_from)
        if line is not None:
            self.curves.write(line)

    def _preload(self) -> None:
        try:
            self.held.at_checkpoint(newest_version(self.settings.checkpoints_dir))
        except Exception as exc:  # the first step loads it again and reports any error where it matters
            log.warning("trainer preload failed", error=str(exc))

    async def aclose(self) -> None:
        await self.publisher.aclose()
        await asyncio.to_thread(self.held.drop)
        await asyncio.to_thread(self.curves.close)
        await self.store.aclose()

    # ---- claim --------------------------------------------------------------
    @activity.defn(name=CLAIM_BATCH.name)
    async def claim_batch(self, inp: ClaimInput) -> ClaimResult:
        samples = self.store.samples
        sources = list(inp.source_weights)
        await samples.ensure_group(sources)
        got: dict[str, list[str]] = {src: [] for src in sources}
        shared = self.settings.training.adapters == "shared"
        screen = await StaleScreen.for_claim(samples, self.settings.records_dir, inp, shared)

        async def fresh(src: str, entry_ids: list[str]) -> list[str]:
            return entry_ids if screen is None else await screen.fresh(src, entry_ids)

        def room() -> int:
            return inp.batch_size - sum(map(len, got.values()))

        # Entries delivered to us before but never acknowledged come first (a claim or step that died), except
        # those trained into versions awaiting a durable checkpoint. Every read names one stream with its own
        # count: Redis applies COUNT per stream, so one read over several streams could overshoot the batch.
        for src in sources:
            if room() <= 0:
                break
            skip = set(inp.skip.get(src, ()))
            # Read past what an earlier attempt of this claim dropped (still pending if it died before acknowledging).
            noted = len(screen.prior) if screen is not None else 0
            pending = await samples.read_pending(inp.consumer, src, room() + len(skip) + noted)
            got[src] += (await fresh(src, [eid for eid in pending if eid not in skip]))[: room()]
        total_w = sum(inp.source_weights.values()) or 1.0
        quota = {src: max(1, round(inp.batch_size * w / total_w)) for src, w in inp.source_weights.items()}
        deadline = asyncio.get_running_loop().time() + inp.wait_s
        while room() > 0:
            # Each source up to its share first; then, if the batch is still short (a source had too little),
            # any source fills the rest, so a quiet source never holds a batch back.
            read = 0
            for src in sources:
                new = await samples.read_new(inp.consumer, src, min(room(), quota[src] - len(got[src])))
                got[src] += await fresh(src, new)
                read += len(new)
            for src in sources:
                new = await samples.read_new(inp.consumer, src, room())
                got[src] += await fresh(src, new)
                read += len(new)
            if read:
                continue
            remaining = deadline - asyncio.get_running_loop().time()
            # A worker shutting down ends the wait early, as its deadline would: a short batch is claimed again
            # (as pending) by the next claim, and the worker stops now instead of after its graceful timeout.
            if room() <= 0 or remaining <= 0 or activity.is_worker_shutdown():
                break
            activity.heartbeat(sum(map(len, got.values())))
            await samples.wait_for_new(sources, min(remaining, HEARTBEAT_S))
        dropped = await screen.settle() if screen is not None else 0
        return ClaimResult(
            ids={s: v for s, v in got.items() if v}, backlog=await samples.backlog(sources), dropped_stale=dropped
        )

    # ---- train --------------------------------------------------------------
    @activity.defn(name=TRAIN_STEP.name)
    async def train_step(self, inp: TrainInput) -> StepSummary:
        async with (
            heartbeating(HEARTBEAT_S),
            self._step_lock,
        ):  # beating while it waits for the lock too: loading the model can take a while
            if inp.durable_version is None:
                return await self._train_and_save(inp)
            return await self._train_in_memory(inp)

    @contextlib.asynccontextmanager
    async def _dropped_on_failure(self):
        """A failure inside drops what the trainer holds (it may be half loaded or half trained); a corrupt
        checkpoint fails the step for good."""
        try:
            yield
        except CheckpointCorrupt as exc:
            await asyncio.to_thread(self.held.drop)
            raise ApplicationError(str(exc), type=ErrorType.CHECKPOINT_CORRUPT, non_retryable=True) from exc
        except BaseException:
            await asyncio.to_thread(self.held.drop)
            raise

    async def _loaded(self, load, *args):
        """The trainer `load(*args)` reads from a checkpoint (in a thread), dropped on failure."""
        async with self._dropped_on_failure():
            return await asyncio.to_thread(load, *args)

    async def _go_back(self, trainer, owners: set[str]) -> None:
        """Each user (in the trainer's memory or in this batch) with a go-back it has not applied yet (eval.canary
        rolled back their candidate): their adapter starts again from what serves them, before this step's staleness
        is counted (trainers.user_adapters.go_back). What serves them: the current adapter if it is of the new line
        (promoted since), else the incumbent the rollback named. Its files gone or unreadable: the base adapter,
        never the abandoned line."""
        bank = trainer.bank
        for tenant, back in (await self.store.canaries.go_backs(sorted(set(bank.users) | owners))).items():
            if back.lineage <= bank.adapter(tenant).lineage:
                continue
            current = await self.store.adapters.current(tenant)
            to = current if current is not None and current.lineage >= back.lineage else back.to
            try:
                folder = Path(to.path) if to is not None else None
                await asyncio.to_thread(bank.go_back, tenant, back.lineage, folder, to.version if to else 0, back.top)
            except Exception as exc:  # noqa: BLE001 (a missing or corrupt adapter: the base, not the abandoned line)
                log.warning("a rolled-back user's adapter went back to the base instead", user=tenant, error=str(exc))
                await asyncio.to_thread(bank.go_back, tenant, back.lineage, None, 0, back.top)
                to = None
            trainer.touched.discard(tenant)  # what it holds now is what serves them: nothing new to publish
            log.info("a rolled-back user's adapter went back", user=tenant, to=to.version if to else 0)

    async def _batch(
        self, inp: TrainInput, trainer
    ) -> tuple[list[TrainingSample], list[str], dict[str, list[str]], dict[str, int]]:
        """The batch's samples, the ids of those too stale to learn from, the entries gone from their stream (by
        source), and each sample's staleness (by id), for the `trainer` that trains them. Per-user adapters:
        staleness counts the steps of the sample's user's adapter since it was generated (their turns are labelled
        with those), after any go-back of theirs (eval.canary)."""
        loaded, stale, missing, staleness = [], [], {}, {}
        bank = getattr(trainer, "bank", None)
        for src, ids in inp.ids.items():
            for eid in ids:
                s = await self.store.samples.load(src, eid)
                if s is None and await self.store.samples.was_forgotten(src, eid):
                    continue  # its user was forgotten while the batch was claimed: never trained (control.user_data)
                if s is None:
                    # Gone from the stream some other way (trimmed, deleted by hand, a store restored from an older
                    # copy): one lost sample, not a reason to stop training. Dropped and reported; acknowledged with
                    # the batch, so it is never claimed again.
                    log.warning("sample entry gone from its stream: dropped", source=src, entry=eid)
                    missing.setdefault(src, []).append(eid)
                    continue
                loaded.append(s)
        if bank is not None and self.settings.eval.canary.enabled:
            from trainers.user_adapters import sample_owner

            await self._go_back(trainer, {sample_owner(s) for s in loaded})
        samples = []
        for s in loaded:
            v = int(s.policy_version) if (s.policy_version or "").isdigit() else inp.version
            behind = inp.version - v if bank is None else bank.staleness(s, v)
            if behind > inp.max_staleness:
                stale.append(s.sample_id)
                continue
            samples.append(s)
            staleness[s.sample_id] = behind
        if stale:
            log.info("stale samples dropped", count=len(stale), version=inp.version, max_staleness=inp.max_staleness)
        return samples, stale, missing, staleness

    async def _train_in_memory(self, inp: TrainInput) -> StepSummary:
        digest = batch_digest(inp.ids)
        last = self.held.last
        if last is not None and last.batch == digest and self.held.version == last.version == inp.version + 1:
            return last  # this batch was trained by an attempt whose result never reached Temporal
        # From the durable checkpoint after a loss (whatever this process holds: the workflow trains the versions
        # since it again); else the version held, or the durable one itself in a process that holds nothing yet.
        reload = inp.from_durable or (self.held.version is None and inp.version == inp.durable_version)
        if not reload and self.held.holding(inp.version) is None:
            raise TrainerLost(inp.version, self.held.version)
        # The trainer that trains this batch first: its adapters are what staleness and go-backs are about.
        if reload:
            trainer = await self._loaded(self.held.from_durable, inp.durable_version, inp.version)
        else:
            trainer = self.held.holding(inp.version)
        samples, stale, missing, staleness = await self._batch(inp, trainer)
        if not samples:  # nothing left to learn from: no step; the batch is still acknowledged
            await asyncio.to_thread(_record_dropped, self.settings, inp.version, digest, stale, missing)
            version = inp.version
            if inp.from_durable:  # but the durable checkpoint is taken again, as a new version the servers get
                version = inp.version + 1
                await asyncio.to_thread(self.held.from_durable, inp.durable_version, version)
            return StepSummary(
                version=version,
                checkpoint="",
                batch=digest,
                trained=0,
                dropped_stale=len(stale),
                stale_ids=stale,
                missing=missing,
                in_memory=version != inp.version,
            )
        try:
            async with self._engine_memory_released():
                metrics = await self._optimize(trainer, samples, inp.version, staleness)
        except CheckpointCorrupt as exc:
            await asyncio.to_thread(self.held.drop)
            raise ApplicationError(str(exc), type=ErrorType.CHECKPOINT_CORRUPT, non_retryable=True) from exc
        except BaseException:
            await asyncio.to_thread(self.held.drop)  # its weights may be half-updated: load a checkpoint next time
            raise
        summary = StepSummary(
            version=inp.version + 1,
            checkpoint="",
            batch=digest,
            trained=len(samples),
            dropped_stale=len(stale),
            metrics=metrics,
            sample_ids=[s.sample_id for s in samples],
            stale_ids=stale,
            missing=missing,
            in_memory=True,
            memory=trainer.memory(),
        )
        self.held.advance(inp.version + 1, summary)
        await asyncio.to_thread(self._record_step, summary, samples, inp.version)
        await self._record_mismatch(summary, inp.version)
        pool_metrics.train_step(summary)
        return summary

    async def _record_mismatch(self, summary: StepSummary, trained_from: int) -> None:
        """Each trained sample's mismatch figures into the store, for the `turns` audit (store.mismatch). An audit
        figure, not training's state: a store error is logged and the step stands."""
        if summary.metrics is None or not summary.metrics.per_sample:
            return
        figures = [f.model_copy(update={"trained_from": trained_from}) for f in summary.metrics.per_sample]
        try:
            await self.store.mismatch.record(figures)
        except StoreError as exc:
            log.warning("the step's mismatch figures were not recorded", error=str(exc), samples=len(figures))

    @contextlib.asynccontextmanager
    async def _engine_memory_released(self):
        """`training.engine_memory_during_step`: the embedded engines give their memory back for the step and take it
        again after (whatever the step did). A server that cannot release is logged and the step goes on."""
        mode = self.settings.training.engine_memory_during_step
        if mode == "keep" or not self.settings.embedded_engine:
            yield
            return
        tags = ["kv_cache"] if mode == "kv_cache" else ["kv_cache", "weights"]
        async with WeightSyncClient.from_settings(self.settings) as client:
            try:
                await client.release_memory(tags)
            except WeightSyncError as exc:
                log.warning("the engine could not give its memory back for the step", error=str(exc))
            try:
                yield
            finally:
                # The step's activations and gradients sit in this process's CUDA cache: hand them back to the
                # driver first, or the engine's resume finds the GPU full (a 4B model beside its engine).
                await asyncio.to_thread(_empty_cuda_cache)
                await client.resume_memory(tags)

    async def _optimize(
        self, trainer: PolicyTrainer, samples: list[TrainingSample], version: int, staleness: dict[str, int]
    ) -> StepMetrics:
        metrics = await asyncio.to_thread(trainer.train_step, samples, staleness)
        if not await asyncio.to_thread(_finite, trainer, metrics):
            raise ApplicationError(
                f"the update of version {version} is not finite (loss {metrics.loss}, gradient norm "
                f"{metrics.grad_norm}): nothing saved or published; the batch is dropped",
                type=ErrorType.NON_FINITE_UPDATE,
                non_retryable=True,
            )
        return metrics

    async def _train_and_save(self, inp: TrainInput) -> StepSummary:
        """Runs that write a checkpoint at every step (started before durable checkpoints had a cadence)."""
        digest = batch_digest(inp.ids)
        target = version_dir(self.settings.checkpoints_dir, inp.version + 1)
        done = _read_summary(target)
        if done is not None and done.batch == digest:
            # this batch was already trained and saved by an attempt that died afterwards
            await asyncio.to_thread(_record, self.settings, done, inp.version)
            return done
        trainer = await self._loaded(self.held.at_checkpoint, inp.version)
        samples, stale, missing, staleness = await self._batch(inp, trainer)
        if not samples:
            await asyncio.to_thread(_record_dropped, self.settings, inp.version, digest, stale, missing)
            return StepSummary(
                version=inp.version,
                checkpoint="",
                batch=digest,
                trained=0,
                dropped_stale=len(stale),
                stale_ids=stale,
                missing=missing,
            )
        async with self._dropped_on_failure():
            metrics = await self._optimize(trainer, samples, inp.version, staleness)
            summary = StepSummary(
                version=inp.version + 1,
                checkpoint=str(target),
                batch=digest,
                trained=len(samples),
                dropped_stale=len(stale),
                metrics=metrics,
                sample_ids=[s.sample_id for s in samples],
                stale_ids=stale,
                missing=missing,
            )
            try:
                await asyncio.to_thread(trainer.save, target, str(summary.version), {"summary": summary.model_dump()})
            except Exception as exc:
                if not _disk_full(exc):
                    raise
                raise durable_checkpoints.DiskFull(
                    f"no space left to write {target}: training pauses; free space, then `openclaw-rl train resume`"
                ) from exc
        self.held.advance(inp.version + 1, summary)
        await asyncio.to_thread(_record, self.settings, summary, inp.version)
        await asyncio.to_thread(self._record_step, summary, samples, inp.version)
        await self._record_mismatch(summary, inp.version)
        pool_metrics.train_step(summary)
        prune_versions(self.settings.checkpoints_dir, inp.version + 1, self.settings.training.checkpoint.keep)
        return summary

    # ---- publish ------------------------------------------------------------------------------------------------
    @activity.defn(name=PUBLISH_VERSION.name)
    async def publish_version(self, inp: PublishWeightsInput) -> PublishedWeights:
        """Every server serves the version the trainer holds in memory (those that do already are skipped); then
        the serving side's signal. Raises TRAINER_LOST when this process no longer holds it."""
        async with heartbeating(HEARTBEAT_S):
            published = await self.publisher.from_memory(inp.version, inp.durable_version)
            await self.store.policy.announce(inp.version, inp.checkpoint or f"memory:v{inp.version}")
        log.info(
            "version published",
            version=inp.version,
            route=published.route,
            servers=len(published.servers),
            seconds=round(published.seconds, 3),
        )
        # Version latency: from the step's end until every server serves it (a curve beside the step's own).
        await asyncio.to_thread(self.curves.write_scalars, {"train/version_latency_s": published.seconds}, inp.version)
        return published

    @activity.defn(name=PUBLISH_WEIGHTS.name)
    async def publish_weights(self, inp: PublishWeightsInput) -> list[str]:
        """Every policy server loads the checkpoint (runs that write one per step, and resuming from one); one that
        refuses keeps its old weights and the activity retries. It heartbeats: an attempt whose result never reaches
        Temporal is retried after the heartbeat timeout. Loading the same version twice is harmless."""
        async with heartbeating(HEARTBEAT_S):
            messages = await self.publisher.checkpoint(inp)
            await self.store.policy.announce(inp.version, inp.checkpoint)  # the serving side's signal
            return messages

    # ---- durable checkpoints --------------------------------------------------------------------------------------
    @activity.defn(name=START_CHECKPOINT.name)
    async def start_checkpoint(self, inp: SaveCheckpointInput) -> CheckpointStarted:
        """Room made, the state of the version held copied aside, and its write started in the background (a backend
        that cannot copy its state writes it here, under the step lock). The next step waits only for this."""
        async with heartbeating(HEARTBEAT_S), self._step_lock:
            if inp.version in self._writes:
                return self._writes[inp.version][1]  # a retried attempt: started already
            trainer = self.held.holding(inp.version)
            if trainer is None:
                raise TrainerLost(inp.version, self.held.version)
            need, pruned = await asyncio.to_thread(durable_checkpoints.make_room, self.settings, inp.version)
            started = time.perf_counter()
            bank = getattr(trainer, "bank", None)
            for owner in list(bank.users) if bank is not None else ():  # a forgotten user's adapter is not kept
                if await self.store.adapters.owner_forgotten(owner):
                    bank.forget(owner)
            snapshot = await asyncio.to_thread(trainer.snapshot)
            step = trainer.step
            write = asyncio.ensure_future(self._write(snapshot, inp, step))
            if not snapshot.detached:
                await asyncio.shield(write)
            result = CheckpointStarted(
                version=inp.version, snapshot_s=round(time.perf_counter() - started, 3), need_bytes=need, pruned=pruned
            )
            self._writes[inp.version] = (write, result)
        return result

    async def _write(self, snapshot, inp: SaveCheckpointInput, step: int) -> tuple[Path, float]:
        try:
            return await asyncio.to_thread(
                durable_checkpoints.write, self.settings, snapshot, inp.version, inp.since, step
            )
        except Exception as exc:
            if not _disk_full(exc):
                raise
            raise durable_checkpoints.DiskFull(
                f"the disk filled while writing the durable checkpoint of version {inp.version}: training pauses; "
                "free space, then `openclaw-rl train resume`"
            ) from exc

    @activity.defn(name=FINISH_CHECKPOINT.name)
    async def finish_checkpoint(self, inp: SaveCheckpointInput) -> DurableCheckpoint:
        """Until the durable checkpoint's write is on disk; TRAINER_LOST when this process never started it (it
        restarted since)."""
        entry = self._writes.get(inp.version)
        if entry is None:
            raise TrainerLost(inp.version, self.held.version)
        write, started = entry
        async with heartbeating(HEARTBEAT_S):
            try:
                folder, write_s = await asyncio.shield(write)
            finally:
                if write.done():
                    self._writes.pop(inp.version, None)
        log.info(
            "durable checkpoint written",
            version=inp.version,
            snapshot_s=started.snapshot_s,
            write_s=round(write_s, 3),
            estimated_gb=round(started.need_bytes / 1024**3, 3),
        )
        return durable_checkpoints.checkpoint_result(folder, inp.version, started.snapshot_s, write_s, started.pruned)

    @activity.defn(name=CONFIRM_CHECKPOINT.name)
    async def confirm_checkpoint(self, inp: ConfirmInput) -> int:
        """The checkpoint is marked confirmed and its batches recorded as trained, then their entries are
        acknowledged and deleted (a retry, or the workflow confirming it again after this trainer was lost,
        repeats none of it twice). Heartbeating: it runs under the trainer calls' heartbeat timeout, and a slow
        disk (fsyncs, a long records file) must not have it retried while this attempt still runs."""
        async with heartbeating(HEARTBEAT_S):
            await asyncio.to_thread(durable_checkpoints.confirm_checkpoint, self.settings, inp)
            acked = 0
            for batch in inp.batches:
                for src, ids in batch.ids.items():
                    acked += await self.store.samples.acknowledge(src, ids)
        return acked

    @activity.defn(name=EXPORT_CHECKPOINT.name)
    async def export_checkpoint(self, inp: ExportInput) -> SavedCheckpoint:
        """Keep a copy of a version under `checkpoints/saved/<label>`, out of reach of pruning: written from this
        trainer's memory when it holds the version, else copied from the version's checkpoint folder."""
        async with heartbeating(HEARTBEAT_S):
            async with self._step_lock:
                return await asyncio.to_thread(self._export, inp)

    def _export(self, inp: ExportInput) -> SavedCheckpoint:
        root = self.settings.checkpoints_dir
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
        trainer = self.held.holding(inp.version) if inp.version else None
        source = version_dir(root, inp.version) if inp.version else self.settings.served_model_path()
        if trainer is not None:
            trainer.save(target, str(inp.version), {"saved": inp.label})
            (target / SAVED_MANIFEST).write_text(saved.model_dump_json())
        elif source.is_dir():
            with atomic_dir(target) as tmp:
                shutil.copytree(source, tmp, dirs_exist_ok=True)
                (tmp / SAVED_MANIFEST).write_text(saved.model_dump_json())
        else:
            raise ApplicationError(
                f"version {inp.version} has no checkpoint at {source}, and this trainer does not hold it",
                type=ErrorType.CHECKPOINT_MISSING,
                non_retryable=True,
            )
        log.info("checkpoint saved", label=inp.label, version=inp.version, path=str(target))
        return saved

    @activity.defn(name=FIND_RESUME_POINT.name)
    async def find_resume_point(self, inp: ResumeInput) -> ResumePoint:
        """The newest confirmed checkpoint (complete by construction: written whole, then renamed into place), and
        this worker's own queue for the calls that need the trainer it holds. Heartbeating: called under the heartbeat
        timeout after a loss, and reading every checkpoint's version file on a slow disk takes a while."""
        async with heartbeating(HEARTBEAT_S):
            version = await asyncio.to_thread(newest_version, self.settings.checkpoints_dir)
        folder = version_dir(self.settings.checkpoints_dir, version)
        return ResumePoint(
            version=version, checkpoint=str(folder) if version else None, trainer_queue=self.worker_queue
        )

    @activity.defn(name=ACK_BATCH.name)
    async def ack_batch(self, inp: AckInput) -> int:
        """Acknowledge, then delete: the sample stream must not grow with every sample ever trained (the record
        streams and the JSONL files keep what was judged)."""
        return sum([await self.store.samples.acknowledge(src, ids) for src, ids in inp.ids.items()])


def _record(settings: Settings, summary: StepSummary, from_version: int) -> None:
    record_step(
        settings.records_dir,
        summary.version,
        from_version,
        summary.batch,
        summary.sample_ids,
        summary.stale_ids,
        summary.missing,
    )


def _record_dropped(
    settings: Settings, version: int, batch: str, stale: list[str], missing: dict[str, list[str]]
) -> None:
    if stale or missing:
        record_dropped(settings.records_dir, version, batch, stale, missing)


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


def _empty_cuda_cache() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()
