"""The torch trainer against the real engine's rollouts."""

from __future__ import annotations

import json
import math

import httpx
import pytest
import torch

from store.samples import TrainingSample
from tests.samples import personal_sample
from trainers.torch_trainer import TorchTrainer, TrainerConfig


def rollout(engine_url: str, prompt: str, temperature: float, n: int = 12) -> TrainingSample:
    body = {
        "text": prompt,
        "return_logprob": True,
        "logprob_start_len": 0,
        "sampling_params": {"max_new_tokens": n, "temperature": temperature, "ignore_eos": True},
    }
    r = httpx.post(f"{engine_url}/generate", json=body, timeout=60).json()
    prompt_ids = [e[1] for e in r["meta_info"]["input_token_logprobs"]]
    lps = [e[0] for e in r["meta_info"]["output_token_logprobs"]]
    return personal_sample(f"t#{prompt}", prompt_ids, r["output_ids"], lps, [1.0] * len(lps), temperature=temperature)


def with_advantage(s: TrainingSample, a: float) -> TrainingSample:
    return s.model_copy(update={"advantages": [a] * len(s.response_ids), "reward": a})


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_trainer_logprobs_equal_the_engines_rollout_logprobs(engine_url, tiny_model, temperature):
    s = rollout(engine_url, "The trainer and the engine must agree", temperature)
    trainer = TorchTrainer(tiny_model)
    assert trainer.response_logprobs(s) == pytest.approx(s.rollout_logprobs, abs=1e-4)
    metrics = trainer.train_step([s])
    assert metrics.logprob_gap < 1e-4 and metrics.clip_fraction == 0.0 and metrics.tokens == len(s.response_ids)


def test_a_step_moves_log_probs_in_the_direction_of_the_advantage(engine_url, tiny_model):
    s = rollout(engine_url, "Push this answer up", 1.0)
    before = sum(s.rollout_logprobs)
    up = TorchTrainer(tiny_model, TrainerConfig(lr=1e-3))
    up.train_step([with_advantage(s, 1.0)])
    down = TorchTrainer(tiny_model, TrainerConfig(lr=1e-3))
    down.train_step([with_advantage(s, -1.0)])
    assert sum(up.response_logprobs(s)) > before > sum(down.response_logprobs(s))


def test_gradient_accumulation_matches_one_big_batch(engine_url, tiny_model):
    batch = [with_advantage(rollout(engine_url, f"sample number {i}", 1.0), a) for i, a in enumerate([1.0, -1.0, 0.5])]
    one = TorchTrainer(tiny_model, TrainerConfig(lr=1e-3, micro_batch_tokens=100_000))
    split = TorchTrainer(tiny_model, TrainerConfig(lr=1e-3, micro_batch_tokens=1))  # one sample per micro-batch
    m1, m2 = one.train_step(batch), split.train_step(batch)
    assert m1.loss == pytest.approx(m2.loss, abs=1e-6)
    assert m1.grad_norm == pytest.approx(m2.grad_norm, rel=1e-4)
    # Compare gradients, not Adam's update: its first step is ~lr * sign(g), which float noise can flip where g ~ 0.
    # A step frees its gradients; accumulating the same batch again (from the same updated weights) shows them.
    split.model.load_state_dict(one.model.state_dict())
    t1, t2 = one.accumulate(batch, len(batch)), split.accumulate(batch, len(batch))
    assert t1.loss == pytest.approx(t2.loss, abs=1e-6)
    for p1, p2 in zip(one.model.parameters(), split.model.parameters()):
        assert torch.allclose(p1.grad, p2.grad, rtol=1e-3, atol=1e-7)
    one.train_step(batch)
    assert all(p.grad is None for p in one.model.parameters())  # a step leaves no gradients behind


def test_save_is_a_loadable_labelled_checkpoint_and_resume_restores_the_optimizer(engine_url, tiny_model, tmp_path):
    s = rollout(engine_url, "save me", 1.0)
    trainer = TorchTrainer(tiny_model, TrainerConfig(lr=1e-3))
    trainer.train_step([s])
    folder = trainer.save(tmp_path / "policy-1", version="1")
    assert json.loads((folder / "openclaw-rl-version.json").read_text())["weight_version"] == "1"
    assert (folder / "model.safetensors").is_file() and (folder / "tokenizer.json").is_file()
    again = TorchTrainer.resume(folder, TrainerConfig(lr=1e-3))
    assert again.step == 1
    assert again.response_logprobs(s) == pytest.approx(trainer.response_logprobs(s), abs=1e-5)
    assert again.opt.state_dict()["state"].keys() == trainer.opt.state_dict()["state"].keys()
    # the engine's loader accepts it (same signature check as a weight update)
    from engine.model_runner import load_model

    assert load_model(folder, weight_version="1").signature() == load_model(tiny_model).signature()


def test_entropy_is_reported_and_its_coefficient_alone_moves_the_weights(engine_url, tiny_model):
    s = with_advantage(rollout(engine_url, "Entropy bonus only", 1.0), 0.0)  # zero advantage: no policy gradient
    plain = TorchTrainer(tiny_model, TrainerConfig(lr=1e-3))
    m = plain.train_step([s])
    assert m.entropy == pytest.approx(math.log(151936), abs=0.1)  # the random tiny model is nearly uniform
    assert m.grad_norm == 0.0
    from rlmath.loss import LossConfig

    bonus = TorchTrainer(tiny_model, TrainerConfig(lr=1e-3, loss=LossConfig(entropy_coef=0.01)))
    assert bonus.train_step([s]).grad_norm > 0.0


def test_bf16_mixed_precision_keeps_fp32_weights_and_moves_log_probs_like_fp32(engine_url, tiny_model):
    """precision=bf16 (auto's choice on CUDA; CPU autocast here): the forward runs in bf16, the log-probs come from
    fp32 logits close to the fp32 ones, the weights and the optimizer stay fp32, and a step moves the same way."""
    s = rollout(engine_url, "Mixed precision must learn like full precision", 1.0)
    full = TorchTrainer(tiny_model, TrainerConfig(lr=1e-3, precision="fp32"))
    mixed = TorchTrainer(tiny_model, TrainerConfig(lr=1e-3, precision="bf16"))
    lp_full, lp_mixed = full.response_logprobs(s), mixed.response_logprobs(s)
    assert lp_mixed != lp_full  # the forward really ran in bf16
    assert lp_mixed == pytest.approx(lp_full, abs=0.1)
    before = sum(lp_mixed)
    mixed.train_step([with_advantage(s, 1.0)])
    assert sum(mixed.response_logprobs(s)) > before
    assert all(p.dtype == torch.float32 for p in mixed.model.parameters())
    state = [v for st in mixed.opt.state.values() for v in st.values() if v.is_floating_point()]
    assert state and all(v.dtype == torch.float32 for v in state)


def test_an_unknown_precision_is_refused_with_its_name():
    with pytest.raises(ValueError, match="fp8"):
        TrainerConfig(precision="fp8")


def test_a_shared_prompt_prefix_run_once_gives_the_same_log_probs_and_gradients(engine_url, tiny_model):
    """Agent steps share their system prompt and tools: run once per micro-batch, nothing about the step changes."""
    system = "You are an agent in a shell sandbox with tools; think, then call one. " * 6
    batch = [
        with_advantage(rollout(engine_url, system + f"Task {i}: count the lines of file {i}.", 1.0), a)
        for i, a in enumerate([1.0, -1.0, 0.5, -0.25])
    ]
    shared = TorchTrainer(tiny_model, TrainerConfig(lr=1e-3, micro_batch_tokens=100_000))
    plain = TorchTrainer(tiny_model, TrainerConfig(lr=1e-3, micro_batch_tokens=100_000, share_prompt_prefix=False))
    from trainers.torch_trainer import shared_prefix

    assert shared_prefix(batch) >= 64  # the case under test: a long common prefix
    for s in batch:
        assert shared.logprobs(shared.model, batch)[batch.index(s)][: len(s.response_ids)].tolist() == pytest.approx(
            s.rollout_logprobs, abs=1e-4
        )
    grads = []
    for trainer in (shared, plain):
        trainer.opt.zero_grad(set_to_none=True)
        trainer.accumulate(batch, len(batch))
        grads.append(torch.cat([p.grad.flatten() for p in trainer.model.parameters() if p.grad is not None]))
    assert float((grads[0] - grads[1]).norm() / grads[1].norm()) < 1e-4
