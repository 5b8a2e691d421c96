"""What every trainer backend shares: the step loop, micro-batching by token budget, the loss and its metrics.

A backend supplies the model (`self.model`, trainable; `self.ref`, frozen or
None), the optimizer, the response log-probs of a micro-batch under a given
model, and Hugging Face checkpoints in and out. The loss (rlmath.loss), the
sample-weighted accumulation and the metrics are the same for all of them, so
switching backends never changes what is optimised.
"""

from __future__ import annotations

import contextlib
import pickle
import shutil
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from contracts.training import StepMetrics
from openclaw_rl.checkpoints import atomic_dir, write_version_info
from rlmath.logprobs import scoring_temperature, token_entropy, token_logprobs
from rlmath.loss import LossConfig, LossParts, policy_loss
from store.samples import TrainingSample
from trainers.chunked_logprobs import HeadInput, linear_logprobs
from trainers.lora import LoraConfig

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "generation_config.json",
    "openclaw-rl-tiny.json",
)
STATE_FILE = "trainer_state.pt"
ENTROPY_SAMPLE = 16
SHARED_PREFIX_MIN = 64
"""Shared prompt tokens below which a micro-batch's samples are not run over one shared prefix (nothing worth
sharing)."""
"""Positions per micro-batch the entropy metric is estimated from when the loss has no entropy term."""


class CheckpointCorrupt(ValueError):
    """A checkpoint's trainer state cannot be loaded: not plain data (refused), unreadable, or not this model's."""

    def __init__(self, path: Path, why: str):
        super().__init__(path, why)  # both in args, so the error pickles and copies like any other
        self.path = Path(path)
        self.why = why

    def __str__(self) -> str:
        return (
            f"the trainer state {self.path} cannot be loaded: {self.why}. Restore it from a backup, or delete it "
            "to resume these weights with a fresh optimizer state"
        )


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


@dataclass
class LossTotals:
    """A step's loss parts summed over its micro-batches: sample-weighted for the loss, token-weighted for the rest."""

    loss: float = 0.0
    pg_loss: float = 0.0
    kl: float = 0.0
    clip_fraction: float = 0.0
    approx_kl: float = 0.0
    mean_advantage: float = 0.0
    tis_weight: float = 0.0
    tis_truncated: float = 0.0
    gap: float = 0.0
    tokens: int = 0
    entropy_sum: float = 0.0
    entropy_n: int = 0

    def add(self, parts: LossParts, share: float, gap: float, entropy: tuple[float, int]) -> None:
        """`share`: the micro-batch's share of the batch's samples; `entropy`: (sum, count) of an estimate, or
        (0, 0)."""
        n = parts.tokens
        self.loss += float(parts.loss.detach()) * share
        self.pg_loss += parts.pg_loss * share
        self.kl += parts.kl * n
        self.clip_fraction += parts.clip_fraction * n
        self.approx_kl += parts.approx_kl * n
        self.mean_advantage += parts.mean_advantage * n
        self.tis_weight += parts.tis_weight * n
        self.tis_truncated += parts.tis_truncated * n
        self.gap += gap
        self.tokens += n
        # Without an entropy term parts.entropy is 0 and the estimate stands in for it.
        self.entropy_sum += parts.entropy * n + entropy[0]
        self.entropy_n += entropy[1]

    def metrics(self, step: int, samples: int, grad_norm: float, tokens_per_s: float) -> StepMetrics:
        t = max(self.tokens, 1)
        return StepMetrics(
            step=step,
            samples=samples,
            tokens=self.tokens,
            loss=self.loss,
            pg_loss=self.pg_loss,
            kl=self.kl / t,
            entropy=self.entropy_sum / (self.entropy_n or t),
            clip_fraction=self.clip_fraction / t,
            approx_kl=self.approx_kl / t,
            mean_advantage=self.mean_advantage / t,
            logprob_gap=self.gap / t,
            grad_norm=grad_norm,
            tokens_per_s=tokens_per_s,
            tis_weight=self.tis_weight / t if self.tokens else 1.0,
            tis_truncated=self.tis_truncated / t,
        )


class PolicyTrainer(ABC):
    """A backend's __init__(checkpoint, cfg) loads the policy from a Hugging Face checkpoint folder."""

    cfg: TrainerConfig
    device: torch.device
    model: torch.nn.Module
    ref: torch.nn.Module | None
    opt: torch.optim.Optimizer
    step: int

    def make_optimizer(self) -> torch.optim.Optimizer:
        """AdamW, fused (one kernel over all parameters: measured 8x the default per-parameter loop on CPU) where
        PyTorch has it for these parameters' device."""
        trainable = [p for p in self.model.parameters() if p.requires_grad]  # with LoRA: the adapters only
        kwargs = {"lr": self.cfg.lr, "weight_decay": self.cfg.weight_decay, "betas": self.cfg.betas}
        try:
            return torch.optim.AdamW(trainable, fused=True, **kwargs)
        except (RuntimeError, TypeError, ValueError):  # a device or dtype without the fused kernel
            return torch.optim.AdamW(trainable, **kwargs)

    @property
    def trains_in_bf16(self) -> bool:
        """cfg.precision resolved: auto is bf16 on CUDA."""
        return self.cfg.precision == "bf16" or (self.cfg.precision == "auto" and self.device.type == "cuda")

    @property
    def bf16_on_cuda(self) -> bool:
        """Trains in bf16 on a GPU: its servers then serve bf16 (what weight sync's wire dtype follows)."""
        return self.trains_in_bf16 and self.device.type == "cuda"

    def autocast(self) -> contextlib.AbstractContextManager:
        """The forward's precision (cfg.precision): the layers; the output projection stays fp32 (backends leave it
        out of this context), so log-probs come from fp32 logits."""
        if not self.trains_in_bf16:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=torch.bfloat16)

    @property
    def shares_prefixes(self) -> bool:
        """Whether this backend runs a micro-batch's shared prompt prefix once (`TrainerConfig.share_prompt_prefix`);
        micro-batches are then grouped by prompt so that sharers meet."""
        return False

    @property
    def packs_samples(self) -> bool:
        """Whether this backend runs a micro-batch's samples packed in one row without padding
        (`TrainerConfig.pack_samples`)."""
        return False

    # ---- what a backend provides ---------------------------------------------------
    @abstractmethod
    def response_logits(
        self, model: torch.nn.Module, group: list[TrainingSample]
    ) -> tuple[torch.Tensor | HeadInput, torch.Tensor]:
        """Logits [N, V] at the positions that predict the batch's response tokens (in `response_rows` order), or
        what the output layer takes to make them (`HeadInput`), and those tokens [N]."""

    def logprobs(self, model: torch.nn.Module, group: list[TrainingSample]) -> torch.Tensor:
        """[B, R] right-padded log-probs of each sample's response tokens under `model`, at its sampling temperature."""
        return self._scored(group, *self.response_logits(model, group))[0]

    def _scored(
        self, group: list[TrainingSample], logits: torch.Tensor | HeadInput, targets: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None, tuple[float, int]]:
        """Log-probs [B, R]; the entropy [B, R] when the loss uses it (with its gradient); and (sum, count) of an
        entropy estimate. `logits`: [N, V], or the head's input (`HeadInput`), projected a chunk at a time.

        Without an entropy term the entropy is only a metric, and a full pass over [N, V] would cost as
        much as the loss itself (measured: +45% per step at 150k vocabulary on CPU). It is then estimated
        from at most ENTROPY_SAMPLE learned positions, evenly spread, without a gradient.
        """
        b, _, j, temperature = response_rows(group, self.device)
        shape = (len(group), max(len(s.response_ids) for s in group))
        with_entropy = bool(self.cfg.loss.entropy_coef)
        if isinstance(logits, HeadInput):
            lp, h = linear_logprobs(logits, targets, temperature, with_entropy=with_entropy)
        else:
            lp = token_logprobs(logits, targets, temperature)
            h = token_entropy(logits, temperature) if with_entropy else None
        out = torch.zeros(shape, device=self.device, dtype=lp.dtype).index_put((b, j), lp)
        if h is not None:
            ent = torch.zeros(shape, device=self.device, dtype=h.dtype).index_put((b, j), h)
            return out, ent, (0.0, 0)
        learned = torch.tensor([s.loss_mask > 0 for s in group], device=self.device)[b].nonzero().squeeze(-1)
        if learned.numel() == 0:
            return out, None, (0.0, 0)
        pick = learned[torch.linspace(0, learned.numel() - 1, min(ENTROPY_SAMPLE, learned.numel())).long()]
        with torch.no_grad():
            temp = temperature[pick] if isinstance(temperature, torch.Tensor) else temperature
            picked = logits.logits(pick) if isinstance(logits, HeadInput) else logits.detach()[pick]
            h = token_entropy(picked.detach(), temp)
        return out, None, (float(h.sum()), int(h.numel()))

    @abstractmethod
    def write_weights(self, folder: Path) -> None:
        """Write the current weights into `folder` as a Hugging Face checkpoint (weights and config.json)."""

    def snapshot(self) -> Snapshot:
        """The state a durable checkpoint holds, as of now. The default writes from the live trainer (the caller
        keeps steps out until it is written); a backend that can copies its state aside instead, so steps go on
        while the copy is written."""
        return Snapshot(write=lambda folder, version, extra: self.save(folder, version, extra), detached=False)

    backend: str = "?"
    source: Path

    def save(self, folder: Path, version: str, extra: dict | None = None) -> Path:
        """A Hugging Face checkpoint the policy servers can load, labelled with its version, plus optimizer state."""
        with atomic_dir(Path(folder)) as tmp:
            self.write_weights(tmp)
            copy_tokenizer(self.source, tmp)
            torch.save(self.optimizer_state(), tmp / STATE_FILE)
            write_version_info(
                tmp, {"weight_version": version, "step": self.step, "backend": self.backend, **(extra or {})}
            )
        return Path(folder)

    @classmethod
    def resume(cls, folder: Path, cfg: TrainerConfig = TrainerConfig()):
        """The trainer at a saved checkpoint: its weights, optimizer state and step count."""
        trainer = cls(folder, cfg)
        trainer.load_optimizer_state(folder)
        return trainer

    # ---- one optimizer step ------------------------------------------------------
    def train_step(self, samples: list[TrainingSample]) -> StepMetrics:
        started = time.perf_counter()
        self.opt.zero_grad(set_to_none=True)
        totals = self.accumulate(samples, len(samples))
        params = [p for p in self.model.parameters() if p.requires_grad]
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, self.cfg.grad_clip))
        with self.optimizer_on_device():
            self.opt.step()
        self.opt.zero_grad(set_to_none=True)  # gradients are not kept between steps: their memory goes back
        self.step += 1
        took = time.perf_counter() - started
        metrics = totals.metrics(
            self.step, len(samples), grad_norm, sum(len(s.prompt_ids) + len(s.response_ids) for s in samples) / took
        )
        return metrics.model_copy(update={"step_s": took})

    @contextlib.contextmanager
    def optimizer_on_device(self):
        """With `optimizer_offload`, AdamW's state is brought to the device for the update and sent back after."""
        if not self.cfg.optimizer_offload or self.device.type == "cpu":
            yield
            return
        _move_optimizer_state(self.opt, self.device)
        try:
            yield
        finally:
            _move_optimizer_state(self.opt, torch.device("cpu"))

    def memory(self) -> dict[str, int]:
        """Bytes this trainer holds: weights, optimizer state (and where), and the device allocator's view."""
        weights = sum(p.numel() * p.element_size() for p in self.model.parameters())
        state = sum(
            t.numel() * t.element_size()
            for st in self.opt.state.values()
            for t in st.values()
            if isinstance(t, torch.Tensor)
        )
        out = {"weights_bytes": weights, "optimizer_bytes": state}
        if self.device.type == "cuda":
            out["cuda_allocated_bytes"] = torch.cuda.memory_allocated(self.device)
            out["cuda_reserved_bytes"] = torch.cuda.memory_reserved(self.device)
        return out

    def accumulate(self, samples: list[TrainingSample], batch_size: int) -> LossTotals:
        """Forward and backward of `samples` in micro-batches (gradients accumulate), each weighted by its share of
        a batch of `batch_size` samples: the loss is a mean over samples, so the shares' gradients add up to the
        batch's whatever the split (micro-batches here, data-parallel replicas in megatron's job)."""
        totals = LossTotals()
        for group in micro_batches(
            samples, self.cfg.micro_batch_tokens, share_prefixes=self.shares_prefixes, packed=self.packs_samples
        ):
            new_lp, entropy, estimate = self._scored(group, *self.response_logits(self.model, group))
            old_lp, adv, mask = self._targets(group, new_lp.shape[1])
            ref_lp = None
            if self.ref is not None:
                with torch.no_grad():
                    ref_lp = self.logprobs(self.ref, group)
            parts = policy_loss(
                new_lp, old_lp, adv, mask, self.cfg.loss, ref_lp=ref_lp, entropy=entropy, kl_coef=self.kl_coefs(group)
            )
            share = len(group) / batch_size
            (parts.loss * share).backward()
            with torch.no_grad():
                gap = float(((new_lp - old_lp).abs() * mask).sum())
            totals.add(parts, share, gap, estimate)
        return totals

    def kl_coefs(self, group: list[TrainingSample]) -> torch.Tensor | None:
        """[B, 1] each sample's stream's KL coefficient; None when no stream has its own."""
        if not self.cfg.kl_by_source:
            return None
        return torch.tensor([[self.cfg.kl_for(s.source)] for s in group], device=self.device)

    def response_logprobs(self, sample: TrainingSample) -> list[float]:
        """The current weights' log-probs of one sample's response (no gradient)."""
        with torch.no_grad():
            new_lp = self.logprobs(self.model, [sample])
        return new_lp[0, : len(sample.response_ids)].tolist()

    def _targets(self, group: list[TrainingSample], width: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Right-padded [B, R]: rollout log-probs, advantages, loss mask (built on the host, sent in one copy)."""
        rows = torch.zeros((3, len(group), width))
        for i, s in enumerate(group):
            r = len(s.response_ids)
            rows[0, i, :r] = torch.tensor(s.rollout_logprobs)
            rows[1, i, :r] = torch.tensor(s.advantages) * self.cfg.advantage_scale_by_source.get(s.source, 1.0)
            rows[2, i, :r] = float(s.loss_mask)
        old_lp, adv, mask = rows.to(self.device, non_blocking=True)
        return old_lp, adv, mask

    def weights_finite(self) -> bool:
        """No NaN/Inf in the weights (checked after every step, before a version may be saved and served)."""
        return all(bool(torch.isfinite(p).all()) for p in self.model.parameters())

    def close(self) -> None:
        """Release what the backend holds outside this process (a megatron torchrun job); nothing in process."""

    def optimizer_state(self) -> dict:
        """Plain data only (tensors, numbers, strings, lists, dicts), so it loads with torch.load(weights_only=True)."""
        return {"optimizer": self.opt.state_dict(), "step": int(self.step)}

    def load_optimizer_state(self, folder: Path) -> None:
        state_file = Path(folder) / STATE_FILE
        if not state_file.is_file():
            return
        try:
            # weights_only: a full unpickle runs whatever code a planted file names; ours is plain data.
            state = torch.load(state_file, map_location=self.device, weights_only=True)
        except OSError:
            raise  # the disk or permissions, not the content: not for CheckpointCorrupt to hide
        except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, TypeError, KeyError, AttributeError) as exc:
            # A refused object (UnpicklingError), a broken zip (RuntimeError), a truncated or foreign file.
            raise CheckpointCorrupt(state_file, _load_failure(exc)) from exc
        if not (
            isinstance(state, dict)
            and isinstance(state.get("optimizer"), dict)
            and isinstance(state.get("step"), int)
            and not isinstance(state["step"], bool)
        ):
            raise CheckpointCorrupt(state_file, "it is not a trainer state (a dict of 'optimizer' and 'step')")
        try:
            self.opt.load_state_dict(state["optimizer"])
        except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
            raise CheckpointCorrupt(state_file, f"its optimizer state does not fit this model ({exc})") from exc
        self.step = state["step"]


def copy_tokenizer(source: Path, folder: Path) -> None:
    """Each checkpoint is servable alone: the tokenizer and chat template travel with it."""
    for name in TOKENIZER_FILES:
        if (Path(source) / name).is_file() and not (Path(folder) / name).exists():
            shutil.copy2(Path(source) / name, Path(folder) / name)


@dataclass(frozen=True)
class Snapshot:
    """A durable checkpoint's content as of one moment: `write(folder, version, extra)` writes it (atomically)."""

    write: Callable[[Path, str, dict | None], Path]
    detached: bool
    """True: a copy, independent of the live trainer (steps may go on while it is written)."""


def _move_optimizer_state(opt: torch.optim.Optimizer, device: torch.device) -> None:
    for st in opt.state.values():
        for key, value in st.items():
            if isinstance(value, torch.Tensor) and value.device != device and value.dim() > 0:
                st[key] = value.to(device, non_blocking=device.type == "cpu")
    if device.type == "cpu" and torch.cuda.is_available():
        torch.cuda.synchronize()


def to_cpu_copy(value):
    """Tensors anywhere in `value` (dicts, lists) copied to CPU memory; everything else as it is."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, dict):
        return {k: to_cpu_copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_cpu_copy(v) for v in value)
    return value


def _load_failure(exc: Exception) -> str:
    """torch.load's reason in one line. A refusal's message opens with advice to load with weights_only=False,
    exactly what must not be done here; only its WeightsUnpickler line names what the file tried to load."""
    text = str(exc)
    marker = "WeightsUnpickler error:"
    if marker in text:
        return "it holds something other than plain data: " + text.split(marker, 1)[1].split(". ", 1)[0].strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return f"{type(exc).__name__}: {lines[0][:300]}" if lines else f"{type(exc).__name__} (truncated file?)"


def response_rows(
    group: list[TrainingSample], device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | float]:
    """Where each response token is predicted: (batch row, position of the predicting hidden state, response index,
    temperature).

    Response token j of a sample with a p-token prompt is predicted by the hidden state at p + j - 1.
    The temperature is one float when the micro-batch shares it (the usual case), else one per token.
    """
    rows_b, rows_t, cols, temps = [], [], [], []
    for i, s in enumerate(group):
        p, r = len(s.prompt_ids), len(s.response_ids)
        rows_b.append(torch.full((r,), i, dtype=torch.long))
        rows_t.append(torch.arange(p - 1, p + r - 1))
        cols.append(torch.arange(r))
        temps.append(torch.full((r,), scoring_temperature(s.temperature)))
    distinct = {scoring_temperature(s.temperature) for s in group}
    temperature = distinct.pop() if len(distinct) == 1 else torch.cat(temps).to(device)
    return torch.cat(rows_b).to(device), torch.cat(rows_t).to(device), torch.cat(cols).to(device), temperature


def padded_ids(group: list[TrainingSample]) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """[B, W] right-padded prompt+response ids, their attention mask, and whether any row is padded."""
    seqs = [s.prompt_ids + s.response_ids for s in group]
    width = max(len(x) for x in seqs)
    ids = torch.zeros((len(group), width), dtype=torch.long)
    attn = torch.zeros((len(group), width), dtype=torch.long)
    for i, x in enumerate(seqs):
        ids[i, : len(x)] = torch.tensor(x)
        attn[i, : len(x)] = 1
    return ids, attn, any(len(x) != width for x in seqs)


def micro_batches(
    samples: list[TrainingSample], budget: int, share_prefixes: bool = False, packed: bool = False
) -> list[list[TrainingSample]]:
    """Consecutive samples in groups of at most `budget` tokens. Rows padded to the longest count as such;
    `packed`: the samples run packed in one row (trainers.packing), so they cost their own lengths. `share_prefixes`:
    the samples are ordered by prompt first, and a prompt prefix of at least SHARED_PREFIX_MIN tokens that the
    whole group shares counts once (the trainer runs it once, the rest padded)."""
    if share_prefixes:
        samples = sorted(samples, key=lambda s: s.prompt_ids)
    groups: list[list[TrainingSample]] = []
    current: list[TrainingSample] = []
    longest = shared = total = 0
    for s in samples:
        n = len(s.prompt_ids) + len(s.response_ids)
        if current and share_prefixes:
            shared = min(shared, common_prefix(current[0].prompt_ids, s.prompt_ids))
        if packed and (not share_prefixes or shared < SHARED_PREFIX_MIN):
            cost = total + n
        else:
            cost = shared + (max(longest, n) - shared) * (len(current) + 1)
        if current and cost > budget:
            groups.append(current)
            current, longest, total = [], 0, 0
        if not current:
            shared = len(s.prompt_ids) if share_prefixes else 0
        current.append(s)
        longest, total = max(longest, n), total + n
    if current:
        groups.append(current)
    return groups


def common_prefix(a: list[int], b: list[int], limit: int | None = None) -> int:
    """How many leading tokens `a` and `b` share (at most `limit`)."""
    n = min(len(a), len(b), limit if limit is not None else len(a))
    k = 0
    while k < n and a[k] == b[k]:
        k += 1
    return k
