"""The megatron-core trainer backend (the `megatron` extra): the same loss and step as the torch backend on a
megatron GPTModel.

`MegatronTrainer` is the in-process backend for one process (tensor and pipeline
parallel size 1) on one GPU, or on CPU, which is how the tests check it against
the torch backend. Larger layouts run as a torchrun job (trainers.megatron_job),
whose ranks build the same model here, tensor-parallel sharded. The policy is
loaded from the served Hugging Face checkpoint and written back as one, so the
policy servers never see megatron's layout; a version the job saved also holds
megatron's distributed checkpoint, which `resume` reads under any layout
(trainers.megatron_checkpoint). Log-probs project only the response positions,
as the torch backend does.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import structlog
import torch

from openclaw_rl.device import pick_device
from openclaw_rl.ports import free_port
from store.samples import TrainingSample
from trainers.base import PolicyTrainer
from trainers.chunked_logprobs import tf32_matmuls
from trainers.megatron_checkpoint import (
    adamw_sharded_state,
    has_distributed_checkpoint,
    load_distributed,
    restore_adamw,
    save_distributed,
)
from trainers.megatron_convert import DenseArch, hf_to_mcore, mcore_to_hf, pp_stage, tp_split
from trainers.micro_batches import padded_ids, response_rows
from trainers.trainer_config import TrainerConfig

log = structlog.get_logger(__name__)

HF_CONFIG_FILES = ("config.json", "generation_config.json")


def ensure_model_parallel(device: torch.device, seed: int) -> None:
    """megatron-core needs its process groups even for one process; set them up once per process."""
    import torch.distributed as dist
    from megatron.core import parallel_state, tensor_parallel

    if not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    if not parallel_state.model_parallel_is_initialized():
        parallel_state.initialize_model_parallel(tensor_model_parallel_size=1, pipeline_model_parallel_size=1)
    if device.type == "cuda":
        tensor_parallel.model_parallel_cuda_manual_seed(seed)
    else:
        _cpu_shims()


def _cpu_shims() -> None:
    """megatron-core assumes CUDA in two process-wide helpers; on CPU (the tests) give it CPU ones.

    Its attention scratch buffer is allocated on the current CUDA device, and its
    dropout always forks the CUDA RNG tracker (a no-op here: dropout is 0).
    """
    import contextlib

    from megatron.core import parallel_state, tensor_parallel
    from megatron.core.utils import GlobalMemoryBuffer

    class CpuMemoryBuffer(GlobalMemoryBuffer):
        def get_tensor(self, tensor_shape, dtype, name, mem_alloc_context=None):
            return torch.empty(tensor_shape, dtype=dtype)

    parallel_state._GLOBAL_MEMORY_BUFFER = CpuMemoryBuffer()
    tensor_parallel.get_cuda_rng_tracker().fork = lambda *a, **k: contextlib.nullcontext()


def _keep_rope_on_cpu(rope) -> None:
    """megatron-core moves the rotary frequencies to CUDA unconditionally; on CPU compute them in place."""

    def get_emb(max_seq_len: int, offset: int = 0) -> torch.Tensor:
        freqs = rope.get_freqs_non_repeated(max_seq_len, offset)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb[:, None, None, :]

    rope.get_emb = get_emb


def build_gpt(arch: DenseArch, device: torch.device, per_token_loss: bool = False):
    """The GPTModel of `arch`, sharded over the tensor-parallel group already set up (parallel_state).

    `per_token_loss`: megatron's DistributedDataParallel then sums gradients over data-parallel ranks instead of
    averaging them (our micro-batch losses already carry their share of the whole batch).
    """
    import torch.nn.functional as F
    from megatron.core import parallel_state
    from megatron.core.models.gpt import GPTModel
    from megatron.core.transformer.transformer_config import TransformerConfig

    from trainers.megatron_attention import sdpa_layer_spec

    config = TransformerConfig(
        num_layers=arch.num_layers,
        hidden_size=arch.hidden_size,
        ffn_hidden_size=arch.intermediate_size,
        num_attention_heads=arch.num_heads,
        num_query_groups=arch.num_kv_heads,
        kv_channels=arch.head_dim,
        normalization="RMSNorm",
        layernorm_epsilon=arch.rms_norm_eps,
        qk_layernorm=arch.qk_norm,
        add_qkv_bias=arch.qkv_bias,
        gated_linear_unit=True,
        activation_func=F.silu,
        add_bias_linear=False,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        params_dtype=torch.float32,
        use_cpu_initialization=True,
        bias_dropout_fusion=False,
        apply_rope_fusion=False,
        masked_softmax_fusion=False,
        persist_layer_norm=False,
        gradient_accumulation_fusion=False,
        tensor_model_parallel_size=parallel_state.get_tensor_model_parallel_world_size(),
        pipeline_model_parallel_size=parallel_state.get_pipeline_model_parallel_world_size(),
        pipeline_dtype=torch.float32,  # the hidden states between stages (trainers.megatron_parallel sends fp32)
        calculate_per_token_loss=per_token_loss,
    )
    first, last = parallel_state.is_pipeline_first_stage(), parallel_state.is_pipeline_last_stage()
    with _no_cuda_copy(device):
        model = GPTModel(
            config,
            transformer_layer_spec=sdpa_layer_spec(arch.qk_norm),
            vocab_size=arch.vocab_size,
            max_sequence_length=arch.max_position_embeddings,
            position_embedding_type="rope",
            rotary_base=int(arch.rope_theta),
            share_embeddings_and_output_weights=arch.tie_word_embeddings,
            pre_process=first,
            post_process=last,
        )
    if device.type == "cpu":
        _keep_rope_on_cpu(model.rotary_pos_emb)
    return model.to(device)


@contextlib.contextmanager
def _no_cuda_copy(device: torch.device) -> Iterator[None]:
    """With pipeline stages and tied embeddings, megatron-core's GPTModel moves the last stage's copy of the embedding
    to CUDA to all-reduce it with the first stage's; on CPU that all-reduce runs where the tensor is."""
    if device.type != "cpu":
        yield
        return
    saved = torch.Tensor.cuda
    torch.Tensor.cuda = lambda self, *a, **k: self  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.Tensor.cuda = saved  # type: ignore[method-assign]


def load_hf_weights(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors weights in {folder}")
    weights: dict[str, torch.Tensor] = {}
    for f in files:
        weights.update(load_file(f))
    return weights


def load_policy_weights(model: torch.nn.Module, arch: DenseArch, source: Path, device: torch.device) -> None:
    """This tensor-parallel rank's shard of a Hugging Face checkpoint, into `model`."""
    from megatron.core import parallel_state

    full = hf_to_mcore(arch, load_hf_weights(source))
    tp = parallel_state.get_tensor_model_parallel_world_size()
    pp = parallel_state.get_pipeline_model_parallel_world_size()
    if pp > 1:
        full = pp_stage(arch, full, pp, parallel_state.get_pipeline_model_parallel_rank())
    mine = tp_split(arch, full, tp)[parallel_state.get_tensor_model_parallel_rank()] if tp > 1 else full
    state = {k: v.to(device, torch.float32) for k, v in mine.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.endswith("_extra_state")]
    if missing or unexpected:
        raise ValueError(
            f"checkpoint {source} does not fit the megatron model: missing {missing[:5]}, unexpected {unexpected[:5]}"
        )


class _GatherVocab(torch.autograd.Function):
    """Each tensor-parallel rank's vocabulary slice of the logits -> the whole vocabulary on every rank.

    megatron's own gather (gather_output / parallel_output=False) allocates on the CUDA device; this one runs on
    CPU (gloo) too. Backward: every rank computes the same loss from the same full logits, so each keeps the
    gradient of its own slice.
    """

    @staticmethod
    def forward(ctx, local: torch.Tensor, group) -> torch.Tensor:
        import torch.distributed as dist

        ctx.rank, ctx.width = dist.get_rank(group), local.shape[-1]
        parts = [torch.empty_like(local) for _ in range(dist.get_world_size(group))]
        dist.all_gather(parts, local.contiguous(), group=group)
        return torch.cat(parts, dim=-1)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad[..., ctx.rank * ctx.width : (ctx.rank + 1) * ctx.width].contiguous(), None


def whole_vocabulary(logits: torch.Tensor) -> torch.Tensor:
    """[..., V / TP] -> [..., V]: the rlmath loss and log-probs need every token's logit, as in one process."""
    from megatron.core import parallel_state

    if parallel_state.get_tensor_model_parallel_world_size() == 1:
        return logits
    return _GatherVocab.apply(logits, parallel_state.get_tensor_model_parallel_group())


class MegatronTrainer(PolicyTrainer):
    backend = "megatron"
    per_token_loss = False
    """Whether megatron's DistributedDataParallel sums gradients over data-parallel ranks (the job's CUDA path)."""

    def __init__(self, checkpoint: Path, cfg: TrainerConfig = TrainerConfig()):
        torch.manual_seed(cfg.seed)
        self.cfg = cfg
        self.source = Path(checkpoint)
        self.device = pick_device(cfg.device)
        if cfg.precision == "bf16" and self.device.type != "cuda":
            # megatron-core's linear layers carry CUDA-only autocast decorators: their backward breaks under CPU
            # autocast
            raise ValueError("training.precision=bf16 with the megatron backend needs CUDA; use fp32 (or auto) on CPU")
        ensure_model_parallel(self.device, cfg.seed)
        self.arch = DenseArch.from_hf_config(json.loads((self.source / "config.json").read_text()))
        self.model = build_gpt(self.arch, self.device, per_token_loss=self.per_token_loss)
        load_policy_weights(self.model, self.arch, self.source, self.device)
        self.model.train()
        self.ref = self._frozen_copy() if cfg.uses_kl else None
        self.opt = self.make_optimizer()
        self.step = 0
        log.info("megatron trainer ready", model=str(self.source), arch=self.arch.model_type, device=str(self.device))

    def _frozen_copy(self) -> torch.nn.Module:
        """The reference model: a second GPTModel (megatron-core's modules hold process groups, which deepcopy cannot
        copy) with the initial policy's weights (cfg.reference), else the weights it was loaded with."""
        ref = build_gpt(self.arch, self.device, per_token_loss=self.per_token_loss)
        if self.cfg.reference and Path(self.cfg.reference).resolve() != self.source.resolve():
            load_policy_weights(ref, self.arch, Path(self.cfg.reference), self.device)
        else:
            ref.load_state_dict(self.model.state_dict())
        return ref.eval().requires_grad_(False)

    def response_logits(self, model: torch.nn.Module, group: list[TrainingSample]) -> tuple[torch.Tensor, torch.Tensor]:
        return self.stage_forward(model, group, None)

    def stage_forward(self, model: torch.nn.Module, group: list[TrainingSample], received: torch.Tensor | None):
        """This pipeline stage's forward of a micro-batch: from the token ids (first stage) or the previous stage's
        hidden states `received` [W, B, H], to the hidden states for the next stage, or (last stage) the logits at
        the response positions and their targets. One stage: the whole model."""
        ids, _, _ = padded_ids(group)  # right padding: the causal mask alone keeps real tokens off the pads
        ids = ids.to(self.device)
        batch, width = ids.shape
        positions = torch.arange(width, device=self.device).unsqueeze(0).expand(batch, width)
        causal = torch.triu(
            torch.ones((1, 1, width, width), dtype=torch.bool, device=self.device), diagonal=1
        )  # True = masked
        b, t, _, _ = response_rows(group, self.device)
        with self.autocast():
            if received is None:
                embedded = model.embedding(input_ids=ids, position_ids=positions)  # [W, B, H]
            else:
                model.decoder.set_input_tensor(received)
                embedded = None
            hidden = model.decoder(
                hidden_states=embedded, attention_mask=causal, rotary_pos_emb=model.rotary_pos_emb(width)
            )  # [W, B, H]
        if not model.post_process:
            return hidden
        # The projection in fp32 (outside autocast): bf16 logits would put ~0.06 of error into each log-prob.
        weight = model.shared_embedding_or_output_weight() if self.arch.tie_word_embeddings else None
        with tf32_matmuls(self.device.type == "cuda"):  # fp32 logits; TF32 tensor cores on CUDA (~1e-3 per log-prob)
            logits, _ = model.output_layer(hidden[t, b].unsqueeze(1).float(), weight=weight)  # [N, 1, V / TP]
        return whole_vocabulary(logits[:, 0]), ids[b, t + 1]

    def hf_state_dict(self) -> dict[str, torch.Tensor]:
        mc = {k: v.detach().to("cpu") for k, v in self.model.state_dict().items() if not k.endswith("_extra_state")}
        return mcore_to_hf(self.arch, mc)

    def write_weights(self, folder: Path) -> None:
        """Collective in a job (the weights are gathered); global rank 0 writes."""
        import torch.distributed as dist
        from safetensors.torch import save_file

        state = self.hf_state_dict()
        if dist.get_rank() != 0:
            return
        save_file(state, Path(folder) / "model.safetensors", metadata={"format": "pt"})
        for name in HF_CONFIG_FILES:
            if (self.source / name).is_file():
                shutil.copy2(self.source / name, Path(folder) / name)

    # ---- versions: the Hugging Face export and megatron's distributed checkpoint --------
    # In one process `save` is the base one (Hugging Face weights + trainer_state.pt): megatron's checkpoint writer
    # starts a multiprocessing manager and forks writers, not something to do inside the trainer pool's worker.
    # The torchrun job saves the distributed format (save_into); `restore` reads either.
    def save_into(self, folder: Path, distributed: bool = True) -> None:
        """Collective: the export into an existing folder, and with `distributed` the checkpoint to resume from."""
        self.write_weights(folder)
        if distributed:
            save_distributed(folder, self._checkpoint_state(is_loading=False))

    @classmethod
    def resume(cls, folder: Path, cfg: TrainerConfig = TrainerConfig()):
        """The trainer at a saved version: weights, optimizer state and step, whatever layout saved them (a
        distributed checkpoint stores global shapes)."""
        trainer = cls(folder, cfg)
        trainer.restore(Path(folder))
        return trainer

    def restore(self, folder: Path) -> None:
        if not has_distributed_checkpoint(folder):
            self.load_optimizer_state(folder)  # a version saved in one process: trainer_state.pt
            return
        loaded = load_distributed(folder, self._checkpoint_state(is_loading=True))
        self.model.load_state_dict(loaded["model"])
        self.step = int(loaded["step"])
        self._restore_optimizer(loaded["optimizer"])

    def _checkpoint_state(self, is_loading: bool) -> dict:
        model = self.model.sharded_state_dict()
        return {"model": model, "optimizer": self._optimizer_sharded_state(model, is_loading), "step": self.step}

    def _optimizer_sharded_state(self, model_sharded: dict, is_loading: bool) -> dict:
        return adamw_sharded_state(self.opt, model_sharded, is_loading)

    def _restore_optimizer(self, loaded: dict) -> None:
        restore_adamw(self.opt, loaded, self.step)
