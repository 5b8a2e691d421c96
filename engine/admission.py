"""How requests get into a `DecodeBatch` (engine.decode), which inherits these methods from `Admission`: the
prefix-cache lookups, prefilling admitted prompts in groups and joining them to the running rows, setting up the
batch's shared prefix, and chunked prefill of long prompts (one chunk per step until they join).

The state these methods read and write (rows, cache, mask, pending, shared prefix) is the batch's, set up in
`DecodeBatch.__init__`; its class docstring says how admission, the prefix cache, the shared prefix and chunked
prefill fit together."""

from __future__ import annotations

import time

import structlog
import torch

from engine.attention import split_prefill_available
from engine.kv_cache import GrowingCache
from engine.lora_adapters import DEFAULT_KERNEL, LoraRows, lora_forward
from engine.prefill import _input_logprob_start, _Pending, _prefill, _span_logprobs
from engine.prefix_cache import BLOCK_TOKENS
from engine.sampling import _project
from engine.shared_prefix import MIN_SHARED_TOKENS, SharedPrefix, common_prefix
from engine.work import WorkItem, WorkResult, _result, _Row

log = structlog.get_logger(__name__)


class Admission:
    """`DecodeBatch`'s admission methods (a mixin: it holds no state of its own)."""

    # ---- prefix cache ------------------------------------------------------------------------------------------
    def _reuse_limit(self, it: WorkItem) -> int:
        """Most leading prompt tokens whose KV may come from the cache: never the last (its hidden state gives the
        first output token), never a position whose input log-prob is asked for (token p needs the state at p-1)."""
        length = len(it.input_ids)
        limit = length - 1
        if it.return_logprob and 0 <= it.logprob_start_len < length:
            limit = min(limit, max(it.logprob_start_len - 1, 0))
        return limit

    def _match(self, it: WorkItem, start: int = 0) -> tuple[int, list | None]:
        if self.prefix_cache is None:
            return 0, None
        return self.prefix_cache.match(it.input_ids, self._reuse_limit(it), self.generation, start, it.lora_key)

    def _match_len(self, it: WorkItem) -> int:
        if self.prefix_cache is None:
            return 0
        return self.prefix_cache.match_len(it.input_ids, self._reuse_limit(it), self.generation, it.lora_key)

    def _insert(self, ids: list[int], kv: list, offset: int = 0, namespace: str | None = None) -> None:
        """`kv` holds the tokens from `offset` on (a row sharing the batch's prefix has no copy of it); `namespace`:
        the LoRA adapter whose KV it is (WorkItem.lora_key; None: the base model's)."""
        if self.prefix_cache is not None:
            self.prefix_cache.insert(ids, kv, self.generation, offset=offset, namespace=namespace)

    # ---- LoRA adapters -----------------------------------------------------------------------------------------
    def _lora_rows(self, items: list[WorkItem]) -> LoraRows | None:
        """The adapters of a forward pass over `items` (in row order); None when none has one. The decode rows'
        set is kept while the rows stay the same, with what it gathered for them."""
        if all(it.lora is None for it in items):
            return None
        rows = LoraRows([it.lora for it in items], getattr(self, "lora_kernel", DEFAULT_KERNEL))
        last = getattr(self, "_lora_last", None)
        if last is not None and last.signature() == rows.signature() and last.kernel == rows.kernel:
            return last
        self._lora_last = rows
        return rows

    # ---- admission ---------------------------------------------------------------------------------------------
    @torch.inference_mode()
    def add(self, items: list[WorkItem]) -> list[tuple[WorkItem, WorkResult]]:
        """Prefill `items` and join them to the batch; returns those already finished (max_new_tokens 0).

        Prompts are prefilled per (cached prefix, length): equal lengths together (no padding), different lengths
        apart, so one long prompt admitted with short ones costs them nothing but its own forward pass. After each
        group the cache is consulted again, so prompts admitted together that share a prefix compute it once.
        Prompts longer than `chunk_tokens` (after their cached prefix) wait for chunked prefill in `step`.
        """
        results: list[tuple[WorkItem, WorkResult]] = []
        todo: list[WorkItem] = []
        for it in items:
            if self.chunk_tokens and len(it.input_ids) - self._match_len(it) > self.chunk_tokens:
                self.pending.append(_Pending(_Row(it, self.lm), time.time()))
            else:
                todo.append(it)
        while todo:
            hits = [self._match_len(it) for it in todo]
            # shortest first (ready to decode soonest); among equal lengths the longest cached prefix
            first = min(range(len(todo)), key=lambda i: (len(todo[i].input_ids), -hits[i]))
            key = (len(todo[first].input_ids), hits[first])
            group = [i for i in range(len(todo)) if (len(todo[i].input_ids), hits[i]) == key]
            self._share_cached([todo[i] for i in group], key[1])
            shared = self._shared_for([todo[i] for i in group], key[1])
            start = len(shared) if shared is not None else 0
            prefixes = [self._match(todo[i], start) for i in group] if key[1] else [(0, None)] * len(group)
            if any(n != key[1] for n, _ in prefixes):  # evicted in between (cannot happen on one thread): no reuse
                key, prefixes, shared = (key[0], 0), [(0, None)] * len(group), None
            results += self._add_group([todo[i] for i in group], key[1], [kv for _, kv in prefixes], shared)
            if self.shared is not None and (not self.rows or not bool(self.uses.any())):
                self.shared = None  # set up for a group that finished at once: nobody holds it
            taken = set(group)
            todo = [it for i, it in enumerate(todo) if i not in taken]
        return results

    def _shared_for(self, items: list[WorkItem], cached: int) -> SharedPrefix | None:
        """The batch's shared prefix, when these prompts (with `cached` tokens in the prefix cache) can be prefilled
        against it directly: their caches then never hold a copy of it."""
        shared = self._shareable()
        if shared is None or cached < len(shared) or not split_prefill_available(self.lm.device):
            return None
        if any(it.lora is not None for it in items):
            return None  # the shared prefix holds the base model's KV: rows with an adapter keep their own
        return shared if all(shared.starts(it.input_ids) for it in items) else None

    def _add_group(
        self, items: list[WorkItem], cached: int, prefixes: list, shared: SharedPrefix | None = None
    ) -> list[tuple[WorkItem, WorkResult]]:
        started = time.time()
        t0 = time.perf_counter()
        lora = LoraRows([it.lora for it in items], getattr(self, "lora_kernel", DEFAULT_KERNEL))
        rows, inputs, lengths, cache, mask, positions, hidden = _prefill(
            self.lm, items, cached, prefixes, shared, lora if lora.active else None
        )
        self._timed("prefill", t0, (lengths[0] - cached) * len(items))
        offset = len(shared) if shared is not None else 0
        for i, row in enumerate(rows):
            row.cached_tokens = cached
            if self.prefix_cache is not None:
                self.prefix_cache.record(lengths[i], cached)
                kv = [(layer.keys[i], layer.values[i]) for layer in cache.layers]
                self._insert(row.item.input_ids, kv, offset, row.item.lora_key)
        next_logits = _project(self.lm, hidden[:, -1])
        last = positions[:, -1]
        return self._join(rows, inputs, lengths, cache, mask, last, next_logits, started, shared is not None)

    def _join(self, rows, inputs, lengths, cache, mask, last_pos, next_logits, started, pre_shared: bool = False):
        """Merge freshly prefilled rows into the batch; returns those already finished."""
        done = [i for i, r in enumerate(rows) if r.done]
        results = [(rows[i].item, _result(self.lm, rows[i], inputs[i], lengths[i], started, final=True)) for i in done]
        keep = [i for i in range(len(rows)) if not rows[i].done]
        if not keep:
            return results
        if len(keep) < len(rows):
            idx = torch.tensor(keep, device=mask.device)
            cache.batch_select_indices(idx)
            mask, last_pos, next_logits = mask[idx], last_pos[idx], next_logits[idx]
        if pre_shared:  # prefilled against the shared prefix: their caches start after it already
            uses = torch.ones(len(keep), dtype=torch.bool, device=mask.device)
        else:
            cache, mask, uses = self._share([rows[i] for i in keep], cache, mask)
        if self.rows:
            # rows decoding on the CUDA-graph pool (engine.pooled_rows): the new ones go into free slots, or all
            # of them back to the eager cache
            if self._pool is None or not self._pool_join(cache, mask):
                self._to_eager()
                cache, mask = _merge_caches(self.cache, self.mask, cache, mask)
            last_pos = torch.cat([self.last_pos, last_pos])
            next_logits = torch.cat([self.next_logits, next_logits])
            uses = torch.cat([self.uses, uses])
        if self._pool is None:
            self.cache, self.mask = cache, mask
        self.last_pos, self.next_logits, self.uses = last_pos, next_logits, uses
        self.rows += [rows[i] for i in keep]
        self.inputs += [inputs[i] for i in keep]
        self.prompt_lens += [lengths[i] for i in keep]
        self.starts += [started] * len(keep)
        return results

    # ---- shared prefix -----------------------------------------------------------------------------------------
    def _share(self, new_rows: list[_Row], cache, mask: torch.Tensor) -> tuple[object, torch.Tensor, torch.Tensor]:
        """Before `new_rows` (their cache and mask, no other rows) join: set up a shared prefix if they bring the
        first one worth sharing, and drop it from the caches of the rows that start with it. Returns the new rows'
        cache, mask and uses."""
        if self.shared is None:
            self._set_up_shared(new_rows, cache, mask)
        shared = self._shareable()
        uses = [shared is not None and r.item.lora is None and shared.starts(r.item.input_ids) for r in new_rows]
        if any(uses):
            cache, mask = _drop_leading(cache, mask, [len(self.shared) if u else 0 for u in uses])
        return cache, mask, torch.tensor(uses, dtype=torch.bool, device=mask.device)

    def _share_cached(self, items: list[WorkItem], cached: int) -> None:
        """Prompts admitted together that find a long common prefix in the prefix cache share it from there: the
        batch takes one copy of its KV and they are prefilled against it, where each would otherwise copy the cached
        KV out, and the batch then find the common prefix and drop it from every row (`_set_up_shared`)."""
        if (
            self.shared is not None
            or self.prefix_cache is None
            or len(items) < 2
            or any(it.lora is not None for it in items)  # the shared prefix is the base model's KV only
            or cached < MIN_SHARED_TOKENS
            or not split_prefill_available(self.lm.device)
        ):
            return
        first = items[0].input_ids
        common = min(common_prefix(first, it.input_ids) for it in items[1:])
        block = self.prefix_cache.block
        length = min(common, cached) // block * block  # cached < len(first): the last token is never reused
        if length < MIN_SHARED_TOKENS:
            return
        n, kv = self.prefix_cache.match(first, length, self.generation)
        if n != length or kv is None:
            return
        self.shared_by = self.lm
        self.shared = SharedPrefix(list(first[:length]), [(k[0], v[0]) for k, v in kv])
        self._release_copies()
        log.debug("shared prefix set up from the prefix cache", tokens=length, rows=len(items))

    def _shareable(self) -> SharedPrefix | None:
        """The shared prefix, if rows joining now may use it: not after an in-place weight update (the running rows
        keep the old weights' KV they hold, a new row must not read it); such rows keep their own copy."""
        return self.shared if self.shared is not None and self.shared_by is self.lm else None

    def _set_up_shared(self, new_rows: list[_Row], cache, mask: torch.Tensor) -> None:
        """The longest whole-block prefix one new row has in common with another row (new or in the batch)."""
        if new_rows[0].item.lora is not None:
            return  # only the base model's rows share a prefix (its KV differs under every adapter)
        first = new_rows[0].item.input_ids
        # rows from before an in-place update keep their KV; rows with an adapter never share
        current = [r for r in self.rows if r.lm is self.lm and r.item.lora is None]
        others = [r.item.input_ids for r in new_rows[1:] if r.item.lora is None] + [r.item.input_ids for r in current]
        best = max((common_prefix(first, o) for o in others), default=0)
        block = self.prefix_cache.block if self.prefix_cache is not None else BLOCK_TOKENS
        length = min(best, len(first) - 1) // block * block
        if length < MIN_SHARED_TOKENS:
            return
        start = mask.shape[1] - int(mask[0].sum())  # row 0's first real column (new rows are not left-padded)
        self.shared_by = self.lm
        self.shared = SharedPrefix(
            list(first[:length]),
            [
                (layer.keys[0, :, start : start + length].clone(), layer.values[0, :, start : start + length].clone())
                for layer in cache.layers
            ],
        )
        self._release_copies()
        log.debug("shared prefix set up", tokens=length, rows=len(self.rows))

    def _release_copies(self) -> None:
        """Rows already decoding that start with the newly set-up shared prefix give up their own copy of it. One
        row left holding a copy would keep the whole batch's cache as wide as the prefix (the others left-padded),
        and every decode step would attend over it for every row: a lone request admitted just before a group that
        shares from the prefix cache made such a batch decode 2-3x slower."""
        if not self.rows:
            return
        self._to_eager()
        length = len(self.shared)
        drops = [
            length if r.lm is self.lm and r.item.lora is None and self.shared.starts(r.item.input_ids) else 0
            for r in self.rows
        ]
        if any(drops):
            self.cache, self.mask = _drop_leading(self.cache, self.mask, drops)
        self.uses = torch.tensor([d > 0 for d in drops], dtype=torch.bool, device=self.mask.device)

    # ---- chunked prefill ---------------------------------------------------------------------------------------
    def _prefill_chunks(self, budget: int) -> list[tuple[WorkItem, WorkResult]]:
        """Up to `budget` prompt tokens of the pending prefills, oldest first; the finished ones join the batch."""
        results: list[tuple[WorkItem, WorkResult]] = []
        lm = self.lm
        while self.pending and budget > 0:
            p = self.pending[0]
            it = p.row.item
            ids, length = it.input_ids, len(it.input_ids)
            if p.entries is None:
                p.entries, p.tops = _input_logprob_start(it, length)
            if self._match_len(it) > p.done:  # another request cached more of this prompt meanwhile: jump ahead
                cached, kv = self._match(it)
                if cached > p.done:
                    p.cache, p.done = GrowingCache(kv), cached
                    p.row.cached_tokens = cached
            if p.cache is None:
                p.cache = GrowingCache()
            take = min(budget, length - p.done)
            t0 = time.perf_counter()
            with lora_forward(lm.model, self._lora_rows([it])):
                hidden = lm.model.get_decoder()(
                    input_ids=torch.tensor([ids[p.done : p.done + take]], dtype=torch.long, device=lm.device),
                    position_ids=torch.arange(p.done, p.done + take, device=lm.device).unsqueeze(0),
                    past_key_values=p.cache,
                    use_cache=True,
                    chunk_after_past=p.done > 0,  # no padding: everything before is visible (engine.attention)
                ).last_hidden_state[0]
            self.prefill_chunks += 1
            self._timed("prefill", t0, take)
            if p.entries is not None:
                _span_logprobs(lm, p.row, hidden, p.done, p.entries, p.tops)
            p.done += take
            budget -= take
            p.last_hidden = hidden[-1:]
            self._insert(ids[: p.done], [(layer.keys[0], layer.values[0]) for layer in p.cache.layers], 0, it.lora_key)
            if p.done < length:
                continue
            self.pending.popleft()
            if self.prefix_cache is not None:
                self.prefix_cache.record(length, p.row.cached_tokens)
            mask = torch.ones((1, length), dtype=torch.long, device=lm.device)
            last_pos = torch.tensor([length - 1], device=lm.device)
            inputs = (p.entries, p.tops) if it.return_logprob else (None, None)
            results += self._join(
                [p.row], [inputs], [length], p.cache, mask, last_pos, _project(lm, p.last_hidden), p.started
            )
        return results


def _merge_caches(cache_a, mask_a: torch.Tensor, cache_b, mask_b: torch.Tensor):
    """Concatenate two batches' KV caches along the batch, left-padding the shorter in time."""
    ta, tb = mask_a.shape[1], mask_b.shape[1]
    width = max(ta, tb)
    pad = torch.nn.functional.pad
    for la, lb in zip(cache_a.layers, cache_b.layers):
        ka, va, kb, vb = la.keys, la.values, lb.keys, lb.values  # [B, heads, T, head_dim]
        la.keys = torch.cat([pad(ka, (0, 0, width - ta, 0)), pad(kb, (0, 0, width - tb, 0))])
        la.values = torch.cat([pad(va, (0, 0, width - ta, 0)), pad(vb, (0, 0, width - tb, 0))])
    mask = torch.cat([pad(mask_a, (width - ta, 0)), pad(mask_b, (width - tb, 0))])
    return cache_a, mask


def _drop_leading(cache, mask: torch.Tensor, drops: list[int]):
    """Remove the first `drops[i]` real columns of row i (its part of the shared prefix), re-left-padded to the
    longest row that remains."""
    valid = mask.sum(dim=1).tolist()
    width = mask.shape[1]
    keep = [int(v) - d for v, d in zip(valid, drops)]
    new_width = max(keep)
    new_mask = torch.zeros((mask.shape[0], new_width), dtype=mask.dtype, device=mask.device)
    for i, k in enumerate(keep):
        new_mask[i, new_width - k :] = 1
    for layer in cache.layers:
        for name in ("keys", "values"):
            old = getattr(layer, name)
            new = old.new_zeros((old.shape[0], old.shape[1], new_width, old.shape[3]))
            for i, k in enumerate(keep):
                new[i, :, new_width - k :] = old[i, :, width - k :]
            setattr(layer, name, new)
    return cache, new_mask
