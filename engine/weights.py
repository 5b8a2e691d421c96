"""The served weights: a checkpoint loaded for serving (`load_model`, `LoadedModel`), what a weight update must
match (`weight_specs`), and an update copied in place (`apply_weights`); each `LoadedModel` carries its weight version.

On a CPU the linear layers are packed for oneDNN at load (engine.cpu_linears), and an in-place update drops the
packed copies so the next forward repacks them."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import torch

from engine.attention import use_engine_attention
from engine.cpu_linears import forget_packed, pack_linears
from openclaw_rl.device import DeviceUnavailable, pick_device


class ModelLoadError(ValueError):
    """A checkpoint that cannot be served (missing, unreadable, incompatible)."""


@dataclass
class LoadedModel:
    model: torch.nn.Module
    tokenizer: object
    path: Path
    device: torch.device
    weight_version: str
    eos_ids: frozenset[int]
    vocab_size: int

    def signature(self) -> tuple:
        """What a weight update must keep: the vocabulary and the architecture."""
        cfg = self.model.config
        return (cfg.model_type, self.vocab_size, cfg.hidden_size, cfg.num_hidden_layers)


def load_model(
    path: Path,
    device: str = "auto",
    dtype: str = "auto",
    weight_version: str = "0",
    tokenizer: object | None = None,
    cpu_packed_linears: bool = True,
) -> LoadedModel:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(path).expanduser().absolute()
    if not (path / "config.json").is_file():
        raise ModelLoadError(f"no Hugging Face checkpoint at {path} (config.json missing)")
    try:
        dev = pick_device(device)
    except DeviceUnavailable as exc:
        raise ModelLoadError(f"engine.device: {exc}") from exc
    torch_dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}.get(dtype)
    if torch_dtype is None:
        torch_dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    try:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype)
        if tokenizer is None:
            tokenizer = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise ModelLoadError(f"cannot load checkpoint at {path}: {exc}") from exc
    model.to(dev).eval()
    if cpu_packed_linears and dev.type == "cpu":
        pack_linears(model)
    if model.config._attn_implementation == "sdpa":
        use_engine_attention(model)  # SDPA, plus the shared-prefix decode and the split prefill chunk
    eos: set[int] = set()
    for source in (
        model.generation_config.eos_token_id,
        model.config.eos_token_id,
        getattr(tokenizer, "eos_token_id", None),
    ):
        if isinstance(source, int):
            eos.add(source)
        elif isinstance(source, (list, tuple)):
            eos.update(int(x) for x in source)
    vocab = model.get_output_embeddings().weight.shape[0]
    return LoadedModel(model, tokenizer, path, dev, weight_version, frozenset(eos), vocab)


@dataclass(frozen=True)
class WeightSpec:
    """What a tensor sent for a parameter must be: its shape; the served dtype; its storage (tied weights share one)."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    storage: int


def weight_specs(lm: LoadedModel) -> dict[str, WeightSpec]:
    """Every weight of the served model under its Hugging Face name (tied weights appear under each of their names)."""
    return {
        name: WeightSpec(tuple(t.shape), t.dtype, t.untyped_storage().data_ptr())
        for name, t in lm.model.state_dict().items()
    }


@torch.inference_mode()
def apply_weights(lm: LoadedModel, tensors: dict[str, torch.Tensor], weight_version: str) -> LoadedModel:
    """Copy `tensors` (checked against `weight_specs`, already in the served dtype and device) into the served model
    in place; the same model labelled `weight_version`. Runs on the engine thread between forward passes."""
    state = lm.model.state_dict()
    for name, tensor in tensors.items():
        state[name].copy_(tensor)
    forget_packed(lm.model)  # repacked on the next forward, whatever way the copy took
    return replace(lm, weight_version=weight_version)
