"""Continuous batching on one engine thread.

Requests land in a thread-safe queue. When the engine is idle it takes the
first, waits `batch_window_ms` for others that arrive together and prefills
them as one batch; while it decodes, requests that arrive join the running
batch before the next step, and finished ones leave it. The asyncio event loop
never runs model code. A weight swap stops admission, lets the running rows
finish, then swaps: no request ever mixes two weight versions and none is
aborted; requests that arrive meanwhile wait for the new weights.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import threading
import time
from dataclasses import dataclass

import structlog
import torch

from engine.model_runner import DecodeBatch, LoadedModel, WorkItem, WorkResult

log = structlog.get_logger(__name__)


@dataclass
class _Ticket:
    item: WorkItem
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop


class Scheduler:
    def __init__(self, model: LoadedModel, *, max_batch_size: int = 16, batch_window_ms: float = 2.0, seed: int = 0):
        self.model = model
        self.max_batch_size = max_batch_size
        self.batch_window_s = batch_window_ms / 1000.0
        self._queue: queue.Queue[_Ticket] = queue.Queue()
        self._swap: tuple[LoadedModel, concurrent.futures.Future] | None = None
        self._swap_lock = threading.Lock()
        self._stop = threading.Event()
        self._generator = torch.Generator(device=model.device).manual_seed(seed)
        self._thread = threading.Thread(target=self._loop, name="engine", daemon=True)
        self.requests_done = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    @property
    def weight_version(self) -> str:
        return self.model.weight_version

    def queue_depth(self) -> int:
        return self._queue.qsize()

    async def submit(self, items: list[WorkItem]) -> list[WorkResult]:
        loop = asyncio.get_running_loop()
        futures = []
        for item in items:
            fut = loop.create_future()
            self._queue.put(_Ticket(item, fut, loop))
            futures.append(fut)
        return list(await asyncio.gather(*futures))

    async def swap(self, new: LoadedModel) -> None:
        """Serve `new` from the next batch on; returns once it is in place."""
        done: concurrent.futures.Future = concurrent.futures.Future()
        with self._swap_lock:
            if self._swap is not None:  # a newer update replaces one not yet applied
                self._swap[1].set_result(None)
            self._swap = (new, done)
        await asyncio.wrap_future(done)

    def _apply_swap(self) -> None:
        with self._swap_lock:
            pending, self._swap = self._swap, None
        if pending is not None:
            new, done = pending
            old, self.model = self.model, new
            log.info(
                "weights swapped", old_version=old.weight_version, new_version=new.weight_version, path=str(new.path)
            )
            del old
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            done.set_result(None)

    def _take_batch(self) -> list[_Ticket]:
        try:
            first = self._queue.get(timeout=0.02)
        except queue.Empty:
            return []
        batch = [first]
        deadline = time.monotonic() + self.batch_window_s
        while len(batch) < self.max_batch_size:
            remaining = deadline - time.monotonic()
            try:
                batch.append(self._queue.get(timeout=max(remaining, 0)) if remaining > 0 else self._queue.get_nowait())
            except queue.Empty:
                break
        return batch

    def _drain(self, room: int) -> list[_Ticket]:
        """Requests waiting now (no blocking), at most `room`."""
        out: list[_Ticket] = []
        while len(out) < room:
            try:
                out.append(self._queue.get_nowait())
            except queue.Empty:
                break
        return out

    def _loop(self) -> None:
        batch: DecodeBatch | None = None
        owners: dict[int, _Ticket] = {}  # by id(item): client-given rids need not be unique
        while not self._stop.is_set():
            if batch is None or not len(batch):
                self._apply_swap()
                tickets = self._take_batch()
                batch = DecodeBatch(self.model, self._generator)
            else:
                with self._swap_lock:
                    swap_waiting = self._swap is not None
                # A pending swap closes admission so the running rows drain and the swap can apply.
                tickets = [] if swap_waiting else self._drain(self.max_batch_size - len(batch))
            live = [t for t in tickets if not t.future.done()]  # skip callers that went away
            try:
                if live:
                    owners.update((id(t.item), t) for t in live)
                    self._deliver(owners, batch.add([t.item for t in live]))
                if len(batch):
                    self._deliver(owners, batch.step())
            except Exception as exc:  # a model error fails the running requests, not the server
                log.exception("batch failed", size=len(owners))
                for t in owners.values():
                    t.loop.call_soon_threadsafe(_settle, t.future, None, exc)
                owners.clear()
                batch = None

    def _deliver(self, owners: dict[int, _Ticket], results: list[tuple[WorkItem, WorkResult]]) -> None:
        for item, r in results:
            t = owners.pop(id(item))
            self.requests_done += 1
            t.loop.call_soon_threadsafe(_settle, t.future, r, None)


def _settle(fut: asyncio.Future, result: WorkResult | None, exc: BaseException | None) -> None:
    if fut.done():
        return
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(result)
