"""Giving the engine's device memory back for a train step on the same GPU, and taking it again.

Releasing memory (`release_memory`, SGLang's /release_memory_occupation), so a
train step on the same GPU can have it: admission stops at once (new requests
wait in their queues; none is refused), the running rows finish, then
"kv_cache" empties the prefix cache and the batches' KV, and "weights" moves
the weights to CPU memory (on a CPU engine they stay where they are). The model
object stays the served one, so `resume_memory` moves the same weights back and
admission opens again once nothing is released. Weight updates while the
weights are released are written into the CPU copy (see engine.routes_weights).
A release waits for running rows; rows held by an in-place pause cannot finish,
so a release then fails with MemoryRefused instead of waiting forever.
"""

from __future__ import annotations

import structlog
import torch

from engine.weights import move_weights, weights_bytes

log = structlog.get_logger(__name__)

RELEASABLE = frozenset({"kv_cache", "weights"})
"""The tags of /release_memory_occupation this engine acts on; SGLang's third, cuda_graph, needs nothing of its own
here: the decode graphs point into the KV pool, so they go with kv_cache and are captured again on the next decode."""


class MemoryRefused(Exception):
    """A memory release the engine cannot carry out now; the message says why (nothing was released)."""


class MemoryRelease:
    """The memory-release half of engine.scheduler.Scheduler (a mixin): it reads and writes the scheduler's state
    (`released`, `released_bytes`, `_releases`, the batches, the prefix cache) on the engine thread, and its public
    methods post to that thread as every control does."""

    async def release_memory(self, tags: frozenset[str]) -> str:
        """Give back the memory of `tags` (RELEASABLE; others are ignored): admission stops at once, the running
        rows finish, then the memory goes. Returns what was done; raises MemoryRefused when rows are held by a
        pause (they cannot finish). Releasing what is released already does nothing."""
        return await self._engine_thread("release", frozenset(tags) & RELEASABLE)

    async def resume_memory(self, tags: frozenset[str]) -> str:
        """Take back the memory of `tags` (weights move back to their device); once nothing is released the waiting
        requests are admitted again. Returns what was done; resuming what is not released does nothing."""
        return await self._engine_thread("resume_memory", frozenset(tags) & RELEASABLE)

    @property
    def weights_offloaded(self) -> bool:
        """The weights are released to CPU memory: an update is written there (and a checkpoint loaded there)."""
        return "weights" in self.released and self.model.device.type != "cpu"

    def memory(self) -> dict:
        """Bytes held now, read from the HTTP side (the engine thread may be a step further meanwhile)."""
        lm, current, draining = self.model, self._current, self._draining
        old = draining.lm if draining is not None and draining.lm is not lm else None
        out = {
            "weights_bytes": weights_bytes(lm),
            "weights_device": str(next(lm.model.parameters()).device),
            "draining_weights_bytes": weights_bytes(old) if old is not None else 0,
            "kv_cache_bytes": sum(b.kv_bytes() for b in (current, draining) if b is not None),
            "prefix_cache_bytes": self.prefix_cache.bytes,
            "released": sorted(self.released),
            "releasing": bool(self._releases),
            "released_bytes": dict(self.released_bytes),
            "cuda": None,
        }
        if lm.device.type == "cuda":
            out["cuda"] = {
                "memory_allocated": torch.cuda.memory_allocated(lm.device),
                "memory_reserved": torch.cuda.memory_reserved(lm.device),
            }
        return out

    # ---- memory release ------------------------------------------------------------------------------------------
    def _admission_closed(self) -> bool:
        return bool(self._releases or self.released)

    def _settle_releases(self) -> None:
        """Carry out the releases asked for once no row runs; refuse them when rows are held by a pause."""
        if not self._releases:
            return
        if self._running_rows():
            if self.paused:
                refusal = MemoryRefused(
                    f"{self._running_rows()} requests are held by /pause_generation and cannot finish: continue "
                    "generation (or pause with mode abort) before releasing memory; nothing was released"
                )
                refused, self._releases = self._releases, []  # cleared first: a woken caller may read the state at once
                for _, done in refused:
                    done.set_exception(refusal)
            return
        releases, self._releases = self._releases, []
        for tags, done in releases:
            try:
                done.set_result(self._release(tags))
            except Exception as exc:  # the caller gets it; the engine thread goes on
                log.exception("memory release failed", tags=sorted(tags))
                done.set_exception(exc)

    def _release(self, tags: frozenset[str]) -> str:
        """No row runs: give back the memory of `tags` (engine thread)."""
        self._release_drained()  # old weights whose last rows just finished go first
        said = []
        if "kv_cache" in tags and "kv_cache" not in self.released:
            freed = self.prefix_cache.bytes + self._current.kv_bytes()
            self.prefix_cache.clear()  # the weights are unchanged: no new generation
            self._current.reset()
            self.released_bytes["kv_cache"] = freed
            said.append(f"kv_cache ({freed} bytes of prefix cache and KV freed)")
        if "weights" in tags and "weights" not in self.released:
            if self.model.device.type == "cpu":
                self.released_bytes["weights"] = 0
                said.append("weights (kept where they are: this engine serves on the CPU, no device memory to free)")
            else:
                moved = move_weights(self.model, torch.device("cpu"))
                self.released_bytes["weights"] = moved
                said.append(f"weights ({moved} bytes moved to CPU memory)")
        self.released |= tags
        if torch.cuda.is_available():
            torch.cuda.empty_cache()  # the freed blocks go back to the driver, for the trainer's process
        log.info("memory released", tags=sorted(tags), released=sorted(self.released), bytes=self.released_bytes)
        done = f"Released {' and '.join(said)}" if said else "Nothing to release: already released"
        return f"{done}; requests wait until /resume_memory_occupation."

    def _resume_memory(self, tags: frozenset[str]) -> str:
        back = tags & self.released
        if "weights" in back:
            move_weights(self.model, self.model.device)
        self.released -= back
        for tag in back:
            self.released_bytes.pop(tag, None)
        log.info("memory resumed", tags=sorted(back), released=sorted(self.released), queued=self.queue_depth())
        done = f"Resumed {' and '.join(sorted(back))}" if back else "Nothing to resume: not released"
        if self.released:
            return f"{done}; still released: {', '.join(sorted(self.released))} (requests wait)."
        return f"{done}; requests are admitted."

    def _release_drained(self) -> None:
        if self._draining is not None and not len(self._draining):
            version = self._draining.lm.weight_version
            self._draining = None
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            if self._drained is not None:
                self._drained.set_result(None)
                self._drained = None
            log.info("old weights released", weight_version=version)
