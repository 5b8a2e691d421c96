"""Train-inference mismatch on the torch trainer (CPU, the tiny model): measured per sample and per step, and bounded
by `max_token_gap` (rlmath.mismatch)."""

from __future__ import annotations

import pytest

from rlmath.loss import LossConfig
from tests.samples import personal_sample
from tests.trainers.test_torch_trainer import rollout
from trainers.torch_trainer import TorchTrainer, TrainerConfig


def own_sample(trainer: TorchTrainer, sample_id: str, offset: int, version: str = "0"):
    """A sample whose rollout log-probs are the trainer's own (what an engine with the trainer's numerics returns)."""
    prompt, response = [5 + offset, 17, 42, 9, 33], [7 + offset, 11, 13, 19, 23, 29, 31, 37]
    s = personal_sample(sample_id, prompt, response, [0.0] * len(response), [1.0] * len(response))
    s = s.model_copy(update={"policy_version": version})
    return s.model_copy(update={"rollout_logprobs": trainer.response_logprobs(s)})


def test_the_engines_rollouts_measure_a_cpu_mismatch_below_1e_5(engine_url, tiny_model):
    batch = [
        rollout(engine_url, f"How far apart are the engine and the trainer, take {i}", temperature, n=32)
        for i, temperature in enumerate((1.0, 1.0, 0.7, 0.7))
    ]
    metrics = TorchTrainer(tiny_model).train_step(batch, staleness={s.sample_id: 0 for s in batch})
    assert [f.tokens for f in metrics.per_sample] == [32] * 4 and metrics.mismatch_samples == 4
    # measured on CPU, fp32 (2026-11-28): mean ~1e-7, p99 and max ~1e-6 per token (docs/training.md)
    assert metrics.mismatch_mean < 1e-5 and metrics.mismatch_max < 1e-5
    assert metrics.mismatch_masked_tokens == 0 and metrics.mismatch_stale_mean is None
    print(
        f"CPU mismatch over {metrics.tokens} tokens: mean {metrics.mismatch_mean:.2e}, "
        f"p99 {metrics.mismatch_p99:.2e}, max {metrics.mismatch_max:.2e}"
    )


def test_own_logprobs_give_no_mismatch_and_corrupted_tokens_are_masked(tiny_model):
    trainer = TorchTrainer(tiny_model, TrainerConfig(lr=1e-3, loss=LossConfig(max_token_gap=0.5)))
    clean = own_sample(trainer, "s#0", 0)
    bad = own_sample(trainer, "s#1", 1)
    lps = list(bad.rollout_logprobs)
    for i in (2, 5):  # the engine reported these tokens 3 nats off
        lps[i] -= 3.0
    lps[6] += 0.1  # and this one a little (under the bound: learned as before)
    bad = bad.model_copy(update={"rollout_logprobs": lps})
    old = own_sample(trainer, "s#2", 2, version="0")
    metrics = trainer.train_step([clean, bad, old], staleness={"s#0": 0, "s#1": 0, "s#2": 1})
    by_id = {f.sample_id: f for f in metrics.per_sample}
    assert by_id["s#0"].mean < 1e-6 and by_id["s#0"].max < 1e-6 and by_id["s#0"].over == 0
    assert by_id["s#1"].over == 2 and by_id["s#1"].max == pytest.approx(3.0, abs=1e-5)
    assert by_id["s#1"].mean == pytest.approx((3.0 + 3.0 + 0.1) / 8, abs=1e-5)
    assert metrics.mismatch_masked_tokens == 2 and metrics.tokens == 3 * 8 - 2
    assert metrics.mismatch_over == pytest.approx(2 / 24)
    assert metrics.mismatch_samples == 2 and metrics.mismatch_stale_samples == 1
    assert metrics.mismatch_max == pytest.approx(3.0, abs=1e-5)
    assert metrics.mismatch_stale_mean < 1e-6  # its weights did not move: staleness is a label here, not drift


def test_measure_only_by_default_learns_every_token(tiny_model):
    trainer = TorchTrainer(tiny_model, TrainerConfig(lr=1e-3))
    s = own_sample(trainer, "s#0", 0)
    s = s.model_copy(update={"rollout_logprobs": [lp - 3.0 for lp in s.rollout_logprobs]})
    metrics = trainer.train_step([s])  # no staleness given: the trainer's own version
    assert metrics.mismatch_masked_tokens == 0 and metrics.mismatch_over == 0.0 and metrics.tokens == 8
    assert metrics.mismatch_mean == pytest.approx(3.0, abs=1e-5) and metrics.logprob_gap == pytest.approx(3.0, abs=1e-5)


def test_per_user_steps_combine_their_mismatch_from_the_per_sample_figures():
    from contracts.training import SampleMismatch, StepMetrics
    from trainers.user_adapters import _combined_mismatch

    def step(p99: float, *figs: SampleMismatch) -> StepMetrics:
        zero = dict.fromkeys(("loss", "pg_loss", "kl", "entropy", "clip_fraction", "approx_kl"), 0.0)
        return StepMetrics(step=1, samples=len(figs), tokens=0, mean_advantage=0.0, logprob_gap=0.0, grad_norm=0.0,
                           tokens_per_s=0.0, mismatch_p99=p99, per_sample=list(figs), **zero)  # fmt: skip

    ann = step(0.3, SampleMismatch(sample_id="a", staleness=0, tokens=2, mean=0.1, max=0.3, over=1))
    bob = step(
        0.2,
        SampleMismatch(sample_id="b", staleness=0, tokens=6, mean=0.2, max=0.2),
        SampleMismatch(sample_id="c", staleness=2, tokens=4, mean=1.0, max=2.0, over=2),
    )
    out = _combined_mismatch([ann, bob])
    assert out["mismatch_samples"] == 2 and out["mismatch_stale_samples"] == 1
    assert out["mismatch_mean"] == pytest.approx((0.1 * 2 + 0.2 * 6) / 8) and out["mismatch_max"] == 0.3
    assert out["mismatch_p99"] == 0.3 and out["mismatch_stale_mean"] == 1.0 and out["mismatch_over"] == 3 / 12
