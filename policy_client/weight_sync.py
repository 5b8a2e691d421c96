"""SGLang's weight sync without disk: the HTTP messages, the process group both ends join, and the calls.

A trainer (rank 0) and N policy servers (ranks 1..N) join one torch.distributed
process group, set up by `POST /init_weights_update_group` on each server while
the trainer joins too; then, per bucket of tensors, the trainer POSTs
`/update_weights_from_distributed` (names, dtypes, shapes) to every server and
broadcasts each tensor from rank 0 in that order. `/pause_generation` and
`/continue_generation` bracket an update so requests in flight are held, not
aborted. Field names, defaults and answers follow SGLang's `io_struct` and
`http_server`, so the embedded engine and an SGLang server are interchangeable.

The group is made the way SGLang makes it (tcp:// rendezvous, a PrefixStore named
after the group, torch's own group constructor), so a trainer can join it with
real SGLang servers; it never initializes torch's default group, so nothing else
in the process is touched.

The same client also hands weights over from memory (`/update_weights_from_tensor`, the buckets of
policy_client.weight_handoff) and releases and resumes a server's memory around a train step on its GPU
(`/release_memory_occupation`, `/resume_memory_occupation`).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import inspect
import math
import os
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, cast

import httpx
import structlog
from pydantic import BaseModel, ConfigDict, Field, model_validator

from policy_client.wire import WEIGHT_VERSION_PATTERN, ErrorBody

if TYPE_CHECKING:
    import torch

log = structlog.get_logger(__name__)

DEFAULT_GROUP_NAME = "weight_update_group"
"""SGLang's default group name."""
WIRE_DTYPES = ("float32", "float16", "bfloat16", "float64")
"""Dtypes a tensor may travel in (SGLang's names: torch's without the `torch.` prefix, which is tolerated)."""
CONTROL_ATTEMPTS = 3
"""Tries of an idempotent call (pause, continue, destroy) against transport errors and 5xx."""
CONTROL_TIMEOUT_S = 30.0
"""Pause, continue and a group's destroy answer at once on a live server: waiting the broadcast's timeout for each
attempt on one that went silent would hold a publication for minutes."""


# ---- wire messages ---------------------------------------------------------------------------------------------
class InitWeightsUpdateGroupRequest(BaseModel):
    """Body of POST /init_weights_update_group (SGLang's InitWeightsUpdateGroupReqInput)."""

    model_config = ConfigDict(extra="ignore")

    master_address: str = Field(min_length=1, max_length=253)
    """Host of the group's rendezvous (the trainer, rank 0)."""
    master_port: int = Field(ge=1, le=65535)
    """Port of the rendezvous store the trainer opens."""
    rank_offset: int = Field(ge=1)
    """This server's rank in the group (rank 0 is the trainer)."""
    world_size: int = Field(ge=2)
    """The trainer plus every server."""
    group_name: str = Field(DEFAULT_GROUP_NAME, min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._-]+$")
    """Names the group in later calls; also the rendezvous store's key prefix."""
    backend: str = "nccl"
    """torch.distributed backend: nccl (CUDA) or gloo (CPU)."""

    @model_validator(mode="after")
    def _rank_inside(self) -> "InitWeightsUpdateGroupRequest":
        if self.rank_offset >= self.world_size:
            raise ValueError(f"rank_offset {self.rank_offset} is not below world_size {self.world_size}")
        return self


class UpdateWeightsFromDistributedRequest(BaseModel):
    """Body of POST /update_weights_from_distributed (SGLang's UpdateWeightsFromDistributedReqInput): one bucket."""

    model_config = ConfigDict(extra="ignore")

    names: list[str] = Field(min_length=1)
    """Hugging Face parameter names, in the order rank 0 broadcasts them."""
    dtypes: list[str]
    """Dtype each tensor travels in (e.g. bfloat16)."""
    shapes: list[list[int]]
    """Shape of each tensor."""
    group_name: str = DEFAULT_GROUP_NAME
    flush_cache: bool = True
    abort_all_requests: bool = False
    """Abort every running and waiting request first (their answers say finish_reason abort)."""
    weight_version: str | None = Field(None, pattern=WEIGHT_VERSION_PATTERN)
    """Label of the new weights; None keeps the current label."""
    load_format: str | None = None
    torch_empty_cache: bool = False

    @model_validator(mode="after")
    def _aligned(self) -> "UpdateWeightsFromDistributedRequest":
        if not len(self.names) == len(self.dtypes) == len(self.shapes):
            raise ValueError(
                f"names, dtypes and shapes must have one entry per tensor ({len(self.names)}, {len(self.dtypes)}, "
                f"{len(self.shapes)} given)"
            )
        if len(set(self.names)) != len(self.names):
            raise ValueError("a tensor name appears twice in one bucket")
        for name, shape in zip(self.names, self.shapes):
            if any(d < 0 for d in shape):
                raise ValueError(f"{name}: negative dimension in shape {shape}")
        self.dtypes = [wire_dtype(d) for d in self.dtypes]
        return self

    def numel(self) -> int:
        """Elements the bucket declares (what the receiver allocates)."""
        return sum(math.prod(s) for s in self.shapes)


class DestroyWeightsUpdateGroupRequest(BaseModel):
    """Body of POST /destroy_weights_update_group."""

    model_config = ConfigDict(extra="ignore")

    group_name: str = DEFAULT_GROUP_NAME


class PauseGenerationRequest(BaseModel):
    """Body of POST /pause_generation (SGLang's PauseGenerationReqInput)."""

    model_config = ConfigDict(extra="ignore")

    mode: Literal["abort", "retract", "in_place"] = "abort"
    """abort: running and waiting requests end with finish_reason abort. in_place / retract: they are held and go on
    after /continue_generation (the embedded engine keeps their KV either way)."""


class ContinueGenerationRequest(BaseModel):
    """Body of POST /continue_generation (SGLang's ContinueGenerationReqInput)."""

    model_config = ConfigDict(extra="ignore")

    torch_empty_cache: bool = True


MemoryTag = Literal["kv_cache", "weights", "cuda_graph"]
MEMORY_TAGS: tuple[MemoryTag, ...] = ("kv_cache", "weights", "cuda_graph")


class ReleaseMemoryOccupationRequest(BaseModel):
    """Body of POST /release_memory_occupation (SGLang's ReleaseMemoryOccupationReqInput)."""

    model_config = ConfigDict(extra="ignore")

    tags: list[MemoryTag] | None = None
    """What to give back: kv_cache, weights, cuda_graph; None or empty: all of them."""

    def tag_set(self) -> frozenset[str]:
        return frozenset(self.tags or MEMORY_TAGS)


class ResumeMemoryOccupationRequest(ReleaseMemoryOccupationRequest):
    """Body of POST /resume_memory_occupation (SGLang's ResumeMemoryOccupationReqInput): what to take back."""


class WeightSyncResult(BaseModel):
    """Answer of the group and distributed-update routes (200 on success, 400 otherwise), as SGLang's."""

    success: bool
    message: str


def wire_dtype(name: str) -> str:
    """SGLang's dtype name (`bfloat16`); `torch.bfloat16` is accepted too. Raises ValueError for others."""
    bare = name.removeprefix("torch.")
    if bare not in WIRE_DTYPES:
        raise ValueError(f"dtype {name!r} cannot travel in a weight update (one of {', '.join(WIRE_DTYPES)})")
    return bare


def dtype_name(dtype: "torch.dtype") -> str:
    return wire_dtype(str(dtype))


# ---- the process group -------------------------------------------------------------------------------------------
def open_process_group(
    master_address: str, master_port: int, rank: int, world_size: int, group_name: str, backend: str, timeout_s: float
) -> Any:
    """Join (rank 0: open) the group as SGLang does; blocks until every rank has joined or `timeout_s` passes.

    Uses torch's own group constructor (private, as SGLang, verl and slime do) because only it makes a group that
    `torch.distributed.broadcast` accepts without a default group, and that SGLang servers join the same way."""
    from torch.distributed import TCPStore
    from torch.distributed.distributed_c10d import Backend, PrefixStore, _new_process_group_helper, _world

    timeout = timedelta(seconds=timeout_s)
    # The store made here, not by torch's tcp:// rendezvous: under torchrun (a megatron job's rank 0 is this group's
    # rank 0) that rendezvous joins torchrun's own store instead of starting this group's.
    store = TCPStore(master_address, master_port, world_size, is_master=rank == 0, timeout=timeout, multi_tenant=True)
    options = (
        "backend_options"
        if "backend_options" in inspect.signature(_new_process_group_helper).parameters
        else "pg_options"
    )
    with _errors_raise_instead_of_ending_the_process(backend):
        group, _ = _new_process_group_helper(
            world_size,
            rank,
            [],
            Backend(backend),
            PrefixStore(group_name, store),
            group_name=group_name,
            timeout=timeout,
            **{options: None},
        )
    _world.pg_group_ranks[group] = {i: i for i in range(world_size)}
    return group


def close_process_group(group: Any) -> None:
    """Leave the group: its connections close, so a peer blocked in a broadcast fails at once."""
    import torch.distributed as dist

    dist.destroy_process_group(group)


def broadcast_bucket(group: Any, tensors: list["torch.Tensor"], timeout_s: float) -> None:
    """Broadcast `tensors` from rank 0 in order (rank 0 sends, the other ranks receive into them); blocks until every
    one has completed, or raises once one has run `timeout_s`.

    The timeout matters on NCCL: there a plain `wait()` only orders the current CUDA stream after the broadcast and
    returns at once, so a receiver would take a bucket that has not arrived as received, and a broadcast that never
    completes would show only as a stream that hangs. With a timeout the thread waits, and a timeout or a failed
    peer aborts the group's communicator and raises here (see `_errors_raise_instead_of_ending_the_process`).
    Callers pass the group's own timeout: over gloo a shorter one leaves the broadcast running in gloo's thread until
    the group's timeout, and freeing the group waits for it."""
    import torch.distributed as dist

    works = [dist.broadcast(t, src=0, group=group, async_op=True) for t in tensors]
    limit = timedelta(seconds=timeout_s)
    for work in works:
        work.wait(limit)


NCCL_ERROR_HANDLING = "TORCH_NCCL_ASYNC_ERROR_HANDLING"
NCCL_CLEAN_UP_ONLY = "2"
"""torch's CleanUpOnly: on a failed or timed-out collective the watchdog aborts the communicator and the waiting
thread raises; the default (3, SkipCleanUp) ends the whole process from the watchdog thread."""
_env_lock = threading.Lock()


@contextlib.contextmanager
def _errors_raise_instead_of_ending_the_process(backend: str) -> Iterator[None]:
    """An NCCL group reads its error handling from the environment once, when constructed. A weight-update group
    failing is an ordinary event (a server restarted, a trainer died), which must cost an update, not the trainer or
    the server: this group is made with CleanUpOnly, whatever the process's own groups use.

    The variable is set only while the group object is constructed (the rendezvous is over by then), under a lock
    that keeps two of these from overlapping. Another thread reading the environment in that moment (NCCL reads its
    own variables when a communicator is set up) could see it changing: setting it for the whole process instead
    would change how the trainer's own training groups fail."""
    if backend != "nccl":
        yield
        return
    with _env_lock:
        before = os.environ.get(NCCL_ERROR_HANDLING)
        os.environ[NCCL_ERROR_HANDLING] = NCCL_CLEAN_UP_ONLY
        try:
            yield
        finally:
            if before is None:
                os.environ.pop(NCCL_ERROR_HANDLING, None)
            else:
                os.environ[NCCL_ERROR_HANDLING] = before


# ---- the HTTP calls ----------------------------------------------------------------------------------------------
class WeightSyncError(Exception):
    """A server refused or did not answer a weight-sync call."""

    def __init__(self, url: str | None, path: str, reason: str):
        """`url`: the server that refused; None when the failure is not one server's (a group, every server)."""
        super().__init__(f"{url}{path}: {reason}" if url else f"{path}: {reason}")
        self.url, self.path, self.reason = url, path, reason


class WeightSyncClient:
    """The weight-sync routes on every policy server. Distributed updates are never retried: each one is half of a
    collective, and a repeated POST would wait for a broadcast that never comes. A hand-off from memory is retried
    (transport errors and 5xx): a server that applied it already answers the same version without reloading it.
    Release and resume are idempotent and retried too; a 4xx fails at once with the server's reason."""

    def __init__(
        self,
        urls: list[str],
        *,
        api_key: str = "",
        timeout_s: float = 120.0,
        connect_timeout_s: float = 5.0,
        backoff_s: float = 0.25,
        transport: httpx.AsyncBaseTransport | None = None,
    ):
        if not urls:
            raise ValueError("WeightSyncClient needs at least one server URL")
        self.urls = [u.rstrip("/") for u in urls]
        self.backoff_s = backoff_s
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s),
            headers={"Authorization": f"Bearer {api_key}"} if api_key else None,
            transport=transport,
        )

    @classmethod
    def from_settings(cls, settings: Any) -> "WeightSyncClient":
        """Every policy server of `settings`, with its key; calls may take the weight-sync timeout (a bucket's
        broadcast, the group's rendezvous) plus a margin for the answer."""
        sync = settings.training.weight_sync
        return cls(
            settings.policy_urls(),
            api_key=settings.policy_api_key().get_secret_value(),
            timeout_s=sync.timeout_s + 30.0,
            connect_timeout_s=settings.policy.connect_timeout_s,
            backoff_s=settings.policy.backoff_s,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    def only(self, urls: list[str]) -> "WeightSyncClient":
        """This client (its connections, key and timeouts) for those of its servers in `urls` alone. A view: close
        the client it came from, not the view."""
        view = copy.copy(self)
        view.urls = [u for u in self.urls if u in urls]
        return view

    async def answering(self, timeout_s: float) -> dict[str, str | None]:
        """The weight_version of each server that answers /get_weight_version within `timeout_s` (a host cut off or
        gone does not), in the client's order. One look each, no retry: it decides who takes part in a publication
        now."""

        async def one(url: str) -> tuple[bool, str | None]:
            try:
                resp = await self._http.get(f"{url}/get_weight_version", timeout=timeout_s)
                return resp.status_code < 400, resp.json().get("weight_version") if resp.status_code < 400 else None
            except (httpx.TransportError, ValueError, AttributeError):
                return False, None

        answers = await asyncio.gather(*(one(u) for u in self.urls))
        return {u: v for u, (ok, v) in zip(self.urls, answers) if ok}

    async def __aenter__(self) -> "WeightSyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def init_group(self, url: str, req: InitWeightsUpdateGroupRequest) -> str:
        return await self._post(url, "/init_weights_update_group", req)

    async def update(self, req: UpdateWeightsFromDistributedRequest) -> list[str]:
        """One bucket to every server at once (each answers after its broadcast has arrived)."""
        return list(await asyncio.gather(*(self._post(u, "/update_weights_from_distributed", req) for u in self.urls)))

    async def destroy_group_on(self, url: str, group_name: str) -> str:
        body = DestroyWeightsUpdateGroupRequest(group_name=group_name)
        return await self._post(
            url, "/destroy_weights_update_group", body, attempts=CONTROL_ATTEMPTS, timeout_s=CONTROL_TIMEOUT_S
        )

    async def load_lora_adapter(self, name: str, path: str) -> list[str]:
        """Every server loads the PEFT adapter at `path` as `name` (SGLang's /load_lora_adapter); one that has it
        under that name already counts as done (a retried publication). Returns the servers."""

        async def one(url: str) -> str:
            body = await self._lora_call(url, "/load_lora_adapter", {"lora_name": name, "lora_path": path})
            if body.get("success") or name in (body.get("loaded_adapters") or {}):
                return url
            raise WeightSyncError(url, "/load_lora_adapter", str(body.get("error_message") or body))

        return list(await asyncio.gather(*(one(u) for u in self.urls)))

    async def unload_lora_adapter(self, name: str) -> None:
        """Every server drops adapter `name`; a server without it is fine (best effort: an adapter left loaded
        is evicted by the servers' own limit)."""
        for url in self.urls:
            try:
                await self._lora_call(url, "/unload_lora_adapter", {"lora_name": name})
            except WeightSyncError as exc:
                log.warning("a server did not unload an old user adapter", url=url, adapter=name, error=str(exc))

    async def _lora_call(self, url: str, path: str, body: dict) -> dict:
        for attempt in range(1, CONTROL_ATTEMPTS + 1):
            try:
                resp = await self._http.post(f"{url}{path}", json=body)
            except httpx.TransportError as exc:
                reason = f"no answer ({type(exc).__name__}: {exc})"
            else:
                if resp.status_code < 500:
                    try:
                        return resp.json()
                    except ValueError:
                        raise WeightSyncError(url, path, f"HTTP {resp.status_code}: {_reason(resp)}") from None
                reason = f"HTTP {resp.status_code}: {_reason(resp)}"
            if attempt < CONTROL_ATTEMPTS:
                await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1))
        raise WeightSyncError(url, path, reason)

    async def weight_versions(self) -> dict[str, str | None]:
        """The weight_version each server serves now."""

        async def one(url: str) -> str | None:
            try:
                resp = await self._http.get(f"{url}/get_weight_version")
            except httpx.TransportError as exc:
                raise WeightSyncError(url, "/get_weight_version", f"no answer ({exc})") from exc
            if resp.status_code >= 400:
                raise WeightSyncError(url, "/get_weight_version", f"HTTP {resp.status_code}: {_reason(resp)}")
            return resp.json().get("weight_version")

        return dict(zip(self.urls, await asyncio.gather(*(one(u) for u in self.urls))))

    async def update_weights_from_tensor(self, url: str, req: Any) -> str:
        """Hand `req` (a policy_client.weight_handoff.UpdateWeightsFromTensorRequest, its buffers alive until this
        returns) to the server at `url`; its message. Raises WeightSyncError with the server's reason when it
        refuses (the old weights serve on) or does not answer."""
        return await self._post(url, "/update_weights_from_tensor", req, attempts=CONTROL_ATTEMPTS)

    async def release_memory(self, tags: list[MemoryTag] | None = None) -> dict[str, str]:
        """Every server gives back the memory of `tags` (None: all) once its running requests finish; new requests
        wait meanwhile. Each server's message; raises if one refuses or does not answer (after trying every one)."""
        body = ReleaseMemoryOccupationRequest(tags=tags)
        return await self._post_everywhere("/release_memory_occupation", body)

    async def resume_memory(self, tags: list[MemoryTag] | None = None) -> dict[str, str]:
        """Every server takes back the memory of `tags` (None: all); waiting requests run once nothing is released.
        Each server's message; raises if one fails (after trying every one)."""
        body = ResumeMemoryOccupationRequest(tags=tags)
        return await self._post_everywhere("/resume_memory_occupation", body)

    async def server_memory(self) -> dict[str, dict]:
        """Each server's memory report (`memory` of /get_server_info: weights, KV, prefix cache, CUDA, released)."""

        async def one(url: str) -> dict:
            info = await self._get(url, "/get_server_info", attempts=CONTROL_ATTEMPTS)
            memory = info.get("memory")
            if not isinstance(memory, dict):
                raise WeightSyncError(url, "/get_server_info", "the answer has no memory report")
            return memory

        return dict(zip(self.urls, await asyncio.gather(*(one(u) for u in self.urls))))

    async def _post_everywhere(self, path: str, body: BaseModel) -> dict[str, str]:
        results = await asyncio.gather(
            *(self._post(u, path, body, attempts=CONTROL_ATTEMPTS) for u in self.urls), return_exceptions=True
        )
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed:
            raise failed[0]
        return dict(zip(self.urls, cast(list[str], results)))

    async def pause(self, mode: Literal["abort", "retract", "in_place"] = "in_place") -> None:
        body = PauseGenerationRequest(mode=mode)
        await asyncio.gather(
            *(
                self._post(
                    u,
                    "/pause_generation",
                    body,
                    attempts=CONTROL_ATTEMPTS,
                    expect_result=False,
                    timeout_s=CONTROL_TIMEOUT_S,
                )
                for u in self.urls
            )
        )

    async def resume(self) -> None:
        """Continue generation on every server; raises if one of them stays paused after every attempt."""
        results = await asyncio.gather(
            *(
                self._post(
                    u,
                    "/continue_generation",
                    ContinueGenerationRequest(),
                    attempts=CONTROL_ATTEMPTS,
                    expect_result=False,
                    timeout_s=CONTROL_TIMEOUT_S,
                )
                for u in self.urls
            ),
            return_exceptions=True,
        )
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed:
            raise failed[0]

    async def _get(self, url: str, path: str, *, attempts: int = 1) -> dict:
        """GET `path`'s JSON object; transport errors and 5xx retried, a 4xx raised at once (WeightSyncError)."""
        for attempt in range(1, attempts + 1):
            try:
                resp = await self._http.get(f"{url}{path}")
            except httpx.TransportError as exc:
                reason = f"no answer ({type(exc).__name__}: {exc})"
            else:
                if resp.status_code < 400:
                    return resp.json()
                reason = f"HTTP {resp.status_code}: {_reason(resp)}"
                if resp.status_code < 500:
                    break
            if attempt < attempts:
                log.warning("weight-sync call failed; retrying", url=url, path=path, attempt=attempt, error=reason)
                await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1))
        raise WeightSyncError(url, path, reason)

    async def _post(
        self,
        url: str,
        path: str,
        body: BaseModel,
        *,
        attempts: int = 1,
        expect_result: bool = True,
        timeout_s: float | None = None,
    ) -> str:
        """POST `body`; the server's message. Raises WeightSyncError on a refusal or when no attempt got through.
        `timeout_s`: each attempt's bound (None: the client's)."""
        bound = {} if timeout_s is None else {"timeout": timeout_s}
        for attempt in range(1, attempts + 1):
            try:
                resp = await self._http.post(f"{url}{path}", json=body.model_dump(), **bound)
            except httpx.TransportError as exc:
                reason = f"no answer ({type(exc).__name__}: {exc})"
            else:
                if resp.status_code < 500:
                    return _message(resp, url, path, expect_result)
                reason = f"HTTP {resp.status_code}: {_reason(resp)}"
            if attempt < attempts:
                log.warning("weight-sync call failed; retrying", url=url, path=path, attempt=attempt, error=reason)
                await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1))
        raise WeightSyncError(url, path, reason)


def _message(resp: httpx.Response, url: str, path: str, expect_result: bool) -> str:
    """The message of a 2xx/4xx answer; raises WeightSyncError unless the server says it succeeded (`expect_result`:
    a WeightSyncResult body; else any 2xx, as pause and continue answer)."""
    if not expect_result:
        if resp.status_code >= 400:
            raise WeightSyncError(url, path, f"HTTP {resp.status_code}: {_reason(resp)}")
        return resp.text
    try:
        result = WeightSyncResult.model_validate(resp.json())
    except ValueError:
        raise WeightSyncError(url, path, f"HTTP {resp.status_code}: {_reason(resp)}") from None
    if not result.success or resp.status_code >= 400:
        raise WeightSyncError(url, path, result.message)
    return result.message


def _reason(resp: httpx.Response) -> str:
    try:
        return ErrorBody.model_validate(resp.json()).reason()
    except ValueError:
        return resp.text[:500] or resp.reason_phrase
