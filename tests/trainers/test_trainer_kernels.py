"""The trainer's faster computations against the plain ones they replace: chunked log-probs against full fp32
logits, packed samples against padded rows, a fused AdamW; values and gradients within float tolerance."""

from __future__ import annotations

import random

import pytest
import torch

from rlmath.logprobs import token_entropy, token_logprobs
from store.samples import TrainingSample
from tests.samples import personal_sample
from trainers.chunked_logprobs import HeadInput, linear_logprobs
from trainers.lora import LoraConfig
from trainers.micro_batches import micro_batches
from trainers.torch_trainer import TorchTrainer, TrainerConfig


@pytest.mark.parametrize("keep_bytes", [0, 1 << 40], ids=["recomputed", "kept"])
@pytest.mark.parametrize("temperature", [1.0, 0.7, "per-token"])
@pytest.mark.parametrize("with_entropy", [False, True])
def test_chunked_log_probs_and_entropy_equal_the_full_logits_computation(keep_bytes, temperature, with_entropy):
    torch.manual_seed(0)
    n, h, v = 37, 16, 500
    hidden = torch.randn(n, h, requires_grad=True)
    weight = torch.randn(v, h, requires_grad=True)
    targets = torch.randint(0, v, (n,))
    temp = torch.rand(n) + 0.5 if temperature == "per-token" else temperature
    g_lp, g_ent = torch.randn(n), torch.randn(n)

    lp, ent = linear_logprobs(
        HeadInput(hidden, weight), targets, temp, with_entropy, chunk_rows=5, keep_bytes=keep_bytes
    )
    loss = (lp * g_lp).sum() + ((ent * g_ent).sum() if with_entropy else 0.0)
    grads = torch.autograd.grad(loss, [hidden, weight])

    logits = hidden @ weight.T
    ref_lp = token_logprobs(logits, targets, temp)
    ref_ent = token_entropy(logits, temp)
    ref_loss = (ref_lp * g_lp).sum() + ((ref_ent * g_ent).sum() if with_entropy else 0.0)
    ref_grads = torch.autograd.grad(ref_loss, [hidden, weight])

    assert torch.allclose(lp, ref_lp, atol=1e-5)
    assert (ent is not None) == with_entropy
    if with_entropy:
        assert torch.allclose(ent, ref_ent, atol=1e-5)
    for got, want in zip(grads, ref_grads):
        assert torch.allclose(got, want, rtol=1e-4, atol=1e-4)


def _batch(vocab_low: int = 1000, vocab_high: int = 5000) -> list[TrainingSample]:
    """Samples of very different lengths and temperatures (what packing must keep apart)."""
    rng = random.Random(0)
    out = []
    for i, (p, r, temp) in enumerate([(30, 12, 1.0), (7, 40, 0.7), (55, 3, 1.0), (12, 20, 1.0)]):
        ids = [rng.randrange(vocab_low, vocab_high) for _ in range(p + r)]
        adv = [rng.uniform(-1, 1)] * r
        out.append(personal_sample(f"s{i}", ids[:p], ids[p:], [-5.0] * r, adv, temperature=temp))
    return out


def _step(trainer: TorchTrainer, batch: list[TrainingSample]) -> tuple[torch.Tensor, torch.Tensor, float]:
    lp = trainer.logprobs(trainer.model, batch).detach()
    trainer.opt.zero_grad(set_to_none=True)
    totals = trainer.accumulate(batch, len(batch))
    grad = torch.cat([p.grad.flatten() for p in trainer.model.parameters() if p.grad is not None])
    return lp, grad, totals.loss


@pytest.mark.parametrize(
    "options",
    [{}, {"activation_checkpointing": True}, {"lora": LoraConfig(rank=4)}],
    ids=["packed", "packed+checkpointing", "packed+lora"],
)
def test_packed_samples_give_the_padded_rows_log_probs_loss_and_gradients(tiny_model, options):
    batch = _batch()
    common = {"lr": 1e-3, "micro_batch_tokens": 100_000, "share_prompt_prefix": False, **options}
    padded = TorchTrainer(tiny_model, TrainerConfig(pack_samples=False, **common))
    packed = TorchTrainer(tiny_model, TrainerConfig(**common))
    if options.get("activation_checkpointing"):
        assert packed.model.is_activation_checkpointing
    lp0, g0, loss0 = _step(padded, batch)
    lp1, g1, loss1 = _step(packed, batch)
    assert torch.allclose(lp0, lp1, atol=1e-5)
    assert loss1 == pytest.approx(loss0, abs=1e-6)
    assert float((g0 - g1).norm() / g0.norm()) < 1e-5


def test_packed_samples_do_not_attend_to_one_another(tiny_model):
    """Change every token of the first sample: the others' log-probs stay exactly what they were."""
    batch = _batch()
    other = batch[0].model_copy(update={"prompt_ids": [t + 7 for t in batch[0].prompt_ids]})
    trainer = TorchTrainer(tiny_model, TrainerConfig(share_prompt_prefix=False))
    with torch.no_grad():
        before = trainer.logprobs(trainer.model, batch)
        after = trainer.logprobs(trainer.model, [other, *batch[1:]])
    assert not torch.allclose(before[0], after[0])
    assert torch.allclose(before[1:], after[1:], atol=1e-6)


def test_packed_micro_batches_cost_their_tokens_not_their_padding():
    batch = _batch()  # 42, 47, 58 and 32 tokens: 179 in all, 4 x 58 = 232 padded
    assert [len(g) for g in micro_batches(batch, 179, packed=True)] == [4]
    assert [len(g) for g in micro_batches(batch, 179)] == [3, 1]  # padded: 3 x 58 fits, the 4th does not


def test_the_optimizer_is_fused_and_steps_like_the_default_adamw(tiny_model):
    batch = _batch()
    trainer = TorchTrainer(tiny_model, TrainerConfig(lr=1e-3))
    assert trainer.opt.defaults.get("fused") is True
    plain = TorchTrainer(tiny_model, TrainerConfig(lr=1e-3))
    plain.opt = torch.optim.AdamW(plain.model.parameters(), lr=1e-3, weight_decay=0.1, betas=(0.9, 0.98))
    for t in (trainer, plain):
        t.train_step(batch)
        t.train_step(batch)
    for a, b in zip(trainer.model.parameters(), plain.model.parameters()):
        assert torch.allclose(a, b, atol=1e-6)


def test_compiled_layers_give_the_eager_log_probs_loss_and_gradients(tiny_model):
    """training.compile: the same numbers (to float rounding), across batches of other lengths and counts."""
    common = {"lr": 1e-3, "micro_batch_tokens": 100_000, "share_prompt_prefix": False}
    eager = TorchTrainer(tiny_model, TrainerConfig(**common))
    compiled = TorchTrainer(tiny_model, TrainerConfig(compile=True, **common))
    batch = _batch()
    for b in (batch, batch[1:3], batch[:1]):
        lp0, g0, loss0 = _step(eager, b)
        lp1, g1, loss1 = _step(compiled, b)
        assert torch.allclose(lp0, lp1, atol=1e-5)
        assert loss1 == pytest.approx(loss0, abs=1e-6)
        assert float((g0 - g1).norm() / g0.norm()) < 1e-4


def test_compiled_layers_run_a_shared_prompt_prefix_eagerly_with_the_same_numbers(tiny_model):
    prefix = list(range(2000, 2080))  # 80 shared tokens: the shared-prefix path, whose KV cache stays eager
    batch = [
        s.model_copy(update={"prompt_ids": prefix + s.prompt_ids, "sample_id": f"p{i}"}) for i, s in enumerate(_batch())
    ]
    common = {"lr": 1e-3, "micro_batch_tokens": 100_000}
    eager = TorchTrainer(tiny_model, TrainerConfig(**common))
    compiled = TorchTrainer(tiny_model, TrainerConfig(compile=True, **common))
    lp0, g0, _ = _step(eager, batch)
    lp1, g1, _ = _step(compiled, batch)
    assert torch.allclose(lp0, lp1, atol=1e-5)
    assert float((g0 - g1).norm() / g0.norm()) < 1e-4
