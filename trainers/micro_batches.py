"""How a batch of samples is laid out for a trainer: micro-batches by token budget, padded rows, and where each
response token is predicted."""

from __future__ import annotations

import torch

from rlmath.logprobs import scoring_temperature
from store.samples import TrainingSample

SHARED_PREFIX_MIN = 64
"""Shared prompt tokens below which a micro-batch's samples are not run over one shared prefix (nothing worth
sharing)."""


def response_rows(
    group: list[TrainingSample], device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | float]:
    """Where each response token is predicted: (batch row, position of the predicting hidden state, response index,
    temperature).

    Response token j of a sample with a p-token prompt is predicted by the hidden state at p + j - 1.
    The temperature is one float when the micro-batch shares it (the usual case), else one per token.
    """
    rows_b, rows_t, cols, temps = [], [], [], []
    for i, s in enumerate(group):
        p, r = len(s.prompt_ids), len(s.response_ids)
        rows_b.append(torch.full((r,), i, dtype=torch.long))
        rows_t.append(torch.arange(p - 1, p + r - 1))
        cols.append(torch.arange(r))
        temps.append(torch.full((r,), scoring_temperature(s.temperature)))
    distinct = {scoring_temperature(s.temperature) for s in group}
    temperature = distinct.pop() if len(distinct) == 1 else torch.cat(temps).to(device)
    return torch.cat(rows_b).to(device), torch.cat(rows_t).to(device), torch.cat(cols).to(device), temperature


def padded_ids(group: list[TrainingSample]) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """[B, W] right-padded prompt+response ids, their attention mask, and whether any row is padded."""
    seqs = [s.prompt_ids + s.response_ids for s in group]
    width = max(len(x) for x in seqs)
    ids = torch.zeros((len(group), width), dtype=torch.long)
    attn = torch.zeros((len(group), width), dtype=torch.long)
    for i, x in enumerate(seqs):
        ids[i, : len(x)] = torch.tensor(x)
        attn[i, : len(x)] = 1
    return ids, attn, any(len(x) != width for x in seqs)


def micro_batches(
    samples: list[TrainingSample], budget: int, share_prefixes: bool = False, packed: bool = False
) -> list[list[TrainingSample]]:
    """Consecutive samples in groups of at most `budget` tokens. Rows padded to the longest count as such;
    `packed`: the samples run packed in one row (trainers.packing), so they cost their own lengths. `share_prefixes`:
    the samples are ordered by prompt first, and a prompt prefix of at least SHARED_PREFIX_MIN tokens that the
    whole group shares counts once (the trainer runs it once, the rest padded)."""
    if share_prefixes:
        samples = sorted(samples, key=lambda s: s.prompt_ids)
    groups: list[list[TrainingSample]] = []
    current: list[TrainingSample] = []
    longest = shared = total = 0
    for s in samples:
        n = len(s.prompt_ids) + len(s.response_ids)
        if current and share_prefixes:
            shared = min(shared, common_prefix(current[0].prompt_ids, s.prompt_ids))
        if packed and (not share_prefixes or shared < SHARED_PREFIX_MIN):
            cost = total + n
        else:
            cost = shared + (max(longest, n) - shared) * (len(current) + 1)
        if current and cost > budget:
            groups.append(current)
            current, longest, total = [], 0, 0
        if not current:
            shared = len(s.prompt_ids) if share_prefixes else 0
        current.append(s)
        longest, total = max(longest, n), total + n
    if current:
        groups.append(current)
    return groups


def common_prefix(a: list[int], b: list[int], limit: int | None = None) -> int:
    """How many leading tokens `a` and `b` share (at most `limit`)."""
    n = min(len(a), len(b), limit if limit is not None else len(a))
    k = 0
    while k < n and a[k] == b[k]:
        k += 1
    return k
