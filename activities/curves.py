"""TensorBoard curves of training: each train step's line (activities.step_log) as scalars, by policy version.

Event files go to `<data dir>/tensorboard/train/` (offline; `tensorboard --logdir <data dir>/tensorboard` shows
them; `openclaw-rl train curves` says where). A step trained again after a crash writes its version's points
again: TensorBoard shows the last ones it read.
"""

from __future__ import annotations

import threading
from pathlib import Path

import structlog

from activities.step_log import TrainStepLine

log = structlog.get_logger(__name__)

TENSORBOARD_DIR = "tensorboard"
_STEP = ("loss", "pg_loss", "kl", "entropy", "clip_fraction", "approx_kl", "grad_norm", "tokens_per_s", "step_s")
_SOURCE = (
    "samples",
    "reward_mean",
    "advantage_mean",
    "advantage_std",
    "advantage_abs_mean",
    "advantage_positive",
    "staleness_mean",
    "teacher_gap_mean",
    "teacher_gap_positive",
)


def curves_dir(data_dir: Path) -> Path:
    return Path(data_dir) / TENSORBOARD_DIR


def scalars(line: TrainStepLine) -> dict[str, float]:
    """The step's points: `train/<metric>`, and `<stream>/<metric>` per sample stream in its batch."""
    out: dict[str, float] = {f"train/{k}": v for k in _STEP if (v := getattr(line.metrics, k)) is not None}
    out["train/samples"] = float(line.trained)
    out["train/dropped_stale"] = float(line.dropped_stale)
    for src, st in line.sources.items():
        out.update({f"{src}/{k}": float(v) for k in _SOURCE if (v := getattr(st, k)) is not None})
    return out


class CurveWriter:
    """One event-file writer per process (the trainer pool's), opened on the first step."""

    def __init__(self, data_dir: Path):
        self.dir = curves_dir(data_dir) / "train"
        self._writer = None
        self._lock = threading.Lock()

    def write(self, line: TrainStepLine) -> None:
        try:
            with self._lock:
                if self._writer is None:
                    from torch.utils.tensorboard import SummaryWriter

                    self._writer = SummaryWriter(log_dir=str(self.dir))
                for tag, value in scalars(line).items():
                    self._writer.add_scalar(tag, value, global_step=line.version, walltime=line.time)
                self._writer.flush()
        except Exception as exc:  # a curve's point, not training's state: the step stands without it
            log.warning(
                "the step's curve points were not written", dir=str(self.dir), error=f"{type(exc).__name__}: {exc}"
            )

    def close(self) -> None:
        with self._lock:
            if self._writer is not None:
                self._writer.close()
                self._writer = None
