"""The torch trainer backend (the default; CPU or one GPU): the paper's loss on a Hugging Face causal LM.

Log-probs are computed exactly as the engine computes them (rlmath.logprobs at
each sample's sampling temperature); only response positions are projected to
the vocabulary. `save` writes a Hugging Face checkpoint the engine loads with
`update_weights_from_disk`, plus the optimizer state for resuming.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import structlog
import torch

from openclaw_rl.samples import TrainingSample
from trainers.base import STATE_FILE, TOKENIZER_FILES, VERSION_FILE, PolicyTrainer, StepMetrics, TrainerConfig, padded_ids, pick_device, response_rows

__all__ = ["TorchTrainer", "TrainerConfig", "StepMetrics"]

log = structlog.get_logger(__name__)


class TorchTrainer(PolicyTrainer):
    def __init__(self, checkpoint: Path, cfg: TrainerConfig = TrainerConfig()):
        from transformers import AutoModelForCausalLM

        torch.manual_seed(cfg.seed)
        self.cfg = cfg
        self.source = Path(checkpoint)
        self.device = pick_device(cfg)
        self.model = AutoModelForCausalLM.from_pretrained(self.source, dtype=torch.float32).to(self.device)
        self.model.train()
        self.ref = copy.deepcopy(self.model).eval().requires_grad_(False) if cfg.loss.kl_coef else None
        self.opt = self.make_optimizer()
        self.step = 0

    def response_logits(self, model: torch.nn.Module, group: list[TrainingSample]) -> tuple[torch.Tensor, torch.Tensor]:
        """Only response positions are projected: the prompt's logits would be [B, W, V] (gigabytes at 150k vocabulary) for nothing."""
        ids, attn, padded = padded_ids(group)
        ids, attn = ids.to(self.device), attn.to(self.device)
        hidden = model.get_decoder()(input_ids=ids, attention_mask=attn if padded else None).last_hidden_state  # [B, W, H]
        b, t, _, _ = response_rows(group, self.device)
        return model.get_output_embeddings()(hidden[b, t]), ids[b, t + 1]

    # ---- checkpoints -----------------------------------------------------------
    def save(self, folder: Path, version: str, extra: dict | None = None) -> Path:
        folder = Path(folder)
        tmp = folder.with_name(folder.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        self.model.save_pretrained(tmp, safe_serialization=True)
        copy_tokenizer(self.source, tmp)
        torch.save(self.optimizer_state(), tmp / STATE_FILE)
        (tmp / VERSION_FILE).write_text(json.dumps({"weight_version": version, "step": self.step, **(extra or {})}))
        shutil.rmtree(folder, ignore_errors=True)
        tmp.rename(folder)  # a reader never sees a half-written checkpoint
        return folder

    @classmethod
    def resume(cls, folder: Path, cfg: TrainerConfig = TrainerConfig()) -> "TorchTrainer":
        trainer = cls(folder, cfg)
        trainer.load_optimizer_state(folder)
        return trainer


def copy_tokenizer(source: Path, target: Path) -> None:
    """The tokenizer and chat template travel with every checkpoint, so each one is servable alone."""
    for name in TOKENIZER_FILES:
        if (source / name).is_file() and not (target / name).exists():
            shutil.copy2(source / name, target / name)
