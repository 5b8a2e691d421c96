"""Each user's own LoRA adapter on one shared base, trained in turn by one LoRA trainer.

Why one trainer that schedules adapters, not a trainer (or a training workflow) per user: a trainer GPU trains one
thing at a time, and a trainer per user would each hold the base model (a 4B base is 16 GB in fp32; 100 users
would not fit). Here the base is held once, in a LoRA `TorchTrainer`; what is per user is small: the adapter's
A and B matrices, AdamW's two moments for them and its step count (rank 16 on Qwen3-1.7B: 17M parameters, 200 MB
with its optimizer state; on disk the adapter alone, 70 MB in fp32). A user's step swaps their state into the
trainer's LoRA parameters and optimizer (in place: the parameters and the optimizer stay the same objects), trains
on their samples only, and swaps it out again. Done that way, a user's adapter takes exactly the steps it would
take in a trainer of its own (tested), whatever the other users do in between.

A user with no adapter yet starts from peft's initial adapter (B = 0: the base model's behaviour), the same for
everyone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import torch

from contracts.training import StepMetrics
from openclaw_rl.checkpoints import atomic_dir, write_version_info
from store.samples import TrainingSample
from trainers.torch_trainer import TorchTrainer

ADAPTER_STATE = "adapter_state.pt"
"""Beside a user's adapter folder: its optimizer moments and step (what a resume needs)."""


@dataclass
class UserAdapter:
    """One user's trainable state, off the trainer."""

    params: dict[str, torch.Tensor]
    """LoRA parameter name -> tensor (CPU)."""
    moments: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict)
    """LoRA parameter name -> AdamW state (exp_avg, exp_avg_sq, step), absent before the first step."""
    steps: int = 0


class AdapterBank:
    """Per-user adapters trained through one LoRA `TorchTrainer` (`cfg.lora` set)."""

    def __init__(self, trainer: TorchTrainer):
        if trainer.cfg.lora is None:
            raise ValueError("per-user adapters need a LoRA trainer (training.lora)")
        self.trainer = trainer
        self.names = [n for n, p in trainer.model.named_parameters() if p.requires_grad]
        self._params = dict((n, p) for n, p in trainer.model.named_parameters() if p.requires_grad)
        self.initial = UserAdapter(params={n: p.detach().to("cpu", copy=True) for n, p in self._params.items()})
        self.users: dict[str, UserAdapter] = {}

    def adapter(self, user_id: str) -> UserAdapter:
        if user_id not in self.users:
            self.users[user_id] = UserAdapter(params={n: t.clone() for n, t in self.initial.params.items()})
        return self.users[user_id]

    def train_step(self, user_id: str, samples: list[TrainingSample]) -> StepMetrics:
        """One optimizer step of `user_id`'s adapter on `samples` (theirs alone)."""
        state = self.adapter(user_id)
        self._swap_in(state)
        try:
            metrics = self.trainer.train_step(samples)
        finally:
            self._swap_out(state)
        state.steps += 1
        return metrics

    def logprobs(self, user_id: str, sample: TrainingSample) -> list[float]:
        """Response log-probs of `sample` under `user_id`'s adapter (no gradient)."""
        state = self.adapter(user_id)
        self._swap_in(state)
        try:
            return self.trainer.response_logprobs(sample)
        finally:
            self._swap_out(state, keep_moments=True)

    def save(self, user_id: str, folder: Path, version: str) -> Path:
        """`user_id`'s adapter as a PEFT folder (adapter_config.json + adapter_model.safetensors: what
        `/load_lora_adapter` takes), labelled with its version, with its optimizer state beside it."""
        state = self.adapter(user_id)
        self._swap_in(state)
        try:
            with atomic_dir(Path(folder)) as tmp:
                self.trainer.model.save_pretrained(tmp, safe_serialization=True)
                torch.save({"moments": state.moments, "steps": state.steps}, tmp / ADAPTER_STATE)
                write_version_info(tmp, {"weight_version": version, "user": user_id, "steps": state.steps})
        finally:
            self._swap_out(state, keep_moments=True)
        return Path(folder)

    def load(self, user_id: str, folder: Path) -> None:
        """`user_id`'s adapter as `save` wrote it (a trainer restarting)."""
        from safetensors.torch import load_file

        folder = Path(folder)
        saved = load_file(folder / "adapter_model.safetensors")
        params = {}
        for name in self.names:  # peft saves "...lora_A.weight" for our "...lora_A.default.weight"
            key = name.replace(".default", "")
            if key not in saved:
                raise ValueError(f"{folder} holds no {key}: not an adapter of this base and LoRA configuration")
            params[name] = saved[key].to(torch.float32)
        extra = torch.load(folder / ADAPTER_STATE, weights_only=True) if (folder / ADAPTER_STATE).is_file() else {}
        self.users[user_id] = UserAdapter(params=params, moments=extra.get("moments", {}), steps=extra.get("steps", 0))
        meta = folder / "openclaw-rl-version.json"
        if meta.is_file() and json.loads(meta.read_text()).get("user") not in (None, user_id):
            raise ValueError(f"{folder} is another user's adapter")

    def forget(self, user_id: str) -> bool:
        """Drop `user_id`'s adapter from memory (their data rights); True if there was one."""
        return self.users.pop(user_id, None) is not None

    # ---- moving a user's state on and off the trainer -------------------------------------------------------
    def _swap_in(self, state: UserAdapter) -> None:
        opt = self.trainer.opt
        with torch.no_grad():
            for name, p in self._params.items():
                p.copy_(state.params[name].to(p.device))
                moments = state.moments.get(name)
                opt.state[p] = {k: v.to(p.device, copy=True) for k, v in moments.items()} if moments else {}
        self.trainer.step = state.steps

    def _swap_out(self, state: UserAdapter, keep_moments: bool = False) -> None:
        opt = self.trainer.opt
        for name, p in self._params.items():
            state.params[name] = p.detach().to("cpu", copy=True)
            if not keep_moments and opt.state.get(p):
                state.moments[name] = {k: v.detach().to("cpu", copy=True) for k, v in opt.state[p].items()}
            opt.state.pop(p, None)
