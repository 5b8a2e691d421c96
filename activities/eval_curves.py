"""Evaluation scores on the curves: TensorBoard scalars `eval/<set>/<metric>` by policy version, in event files
under `<data dir>/tensorboard/eval/` (beside training's `train/`, so `tensorboard --logdir <data dir>/tensorboard`
shows both). One function, so it can later go through activities.curves with training's points."""

from __future__ import annotations

from pathlib import Path

from activities.curves import curves_dir
from contracts.evaluation import SetScores


def eval_curves_dir(data_dir: Path) -> Path:
    return curves_dir(data_dir) / "eval"


def write_eval_points(data_dir: Path, scores: SetScores) -> Path:
    """Append the set's metrics at step = its version; returns the folder written to."""
    from torch.utils.tensorboard import SummaryWriter  # torch only when an evaluation is recorded

    folder = eval_curves_dir(data_dir)
    writer = SummaryWriter(log_dir=str(folder))
    try:
        for metric, value in scores.metrics.items():
            writer.add_scalar(f"eval/{scores.set}/{metric}", value, global_step=scores.version, walltime=scores.at)
    finally:
        writer.close()
    return folder
