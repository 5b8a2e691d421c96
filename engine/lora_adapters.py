"""LoRA adapters served on the engine's base model, many at once (SGLang's /load_lora_adapter, /unload_lora_adapter
and the /generate `lora_path` field).

An adapter is a PEFT folder (adapter_config.json + adapter_model.safetensors, as trainers/lora.py writes it with
peft): per target linear layer an A [r, in] and a B [out, r]; the layer then computes y = W x + (alpha / r) B A x
(alpha / sqrt(r) with use_rslora). The scaling is folded into B when the adapter is loaded.

`LoraRegistry` holds up to `capacity` adapters (engine.max_loras). Loading one more evicts the least recently used
adapter that no request holds; when every resident adapter is held, the load is refused. A request takes its
adapter object from the registry when it is accepted (`acquire`) and gives it back when its answer is out
(`release`); the rows decode on that object, so unloading or evicting an adapter, or loading others, never changes
what a running request computes.

Batched forward (`LoraRows`): forward hooks on the target linear layers (their parameter names stay those of the
plain model, so weight updates by name are untouched) add each row's own adapter term; rows without an adapter
get nothing added. Two ways to compute it for the whole batch at once (`KERNELS`), measured by
benchmarks/lora_serving.py:
  group   rows grouped by adapter: per distinct adapter one (x A^T) B^T over its rows, added back with index_add
  gather  the rows' A and B gathered into [rows, in, r] / [rows, r, out] (zero for rows without one, zero-padded to
          the largest rank) and two bmm for all rows; when one adapter serves every row, the plain product instead
          (the default: faster than `group` with many adapters, as fast with one; SGLang's segmented gemm does the
          grouped form in one kernel, which a CPU does not have)
"""

from __future__ import annotations

import json
import math
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import torch

TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
"""The linear layers an adapter may target (every attention and MLP projection of a Qwen3 / Llama decoder layer)."""

KERNELS = ("group", "gather")
DEFAULT_KERNEL = "gather"
"""Measured on the CPU tiny model with 16 rows of 16 adapters (benchmarks/lora_serving.py): see docs/architecture.md."""

PEFT_PREFIX = "base_model.model."
"""What PEFT puts before the plain model's module names in adapter_model.safetensors."""


class AdapterError(ValueError):
    """An adapter that cannot be loaded or used; the message says why (HTTP 400)."""


@dataclass(eq=False)
class LoraAdapter:
    """One loaded adapter: per target module name (the plain model's, e.g. model.layers.0.self_attn.q_proj) its
    A [r, in] and its scaled B [out, r] (scale folded in)."""

    name: str
    path: str
    uid: int
    """Unique per load: a name unloaded and loaded again is another adapter (the prefix cache keys on `key`)."""
    rank: int
    scaling: float
    weights: dict[str, tuple[torch.Tensor, torch.Tensor]]
    version: str | None = None
    """The policy version the adapter's folder (or its parent checkpoint) carries in openclaw-rl-version.json."""
    users: int = field(default=0)

    @property
    def key(self) -> str:
        return f"{self.name}#{self.uid}"

    @property
    def nbytes(self) -> int:
        return sum(a.numel() * a.element_size() + b.numel() * b.element_size() for a, b in self.weights.values())


def _linears(model: torch.nn.Module) -> dict[str, torch.nn.Linear]:
    return {
        name: module
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear) and name.rsplit(".", 1)[-1] in TARGETS
    }


def _version_of(folder: Path) -> str | None:
    from openclaw_rl.checkpoints import read_version_label

    for where in (folder, folder.parent):  # trainers/lora.py writes the adapter under <checkpoint>/adapter
        try:
            label = read_version_label(where)
        except (OSError, ValueError):
            label = None
        if label is not None:
            return label
    return None


def read_adapter(folder: Path, name: str, uid: int, model: torch.nn.Module) -> LoraAdapter:
    """The PEFT adapter in `folder`, checked against `model` (every tensor must name one of its target linear layers
    with matching shapes), in the model's dtype and on its device. Raises AdapterError."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    config_file, tensors_file = folder / "adapter_config.json", folder / "adapter_model.safetensors"
    if not folder.is_dir():
        raise AdapterError(f"{folder} is not a folder")
    if not config_file.is_file() or not tensors_file.is_file():
        raise AdapterError(
            f"{folder} is not a PEFT adapter folder: it needs adapter_config.json and adapter_model.safetensors"
        )
    try:
        cfg = json.loads(config_file.read_text())
    except (OSError, ValueError) as exc:
        raise AdapterError(f"{config_file}: {exc}") from exc
    if not isinstance(cfg, dict) or cfg.get("peft_type", "LORA") != "LORA":
        raise AdapterError(f"{config_file}: not a LoRA adapter (peft_type {cfg.get('peft_type')!r})")
    for unsupported in ("use_dora", "rank_pattern", "alpha_pattern", "modules_to_save"):
        if cfg.get(unsupported):
            raise AdapterError(f"{config_file}: {unsupported} is not supported by this engine")
    if cfg.get("bias", "none") != "none":
        raise AdapterError(f"{config_file}: bias {cfg['bias']!r} is not supported (only 'none')")
    try:
        rank, alpha = int(cfg["r"]), float(cfg.get("lora_alpha", cfg["r"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise AdapterError(f"{config_file}: needs an integer r and a lora_alpha") from exc
    if rank <= 0:
        raise AdapterError(f"{config_file}: r must be positive, got {rank}")
    scaling = alpha / math.sqrt(rank) if cfg.get("use_rslora") else alpha / rank
    try:
        raw = load_file(str(tensors_file), device="cpu")
    except (OSError, SafetensorError) as exc:
        raise AdapterError(f"{tensors_file}: {exc}") from exc
    linears = _linears(model)
    param = next(model.parameters())
    pairs: dict[str, dict[str, torch.Tensor]] = {}
    for key, tensor in raw.items():
        plain = key[len(PEFT_PREFIX) :] if key.startswith(PEFT_PREFIX) else key
        for part in ("lora_A", "lora_B"):
            marker = f".{part}."
            if marker in plain:
                module, rest = plain.split(marker, 1)
                if rest not in ("weight", "default.weight"):
                    raise AdapterError(f"{tensors_file}: unexpected tensor {key}")
                pairs.setdefault(module, {})[part] = tensor
                break
        else:
            raise AdapterError(f"{tensors_file}: unexpected tensor {key} (only lora_A / lora_B weights are served)")
    if not pairs:
        raise AdapterError(f"{tensors_file} holds no LoRA weights")
    weights: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    for module, ab in sorted(pairs.items()):
        linear = linears.get(module)
        if linear is None:
            raise AdapterError(
                f"the adapter targets {module}, which is not a projection of the served model "
                f"(targets: {', '.join(TARGETS)}; the base model's layers are named like {next(iter(linears), '?')})"
            )
        if set(ab) != {"lora_A", "lora_B"}:
            raise AdapterError(f"{tensors_file}: {module} has only {', '.join(ab)}")
        a, b = ab["lora_A"], ab["lora_B"]
        if a.shape != (rank, linear.in_features) or b.shape != (linear.out_features, rank):
            raise AdapterError(
                f"{module}: lora_A {tuple(a.shape)} / lora_B {tuple(b.shape)} do not fit rank {rank} on a "
                f"{linear.in_features} -> {linear.out_features} layer (expected ({rank}, {linear.in_features}) / "
                f"({linear.out_features}, {rank}))"
            )
        weights[module] = (
            a.to(device=param.device, dtype=param.dtype).contiguous(),
            (b.float() * scaling).to(device=param.device, dtype=param.dtype).contiguous(),
        )
    return LoraAdapter(name, str(folder), uid, rank, scaling, weights, version=_version_of(folder))


class LoraRegistry:
    """The resident adapters by name, least recently used first; thread-safe (HTTP handlers load and look up)."""

    def __init__(self, capacity: int = 128):
        self.capacity = max(1, int(capacity))
        self._adapters: OrderedDict[str, LoraAdapter] = OrderedDict()
        self._lock = threading.Lock()
        self._uids = 0
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._adapters)

    def next_uid(self) -> int:
        with self._lock:
            self._uids += 1
            return self._uids

    def names(self) -> dict[str, str]:
        """Loaded adapters: name -> path (SGLang's loaded_adapters)."""
        with self._lock:
            return {name: a.path for name, a in self._adapters.items()}

    def add(self, adapter: LoraAdapter) -> list[str]:
        """Make `adapter` resident; returns the names evicted for room. Raises AdapterError for a name already
        loaded (SGLang's rule: unload it first) or when every resident adapter is in use."""
        with self._lock:
            if adapter.name in self._adapters:
                raise AdapterError(
                    f"a LoRA adapter named {adapter.name!r} is loaded already; unload it first "
                    f"(loaded: {', '.join(self._adapters)})"
                )
            evicted = []
            while len(self._adapters) >= self.capacity:
                victim = next((n for n, a in self._adapters.items() if a.users == 0), None)
                if victim is None:
                    raise AdapterError(
                        f"over capacity: all {len(self._adapters)} resident adapters (engine.max_loras) are used by "
                        "running requests; retry when some finish"
                    )
                del self._adapters[victim]
                evicted.append(victim)
                self.evicted += 1
            self._adapters[adapter.name] = adapter
            return evicted

    def remove(self, name: str) -> bool:
        """Unload `name` (requests running with it finish on it); False if it is not loaded."""
        with self._lock:
            return self._adapters.pop(name, None) is not None

    def acquire(self, names: list[str | None]) -> list[LoraAdapter | None]:
        """The adapters these requests name (None: the base model), held until `release`. Raises AdapterError
        naming an adapter that is not loaded (none is held then)."""
        with self._lock:
            missing = [n for n in names if n is not None and n not in self._adapters]
            if missing:
                loaded = ", ".join(self._adapters) or "none"
                raise AdapterError(
                    f"LoRA adapter {missing[0]!r} is not loaded (loaded: {loaded}); load it with /load_lora_adapter"
                )
            out = []
            for n in names:
                if n is None:
                    out.append(None)
                    continue
                adapter = self._adapters[n]
                adapter.users += 1
                self._adapters.move_to_end(n)
                out.append(adapter)
            return out

    def release(self, adapters: list[LoraAdapter | None]) -> None:
        with self._lock:
            for a in adapters:
                if a is not None:
                    a.users -= 1

    def nbytes(self) -> int:
        with self._lock:
            return sum(a.nbytes for a in self._adapters.values())


# ---- the batched forward -------------------------------------------------------------------------------------------
class _State:
    """What a model's hooks read: the rows of the forward pass running now (None: no adapter anywhere)."""

    __slots__ = ("rows",)

    def __init__(self) -> None:
        self.rows: LoraRows | None = None


def _hooks(model: torch.nn.Module) -> _State:
    """The model's adapter hooks, installed on its target linear layers the first time (idempotent)."""
    state = getattr(model, "_openclaw_lora", None)
    if state is not None:
        return state
    state = _State()
    for name, linear in _linears(model).items():
        linear.register_forward_hook(_hook(state, name))
    model._openclaw_lora = state
    return state


def _hook(state: _State, name: str):
    def add_adapters(module: torch.nn.Module, inputs: tuple, output: torch.Tensor) -> torch.Tensor | None:
        rows = state.rows
        if rows is not None:
            rows.add(name, inputs[0], output)
        return None  # the output was changed in place

    return add_adapters


class LoraRows:
    """The adapters of a forward pass's rows (one per batch row, None for the base), for every target layer.

    Made once per batch composition and reused while the rows stay the same (decode steps): the gathered or grouped
    indices and, for `gather`, each layer's gathered A and B are built on first use and kept."""

    def __init__(self, adapters: list[LoraAdapter | None], kernel: str = DEFAULT_KERNEL):
        if kernel not in KERNELS:
            raise ValueError(f"LoRA kernel must be one of {KERNELS}, got {kernel!r}")
        self.adapters = list(adapters)
        self.kernel = kernel
        self.active = any(a is not None for a in self.adapters)
        self._groups: list[tuple[LoraAdapter, torch.Tensor | None]] | None = None
        self._gathered: dict[str, tuple[torch.Tensor, torch.Tensor] | None] = {}

    def signature(self) -> tuple:
        return tuple(id(a) for a in self.adapters)

    def _group_index(self, device: torch.device) -> list[tuple[LoraAdapter, torch.Tensor | None]]:
        if self._groups is None:
            by: dict[int, tuple[LoraAdapter, list[int]]] = {}
            for i, a in enumerate(self.adapters):
                if a is not None:
                    by.setdefault(id(a), (a, []))[1].append(i)
            n = len(self.adapters)
            self._groups = [
                (a, None if len(idx) == n else torch.tensor(idx, dtype=torch.long, device=device))
                for a, idx in by.values()
            ]
        return self._groups

    def add(self, name: str, x: torch.Tensor, out: torch.Tensor) -> None:
        """out += each row's adapter term for layer `name` (x: [rows, T, in], out: [rows, T, out]), in place."""
        if x.shape[0] != len(self.adapters):
            raise RuntimeError(f"LoRA rows: a forward of {x.shape[0]} rows, adapters for {len(self.adapters)}")
        if self.kernel == "gather" and not self._one_for_all(x.device):
            ab = self._gathered.get(name, ())
            if ab == ():
                ab = self._gathered[name] = self._gather(name, x.device)
            if ab is not None:
                a, b = ab
                out.add_(torch.bmm(torch.bmm(x, a), b))
            return
        for adapter, idx in self._group_index(x.device):
            w = adapter.weights.get(name)
            if w is None:
                continue
            a, b = w
            if idx is None:  # every row: no gather, no scatter
                out.add_(torch.matmul(torch.matmul(x, a.t()), b.t()))
            else:
                out.index_add_(0, idx, torch.matmul(torch.matmul(x.index_select(0, idx), a.t()), b.t()))

    def _one_for_all(self, device: torch.device) -> bool:
        """Every row has the same adapter: one plain (x A^T) B^T is cheaper than gathering it per row."""
        groups = self._group_index(device)
        return len(groups) == 1 and groups[0][1] is None

    def _gather(self, name: str, device: torch.device) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Per row A^T [in, r] and B^T [r, out], zero-padded to the largest rank and zero for rows without one."""
        ws = [None if a is None else a.weights.get(name) for a in self.adapters]
        present = [w for w in ws if w is not None]
        if not present:
            return None
        r = max(w[0].shape[0] for w in present)
        a0, b0 = present[0]
        at = a0.new_zeros((len(ws), a0.shape[1], r))
        bt = b0.new_zeros((len(ws), r, b0.shape[0]))
        for i, w in enumerate(ws):
            if w is not None:
                k = w[0].shape[0]
                at[i, :, :k] = w[0].t()
                bt[i, :k, :] = w[1].t()
        return at, bt


class lora_forward:  # noqa: N801 - used as a context manager, like torch.no_grad
    """Within it, `model`'s forward passes add `rows`' adapters (nothing to do when `rows` is None or inactive)."""

    def __init__(self, model: torch.nn.Module, rows: LoraRows | None):
        self.state = _hooks(model) if rows is not None and rows.active else None
        self.rows = rows

    def __enter__(self) -> None:
        if self.state is not None:
            self.state.rows = self.rows

    def __exit__(self, *exc: object) -> None:
        if self.state is not None:
            self.state.rows = None
