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
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch

from contracts.training import StepMetrics
from openclaw_rl.adapter_owners import USER_ADAPTERS_DIR, owners_lock
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
    began_at: float = field(default_factory=time.time)
    """When this adapter began in this process: a forget of its user at or after it refuses its publication, even
    once a new key for the same id cleared the tombstone (store.adapters)."""
    lineage: int = 0
    """Go-backs applied (eval.canary): each rolled-back candidate's line was abandoned for the incumbent's weights."""
    based_on: tuple[int, int] | None = None
    """(steps when it last went back, the version it went back to): staleness counts through that version."""


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

    def train_step(
        self, user_id: str, samples: list[TrainingSample], staleness: Mapping[str, int] | None = None
    ) -> StepMetrics:
        """One optimizer step of `user_id`'s adapter on `samples` (theirs alone)."""
        state = self.adapter(user_id)
        self._swap_in(state)
        try:
            metrics = self.trainer.train_step(samples, staleness)
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
                torch.save(
                    {
                        "moments": state.moments, "steps": state.steps, "began_at": state.began_at,
                        "lineage": state.lineage, "based_on": list(state.based_on) if state.based_on else None,
                    },
                    tmp / ADAPTER_STATE,
                )  # fmt: skip
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
        # When it began, as saved (older saves: when they were written): a forget after it still refuses it.
        began_at = float(extra.get("began_at", (folder / "adapter_model.safetensors").stat().st_mtime))
        based_on = extra.get("based_on")
        self.users[user_id] = UserAdapter(
            params=params, moments=extra.get("moments", {}), steps=extra.get("steps", 0), began_at=began_at,
            lineage=int(extra.get("lineage", 0)), based_on=(int(based_on[0]), int(based_on[1])) if based_on else None,
        )  # fmt: skip
        meta = folder / "openclaw-rl-version.json"
        if meta.is_file() and json.loads(meta.read_text()).get("user") not in (None, user_id):
            raise ValueError(f"{folder} is another user's adapter")

    def staleness(self, sample: TrainingSample, generated_with: int) -> int:
        """Steps between the sample's user's adapter now and the version that generated the sample. After a go-back
        the distance runs through the version it went back to: a version of the line since is `steps - v` away, any
        other (the incumbent itself, its ancestors, the abandoned line) the steps since the go-back plus its distance
        to that version in version numbers (exact for the last abandoned line; an estimate for older ones)."""
        state = self.adapter(sample_owner(sample))
        if state.based_on is None or generated_with > state.based_on[0]:
            return state.steps - generated_with
        at, base = state.based_on
        return (state.steps - at) + abs(generated_with - base)

    def go_back(self, user_id: str, lineage: int, folder: Path | None, version: int, top: int = 0) -> None:
        """eval.canary rolled back a candidate of this user: their adapter starts again from what serves them
        (`folder`, that version's published adapter, its weights and optimizer state; None: the base model, the
        initial adapter), so what trains next is built on it and the samples it serves stay within the staleness
        bound. The step count goes on past the abandoned line's versions (`top`, the newest the store knew of, and
        whatever this bank reached), so no version number is used twice; samples of other lines count their
        distance through `version`. Nothing changes if the folder cannot be read (the caller decides)."""
        old = self.adapter(user_id)
        steps = max(old.steps, top)
        if folder is None:
            self.users.pop(user_id)
            new = self.adapter(user_id)
        else:
            try:
                self.load(user_id, folder)
            except BaseException:
                self.users[user_id] = old
                raise
            new = self.users[user_id]
        new.steps, new.began_at, new.lineage, new.based_on = steps, old.began_at, lineage, (steps, version)

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


def sample_owner(sample: TrainingSample) -> str:
    """Whose adapter a sample trains: its user's tenant pseudonym (contracts.chat.tenant_of: no user id in clear)."""
    from contracts.chat import tenant_of

    user = getattr(sample.provenance, "user_id", None)
    if not user:
        raise ValueError(
            f"sample {sample.sample_id} of stream {sample.source} has no user: per-user adapters train only "
            "personal samples (training.source_weights)"
        )
    return tenant_of(user)


class UserAdapterTrainer:
    """The trainer pool's trainer with `training.adapters = per_user`: what the training activities call on a
    trainer (train_step, snapshot, memory, ...), each step training every user of the batch on their own adapter
    (`AdapterBank`), the base shared and frozen. `touched` collects the users whose adapters changed since the
    last publication (`WeightPublisher` sends those)."""

    backend = "torch-user-adapters"

    def __init__(self, checkpoint: Path, cfg):
        self.inner = TorchTrainer(checkpoint, cfg)
        self.bank = AdapterBank(self.inner)
        self.cfg, self.device, self.source = cfg, self.inner.device, self.inner.source
        self.step = 0
        self.touched: set[str] = set()

    @classmethod
    def resume(cls, folder: Path, cfg) -> UserAdapterTrainer:
        """The base (the served model, never a merged checkpoint) with every user's adapter of a durable checkpoint."""
        from trainers.lora import base_of

        folder = Path(folder)
        meta = folder / "openclaw-rl-version.json"
        base = json.loads(meta.read_text()).get("base") if meta.is_file() else None
        trainer = cls(Path(base) if base else (base_of(folder) or folder), cfg)
        users = folder / USER_ADAPTERS_DIR
        with owners_lock(folder.parent) as forgotten:
            for sub in sorted(users.iterdir()) if users.is_dir() else ():
                if sub.name not in forgotten:
                    trainer.bank.load(sub.name, sub)
        trainer.step = int(json.loads(meta.read_text()).get("step", 0)) if meta.is_file() else 0
        return trainer

    # ---- what the training activities call -------------------------------------------------------------------
    def train_step(self, samples: list[TrainingSample], staleness: Mapping[str, int] | None = None) -> StepMetrics:
        groups: dict[str, list[TrainingSample]] = {}
        for s in samples:
            groups.setdefault(sample_owner(s), []).append(s)
        parts = [(len(g), self.bank.train_step(owner, g, staleness)) for owner, g in groups.items()]
        self.touched |= set(groups)
        self.step += 1
        return _combined(parts, self.step)

    def weights_finite(self) -> bool:
        return all(bool(torch.isfinite(t).all()) for a in self.bank.users.values() for t in a.params.values())

    def memory(self) -> dict[str, int]:
        out = self.inner.memory()
        out["adapters_bytes"] = sum(
            t.numel() * t.element_size()
            for a in self.bank.users.values()
            for t in [*a.params.values(), *(v for m in a.moments.values() for v in m.values())]
        )
        out["users"] = len(self.bank.users)
        return out

    @property
    def bf16_on_cuda(self) -> bool:
        return self.inner.bf16_on_cuda

    def snapshot(self):
        """Every user's adapter, written (under the step lock) into the durable checkpoint's `user-adapters/`."""
        from trainers.trainer_state import Snapshot, copy_tokenizer

        def write(folder: Path, version: str, extra: dict | None) -> Path:
            # The lock is held until the folder is in place, so a forget either comes first (its user is left
            # out here) or finds this checkpoint on disk and removes the user from it.
            with owners_lock(Path(folder).parent) as forgotten, atomic_dir(Path(folder)) as tmp:
                for owner in sorted(self.bank.users):
                    if owner in forgotten:
                        self.bank.forget(owner)  # never trained, saved or published again
                        self.touched.discard(owner)
                        continue
                    self.bank.save(owner, tmp / USER_ADAPTERS_DIR / owner, version)
                copy_tokenizer(self.source, tmp)
                write_version_info(
                    tmp,
                    {
                        "weight_version": version,
                        "step": self.step,
                        "backend": self.backend,
                        "base": str(self.source),
                        **(extra or {}),
                    },
                )
            return Path(folder)

        return Snapshot(write=write, detached=False)

    def save(self, folder: Path, version: str, extra: dict | None = None) -> Path:
        """A checkpoint on request (`openclaw-rl train checkpoint`): every user's adapter, as a durable one."""
        return self.snapshot().write(folder, version, extra)

    def close(self) -> None:
        self.inner.close()


def _combined(parts: list[tuple[int, StepMetrics]], step: int) -> StepMetrics:
    """One step's metrics from its users' steps: sums of counts and times, sample-weighted means of the rest, the
    largest gradient norm (each adapter is clipped on its own)."""
    n = sum(k for k, _ in parts) or 1
    total = {"samples": 0, "tokens": 0, "step_s": 0.0}
    for _, m in parts:
        total["samples"] += m.samples
        total["tokens"] += m.tokens
        total["step_s"] += m.step_s or 0.0
    processed = sum(m.tokens_per_s * (m.step_s or 0.0) for _, m in parts)  # prompt + response tokens run
    mean = {
        f: sum(k * getattr(m, f) for k, m in parts) / n
        for f in (
            "loss",
            "pg_loss",
            "kl",
            "entropy",
            "clip_fraction",
            "approx_kl",
            "mean_advantage",
            "logprob_gap",
            "tis_weight",
            "tis_truncated",
        )
    }
    return StepMetrics(
        step=step,
        grad_norm=max(m.grad_norm for _, m in parts),
        tokens_per_s=processed / total["step_s"] if total["step_s"] else 0.0,
        **total,
        **mean,
        **_combined_mismatch([m for _, m in parts]),
    )


def _combined_mismatch(parts: list[StepMetrics]) -> dict:
    """The users' mismatch figures as one step's: means and maxima from the per-sample figures (exact), the 99th
    percentile as the largest user's (an upper bound: the users' token gaps are not kept)."""
    per_sample = [s for m in parts for s in m.per_sample]
    out: dict = {"per_sample": per_sample, "mismatch_masked_tokens": sum(m.mismatch_masked_tokens for m in parts)}
    measured = sum(s.tokens for s in per_sample)
    out["mismatch_over"] = sum(s.over for s in per_sample) / measured if measured else 0.0
    for prefix, pick, p99 in (("mismatch", True, "mismatch_p99"), ("mismatch_stale", False, "mismatch_stale_p99")):
        chosen = [s for s in per_sample if (s.staleness == 0) == pick]
        tokens = sum(s.tokens for s in chosen)
        out[f"{prefix}_samples"] = len(chosen)
        out[f"{prefix}_mean"] = sum(s.mean * s.tokens for s in chosen) / tokens if tokens else None
        out[p99] = max((v for m in parts if (v := getattr(m, p99)) is not None), default=None)
    fresh = [s for s in per_sample if s.staleness == 0 and s.tokens]
    out["mismatch_max"] = max((s.max for s in fresh), default=None)
    return out
