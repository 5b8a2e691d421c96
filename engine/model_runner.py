"""Batched generation and scoring on a Hugging Face causal LM.

A `DecodeBatch` prefills requests (left-padded), decodes them step by step
with a KV cache, and lets new requests join and finished ones leave between
steps (continuous batching); each row keeps its own sampling parameters, stop
conditions and token budget.
Log-probs follow `rlmath.logprobs` (the convention the trainer uses too).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import structlog
import torch

from openclaw_rl.device import DeviceUnavailable, pick_device
from policy_client.wire import FinishReason, LogprobEntry, SamplingParams
from rlmath.logprobs import scoring_temperature, token_logprobs

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
    path: Path, device: str = "auto", dtype: str = "auto", weight_version: str = "0", tokenizer: object | None = None
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

    def to_wire(self) -> dict:
        meta: dict = {
            "id": self.rid,
            "finish_reason": self.finish_reason.model_dump(exclude_none=True) if self.finish_reason else None,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": len(self.output_ids),
            "cached_tokens": 0,
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

    @property
    def done(self) -> bool:
        return self.finish is not None


def _sample(logits: torch.Tensor, rows: list[_Row], generator: torch.Generator) -> torch.Tensor:
    """Draw one token per row from its own temperature / top-k / top-p / min-p distribution.

    Inverse-CDF sampling: one uniform number per row against the cumulative
    distribution. It draws exactly from p, in one vectorised pass over [B, V];
    torch.multinomial (or a noise tensor of size [B, V]) costs milliseconds per
    row on a 150k vocabulary on CPU.
    """
    dev = logits.device
    temps = torch.tensor([r.params.temperature for r in rows], device=dev, dtype=torch.float32)
    greedy = torch.tensor([r.params.temperature == 0 or r.params.top_k == 1 for r in rows], device=dev)
    greedy_tokens = logits.argmax(dim=-1)
    if bool(greedy.all()):
        return greedy_tokens
    probs = torch.softmax(logits.float() / temps.clamp_min(1e-6).unsqueeze(-1), dim=-1)
    for i, row in enumerate(rows):
        p = row.params
        if greedy[i] or (p.top_k <= 0 and p.top_p >= 1.0 and p.min_p <= 0):
            continue
        probs[i] = _truncate(probs[i], p)
    cdf = probs.double().cumsum(dim=-1)  # float64: no drift over 150k terms
    u = torch.rand((probs.shape[0], 1), generator=generator, device=dev, dtype=torch.float64) * cdf[:, -1:]
    drawn = torch.searchsorted(cdf, u).squeeze(-1).clamp_max(probs.shape[-1] - 1)
    return torch.where(greedy, greedy_tokens, drawn)


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


def _check_stop_strings(row: _Row, lm: LoadedModel) -> None:
    row.text = _decode_text(lm, row.out, row.params.skip_special_tokens)
    best: tuple[int, str] | None = None
    for s in row.stops:
        at = row.text.find(s)
        if at >= 0 and (best is None or at < best[0]):
            best = (at, s)
    if best is not None:
        at, s = best
        row.text = row.text[: at + (len(s) if row.params.no_stop_trim else 0)]
        row.finish = FinishReason(type="stop", matched=s)


class DecodeBatch:
    """Rows decoded together, one token per step; rows join and leave between steps.

    Continuous batching: a request that arrives while others decode is
    prefilled on its own, its KV cache left-padded to the batch's length (or the
    batch's to its) and concatenated, and it decodes from the next step on. A
    finished row leaves at once, so the batch never computes for it again.
    """

    def __init__(self, lm: LoadedModel, generator: torch.Generator):
        self.lm, self.generator = lm, generator
        self.rows: list[_Row] = []
        self.inputs: list[tuple] = []  # per row: (input log-prob entries, input tops)
        self.prompt_lens: list[int] = []
        self.starts: list[float] = []
        self.cache = None
        self.mask: torch.Tensor | None = None  # [B, T]: 0 where a row is left-padded
        self.last_pos: torch.Tensor | None = None  # [B]: position of each row's last token
        self.next_logits: torch.Tensor | None = None  # [B, V]

    def __len__(self) -> int:
        return len(self.rows)

    @torch.inference_mode()
    def add(self, items: list[WorkItem]) -> list[tuple[WorkItem, WorkResult]]:
        """Prefill `items` and join them to the batch; returns those already finished (max_new_tokens 0)."""
        started = time.time()
        rows, inputs, lengths, cache, mask, positions, hidden = _prefill(self.lm, items)
        next_logits = _project(self.lm, hidden[:, -1])
        done = [i for i, r in enumerate(rows) if r.done]
        results = [(rows[i].item, _result(self.lm, rows[i], inputs[i], lengths[i], started, final=True)) for i in done]
        keep = [i for i in range(len(rows)) if not rows[i].done]
        if not keep:
            return results
        if len(keep) < len(rows):
            idx = torch.tensor(keep, device=mask.device)
            cache.batch_select_indices(idx)
            mask, positions, next_logits = mask[idx], positions[idx], next_logits[idx]
        if self.rows:
            cache, mask = _merge_caches(self.cache, self.mask, cache, mask)
            positions_last = torch.cat([self.last_pos, positions[:, -1]])
            next_logits = torch.cat([self.next_logits, next_logits])
        else:
            positions_last = positions[:, -1]
        self.cache, self.mask, self.last_pos, self.next_logits = cache, mask, positions_last, next_logits
        self.rows += [rows[i] for i in keep]
        self.inputs += [inputs[i] for i in keep]
        self.prompt_lens += [lengths[i] for i in keep]
        self.starts += [started] * len(keep)
        return results

    @torch.inference_mode()
    def step(self) -> list[tuple[WorkItem, WorkResult]]:
        """Decode one token for every row; returns the rows that finished (they leave the batch)."""
        lm, rows = self.lm, self.rows
        tokens = _sample(self.next_logits, rows, self.generator)
        score_temps = torch.tensor([scoring_temperature(r.params.temperature) for r in rows], device=lm.device)
        step_lps = (
            token_logprobs(self.next_logits, tokens, score_temps).tolist()
            if any(r.item.return_logprob for r in rows)
            else None
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
            if tok in row.stop_ids:
                row.finish = FinishReason(type="stop", matched=tok)
            elif row.stops:
                _check_stop_strings(row, lm)
            if not row.done and len(row.out) >= row.params.max_new_tokens:
                row.finish = FinishReason(type="length", length=row.params.max_new_tokens)
            if row.item.on_progress is not None and not row.done:  # the final answer is delivered separately
                row.item.on_progress(_result(lm, row, self.inputs[i], self.prompt_lens[i], self.starts[i], final=False))
        finished = [
            (r.item, _result(lm, r, self.inputs[i], self.prompt_lens[i], self.starts[i], final=True))
            for i, r in enumerate(rows)
            if r.done
        ]
        keep = [i for i, r in enumerate(rows) if not r.done]
        if not keep:
            self.__init__(lm, self.generator)  # empty: drop the cache
            return finished
        if len(keep) < len(rows):
            idx = torch.tensor(keep, device=lm.device)
            self.cache.batch_select_indices(idx)
            self.mask, self.last_pos, tokens = self.mask[idx], self.last_pos[idx], tokens[idx]
            for name in ("rows", "inputs", "prompt_lens", "starts"):
                values = getattr(self, name)
                setattr(self, name, [values[i] for i in keep])
        self.mask = torch.cat(
            [self.mask, torch.ones((len(keep), 1), dtype=self.mask.dtype, device=self.mask.device)], dim=1
        )
        self.last_pos = self.last_pos + 1
        padded = bool((self.mask == 0).any())
        hidden = lm.model.get_decoder()(
            input_ids=tokens.unsqueeze(1),
            attention_mask=self.mask if padded else None,
            position_ids=self.last_pos.unsqueeze(1),
            past_key_values=self.cache,
            use_cache=True,
        ).last_hidden_state
        self.next_logits = _project(lm, hidden[:, -1])
        return finished


def _prefill(lm: LoadedModel, items: list[WorkItem]):
    """Left-padded prefill of `items`: rows, input log-probs, lengths, cache, mask, positions, hidden states."""
    model, dev = lm.model, lm.device
    rows = [_Row(it, lm) for it in items]
    lengths = [len(it.input_ids) for it in items]
    width = max(lengths)
    ids = torch.zeros((len(items), width), dtype=torch.long)
    mask = torch.zeros((len(items), width), dtype=torch.long)
    for i, it in enumerate(items):
        ids[i, width - lengths[i] :] = torch.tensor(it.input_ids, dtype=torch.long)
        mask[i, width - lengths[i] :] = 1
    ids, mask = ids.to(dev), mask.to(dev)
    positions = (mask.cumsum(-1) - 1).clamp_min(0)
    from transformers import DynamicCache

    cache = DynamicCache()
    padded = any(n != width for n in lengths)
    hidden = model.get_decoder()(
        input_ids=ids,
        attention_mask=mask if padded else None,
        position_ids=positions,
        past_key_values=cache,
        use_cache=True,
    ).last_hidden_state  # [B, W, H]
    inputs = [_input_logprobs(lm, row, hidden[i], lengths[i], width) for i, row in enumerate(rows)]
    return rows, inputs, lengths, cache, mask, positions, hidden


def _input_logprobs(lm: LoadedModel, row: _Row, hidden: torch.Tensor, length: int, width: int) -> tuple:
    it = row.item
    if not it.return_logprob or it.logprob_start_len < 0 or it.logprob_start_len >= length:
        return (None, None) if not it.return_logprob else ([], [] if it.top_logprobs_num else None)
    offset = width - length
    s = it.logprob_start_len
    entries: list[LogprobEntry] = []
    tops: list | None = [] if it.top_logprobs_num else None
    if s == 0:
        entries.append((None, it.input_ids[0], None))
        if tops is not None:
            tops.append(None)
        s = 1
    if s < length:
        # token p is predicted by the hidden state at p-1
        logits = _project(lm, hidden[offset + s - 1 : offset + length - 1])
        targets = torch.tensor(it.input_ids[s:], device=lm.device)
        temp = scoring_temperature(row.params.temperature)
        lps = token_logprobs(logits, targets, temp).tolist()
        entries.extend((lp, tok, None) for lp, tok in zip(lps, it.input_ids[s:]))
        if tops is not None:
            scaled = torch.log_softmax(logits.float() / temp, dim=-1)
            tops.extend(_tops(scaled[j], it.top_logprobs_num) for j in range(scaled.shape[0]))
    return entries, tops


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


def _result(lm: LoadedModel, row: _Row, inputs: tuple, prompt_len: int, start: float, final: bool) -> WorkResult:
    if not (row.finish and row.finish.type == "stop" and isinstance(row.finish.matched, str)):
        row.text = _decode_text(lm, row.out, row.params.skip_special_tokens)
    text = row.text
    if not final and text.endswith("\ufffd"):
        text = text.rstrip("\ufffd")  # a multi-byte character is still incomplete
    it = row.item
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
    )
