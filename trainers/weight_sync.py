"""Rank 0 of weight sync without disk: the trainer broadcasts a version's tensors to every policy server.

Why here (trainers/), not in openclaw_rl/: it reads a trainer's weights (`hf_state_dict`) and owns a process group of
the training process; the HTTP calls and the group's making live in policy_client.weight_sync, which the engine
shares.

One `WeightBroadcaster` per trainer process keeps its group across versions. A version goes out as: (once) set up
the group, every server joining as ranks 1..N while the trainer joins as rank 0; rank 0 stages the version's
buckets; pause generation (in place: held, never aborted); per bucket of about `bucket_mb`, POST
/update_weights_from_distributed to every server while broadcasting its tensors in the same order; continue
generation; check every server now reports the version. Any failure drops the group (it is set up afresh next time,
under a new name) and is raised for the caller to fall back to disk.

Rank 0 is whoever holds the weights: this process for an in-process trainer (`InProcessRankZero`), or rank 0 of a
megatron torchrun job (its `JobRankZero`, trainers.megatron_job_client), which gathers the whole model from its
ranks and broadcasts it itself: the weights never pass through this process or a disk. The broadcaster drives the
HTTP side either way.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import math
import os
import secrets
import threading
from typing import Any

import structlog
import torch
from pydantic import BaseModel, Field

from openclaw_rl.ports import free_port
from openclaw_rl.settings import WeightSyncSettings
from policy_client.weight_sync import (
    InitWeightsUpdateGroupRequest,
    UpdateWeightsFromDistributedRequest,
    WeightSyncClient,
    WeightSyncError,
    broadcast_bucket,
    close_process_group,
    dtype_name,
    open_process_group,
)

log = structlog.get_logger(__name__)

MIB = 1024 * 1024
GROUP_PREFIX = "openclaw-weights"
"""Group names are `<prefix>-<pid>-<incarnation>-<n>`: a group set up afresh never meets keys an older one left in
the rendezvous store (torch shares one store per port within a process), and a restarted trainer never reuses the
name of its dead incarnation's group, which a server may still hold and would refuse (a host's own PID namespace
gives the restarted trainer the same pid)."""
_INCARNATION = secrets.token_hex(4)


_GROUP_NUMBERS = itertools.count(1)
"""One count per process, not per broadcaster: a server refuses a group name it still holds (one whose destroy
failed), and each megatron job gets a broadcaster of its own."""


class GenerationStillPaused(WeightSyncError):
    """/continue_generation failed on a server after every attempt: it may hold its requests until it gets one."""


def hf_state_dict(trainer: Any) -> dict[str, torch.Tensor]:
    """The trainer's current weights under Hugging Face names, as the servers load them: a backend's own
    `hf_state_dict()` (megatron), the merged weights of a LoRA model, or the plain model's state dict."""
    own = getattr(trainer, "hf_state_dict", None)
    if callable(own):
        return own()
    model = getattr(trainer, "model", None)
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"{type(trainer).__name__} holds no model in this process to send weights from")
    if getattr(trainer.cfg, "lora", None):
        from trainers.lora import merged_state_dict

        return merged_state_dict(model)
    return {name: t.detach() for name, t in model.state_dict().items()}


def distinct(state: dict[str, torch.Tensor]) -> list[tuple[str, torch.Tensor]]:
    """The tensors to send, in order, each storage once: tied weights (embedding and LM head) travel once, under the
    first name (the servers' tied weights share that storage too)."""
    seen: set[tuple[int, int, tuple[int, ...]]] = set()
    out = []
    for name, t in state.items():
        key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape))
        if key in seen:
            continue
        seen.add(key)
        out.append((name, t))
    return out


def buckets(
    named: list[tuple[str, torch.Tensor]], bucket_bytes: int, wire_dtype: torch.dtype | None = None
) -> list[list[tuple[str, torch.Tensor]]]:
    """Consecutive groups of about `bucket_bytes` as sent (floating-point tensors in `wire_dtype` when given; a
    tensor larger than that travels alone)."""
    out: list[list[tuple[str, torch.Tensor]]] = []
    current: list[tuple[str, torch.Tensor]] = []
    size = 0
    for name, t in named:
        itemsize = wire_dtype.itemsize if wire_dtype is not None and t.is_floating_point() else t.element_size()
        nbytes = t.numel() * itemsize
        if current and size + nbytes > bucket_bytes:
            out.append(current)
            current, size = [], 0
        current.append((name, t))
        size += nbytes
    if current:
        out.append(current)
    return out


def resolve_backend(configured: str, device: torch.device) -> str:
    """auto: nccl when the trainer's weights live on CUDA, else gloo."""
    if configured != "auto":
        return configured
    return "nccl" if device.type == "cuda" else "gloo"


def resolve_wire_dtype(configured: str, bf16_on_cuda: bool) -> torch.dtype | None:
    """The dtype floating-point weights are sent in; None: their own. auto: bf16 when the trainer trains in bf16 on
    CUDA (a megatron job's ranks included, though its weights reach this process through the CPU)."""
    if configured == "float32":
        return torch.float32
    if configured == "bfloat16" or (configured == "auto" and bf16_on_cuda):
        return torch.bfloat16
    return None


class GroupSpec(BaseModel):
    """What rank 0 needs to open a weight-update group (the servers get the same in their join request)."""

    master_address: str
    master_port: int = Field(ge=1, le=65535)
    world_size: int = Field(ge=2)
    group_name: str
    backend: str
    timeout_s: float = Field(gt=0)


class BucketSpec(BaseModel):
    """One bucket as it goes on the wire: the body of its /update_weights_from_distributed, less the version."""

    names: list[str]
    dtypes: list[str]
    shapes: list[list[int]]


def wire_dtype_named(name: str | None) -> torch.dtype | None:
    return None if name is None else getattr(torch, name)


def open_as_rank_zero(spec: GroupSpec) -> Any:
    """Open the group as its rank 0; blocks until every server has joined or `spec.timeout_s` passes."""
    return open_process_group(
        spec.master_address, spec.master_port, 0, spec.world_size, spec.group_name, spec.backend, spec.timeout_s
    )


class RankZeroEnd:
    """The sending end of a weight-update group, synchronous: opens it as rank 0, cuts a version into buckets as they
    go on the wire, broadcasts one bucket at a time. Runs in a thread of the trainer process, or in a megatron job's
    rank 0, which gathered the whole model there."""

    def __init__(self, device: torch.device):
        self.device = device
        """Where the weights live: an NCCL group sends from there, gloo from the CPU."""
        self.group: Any = None
        self.timeout_s = 0.0
        self.send_device = torch.device("cpu")
        self._parts: list[list[tuple[str, torch.Tensor]]] = []
        self._wire_dtype: torch.dtype | None = None

    def open(self, spec: GroupSpec) -> None:
        """Blocks until every server has joined or `spec.timeout_s` passes."""
        self.close()
        self.adopt(open_as_rank_zero(spec), spec.backend, spec.timeout_s)

    def adopt(self, group: Any, backend: str, timeout_s: float) -> None:
        self.group = group
        self.timeout_s = timeout_s
        self.send_device = self.device if backend == "nccl" else torch.device("cpu")

    def close(self) -> None:
        group, self.group, self._parts = self.group, None, []
        if group is not None:
            close_process_group(group)

    def stage(
        self, state: dict[str, torch.Tensor], bucket_bytes: int, wire_dtype: torch.dtype | None
    ) -> list[BucketSpec]:
        """Keep `state`'s tensors, cut into buckets of about `bucket_bytes` as sent; their specs, in sending order."""
        self._wire_dtype = wire_dtype
        self._parts = buckets(distinct(state), bucket_bytes, wire_dtype)
        return [
            BucketSpec(
                names=[n for n, _ in part],
                dtypes=[dtype_name(self._dtype_on_wire(t)) for _, t in part],
                shapes=[list(t.shape) for _, t in part],
            )
            for part in self._parts
        ]

    def send(self, index: int) -> None:
        """Broadcast bucket `index` (the servers receive it while their update call for it runs); blocks. The version's
        tensors are let go after its last bucket."""
        if self.group is None:
            raise RuntimeError("no weight-update group is open")
        if not 0 <= index < len(self._parts):
            raise ValueError(f"bucket {index} of {len(self._parts)} staged")
        tensors = [
            t.detach().to(self.send_device, dtype=self._dtype_on_wire(t)).contiguous() for _, t in self._parts[index]
        ]
        broadcast_bucket(self.group, tensors, self.timeout_s)
        if index == len(self._parts) - 1:
            self._parts = []

    def _dtype_on_wire(self, t: torch.Tensor) -> torch.dtype:
        return self._wire_dtype if self._wire_dtype is not None and t.is_floating_point() else t.dtype


class InProcessRankZero:
    """Rank 0 in this process: the trainer's weights are here (the caller hands them to `stage`)."""

    sends_own_weights = False

    def __init__(self, device: torch.device):
        self.end = RankZeroEnd(device)

    async def open_group(self, spec: GroupSpec, joins: list[asyncio.Future]) -> None:
        opened = _open_in_thread(spec)
        try:
            # A server that refuses ends the wait at once (the others cannot complete the rendezvous without it).
            await asyncio.wait_for(asyncio.gather(*joins), timeout=spec.timeout_s + 5)
            handle = await asyncio.wait_for(opened.result_async(), timeout=spec.timeout_s + 5)
        except BaseException:
            opened.abandon()  # the thread closes what it opens, if it ever does
            raise
        self.end.adopt(handle, spec.backend, spec.timeout_s)

    async def stage(
        self, state: dict[str, torch.Tensor] | None, bucket_bytes: int, wire_dtype: torch.dtype | None
    ) -> list[BucketSpec]:
        if state is None:
            raise TypeError("an in-process trainer's weights must be given to publish")
        return self.end.stage(state, bucket_bytes, wire_dtype)

    async def send_bucket(self, index: int) -> None:
        await asyncio.to_thread(self.end.send, index)

    async def close_group(self) -> None:
        await asyncio.to_thread(self.end.close)


class WeightBroadcaster:
    """The HTTP side of weight sync, and its group's bookkeeping; keeps the group across versions until something
    fails. `rank0`: the sending end (default: this process, whose weights `publish` is given)."""

    def __init__(
        self,
        cfg: WeightSyncSettings,
        client: WeightSyncClient,
        device: torch.device,
        bf16_on_cuda: bool = False,
        rank0: Any = None,
    ):
        self.cfg = cfg
        self.client = client
        self.backend = resolve_backend(cfg.backend, device)
        self.wire_dtype = resolve_wire_dtype(cfg.wire_dtype, bf16_on_cuda)
        self.rank0 = rank0 if rank0 is not None else InProcessRankZero(device)
        self._group: str | None = None
        self._members = client
        """The servers of the group (a view of `client`): those that answered when it was set up."""
        self._left_behind: list[tuple[str, str]] = []
        """(server, group) of members left out while they held the group: destroyed there once they answer."""

    @property
    def group_name(self) -> str | None:
        return self._group

    @property
    def members(self) -> list[str]:
        """The servers the last publication went to."""
        return self._members.urls

    async def publish(
        self, state: dict[str, torch.Tensor] | None, version: str, answering: list[str] | None = None
    ) -> None:
        """Send `state` (None: rank 0's own weights, for a rank 0 that holds them) as `version` to every server,
        generation paused meanwhile; raises WeightSyncError (the group is dropped; the servers keep serving their
        old weights) or GenerationStillPaused. `answering`: the servers the caller just found answering (else each
        is asked here).

        Only the servers that answer now take part: one cut off would hold the others paused until the collective's
        timeout. A server left out serves its old version until a later publication reaches it; an engine behind
        the published version is kept out of rotation meanwhile (stack.router.admit_caught_up)."""
        if answering is None:
            answering = list(await self.client.answering(self.cfg.probe_timeout_s))
        await self._take_part(answering)
        await self.ensure_group()
        try:
            try:
                # Staged before the pause (a megatron job gathers the whole model here): the servers are held only
                # while the buckets go out, well within their pause lease (engine.pause_lease_s).
                parts = await self.rank0.stage(state, int(self.cfg.bucket_mb * MIB), self.wire_dtype)
                await self._members.pause("in_place")
                await self._send_watched(parts, version)
            finally:  # also after a pause that reached only some servers
                await self._resume()
            await self._check_served(version)
        except GenerationStillPaused:
            await self.reset("a server could not be told to continue")
            raise
        except (WeightSyncError, RuntimeError, ValueError) as exc:
            await self.reset(str(exc))
            raise WeightSyncError(None, "publish", f"version {version} was not sent: {exc}") from exc
        except BaseException:  # cancelled half way: a server may wait for the rest, and rank 0 holds what it staged
            await asyncio.shield(self.reset("the publication was cancelled"))
            raise

    async def _take_part(self, answering: list[str]) -> None:
        """Make the servers that answer the group's members; a change drops the group kept from before."""
        if not answering:
            raise WeightSyncError(None, "/get_weight_version", f"no policy server answers: {self.client.urls}")
        await self._destroy_left_behind(answering)
        if answering == self._members.urls:
            return
        left_out = [u for u in self.client.urls if u not in answering]
        if left_out:
            log.warning("policy servers that do not answer are left out of this publication", servers=left_out)
        self._leave_out(left_out)
        await self.reset(f"the servers that answer are now {answering}")
        self._members = self.client.only(answering)

    def _leave_out(self, urls: list[str]) -> None:
        """Members that stopped answering: no call waits on them any more, and the group they may still hold is
        destroyed on them once they answer again (a server keeps only a few groups)."""
        if self._group is not None:
            self._left_behind += [(u, self._group) for u in urls if u in self._members.urls]
        self._members = self._members.only([u for u in self._members.urls if u not in urls])

    async def _destroy_left_behind(self, answering: list[str]) -> None:
        back = [(u, g) for u, g in self._left_behind if u in answering]
        self._left_behind = [(u, g) for u, g in self._left_behind if u not in answering]
        for url, group in back:
            try:
                await self.client.destroy_group_on(url, group)
            except WeightSyncError as exc:  # usually dropped already: its broadcast failed or timed out
                log.info("a server back in reach did not destroy an old group", url=url, group=group, error=str(exc))
            try:
                # Cut off between a pause and its continue, it may still hold its requests (SGLang has no end to a
                # pause but this; our engine ends one itself after engine.pause_lease_s).
                await self.client.only([url]).resume()
            except WeightSyncError as exc:
                log.warning("a server back in reach could not be told to continue", url=url, error=str(exc))

    async def ensure_group(self) -> None:
        """Set the group up unless one is kept from an earlier version; raises WeightSyncError."""
        if self._group is not None:
            return
        name = f"{GROUP_PREFIX}-{os.getpid()}-{_INCARNATION}-{next(_GROUP_NUMBERS)}"
        port = self.cfg.master_port or free_port(host="")  # the servers connect from anywhere
        world = len(self._members.urls) + 1
        spec = GroupSpec(
            master_address=self.cfg.master_addr,
            master_port=port,
            world_size=world,
            group_name=name,
            backend=self.backend,
            timeout_s=self.cfg.timeout_s,
        )
        joins = [
            asyncio.ensure_future(
                self._members.init_group(
                    url,
                    InitWeightsUpdateGroupRequest(
                        master_address=self.cfg.master_addr,
                        master_port=port,
                        rank_offset=rank,
                        world_size=world,
                        group_name=name,
                        backend=self.backend,
                    ),
                )
            )
            for rank, url in enumerate(self._members.urls, start=1)
        ]
        try:
            await self.rank0.open_group(spec, joins)
        except (WeightSyncError, RuntimeError, ValueError, OSError, TimeoutError) as exc:
            for j in joins:
                j.cancel()
            raise WeightSyncError(
                None, "/init_weights_update_group", f"group {name} could not be set up: {_first_line(exc)}"
            ) from exc
        self._group = name
        log.info("weight-update group set up", group=name, world_size=world, backend=self.backend, port=port)

    async def reset(self, reason: str) -> None:
        """Drop the group on both ends (servers best-effort: one that is gone has dropped it already)."""
        group, self._group = self._group, None
        if group is None:
            return
        log.warning("dropping the weight-update group", group=group, reason=reason)
        try:
            await self.rank0.close_group()
        except (WeightSyncError, RuntimeError, ValueError, OSError) as exc:
            log.warning("closing the trainer's end of the group failed", group=group, error=_first_line(exc))
        members = self._members.urls
        results = await asyncio.gather(
            *(self._members.destroy_group_on(url, group) for url in members), return_exceptions=True
        )
        for url, r in zip(members, results):
            if isinstance(r, BaseException):
                log.info("a server did not destroy the group (it may have dropped it already)", url=url, error=str(r))

    async def close(self) -> None:
        await self.reset("the trainer is shutting down")

    async def _send(self, parts: list[BucketSpec], version: str) -> None:
        group = self._group
        assert group is not None  # ensure_group ran
        for i, bucket in enumerate(parts):
            req = UpdateWeightsFromDistributedRequest(
                names=bucket.names,
                dtypes=bucket.dtypes,
                shapes=bucket.shapes,
                group_name=group,
                weight_version=version,
                flush_cache=i == len(parts) - 1,
            )
            posted = asyncio.ensure_future(self._members.update(req))
            sent = asyncio.ensure_future(self.rank0.send_bucket(i))
            results = await asyncio.gather(posted, sent, return_exceptions=True)
            failed = [r for r in results if isinstance(r, BaseException)]
            if failed:
                raise failed[0]
        log.info(
            "weights broadcast",
            version=version,
            tensors=sum(len(b.names) for b in parts),
            buckets=len(parts),
            mib=round(sum(_nbytes(b) for b in parts) / MIB, 2),
            group=group,
            rank0=type(self.rank0).__name__,
        )

    async def _send_watched(self, parts: list[BucketSpec], version: str) -> None:
        """`_send`, while the members are asked every `probe_timeout_s` whether they still answer: one silent twice
        in a row (its host cut off or gone mid-publication) ends the publication then, not at the collective's
        timeout, so the others are not held paused that long."""
        sending = asyncio.ensure_future(self._send(parts, version))
        silent: set[str] = set()
        try:
            while True:
                done, _ = await asyncio.wait({sending}, timeout=self.cfg.probe_timeout_s)
                if done:
                    return sending.result()
                answering = await self._members.answering(self.cfg.probe_timeout_s)
                now = {u for u in self._members.urls if u not in answering}
                if gone := sorted(now & silent):
                    self._leave_out(gone)  # resuming and dropping the group then wait on the others only
                    raise WeightSyncError(gone[0], "/get_weight_version", "stopped answering during the publication")
                silent = now
        finally:
            if not sending.done():
                sending.cancel()
                with contextlib.suppress(BaseException):
                    await sending

    async def _resume(self) -> None:
        try:
            await self._members.resume()
        except WeightSyncError as exc:
            raise GenerationStillPaused(exc.url, exc.path, exc.reason) from exc

    async def _check_served(self, version: str) -> None:
        """Every member must now serve `version` (one that only staged part of it would not)."""
        served = await self._members.weight_versions()
        behind = {url: v for url, v in served.items() if v != version}
        if behind:
            raise WeightSyncError(
                None, "/get_weight_version", f"not serving version {version} after the sync: {behind}"
            )


class _Opening:
    """The trainer's rendezvous, in a thread of its own: a server that refuses to join must not leave the trainer
    blocked until the rendezvous times out, so the wait can be abandoned (the thread then closes what it opens)."""

    def __init__(self) -> None:
        self.future: concurrent.futures.Future = concurrent.futures.Future()
        self._abandoned = threading.Event()

    def result_async(self) -> asyncio.Future:
        return asyncio.wrap_future(self.future)

    def abandon(self) -> None:
        self._abandoned.set()

    def run(self, spec: GroupSpec) -> None:
        try:
            handle = open_as_rank_zero(spec)
        except BaseException as exc:  # delivered to the waiting coroutine, if it still waits
            self.future.set_exception(exc)
            return
        if self._abandoned.is_set():
            close_process_group(handle)
            return
        self.future.set_result(handle)


def _open_in_thread(spec: GroupSpec) -> _Opening:
    opening = _Opening()
    threading.Thread(target=opening.run, args=(spec,), name=f"weight-group-{spec.group_name}", daemon=True).start()
    return opening


def _nbytes(bucket: BucketSpec) -> int:
    return sum(
        math.prod(shape) * wire_dtype_named(dtype).itemsize for shape, dtype in zip(bucket.shapes, bucket.dtypes)
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:400] if text else type(exc).__name__
