"""Continuous batching on one engine thread, shared fairly between tenants.

Requests wait in one queue per tenant (the `X-Openclaw-Tenant` header; no header:
the shared system bucket of judges, teacher and training). When slots are free
the engine admits waiting requests round-robin across tenants, and while other
tenants have requests waiting no tenant gets more than
`ceil(max_batch_size * tenant_slot_share)` running rows; a tenant alone (or
with every other waiting tenant at its share too) may use every free slot, so
no slot idles while someone waits. Each tenant may have at most
`max_queued_per_tenant` requests waiting: beyond that `submit` refuses with
`QueueFull` (the server answers 503 with Retry-After) instead of piling work up.

When the engine is idle it waits `batch_window_ms` after the first arrival for
others that arrive together; while it decodes, admitted requests join the
running batch before the next step and finished ones leave it. A request whose
caller went away (its future cancelled: a client that disconnected) leaves the
batch before the next step, and is counted in `requests_cancelled`. The asyncio
event loop never runs model code.

Weight swaps do not wait for running generations. On a swap the running rows
become a draining batch that finishes on the OLD weights (a request never mixes
two versions; it reports the old weight_version), while new requests are
admitted at once to a fresh batch on the NEW weights; the loop steps both until
the old one drains, then drops the old model. Memory: while a batch drains, both
models are held, so weight memory is transiently 2x. To keep it at 2x, a swap
that arrives while an older batch still drains and the current batch is busy
waits for the drain (serving continues on the current weights meanwhile), and
`wait_drained` lets a caller hold off loading yet another copy until then. The
`max_batch_size` slots are shared by both batches (it bounds compute).

Weights received over a process group (`commit_weights`) are copied into the
served model in place, between two forward passes: no second copy of the model
is held, and rows running at that moment go on decoding on the new weights (as
SGLang does after an in-place pause), reporting the new weight_version. Their
KV, computed on the old weights, stays theirs; the prefix cache starts afresh.

Pausing (`pause`, SGLang's /pause_generation) stops stepping both batches and
admitting from the queues; requests keep arriving and wait. In-place pause
holds the running rows with their KV until `resume`; mode abort ends every
running and waiting request with finish_reason abort. Weight swaps and commits
still apply while paused, which is what pausing is for.

A pause is a lease (`pause_lease_s`): renewed by each bucket of a distributed
update (`renew_pause`, the only update a trainer pauses for), it ends by itself
when none has come for that long. A trainer whose link is cut between its pause
and its /continue_generation would otherwise leave every engine it paused
serving nobody until it comes back. Ending the pause early is safe here: a
version is staged whole and committed between two forward passes (rows running
then go on on the new weights, as held rows do after a pause).

Releasing memory for a train step on the same GPU: engine.memory_release.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
import threading
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import structlog
import torch
from pydantic import BaseModel

from engine import prefix_cache
from engine.decode import DecodeBatch
from engine.graph_decode import GraphSettings
from engine.memory_release import MemoryRelease
from engine.prefix_cache import PrefixCache
from engine.weights import DISTRIBUTED, LoadedModel, apply_weights
from engine.work import WorkItem, WorkResult, aborted_before_start
from openclaw_rl.prometheus import Registry

log = structlog.get_logger(__name__)

RETRY_AFTER_S = 2
"""Seconds a refused tenant is told to wait (Retry-After): rows of a full queue leave at generation speed, so an
immediate retry would only be refused again."""


class QueueFull(Exception):
    """A tenant already has as many requests waiting as the engine lets it queue: retry after a while."""

    def __init__(self, tenant: str | None, queued: int, limit: int, retry_after_s: int):
        who = "the system bucket" if tenant is None else "this tenant"
        super().__init__(
            f"{who} already has {queued} requests waiting (engine.max_queued_per_tenant is {limit}); "
            f"retry in {retry_after_s}s"
        )
        self.tenant, self.queued, self.limit, self.retry_after_s = tenant, queued, limit, retry_after_s


class TenantLoad(BaseModel):
    """One tenant's share of the engine right now (None: the system bucket)."""

    tenant: str | None
    running: int
    queued: int


@dataclass
class _Ticket:
    item: WorkItem
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop


class Scheduler(MemoryRelease):
    def __init__(
        self,
        model: LoadedModel,
        *,
        max_batch_size: int = 16,
        batch_window_ms: float = 2.0,
        seed: int = 0,
        tenant_slot_share: float = 0.5,
        max_queued_per_tenant: int = 64,
        prefix_cache_mb: float | None = 0,
        prefill_chunk_tokens: int = 0,
        one_thread_for_one_row: bool = False,
        graphs: GraphSettings | None = None,
        pause_lease_s: float | None = None,
    ):
        if not 0 < tenant_slot_share <= 1:
            raise ValueError(f"tenant_slot_share must be in (0, 1], got {tenant_slot_share}")
        self.model = model
        self.max_batch_size = max_batch_size
        self.batch_window_s = batch_window_ms / 1000.0
        self.tenant_cap = max(1, math.ceil(max_batch_size * tenant_slot_share))
        self.max_queued_per_tenant = max_queued_per_tenant
        # Waiting tickets per tenant; the dict's order is the round-robin order (a tenant served moves to the end).
        self._waiting: OrderedDict[str | None, deque[_Ticket]] = OrderedDict()
        self._running: Counter[str | None] = Counter()
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._swap: tuple[LoadedModel, concurrent.futures.Future] | None = None
        self._swap_lock = threading.Lock()
        # Requests for the engine thread, applied between forward passes: pause / resume / abort, and in-place commits.
        self._controls: deque[tuple[str, object, concurrent.futures.Future]] = deque()
        self.paused = False
        self.pause_lease_s = pause_lease_s  # None: a pause lasts until /continue_generation
        self._pause_renewed = 0.0  # time.monotonic() of the pause or the last weight-update call since
        self._stop = threading.Event()
        self._generator = torch.Generator(device=model.device).manual_seed(seed)
        self._thread = threading.Thread(target=self._loop, name="engine", daemon=True)
        dtype = next(model.model.parameters()).dtype
        budget = prefix_cache.budget_bytes(prefix_cache_mb, model.model.config, dtype, model.device)
        self.prefix_cache = PrefixCache(budget)
        self.prefill_chunk_tokens = prefill_chunk_tokens
        self.graphs = graphs  # CUDA-graph decode steps (engine.graph_decode); None: eager
        self.metrics = Registry()
        self._init_metrics()
        self._current = self._new_batch(model)
        self._draining: DecodeBatch | None = None  # rows still finishing on the weights before the last swap
        # A CPU decodes one row no faster on two threads than on one, and the second spins (OpenMP waits busy
        # between parallel regions): a whole core the stack's other processes and this server's own event loop
        # (streaming) then lack. Several rows or a prefill gain from every thread.
        self._threads_full = torch.get_num_threads() if one_thread_for_one_row else None
        self._threads_now = self._threads_full
        self._drained: concurrent.futures.Future | None = None  # resolved when `_draining` empties
        self._owners: dict[int, _Ticket] = {}  # by id(item): client-given rids need not be unique
        self.requests_done = 0
        self.requests_cancelled = 0
        self.released: frozenset[str] = frozenset()
        """Tags whose memory is given back now ("kv_cache", "weights"); while any is, nothing is admitted."""
        self.released_bytes: dict[str, int] = {}
        """Per released tag, the bytes it gave back (weights: moved off the device; 0 on a CPU engine)."""
        self._releases: list[tuple[frozenset[str], concurrent.futures.Future]] = []  # waiting for the running rows

    def _new_batch(self, model: LoadedModel) -> DecodeBatch:
        """A batch on `model`, reading and filling the prefix cache of the current weights."""
        return DecodeBatch(
            model,
            self._generator,
            prefix_cache=self.prefix_cache,
            chunk_tokens=self.prefill_chunk_tokens,
            on_timing=self._observe_forward,
            graphs=self.graphs,
        )

    def _init_metrics(self) -> None:
        m = self.metrics
        self.m_requests = m.counter("engine_requests_total", "Requests finished, by outcome.", ["outcome"])
        self.m_prompt_tokens = m.counter("engine_prompt_tokens_total", "Prompt tokens of finished requests.")
        self.m_cached_tokens = m.counter(
            "engine_cached_prompt_tokens_total", "Prompt tokens whose KV came from the prefix cache."
        )
        self.m_output_tokens = m.counter("engine_generation_tokens_total", "Tokens generated by finished requests.")
        self.m_pause_lapsed = m.counter(
            "engine_pause_lapsed_total", "Pauses that ended with no /continue_generation (their lease ran out)."
        )
        self.m_prefill = m.histogram("engine_prefill_seconds", "Time of one prefill forward pass (a chunk or a group).")
        self.m_decode = m.histogram("engine_decode_step_seconds", "Time of one decode step of a batch.")
        self.m_e2e = m.histogram("engine_request_seconds", "Time from arrival to the final answer.")
        self.m_prefill_tokens = m.counter("engine_prefill_tokens_total", "Prompt tokens computed by prefill.")
        m.gauge(
            "engine_running_requests",
            "Requests admitted to a batch (decoding or prefilling).",
            source=lambda: [((), self._running_rows())],
        )
        m.gauge(
            "engine_queue_depth",
            "Requests waiting for a slot, per tenant (system: no tenant header).",
            ["tenant"],
            source=lambda: [((t.tenant or "system",), t.queued) for t in self.tenant_loads()],
        )
        m.gauge(
            "engine_running_per_tenant",
            "Requests running, per tenant (system: no tenant header).",
            ["tenant"],
            source=lambda: [((t.tenant or "system",), t.running) for t in self.tenant_loads()],
        )
        pc = self.prefix_cache
        m.gauge("engine_prefix_cache_bytes", "Bytes of KV held by the prefix cache.", source=lambda: [((), pc.bytes)])
        m.gauge(
            "engine_prefix_cache_budget_bytes", "The prefix cache's memory budget.", source=lambda: [((), pc.budget)]
        )
        m.gauge("engine_prefix_cache_lookups", "Requests prefilled since start.", source=lambda: [((), pc.requests)])
        m.gauge(
            "engine_prefix_cache_hits", "Requests that reused a cached prefix.", source=lambda: [((), pc.hit_requests)]
        )
        m.gauge("engine_prefix_cache_evicted_blocks", "Blocks evicted (LRU).", source=lambda: [((), pc.evicted_blocks)])
        self.m_weight_updates = m.counter(
            "engine_weight_updates_total",
            "Weight versions put in service, by source (disk, tensor, distributed); an update naming the version "
            "already served from the same source is not one.",
            ["source"],
        )

    def _observe_forward(self, kind: str, seconds: float, tokens: int) -> None:
        if kind == "prefill":
            self.m_prefill.observe(seconds)
            self.m_prefill_tokens.inc(tokens)
        else:
            self.m_decode.observe(seconds)

    def flush_cache(self) -> None:
        """Empty the prefix cache (POST /flush_cache)."""
        self.prefix_cache.clear()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    @property
    def weight_version(self) -> str:
        return self.model.weight_version

    def queue_depth(self) -> int:
        with self._lock:
            return sum(len(q) for q in self._waiting.values())

    def tenant_loads(self) -> list[TenantLoad]:
        """Running and waiting requests of every tenant that has any."""
        with self._lock:
            names = list(dict.fromkeys([*self._running, *self._waiting]))
            loads = [
                TenantLoad(tenant=t, running=self._running[t], queued=len(self._waiting.get(t, ()))) for t in names
            ]
        return [x for x in loads if x.running or x.queued]

    async def submit(self, items: list[WorkItem]) -> list[WorkResult]:
        """Queue `items` (all or none) and wait for their results; raises QueueFull over a tenant's queue bound.

        Cancelling the wait cancels the requests: waiting ones leave the queue, running ones the batch."""
        return list(await asyncio.gather(*self.enqueue(items)))

    def enqueue(self, items: list[WorkItem]) -> list[asyncio.Future]:
        """Queue `items` (all or none) now; one future per item (cancel it to drop the request). Raises QueueFull."""
        loop = asyncio.get_running_loop()
        tickets = [_Ticket(item, loop.create_future(), loop) for item in items]
        with self._lock:
            added: Counter[str | None] = Counter(t.item.tenant for t in tickets)
            for tenant, n in added.items():
                queued = len(self._waiting.get(tenant, ()))
                # The system bucket is exempt: its callers are this system's own workers, bounded by their concurrency.
                if tenant is not None and queued + n > self.max_queued_per_tenant:
                    raise QueueFull(tenant, queued, self.max_queued_per_tenant, RETRY_AFTER_S)
            for t in tickets:
                self._waiting.setdefault(t.item.tenant, deque()).append(t)
            self._arrived.notify()
        for t in tickets:
            t.future.add_done_callback(lambda fut, t=t: self._forget_if_cancelled(t))
        return [t.future for t in tickets]

    def _forget_if_cancelled(self, ticket: _Ticket) -> None:
        """A caller that went away before admission: take its ticket out of the queue at once (it counts no more)."""
        if not ticket.future.cancelled():
            return
        with self._lock:
            q = self._waiting.get(ticket.item.tenant)
            if q is not None and ticket in q:
                q.remove(ticket)
                if not q:
                    del self._waiting[ticket.item.tenant]
                self.requests_cancelled += 1

    async def swap(self, new: LoadedModel) -> None:
        """Serve `new` to requests admitted from now on; returns once it is in place.

        Rows running at the swap finish on the old weights (and report its version)."""
        done: concurrent.futures.Future = concurrent.futures.Future()
        with self._swap_lock:
            if self._swap is not None:  # a newer update replaces one not yet applied
                self._swap[1].set_result(None)
            self._swap = (new, done)
        with self._arrived:
            self._arrived.notify()  # wake an idle loop
        await asyncio.wrap_future(done)

    async def commit_weights(
        self, tensors: dict[str, torch.Tensor], weight_version: str, origin: tuple[str, ...] = DISTRIBUTED
    ) -> None:
        """Copy `tensors` (checked, in the served dtype) into the served model between two forward passes and label
        it `weight_version` from `origin`; returns once they serve. Running rows go on on the new weights. While the
        weights are released they are written into the CPU copy (and serve after `resume_memory`)."""
        await self._engine_thread("commit", (tensors, weight_version, origin))

    async def pause(self, mode: str) -> int:
        """Stop stepping and admitting (SGLang's /pause_generation); returns once no forward pass runs any more.
        mode abort also ends every running and waiting request (finish_reason abort). Returns the requests held or
        aborted."""
        return await self._engine_thread("pause", mode)

    def renew_pause(self) -> None:
        """A weight-update call came: whoever paused is still at work, so the pause's lease starts again."""
        self._pause_renewed = time.monotonic()

    def resume(self) -> None:
        """Step and admit again (SGLang's /continue_generation); held rows go on where they stopped."""
        done: concurrent.futures.Future = concurrent.futures.Future()
        self._post("resume", None, done)

    async def abort_all(self) -> int:
        """End every running and waiting request now (finish_reason abort), paused or not; returns how many."""
        return await self._engine_thread("abort", None)

    async def _engine_thread(self, kind: str, arg: object) -> object:
        done: concurrent.futures.Future = concurrent.futures.Future()
        self._post(kind, arg, done)
        return await asyncio.wrap_future(done)

    def _post(self, kind: str, arg: object, done: concurrent.futures.Future) -> None:
        with self._arrived:
            self._controls.append((kind, arg, done))
            self._arrived.notify()  # wake an idle or paused loop

    def _apply_controls(self) -> None:
        while True:
            with self._lock:
                if not self._controls:
                    return
                kind, arg, done = self._controls.popleft()
            if kind == "release":  # admission stops now; `_settle_releases` answers once no row runs
                self._releases.append((arg, done))  # type: ignore[arg-type]
                continue
            try:
                done.set_result(self._apply_control(kind, arg))
            except Exception as exc:  # the caller gets it; the engine thread goes on
                log.exception("engine control failed", kind=kind)
                done.set_exception(exc)

    def _apply_control(self, kind: str, arg: object) -> object:
        if kind == "commit":
            tensors, version, origin = arg  # type: ignore[misc]
            return self._commit(tensors, version, origin)
        if kind == "resume_memory":
            return self._resume_memory(arg)  # type: ignore[arg-type]
        if kind == "resume":
            self.paused = False
            log.info("generation continued", running=self._running_rows(), queued=self.queue_depth())
            return None
        if kind == "pause":
            aborted = self._abort_everything() if arg == "abort" else 0
            self.paused = True
            self.renew_pause()
            held = self._running_rows()
            log.info("generation paused", mode=arg, held=held, aborted=aborted, queued=self.queue_depth())
            return held + aborted
        if kind == "abort":
            return self._abort_everything()
        raise ValueError(f"unknown engine control {kind!r}")

    def _commit(self, tensors: dict[str, torch.Tensor], version: str, origin: tuple[str, ...]) -> None:
        old = self.model
        new = apply_weights(old, tensors, version, origin)
        self.m_weight_updates.inc(source=origin[0])
        # The cache's KV came from the old weights. The current batch keeps its rows (their KV is theirs) but, made
        # for the old generation, no longer reads or fills the cache; a fresh batch replaces it once it empties.
        self.prefix_cache.invalidate()
        self.model = new
        self._current.lm = new
        log.info(
            "weights committed in place",
            old_version=old.weight_version,
            new_version=version,
            tensors=len(tensors),
            running_rows=len(self._current),
        )

    def _abort_everything(self) -> int:
        message = "aborted by pause_generation or abort_all_requests"
        with self._lock:
            waiting = [t for q in self._waiting.values() for t in q]
            self._waiting.clear()
        for t in waiting:
            if t.future.done():  # its caller left before this pop
                with self._lock:
                    self.requests_cancelled += 1
                continue
            self.m_requests.inc(outcome="aborted")
            t.loop.call_soon_threadsafe(_settle, t.future, aborted_before_start(t.item, self.model, message), None)
        running = 0
        for batch in (self._draining, self._current):
            if batch is not None and len(batch):
                results = batch.abort_all(message)
                running += len(results)
                self._deliver(results)
        self._release_drained()
        return len(waiting) + running

    async def wait_drained(self) -> None:
        """Return once no batch is still finishing on older weights (before loading another copy of the model)."""
        drained = self._drained
        if drained is not None:
            await asyncio.wrap_future(drained)

    def _apply_swap(self) -> None:
        with self._swap_lock:
            if self._swap is None:
                return
            if self._draining is not None and len(self._current):
                return  # a third version would not fit the 2x budget: wait for the old batch to drain
            (new, done), self._swap = self._swap, None
        old = self.model
        if len(self._current):
            if self._draining is None:
                self._drained = concurrent.futures.Future()
            self._draining = self._current  # its rows finish on the weights they started with
        # The old weights' KV must never serve the new ones: the draining batch keeps the old generation, whose
        # lookups and inserts the cache now ignores.
        self.prefix_cache.invalidate()
        self._current = self._new_batch(new)
        self.model = new
        self.m_weight_updates.inc(source=new.origin[0] if new.origin else "disk")
        log.info(
            "weights swapped",
            old_version=old.weight_version,
            new_version=new.weight_version,
            path=str(new.path),
            draining_rows=len(self._draining) if self._draining is not None else 0,
        )
        del old
        done.set_result(None)

    def _wait_for_arrivals(self) -> None:
        """Idle: block until a request arrives, then wait the batch window for others that come with it."""
        with self._arrived:
            if not self._waiting:
                self._arrived.wait(timeout=0.02)
            if not self._waiting:
                return
        deadline = time.monotonic() + self.batch_window_s
        with self._arrived:
            while sum(len(q) for q in self._waiting.values()) < self.max_batch_size:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._arrived.wait(timeout=remaining)

    def _admit(self, room: int) -> list[_Ticket]:
        """Up to `room` waiting tickets, round-robin across tenants, none past its share while others wait."""
        out: list[_Ticket] = []
        with self._lock:
            while room > 0 and self._waiting:
                tenant = self._pick_tenant()
                q = self._waiting[tenant]
                ticket = q.popleft()
                if q:
                    self._waiting.move_to_end(tenant)
                else:
                    del self._waiting[tenant]
                if ticket.future.done():  # the caller left between its cancellation and this pop
                    self.requests_cancelled += 1
                    continue
                self._running[tenant] += 1
                out.append(ticket)
                room -= 1
        return out

    def _pick_tenant(self) -> str | None:
        """The first tenant in round-robin order below its share; if every waiting tenant is at its share, the first
        one (spare slots are shared round-robin rather than left idle)."""
        for tenant in self._waiting:
            if self._running[tenant] < self.tenant_cap:
                return tenant
        return next(iter(self._waiting))

    def _drop_cancelled(self, batch: DecodeBatch | None) -> None:
        """Rows whose caller went away leave the batch before it decodes for them again."""
        if batch is None or not len(batch):
            return
        gone = [it for it in batch.items() if self._owners[id(it)].future.done()]
        if not gone:
            return
        for item in batch.remove_items(gone):
            ticket = self._owners.pop(id(item))
            self._finished(ticket.item.tenant, cancelled=True)
        log.info("dropped rows of callers that went away", rows=len(gone), weight_version=batch.lm.weight_version)

    def _finished(self, tenant: str | None, *, cancelled: bool) -> None:
        with self._lock:
            self._running[tenant] -= 1
            if self._running[tenant] <= 0:
                del self._running[tenant]
            if cancelled:
                self.requests_cancelled += 1
                self.m_requests.inc(outcome="cancelled")
            else:
                self.requests_done += 1

    def _fit_threads(self, admitting: bool = False) -> None:
        """One torch thread while a single row decodes and nothing waits to prefill; all of them otherwise."""
        if self._threads_full is None:
            return
        prefilling = admitting or any(b is not None and b.pending for b in (self._current, self._draining))
        want = 1 if self._running_rows() == 1 and not prefilling else self._threads_full
        if want != self._threads_now:
            # OpenMP counts threads per calling thread (this one runs the model), but torch also keeps the number as
            # the default a new thread starts with: work given to other threads asks for `full_threads` itself.
            torch.set_num_threads(want)
            self._threads_now = want

    @property
    def full_threads(self) -> int | None:
        """The torch threads for work off the engine thread (a weight load), when `_fit_threads` may have left the
        process's default at one; None: never changed."""
        return self._threads_full

    def _running_rows(self) -> int:
        return len(self._current) + (len(self._draining) if self._draining is not None else 0)

    def _renew_stale_batch(self) -> None:
        """An empty current batch made for an older cache generation (weights committed in place) is replaced, so
        new requests read and fill the cache of the weights they run on."""
        if not len(self._current) and self._current.generation != self.prefix_cache.generation:
            self._current = self._new_batch(self.model)

    def _hold(self) -> None:
        """Paused, or nothing admitted while memory is released: only callers that leave are served (their rows
        dropped); wait for a control, an arrival or a short while."""
        self._drop_cancelled(self._draining)
        self._drop_cancelled(self._current)
        with self._arrived:
            if not self._controls and self._swap is None:
                self._arrived.wait(timeout=0.05)

    def _end_lapsed_pause(self) -> None:
        if not self.paused or self.pause_lease_s is None:
            return
        quiet = time.monotonic() - self._pause_renewed
        if quiet < self.pause_lease_s:
            return
        self.paused = False
        self.m_pause_lapsed.inc()
        log.warning(
            "generation continued without /continue_generation: no weight update came for the pause's lease "
            "(the trainer that paused is cut off or gone)",
            quiet_s=round(quiet, 1),
            pause_lease_s=self.pause_lease_s,
            running=self._running_rows(),
            queued=self.queue_depth(),
        )

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._apply_controls()
            self._apply_swap()
            self._settle_releases()
            self._end_lapsed_pause()
            if self.paused or (self._admission_closed() and not self._running_rows()):
                self._hold()
                continue
            if not self._running_rows():
                self._wait_for_arrivals()
                self._apply_controls()
                self._apply_swap()  # a swap that came while idle applies before anything is admitted
                if self.paused or self._admission_closed():
                    continue
            self._renew_stale_batch()
            self._drop_cancelled(self._draining)
            self._drop_cancelled(self._current)
            live: list[WorkItem] = []
            room = 0 if self._admission_closed() else self.max_batch_size - self._running_rows()
            for t in self._admit(room):
                if t.future.done():  # cancelled between admission and prefill
                    self._finished(t.item.tenant, cancelled=True)
                else:
                    self._owners[id(t.item)] = t
                    live.append(t.item)
            if live:
                self._fit_threads(admitting=True)
                self._run(self._current, lambda b: b.add(live), extra=live)
            self._fit_threads()
            for batch in (self._draining, self._current):
                if batch is not None and len(batch):
                    self._run(batch, DecodeBatch.step)
            self._release_drained()

    def _run(
        self,
        batch: DecodeBatch,
        op: Callable[[DecodeBatch], list[tuple[WorkItem, WorkResult]]],
        extra: Sequence[WorkItem] = (),
    ) -> None:
        """Run `op` on `batch` and deliver what finished; a model error fails that batch's requests, not the server."""
        try:
            self._deliver(op(batch))
        except Exception as exc:
            held = batch.items()
            victims = held + [it for it in extra if all(it is not h for h in held)]
            log.exception("batch failed", size=len(victims), weight_version=batch.lm.weight_version)
            for item in victims:
                t = self._owners.pop(id(item), None)
                if t is not None:
                    self._finished(t.item.tenant, cancelled=False)
                    self.m_requests.inc(outcome="error")
                    t.loop.call_soon_threadsafe(_settle, t.future, None, exc)
            batch.reset()  # its cache may be half-updated: start it empty

    def _deliver(self, results: list[tuple[WorkItem, WorkResult]]) -> None:
        for item, r in results:
            t = self._owners.pop(id(item))
            self._finished(t.item.tenant, cancelled=False)
            self.m_requests.inc(outcome="aborted" if r.finish_reason and r.finish_reason.type == "abort" else "done")
            self.m_prompt_tokens.inc(r.prompt_tokens)
            self.m_cached_tokens.inc(r.cached_tokens)
            self.m_output_tokens.inc(len(r.output_ids))
            self.m_e2e.observe(r.e2e_latency)
            t.loop.call_soon_threadsafe(_settle, t.future, r, None)


def _settle(fut: asyncio.Future, result: WorkResult | None, exc: BaseException | None) -> None:
    if fut.done():
        return
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(result)
