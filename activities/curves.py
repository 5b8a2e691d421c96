"""Training's curves: each train step's line (activities.step_log) as scalars, by policy version, and each
version's latency until every server serves it (`train/version_latency_s`, written at publication).

Event files go to `<data dir>/tensorboard/<run>/` always (offline; `tensorboard --logdir <data dir>/tensorboard`
shows them; `openclaw-rl train curves` says where). With `curves.wandb.enabled` the same points also go to a
Weights & Biases run in offline mode under `<data dir>/wandb/` (no login, no network; `wandb sync` uploads it
later). A step trained again after a crash writes its version's points again: TensorBoard shows the last ones it
read; in W&B each process is its own run.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import structlog

from activities.step_log import TrainStepLine
from openclaw_rl.settings import WandbSettings

log = structlog.get_logger(__name__)

TENSORBOARD_DIR = "tensorboard"
WANDB_DIR = "wandb"
WANDB_STEP = "step"
"""W&B's x-axis for every scalar (the policy version for training): a metric of its own rather than W&B's
`step=`, which must only grow within a run and would drop a version trained again."""
_STEP = (
    "loss",
    "pg_loss",
    "kl",
    "entropy",
    "clip_fraction",
    "approx_kl",
    "grad_norm",
    "tokens_per_s",
    "step_s",
    "logprob_gap",
    "mismatch_mean",
    "mismatch_p99",
    "mismatch_max",
    "mismatch_stale_mean",
    "mismatch_stale_p99",
    "mismatch_over",
    "mismatch_masked_tokens",
)
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


def wandb_dir(data_dir: Path) -> Path:
    """Where W&B's offline runs are (`offline-run-<time>-<id>/` each)."""
    return Path(data_dir) / WANDB_DIR


def wandb_runs(data_dir: Path) -> list[Path]:
    """The offline runs written so far, oldest first (one per writer and process)."""
    return sorted(wandb_dir(data_dir).glob("offline-run-*"))


def scalars(line: TrainStepLine) -> dict[str, float]:
    """The step's points: `train/<metric>`, and `<stream>/<metric>` per sample stream in its batch."""
    out: dict[str, float] = {f"train/{k}": v for k in _STEP if (v := getattr(line.metrics, k)) is not None}
    out["train/samples"] = float(line.trained)
    out["train/dropped_stale"] = float(line.dropped_stale)
    for src, st in line.sources.items():
        out.update({f"{src}/{k}": float(v) for k in _SOURCE if (v := getattr(st, k)) is not None})
    return out


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class CurveWriter:
    """One writer per process and run (the trainer pool's "train"; an evaluator's "eval"), opened on the first
    points: TensorBoard always, W&B offline when `wandb.enabled`. Writing never fails the caller: a curve's point
    is not training's state, so a backend's error is a warning and the step stands without it."""

    def __init__(self, data_dir: Path, run: str = "train", wandb: WandbSettings | None = None):
        self.run = run
        self.dir = curves_dir(data_dir) / run
        self.wandb_dir = wandb_dir(data_dir)
        self._data_dir = Path(data_dir)
        self._wandb = wandb if wandb is not None and wandb.enabled else None
        self._tb: Any = None
        self._wb: Any = None  # the W&B run, once started
        self._wb_failed = False  # a W&B that would not start is not tried again at every step
        self._lock = threading.Lock()

    def write(self, line: TrainStepLine) -> None:
        """A train step's points, at its version."""
        self.write_scalars(scalars(line), step=line.version, walltime=line.time)

    def write_scalars(self, values: dict[str, float], step: int, walltime: float | None = None) -> None:
        """Points `tag -> value` at `step` (a policy version), to every backend; `walltime` (epoch seconds) is
        TensorBoard's time of the points (W&B stamps its own)."""
        with self._lock:
            self._write_tensorboard(values, step, walltime)
            if self._wandb is not None and not self._wb_failed:
                self._write_wandb(values, step)

    def _write_tensorboard(self, values: dict[str, float], step: int, walltime: float | None) -> None:
        try:
            if self._tb is None:
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(log_dir=str(self.dir))
            for tag, value in values.items():
                self._tb.add_scalar(tag, value, global_step=step, walltime=walltime)
            self._tb.flush()
        except Exception as exc:
            log.warning("the step's curve points were not written", dir=str(self.dir), error=_error(exc))

    def _write_wandb(self, values: dict[str, float], step: int) -> None:
        try:
            if self._wb is None:
                self._wb = self._start_wandb()
            self._wb.log({**values, WANDB_STEP: step})
        except Exception as exc:
            if self._wb is None:
                self._wb_failed = True
                log.warning("W&B run not started: curves go to TensorBoard only", run=self.run, error=_error(exc))
            else:
                log.warning("the step's W&B points were not written", run=self.run, error=_error(exc))

    def _start_wandb(self) -> Any:
        try:
            import wandb
        except ImportError as exc:  # logged as the reason the run did not start
            raise ImportError(
                f"curves.wandb needs the wandb package: pip install 'openclaw-rl[wandb]' ({exc})"
            ) from exc

        assert self._wandb is not None
        self.wandb_dir.mkdir(parents=True, exist_ok=True)
        run = wandb.init(
            project=self._wandb.project,
            name=self.run,
            job_type=self.run,
            dir=str(self._data_dir),  # W&B adds `wandb/` itself
            # offline, set here rather than by environment: no login and no network, whatever WANDB_MODE says;
            # create_new: a "train" and an "eval" writer in one process are two runs, neither ends the other.
            mode="offline",
            reinit="create_new",
            settings=wandb.Settings(
                silent=True,
                console="off",  # the worker's own logs stay its own
                x_disable_stats=True,  # no system-metrics sampler thread beside the trainer
                x_disable_meta=True,
                disable_git=True,
                save_code=False,
                x_save_requirements=False,
                init_timeout=30,
            ),
        )
        run.define_metric(WANDB_STEP)
        run.define_metric("*", step_metric=WANDB_STEP)
        log.info("W&B offline run started", run=self.run, dir=str(run.dir))
        return run

    def close(self) -> None:
        with self._lock:
            if self._tb is not None:
                self._tb.close()
                self._tb = None
            if self._wb is not None:
                try:
                    self._wb.finish()
                except Exception as exc:
                    log.warning("W&B run not finished cleanly", run=self.run, error=_error(exc))
                self._wb = None
