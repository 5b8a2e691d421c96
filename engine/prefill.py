"""Prefill: the forward pass of prompts admitted together (`_prefill`: prompts of one length, never padded), the
input log-probs a request asks for (`_input_logprob_start`, `_span_logprobs`), and the state of a long prompt
prefilled chunk by chunk (`_Pending`). Which prompts are prefilled together and from which cached prefix, and the
chunk-by-chunk passes themselves, are engine.admission's part."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.kv_cache import GrowingCache
from engine.lora_adapters import LoraRows, lora_forward
from engine.sampling import _project, _tops
from engine.shared_prefix import SharedPrefix, SharedView
from engine.weights import LoadedModel
from engine.work import WorkItem, _Row
from policy_client.wire import LogprobEntry
from rlmath.logprobs import scoring_temperature, token_logprobs


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


def _prefill(
    lm: LoadedModel,
    items: list[WorkItem],
    cached: int = 0,
    prefixes: list | None = None,
    shared: SharedPrefix | None = None,
    lora: LoraRows | None = None,
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
    with lora_forward(model, lora):  # `lora`: the items' adapters, one per row (engine.lora_adapters)
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
