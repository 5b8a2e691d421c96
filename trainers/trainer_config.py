"""A trainer backend's configuration (built from the training settings by activities.held_trainer)."""

from __future__ import annotations

from dataclasses import dataclass, field

from rlmath.loss import LossConfig
from trainers.lora import LoraConfig


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
    lora: LoraConfig | None = None
    """Train low-rank adapters instead of every weight (torch backend)."""
    precision: str = "auto"
    """fp32, or bf16: the forward and backward under bf16 autocast, the weights, gradients and optimizer state
    staying fp32 (mixed precision; bf16 needs no loss scaling). auto: bf16 on CUDA, fp32 on CPU."""
    activation_checkpointing: bool = False
    """Recompute each layer's activations in the backward instead of keeping them (torch backend): far less memory
    for long samples, about a third more compute."""
    share_prompt_prefix: bool = True
    """Run a prompt prefix that every sample of a micro-batch shares (an agent's system prompt and tools, the episode
    so far) once instead of once per sample (torch backend, without activation checkpointing): the same loss and
    gradients, a fraction of the compute for agent steps."""
    compile: bool | None = None
    """torch.compile each decoder layer (torch backend; dynamic shapes, attention left out of the graph): the
    layers' elementwise work (norms, rotary, activations, casts) fused into few kernels; measured 1.21x the step's
    tokens/s on a 1.7B model (docs/benchmarks.md). The first step pays for the compilation (15-20 s there), a new
    shape of batch now and then for a recompile. None: on CUDA only (on a CPU the compilation costs more than it
    saves for the short runs tests and trials make)."""
    pack_samples: bool = True
    """Run a micro-batch's samples one after another in one row, each attending only to itself (torch backend):
    no padding, so a batch of short and long answers costs its tokens, not its count times the longest."""
    kl_by_source: dict[str, float] = field(default_factory=dict)
    """The KL coefficient of each sample stream (the paper: 0 for personal agents, 0.01 for general agents); a
    stream not named takes `loss.kl_coef`."""
    advantage_scale_by_source: dict[str, float] = field(default_factory=dict)
    """Each stream's advantages are multiplied by this (1 for a stream not named): how much it weighs in a mixed
    batch."""
    reference: str | None = None
    """The frozen KL reference: the initial policy's checkpoint folder (kept whatever checkpoint the trainer resumes
    from); None: the checkpoint the trainer is loaded from."""
    optimizer_offload: bool = False
    """Keep AdamW's state in CPU memory between steps (moved to the device for the step itself): the trainer then
    holds only its weights on the GPU while the engine serves beside it."""

    def __post_init__(self) -> None:
        if self.precision not in ("auto", "fp32", "bf16"):
            raise ValueError(f"training precision {self.precision!r}: expected auto, fp32 or bf16")

    def kl_for(self, source: str) -> float:
        return self.kl_by_source.get(source, self.loss.kl_coef)

    @property
    def uses_kl(self) -> bool:
        """A frozen reference is needed: some stream has a KL term."""
        return bool(self.loss.kl_coef) or any(v for v in self.kl_by_source.values())
