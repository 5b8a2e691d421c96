"""Per-user adapters on one LoRA trainer: each user's adapter takes exactly the steps a trainer of its own would,
whatever other users train in between; saved and loaded again it scores and steps the same."""

from __future__ import annotations

import random

import pytest
import torch

from tests.samples import personal_sample
from trainers.lora import LoraConfig
from trainers.torch_trainer import TorchTrainer, TrainerConfig
from trainers.user_adapters import AdapterBank

LORA = TrainerConfig(lr=5e-3, lora=LoraConfig(rank=4, alpha=8), micro_batch_tokens=100_000)


def samples(seed: int, sign: float, n: int = 2):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        ids = [rng.randrange(1000, 5000) for _ in range(30)]
        # rollout log-probs near the random tiny model's own (ln 151936 = 11.93): ratios near 1, nothing clipped
        out.append(personal_sample(f"u{seed}#{i}", ids[:20], ids[20:], [-11.93] * 10, [sign] * 10))
    return out


def lora_params(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def test_each_users_adapter_steps_as_in_a_trainer_of_its_own(tiny_model):
    alice, bob = samples(1, 1.0), samples(2, -1.0)
    bank = AdapterBank(TorchTrainer(tiny_model, LORA))
    alone = {"alice": TorchTrainer(tiny_model, LORA), "bob": TorchTrainer(tiny_model, LORA)}
    for _ in range(3):  # interleaved on the shared trainer; each alone on its own
        for user, batch in (("alice", alice), ("bob", bob)):
            shared = bank.train_step(user, batch)
            own = alone[user].train_step(batch)
            assert shared.loss == pytest.approx(own.loss, abs=1e-6)
    for user in ("alice", "bob"):
        mine = bank.adapter(user).params
        theirs = lora_params(alone[user].model)
        assert max(float((mine[n] - theirs[n].cpu()).abs().max()) for n in mine) < 1e-6
        assert bank.adapter(user).steps == 3
    # each adapter moved its own user's answers the way their advantages say; a user with no steps is the base
    assert sum(bank.logprobs("alice", alice[0])) > sum(bank.logprobs("carol", alice[0]))
    assert sum(bank.logprobs("bob", bob[0])) < sum(bank.logprobs("carol", bob[0]))


def test_a_saved_adapter_loads_into_a_fresh_bank_and_steps_the_same(tiny_model, tmp_path):
    alice = samples(3, 1.0)
    bank = AdapterBank(TorchTrainer(tiny_model, LORA))
    bank.train_step("alice", alice)
    bank.train_step("bob", samples(4, -1.0))
    folder = bank.save("alice", tmp_path / "alice" / "v1", version="1")
    assert (folder / "adapter_config.json").is_file() and (folder / "adapter_model.safetensors").is_file()

    again = AdapterBank(TorchTrainer(tiny_model, LORA))
    again.load("alice", folder)
    assert again.logprobs("alice", alice[0]) == pytest.approx(bank.logprobs("alice", alice[0]), abs=1e-6)
    nxt, nxt_again = bank.train_step("alice", alice), again.train_step("alice", alice)
    assert nxt.loss == pytest.approx(nxt_again.loss, abs=1e-6)  # the optimizer state came back too
    with pytest.raises(ValueError, match="another user"):
        again.load("bob", folder)
    assert again.forget("alice") and not again.forget("alice")


def test_per_user_adapters_need_a_lora_trainer(tiny_model):
    with pytest.raises(ValueError, match="LoRA"):
        AdapterBank(TorchTrainer(tiny_model, TrainerConfig()))


def test_a_checkpoint_written_after_a_forget_leaves_the_user_out_and_so_does_a_resume(tiny_model, tmp_path):
    """A forget marks the user forgotten and removes their adapter from the checkpoints on disk under the lock a
    checkpoint write holds to its rename (control.user_adapters): a checkpoint the trainer writes afterwards, from a
    bank that still holds the user, must leave them out, and drop them from the bank."""
    from contracts.chat import tenant_of
    from openclaw_rl.adapter_owners import USER_ADAPTERS_DIR, mark_forgotten, owners_lock
    from trainers.user_adapters import UserAdapterTrainer

    def of(user: str, seed: int):
        return [
            s.model_copy(update={"provenance": s.provenance.model_copy(update={"user_id": user})})
            for s in samples(seed, 1.0)
        ]

    trainer = UserAdapterTrainer(tiny_model, LORA)
    trainer.train_step(of("ines", 5) + of("omar", 6))
    ines, omar = tenant_of("ines"), tenant_of("omar")
    checkpoints = tmp_path / "checkpoints"
    before = trainer.snapshot().write(checkpoints / "policy-1", "1", None)
    assert (before / USER_ADAPTERS_DIR / ines).is_dir()

    with owners_lock(checkpoints):  # what the forget does (control.user_adapters.FileAdapters._forget_in_checkpoints)
        mark_forgotten(checkpoints, ines)
    after = trainer.snapshot().write(checkpoints / "policy-2", "2", None)
    assert not (after / USER_ADAPTERS_DIR / ines).exists() and (after / USER_ADAPTERS_DIR / omar).is_dir()
    assert ines not in trainer.bank.users and ines not in trainer.touched

    resumed = UserAdapterTrainer.resume(before, LORA)  # an older checkpoint the forget has not reached
    assert ines not in resumed.bank.users and omar in resumed.bank.users


def test_going_back_to_the_incumbent_restores_it_keeps_counting_and_measures_staleness_through_it(tiny_model, tmp_path):
    """eval.canary rolled back a candidate: the user's adapter starts again from the incumbent's weights, its step
    count going on (versions only grow), and the incumbent's samples are on-policy again instead of stale."""
    from trainers.user_adapters import sample_owner

    batch = samples(5, 1.0)
    owner = sample_owner(batch[0])
    bank = AdapterBank(TorchTrainer(tiny_model, LORA))
    bank.train_step(owner, batch)  # version 1: the incumbent
    incumbent = bank.save(owner, tmp_path / "v1", version="1")
    served = bank.logprobs(owner, batch[0])
    for _ in range(3):  # versions 2 to 4: the line the canary rolled back
        bank.train_step(owner, batch)
    assert bank.staleness(batch[0], 1) == 3
    assert bank.logprobs(owner, batch[0]) != pytest.approx(served, abs=1e-4)

    bank.go_back(owner, 1, incumbent, 1)
    state = bank.adapter(owner)
    assert state.steps == 4 and state.lineage == 1
    assert bank.logprobs(owner, batch[0]) == pytest.approx(served, abs=1e-6)
    assert bank.staleness(batch[0], 1) == 0  # what the incumbent serves is on-policy again
    assert bank.staleness(batch[0], 4) == 3  # the abandoned line: its distance through the incumbent
    bank.train_step(owner, batch)  # version 5, on the incumbent's line
    assert [bank.staleness(batch[0], v) for v in (5, 1, 4, 0)] == [0, 1, 4, 2]

    again = AdapterBank(TorchTrainer(tiny_model, LORA))  # saved and loaded (a trainer restarting), it stays gone back
    again.load(owner, bank.save(owner, tmp_path / "v5", version="5"))
    assert again.adapter(owner).lineage == 1 and again.staleness(batch[0], 1) == 1

    with pytest.raises(FileNotFoundError):  # an unreadable incumbent changes nothing (the caller goes to the base)
        bank.go_back(owner, 2, tmp_path / "gone", 1)
    assert bank.adapter(owner).lineage == 1 and bank.adapter(owner).steps == 5

    base = AdapterBank(TorchTrainer(tiny_model, LORA)).logprobs("carol", batch[0])
    bank.go_back(owner, 2, None, 0, top=7)  # the incumbent was the base; the store knew of versions up to 7
    assert bank.logprobs(owner, batch[0]) == pytest.approx(base, abs=1e-6)
    assert bank.adapter(owner).steps == 7  # the next version is 8: no number of the abandoned line used twice
