"""The engine's side of weight sync without disk: membership of a trainer's process group, receiving, staging.

A trainer opens a group (rank 0) that this engine joins as rank `rank_offset`
(`/init_weights_update_group`); each `/update_weights_from_distributed` call
then receives one bucket of tensors broadcast by rank 0. Nothing is applied per
bucket: tensors are checked against the served model (name, shape) and staged
in its dtype and device, and the staged version is swapped in at once when it
covers every weight of the model (tied weights count once). So a failed or
partial update never leaves a mix: the old weights and version go on serving.

What ends a version in progress (the staged tensors are dropped, the old
weights stay): a tensor that fits no weight (the group stays usable: the
broadcast was still received, so both ends remain in step); a broadcast that
fails (the trainer died, a timeout) or a bucket the engine cannot receive
(then the group is out of step and is dropped: re-create it); a bucket
labelled with another weight_version; destroying the group.

Differences from SGLang, which loads each bucket as it arrives: a bucket that
does not complete the version answers success with "staged"; the prefix cache
is always emptied when a version is swapped in (KV of the old weights must not
serve the new ones), whatever flush_cache says.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field

import structlog
import torch

from engine.weights import LoadedModel, WeightSpec, weight_specs
from policy_client.weight_sync import (
    InitWeightsUpdateGroupRequest,
    UpdateWeightsFromDistributedRequest,
    broadcast_bucket,
    close_process_group,
    open_process_group,
)

log = structlog.get_logger(__name__)

GROUP_TIMEOUT_S = 120.0
"""Longest wait for the group's rendezvous and for one bucket's broadcast: a trainer gone silent (not dead: a dead
one closes its connections and the broadcast fails at once) frees the engine after this."""
MAX_GROUPS = 4
"""Groups one engine keeps at once: a trainer re-creates its group under a new name after a failure, and an old one
it could not destroy must not pile up."""
BACKENDS = ("gloo", "nccl")


class WeightSyncRefused(Exception):
    """A group call or update the engine did not carry out; the message says why (the old weights serve on)."""


@dataclass
class Staged:
    """The tensors of one version received so far, in the served dtype and device."""

    version: str | None
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    storages: set[int] = field(default_factory=set)


@dataclass
class BucketOutcome:
    """What one bucket did: `complete` holds the whole version when this bucket finished it, to be swapped in."""

    staged: int
    needed: int
    version: str | None
    complete: dict[str, torch.Tensor] | None


class MemberGroup:
    """This engine's membership of one trainer's group, and the version being received over it."""

    def __init__(
        self, req: InitWeightsUpdateGroupRequest, handle: object, receive_device: torch.device, timeout_s: float
    ):
        self.name, self.rank, self.world_size, self.backend = (
            req.group_name,
            req.rank_offset,
            req.world_size,
            req.backend,
        )
        self.handle = handle
        self.receive_device = receive_device
        self.timeout_s = timeout_s
        self.lock = asyncio.Lock()  # one bucket at a time; destroy waits for a bucket in progress
        self.staged: Staged | None = None

    def receive(self, req: UpdateWeightsFromDistributedRequest) -> list[torch.Tensor]:
        """Receive the bucket's tensors as declared, in order (blocks; run it off the event loop)."""
        buffers = [
            torch.empty(shape, dtype=getattr(torch, dtype), device=self.receive_device)
            for dtype, shape in zip(req.dtypes, req.shapes)
        ]
        broadcast_bucket(self.handle, buffers, self.timeout_s)
        return buffers

    def stage(
        self, req: UpdateWeightsFromDistributedRequest, received: list[torch.Tensor], lm: LoadedModel
    ) -> BucketOutcome:
        """Check the bucket against the served model and add it to the version in progress; raises WeightSyncRefused
        (and drops that version) if a tensor fits no weight."""
        specs = weight_specs(lm)
        if self.staged is not None and self.staged.version != req.weight_version:
            log.warning(
                "a new version replaces one not finished",
                group=self.name,
                dropped=self.staged.version,
                staged=len(self.staged.tensors),
                new=req.weight_version,
            )
            self.staged = None
        staged = self.staged or Staged(req.weight_version)
        try:
            checked = {name: _fit(name, tensor, specs, lm.device) for name, tensor in zip(req.names, received)}
        except WeightSyncRefused:
            self.staged = None
            raise
        staged.tensors.update(checked)
        staged.storages.update(specs[name].storage for name in checked)
        needed = {s.storage for s in specs.values()}
        if staged.storages >= needed:
            self.staged = None
            return BucketOutcome(len(staged.storages), len(needed), staged.version, staged.tensors)
        self.staged = staged
        return BucketOutcome(len(staged.storages), len(needed), staged.version, None)


def _fit(name: str, tensor: torch.Tensor, specs: dict[str, WeightSpec], device: torch.device) -> torch.Tensor:
    spec = specs.get(name)
    if spec is None:
        raise WeightSyncRefused(f"{name!r} is not a weight of the served model")
    if tuple(tensor.shape) != spec.shape:
        raise WeightSyncRefused(f"{name}: shape {list(tensor.shape)} does not match the served {list(spec.shape)}")
    if not bool(torch.isfinite(tensor).all()):
        raise WeightSyncRefused(f"{name}: the tensor holds NaN or infinite values")
    return tensor.to(device=device, dtype=spec.dtype)


class WeightGroups:
    """The groups this engine belongs to, by name."""

    def __init__(self, timeout_s: float = GROUP_TIMEOUT_S, max_groups: int = MAX_GROUPS):
        self.timeout_s = timeout_s
        self.max_groups = max_groups
        self._groups: dict[str, MemberGroup] = {}
        self._joining: set[str] = set()

    def names(self) -> list[str]:
        return sorted(self._groups)

    async def join(self, req: InitWeightsUpdateGroupRequest, lm: LoadedModel) -> str:
        """Join the group (blocks until every rank is in, off the event loop); raises WeightSyncRefused."""
        if req.group_name in self._groups or req.group_name in self._joining:
            raise WeightSyncRefused(
                f"a weight-update group named {req.group_name!r} exists already; destroy it first "
                "(/destroy_weights_update_group) or use another name"
            )
        if len(self._groups) + len(self._joining) >= self.max_groups:
            raise WeightSyncRefused(
                f"this engine is in {self.max_groups} weight-update groups already ({', '.join(self.names())}); "
                "destroy one first"
            )
        device = _receive_device(req.backend, lm.device)
        self._joining.add(req.group_name)
        try:
            handle = await asyncio.to_thread(
                open_process_group,
                req.master_address,
                req.master_port,
                req.rank_offset,
                req.world_size,
                req.group_name,
                req.backend,
                self.timeout_s,
            )
        except (RuntimeError, ValueError, OSError) as exc:  # torch's DistError, a timeout, an unreachable store
            raise WeightSyncRefused(
                f"could not join weight-update group {req.group_name!r} at {req.master_address}:{req.master_port}: "
                f"{_first_line(exc)}"
            ) from exc
        finally:
            self._joining.discard(req.group_name)
        self._groups[req.group_name] = MemberGroup(req, handle, device, self.timeout_s)
        log.info(
            "joined weight-update group",
            group=req.group_name,
            rank=req.rank_offset,
            world_size=req.world_size,
            backend=req.backend,
        )
        return f"Joined weight-update group {req.group_name} as rank {req.rank_offset} of {req.world_size}."

    async def receive(self, req: UpdateWeightsFromDistributedRequest, lm: LoadedModel) -> BucketOutcome:
        """Receive one bucket and stage it; raises WeightSyncRefused (the version in progress is dropped, and the
        group too when it is out of step)."""
        group = self._groups.get(req.group_name)
        if group is None:
            raise WeightSyncRefused(
                f"no weight-update group named {req.group_name!r} (groups: {self.names() or 'none'}); "
                "set one up with /init_weights_update_group"
            )
        async with group.lock:
            capacity = sum(math.prod(s.shape) for s in _distinct(weight_specs(lm)))
            if req.numel() > capacity:
                await self._drop(group)
                raise WeightSyncRefused(
                    f"the bucket declares {req.numel()} elements, more than the served model's {capacity}: "
                    f"not received, so group {group.name!r} is out of step and was dropped; re-create it"
                )
            try:
                received = await asyncio.to_thread(group.receive, req)
            except RuntimeError as exc:  # gloo/nccl: the peer closed, a timeout
                await self._drop(group)
                raise WeightSyncRefused(
                    f"the broadcast of group {group.name!r} failed ({_first_line(exc)}); nothing of version "
                    f"{req.weight_version} is applied and the group was dropped: re-create it"
                ) from exc
            return group.stage(req, received, lm)

    async def destroy(self, name: str) -> str:
        group = self._groups.get(name)
        if group is None:
            raise WeightSyncRefused(f"no weight-update group named {name!r}")
        async with group.lock:
            await self._drop(group)
        return f"Destroyed weight-update group {name}."

    async def _drop(self, group: MemberGroup) -> None:
        if self._groups.get(group.name) is group:
            del self._groups[group.name]
        group.staged = None
        try:
            await asyncio.to_thread(close_process_group, group.handle)
        except (RuntimeError, ValueError) as exc:  # already broken: its connections are gone either way
            log.warning("closing a weight-update group failed", group=group.name, error=_first_line(exc))
        log.info("left weight-update group", group=group.name)


def _receive_device(backend: str, served: torch.device) -> torch.device:
    """Where tensors arrive: gloo receives on the CPU (then they move to the served device), nccl on the GPU."""
    if backend not in BACKENDS:
        raise WeightSyncRefused(f"backend {backend!r} is not supported (one of {', '.join(BACKENDS)})")
    if backend == "nccl":
        if served.type != "cuda":
            raise WeightSyncRefused(f"backend nccl needs the engine on a CUDA device; it serves on {served}: use gloo")
        return served
    return torch.device("cpu")


def _distinct(specs: dict[str, WeightSpec]) -> list[WeightSpec]:
    """One spec per storage (tied weights once)."""
    return list({s.storage: s for s in specs.values()}.values())


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:400] if text else type(exc).__name__
