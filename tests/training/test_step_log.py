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
