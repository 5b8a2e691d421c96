"""One rank of the megatron torchrun job: the tensor-parallel shard of the policy, its share of the batch, the step.

Every rank of the job runs each command together (their collectives meet):
- tensor parallelism: megatron's parallel layers; logits are gathered over the
  tensor-parallel group, so the rlmath loss sees the whole vocabulary.
- data parallelism: each data-parallel replica trains on every dp-th sample.
  A micro-batch's loss carries its share of the *whole* batch, so the batch's
  gradient is the sum over replicas (not the mean), whatever the split.
- gradients and optimizer: on CUDA, megatron's DistributedDataParallel and its
  (distributed) optimizer. On CPU (gloo) those cannot run: megatron allocates the
  gradient buffers on the current CUDA device and its distributed optimizer
  accepts CUDA tensors only (a device limit, not a missing gloo collective). The
  CPU path does the same reductions itself (see `_apply_gradients_here`) with a
  plain AdamW, the torch backend's optimizer.
- checkpoints: megatron's distributed format (model and optimizer sharded as the
  ranks hold them) under `<version>/megatron`, and the Hugging Face export that the
  policy servers load, gathered on rank 0.

Pipeline parallelism is not supported yet: the job refuses pipeline_parallel > 1.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import structlog
import torch
import torch.distributed as dist

from contracts.training import StepMetrics
from openclaw_rl.checkpoints import read_version_info
from openclaw_rl.device import pick_device
from openclaw_rl.samples import TrainingSample
from trainers.base import LossTotals, TrainerConfig
from trainers.megatron_checkpoint import has_distributed_checkpoint
from trainers.megatron_convert import mcore_to_hf, tp_merge
from trainers.megatron_trainer import MegatronTrainer

log = structlog.get_logger(__name__)

TP_SUMMED = ("self_attention.q_layernorm.", "self_attention.k_layernorm.")
"""Replicated weights applied per attention head: each tensor-parallel rank sees only its own heads' gradient."""


class ParallelMegatronTrainer(MegatronTrainer):
    """One rank; torch.distributed and megatron's parallel_state are set up by the job before it is built."""

    def __init__(self, checkpoint: Path, cfg: TrainerConfig, distributed_optimizer: bool):
        from megatron.core import parallel_state as ps

        # Decided before the model is built: megatron's DDP path needs per-token loss scaling in the model config.
        self.on_megatron_optimizer = pick_device(cfg.device).type == "cuda"
        self.distributed_optimizer = distributed_optimizer and self.on_megatron_optimizer
        self.ddp = None
        self.tp_size = ps.get_tensor_model_parallel_world_size()
        self.dp_rank = ps.get_data_parallel_rank()
        self.dp_size = ps.get_data_parallel_world_size()
        super().__init__(checkpoint, cfg)
        if distributed_optimizer and not self.on_megatron_optimizer:
            log.info("distributed optimizer needs CUDA; this CPU job uses a plain AdamW per rank")

    @property
    def per_token_loss(self) -> bool:  # type: ignore[override]
        return self.on_megatron_optimizer

    def make_optimizer(self):
        if not self.on_megatron_optimizer:
            return super().make_optimizer()
        from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
        from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer

        self.ddp = DistributedDataParallel(
            self.model.config,
            DistributedDataParallelConfig(
                grad_reduce_in_fp32=True, use_distributed_optimizer=self.distributed_optimizer
            ),
            self.model,
        )
        config = OptimizerConfig(
            optimizer="adam",
            lr=self.cfg.lr,
            weight_decay=self.cfg.weight_decay,
            adam_beta1=self.cfg.betas[0],
            adam_beta2=self.cfg.betas[1],
            clip_grad=self.cfg.grad_clip,
            use_distributed_optimizer=self.distributed_optimizer,
            params_dtype=torch.float32,
        )
        # No config overrides: weight decay on every weight, as the torch backend's AdamW does.
        return get_megatron_optimizer(config, [self.ddp])

    # ---- the step ---------------------------------------------------------------
    def train_step(self, samples: list[TrainingSample]) -> StepMetrics:
        """Collective. Every rank gets the whole batch and trains its data-parallel replica's share of it."""
        started = time.perf_counter()
        self._zero_grads()
        totals = self.accumulate(samples[self.dp_rank :: self.dp_size], len(samples))
        grad_norm = self._apply_gradients()
        self.step += 1
        totals = self._summed_over_replicas(totals)
        took = time.perf_counter() - started
        return totals.metrics(
            self.step, len(samples), grad_norm, sum(len(s.prompt_ids) + len(s.response_ids) for s in samples) / took
        )

    def _zero_grads(self) -> None:
        if self.ddp is not None:
            self.ddp.zero_grad_buffer()
        self.opt.zero_grad(set_to_none=self.ddp is None)

    def _apply_gradients(self) -> float:
        """Reduce the gradients, clip them by the global norm, step; the norm before clipping."""
        if self.ddp is None:
            return self._apply_gradients_here()
        from megatron.core.distributed import finalize_model_grads

        finalize_model_grads([self.ddp])  # data-parallel sum, per-head norms over tensor-parallel ranks
        _, grad_norm, _ = self.opt.step()  # clips by the global norm (config.clip_grad)
        return float(grad_norm)

    def _apply_gradients_here(self) -> float:
        """What megatron's DDP, finalize_model_grads and optimizer do, for the CPU (gloo) job."""
        from megatron.core import parallel_state as ps
        from megatron.core.tensor_parallel import param_is_not_tensor_parallel_duplicate

        named = [(n, p) for n, p in self.model.named_parameters() if p.requires_grad]
        for _, p in named:
            if p.grad is None:  # a replica with no samples (batch smaller than data parallel) still joins the sum
                p.grad = torch.zeros_like(p)
        if self.tp_size > 1:
            _all_reduce_sum(
                [p.grad for n, p in named if any(k in n for k in TP_SUMMED)], ps.get_tensor_model_parallel_group()
            )
        if self.dp_size > 1:
            _all_reduce_sum([p.grad for _, p in named], ps.get_data_parallel_group())
        # Each shard counted once, each replicated weight once (on tensor-parallel rank 0).
        squares = torch.zeros((), device=self.device)
        for _, p in named:
            if param_is_not_tensor_parallel_duplicate(p):
                squares += p.grad.pow(2).sum()
        dist.all_reduce(squares, group=ps.get_model_parallel_group())
        norm = float(squares.sqrt())
        coef = self.cfg.grad_clip / (norm + 1e-6)  # as torch.nn.utils.clip_grad_norm_
        if coef < 1.0:
            for _, p in named:
                p.grad.mul_(coef)
        self.opt.step()
        return norm

    def _summed_over_replicas(self, totals: LossTotals) -> LossTotals:
        """Every field of LossTotals is a sum, so the batch's totals are the replicas' sums."""
        if self.dp_size == 1:
            return totals
        from megatron.core import parallel_state as ps

        names = [f.name for f in dataclasses.fields(LossTotals)]
        vec = torch.tensor([float(getattr(totals, n)) for n in names], dtype=torch.float64, device=self.device)
        dist.all_reduce(vec, group=ps.get_data_parallel_group())
        kinds = {n: type(getattr(totals, n)) for n in names}
        return LossTotals(**{n: kinds[n](round(v) if kinds[n] is int else v) for n, v in zip(names, vec.tolist())})

    def weights_finite(self) -> bool:
        """Collective: no NaN or Inf in any rank's weights."""
        ok = torch.tensor(
            [float(all(bool(torch.isfinite(p).all()) for p in self.model.parameters()))], device=self.device
        )
        dist.all_reduce(ok, op=dist.ReduceOp.MIN)
        return bool(ok.item())

    # ---- weights out ------------------------------------------------------------
    def hf_state_dict(self) -> dict[str, torch.Tensor]:
        """Collective. The whole model in the Hugging Face layout on global rank 0 (on CPU); {} on the others."""
        from megatron.core import parallel_state as ps

        local = {k: v.detach() for k, v in self.model.state_dict().items() if not k.endswith("_extra_state")}
        if self.tp_size == 1:
            full = local
        elif self.dp_rank != 0:
            return {}  # every replica holds the same weights: the first one's tensor-parallel group sends them
        else:
            group, src = ps.get_tensor_model_parallel_group(), ps.get_tensor_model_parallel_src_rank()
            receiving = ps.get_tensor_model_parallel_rank() == 0
            shards: list[dict[str, torch.Tensor]] = [{} for _ in range(self.tp_size)]
            for key in sorted(local):  # the same order on every rank: one gather per tensor
                parts = [torch.empty_like(local[key]) for _ in range(self.tp_size)] if receiving else None
                dist.gather(local[key].contiguous(), parts, dst=src, group=group)
                for shard, part in zip(shards, parts or []):
                    shard[key] = part.cpu()
            full = tp_merge(self.arch, shards) if receiving else {}
        if dist.get_rank() != 0:
            return {}
        return mcore_to_hf(self.arch, {k: v.cpu() for k, v in full.items()})

    # ---- the distributed checkpoint ------------------------------------------------
    def restore(self, folder: Path) -> None:
        # A one-process version's trainer_state.pt fits a job without tensor parallelism (the same weights, the
        # same order on every replica); under tensor parallelism its shapes do not: the optimizer starts afresh.
        if has_distributed_checkpoint(folder) or self.tp_size == 1:
            super().restore(folder)
            return
        self.step = int((read_version_info(Path(folder)) or {}).get("step", 0))
        log.warning("no distributed checkpoint: resuming the weights with a fresh optimizer", folder=str(folder))

    def _optimizer_sharded_state(self, model_sharded: dict, is_loading: bool) -> dict:
        if self.ddp is None:
            return super()._optimizer_sharded_state(model_sharded, is_loading)
        return self.opt.sharded_state_dict(model_sharded, is_loading=is_loading)

    def _restore_optimizer(self, loaded: dict) -> None:
        if self.ddp is None:
            super()._restore_optimizer(loaded)
        else:
            self.opt.load_state_dict(loaded)


def _all_reduce_sum(tensors: list[torch.Tensor], group) -> None:
    """One all-reduce for many tensors (flattened), results copied back in place."""
    if not tensors:
        return
    from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

    flat = _flatten_dense_tensors(tensors)
    dist.all_reduce(flat, group=group)
    for t, reduced in zip(tensors, _unflatten_dense_tensors(flat, tensors), strict=True):
        t.copy_(reduced)
