import math

import pytest
import torch

from rlmath.loss import LossConfig, k3, policy_loss


def one(ratio: float, adv: float) -> tuple[float, float, float]:
    """(loss, d loss / d new_lp, clip fraction) for a single token."""
    new = torch.tensor([[math.log(ratio)]], requires_grad=True)
    parts = policy_loss(new, torch.zeros(1, 1), torch.tensor([[adv]]), torch.ones(1, 1))
    parts.loss.backward()
    return float(parts.loss.detach()), float(new.grad[0, 0]), parts.clip_fraction


@pytest.mark.parametrize(
    "ratio, adv, loss, grad, clipped",
    [
        (1.5, 1.0, -1.28, 0.0, 1.0),  # positive advantage, ratio above 1 + 0.28: clipped, no gradient
        (0.5, 1.0, -0.5, -0.5, 0.0),  # positive advantage, ratio below 1 - 0.2: unclipped (pessimistic side)
        (1.5, -1.0, 1.5, 1.5, 0.0),  # negative advantage, ratio above: unclipped
        (0.5, -1.0, 0.8, 0.0, 1.0),  # negative advantage, ratio below 1 - 0.2: clipped, no gradient
        (1.1, 2.0, -2.2, -2.2, 0.0),  # inside the trust region: the plain surrogate
    ],
)
def test_asymmetric_clipping_by_hand(ratio, adv, loss, grad, clipped):
    got_loss, got_grad, got_clip = one(ratio, adv)
    assert got_loss == pytest.approx(loss, abs=1e-6)
    assert got_grad == pytest.approx(grad, abs=1e-6)  # d(-ratio*A)/d log ratio = -ratio*A
    assert got_clip == clipped


def test_masked_tokens_are_ignored():
    new = torch.tensor([[0.1, 5.0]])
    old = torch.tensor([[0.0, -5.0]])
    adv = torch.tensor([[1.0, 100.0]])
    masked = policy_loss(new, old, adv, torch.tensor([[1.0, 0.0]]))
    alone = policy_loss(new[:, :1], old[:, :1], adv[:, :1], torch.ones(1, 1))
    assert float(masked.loss) == pytest.approx(float(alone.loss)) and masked.tokens == 1


def test_mean_per_sample_then_over_the_batch():
    # sample 0: one token with loss -1; sample 1: three tokens with loss -2 each; sample 2: mask 0
    new = torch.zeros(3, 3)
    adv = torch.tensor([[1.0, 0, 0], [2.0, 2.0, 2.0], [5.0, 5.0, 5.0]])
    mask = torch.tensor([[1.0, 0, 0], [1.0, 1.0, 1.0], [0.0, 0, 0]])
    parts = policy_loss(new, torch.zeros(3, 3), adv, mask)
    assert float(parts.loss) == pytest.approx((-1.0 - 2.0 + 0.0) / 3)


def test_k3_equals_its_formula_and_enters_with_its_coefficient():
    new, ref = torch.tensor([[-1.0, -0.5]]), torch.tensor([[-2.0, -0.5]])
    expected = math.exp(-1.0) - (-1.0) - 1
    assert k3(new, ref)[0].tolist() == pytest.approx([expected, 0.0])
    parts = policy_loss(new, new.clone(), torch.zeros(1, 2), torch.ones(1, 2), LossConfig(kl_coef=0.5), ref_lp=ref)
    assert float(parts.loss) == pytest.approx(0.5 * expected / 2)
    assert parts.kl == pytest.approx(expected / 2)


def test_zero_advantages_give_zero_policy_gradient():
    logits = torch.randn(2, 4, 10, requires_grad=True)
    targets = torch.randint(0, 10, (2, 4))
    new = torch.log_softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    parts = policy_loss(new, new.detach() - 0.3, torch.zeros(2, 4), torch.ones(2, 4))
    parts.loss.backward()
    assert torch.count_nonzero(logits.grad) == 0


def test_metrics():
    new = torch.tensor([[math.log(1.5), 0.0]])
    parts = policy_loss(new, torch.zeros(1, 2), torch.tensor([[1.0, 3.0]]), torch.ones(1, 2))
    assert parts.clip_fraction == 0.5 and parts.mean_advantage == 2.0
    assert parts.approx_kl == pytest.approx(0.5 * math.log(1.5) ** 2 / 2)


@pytest.mark.parametrize(
    "rollout_lp, weight, truncated",
    [
        (-1.5, math.exp(0.5), 0.0),  # the trainer likes the token more than the server did: weight above 1
        (-0.5, math.exp(-0.5), 0.0),  # less: weight below 1
        (-2.0, 2.0, 1.0),  # e^1 = 2.72 is cut at the cap
    ],
)
def test_truncated_importance_sampling_by_hand(rollout_lp, weight, truncated):
    new = torch.tensor([[-1.0]], requires_grad=True)
    parts = policy_loss(
        new, torch.tensor([[rollout_lp]]), torch.tensor([[1.0]]), torch.ones(1, 1), LossConfig(tis_cap=2.0)
    )
    parts.loss.backward()
    # the ratio is taken against the trainer's own log-prob (1 here): no clipping, a weighted plain gradient
    assert float(parts.loss.detach()) == pytest.approx(-weight)
    assert float(new.grad[0, 0]) == pytest.approx(-weight)
    assert parts.clip_fraction == 0.0
    assert parts.tis_weight == pytest.approx(weight) and parts.tis_truncated == truncated


def test_without_tis_a_stale_token_is_clipped_away_and_with_it_is_learned_from():
    # rollout log-prob -2, trainer -1: ratio e^1 is outside 1 + 0.28, so plain PPO gives no gradient
    for cfg, grad in ((LossConfig(), 0.0), (LossConfig(tis_cap=2.0), -2.0)):
        new = torch.tensor([[-1.0]], requires_grad=True)
        policy_loss(new, torch.tensor([[-2.0]]), torch.tensor([[1.0]]), torch.ones(1, 1), cfg).loss.backward()
        assert float(new.grad[0, 0]) == pytest.approx(grad)


def test_each_sample_takes_its_streams_kl_coefficient():
    """A mixed batch: a personal sample without a KL term beside a general-agent one with 0.01 (the paper's)."""
    new = torch.tensor([[-1.0, -2.0], [-0.5, -1.5]])
    old, ref = new.clone(), torch.tensor([[-1.2, -1.7], [-0.9, -1.1]])
    adv, mask = torch.tensor([[1.0, 1.0], [-1.0, -1.0]]), torch.ones(2, 2)
    mixed = policy_loss(new, old, adv, mask, ref_lp=ref, kl_coef=torch.tensor([[0.0], [0.01]])).loss
    alone = [
        policy_loss(
            new[i : i + 1],
            old[i : i + 1],
            adv[i : i + 1],
            mask[i : i + 1],
            LossConfig(kl_coef=c),
            ref_lp=ref[i : i + 1],
        )
        for i, c in ((0, 0.0), (1, 0.01))
    ]
    assert float(mixed) == pytest.approx(float(alone[0].loss + alone[1].loss) / 2, abs=1e-7)
    assert float(alone[1].loss) != pytest.approx(
        float(policy_loss(new[1:], old[1:], adv[1:], mask[1:], ref_lp=ref[1:]).loss)
    )
