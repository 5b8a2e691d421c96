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

- pipeline parallelism: each stage holds its run of layers (the first the
  embedding, the last the output layer and, with tied embeddings, a copy of the
  embedding kept in step by an all-reduce of its gradient). A step runs GPipe:
  every micro-batch forward through the stages (hidden states sent point to point),
  then every backward in the same order; sends never block, so no stage waits on
  one that waits on it. The loss and metrics are computed on the last stage and
  broadcast over the pipeline. megatron-core's own pipeline schedules allocate
  their buffers on CUDA, hence this schedule, which runs on gloo too. With a
  frozen reference model (kl_coef > 0) each stage holds its copy of its layers and
  the reference's log-probs take their own forward pass through the stages, just
  before the policy's forward of the same micro-batch.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from pathlib import Path

import structlog
import torch
import torch.distributed as dist

from contracts.training import StepMetrics
from openclaw_rl.checkpoints import read_version_info
from openclaw_rl.device import pick_device
from rlmath.loss import policy_loss
from store.samples import TrainingSample
from trainers.loss_totals import LossTotals
from trainers.megatron_checkpoint import has_distributed_checkpoint
from trainers.megatron_convert import mcore_to_hf, pp_unstage, tp_merge
from trainers.megatron_trainer import MegatronTrainer
from trainers.micro_batches import micro_batches, padded_ids
from trainers.trainer_config import TrainerConfig

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
        self.pp_size = ps.get_pipeline_model_parallel_world_size()
        self.first_stage, self.last_stage = ps.is_pipeline_first_stage(), ps.is_pipeline_last_stage()
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
    def train_step(self, samples: list[TrainingSample], staleness: Mapping[str, int] | None = None) -> StepMetrics:
        """Collective. Every rank gets the whole batch and trains its data-parallel replica's share of it."""
        started = time.perf_counter()
        self._zero_grads()
        totals = self.accumulate(samples[self.dp_rank :: self.dp_size], len(samples), staleness)
        grad_norm = self._apply_gradients()
        self.step += 1
        totals = self._summed_over_replicas(totals)
        took = time.perf_counter() - started
        return totals.metrics(
            self.step, len(samples), grad_norm, sum(len(s.prompt_ids) + len(s.response_ids) for s in samples) / took
        )

    # ---- pipeline parallelism --------------------------------------------------------
    def accumulate(
        self, samples: list[TrainingSample], batch_size: int, staleness: Mapping[str, int] | None = None
    ) -> LossTotals:
        if self.pp_size == 1:
            return super().accumulate(samples, batch_size, staleness)
        from megatron.core import parallel_state as ps

        totals = LossTotals()
        pending: list[tuple[torch.Tensor, torch.Tensor | None]] = []  # (what to backprop from, what was received)
        sends = []
        for group in micro_batches(samples, self.cfg.micro_batch_tokens):  # forward: every micro-batch
            # every stage takes the same passes in the same order, so point-to-point messages pair up in order
            ref_lp = self.logprobs(self.ref, group) if self.ref is not None else None
            received = None if self.first_stage else self._receive(self._hidden_shape(group), "prev")
            out = self.stage_forward(self.model, group, received)
            if self.last_stage:
                new_lp, entropy, estimate = self._scored(group, *out)
                old_lp, adv, mask = self._targets(group, new_lp.shape[1])
                parts = policy_loss(
                    new_lp,
                    old_lp,
                    adv,
                    mask,
                    self.cfg.loss,
                    ref_lp=ref_lp,
                    entropy=entropy,
                    kl_coef=self.kl_coefs(group),
                )
                share = len(group) / batch_size
                gap = totals.add_mismatch(group, new_lp, old_lp, mask, self.cfg.loss.max_token_gap, staleness)
                totals.add(parts, share, gap, estimate)
                pending.append((parts.loss * share, received))
            else:
                out = out.float()  # the wire is fp32 whatever autocast made of the hidden states
                sends.append(dist.isend(out.detach().contiguous(), ps.get_pipeline_model_parallel_next_rank()))
                pending.append((out, received))
        for out, received in pending:  # backward: in the same order
            if self.last_stage:
                out.backward()
            else:
                torch.autograd.backward(out, self._receive(tuple(out.shape), "next"))
            if received is not None:
                sends.append(dist.isend(received.grad.contiguous(), ps.get_pipeline_model_parallel_prev_rank()))
        for handle in sends:
            handle.wait()
        return self._totals_from_last_stage(totals)

    def logprobs(self, model: torch.nn.Module, group: list[TrainingSample]) -> torch.Tensor:
        if self.pp_size == 1:
            return super().logprobs(model, group)
        from megatron.core import parallel_state as ps

        with torch.no_grad():
            received = None if self.first_stage else self._receive(self._hidden_shape(group), "prev")
            out = self.stage_forward(model, group, received)
            if self.last_stage:
                lp = self._scored(group, *out)[0].contiguous()
            else:
                dist.send(out.float().contiguous(), ps.get_pipeline_model_parallel_next_rank())
                lp = torch.empty((len(group), max(len(s.response_ids) for s in group)), device=self.device)
        last, pipeline = ps.get_pipeline_model_parallel_last_rank(), ps.get_pipeline_model_parallel_group()
        dist.broadcast(lp, src=last, group=pipeline)
        return lp

    def _hidden_shape(self, group: list[TrainingSample]) -> tuple[int, int, int]:
        batch, width = padded_ids(group)[0].shape
        return (width, batch, self.arch.hidden_size)  # megatron's [sequence, batch, hidden]

    def _receive(self, shape: tuple[int, ...], side: str) -> torch.Tensor:
        """Hidden states from the previous stage (a leaf that collects their gradient), or that gradient from the
        next stage."""
        from megatron.core import parallel_state as ps

        prev = side == "prev"
        src = ps.get_pipeline_model_parallel_prev_rank() if prev else ps.get_pipeline_model_parallel_next_rank()
        t = torch.empty(shape, dtype=torch.float32, device=self.device)
        dist.recv(t, src)
        return t.requires_grad_() if prev else t

    def _totals_from_last_stage(self, totals: LossTotals) -> LossTotals:
        from megatron.core import parallel_state as ps

        vec = _as_vector(totals, self.device)
        last, pipeline = ps.get_pipeline_model_parallel_last_rank(), ps.get_pipeline_model_parallel_group()
        dist.broadcast(vec, src=last, group=pipeline)
        return _from_vector(vec)

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
        if self.pp_size > 1 and self.arch.tie_word_embeddings and ps.is_rank_in_embedding_group():
            # the first stage's embedding and the last stage's copy as output layer: one weight, one gradient
            dist.all_reduce(self.model.shared_embedding_or_output_weight().grad, group=ps.get_embedding_group())
        # Each shard counted once, each replicated weight once (on tensor-parallel rank 0), the tied copy not at all.
        squares = torch.zeros((), device=self.device)
        for _, p in named:
            if param_is_not_tensor_parallel_duplicate(p) and not getattr(p, "shared", False):
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

        vec = _as_vector(totals, self.device)
        dist.all_reduce(vec, group=ps.get_data_parallel_group())
        return _from_vector(vec)

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
        if self.dp_rank != 0:
            return {}  # every replica holds the same weights: the first one's ranks send them
        if self.tp_size == 1:
            full = local
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
        if self.pp_size > 1 and ps.get_tensor_model_parallel_rank() == 0:
            full = self._whole_pipeline(full)
        if dist.get_rank() != 0:
            return {}
        return mcore_to_hf(self.arch, {k: v.cpu() for k, v in full.items()})

    def _whole_pipeline(self, mine: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Collective over the pipeline group: every stage's part to the first stage, which returns the whole model
        (the others {})."""
        from megatron.core import parallel_state as ps

        pipeline = ps.get_pipeline_model_parallel_group()
        ranks = dist.get_process_group_ranks(pipeline)
        stage = ps.get_pipeline_model_parallel_rank()
        on_gpu = self.device if self.device.type == "cuda" else None
        parts: list[dict[str, torch.Tensor]] = [mine]
        for sender in range(1, self.pp_size):  # one stage at a time: its names and shapes, then its tensors
            box = [[(k, tuple(v.shape), v.dtype) for k, v in sorted(mine.items())] if stage == sender else None]
            dist.broadcast_object_list(box, src=ranks[sender], group=pipeline, device=on_gpu)
            if stage == sender:
                for key, _, _ in box[0]:
                    dist.send(mine[key].to(self.device).contiguous(), ranks[0])
            elif stage == 0:
                part = {}
                for key, shape, dtype in box[0]:
                    t = torch.empty(shape, dtype=dtype, device=self.device)
                    dist.recv(t, ranks[sender])
                    part[key] = t.cpu()
                parts.append(part)
        return pp_unstage(self.arch, parts) if stage == 0 else {}

    # ---- the distributed checkpoint ------------------------------------------------
    def restore(self, folder: Path) -> None:
        # A one-process version's trainer_state.pt fits a job without tensor or pipeline parallelism (the same
        # weights, the same order on every replica); under either its weights do not: the optimizer starts afresh.
        if has_distributed_checkpoint(folder) or (self.tp_size == 1 and self.pp_size == 1):
            super().restore(folder)
            return
        self.step = int((read_version_info(Path(folder)) or {}).get("step", 0))
        log.warning("no distributed checkpoint: resuming the weights with a fresh optimizer", folder=str(folder))

    def _optimizer_sharded_state(self, model_sharded: dict, is_loading: bool) -> dict:
        if self.ddp is None:
            return super()._optimizer_sharded_state(model_sharded, is_loading)
        # fully_reshardable: the canonical per-weight state, so a checkpoint resumes under another TP / PP / DP layout
        # (the default, fully_sharded_model_space, writes flattened ranges that torch_dist no longer saves)
        metadata = {"distrib_optim_sharding_type": "fully_reshardable"}
        if is_loading:
            _give_fresh_adam_state(self.opt)
        return self.opt.sharded_state_dict(model_sharded, is_loading=is_loading, metadata=metadata)

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


_TOTALS = [(f.name, f.type) for f in dataclasses.fields(LossTotals) if f.type in (int, float, "int", "float")]
"""The summed fields (the per-sample mismatch figures stay with the replica that measured them)."""


def _as_vector(totals: LossTotals, device: torch.device) -> torch.Tensor:
    """LossTotals as one float64 vector, for a collective."""
    return torch.tensor([float(getattr(totals, n)) for n, _ in _TOTALS], dtype=torch.float64, device=device)


def _from_vector(vec: torch.Tensor) -> LossTotals:
    return LossTotals(**{n: round(v) if kind in (int, "int") else v for (n, kind), v in zip(_TOTALS, vec.tolist())})


def _give_fresh_adam_state(opt) -> None:
    """A resumed job's optimizer has taken no step yet. Without Transformer Engine or Apex megatron's optimizer wraps a
    torch Adam, whose per-weight state (moments, step) appears only with the first step, and megatron's state_dict
    then fails (it asserts one step count over all weights): give every weight a zero state to load into."""
    inner = getattr(opt, "optimizer", None)
    if not isinstance(inner, torch.optim.Optimizer):
        return
    for group in inner.param_groups:
        for p in group["params"]:
            state = inner.state[p]
            if "exp_avg" not in state:
                state["exp_avg"] = torch.zeros_like(p.data)
                state["exp_avg_sq"] = torch.zeros_like(p.data)
            state.setdefault("step", torch.tensor(0.0))
