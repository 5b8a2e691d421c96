"""records/steps.jsonl: a step's line per version, its samples summed up per stream."""

from __future__ import annotations

import pytest

from activities.step_log import STEP_LOG, read_steps, record_train_step, source_stats
from contracts.training import StepMetrics, StepSummary
from tests.samples import personal_sample


def _metrics(step: int, loss: float) -> StepMetrics:
    zeros = dict.fromkeys(("pg_loss", "kl", "entropy", "clip_fraction", "approx_kl", "mean_advantage"), 0.0)
    return StepMetrics(
        step=step, samples=2, tokens=5, loss=loss, logprob_gap=0.0, grad_norm=1.0, tokens_per_s=1.0, **zeros
    )


def _samples():
    a = personal_sample("a", [1, 2], [3, 4], [-1.0, -2.0], [1.0, 1.0], policy_version="3", reward=1.0)
    b = personal_sample("b", [1], [5, 6, 7], [-1.0, -1.0, -1.0], [-1.0, 0.5, 0.5], policy_version="2", reward=0.0)
    b.teacher_logprobs = [-0.5, -1.5, -1.0]  # gaps +0.5, -0.5, 0
    masked = personal_sample("c", [1], [8], [-1.0], [9.0], reward=-1.0, loss_mask=0)
    return [a, b, masked]


def test_source_stats_count_learned_tokens_and_the_teachers_gap():
    st = source_stats(_samples(), trained_from=4)["personal"]
    assert (st.samples, st.learned, st.tokens) == (3, 2, 5)  # the masked sample's token is not learned
    assert st.advantage_mean == pytest.approx(2.0 / 5) and st.advantage_positive == pytest.approx(4 / 5)
    assert st.reward_mean == pytest.approx(0.0)
    assert st.staleness_mean == pytest.approx((1 + 2 + 4) / 3)
    assert st.teacher_samples == 1 and st.teacher_gap_mean == pytest.approx(0.0)
    assert st.teacher_gap_positive == pytest.approx(1 / 3)


def test_a_version_trained_again_keeps_its_last_line_and_a_torn_line_is_skipped(tmp_path):
    for version, loss in ((1, 0.5), (2, 0.4), (2, 0.3)):  # version 2 trained again after a crash
        summary = StepSummary(version=version, checkpoint="", batch="b", trained=3, dropped_stale=0)
        summary.metrics = _metrics(version, loss)
        record_train_step(tmp_path, summary, _samples(), trained_from=version - 1)
    with open(tmp_path / STEP_LOG, "a") as f:
        f.write('{"time": 1, "vers')  # a crash mid-write
    steps = read_steps(tmp_path)
    assert [s.version for s in steps] == [1, 2] and steps[1].metrics.loss == pytest.approx(0.3)
    # a step that did not run (its whole batch stale) writes nothing
    record_train_step(tmp_path, StepSummary(version=3, checkpoint="", batch="c", trained=0, dropped_stale=2), [], 2)
    assert [s.version for s in read_steps(tmp_path)] == [1, 2]


def test_each_step_becomes_tensorboard_points_by_version(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from activities.curves import CurveWriter, curves_dir

    writer = CurveWriter(tmp_path)
    for version, loss in ((1, 0.5), (2, 0.25)):
        summary = StepSummary(version=version, checkpoint="", batch="b", trained=3, dropped_stale=1)
        summary.metrics = _metrics(version, loss)
        line = record_train_step(tmp_path / "records", summary, _samples(), trained_from=version - 1)
        writer.write(line)
    writer.close()
    acc = EventAccumulator(str(curves_dir(tmp_path) / "train"))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"train/loss", "train/entropy", "train/dropped_stale", "personal/reward_mean"} <= tags
    assert "personal/teacher_gap_mean" in tags  # a stream with OPD samples shows the teacher's gap
    assert [(e.step, round(e.value, 3)) for e in acc.Scalars("train/loss")] == [(1, 0.5), (2, 0.25)]


def test_train_curves_says_where_they_are_and_how_to_open_them(tmp_path):
    import os
    import subprocess

    from tests.helpers import CLI, REPO

    summary = StepSummary(version=1, checkpoint="", batch="b", trained=3, dropped_stale=0)
    summary.metrics = _metrics(1, 0.5)
    record_train_step(tmp_path / "records", summary, _samples(), trained_from=0)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENCLAW_RL_")} | {
        "OPENCLAW_RL_DATA_DIR": str(tmp_path)
    }
    out = subprocess.run(CLI + ["train", "curves"], env=env, capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.returncode == 0, out.stderr
    assert f"--logdir {tmp_path / 'tensorboard'}" in out.stdout and "1 steps recorded" in out.stdout
