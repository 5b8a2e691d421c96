"""The torch trainer backend (the default; CPU or one GPU): the paper's loss on a Hugging Face causal LM.

Log-probs are computed exactly as the engine computes them (rlmath.logprobs at
each sample's sampling temperature); only response positions are projected to
the vocabulary. `save` writes a Hugging Face checkpoint the engine loads with
`update_weights_from_disk`, plus the optimizer state for resuming.
"""

from __future__ import annotations

import contextlib
import copy
from pathlib import Path

import structlog
import torch

from contracts.training import StepMetrics
from openclaw_rl.checkpoints import atomic_dir, write_version_info
from openclaw_rl.device import pick_device
from store.samples import TrainingSample
from trainers.base import PolicyTrainer
from trainers.chunked_logprobs import HeadInput
from trainers.lora import base_of, with_lora, write_lora_checkpoint
from trainers.micro_batches import SHARED_PREFIX_MIN, common_prefix, padded_ids, response_rows
from trainers.packing import pack, packed_hidden, use_packed_attention
from trainers.trainer_config import TrainerConfig
from trainers.trainer_state import STATE_FILE, Snapshot, copy_tokenizer, to_cpu_copy

__all__ = ["TorchTrainer", "TrainerConfig", "StepMetrics"]


def _cache_arg() -> str:
    """The decoder's keyword for past keys and values (`cache` in newer transformers, `past_key_values` before)."""
    import inspect

    from transformers.models.qwen3.modeling_qwen3 import Qwen3Model

    return "cache" if "cache" in inspect.signature(Qwen3Model.forward).parameters else "past_key_values"


CACHE_ARG = _cache_arg()


def shared_prefix(group: list[TrainingSample]) -> int:
    """How many leading prompt tokens every sample of `group` has in common (0: fewer than SHARED_PREFIX_MIN, or
    one sample). Stops a token before the shortest prompt: the last prompt position predicts the first response
    token, so it must be run per row."""
    if len(group) < 2:
        return 0
    first = group[0].prompt_ids
    n = min(len(s.prompt_ids) for s in group) - 1
    for s in group[1:]:
        n = common_prefix(first, s.prompt_ids, n)
        if n < SHARED_PREFIX_MIN:
            return 0
    return n


log = structlog.get_logger(__name__)


def _eager():
    """Compiled layers run eagerly inside (`torch.compiler.set_stance`, PyTorch 2.6+)."""
    stance = getattr(torch.compiler, "set_stance", None)
    return stance("force_eager") if stance is not None else contextlib.nullcontext()


class TorchTrainer(PolicyTrainer):
    backend = "torch"

    @property
    def shares_prefixes(self) -> bool:
        return self.cfg.share_prompt_prefix and not self.cfg.activation_checkpointing

    @property
    def packs_samples(self) -> bool:
        return self.cfg.pack_samples

    def __init__(self, checkpoint: Path, cfg: TrainerConfig = TrainerConfig()):
        from transformers import AutoModelForCausalLM

        torch.manual_seed(cfg.seed)
        self.cfg = cfg
        self.source = Path(checkpoint)
        self.device = pick_device(cfg.device)
        # A LoRA version resumes on the original base with its saved adapter; anything else loads as it is.
        base = (base_of(self.source) or self.source) if cfg.lora else self.source
        model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
        ref = None
        if cfg.uses_kl:  # the initial policy, not a copy of whatever version is resumed from
            ref = (
                (
                    AutoModelForCausalLM.from_pretrained(cfg.reference, dtype=torch.float32)
                    if cfg.reference and Path(cfg.reference).resolve() != Path(base).resolve()
                    else copy.deepcopy(model)
                )
                .eval()
                .requires_grad_(False)
            )
        if cfg.lora:
            model = with_lora(model, self.source, base, cfg.lora)
        self.model = model.to(self.device)
        use_packed_attention(self.model)
        if cfg.activation_checkpointing:
            # Non-reentrant: works with the frozen embeddings of LoRA and with inputs that need no gradient.
            kwargs = {"use_reentrant": False}
            if hasattr(self.model, "activation_checkpointing_enable"):  # transformers 5.x's name
                self.model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
            else:
                self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
            self.model.config.use_cache = False
        self.model.train()
        self.ref = ref.to(self.device) if ref is not None else None
        if self.ref is not None:
            use_packed_attention(self.ref)
        self.compiled = cfg.compile if cfg.compile is not None else self.device.type == "cuda"
        if self.compiled:
            for m in (self.model, self.ref):
                for layer in m.get_decoder().layers if m is not None else ():
                    layer.compile(dynamic=True)
        self.opt = self.make_optimizer()
        self.step = 0

    def response_logits(
        self, model: torch.nn.Module, group: list[TrainingSample]
    ) -> tuple[torch.Tensor | HeadInput, torch.Tensor]:
        """Only response positions go to the output layer, and a chunk at a time (`HeadInput`): the prompt's logits
        would be [B, W, V] (gigabytes at 150k vocabulary) for nothing, and even the response's are 0.6 MB per token
        in fp32. A prompt prefix every sample of the micro-batch shares (an agent's system prompt and tools, the
        episode so far) is run once (`shared_prefix`); otherwise the samples run packed in one row, unpadded
        (`pack_samples`)."""
        b, t, _, _ = response_rows(group, self.device)
        shared = shared_prefix(group) if self.shares_prefixes else 0
        decoder = model.get_decoder()
        with self.autocast():
            if shared:
                ids, attn, _ = padded_ids(group)
                ids, attn = ids.to(self.device), attn.to(self.device)
                with _eager():  # a KV cache in the call: compiled, it would guard on each layer's index
                    hidden = self._over_shared_prefix(model, ids, attn, shared)[b, t - shared]
                targets = ids[b, t + 1]
            elif self.cfg.pack_samples:
                row = pack(group, self.device)
                at = row.starts[b] + t
                hidden, targets = packed_hidden(decoder, row)[at], row.ids[0, at + 1]
            else:
                ids, attn, padded = padded_ids(group)
                ids, attn = ids.to(self.device), attn.to(self.device)
                hidden = decoder(
                    input_ids=ids, attention_mask=attn if padded else None, use_cache=False
                ).last_hidden_state[b, t]
                targets = ids[b, t + 1]
        head = model.get_output_embeddings()
        if isinstance(head, torch.nn.Linear) and head.bias is None:
            # Projected in fp32 (TF32 on CUDA), outside autocast: bf16 logits would put ~0.06 of error into each
            # log-prob.
            return HeadInput(hidden, head.weight, tf32=self.device.type == "cuda"), targets
        return head(hidden.float()), targets

    def _over_shared_prefix(self, model: torch.nn.Module, ids: torch.Tensor, attn: torch.Tensor, shared: int):
        """The hidden states [B, W - shared, H] after the first `shared` positions, which every row has in common:
        those run once as one row, their keys and values repeated for each row (gradients flow through them, so
        the step is the one full rows give: tested to float tolerance)."""
        decoder = model.get_decoder()
        prefix = decoder(input_ids=ids[:1, :shared], use_cache=True).past_key_values
        prefix.batch_repeat_interleave(ids.shape[0])
        positions = torch.arange(shared, ids.shape[1], device=ids.device).unsqueeze(0).expand(ids.shape[0], -1)
        kwargs = {CACHE_ARG: prefix}
        return decoder(
            input_ids=ids[:, shared:], attention_mask=attn, position_ids=positions, **kwargs
        ).last_hidden_state

    def write_weights(self, folder: Path) -> None:
        if self.cfg.lora:
            write_lora_checkpoint(self.model, folder)
        else:
            self.model.save_pretrained(folder, safe_serialization=True)

    def snapshot(self) -> Snapshot:
        """Full fine-tuning: weights and optimizer state copied to CPU memory now (what the next step waits for),
        written afterwards beside the steps. LoRA writes from the live model (small, and merged on the way)."""
        if self.cfg.lora:
            return super().snapshot()
        weights = {name: t.detach().to("cpu", copy=True) for name, t in self.model.state_dict().items()}
        state = to_cpu_copy(self.optimizer_state())
        model, source = self.model, self.source

        def write(folder: Path, version: str, extra: dict | None) -> Path:
            with atomic_dir(Path(folder)) as tmp:
                model.save_pretrained(tmp, state_dict=weights, safe_serialization=True)
                copy_tokenizer(source, tmp)
                torch.save(state, tmp / STATE_FILE)
                write_version_info(
                    tmp, {"weight_version": version, "step": state["step"], "backend": self.backend, **(extra or {})}
                )
            return Path(folder)

        return Snapshot(write=write, detached=True)
