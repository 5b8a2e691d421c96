"""LoRA for the torch backend (peft): adapters train, the base stays frozen; servers get merged weights or the adapter.

Each saved version holds the merged Hugging Face checkpoint (what `update_weights_from_disk` loads, so serving is
unchanged) and the adapter itself in `adapter/` (adapter_config.json + adapter_model.safetensors: what SGLang's
`--lora-paths` / `load_lora_adapter` take). Training resumes from the adapter on top of the original base, never
from the merged weights, so the optimizer state keeps matching the parameters it was built for.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import torch

ADAPTER_DIR = "adapter"
ALL_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
"""Every attention and MLP projection of a Qwen3 / Llama-style decoder layer."""


@dataclass(frozen=True)
class LoraConfig:
    rank: int = 16
    alpha: int = 32
    dropout: float = 0.0
    target_modules: tuple[str, ...] = field(default=ALL_PROJECTIONS)


def base_of(checkpoint: Path) -> Path | None:
    """The original base model a saved version's adapter was trained on, or None if `checkpoint` has no adapter."""
    config = Path(checkpoint) / ADAPTER_DIR / "adapter_config.json"
    if not config.is_file():
        return None
    return Path(json.loads(config.read_text())["base_model_name_or_path"])


def with_lora(model: torch.nn.Module, checkpoint: Path, base: Path, cfg: LoraConfig) -> torch.nn.Module:
    """`model` (loaded from `base`) with trainable adapters: those saved in `checkpoint`, or fresh ones."""
    try:
        from peft import LoraConfig as PeftLoraConfig
        from peft import PeftModel, get_peft_model
    except ImportError as exc:
        raise RuntimeError("training.lora needs peft: pip install 'openclaw-rl[lora]'") from exc

    saved = Path(checkpoint) / ADAPTER_DIR
    if saved.is_dir():
        return PeftModel.from_pretrained(model, saved, is_trainable=True)
    peft_cfg = PeftLoraConfig(
        r=cfg.rank,
        lora_alpha=cfg.alpha,
        lora_dropout=cfg.dropout,
        target_modules=list(cfg.target_modules),
        bias="none",
        task_type="CAUSAL_LM",
    )
    model.config.name_or_path = str(base)  # recorded in adapter_config.json: where a resume finds the base
    return get_peft_model(model, peft_cfg)


def merged_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The base model's weights with the adapters merged in, under the plain model's names; the live model is left
    unmerged (training goes on)."""
    model.merge_adapter()
    try:
        base = model.get_base_model()
        return {
            name.replace(".base_layer.", "."): tensor.detach().clone()
            for name, tensor in base.state_dict().items()
            if ".lora_" not in name
        }
    finally:
        model.unmerge_adapter()


def write_lora_checkpoint(model: torch.nn.Module, folder: Path) -> None:
    """Merged weights at `folder` (servable as any checkpoint) and the adapter under `folder/adapter`."""
    base = model.get_base_model()
    base.save_pretrained(folder, state_dict=merged_state_dict(model), safe_serialization=True)
    model.save_pretrained(Path(folder) / ADAPTER_DIR, safe_serialization=True)
