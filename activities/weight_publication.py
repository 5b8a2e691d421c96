"""Publishing a policy version to every server: from the trainer's memory, over a process group, or from disk.

A version published from memory never waits for a durable checkpoint (`training.weight_sync.mode`):
- memory: the weights, in the dtype the servers serve, are handed to the servers on this machine through shared
  memory (a CPU trainer) or CUDA IPC handles (one GPU), `/update_weights_from_tensor`;
- distributed: broadcast over a process group kept across versions (trainers.weight_sync), for servers elsewhere;
- disk: the weights alone, in the served dtype, in `checkpoints/serve/v<version>`, loaded by every server.
memory falls back to disk on any failure; distributed does too unless `weight_sync.disk_fallback` is false (servers
on hosts of their own, which cannot read this disk): then a failed broadcast fails the activity (retryable), and
the retry sets a new process group up. A server that already serves the version is skipped, so a retried
publication reloads nothing. Runs that write a checkpoint at every step, and a workflow resuming from a durable
checkpoint, publish that checkpoint: from disk, or, distributed, broadcast from the trainer's memory (a trainer
that restarted since loads the checkpoint first: the servers need not see its folder).
"""

from __future__ import annotations

import asyncio
import shutil
import time
import weakref
from pathlib import Path

import structlog
import torch
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.canary_start import start_canary
from activities.held_trainer import HeldTrainer
from contracts.errors import ErrorType
from contracts.training import PublishedWeights, PublishWeightsInput
from openclaw_rl.checkpoints import atomic_dir, prune_served, served_dir, write_version_info
from openclaw_rl.settings import Settings
from policy_client import PolicyClient
from policy_client.weight_handoff import UpdateWeightsFromTensorRequest, handoff_possible, pack
from policy_client.weight_sync import WeightSyncClient, WeightSyncError
from store.adapters import AdapterRef
from store.client import Store
from trainers.base import PolicyTrainer
from trainers.trainer_state import copy_tokenizer
from trainers.user_adapters import UserAdapterTrainer
from trainers.weight_sync import (
    GenerationStillPaused,
    WeightBroadcaster,
    buckets,
    distinct,
    hf_state_dict,
    resolve_wire_dtype,
)

log = structlog.get_logger(__name__)

MIB = 1024 * 1024


class TrainerLost(ApplicationError):
    """This process does not hold the version asked for (it restarted since): the workflow goes back to its last
    durable checkpoint."""

    def __init__(self, wanted: int, held: int | None):
        super().__init__(
            f"this trainer holds version {held}, not {wanted} (it restarted since); the versions since the last "
            "durable checkpoint are trained again",
            type=ErrorType.TRAINER_LOST,
            non_retryable=True,
        )


def served_dtype(settings: Settings, trainer: PolicyTrainer) -> torch.dtype:
    """The dtype the servers serve: the embedded engine's (engine.dtype; auto: bf16 on CUDA, fp32 on a CPU), or what
    `weight_sync.wire_dtype` says for other servers (auto: bf16 when the trainer trains in bf16 on a GPU)."""
    if settings.embedded_engine:
        if settings.engine.dtype != "auto":
            return getattr(torch, settings.engine.dtype)
        on_cuda = settings.engine.device == "cuda" or (settings.engine.device == "auto" and torch.cuda.is_available())
        return torch.bfloat16 if on_cuda else torch.float32
    return resolve_wire_dtype(settings.training.weight_sync.wire_dtype, trainer.bf16_on_cuda) or torch.float32


def _release(parts) -> None:
    """Free the hand-off buffers; on CUDA also the IPC bookkeeping of the servers' mapped handles, so a GPU does not
    keep the memory of every version ever sent (torch frees a shared block only once its receivers let go)."""
    cuda = any(b.kind == "cuda_ipc" for b in parts.buckets)
    parts.close()
    if cuda:
        torch.cuda.ipc_collect()
        torch.cuda.empty_cache()


class WeightPublisher:
    def __init__(self, settings: Settings, held: HeldTrainer, step_lock: asyncio.Lock):
        self.settings = settings
        self.held = held
        self._step_lock = step_lock  # the weights must not move while they are on the wire
        self._broadcaster: WeightBroadcaster | None = None  # distributed weight sync: its group outlives a version
        self._sender_of: weakref.ref | None = None  # the trainer the broadcaster was made for (not kept alive)

    async def aclose(self) -> None:
        if self._broadcaster is not None:
            await self._broadcaster.close()
            await self._broadcaster.client.aclose()

    # ---- from memory (workflows that publish from memory) ----------------------------------------------------------
    async def from_memory(self, version: int, durable: int | None = None) -> PublishedWeights:
        """`durable`: the newest durable checkpoint; a process that holds nothing yet loads it if it is `version`."""
        started = time.perf_counter()
        async with self._step_lock:
            trainer = self.held.holding(version)
            if trainer is None and self.held.version is None and version == durable:
                trainer = await asyncio.to_thread(self.held.from_durable, durable, version)
            if trainer is None:
                raise TrainerLost(version, self.held.version)
            if isinstance(trainer, UserAdapterTrainer):
                return await self._adapters(trainer, version, started)
            async with WeightSyncClient.from_settings(self.settings) as client:
                # A server that does not answer now (its host cut off or restarting) must not hold the version back
                # from the others: it catches up when it answers again (stack.router.admit_caught_up).
                served = await client.answering(self.settings.training.weight_sync.probe_timeout_s)
            if not served:
                raise WeightSyncError(None, "/get_weight_version", f"no policy server answers: {client.urls}")
            behind = [url for url, v in served.items() if v != str(version)]
            if not behind:
                return PublishedWeights(version=version, route="none", servers=[], seconds=0.0)
            mode = self.settings.training.weight_sync.mode
            route, nbytes = "disk", 0
            if mode in ("auto", "memory") and self.settings.embedded_engine:
                nbytes = await self._hand_over(trainer, version, behind)
                route = "memory" if nbytes else "disk"
            elif mode == "distributed" and await self._broadcast(trainer, version, list(served)):
                route = "distributed"
            if route == "disk":
                nbytes = await self._weights_to_disk(trainer, version)
        return PublishedWeights(
            version=version, route=route, servers=behind, seconds=time.perf_counter() - started, bytes=nbytes
        )

    async def _adapters(self, trainer: UserAdapterTrainer, version: int, started: float) -> PublishedWeights:
        """Per-user adapters: each adapter that changed since the last publication written to
        `<data dir>/adapters/<user>/v<its steps>`, loaded by every policy server under its own name, then recorded as
        that user's (the next turn is served by it); the user's previous adapter is unloaded from the servers
        (a request still using it keeps it until its answer is out)."""
        owners = sorted(trainer.touched)
        if not owners:
            return PublishedWeights(version=version, route="none", servers=[], seconds=0.0)
        store = Store.from_settings(self.settings)
        nbytes, servers = 0, []
        candidates: list[tuple[str, int]] = []
        try:
            async with WeightSyncClient.from_settings(self.settings) as client:
                for owner in owners:
                    if await store.adapters.owner_forgotten(owner):  # forgotten since the step: never published
                        trainer.bank.forget(owner)
                        continue
                    state = trainer.bank.adapter(owner)
                    steps = state.steps
                    folder = self.settings.data_dir / "adapters" / owner / f"v{steps}"
                    await asyncio.to_thread(trainer.bank.save, owner, folder, str(steps))
                    nbytes += sum(f.stat().st_size for f in folder.iterdir() if f.is_file())
                    ref = AdapterRef(name=f"{owner}-v{steps}", path=str(folder), version=steps, lineage=state.lineage)
                    servers = list(await client.load_lora_adapter(ref.name, ref.path))
                    if self.settings.eval.canary.enabled:  # a candidate until it earns promotion
                        proposed = await store.canaries.propose(owner, ref, began_at=state.began_at)
                        if proposed.status in ("candidate", "next"):  # started or woken: none is left unjudged
                            candidates.append((owner, steps))
                        if proposed.status != "forgotten":
                            old = proposed.replaced_next
                            if old is not None and old.name != ref.name:  # a waiting version a newer one replaced
                                await client.unload_lora_adapter(old.name)
                            if proposed.status == "stale":  # not newer than the one judged: serves no one
                                await client.unload_lora_adapter(ref.name)
                            continue
                    # Recorded only if no forget came since the check above or since the adapter began (one
                    # script): a forget in between takes the record, files and loaded copies it finds; this takes
                    # back what it made after, so the user's adapter serves no one (a new key for the id included).
                    done = await store.adapters.publish(owner, ref, began_at=state.began_at)
                    if not done.recorded:
                        log.warning("a user's adapter was not published: its user was forgotten", user=owner)
                        await client.unload_lora_adapter(ref.name)
                        await asyncio.to_thread(shutil.rmtree, folder, True)
                        trainer.bank.forget(owner)
                        continue
                    if done.previous is not None and done.previous.name != ref.name:
                        await client.unload_lora_adapter(done.previous.name)
        finally:
            await store.aclose()
        for owner, steps in candidates:
            await start_canary(activity.client(), self.settings, owner, steps)
        trainer.touched.difference_update(owners)
        log.info("user adapters published", version=version, users=len(owners), bytes=nbytes)
        return PublishedWeights(
            version=version, route="adapters", servers=servers, seconds=time.perf_counter() - started, bytes=nbytes
        )

    async def _hand_over(self, trainer: PolicyTrainer, version: int, urls: list[str]) -> int:
        """Shared memory / CUDA IPC to every server in `urls`; the bytes handed over, 0 when it could not be done
        (logged: the caller falls back to disk)."""
        why = handoff_possible(trainer.device)
        if why is not None:
            log.warning("weights cannot be handed over from memory; publishing through disk", reason=why)
            return 0
        dtype = served_dtype(self.settings, trainer)
        bucket_bytes = int(self.settings.training.weight_sync.bucket_mb * MIB)

        def packed():
            named = distinct(hf_state_dict(trainer))
            return pack(buckets(named, bucket_bytes, dtype), dtype, trainer.device)

        parts = None
        try:
            parts = await asyncio.to_thread(packed)
            req = UpdateWeightsFromTensorRequest(buckets=parts.buckets, weight_version=str(version))
            async with WeightSyncClient.from_settings(self.settings) as client:
                await asyncio.gather(*(client.update_weights_from_tensor(url, req) for url in urls))
        except Exception as exc:  # noqa: BLE001 - any failure here (a GPU out of memory while packing, a refusal,
            # a server gone) leaves the disk route, which needs none of it; retrying the memory route would only
            # meet the same failure again, without end.
            log.warning(
                "handing the weights over failed; publishing through disk",
                version=version,
                error=f"{type(exc).__name__}: {exc}"[:500],
            )
            return 0
        finally:
            if parts is not None:
                await asyncio.to_thread(_release, parts)
        log.info("weights handed over", version=version, servers=len(urls), mib=round(parts.nbytes / MIB, 1))
        return parts.nbytes

    async def _weights_to_disk(self, trainer: PolicyTrainer, version: int) -> int:
        """The weights alone, in the served dtype, as a servable folder every server in `urls` loads."""
        folder = served_dir(self.settings.checkpoints_dir, version)
        dtype = served_dtype(self.settings, trainer)

        def write() -> int:
            from safetensors.torch import save_file

            state = {
                name: (t.to(dtype) if t.is_floating_point() else t).detach().to("cpu").contiguous()
                for name, t in distinct(hf_state_dict(trainer))
            }
            with atomic_dir(folder) as tmp:
                save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
                config = getattr(getattr(trainer, "model", None), "config", None)
                if config is not None:
                    config.save_pretrained(tmp)
                elif (Path(trainer.source) / "config.json").is_file():  # a backend without a Hugging Face model
                    shutil.copy2(Path(trainer.source) / "config.json", tmp / "config.json")
                copy_tokenizer(trainer.source, tmp)
                write_version_info(tmp, {"weight_version": str(version), "served_dtype": str(dtype)})
            return sum(t.numel() * t.element_size() for t in state.values())

        nbytes = await asyncio.to_thread(write)
        await self._load_from_disk(str(folder), version)  # a server that serves it already reloads nothing
        prune_served(self.settings.checkpoints_dir, version)
        return nbytes

    async def _load_from_disk(self, checkpoint: str, version: int) -> list[str]:
        async with PolicyClient.from_settings(self.settings) as client:
            results = await client.update_weights_from_disk(checkpoint, weight_version=str(version))
        failed = [r.message for r in results if not r.success]
        if failed:
            raise ApplicationError(
                f"a policy server refused version {version}: {failed}", type=ErrorType.WEIGHT_LOAD_FAILED
            )
        return [r.message for r in results]

    # ---- a checkpoint folder (runs that write a checkpoint at every step) ------------------------------------------
    async def checkpoint(self, inp: PublishWeightsInput) -> list[str]:
        if self.settings.training.weight_sync.mode == "distributed":
            async with self._step_lock:
                trainer = self.held.holding(inp.version)
                if trainer is None:
                    # A trainer process that restarted holds nothing yet (or another version): the checkpoint goes
                    # into its memory and out over the group, like any version; its folder is on this disk only.
                    trainer = await asyncio.to_thread(self.held.from_durable, inp.version, inp.version)
                if await self._broadcast(trainer, inp.version):
                    b = self._broadcaster
                    sender = " from the megatron job's rank 0" if b.rank0.sends_own_weights else ""
                    return [f"version {inp.version} broadcast to {len(b.members)} servers ({b.group_name})" + sender]
            log.info("the servers load the checkpoint from disk", version=inp.version)
        return await self._load_from_disk(inp.checkpoint, inp.version)

    # ---- over a process group ----------------------------------------------------------------------------------------
    async def _broadcast(self, trainer: PolicyTrainer, version: int, answering: list[str] | None = None) -> bool:
        """Broadcast the trainer's weights as `version` to the servers `answering` (None: those that answer now);
        False when the servers must load them from disk instead (the sync failed: logged, generation continued); with
        `disk_fallback` false a failure raises a retryable WEIGHT_LOAD_FAILED instead. Call with the step lock
        held."""
        broadcaster = await self._broadcaster_for(trainer)
        try:
            own = broadcaster.rank0.sends_own_weights  # a megatron job's rank 0 gathers and sends them itself
            state = None if own else await asyncio.to_thread(hf_state_dict, trainer)
            await broadcaster.publish(state, str(version), answering)
        except GenerationStillPaused as exc:
            # Falling back to disk would not help: a server may be holding its requests. Retrying sends the
            # version again and continues generation again.
            raise ApplicationError(
                f"version {version}: a policy server could not be told to continue generation: {exc}",
                type=ErrorType.WEIGHT_LOAD_FAILED,
            ) from exc
        except (WeightSyncError, TypeError) as exc:
            if not self.settings.training.weight_sync.disk_fallback:
                # The servers cannot read this disk: retried, on a new group (the broadcaster dropped the old one).
                log.warning("distributed weight sync failed; retrying", version=version, error=str(exc))
                raise ApplicationError(
                    f"version {version} could not be broadcast to the policy servers: {exc} "
                    "(training.weight_sync.disk_fallback is false: retried, never sent as a folder path)",
                    type=ErrorType.WEIGHT_LOAD_FAILED,
                    non_retryable=isinstance(exc, TypeError),  # a trainer that cannot send its weights never will
                ) from exc
            log.warning(
                "distributed weight sync failed; the servers load the weights from disk",
                version=version,
                error=str(exc),
            )
            return False
        return True

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
