"""The engine's sampler draws from the distribution it reports."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from engine.model_runner import _sample
from policy_client.wire import SamplingParams

PROBS = torch.tensor([0.1, 0.2, 0.3, 0.4])


def draw(params: SamplingParams, n: int = 20000) -> torch.Tensor:
    logits = PROBS.log().repeat(n, 1)
    rows = [SimpleNamespace(params=params)] * n
    tokens = _sample(logits, rows, torch.Generator().manual_seed(1))
    return torch.bincount(tokens, minlength=4).float() / n


def test_frequencies_match_probabilities():
    freq = draw(SamplingParams(temperature=1.0))
    assert torch.allclose(freq, PROBS, atol=0.015), freq  # 20k draws: std < 0.0035


def test_temperature_sharpens():
    freq = draw(SamplingParams(temperature=0.5))
    want = PROBS**2 / (PROBS**2).sum()
    assert torch.allclose(freq, want, atol=0.015), freq


def test_top_k_top_p_and_greedy():
    assert draw(SamplingParams(top_k=2))[:2].sum() == 0
    # top_p 0.5: keeps 0.4 and 0.3 (the token that crosses the mass), renormalised
    freq = draw(SamplingParams(top_p=0.5))
    assert freq[:2].sum() == 0 and torch.allclose(freq[2:], torch.tensor([3 / 7, 4 / 7]), atol=0.015)
    assert draw(SamplingParams(temperature=0), n=50).tolist() == [0, 0, 0, 1]
