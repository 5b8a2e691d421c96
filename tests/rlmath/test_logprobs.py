import math

import pytest
import torch

from rlmath.logprobs import scoring_temperature, token_logprobs


def test_token_logprobs_by_hand():
    logits = torch.tensor([[0.0, math.log(3.0)]])  # probabilities 1/4, 3/4
    got = token_logprobs(logits, torch.tensor([1]))
    assert torch.allclose(got, torch.tensor([math.log(0.75)]))


def test_temperature_scales_logits_and_greedy_scores_at_one():
    logits = torch.tensor([[0.0, 2.0]])
    half = token_logprobs(logits, torch.tensor([1]), 0.5)  # logits become [0, 4]
    assert torch.allclose(half, torch.tensor([4.0 - math.log(1 + math.exp(4.0))]))
    assert scoring_temperature(0.0) == 1.0
    assert torch.allclose(
        token_logprobs(logits, torch.tensor([1]), 0.0), token_logprobs(logits, torch.tensor([1]), 1.0)
    )


def test_per_row_temperature_tensor():
    logits = torch.tensor([[0.0, 2.0], [0.0, 2.0]])
    rows = token_logprobs(logits, torch.tensor([1, 1]), torch.tensor([1.0, 0.5]))
    assert torch.allclose(rows[0], token_logprobs(logits[:1], torch.tensor([1]), 1.0)[0])
    assert torch.allclose(rows[1], token_logprobs(logits[:1], torch.tensor([1]), 0.5)[0])


def test_token_entropy_by_hand():
    from rlmath.logprobs import token_entropy

    uniform = torch.zeros(2, 8)
    assert token_entropy(uniform).tolist() == pytest.approx([math.log(8)] * 2)
    peaked = torch.tensor([[0.0, math.log(3.0)]])  # p = (1/4, 3/4)
    h = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    assert float(token_entropy(peaked)) == pytest.approx(h)
    # temperature 2 halves the logits: p = (1/(1+sqrt 3), sqrt 3/(1+sqrt 3))
    q = math.sqrt(3) / (1 + math.sqrt(3))
    assert float(token_entropy(peaked, 2.0)) == pytest.approx(-(q * math.log(q) + (1 - q) * math.log(1 - q)))
