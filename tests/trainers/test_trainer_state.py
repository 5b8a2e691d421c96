"""The optimizer state saved with a checkpoint loads as plain data only: a checkpoint folder never runs code."""

from __future__ import annotations

import builtins

import pytest
import torch

import trainers.base as base
from rlmath.loss import LossConfig
from store.samples import TrainingSample
from tests.samples import personal_sample
from trainers.torch_trainer import TorchTrainer, TrainerConfig
from trainers.trainer_state import STATE_FILE


def sample() -> TrainingSample:
    """A made-up sample: the trainer only needs token ids and log-probs, not an engine's rollout."""
    return personal_sample("t#0", [11, 12, 13, 14], [15, 16, 17], [-12.0, -12.0, -12.0], [1.0, 1.0, 1.0])


class RunsCode:
    """Unpickling this writes `marker`: what a planted trainer_state.pt could do with a full pickle load."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return builtins.exec, (f"open({str(self.marker)!r}, 'w').write('ran')",)


@pytest.fixture(scope="module")
def checkpoint(tiny_model, tmp_path_factory):
    """A checkpoint saved after one optimizer step, and the trainer that saved it."""
    trainer = TorchTrainer(tiny_model, TrainerConfig(lr=1e-3))
    trainer.train_step([sample()])
    folder = trainer.save(tmp_path_factory.mktemp("ckpt") / "policy-1", version="1")
    return folder, trainer


def test_save_and_resume_restore_the_optimizer_state_and_step(checkpoint):
    folder, trainer = checkpoint
    torch.load(folder / STATE_FILE, weights_only=True)  # what we save is plain data
    again = TorchTrainer.resume(folder, TrainerConfig(lr=1e-3))
    assert again.step == trainer.step == 1
    saved, loaded = trainer.opt.state_dict(), again.opt.state_dict()
    assert loaded["param_groups"] == saved["param_groups"]
    assert loaded["state"].keys() == saved["state"].keys() and saved["state"]
    for key, state in saved["state"].items():
        for name, value in state.items():
            assert torch.equal(loaded["state"][key][name], value), (key, name)


def _planted(checkpoint, tmp_path, content) -> tuple:
    """A copy of the checkpoint whose state file is replaced by `content` (bytes, or an object to torch.save)."""
    import shutil

    folder = tmp_path / "policy-2"
    shutil.copytree(checkpoint[0], folder)
    state_file = folder / STATE_FILE
    if isinstance(content, bytes):
        state_file.write_bytes(content)
    else:
        torch.save(content, state_file)
    return folder, state_file


def test_a_state_file_that_would_run_code_is_refused(checkpoint, tmp_path):
    marker = tmp_path / "marker"
    folder, state_file = _planted(checkpoint, tmp_path, {"optimizer": RunsCode(marker), "step": 1})
    with pytest.raises(Exception) as refused:
        TorchTrainer.resume(folder, TrainerConfig(lr=1e-3))
    assert not marker.exists(), "loading the checkpoint's state file ran code from it"
    assert isinstance(refused.value, base.CheckpointCorrupt) and isinstance(refused.value, ValueError)
    assert refused.value.path == state_file and str(state_file) in str(refused.value)
    assert "plain data" in str(refused.value) and "weights_only=False" not in str(refused.value)


@pytest.mark.parametrize(
    "content",
    [
        b"not a torch file at all",
        b"PK\x03\x04 truncated zip",
        {"optimizer": {"state": {}, "param_groups": []}},  # no step
        {"optimizer": "not a state dict", "step": 1},
        torch.zeros(3),
        {"optimizer": {"state": {}, "param_groups": [{"params": [0]}, {"params": [1]}]}, "step": 1},  # other model
    ],
    ids=["garbage", "truncated", "no-step", "bad-optimizer", "tensor", "mismatched-groups"],
)
def test_a_corrupt_state_file_is_a_typed_error_naming_the_file(checkpoint, tmp_path, content):
    folder, state_file = _planted(checkpoint, tmp_path, content)
    trainer = TorchTrainer(folder, TrainerConfig(lr=1e-3))
    with pytest.raises(Exception) as refused:
        trainer.load_optimizer_state(folder)
    assert isinstance(refused.value, base.CheckpointCorrupt), repr(refused.value)
    assert refused.value.path == state_file and str(state_file) in str(refused.value)


def test_the_kl_reference_is_the_initial_policy_whatever_checkpoint_is_resumed(checkpoint, tiny_model):
    """Resuming a trained version must not move the KL reference to it: the paper's KL is to the initial policy."""
    checkpoint, _ = checkpoint
    cfg = TrainerConfig(lr=1e-3, loss=LossConfig(kl_coef=0.1), reference=str(tiny_model))
    resumed = TorchTrainer.resume(checkpoint, cfg)
    initial = TorchTrainer(tiny_model, TrainerConfig(lr=1e-3)).model.state_dict()
    ref, trained = resumed.ref.state_dict(), resumed.model.state_dict()
    assert all(torch.equal(t, initial[k]) for k, t in ref.items())
    assert any(not torch.equal(t, trained[k]) for k, t in ref.items())  # not a copy of the resumed version
    without = TorchTrainer.resume(checkpoint, TrainerConfig(lr=1e-3, loss=LossConfig(kl_coef=0.1)))
    assert all(torch.equal(t, trained[k]) for k, t in without.ref.state_dict().items())  # no reference given


def test_each_streams_advantages_are_scaled_by_its_weight(tiny_model):
    cfg = TrainerConfig(advantage_scale_by_source={"toolcall": 0.5})
    trainer = TorchTrainer(tiny_model, cfg)
    personal = sample()
    tool = personal.model_copy(update={"source": "toolcall", "sample_id": "e#0"})
    _, adv, _ = trainer._targets([personal, tool], 3)
    assert adv.tolist() == [[1.0, 1.0, 1.0], [0.5, 0.5, 0.5]]
