"""Train-inference mismatch (rlmath.mismatch) and its bound in the loss, by hand."""

import math

import pytest
import torch

from rlmath import mismatch
from rlmath.loss import LossConfig, policy_loss
from tests.samples import personal_sample
from trainers.loss_totals import LossTotals

# One sample, three learned tokens and a pad. |train - rollout| = [0, 0.5, 0.1]: mean 0.2, max 0.5.
TRAIN = [[-1.0, -2.0, -0.5, 0.0]]
ROLLOUT = [[-1.0, -2.5, -0.4, 0.0]]
MASK = [[1.0, 1.0, 1.0, 0.0]]


def tensors():
    return torch.tensor(TRAIN, requires_grad=True), torch.tensor(ROLLOUT), torch.ones(1, 4), torch.tensor(MASK)


def test_per_sample_mean_and_max_over_learned_tokens():
    gaps = mismatch.token_gaps(torch.tensor(TRAIN), torch.tensor(ROLLOUT), torch.tensor(MASK))
    assert gaps.tolist()[0] == pytest.approx([0.0, 0.5, 0.1, 0.0])
    over = mismatch.over_threshold(gaps, torch.tensor(MASK), 0.3)
    assert over.tolist() == [[False, True, False, False]]
    (fig,) = mismatch.per_sample(gaps, torch.tensor(MASK), over)
    assert (fig.tokens, fig.over) == (3, 1)
    assert fig.mean == pytest.approx(0.2) and fig.max == pytest.approx(0.5)
    assert not mismatch.over_threshold(gaps, torch.tensor(MASK), None).any()  # no bound: nothing is over


def test_step_summary_mean_p99_max():
    s = mismatch.summarize([torch.tensor([0.0, 0.5]), torch.tensor([0.1])])
    # sorted [0, 0.1, 0.5]: the 99th percentile sits at 0.99 * 2 = 1.98 -> 0.1 + 0.98 * 0.4 = 0.492
    assert (s.tokens, s.mean, s.p99, s.max) == (3, pytest.approx(0.2), pytest.approx(0.492), pytest.approx(0.5))
    assert mismatch.summarize([torch.zeros(0)]).mean is None


def test_mask_takes_the_token_over_the_bound_out_and_leaves_the_others():
    new, old, adv, mask = tensors()
    parts = policy_loss(new, old, adv, mask, LossConfig(max_token_gap=0.3))
    parts.loss.backward()
    # tokens 0 and 2 remain: ratios exp(0) = 1 and exp(-0.1), both inside the trust region, advantage 1
    assert float(parts.loss.detach()) == pytest.approx(-(1 + math.exp(-0.1)) / 2, abs=1e-6)
    assert (parts.tokens, parts.over_tokens, parts.masked_tokens) == (2, 1, 1)
    assert new.grad[0].tolist() == pytest.approx([-1 / 2, 0.0, -math.exp(-0.1) / 2, 0.0], abs=1e-6)
    # the same as a mask that leaves the token out by hand
    new2, old2, adv2, _ = tensors()
    alone = policy_loss(new2, old2, adv2, torch.tensor([[1.0, 0.0, 1.0, 0.0]]))
    assert float(alone.loss.detach()) == pytest.approx(float(parts.loss.detach()))


def test_without_a_bound_the_loss_is_unchanged_and_nothing_is_masked():
    new, old, adv, mask = tensors()
    base = policy_loss(new, old, adv, mask)
    wide = policy_loss(new, old, adv, mask, LossConfig(max_token_gap=0.6))
    assert float(base.loss.detach()) == pytest.approx(float(wide.loss.detach()))
    assert (base.over_tokens, base.masked_tokens, wide.over_tokens, wide.masked_tokens) == (0, 0, 0, 0)


def test_tis_method_is_truncated_importance_sampling_capped_at_e_to_the_bound():
    new, old, adv, mask = tensors()
    parts = policy_loss(new, old, adv, mask, LossConfig(max_token_gap=0.3, mismatch_method="tis"))
    # weights exp(train - rollout) = [1, e^0.5 -> capped at e^0.3, e^-0.1]; the ratio to the trainer itself is 1
    assert float(parts.loss.detach()) == pytest.approx(-(1 + math.exp(0.3) + math.exp(-0.1)) / 3, abs=1e-6)
    assert (parts.tokens, parts.over_tokens, parts.masked_tokens) == (3, 1, 0)
    assert parts.tis_truncated == pytest.approx(1 / 3)
    # the same as tis_cap = e^0.3: one mechanism
    same = policy_loss(new, old, adv, mask, LossConfig(tis_cap=math.exp(0.3)))
    assert float(same.loss.detach()) == pytest.approx(float(parts.loss.detach()))
    # both set: the smaller cap applies
    assert LossConfig(tis_cap=1.2, max_token_gap=0.3, mismatch_method="tis").weight_cap == 1.2
    assert LossConfig(tis_cap=2.0, max_token_gap=0.3, mismatch_method="tis").weight_cap == pytest.approx(math.exp(0.3))
    assert LossConfig(tis_cap=2.0, max_token_gap=0.3).weight_cap == 2.0  # mask method: tis_cap alone
    with pytest.raises(ValueError):
        LossConfig(mismatch_method="clip")


def test_totals_split_same_version_from_older_samples():
    group = [
        personal_sample("s#0", [1, 2], [3, 4, 5], [-1.0, -2.5, -0.4], [1.0] * 3),
        personal_sample("s#1", [1, 2], [3, 4], [-1.0, -1.0], [1.0] * 2),
    ]
    train = torch.tensor([[-1.0, -2.0, -0.5], [-2.0, -1.0, 0.0]])
    rollout = torch.tensor([[-1.0, -2.5, -0.4], [-1.0, -1.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    totals = LossTotals()
    gap = totals.add_mismatch(group, train, rollout, mask, 0.3, {"s#0": 0, "s#1": 2})
    assert gap == pytest.approx(0.6 + 1.0)
    m = totals.metrics(step=1, samples=2, grad_norm=0.0, tokens_per_s=0.0)
    assert (m.mismatch_samples, m.mismatch_stale_samples) == (1, 1)
    assert m.mismatch_mean == pytest.approx(0.2) and m.mismatch_max == pytest.approx(0.5)
    assert m.mismatch_stale_mean == pytest.approx(0.5)  # [1.0, 0.0]: numerics and drift together
    assert [(f.sample_id, f.staleness, f.tokens, f.over) for f in m.per_sample] == [("s#0", 0, 3, 1), ("s#1", 2, 2, 1)]
    assert m.per_sample[1].max == pytest.approx(1.0)
    assert m.mismatch_over == pytest.approx(2 / 5)
    assert "per_sample" not in m.model_dump()  # never in a payload or the step log
