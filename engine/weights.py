"""The served weights: a checkpoint loaded for serving (`load_model`, `LoadedModel`), what a weight update must
match (`weight_specs`, `check_manifest`), weights handed over from memory copied out (`read_handoff`), and an update
copied in place (`apply_weights`); each `LoadedModel` carries its weight version and where its weights came from
(`origin`: an update naming the version already served from the same source is not reloaded, `serves_already`).

On a CPU the linear layers are packed for oneDNN at load (engine.cpu_linears), and an in-place update drops the
packed copies so the next forward repacks them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from engine.attention import use_engine_attention
from engine.cpu_linears import forget_packed, pack_linears
from openclaw_rl.device import DeviceUnavailable, pick_device


class ModelLoadError(ValueError):
    """A checkpoint that cannot be served (missing, unreadable, incompatible)."""


class WeightMismatch(ModelLoadError):
    """Weights that do not fit the served model (a name, shape or dtype, a weight missing): nothing is applied."""


DISTRIBUTED = ("distributed",)
TENSOR = ("tensor",)
"""Origins of weights that arrived from memory (`LoadedModel.origin`); a checkpoint's is ("disk", its folder)."""


def disk_origin(folder: Path) -> tuple[str, str]:
    """The origin of weights loaded from `folder` (symlinks resolved: two paths to one folder are one source)."""
    return ("disk", str(Path(folder).resolve()))


@dataclass
class LoadedModel:
    model: torch.nn.Module
    tokenizer: object
    path: Path
    device: torch.device
    weight_version: str
    eos_ids: frozenset[int]
    vocab_size: int
    origin: tuple[str, ...] = ()
    """Where the weights came from: ("disk", resolved folder), TENSOR or DISTRIBUTED."""

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
    return LoadedModel(model, tokenizer, path, dev, weight_version, frozenset(eos), vocab, disk_origin(path))


def serves_already(lm: LoadedModel, origin: tuple[str, ...], weight_version: str) -> bool:
    """Whether `lm` is `weight_version` from `origin` already: an update asking for it again needs no reload (the
    same label from another source, an operator loading another folder under it, still loads)."""
    return lm.weight_version == weight_version and lm.origin == origin


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


def weights_bytes(lm: LoadedModel) -> int:
    """Bytes the served weights take (tied weights once): parameters and persistent buffers, wherever they are."""
    tensors = {t.data_ptr(): t for t in lm.model.state_dict().values()}
    return sum(t.numel() * t.element_size() for t in tensors.values())


def check_manifest(specs: dict[str, WeightSpec], entries: Iterable[tuple[str, Sequence[int], str]]) -> None:
    """Raise WeightMismatch unless `entries` (name, shape, dtype name) are weights of the served model (`specs`),
    each once, in its shape, floating-point where the weight is (cast to the served dtype later; another dtype must
    match exactly), and cover every weight (tied weights count once). Nothing is read."""
    seen: set[str] = set()
    for name, shape, dtype in entries:
        spec = specs.get(name)
        if spec is None:
            raise WeightMismatch(f"{name!r} is not a weight of the served model")
        if name in seen:
            raise WeightMismatch(f"{name} is sent twice")
        seen.add(name)
        if tuple(shape) != spec.shape:
            raise WeightMismatch(f"{name}: shape {list(shape)} does not match the served {list(spec.shape)}")
        given = getattr(torch, dtype, None)
        if not isinstance(given, torch.dtype) or (
            given != spec.dtype and not (given.is_floating_point and spec.dtype.is_floating_point)
        ):
            raise WeightMismatch(f"{name}: dtype {dtype} cannot stand for the served {str(spec.dtype)[6:]}")
    covered = {specs[name].storage for name in seen}
    missing = [name for name, spec in specs.items() if spec.storage not in covered]
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        raise WeightMismatch(
            f"the hand-off lacks {len(missing)} weight(s) of the served model: {', '.join(missing[:3])}{more}"
        )


def copy_weight(name: str, view: torch.Tensor, spec: WeightSpec, device: torch.device) -> torch.Tensor:
    """A copy of `view` (checked by `check_manifest`) in the served dtype on `device`; raises WeightMismatch for
    NaN or infinite values."""
    tensor = view.to(device=device, dtype=spec.dtype, copy=True)
    if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
        raise WeightMismatch(f"{name}: the tensor holds NaN or infinite values")
    return tensor


@torch.inference_mode()
def read_handoff(buckets: Sequence[object], specs: dict[str, WeightSpec], device: torch.device) -> dict:
    """The tensors of a /update_weights_from_tensor request's buckets (manifest checked by `check_manifest`), each
    copied out of its view while the bucket is open, in the served dtype on `device`. Opens only what
    `policy_client.weight_handoff.opened` opens. Raises OSError (a file missing), ValueError (a buffer too short,
    WeightMismatch) or RuntimeError (CUDA)."""
    from policy_client.weight_handoff import opened

    out: dict[str, torch.Tensor] = {}
    for bucket in buckets:
        with opened(bucket) as views:
            for name, view in views:
                out[name] = copy_weight(name, view, specs[name], device)
            if device.type == "cuda" or any(v.is_cuda for _, v in views):  # untested: no GPU where this was written
                torch.cuda.synchronize()  # every copy out of the sender's buffer done before it may be freed
    return out


@torch.inference_mode()
def apply_weights(
    lm: LoadedModel, tensors: dict[str, torch.Tensor], weight_version: str, origin: tuple[str, ...] = DISTRIBUTED
) -> LoadedModel:
    """Copy `tensors` (checked against `weight_specs`, already in the served dtype) into the served model in place
    (wherever its weights are now: a copy across devices is one too); the same model labelled `weight_version` from
    `origin`. Runs on the engine thread between forward passes."""
    state = lm.model.state_dict()
    for name, tensor in tensors.items():
        state[name].copy_(tensor)
    forget_packed(lm.model)  # repacked on the next forward, whatever way the copy took
    return replace(lm, weight_version=weight_version, origin=origin)


def move_weights(lm: LoadedModel, device: torch.device) -> int:
    """Move the served weights to `device` (the model object stays the one served: tied weights stay tied); the
    bytes moved, 0 when they are all there already. A move that failed part-way (out of memory) can be repeated."""
    if all(t.device == device for t in lm.model.state_dict().values()):
        return 0
    lm.model.to(device)
    forget_packed(lm.model)
    return weights_bytes(lm)
