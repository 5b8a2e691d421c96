"""The megatron-core backend against the torch backend on CPU: the same log-probs, the same step, a servable checkpoint.

megatron-core is in the test extra, so this runs in CI; the GPU path is the same code on CUDA.
"""

from __future__ import annotations

import json

import pytest
import torch

from store.samples import TrainingSample
from tests.samples import personal_sample
from trainers.torch_trainer import TorchTrainer
from trainers.trainer_config import TrainerConfig

pytest.importorskip("megatron.core", reason="the megatron extra is not installed")

from trainers.megatron_convert import DenseArch, hf_to_mcore, mcore_to_hf  # noqa: E402
from trainers.megatron_trainer import MegatronTrainer, load_hf_weights  # noqa: E402


def sample(prompt: list[int], response: list[int], temperature: float, advantage: float) -> TrainingSample:
    return personal_sample(
        f"s#{len(prompt)}",
        prompt,
        response,
        [-11.5] * len(response),
        [advantage] * len(response),
        temperature=temperature,
        reward=advantage,
    )


BATCH = [  # different lengths (padding), temperatures and advantage signs
    sample([151644, 872, 198, 9707, 1879], [3838, 374, 264], 1.0, 1.0),
    sample([151644, 872, 198, 40, 1079, 1052, 1273, 374], [1234, 99, 7, 88, 5], 0.7, -1.0),
]


def test_weight_layout_round_trips_exactly(tiny_model):
    arch = DenseArch.from_hf_config(json.loads((tiny_model / "config.json").read_text()))
    hf = load_hf_weights(tiny_model)
    back = mcore_to_hf(arch, hf_to_mcore(arch, hf))
    assert set(back) == set(hf)
    assert all(torch.equal(back[k], hf[k]) for k in hf)


def test_unsupported_architectures_get_a_clear_error():
    with pytest.raises(ValueError, match="not 'mixtral'"):
        DenseArch.from_hf_config({"model_type": "mixtral"})
    base = json.loads(
        '{"model_type": "qwen3", "num_attention_heads": 4, "hidden_size": 64, "intermediate_size": 8, '
        '"num_hidden_layers": 1, "vocab_size": 8}'
    )
    with pytest.raises(ValueError, match="plain RoPE"):
        DenseArch.from_hf_config(base | {"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e6}})


def test_megatron_and_torch_backends_compute_the_same_step(tiny_model, tmp_path):
    cfg = TrainerConfig(lr=1e-3, micro_batch_tokens=12)  # one sample per micro-batch: accumulation too
    mega, ref = MegatronTrainer(tiny_model, cfg), TorchTrainer(tiny_model, cfg)
    from trainers.megatron_attention import SdpaAttention

    assert all(isinstance(layer.self_attention.core_attention, SdpaAttention) for layer in mega.model.decoder.layers)
    for s in BATCH:
        assert mega.response_logprobs(s) == pytest.approx(ref.response_logprobs(s), abs=1e-5)
    a, b = mega.train_step(BATCH), ref.train_step(BATCH)
    assert a.loss == pytest.approx(b.loss, abs=1e-6) and a.grad_norm == pytest.approx(b.grad_norm, rel=1e-5)
    assert a.tokens == b.tokens == 8 and a.clip_fraction == b.clip_fraction
    moved = ref.model.state_dict()
    mine = mega.hf_state_dict()
    assert max(float((mine[k] - moved[k]).abs().max()) for k in mine) < 1e-4  # the same update, to float rounding

    folder = mega.save(tmp_path / "policy-1", version="1")
    assert json.loads((folder / "openclaw-rl-version.json").read_text())["weight_version"] == "1"
    served = TorchTrainer(folder, cfg)  # what the policy servers load: a plain Hugging Face checkpoint
    for s in BATCH:
        assert served.response_logprobs(s) == pytest.approx(ref.response_logprobs(s), abs=1e-4)
    again = MegatronTrainer.resume(folder, cfg)
    assert again.step == 1 and len(again.opt.state_dict()["state"]) == len(mega.opt.state_dict()["state"])


def test_bf16_on_cpu_is_refused_with_a_reason(tiny_model):
    """megatron-core's layers autocast on CUDA only: bf16 on CPU would break in the backward, so it is refused."""
    with pytest.raises(ValueError, match="needs CUDA"):
        MegatronTrainer(tiny_model, TrainerConfig(precision="bf16", device="cpu"))


def test_with_a_reference_model_both_backends_take_the_same_steps(tiny_model):
    """kl_coef > 0: the megatron backend's frozen reference (a second GPTModel; megatron's modules cannot be
    deep-copied) gives the torch backend's KL and loss, step after step (the KL is 0 at the first)."""
    from rlmath.loss import LossConfig

    cfg = TrainerConfig(lr=1e-3, micro_batch_tokens=12, loss=LossConfig(kl_coef=0.5))
    torch_steps = [s for t in [TorchTrainer(tiny_model, cfg)] for s in (t.train_step(BATCH), t.train_step(BATCH))]
    mc_steps = [s for t in [MegatronTrainer(tiny_model, cfg)] for s in (t.train_step(BATCH), t.train_step(BATCH))]
    assert torch_steps[1].kl > 0
    for a, b in zip(torch_steps, mc_steps, strict=True):
        assert b.loss == pytest.approx(a.loss, abs=1e-6) and b.kl == pytest.approx(a.kl, rel=1e-4, abs=1e-9)
