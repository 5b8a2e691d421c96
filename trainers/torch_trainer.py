"""The torch trainer backend (CPU or one GPU): the paper's loss on a Hugging Face causal LM.

One `train_step` takes a batch of samples, splits it into micro-batches by a
token budget (gradient accumulation, so long samples fit in memory), computes
the response tokens' log-probs exactly as the engine does (rlmath.logprobs at
each sample's sampling temperature), applies rlmath.loss, clips gradients and
steps AdamW. `save` writes a Hugging Face checkpoint the engine loads with
`update_weights_from_disk`, plus the optimizer state for resuming.
"""

from __future__ import annotations

import copy
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import structlog
import torch
from pydantic import BaseModel

from openclaw_rl.samples import TrainingSample
from rlmath.logprobs import scoring_temperature, token_logprobs
from rlmath.loss import LossConfig, policy_loss

log = structlog.get_logger(__name__)

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json", "vocab.json", "merges.txt", "generation_config.json", "openclaw-rl-tiny.json")


@dataclass(frozen=True)
class TrainerConfig:
    lr: float = 1e-5
    """The paper's personal-agent learning rate (general agents: 1e-6)."""
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.98)
    grad_clip: float = 1.0
    micro_batch_tokens: int = 8192
    """Prompt + response tokens per forward/backward; a batch above it is accumulated."""
    loss: LossConfig = LossConfig()
    device: str = "auto"
    seed: int = 0


class StepMetrics(BaseModel):
    step: int
    samples: int
    tokens: int
    """Learned (masked-in) response tokens."""
    loss: float
    pg_loss: float
    kl: float
    entropy: float
    clip_fraction: float
    approx_kl: float
    mean_advantage: float
    logprob_gap: float
    """Mean |train log-prob - rollout log-prob| before the update: how far the trainer's view of the policy is from the server's."""
    grad_norm: float
    tokens_per_s: float
    tis_weight: float = 1.0
    """Mean truncated-importance weight (1 when TIS is off)."""
    tis_truncated: float = 0.0


class TorchTrainer:
    def __init__(self, checkpoint: Path, cfg: TrainerConfig = TrainerConfig()):
        from transformers import AutoModelForCausalLM

        torch.manual_seed(cfg.seed)
        self.cfg = cfg
        self.source = Path(checkpoint)
        self.device = torch.device("cuda" if cfg.device == "auto" and torch.cuda.is_available() else ("cpu" if cfg.device == "auto" else cfg.device))
        self.model = AutoModelForCausalLM.from_pretrained(self.source, dtype=torch.float32).to(self.device)
        self.model.train()
        self.ref = None
        if cfg.loss.kl_coef:
            self.ref = copy.deepcopy(self.model).eval().requires_grad_(False)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, betas=cfg.betas)
        self.step = 0

    # ---- one optimizer step ---------------------------------------------------
    def train_step(self, samples: list[TrainingSample]) -> StepMetrics:
        started = time.perf_counter()
        micro = _micro_batches(samples, self.cfg.micro_batch_tokens)
        self.opt.zero_grad(set_to_none=True)
        totals = dict(loss=0.0, pg_loss=0.0, kl=0.0, entropy=0.0, clip_fraction=0.0, approx_kl=0.0, mean_advantage=0.0, tis_weight=0.0, tis_truncated=0.0, gap=0.0)
        tokens = 0
        for group in micro:
            new_lp, old_lp, adv, mask = self._forward(group)
            ref_lp = self._ref_logprobs(group) if self.ref is not None else None
            parts = policy_loss(new_lp, old_lp, adv, mask, self.cfg.loss, ref_lp=ref_lp)
            # The loss is a mean over samples: weight each micro-batch by its share of the batch.
            (parts.loss * (len(group) / len(samples))).backward()
            n = parts.tokens
            tokens += n
            with torch.no_grad():
                gap = float(((new_lp - old_lp).abs() * mask).sum())
            totals["loss"] += float(parts.loss.detach()) * len(group) / len(samples)
            totals["pg_loss"] += parts.pg_loss * len(group) / len(samples)
            for k in ("kl", "entropy", "clip_fraction", "approx_kl", "mean_advantage", "tis_weight", "tis_truncated"):
                totals[k] += getattr(parts, k) * n
            totals["gap"] += gap
        grad_norm = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip))
        self.opt.step()
        self.step += 1
        took = time.perf_counter() - started
        t = max(tokens, 1)
        return StepMetrics(
            step=self.step,
            samples=len(samples),
            tokens=tokens,
            loss=totals["loss"],
            pg_loss=totals["pg_loss"],
            kl=totals["kl"] / t,
            entropy=totals["entropy"] / t,
            clip_fraction=totals["clip_fraction"] / t,
            approx_kl=totals["approx_kl"] / t,
            mean_advantage=totals["mean_advantage"] / t,
            logprob_gap=totals["gap"] / t,
            grad_norm=grad_norm,
            tokens_per_s=sum(len(s.prompt_ids) + len(s.response_ids) for s in samples) / took,
            tis_weight=totals["tis_weight"] / t if tokens else 1.0,
            tis_truncated=totals["tis_truncated"] / t,
        )

    def response_logprobs(self, sample: TrainingSample) -> list[float]:
        """The current weights' log-probs of one sample's response (no gradient)."""
        with torch.no_grad():
            new_lp = self._forward([sample])[0]
        return new_lp[0, : len(sample.response_ids)].tolist()

    def _forward(self, group: list[TrainingSample]):
        """Right-padded [B, R] tensors: new log-probs (with grad), rollout log-probs, advantages, loss mask.

        Only response positions are projected to the vocabulary: the prompt's
        logits would be [B, W, V] (gigabytes at 150k vocabulary) for nothing.
        """
        dev = self.device
        seqs = [s.prompt_ids + s.response_ids for s in group]
        width = max(len(x) for x in seqs)
        ids = torch.zeros((len(group), width), dtype=torch.long)
        attn = torch.zeros((len(group), width), dtype=torch.long)
        for i, x in enumerate(seqs):
            ids[i, : len(x)] = torch.tensor(x)
            attn[i, : len(x)] = 1
        ids, attn = ids.to(dev), attn.to(dev)
        padded = any(len(x) != width for x in seqs)
        hidden = self.model.get_decoder()(input_ids=ids, attention_mask=attn if padded else None).last_hidden_state  # [B, W, H]
        rows_b, rows_t, cols, temps = [], [], [], []
        for i, s in enumerate(group):
            p, r = len(s.prompt_ids), len(s.response_ids)
            # response token j is predicted by the hidden state at p + j - 1
            rows_b.append(torch.full((r,), i, dtype=torch.long))
            rows_t.append(torch.arange(p - 1, p + r - 1))
            cols.append(torch.arange(r))
            temps.append(torch.full((r,), scoring_temperature(s.meta.temperature)))
        b, t, j = torch.cat(rows_b).to(dev), torch.cat(rows_t).to(dev), torch.cat(cols).to(dev)
        logits = self.model.get_output_embeddings()(hidden[b, t])  # [N, V]
        distinct = {scoring_temperature(s.meta.temperature) for s in group}
        # One temperature for the whole micro-batch (the usual case): a scalar skips a [N, V] division at T = 1.
        temperature = distinct.pop() if len(distinct) == 1 else torch.cat(temps).to(dev)
        lp = token_logprobs(logits, ids[b, t + 1], temperature)
        resp = max(len(s.response_ids) for s in group)
        new_lp = torch.zeros((len(group), resp), device=dev).index_put((b, j), lp)
        old_lp = torch.zeros((len(group), resp), device=dev)
        adv = torch.zeros_like(old_lp)
        mask = torch.zeros_like(old_lp)
        for i, s in enumerate(group):
            r = len(s.response_ids)
            old_lp[i, :r] = torch.tensor(s.rollout_logprobs, device=dev)
            adv[i, :r] = torch.tensor(s.advantages, device=dev)
            mask[i, :r] = float(s.meta.loss_mask)
        return new_lp, old_lp, adv, mask

    def _ref_logprobs(self, group: list[TrainingSample]) -> torch.Tensor:
        live, self.model = self.model, self.ref
        try:
            with torch.no_grad():
                return self._forward(group)[0]
        finally:
            self.model = live

    # ---- checkpoints -----------------------------------------------------------
    def save(self, folder: Path, version: str, extra: dict | None = None) -> Path:
        """A Hugging Face checkpoint the engine can load, labelled with its policy version, plus optimizer state."""
        folder = Path(folder)
        tmp = folder.with_name(folder.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        self.model.save_pretrained(tmp, safe_serialization=True)
        for name in TOKENIZER_FILES:
            if (self.source / name).is_file() and not (tmp / name).exists():
                shutil.copy2(self.source / name, tmp / name)
        torch.save({"optimizer": self.opt.state_dict(), "step": self.step}, tmp / "trainer_state.pt")
        (tmp / "openclaw-rl-version.json").write_text(json.dumps({"weight_version": version, "step": self.step, **(extra or {})}))
        shutil.rmtree(folder, ignore_errors=True)
        tmp.rename(folder)  # a reader never sees a half-written checkpoint
        return folder

    @classmethod
    def resume(cls, folder: Path, cfg: TrainerConfig = TrainerConfig()) -> "TorchTrainer":
        trainer = cls(folder, cfg)
        state_file = Path(folder) / "trainer_state.pt"
        if state_file.is_file():
            state = torch.load(state_file, map_location=trainer.device, weights_only=False)
            trainer.opt.load_state_dict(state["optimizer"])
            trainer.step = int(state["step"])
        return trainer


def _micro_batches(samples: list[TrainingSample], budget: int) -> list[list[TrainingSample]]:
    groups: list[list[TrainingSample]] = []
    current: list[TrainingSample] = []
    longest = 0
    for s in samples:
        n = len(s.prompt_ids) + len(s.response_ids)
        if current and max(longest, n) * (len(current) + 1) > budget:
            groups.append(current)
            current, longest = [], 0
        current.append(s)
        longest = max(longest, n)
    if current:
        groups.append(current)
    return groups
