"""Batched generation and scoring on a Hugging Face causal LM.

A `DecodeBatch` prefills requests, decodes them step by step with a KV cache,
and lets new requests join and finished (or abandoned) ones leave between steps
(continuous batching); each row keeps its own sampling parameters, stop
conditions and token budget.

Prefill never pads one prompt to another's length: requests admitted together
are prefilled per prompt length (equal lengths share one forward pass), then
merged into the batch, so a short prompt never pays for a long one's prefill.
Log-probs follow `rlmath.logprobs` (the convention the trainer uses too).
"""

from __future__ import annotations

import time
import uuid
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import structlog
import torch

from engine.attention import split_prefill_available, use_engine_attention
from engine.cpu_linears import forget_packed, pack_linears
from engine.kv_cache import GrowingCache
from engine.prefix_cache import BLOCK_TOKENS, PrefixCache
from engine.shared_prefix import MIN_SHARED_TOKENS, SharedPrefix, SharedView, common_prefix
from openclaw_rl.device import DeviceUnavailable, pick_device
from policy_client.detok import IncrementalDetokenizer
from policy_client.wire import FinishReason, LogprobEntry, SamplingParams
from rlmath.logprobs import scoring_temperature, softmax_parts, token_logprobs

log = structlog.get_logger(__name__)

LM_HEAD_CHUNK = 512  # positions projected to the vocabulary at once (bounds [chunk, V] memory)


class ModelLoadError(ValueError):
    """A checkpoint that cannot be served (missing, unreadable, incompatible)."""


@dataclass
class LoadedModel:
    model: torch.nn.Module
    tokenizer: object
    path: Path
    device: torch.device
    weight_version: str
    eos_ids: frozenset[int]
    vocab_size: int

    def signature(self) -> tuple:
        """What a weight update must keep: the vocabulary and the architecture."""
        cfg = self.model.config
        return (cfg.model_type, self.vocab_size, cfg.hidden_size, cfg.num_hidden_layers)


def load_model(
    path: Path,
    device: str = "auto",
    dtype: str = "auto",
    weight_version: str = "0",
    tokenizer: object | None = None,
    cpu_packed_linears: bool = True,
) -> LoadedModel:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(path).expanduser().absolute()
    if not (path / "config.json").is_file():
        raise ModelLoadError(f"no Hugging Face checkpoint at {path} (config.json missing)")
    try:
        dev = pick_device(device)
    except DeviceUnavailable as exc:
        raise ModelLoadError(f"engine.device: {exc}") from exc
    torch_dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}.get(dtype)
    if torch_dtype is None:
        torch_dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    try:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype)
        if tokenizer is None:
            tokenizer = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise ModelLoadError(f"cannot load checkpoint at {path}: {exc}") from exc
    model.to(dev).eval()
    if cpu_packed_linears and dev.type == "cpu":
        pack_linears(model)
    if model.config._attn_implementation == "sdpa":
        use_engine_attention(model)  # SDPA, plus the shared-prefix decode and the split prefill chunk
    eos: set[int] = set()
    for source in (
        model.generation_config.eos_token_id,
        model.config.eos_token_id,
        getattr(tokenizer, "eos_token_id", None),
    ):
        if isinstance(source, int):
            eos.add(source)
        elif isinstance(source, (list, tuple)):
            eos.update(int(x) for x in source)
    vocab = model.get_output_embeddings().weight.shape[0]
    return LoadedModel(model, tokenizer, path, dev, weight_version, frozenset(eos), vocab)


@dataclass(frozen=True)
class WeightSpec:
    """What a tensor sent for a parameter must be: its shape; the served dtype; its storage (tied weights share one)."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    storage: int


def weight_specs(lm: LoadedModel) -> dict[str, WeightSpec]:
    """Every weight of the served model under its Hugging Face name (tied weights appear under each of their names)."""
    return {
        name: WeightSpec(tuple(t.shape), t.dtype, t.untyped_storage().data_ptr())
        for name, t in lm.model.state_dict().items()
    }


@torch.inference_mode()
def apply_weights(lm: LoadedModel, tensors: dict[str, torch.Tensor], weight_version: str) -> LoadedModel:
    """Copy `tensors` (checked against `weight_specs`, already in the served dtype and device) into the served model
    in place; the same model labelled `weight_version`. Runs on the engine thread between forward passes."""
    state = lm.model.state_dict()
    for name, tensor in tensors.items():
        state[name].copy_(tensor)
    forget_packed(lm.model)  # repacked on the next forward, whatever way the copy took
    return replace(lm, weight_version=weight_version)


@dataclass
class WorkItem:
    """One prompt of a /generate call, validated and tokenized."""

    input_ids: list[int]
    params: SamplingParams
    return_logprob: bool = False
    logprob_start_len: int = -1
    top_logprobs_num: int = 0
    rid: str = field(default_factory=lambda: uuid.uuid4().hex)
    on_progress: Callable[["WorkResult"], None] | None = None
    """Called (from the engine thread) after every decoded token; streaming uses it."""
    received_at: float = field(default_factory=time.time)
    tenant: str | None = None
    """Whose request this is, for fair sharing of engine slots; None: the shared system bucket (judges, teacher,
    training)."""
    incremental: bool = False
    """Streaming progress events carry only what is new (SGLang's incremental streaming output), not snapshots."""


@dataclass
class WorkResult:
    rid: str
    text: str
    output_ids: list[int]
    prompt_tokens: int
    finish_reason: FinishReason | None
    weight_version: str
    output_token_logprobs: list[LogprobEntry] | None = None
    input_token_logprobs: list[LogprobEntry] | None = None
    output_top_logprobs: list[list[LogprobEntry]] | None = None
    input_top_logprobs: list[list[LogprobEntry] | None] | None = None
    e2e_latency: float = 0.0
    cached_tokens: int = 0
    completion_tokens: int | None = None
    """Tokens generated so far; None: len(output_ids) (an incremental event carries only the new ones)."""

    def to_wire(self) -> dict:
        meta: dict = {
            "id": self.rid,
            "finish_reason": self.finish_reason.model_dump(exclude_none=True) if self.finish_reason else None,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": len(self.output_ids) if self.completion_tokens is None else self.completion_tokens,
            "cached_tokens": self.cached_tokens,
            "e2e_latency": round(self.e2e_latency, 6),
            "weight_version": self.weight_version,
        }
        for name in ("output_token_logprobs", "input_token_logprobs", "output_top_logprobs", "input_top_logprobs"):
            value = getattr(self, name)
            if value is not None:
                meta[name] = value
        return {"text": self.text, "output_ids": list(self.output_ids), "meta_info": meta}


class _Row:
    """Decoding state of one request inside a batch."""

    def __init__(self, item: WorkItem, lm: LoadedModel):
        self.item = item
        self.lm = lm  # the weights its KV came from (an in-place update changes the batch's, not its past)
        self.params = item.params
        self.out: list[int] = []
        self.out_lps: list[LogprobEntry] = []
        self.out_tops: list[list[LogprobEntry]] = []
        self.text = ""
        self.finish: FinishReason | None = None
        self.stops = self.params.stop_strings()
        self.stop_ids = set(self.params.stop_token_ids or [])
        if not self.params.ignore_eos:
            self.stop_ids |= lm.eos_ids
        if self.params.max_new_tokens == 0:
            self.finish = FinishReason(type="length", length=0)
        # Text is followed token by token only when someone reads it before the end (stop strings, streaming).
        self.detok = (
            IncrementalDetokenizer(lm.tokenizer, self.params.skip_special_tokens)
            if (self.stops or item.on_progress)
            else None
        )
        self.hold = max((len(s) for s in self.stops), default=1) - 1  # text that may still become a stop string
        self.sent_ids = 0  # incremental streaming: what earlier progress events carried
        self.sent_text = 0
        self.cached_tokens = 0

    @property
    def done(self) -> bool:
        return self.finish is not None


CDF_BLOCK = 1024
"""Sampling takes a token's block of the vocabulary first, then the token inside it (see `_inverse_cdf`)."""


def _sample(
    logits: torch.Tensor, rows: list[_Row], generator: torch.Generator, want_logprobs: bool
) -> tuple[torch.Tensor, list[float] | None]:
    """Draw one token per row from its own temperature / top-k / top-p / min-p distribution, and the drawn tokens'
    log-probs (rlmath's convention) when `want_logprobs`.

    One exp pass over [B, V] gives both logz and the probabilities, and the draw itself reads only block sums:
    every other pass over a 150k vocabulary costs each row as much again, which is what limits batching on a CPU.
    """
    dev = logits.device
    greedy = [r.params.temperature == 0 or r.params.top_k == 1 for r in rows]
    sampled = [i for i, g in enumerate(greedy) if not g]
    tokens = torch.empty(len(rows), dtype=torch.long, device=dev)
    if not sampled:
        tokens = logits.argmax(dim=-1)
    elif len(sampled) < len(rows):
        picked = [i for i, g in enumerate(greedy) if g]
        tokens[picked] = logits[picked].argmax(dim=-1)
    if not sampled and not want_logprobs:
        return tokens, None
    temps = [scoring_temperature(r.params.temperature) for r in rows]
    scaled, logz, weights = softmax_parts(
        logits, 1.0 if all(t == 1.0 for t in temps) else torch.tensor(temps, device=dev)
    )
    if sampled:
        index = torch.tensor(sampled, device=dev)
        # The row's distribution at its temperature (= its scoring temperature, as it is not greedy), unnormalised.
        probs = weights if len(sampled) == len(rows) else weights[index]
        for k, i in enumerate(sampled):
            p = rows[i].params
            if p.top_k > 0 or p.top_p < 1.0 or p.min_p > 0:
                probs[k] = _truncate(probs[k], p)
        tokens[index] = _inverse_cdf(probs, generator)
    if not want_logprobs:
        return tokens, None
    return tokens, (scaled.gather(-1, tokens.unsqueeze(-1)).squeeze(-1) - logz).tolist()


def _inverse_cdf(probs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One draw per row from unnormalised probabilities [B, V], exactly from p: one uniform number against the
    cumulative distribution, taken in float64 over the blocks' sums and then inside the chosen block only
    ([B, V / CDF_BLOCK] and [B, CDF_BLOCK] cumulative sums instead of [B, V]). A noise tensor of size [B, V]
    (torch.multinomial, Gumbel) costs milliseconds per row on a 150k vocabulary on CPU."""
    rows, vocab = probs.shape
    full = vocab // CDF_BLOCK
    sums = probs[:, : full * CDF_BLOCK].reshape(rows, full, CDF_BLOCK).sum(-1)
    if vocab > full * CDF_BLOCK:
        sums = torch.cat([sums, probs[:, full * CDF_BLOCK :].sum(-1, keepdim=True)], dim=1)
    block_cdf = sums.double().cumsum(dim=-1)  # [B, blocks]
    u = torch.rand((rows, 1), generator=generator, device=probs.device, dtype=torch.float64) * block_cdf[:, -1:]
    b = torch.searchsorted(block_cdf, u).clamp_max(block_cdf.shape[1] - 1)  # block_cdf[b-1] < u <= block_cdf[b]
    before = torch.where(b > 0, block_cdf.gather(1, (b - 1).clamp_min(0)), torch.zeros_like(u))
    index = b * CDF_BLOCK + torch.arange(CDF_BLOCK, device=probs.device)  # [B, CDF_BLOCK]
    inner = probs.gather(1, index.clamp_max(vocab - 1)).masked_fill(index >= vocab, 0.0).double().cumsum(dim=-1)
    # Rounding can put u a hair past the block's own total: aim at its last token with mass, never beyond.
    j = torch.searchsorted(inner, torch.minimum(u - before, inner[:, -1:]))
    return (b * CDF_BLOCK + j).squeeze(-1).clamp_max(vocab - 1)


def _truncate(probs: torch.Tensor, p: SamplingParams) -> torch.Tensor:
    """Zero the tokens that top-k, min-p and top-p exclude (the rest need not sum to 1)."""
    if p.top_k > 1:
        kth = torch.topk(probs, min(p.top_k, probs.numel())).values[-1]
        probs = probs.masked_fill(probs < kth, 0.0)
    if p.min_p > 0:
        probs = probs.masked_fill(probs < p.min_p * probs.max(), 0.0)
    if p.top_p < 1.0:
        sorted_p, order = torch.sort(probs, descending=True)
        cut = torch.cumsum(sorted_p, dim=-1) - sorted_p > p.top_p * sorted_p.sum()  # keep the token that crosses top_p
        probs = probs.scatter(0, order, sorted_p.masked_fill(cut, 0.0))
    return probs


def _tops(scaled_logprobs: torch.Tensor, k: int) -> list[LogprobEntry]:
    values, ids = torch.topk(scaled_logprobs, k)
    return [(float(v), int(t), None) for v, t in zip(values.tolist(), ids.tolist())]


def _project(lm: LoadedModel, hidden: torch.Tensor) -> torch.Tensor:
    """Hidden states [N, H] -> logits [N, V], in chunks so long prompts fit in memory."""
    head = lm.model.get_output_embeddings()
    parts = [head(hidden[i : i + LM_HEAD_CHUNK]) for i in range(0, hidden.shape[0], LM_HEAD_CHUNK)]
    return torch.cat(parts, dim=0) if parts else hidden.new_zeros((0, lm.vocab_size))


def _decode_text(lm: LoadedModel, ids: list[int], skip_special: bool) -> str:
    return lm.tokenizer.decode(ids, skip_special_tokens=skip_special)  # type: ignore[attr-defined]


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


@dataclass
class _Pending:
    """A long prompt being prefilled chunk by chunk (chunked prefill) before it joins the decoding rows."""

    row: _Row
    started: float
    done: int = 0  # prompt tokens whose KV is in `cache`
    cache: object = None
    entries: list | None = None
    tops: list | None = None
    last_hidden: torch.Tensor | None = None


class DecodeBatch:
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
    """

    def __init__(
        self,
        lm: LoadedModel,
        generator: torch.Generator,
        prefix_cache: PrefixCache | None = None,
        chunk_tokens: int = 0,
        generation: int | None = None,
        on_timing: Callable[[str, float, int], None] | None = None,
    ):
        self.lm, self.generator = lm, generator
        self.prefix_cache = prefix_cache
        self.generation = (prefix_cache.generation if prefix_cache else 0) if generation is None else generation
        self.chunk_tokens = chunk_tokens
        self.on_timing = on_timing
        """Called with ("prefill" | "decode", seconds, tokens) after each forward pass (metrics)."""
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

    def reset(self) -> None:
        """Drop every row and pending prefill (after a failed forward pass: the cache may be half-updated)."""
        self.pending.clear()
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

    def _timed(self, kind: str, started: float, tokens: int) -> None:
        if self.on_timing is not None:
            self.on_timing(kind, time.perf_counter() - started, tokens)

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
        return self.prefix_cache.match(it.input_ids, self._reuse_limit(it), self.generation, start)

    def _match_len(self, it: WorkItem) -> int:
        if self.prefix_cache is None:
            return 0
        return self.prefix_cache.match_len(it.input_ids, self._reuse_limit(it), self.generation)

    def _insert(self, ids: list[int], kv: list, offset: int = 0) -> None:
        """`kv` holds the tokens from `offset` on (a row sharing the batch's prefix has no copy of it)."""
        if self.prefix_cache is not None:
            self.prefix_cache.insert(ids, kv, self.generation, offset=offset)

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
        return shared if all(shared.starts(it.input_ids) for it in items) else None

    def _add_group(
        self, items: list[WorkItem], cached: int, prefixes: list, shared: SharedPrefix | None = None
    ) -> list[tuple[WorkItem, WorkResult]]:
        started = time.time()
        t0 = time.perf_counter()
        rows, inputs, lengths, cache, mask, positions, hidden = _prefill(self.lm, items, cached, prefixes, shared)
        self._timed("prefill", t0, (lengths[0] - cached) * len(items))
        offset = len(shared) if shared is not None else 0
        for i, row in enumerate(rows):
            row.cached_tokens = cached
            if self.prefix_cache is not None:
                self.prefix_cache.record(lengths[i], cached)
                kv = [(layer.keys[i], layer.values[i]) for layer in cache.layers]
                self._insert(row.item.input_ids, kv, offset)
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
            cache, mask = _merge_caches(self.cache, self.mask, cache, mask)
            last_pos = torch.cat([self.last_pos, last_pos])
            next_logits = torch.cat([self.next_logits, next_logits])
            uses = torch.cat([self.uses, uses])
        self.cache, self.mask, self.last_pos, self.next_logits, self.uses = cache, mask, last_pos, next_logits, uses
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
        uses = [shared is not None and shared.starts(r.item.input_ids) for r in new_rows]
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
        first = new_rows[0].item.input_ids
        current = [r for r in self.rows if r.lm is self.lm]  # rows from before an in-place update keep their KV
        others = [r.item.input_ids for r in new_rows[1:]] + [r.item.input_ids for r in current]
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
        length = len(self.shared)
        drops = [length if r.lm is self.lm and self.shared.starts(r.item.input_ids) else 0 for r in self.rows]
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
            self._insert(ids[: p.done], [(layer.keys[0], layer.values[0]) for layer in p.cache.layers])
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
            idx = torch.tensor(keep, device=self.mask.device)
            self.cache.batch_select_indices(idx)
            self.mask, self.last_pos, self.uses = self.mask[idx], self.last_pos[idx], self.uses[idx]
            if self.next_logits is not None:
                self.next_logits = self.next_logits[idx]
            if self.shared is not None and not bool(self.uses.any()):
                self.shared = None  # its last user left
            for name in ("rows", "inputs", "prompt_lens", "starts"):
                values = getattr(self, name)
                setattr(self, name, [values[i] for i in keep])
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
        valid = int(self.mask[i].sum())
        offset = len(self.shared) if self.shared is not None and bool(self.uses[i]) else 0
        if offset + valid != len(ids) or len(ids) < self.prefix_cache.block:
            return
        width = self.mask.shape[1]
        kv = [(layer.keys[i, :, width - valid :], layer.values[i, :, width - valid :]) for layer in self.cache.layers]
        self._insert(ids, kv, offset)

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
        for i, row in enumerate(rows):
            tok = int(tokens[i])
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
        self.mask = torch.cat(
            [self.mask, torch.ones((len(keep), 1), dtype=self.mask.dtype, device=self.mask.device)], dim=1
        )
        self.last_pos = self.last_pos + 1
        padded = bool((self.mask == 0).any())
        t0 = time.perf_counter()
        shared = {}
        if self.shared is not None:
            shared["shared_prefix"] = SharedView(self.shared, self.uses)
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


def _prefill(
    lm: LoadedModel,
    items: list[WorkItem],
    cached: int = 0,
    prefixes: list | None = None,
    shared: SharedPrefix | None = None,
):
    """Prefill of equal-length `items` (no padding) whose first `cached` tokens' KV is given (`prefixes`: per item,
    per layer (K, V) [1, heads, cached - len(shared), dim], or None when that is nothing): rows, input log-probs,
    lengths, cache, mask, positions, hidden (positions and hidden cover the computed positions cached..L-1 only).

    With `shared` (a prefix every item starts with, at most `cached` long) the cache and mask cover the positions
    after it only; attention reads the shared prefix from the batch (engine.attention)."""
    model, dev = lm.model, lm.device
    rows = [_Row(it, lm) for it in items]
    lengths = [len(it.input_ids) for it in items]
    if len(set(lengths)) != 1:
        raise ValueError(f"_prefill takes prompts of one length, got {sorted(set(lengths))}")
    own_from = len(shared) if shared is not None else 0
    ids = torch.tensor([it.input_ids[cached:] for it in items], dtype=torch.long, device=dev)
    mask = torch.ones((len(items), lengths[0] - own_from), dtype=torch.long, device=dev)  # for merging into a batch
    positions = torch.arange(cached, lengths[0], device=dev).expand_as(ids)
    if cached > own_from:
        layers = len(prefixes[0])
        cache = GrowingCache(
            (torch.cat([p[i][0] for p in prefixes]), torch.cat([p[i][1] for p in prefixes])) for i in range(layers)
        )
    else:
        cache = GrowingCache()
    marks = {}
    if shared is not None:
        marks["shared_prefix"] = SharedView(shared, torch.ones(len(items), dtype=torch.bool, device=dev))
    hidden = model.get_decoder()(
        input_ids=ids,
        position_ids=positions,
        past_key_values=cache,
        use_cache=True,
        chunk_after_past=cached > 0,  # equal lengths, no padding: the cached prefix is all visible
        **marks,
    ).last_hidden_state  # [B, L - cached, H]
    inputs = []
    for i, row in enumerate(rows):
        entries, tops = _input_logprob_start(row.item, lengths[i])
        if entries is not None:
            _span_logprobs(lm, row, hidden[i], cached, entries, tops)
        inputs.append((entries, tops) if row.item.return_logprob else (None, None))
    return rows, inputs, lengths, cache, mask, positions, hidden


def _input_logprob_start(it: WorkItem, length: int) -> tuple[list | None, list | None]:
    """The input log-prob lists a request starts with: None when it wants none; the first position's entry (it has
    no log-prob) when it starts at 0."""
    if not it.return_logprob:
        return None, None
    if it.logprob_start_len < 0 or it.logprob_start_len >= length:
        return [], [] if it.top_logprobs_num else None
    entries: list[LogprobEntry] = []
    tops: list | None = [] if it.top_logprobs_num else None
    if it.logprob_start_len == 0:
        entries.append((None, it.input_ids[0], None))
        if tops is not None:
            tops.append(None)
    return entries, tops


def _span_logprobs(lm: LoadedModel, row: _Row, hidden: torch.Tensor, first: int, entries: list, tops: list | None):
    """Append the input log-probs that the hidden states of positions first..first+T-1 give (token p is predicted by
    the state at p-1) to `entries` / `tops`, for the positions the request asked for."""
    it = row.item
    length = len(it.input_ids)
    if it.logprob_start_len < 0 or it.logprob_start_len >= length:
        return
    s = max(it.logprob_start_len, 1)
    lo = max(s, first + 1)  # first target position this span can score
    hi = min(length, first + hidden.shape[0] + 1)  # one past the last
    if lo >= hi:
        return
    logits = _project(lm, hidden[lo - 1 - first : hi - 1 - first])
    targets = torch.tensor(it.input_ids[lo:hi], device=lm.device)
    temp = scoring_temperature(row.params.temperature)
    lps = token_logprobs(logits, targets, temp).tolist()
    entries.extend((lp, tok, None) for lp, tok in zip(lps, it.input_ids[lo:hi]))
    if tops is not None:
        scaled = torch.log_softmax(logits.float() / temp, dim=-1)
        tops.extend(_tops(scaled[j], it.top_logprobs_num) for j in range(scaled.shape[0]))


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


def _final_text(lm: LoadedModel, row: _Row) -> str:
    if row.finish and row.finish.type == "stop" and isinstance(row.finish.matched, str):
        return row.text  # trimmed at the stop string
    return _decode_text(lm, row.out, row.params.skip_special_tokens)  # once per request


def _result(lm: LoadedModel, row: _Row, inputs: tuple, prompt_len: int, start: float, final: bool) -> WorkResult:
    """The request's whole answer (the final one, or a cumulative snapshot)."""
    it = row.item
    if final:
        row.text = _final_text(lm, row)
    text = row.text
    return WorkResult(
        rid=it.rid,
        text=text,
        output_ids=list(row.out),
        prompt_tokens=prompt_len,
        finish_reason=row.finish if final or row.done else None,
        weight_version=lm.weight_version,
        output_token_logprobs=list(row.out_lps) if it.return_logprob else None,
        input_token_logprobs=inputs[0],
        output_top_logprobs=list(row.out_tops) if it.return_logprob and it.top_logprobs_num else None,
        input_top_logprobs=inputs[1],
        e2e_latency=time.time() - it.received_at,
        cached_tokens=row.cached_tokens,
    )


def _progress(lm: LoadedModel, row: _Row, inputs: tuple, prompt_len: int, start: float) -> WorkResult:
    """A progress event: the cumulative snapshot, or (incremental streaming) only what is new since the last one.

    Incremental text holds back what could still become a stop string, so the final delta completes the text the
    answer ends with (a delta once sent is never taken back)."""
    if not row.item.incremental:
        return _result(lm, row, inputs, prompt_len, start, final=False)
    it = row.item
    upto = len(row.text) - row.hold if row.stops else len(row.text)
    delta = row.text[row.sent_text : upto] if upto > row.sent_text else ""
    new = slice(row.sent_ids, len(row.out))
    row.sent_ids, row.sent_text = len(row.out), row.sent_text + len(delta)
    return WorkResult(
        rid=it.rid,
        text=delta,
        output_ids=row.out[new],
        prompt_tokens=prompt_len,
        finish_reason=None,
        weight_version=lm.weight_version,
        output_token_logprobs=row.out_lps[new] if it.return_logprob else None,
        input_token_logprobs=inputs[0],
        output_top_logprobs=row.out_tops[new] if it.return_logprob and it.top_logprobs_num else None,
        input_top_logprobs=inputs[1],
        e2e_latency=time.time() - it.received_at,
        cached_tokens=row.cached_tokens,
        completion_tokens=len(row.out),
    )


def aborted_before_start(item: WorkItem, lm: LoadedModel, message: str) -> WorkResult:
    """The answer of a request aborted while it waited for a slot: no tokens, finish_reason abort."""
    return WorkResult(
        rid=item.rid,
        text="",
        output_ids=[],
        prompt_tokens=len(item.input_ids),
        finish_reason=FinishReason(type="abort", message=message),
        weight_version=lm.weight_version,
        output_token_logprobs=[] if item.return_logprob else None,
        e2e_latency=time.time() - item.received_at,
    )


def merged_deltas(first: WorkResult, then: WorkResult) -> WorkResult:
    """Two incremental events as one: what both carry, in order."""

    def joined(a: list | None, b: list | None) -> list | None:
        return None if a is None or b is None else a + b

    return replace(
        then,
        text=first.text + then.text,
        output_ids=first.output_ids + then.output_ids,
        output_token_logprobs=joined(first.output_token_logprobs, then.output_token_logprobs),
        output_top_logprobs=joined(first.output_top_logprobs, then.output_top_logprobs),
    )


def final_delta(result: WorkResult, sent_ids: int, sent_text: int) -> WorkResult:
    """The last incremental event: what the final answer adds to the deltas already sent."""
    n = len(result.output_ids)
    return WorkResult(
        rid=result.rid,
        text=result.text[sent_text:],
        output_ids=result.output_ids[sent_ids:],
        prompt_tokens=result.prompt_tokens,
        finish_reason=result.finish_reason,
        weight_version=result.weight_version,
        output_token_logprobs=None if result.output_token_logprobs is None else result.output_token_logprobs[sent_ids:],
        input_token_logprobs=result.input_token_logprobs,
        output_top_logprobs=None if result.output_top_logprobs is None else result.output_top_logprobs[sent_ids:],
        input_top_logprobs=result.input_top_logprobs,
        e2e_latency=result.e2e_latency,
        cached_tokens=result.cached_tokens,
        completion_tokens=n,
    )
