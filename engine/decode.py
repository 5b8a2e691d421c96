"""Decoding: `DecodeBatch`, the rows decoded together one token per step, and the rows leaving it (finished,
abandoned, aborted). How requests join it is engine.admission's part, which it inherits."""

from __future__ import annotations

import time
from collections import deque
from typing import Callable

import torch

from engine.admission import Admission
from engine.graph_decode import GraphSettings
from engine.lora_adapters import DEFAULT_KERNEL, lora_forward
from engine.pooled_rows import PooledRows
from engine.prefill import _Pending
from engine.prefix_cache import PrefixCache
from engine.sampling import _project, _sample, _tops
from engine.shared_prefix import SharedPrefix, SharedView
from engine.weights import LoadedModel
from engine.work import WorkItem, WorkResult, _progress, _result, _Row
from policy_client.wire import FinishReason
from rlmath.logprobs import scoring_temperature


def _check_stop_strings(row: _Row, before: int) -> None:
    """A stop string in the text, looking only where the newest text (from `before` on) can have completed one."""
    best: tuple[int, str] | None = None
    for s in row.stops:
        at = row.text.find(s, max(0, before - len(s) + 1))
        if at >= 0 and (best is None or at < best[0]):
            best = (at, s)
    if best is not None:
        at, s = best
        row.text = row.text[: at + (len(s) if row.params.no_stop_trim else 0)]
        row.finish = FinishReason(type="stop", matched=s)


class DecodeBatch(Admission, PooledRows):
    """Rows decoded together, one token per step; rows join and leave between steps.

    Continuous batching: a request that arrives while others decode is
    prefilled on its own, its KV cache left-padded to the batch's length (or the
    batch's to its) and concatenated, and it decodes from the next step on. A
    finished row leaves at once, so the batch never computes for it again.

    Prefix cache (`prefix_cache`, made for weights of `generation`): a prompt whose leading blocks are cached
    reuses their KV and is prefilled from there on; prompts and finished answers are inserted. A prompt that asks
    for input log-probs reuses no position whose log-prob it wants (those positions are computed, never skipped).

    Shared prefix (engine.shared_prefix): when two rows start with the same long prefix (a system prompt), the batch
    keeps its KV once and those rows keep only the rest of theirs; each decode step reads the prefix once for all of
    them. The batch holds at most one shared prefix, dropped when no row uses it any more.

    Chunked prefill (`chunk_tokens` > 0): a prompt with more than `chunk_tokens` tokens left to prefill waits in
    `pending` and is prefilled `chunk_tokens` at a time, one chunk per `step` before the decode step of the running
    rows, so a long prompt never stalls them for its whole prefill. Shorter prompts are prefilled at admission.

    CUDA graphs (`graphs`, engine.graph_decode): on a GPU a decode step replays a captured graph over a fixed KV
    pool when it can (no shared prefix, rows and lengths within the pool); engine.pooled_rows moves the KV between
    the pool and the eager cache as rows join and leave. Prefill, and every step on a CPU, runs eagerly.
    """

    def __init__(
        self,
        lm: LoadedModel,
        generator: torch.Generator,
        prefix_cache: PrefixCache | None = None,
        chunk_tokens: int = 0,
        generation: int | None = None,
        on_timing: Callable[[str, float, int], None] | None = None,
        graphs: GraphSettings | None = None,
        lora_kernel: str = DEFAULT_KERNEL,
    ):
        self.lm, self.generator = lm, generator
        self.lora_kernel = lora_kernel
        """How rows' LoRA adapters are computed together (engine.lora_adapters.KERNELS)."""
        self.prefix_cache = prefix_cache
        self.generation = (prefix_cache.generation if prefix_cache else 0) if generation is None else generation
        self.chunk_tokens = chunk_tokens
        self.on_timing = on_timing
        """Called with ("prefill" | "decode", seconds, tokens) after each forward pass (metrics)."""
        self.graphs = graphs
        """CUDA-graph decode steps (engine.graph_decode); None: every step eager."""
        self.pending: deque[_Pending] = deque()
        self.prefill_chunks = 0  # forward passes of chunked prefill so far (tests count interleaving with these)
        self.decode_steps = 0
        self._clear_rows()

    def _clear_rows(self) -> None:
        self.rows: list[_Row] = []
        self.inputs: list[tuple] = []  # per row: (input log-prob entries, input tops)
        self.prompt_lens: list[int] = []
        self.starts: list[float] = []
        self.cache = None
        self.mask: torch.Tensor | None = None  # [B, T]: 0 where a row is left-padded
        self.last_pos: torch.Tensor | None = None  # [B]: position of each row's last token
        self.next_logits: torch.Tensor | None = None  # [B, V]
        self.shared: SharedPrefix | None = None
        self.shared_by: LoadedModel | None = None  # the weights whose KV the shared prefix holds
        self.uses: torch.Tensor | None = None  # [B] bool: the row's cache starts after the shared prefix
        if getattr(self, "_pool", None) is not None:
            self._leave_pool()
        self._pool = None  # the StaticDecoder whose pool holds the rows' KV (then `cache` and `mask` are None)
        self._slots: list[int] | None = None  # per row: its slot in the pool
        self._lens: list[int] | None = None  # per row: its KV positions in the pool

    def reset(self) -> None:
        """Drop every row and pending prefill (after a failed forward pass: the cache may be half-updated)."""
        self.pending.clear()
        self._free_pool()
        self._clear_rows()

    def abort_all(self, message: str) -> list[tuple[WorkItem, WorkResult]]:
        """End every row and pending prefill now (SGLang's abort): each answer carries what was generated so far and
        finish_reason abort. The batch is left empty."""
        rows = self.rows + [p.row for p in self.pending]
        inputs = self.inputs + [(None, None)] * len(self.pending)
        lens = self.prompt_lens + [len(p.row.item.input_ids) for p in self.pending]
        starts = self.starts + [p.started for p in self.pending]
        out = []
        for row, inp, length, start in zip(rows, inputs, lens, starts):
            row.finish = FinishReason(type="abort", message=message)
            out.append((row.item, _result(self.lm, row, inp, length, start, final=True)))
        self.reset()
        return out

    def __len__(self) -> int:
        """Requests this batch holds: decoding rows and prompts still being prefilled."""
        return len(self.rows) + len(self.pending)

    def items(self) -> list[WorkItem]:
        return [r.item for r in self.rows] + [p.row.item for p in self.pending]

    def kv_bytes(self) -> int:
        """Bytes of KV this batch holds: each layer's buffer with its spare room (and keys or values not in it yet),
        the shared prefix, prompts part-way through chunked prefill. Read from another thread while the engine
        steps the batch: a snapshot, which a change under it may leave a step old or short."""
        tensors: list[torch.Tensor] = []
        try:
            for cache in [self.cache, *(p.cache for p in list(self.pending))]:
                for layer in list(getattr(cache, "layers", None) or ()):
                    tensors += [*getattr(layer, "_buffers", {}).values(), layer.keys, layer.values]
            shared = self.shared
            if shared is not None:
                tensors += [t for kv in shared.layers for t in kv]
            pool = self._pool
            if pool is not None:
                tensors += pool.keys + pool.values
        except (RuntimeError, AttributeError):  # changed while read
            pass
        storages = {}
        for t in tensors:
            if isinstance(t, torch.Tensor) and t.numel():
                storage = t.untyped_storage()
                storages[storage.data_ptr()] = storage.nbytes()
        return sum(storages.values())

    def _timed(self, kind: str, started: float, tokens: int) -> None:
        if self.on_timing is not None:
            self.on_timing(kind, time.perf_counter() - started, tokens)

    # ---- leaving -----------------------------------------------------------------------------------------------
    @torch.inference_mode()
    def remove(self, indices: list[int]) -> list[WorkItem]:
        """Drop the rows at `indices` (requests nobody waits for any more) without decoding them again."""
        gone = set(indices)
        if not gone:
            return []
        items = [r.item for i, r in enumerate(self.rows) if i in gone]
        self._keep([i for i in range(len(self.rows)) if i not in gone])
        return items

    @torch.inference_mode()
    def remove_items(self, items: list[WorkItem]) -> list[WorkItem]:
        """Drop these requests, decoding or still prefilling; returns those found."""
        ids = {id(it) for it in items}
        gone = [p.row.item for p in self.pending if id(p.row.item) in ids]
        self.pending = deque(p for p in self.pending if id(p.row.item) not in ids)
        return gone + self.remove([i for i, r in enumerate(self.rows) if id(r.item) in ids])

    def _keep(self, keep: list[int]) -> None:
        """Keep only the rows at `keep` (in order), then trim the left padding no remaining row needs."""
        if not keep:
            self._clear_rows()  # empty: drop the cache
            return
        if len(keep) < len(self.rows):
            idx = torch.tensor(keep, device=self.last_pos.device)
            if self._pool is not None:
                self._pool_keep(keep)
            else:
                self.cache.batch_select_indices(idx)
                self.mask = self.mask[idx]
            self.last_pos, self.uses = self.last_pos[idx], self.uses[idx]
            if self.next_logits is not None:
                self.next_logits = self.next_logits[idx]
            if self.shared is not None and not bool(self.uses.any()):
                self.shared = None  # its last user left
            for name in ("rows", "inputs", "prompt_lens", "starts"):
                values = getattr(self, name)
                setattr(self, name, [values[i] for i in keep])
        if self._pool is not None:
            return  # nothing to trim: each row's KV starts at its slot's position 0
        # A long row that left would otherwise keep every other row's attention over its padding.
        used = self.mask.any(dim=0).nonzero()
        first = int(used[0]) if used.numel() else 0
        if first > 0:
            for layer in self.cache.layers:
                layer.keys, layer.values = layer.keys[:, :, first:], layer.values[:, :, first:]
            self.mask = self.mask[:, first:]

    def _cache_finished(self, i: int) -> None:
        """Insert a finished row's prompt and answer (all but the last token, whose KV was never computed), so the
        session's next turn, which resends them, finds them."""
        if self.prefix_cache is None or not self.prefix_cache.enabled:
            return
        row = self.rows[i]
        ids = row.item.input_ids + row.out[:-1]
        if self._pool is not None:  # no shared prefix on the pool
            if len(ids) == self._lens[i] and len(ids) >= self.prefix_cache.block:
                self._insert(ids, self._pool.row_kv(self._slots[i], self._lens[i]), 0, row.item.lora_key)
            return
        valid = int(self.mask[i].sum())
        offset = len(self.shared) if self.shared is not None and bool(self.uses[i]) else 0
        if offset + valid != len(ids) or len(ids) < self.prefix_cache.block:
            return
        width = self.mask.shape[1]
        kv = [(layer.keys[i, :, width - valid :], layer.values[i, :, width - valid :]) for layer in self.cache.layers]
        self._insert(ids, kv, offset, row.item.lora_key)

    # ---- one step ----------------------------------------------------------------------------------------------
    @torch.inference_mode()
    def step(self) -> list[tuple[WorkItem, WorkResult]]:
        """One chunk of pending prefill (if any), then one token for every decoding row; returns the requests that
        finished (they leave the batch)."""
        finished: list[tuple[WorkItem, WorkResult]] = []
        if self.pending:
            finished += self._prefill_chunks(self.chunk_tokens or 1 << 62)
        if self.rows:
            finished += self._decode()
        return finished

    def _decode(self) -> list[tuple[WorkItem, WorkResult]]:
        lm, rows = self.lm, self.rows
        tokens, step_lps = _sample(
            self.next_logits, rows, self.generator, want_logprobs=any(r.item.return_logprob for r in rows)
        )
        drawn = tokens.tolist()  # one device read for all rows, not one per row
        for i, row in enumerate(rows):
            tok = drawn[i]
            row.out.append(tok)
            if row.item.return_logprob:
                row.out_lps.append((step_lps[i], tok, None))
                if row.item.top_logprobs_num:
                    temp = scoring_temperature(row.params.temperature)
                    row.out_tops.append(
                        _tops(torch.log_softmax(self.next_logits[i].float() / temp, dim=-1), row.item.top_logprobs_num)
                    )
            if row.detok is not None:
                before = len(row.text)
                row.text += row.detok.push(tok)
                if tok in row.stop_ids:
                    row.finish = FinishReason(type="stop", matched=tok)
                elif row.stops:
                    _check_stop_strings(row, before)
            elif tok in row.stop_ids:
                row.finish = FinishReason(type="stop", matched=tok)
            if not row.done and len(row.out) >= row.params.max_new_tokens:
                row.finish = FinishReason(type="length", length=row.params.max_new_tokens)
            if row.item.on_progress is not None and not row.done:  # the final answer is delivered separately
                row.item.on_progress(_progress(lm, row, self.inputs[i], self.prompt_lens[i], self.starts[i]))
        finished = []
        for i, r in enumerate(rows):
            if r.done:
                self._cache_finished(i)
                finished.append((r.item, _result(lm, r, self.inputs[i], self.prompt_lens[i], self.starts[i], True)))
        keep = [i for i, r in enumerate(rows) if not r.done]
        self.next_logits = None  # consumed; recomputed below for the rows that stay
        self._keep(keep)
        if not keep:
            return finished
        tokens = tokens[torch.tensor(keep, device=tokens.device)] if len(keep) < len(rows) else tokens
        self.last_pos = self.last_pos + 1
        t0 = time.perf_counter()
        if self._pool_ready():
            logits = self._pool_forward(tokens)
            if logits is not None:
                self.next_logits = logits
                self.decode_steps += 1
                self._timed("decode", t0, len(keep))
                return finished
        self.mask = torch.cat(
            [self.mask, torch.ones((len(keep), 1), dtype=self.mask.dtype, device=self.mask.device)], dim=1
        )
        padded = bool((self.mask == 0).any())
        shared = {}
        if self.shared is not None:
            shared["shared_prefix"] = SharedView(self.shared, self.uses)
        with lora_forward(lm.model, self._lora_rows([r.item for r in self.rows])):
            hidden = lm.model.get_decoder()(
                input_ids=tokens.unsqueeze(1),
                attention_mask=self.mask if padded else None,
                position_ids=self.last_pos.unsqueeze(1),
                past_key_values=self.cache,
                use_cache=True,
                **shared,
            ).last_hidden_state
        self.next_logits = _project(lm, hidden[:, -1])
        self.decode_steps += 1
        self._timed("decode", t0, len(keep))
        return finished
