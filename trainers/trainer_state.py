"""What a trainer checkpoint holds beside its weights, and how it is read back: the tokenizer files that make it
servable alone, the optimizer state (plain data only), and a durable checkpoint's snapshot of them."""

from __future__ import annotations

import pickle
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

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


def read_trainer_state(folder: Path, device: torch.device) -> dict | None:
    """The trainer state saved in `folder` (None: it has none): plain data only, checked to be a trainer state."""
    state_file = Path(folder) / STATE_FILE
    if not state_file.is_file():
        return None
    try:
        # weights_only: a full unpickle runs whatever code a planted file names; ours is plain data.
        state = torch.load(state_file, map_location=device, weights_only=True)
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
    return state


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


def move_optimizer_state(opt: torch.optim.Optimizer, device: torch.device) -> None:
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
