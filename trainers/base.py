"""What every trainer backend shares: the step loop over micro-batches (trainers.micro_batches), the loss and its
metrics (trainers.loss_totals), checkpoints in and out (trainers.trainer_state).

A backend supplies the model (`self.model`, trainable; `self.ref`, frozen or
None), the optimizer, the response log-probs of a micro-batch under a given
model, and Hugging Face checkpoints in and out. The loss (rlmath.loss), the
sample-weighted accumulation and the metrics are the same for all of them, so
switching backends never changes what is optimised.
"""

from __future__ import annotations

import contextlib
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path

import torch

from contracts.training import StepMetrics
from openclaw_rl.checkpoints import atomic_dir, write_version_info
from rlmath.logprobs import token_entropy, token_logprobs
from rlmath.loss import policy_loss
from store.samples import TrainingSample
from trainers.chunked_logprobs import HeadInput, linear_logprobs
from trainers.loss_totals import LossTotals
from trainers.micro_batches import micro_batches, response_rows
from trainers.trainer_config import TrainerConfig
from trainers.trainer_state import (
    STATE_FILE,
    CheckpointCorrupt,
    Snapshot,
    copy_tokenizer,
    move_optimizer_state,
    read_trainer_state,
)

ENTROPY_SAMPLE = 16
"""Positions per micro-batch the entropy metric is estimated from when the loss has no entropy term."""


class PolicyTrainer(ABC):
    """A backend's __init__(checkpoint, cfg) loads the policy from a Hugging Face checkpoint folder."""

    cfg: TrainerConfig
    device: torch.device
    model: torch.nn.Module
    ref: torch.nn.Module | None
    opt: torch.optim.Optimizer
    step: int

    def make_optimizer(self) -> torch.optim.Optimizer:
        """AdamW, fused (one kernel over all parameters: measured 8x the default per-parameter loop on CPU) where
        PyTorch has it for these parameters' device."""
        trainable = [p for p in self.model.parameters() if p.requires_grad]  # with LoRA: the adapters only
        kwargs = {"lr": self.cfg.lr, "weight_decay": self.cfg.weight_decay, "betas": self.cfg.betas}
        try:
            return torch.optim.AdamW(trainable, fused=True, **kwargs)
        except (RuntimeError, TypeError, ValueError):  # a device or dtype without the fused kernel
            return torch.optim.AdamW(trainable, **kwargs)

    @property
    def trains_in_bf16(self) -> bool:
        """cfg.precision resolved: auto is bf16 on CUDA."""
        return self.cfg.precision == "bf16" or (self.cfg.precision == "auto" and self.device.type == "cuda")

    @property
    def bf16_on_cuda(self) -> bool:
        """Trains in bf16 on a GPU: its servers then serve bf16 (what weight sync's wire dtype follows)."""
        return self.trains_in_bf16 and self.device.type == "cuda"

    def autocast(self) -> contextlib.AbstractContextManager:
        """The forward's precision (cfg.precision): the layers; the output projection stays fp32 (backends leave it
        out of this context), so log-probs come from fp32 logits."""
        if not self.trains_in_bf16:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=torch.bfloat16)

    @property
    def shares_prefixes(self) -> bool:
        """Whether this backend runs a micro-batch's shared prompt prefix once (`TrainerConfig.share_prompt_prefix`);
        micro-batches are then grouped by prompt so that sharers meet."""
        return False

    @property
    def packs_samples(self) -> bool:
        """Whether this backend runs a micro-batch's samples packed in one row without padding
        (`TrainerConfig.pack_samples`)."""
        return False

    # ---- what a backend provides ---------------------------------------------------
    @abstractmethod
    def response_logits(
        self, model: torch.nn.Module, group: list[TrainingSample]
    ) -> tuple[torch.Tensor | HeadInput, torch.Tensor]:
        """Logits [N, V] at the positions that predict the batch's response tokens (in `response_rows` order), or
        what the output layer takes to make them (`HeadInput`), and those tokens [N]."""

    def logprobs(self, model: torch.nn.Module, group: list[TrainingSample]) -> torch.Tensor:
        """[B, R] right-padded log-probs of each sample's response tokens under `model`, at its sampling temperature."""
        return self._scored(group, *self.response_logits(model, group))[0]

    def _scored(
        self, group: list[TrainingSample], logits: torch.Tensor | HeadInput, targets: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None, tuple[float, int]]:
        """Log-probs [B, R]; the entropy [B, R] when the loss uses it (with its gradient); and (sum, count) of an
        entropy estimate. `logits`: [N, V], or the head's input (`HeadInput`), projected a chunk at a time.

        Without an entropy term the entropy is only a metric, and a full pass over [N, V] would cost as
        much as the loss itself (measured: +45% per step at 150k vocabulary on CPU). It is then estimated
        from at most ENTROPY_SAMPLE learned positions, evenly spread, without a gradient.
        """
        b, _, j, temperature = response_rows(group, self.device)
        shape = (len(group), max(len(s.response_ids) for s in group))
        with_entropy = bool(self.cfg.loss.entropy_coef)
        if isinstance(logits, HeadInput):
            lp, h = linear_logprobs(logits, targets, temperature, with_entropy=with_entropy)
        else:
            lp = token_logprobs(logits, targets, temperature)
            h = token_entropy(logits, temperature) if with_entropy else None
        out = torch.zeros(shape, device=self.device, dtype=lp.dtype).index_put((b, j), lp)
        if h is not None:
            ent = torch.zeros(shape, device=self.device, dtype=h.dtype).index_put((b, j), h)
            return out, ent, (0.0, 0)
        learned = torch.tensor([s.loss_mask > 0 for s in group], device=self.device)[b].nonzero().squeeze(-1)
        if learned.numel() == 0:
            return out, None, (0.0, 0)
        pick = learned[torch.linspace(0, learned.numel() - 1, min(ENTROPY_SAMPLE, learned.numel())).long()]
        with torch.no_grad():
            temp = temperature[pick] if isinstance(temperature, torch.Tensor) else temperature
            picked = logits.logits(pick) if isinstance(logits, HeadInput) else logits.detach()[pick]
            h = token_entropy(picked.detach(), temp)
        return out, None, (float(h.sum()), int(h.numel()))

    @abstractmethod
    def write_weights(self, folder: Path) -> None:
        """Write the current weights into `folder` as a Hugging Face checkpoint (weights and config.json)."""

    def snapshot(self) -> Snapshot:
        """The state a durable checkpoint holds, as of now. The default writes from the live trainer (the caller
        keeps steps out until it is written); a backend that can copies its state aside instead, so steps go on
        while the copy is written."""
        return Snapshot(write=lambda folder, version, extra: self.save(folder, version, extra), detached=False)

    backend: str = "?"
    source: Path

    def save(self, folder: Path, version: str, extra: dict | None = None) -> Path:
        """A Hugging Face checkpoint the policy servers can load, labelled with its version, plus optimizer state."""
        with atomic_dir(Path(folder)) as tmp:
            self.write_weights(tmp)
            copy_tokenizer(self.source, tmp)
            torch.save(self.optimizer_state(), tmp / STATE_FILE)
            write_version_info(
                tmp, {"weight_version": version, "step": self.step, "backend": self.backend, **(extra or {})}
            )
        return Path(folder)

    @classmethod
    def resume(cls, folder: Path, cfg: TrainerConfig = TrainerConfig()):
        """The trainer at a saved checkpoint: its weights, optimizer state and step count."""
        trainer = cls(folder, cfg)
        trainer.load_optimizer_state(folder)
        return trainer

    # ---- one optimizer step ------------------------------------------------------
    def train_step(self, samples: list[TrainingSample], staleness: Mapping[str, int] | None = None) -> StepMetrics:
        """`staleness`: each sample's versions behind the weights trained from, by sample id, for the mismatch
        figures (None: all of these weights)."""
        started = time.perf_counter()
        self.opt.zero_grad(set_to_none=True)
        totals = self.accumulate(samples, len(samples), staleness)
        params = [p for p in self.model.parameters() if p.requires_grad]
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, self.cfg.grad_clip))
        with self.optimizer_on_device():
            self.opt.step()
        self.opt.zero_grad(set_to_none=True)  # gradients are not kept between steps: their memory goes back
        self.step += 1
        took = time.perf_counter() - started
        metrics = totals.metrics(
            self.step, len(samples), grad_norm, sum(len(s.prompt_ids) + len(s.response_ids) for s in samples) / took
        )
        return metrics.model_copy(update={"step_s": took})

    @contextlib.contextmanager
    def optimizer_on_device(self):
        """With `optimizer_offload`, AdamW's state is brought to the device for the update and sent back after."""
        if not self.cfg.optimizer_offload or self.device.type == "cpu":
            yield
            return
        move_optimizer_state(self.opt, self.device)
        try:
            yield
        finally:
            move_optimizer_state(self.opt, torch.device("cpu"))

    def memory(self) -> dict[str, int]:
        """Bytes this trainer holds: weights, optimizer state (and where), and the device allocator's view."""
        weights = sum(p.numel() * p.element_size() for p in self.model.parameters())
        state = sum(
            t.numel() * t.element_size()
            for st in self.opt.state.values()
            for t in st.values()
            if isinstance(t, torch.Tensor)
        )
        out = {"weights_bytes": weights, "optimizer_bytes": state}
        if self.device.type == "cuda":
            out["cuda_allocated_bytes"] = torch.cuda.memory_allocated(self.device)
            out["cuda_reserved_bytes"] = torch.cuda.memory_reserved(self.device)
        return out

    def accumulate(
        self, samples: list[TrainingSample], batch_size: int, staleness: Mapping[str, int] | None = None
    ) -> LossTotals:
        """Forward and backward of `samples` in micro-batches (gradients accumulate), each weighted by its share of
        a batch of `batch_size` samples: the loss is a mean over samples, so the shares' gradients add up to the
        batch's whatever the split (micro-batches here, data-parallel replicas in megatron's job)."""
        totals = LossTotals()
        for group in micro_batches(
            samples, self.cfg.micro_batch_tokens, share_prefixes=self.shares_prefixes, packed=self.packs_samples
        ):
            new_lp, entropy, estimate = self._scored(group, *self.response_logits(self.model, group))
            old_lp, adv, mask = self._targets(group, new_lp.shape[1])
            ref_lp = None
            if self.ref is not None:
                with torch.no_grad():
                    ref_lp = self.logprobs(self.ref, group)
            parts = policy_loss(
                new_lp, old_lp, adv, mask, self.cfg.loss, ref_lp=ref_lp, entropy=entropy, kl_coef=self.kl_coefs(group)
            )
            share = len(group) / batch_size
            (parts.loss * share).backward()
            gap = totals.add_mismatch(group, new_lp, old_lp, mask, self.cfg.loss.max_token_gap, staleness)
            totals.add(parts, share, gap, estimate)
        return totals

    def kl_coefs(self, group: list[TrainingSample]) -> torch.Tensor | None:
        """[B, 1] each sample's stream's KL coefficient; None when no stream has its own."""
        if not self.cfg.kl_by_source:
            return None
        return torch.tensor([[self.cfg.kl_for(s.source)] for s in group], device=self.device)

    def response_logprobs(self, sample: TrainingSample) -> list[float]:
        """The current weights' log-probs of one sample's response (no gradient)."""
        with torch.no_grad():
            new_lp = self.logprobs(self.model, [sample])
        return new_lp[0, : len(sample.response_ids)].tolist()

    def _targets(self, group: list[TrainingSample], width: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Right-padded [B, R]: rollout log-probs, advantages, loss mask (built on the host, sent in one copy)."""
        rows = torch.zeros((3, len(group), width))
        for i, s in enumerate(group):
            r = len(s.response_ids)
            rows[0, i, :r] = torch.tensor(s.rollout_logprobs)
            rows[1, i, :r] = torch.tensor(s.advantages) * self.cfg.advantage_scale_by_source.get(s.source, 1.0)
            rows[2, i, :r] = float(s.loss_mask)
        old_lp, adv, mask = rows.to(self.device, non_blocking=True)
        return old_lp, adv, mask

    def weights_finite(self) -> bool:
        """No NaN/Inf in the weights (checked after every step, before a version may be saved and served)."""
        return all(bool(torch.isfinite(p).all()) for p in self.model.parameters())

    def close(self) -> None:
        """Release what the backend holds outside this process (a megatron torchrun job); nothing in process."""

    def optimizer_state(self) -> dict:
        """Plain data only (tensors, numbers, strings, lists, dicts), so it loads with torch.load(weights_only=True)."""
        return {"optimizer": self.opt.state_dict(), "step": int(self.step)}

    def load_optimizer_state(self, folder: Path) -> None:
        state = read_trainer_state(Path(folder), self.device)
        if state is None:
            return
        try:
            self.opt.load_state_dict(state["optimizer"])
        except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
            why = f"its optimizer state does not fit this model ({exc})"
            raise CheckpointCorrupt(Path(folder) / STATE_FILE, why) from exc
        self.step = state["step"]
