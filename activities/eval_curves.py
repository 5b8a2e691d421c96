"""Evaluation scores on the curves: `eval/<set>/<metric>` by policy version, through training's curve writer
(activities.curves) as its run "eval": TensorBoard event files under `<data dir>/tensorboard/eval/` (beside
training's `train/`, so `tensorboard --logdir <data dir>/tensorboard` shows both), and a W&B offline run of its own
with `curves.wandb.enabled`."""

from __future__ import annotations

from pathlib import Path

from activities.curves import curves_dir
from contracts.evaluation import SetScores

EVAL_RUN = "eval"


def eval_curves_dir(data_dir: Path) -> Path:
    return curves_dir(data_dir) / EVAL_RUN


def eval_points(scores: SetScores) -> dict[str, float]:
    """The set's metrics as curve tags."""
    return {f"eval/{scores.set}/{metric}": value for metric, value in scores.metrics.items()}
