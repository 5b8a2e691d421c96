"""The engine's sampler draws from the distribution it reports."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from engine.model_runner import CDF_BLOCK, _sample
from policy_client.wire import SamplingParams
from rlmath.logprobs import token_logprobs

PROBS = torch.tensor([0.1, 0.2, 0.3, 0.4])


def draw(params: SamplingParams, n: int = 20000) -> torch.Tensor:
    logits = PROBS.log().repeat(n, 1)
    rows = [SimpleNamespace(params=params)] * n
    tokens, _ = _sample(logits, rows, torch.Generator().manual_seed(1), want_logprobs=False)
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


def test_a_large_vocabulary_is_sampled_across_blocks_and_the_tail():
    """Mass in the first block, a middle block and the ragged last block; zero-mass tokens are never drawn."""
    vocab = 5 * CDF_BLOCK + 37
    want = {3: 0.25, 2 * CDF_BLOCK + 511: 0.25, vocab - 1: 0.3, vocab - 37: 0.2}
    logits = torch.full((vocab,), -float("inf"))
    for tok, p in want.items():
        logits[tok] = torch.tensor(p).log()
    n = 20000
    tokens, _ = _sample(
        logits.repeat(n, 1), [SimpleNamespace(params=SamplingParams(temperature=1.0))] * n,
        torch.Generator().manual_seed(2), want_logprobs=False,
    )  # fmt: skip
    counts = torch.bincount(tokens, minlength=vocab).float() / n
    assert set(torch.nonzero(counts).flatten().tolist()) == set(want)
    for tok, p in want.items():
        assert abs(counts[tok].item() - p) < 0.015, (tok, counts[tok].item(), p)


def test_reported_logprobs_are_rlmaths_for_mixed_rows():
    """Greedy and sampled rows at different temperatures in one batch: each drawn token's log-prob is
    token_logprobs at the row's scoring temperature (greedy scored at 1)."""
    torch.manual_seed(0)
    logits = torch.randn(4, 3 * CDF_BLOCK + 5) * 4
    params = [
        SamplingParams(temperature=0),
        SamplingParams(temperature=0.7),
        SamplingParams(temperature=1.3, top_p=0.9),
        SamplingParams(temperature=1.0, top_k=1),
    ]
    tokens, lps = _sample(logits, [SimpleNamespace(params=p) for p in params], torch.Generator().manual_seed(3), True)
    assert tokens[0] == logits[0].argmax() and tokens[3] == logits[3].argmax()
    want = token_logprobs(logits, tokens, torch.tensor([1.0, 0.7, 1.3, 1.0]))
    assert torch.allclose(torch.tensor(lps), want, atol=1e-6)
