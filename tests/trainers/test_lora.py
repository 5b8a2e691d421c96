"""LoRA on the torch backend: the loss falls with only the adapters trained, the merged checkpoint the servers load
scores exactly as the adapter model does, and a resume continues from the saved adapter."""

from __future__ import annotations

import json

import torch

from openclaw_rl.settings import Settings
from tests.trainers.test_torch_trainer import rollout, with_advantage
from trainers.lora import ADAPTER_DIR, LoraConfig, base_of
from trainers.torch_trainer import TorchTrainer, TrainerConfig

LORA = TrainerConfig(lr=5e-3, lora=LoraConfig(rank=4, alpha=8))


def test_only_the_adapters_train_and_the_loss_falls_on_a_fixed_batch(engine_url, tiny_model):
    batch = [with_advantage(rollout(engine_url, f"LoRA step {i}", 1.0), 1.0) for i in range(2)]
    trainer = TorchTrainer(tiny_model, LORA)
    trainable = {n for n, p in trainer.model.named_parameters() if p.requires_grad}
    assert trainable and all(".lora_" in n for n in trainable)
    projections = {n.split(".lora_")[0].rsplit(".", 1)[1] for n in trainable}
    assert projections == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    frozen = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if not p.requires_grad}
    losses = [trainer.train_step(batch).loss for _ in range(6)]
    assert losses[-1] < losses[0], losses
    assert all(torch.equal(p, frozen[n]) for n, p in trainer.model.named_parameters() if n in frozen)


def test_the_merged_checkpoint_scores_as_the_adapter_model_and_a_resume_continues(engine_url, tiny_model, tmp_path):
    s = with_advantage(rollout(engine_url, "Merged equals adapter", 0.7), 1.0)
    trainer = TorchTrainer(tiny_model, LORA)
    for _ in range(3):
        trainer.train_step([s])
    adapter_lp = trainer.response_logprobs(s)
    folder = trainer.save(tmp_path / "policy-1", "1")

    served = TorchTrainer(folder, TrainerConfig())  # what a policy server loads: plain weights, no peft
    merged_lp = served.response_logprobs(s)
    assert max(abs(a - b) for a, b in zip(adapter_lp, merged_lp)) < 1e-5
    base_lp = TorchTrainer(tiny_model, TrainerConfig()).response_logprobs(s)
    assert max(abs(a - b) for a, b in zip(adapter_lp, base_lp)) > 1e-3  # the adapters did change something
    assert json.loads((folder / ADAPTER_DIR / "adapter_config.json").read_text())["r"] == 4
    assert base_of(folder) == tiny_model

    resumed = TorchTrainer.resume(folder, LORA)
    assert resumed.step == trainer.step
    assert max(abs(a - b) for a, b in zip(resumed.response_logprobs(s), adapter_lp)) < 1e-5
    nxt_a, nxt_b = trainer.train_step([s]), resumed.train_step([s])  # same state: the same next step
    assert abs(nxt_a.loss - nxt_b.loss) < 1e-5


def test_lora_is_a_torch_backend_setting():
    import pytest
    from pydantic import ValidationError

    assert Settings(training={"lora": {"enabled": True}}).training.lora.rank == 16
    with pytest.raises(ValidationError, match="torch backend"):
        Settings(training={"backend": "megatron", "lora": {"enabled": True}})
