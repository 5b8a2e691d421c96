"""A `DecodeBatch`'s rows in the static decoder's KV pool (engine.graph_decode): when the batch moves there and back.

A decode step runs on the pool (from a captured CUDA graph) when it can: graphs on for this model, no shared prefix
in the batch, the rows and their lengths within the pool. The rows' KV then lives in the pool (`_slots`: each row's
slot, `_lens`: its KV length; `cache` and `mask` are None). A row leaving just frees its slot; freshly prefilled
rows go straight into free slots (`_pool_join`). Rows that do not fit, a shared prefix set up, or a row growing
past the pool move the KV back into the eager, left-padded cache (`_to_eager`); the next decode step that can use
the pool moves it in again (`_to_pool`). Prefill always runs on the eager cache.
"""

from __future__ import annotations

import torch

from engine.graph_decode import GraphUnavailable, StaticDecoder, bucket, decoder_for
from engine.kv_cache import GrowingCache


class PooledRows:
    """`DecodeBatch`'s pool methods (a mixin: the state is the batch's, set up in `DecodeBatch._clear_rows`)."""

    def _pool_ready(self) -> bool:
        """Whether this decode step runs on the pool; moves the KV there, or back out, as needed."""
        dec = decoder_for(self.lm.model, self.graphs)
        # Rows with a LoRA adapter decode eagerly: the adapter terms are added by forward hooks
        # (engine.lora_adapters), which a captured graph's replay never calls.
        ok = (
            dec is not None
            and self.shared is None
            and len(self.rows) <= dec.settings.max_rows
            and all(r.item.lora is None for r in self.rows)
            and dec.free_for(self)
        )
        if ok:
            longest = max(self._lens) if self._pool is not None else self.mask.shape[1]
            ok = longest + 1 <= dec.settings.max_tokens  # the new token's KV must fit too
        if not ok:
            if self._pool is not None:
                self._to_eager()
            return False
        if self._pool is None:
            try:
                self._to_pool(dec)
            except GraphUnavailable:
                return False
        return True

    def _to_pool(self, dec: StaticDecoder) -> None:
        lens = self.mask.sum(dim=1).tolist()
        slots = list(range(len(lens)))
        dec.write_rows(slots, [(layer.keys, layer.values) for layer in self.cache.layers], lens)
        dec.claim(self)
        self._pool, self._slots, self._lens = dec, slots, lens
        self.cache = self.mask = None  # the pool holds the KV now

    def _to_eager(self) -> None:
        """Back to the left-padded cache and mask the eager path (and admission) work on."""
        dec = self._pool
        if dec is None:
            return
        lens = self._lens
        self.cache = GrowingCache(dec.read_rows(self._slots, lens))
        width = max(lens)
        pad = width - torch.tensor(lens, device=self.last_pos.device)
        self.mask = (torch.arange(width, device=pad.device)[None, :] >= pad[:, None]).long()
        self._leave_pool()
        if dec.broken:
            dec.free()

    def _leave_pool(self) -> None:
        if self._pool is not None:
            self._pool.release(self)
        self._pool = self._slots = self._lens = None

    def _pool_join(self, cache, mask: torch.Tensor) -> bool:
        """Freshly prefilled rows (their own cache and mask) go straight into free slots, when they fit; the rows
        already there stay where they are (no copy). False: they do not fit, nothing changed."""
        dec = self._pool
        lens = mask.sum(dim=1).tolist()
        free = sorted(set(range(dec.settings.max_rows)) - set(self._slots))[: len(lens)]
        if self.shared is not None or len(free) < len(lens) or max(lens) + 1 > dec.settings.max_tokens:
            return False
        dec.write_rows(free, [(layer.keys, layer.values) for layer in cache.layers], lens)
        self._slots += free
        self._lens += lens
        return True

    def _pool_keep(self, keep: list[int]) -> None:
        """Rows leave: their slots are free again (nothing copied)."""
        self._slots = [self._slots[i] for i in keep]
        self._lens = [self._lens[i] for i in keep]

    def _pool_forward(self, tokens: torch.Tensor) -> torch.Tensor | None:
        """One decode step on the pool: the rows' next logits, or None when graphs just failed (the KV is back in
        the eager cache, and the step is to be taken eagerly)."""
        dec, slots = self._pool, self._slots
        if bucket(max(slots) + 1) > bucket(len(slots)):
            self._compact()
        try:
            logits = dec.step(self._slots, tokens, self.last_pos, self._lens)
        except GraphUnavailable:
            self._to_eager()
            return None
        self._lens = [n + 1 for n in self._lens]
        return logits

    def _compact(self) -> None:
        """Rows in high slots move to the free low ones, so the step runs on a smaller rows bucket."""
        n = len(self._slots)
        free = sorted(set(range(n)) - set(self._slots))
        movers = [i for i, s in enumerate(self._slots) if s >= n]
        src = [self._slots[i] for i in movers]
        self._pool.move(src, free, max(self._lens[i] for i in movers))
        for i, slot in zip(movers, free):
            self._slots[i] = slot

    def _free_pool(self) -> None:
        """Give the pool's memory back (memory release, a failed step), unless another batch holds rows in it."""
        self._leave_pool()
        dec = decoder_for(self.lm.model, self.graphs)
        if dec is not None and dec.free_for(self):
            dec.free()
