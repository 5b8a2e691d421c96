"""The training workflow: batches, train steps, weight publication, durable checkpoints, LoRA and megatron."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from openclaw_rl.settings.service import LOOPBACK


class LoraSettings(BaseModel):
    """Low-rank adapters instead of full fine-tuning (torch backend): a single consumer GPU can train a 4-8B policy."""

    enabled: bool = False
    """Train adapters (the base frozen) instead of every weight."""
    rank: int = Field(16, ge=1, le=1024)
    """The adapters' rank r: parameters per adapted matrix r x (in + out)."""
    alpha: int = Field(32, ge=1)
    """LoRA's scale numerator: the adapter's update is multiplied by alpha / rank."""
    dropout: float = Field(0.0, ge=0, lt=1)
    """Dropout on the adapters' input while training."""
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    )
    """Every attention and MLP projection by default."""
    lr_scale: float = Field(10.0, gt=0)
    """The adapters train at `training.lr` x this: LoRA needs about ten times full fine-tuning's rate ("LoRA
    Without Regret"). Measured with the personalization benchmark (docs/training.md): at full fine-tuning's rate the
    adapters reached about half its gain in 16 steps; at ten times it, the same gain."""


class WeightSyncSettings(BaseModel):
    """How a new policy version reaches the servers (SGLang's weight-update routes)."""

    mode: Literal["auto", "memory", "disk", "distributed"] = "auto"
    """How a version reaches the servers (never waiting for a durable checkpoint). memory: handed over from the
    trainer's memory in the served dtype (`/update_weights_from_tensor`: shared memory from a CPU trainer, CUDA IPC
    handles on one GPU), for servers on the trainer's machine (the embedded engines). distributed: broadcast over a
    process group (`/init_weights_update_group` + `/update_weights_from_distributed`), for servers elsewhere. disk:
    the weights alone, in the served dtype, written to `checkpoints/serve/v<version>` and loaded by every server
    (`/update_weights_from_disk`). auto: memory for the embedded engines, else disk. memory falls back to disk on
    any failure; distributed does unless `disk_fallback` is false."""
    backend: Literal["auto", "nccl", "gloo"] = "auto"
    """Process-group backend: auto is nccl when the trainer and servers have CUDA, gloo on CPU."""
    bucket_mb: float = Field(256.0, gt=0)
    """Tensors are broadcast in buckets of about this many MiB (one update call per bucket)."""
    wire_dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    """The dtype floating-point weights travel in. auto: bfloat16 when the trainer trains in bf16 on CUDA (the
    servers serve bf16 there and would round to it anyway: the same values, half the bytes of fp32 weights), else the
    weights' own dtype. float32 for servers that serve fp32."""
    master_addr: str = LOOPBACK
    """Address of the trainer as the servers reach it (the group's rendezvous)."""
    master_port: int | None = Field(None, ge=1, le=65535)
    """Rendezvous port; None: a free port picked when the group is set up."""
    timeout_s: float = Field(120.0, gt=0)
    """Upper bound on setting the group up and on one bucket's broadcast; past it the update falls back to disk (or,
    with `disk_fallback` false, fails and is retried)."""
    probe_timeout_s: float = Field(10.0, gt=0)
    """Before each broadcast every server is asked its version; one that does not answer within this is left out of
    the publication (it would hold the others paused until `timeout_s`) and catches up at a later one."""
    disk_fallback: bool = True
    """distributed: a broadcast that fails (or a version the trainer does not hold) goes out through disk instead,
    `checkpoints/serve/v<version>` or the durable checkpoint's folder, loaded by every server by its path. Only
    servers that see the trainer's disk can load it: set false when the engines run on hosts of their own (no shared
    filesystem); a failed broadcast then fails the publication, which is retried on a new process group."""


class MegatronSettings(BaseModel):
    """The megatron backend's parallel layout (training.backend = megatron): more than one process runs as a
    torchrun job the trainer pool starts, drives and ends; with nnodes > 1 the pool's node is node 0 and every other
    node runs `openclaw-rl megatron-node`. Ranks are laid out as megatron's: tensor parallel innermost, then data,
    then pipeline stages."""

    tensor_parallel: int = Field(1, ge=1)
    """Tensor-parallel size (megatron's --tensor-model-parallel-size)."""
    pipeline_parallel: int = Field(1, ge=1)
    """Pipeline-parallel size (--pipeline-model-parallel-size): stages of an equal number of layers (it must divide
    the model's layers); a step runs GPipe over the micro-batches (training.micro_batch_tokens)."""
    nproc_per_node: int = Field(1, ge=1)
    """Processes (GPUs) per node; world size = nproc_per_node x nnodes = TP x PP x DP."""
    nnodes: int = Field(1, ge=1)
    """Nodes of the torchrun job."""
    node_rank: int = Field(0, ge=0)
    """This node's rank in the job: 0 where the trainer pool runs, 1..nnodes-1 for each `megatron-node`."""
    master_addr: str = LOOPBACK
    """torchrun's rendezvous host (node 0)."""
    master_port: int | None = Field(None, ge=1, le=65535)
    """torchrun's rendezvous port; None: a free one (single node only)."""
    distributed_optimizer: bool = True
    """megatron's distributed optimizer (optimizer state sharded over data-parallel ranks)."""

    @model_validator(mode="after")
    def _layout_fits(self) -> "MegatronSettings":
        world = self.nproc_per_node * self.nnodes
        if world % (self.tensor_parallel * self.pipeline_parallel):
            raise ValueError(
                f"world size {world} (nproc_per_node x nnodes) is not a multiple of tensor_parallel x "
                f"pipeline_parallel = {self.tensor_parallel * self.pipeline_parallel}"
            )
        if self.nnodes > 1 and self.master_port is None:
            raise ValueError("a multi-node megatron job needs training.megatron.master_port (every node must agree)")
        return self


class StreamSettings(BaseModel):
    """How one sample stream trains, where the streams differ (the paper: personal agents without a KL term,
    general agents with 0.01)."""

    kl_coef: float | None = Field(None, ge=0)
    """k3 KL to the initial policy for this stream's samples; None: `training.kl_coef`."""
    advantage_scale: float = Field(1.0, ge=0)
    """This stream's advantages are multiplied by it: its weight beside the others in a mixed batch."""


GENERAL_AGENT_STREAMS = ("terminal", "toolcall", "swe", "gui")
GENERAL_AGENT_KL = 0.01
"""The paper's KL coefficient for general-agent streams (a plugin setting's stream takes it too)."""


class CheckpointSettings(BaseModel):
    """When durable checkpoints are written and how much disk they may take.

    A version is published from the trainer's memory; a durable checkpoint holds everything a restarted trainer
    resumes from. A sample counts as trained once a durable checkpoint that contains it exists: after a crash the
    samples trained since the last one are trained again (never lost, never counted twice)."""

    every_versions: int = Field(20, ge=1)
    """A durable checkpoint at least every this many versions..."""
    every_s: float = Field(900.0, gt=0)
    """...and once this many seconds have passed since the last one (whichever comes first). A checkpoint of a 1.7B
    model with AdamW state is ~20 GB: every 15 minutes is a small share of a disk's bandwidth, and a crash re-trains
    at most that much."""
    keep: int = Field(2, ge=1)
    """Durable checkpoints kept (the newest ones; a checkpoint saved on request is kept for good). `keep_versions`
    is read as this."""
    budget_gb: float | None = Field(None, gt=0)
    """Most disk the durable checkpoints may take together; older ones are pruned to fit the next. None: what the
    data disk has, less `disk_reserve_gb`."""
    disk_reserve_gb: float = Field(2.0, ge=0)
    """Disk left free for everything else on the data disk (the store's append-only file, Temporal's database,
    logs): a checkpoint that would eat into it is not written, and training pauses with the reason."""


class MismatchSettings(BaseModel):
    """Train-inference mismatch (docs/training.md, "On-policy by measurement"): the gap between the engine's log-prob
    of each served token and the trainer's under the same weights is measured at every step (per sample, per step,
    in the `turns` audit); these bound it."""

    max_token_gap: float | None = Field(None, gt=0)
    """A learned token whose |trainer - engine| log-prob exceeds this (nats, before the update) is handled by
    `method`. None (the default): measured and reported only, the loss unchanged."""
    method: Literal["mask", "tis"] = "mask"
    """mask: such tokens leave the loss (token-level masked importance sampling, MIS); the rest of the sample is
    learned. tis: truncated importance sampling with its cap at e^max_token_gap (the smaller of it and `tis_cap`
    when both are set): the same TIS path as `tis_cap`, not a second weight."""


class TrainingSettings(BaseModel):
    """The training workflow: batches from the sample streams, train steps, weight publication."""

    batch_size: int = Field(16, ge=1, le=4096)
    """Samples per optimizer step (the reference: one step per 16 samples)."""
    backend: Literal["torch", "megatron"] = "torch"
    """torch: Hugging Face model, CPU or one GPU. megatron: megatron-core GPTModel (the `megatron` extra), in the
    trainer pool's process for one device, or a torchrun job with tensor and data parallelism (training.megatron)."""
    source_weights: dict[str, float] = Field(default_factory=lambda: {"personal": 1.0})
    """Sample streams drained, and each one's share of a batch."""
    lr: float = Field(1e-5, gt=0)
    """AdamW learning rate (paper: 1e-5 personal, 1e-6 general agents)."""
    kl_coef: float = Field(0.0, ge=0)
    """k3 KL to the frozen initial policy, for streams `streams` does not set (0 in the reference's personal
    scripts)."""
    streams: dict[str, StreamSettings] = Field(
        default_factory=lambda: {s: StreamSettings(kl_coef=GENERAL_AGENT_KL) for s in GENERAL_AGENT_STREAMS}
    )
    """Per sample stream: its KL coefficient and advantage scale. Default: the paper's 0.01 KL for the general-agent
    settings; personal samples take `kl_coef` (0). A frozen copy of the initial policy is held only when a stream
    that is trained (`source_weights`) has a KL term."""
    entropy_coef: float = Field(0.0, ge=0)
    """Weight of the entropy bonus in the loss (0: the entropy is only a metric, estimated on a few positions)."""
    clip_low: float = Field(0.2, gt=0, lt=1)
    """PPO clipping below: a token's ratio counts down to 1 - clip_low (the paper: 0.2)."""
    clip_high: float = Field(0.28, gt=0)
    """PPO clipping above, decoupled (the paper: 0.28): a token's ratio counts up to 1 + clip_high."""
    tis_cap: float | None = Field(None, ge=1)
    """Truncated importance sampling: weight each token by min(pi_train / pi_rollout, cap) and clip around the
    trainer's own log-probs. None (the reference's default): the rollout log-probs are the old policy."""
    mismatch: MismatchSettings = Field(default_factory=MismatchSettings)
    """Train-inference mismatch: measured always; tokens over a threshold masked or their weight capped."""
    micro_batch_tokens: int = Field(8192, ge=16)
    """Tokens per forward/backward; larger batches are accumulated."""
    compile: bool | None = None
    """torch.compile each decoder layer (torch backend): the layers' elementwise work fused (1.21x a 1.7B step on a
    GPU), for a first step that waits for the compilation (15-20 s there) and an occasional recompile for a new
    shape of batch. None: on CUDA only."""
    pack_samples: bool = True
    """Run a micro-batch's samples one after another in one row, each attending only to itself (torch backend): no
    padding, so short and long answers together cost their tokens, not their count times the longest."""
    activation_checkpointing: bool = False
    """Recompute each layer's activations in the backward instead of keeping them (torch backend): long samples and
    larger models fit (a 4B model beside its engine on one 80 GB GPU), for about a third more compute per step."""
    optimizer_offload: bool = False
    """Keep AdamW's state in CPU memory between steps, on the GPU only for the update itself (torch backend): the
    trainer then holds only its weights on the GPU while the engine serves."""
    engine_memory_during_step: Literal["keep", "kv_cache", "all"] = "keep"
    """For a trainer sharing its GPU with the embedded engine (a 4B model on one 80 GB GPU): what the engine gives
    back while a train step runs (`/release_memory_occupation`) and takes again right after. kv_cache: its KV and
    prefix caches; all: its weights too (kept in CPU memory). Generation waits meanwhile (requests queue, none is
    refused), so keep is the default: serving then never waits for training."""
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    """bf16: mixed precision (bf16 autocast over fp32 weights and optimizer state). auto: bf16 on CUDA, fp32 on
    CPU."""
    max_staleness: int = Field(4, ge=0)
    """Samples generated more than this many versions ago are dropped (and counted)."""
    checkpoint: CheckpointSettings = Field(default_factory=CheckpointSettings)
    """Durable checkpoints (weights, optimizer and trainer state): a new version never waits for one."""
    steps_per_run: int = Field(50, ge=1)
    """Train steps per workflow run before it continues as new."""
    wait_s: float = Field(20.0, gt=0)
    """How long one claim waits for samples before the workflow checks its signals again."""
    auto_start: bool = True
    """`up` starts the policy's TrainingWorkflow (the loop closes by itself)."""
    heartbeat_timeout_s: float = Field(30.0, gt=0)
    """A train step, weight publication or checkpoint export that stops heartbeating this long is retried (a step
    from the last checkpoint); a call to the trainer not picked up within twice this (20 s at least) means the trainer
    is gone, and its versions since the last durable checkpoint are trained again."""
    weight_sync: WeightSyncSettings = Field(default_factory=WeightSyncSettings)
    """How each new version reaches the policy servers."""
    megatron: MegatronSettings = Field(default_factory=MegatronSettings)
    """Parallel layout of the megatron backend."""
    lora: LoraSettings = Field(default_factory=LoraSettings)
    """Each version then holds the merged weights (what the servers load) and the adapter (`adapter/`)."""
    adapters: Literal["shared", "per_user"] = "shared"
    """shared: every user's samples train one policy (the paper's personal agent is one person's). per_user: each
    user's samples train that user's own LoRA adapter on the shared, frozen base (trainers/user_adapters.py, one
    trainer scheduling users in turn); each version publishes the adapters that changed to every policy server
    (`/load_lora_adapter`) and the user's turns are served by theirs. Needs `lora.enabled` and personal samples
    only."""

    @model_validator(mode="before")
    @classmethod
    def _keep_versions_is_checkpoint_keep(cls, data: Any) -> Any:
        """Settings written before durable checkpoints had a cadence name `keep_versions`."""
        if not isinstance(data, dict) or "keep_versions" not in data:
            return data
        data = dict(data)
        keep = data.pop("keep_versions")
        checkpoint = dict(data.get("checkpoint") or {})
        if "keep" in checkpoint:
            raise ValueError("set training.checkpoint.keep or the older training.keep_versions, not both")
        data["checkpoint"] = {**checkpoint, "keep": keep}
        return data

    @model_validator(mode="after")
    def _lora_needs_torch(self) -> "TrainingSettings":
        if self.lora.enabled and self.backend != "torch":
            raise ValueError("training.lora applies to the torch backend; megatron trains every weight")
        if self.adapters == "per_user":
            if not self.lora.enabled:
                raise ValueError("training.adapters = per_user trains LoRA adapters: set training.lora.enabled")
            others = sorted(s for s in self.source_weights if s != "personal")
            if others:
                raise ValueError(
                    f"training.adapters = per_user trains users' own samples only; drop {others} from "
                    "training.source_weights"
                )
        return self
