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
    (tmp_path / "wandb" / "offline-run-20260101_000000-abc").mkdir(parents=True)  # a run W&B wrote earlier
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENCLAW_RL_")} | {
        "OPENCLAW_RL_DATA_DIR": str(tmp_path),
        "OPENCLAW_RL_CURVES__WANDB__ENABLED": "true",
    }
    out = subprocess.run(CLI + ["train", "curves"], env=env, capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.returncode == 0, out.stderr
    assert f"--logdir {tmp_path / 'tensorboard'}" in out.stdout and "1 steps recorded" in out.stdout
    assert f"W&B offline runs: {tmp_path / 'wandb'}  (1 runs; curves.wandb on" in out.stdout
    assert f"wandb sync {tmp_path / 'wandb' / 'offline-run-*'}" in out.stdout
    assert f"wandb leet {tmp_path / 'wandb'}" in out.stdout


def test_train_curves_says_wandb_is_off_when_it_is_and_there_are_no_runs(tmp_path, capsys):
    from cli.admin import curves_command
    from openclaw_rl.settings import Settings

    assert curves_command(Settings(data_dir=tmp_path)) == 0
    out = capsys.readouterr().out
    assert "W&B offline runs: off (curves.wandb.enabled = true" in out and "wandb sync" not in out


# ---- Weights & Biases, offline ---------------------------------------------------------------------------------


@pytest.fixture
def wandb_env(tmp_path, monkeypatch):
    """W&B's own files (config, cache, core logs) under tmp; WANDB_MODE=online and a dead server to show the
    writer stays offline whatever the environment says."""
    for var, sub in (("WANDB_CONFIG_DIR", "cfg"), ("WANDB_CACHE_DIR", "cache"), ("WANDB_DATA_DIR", "data")):
        monkeypatch.setenv(var, str(tmp_path / "wandb-home" / sub))
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb-home" / "dir"))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    return tmp_path


def _lines(tmp_path, *losses):
    out = []
    for version, loss in enumerate(losses, start=1):
        summary = StepSummary(version=version, checkpoint="", batch="b", trained=3, dropped_stale=1)
        summary.metrics = _metrics(version, loss)
        out.append(record_train_step(tmp_path / "records", summary, _samples(), trained_from=version - 1))
    return out


def _history(run_dir) -> list[dict]:
    """The run's history rows, as W&B's own reader of a `.wandb` log (`wandb leet inspect --json`) prints them."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    assert len(list(run_dir.glob("run-*.wandb"))) == 1
    wandb_cli = Path(sys.executable).parent / "wandb"
    out = subprocess.run(
        [str(wandb_cli), "leet", "inspect", "--json", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 0, out.stderr
    records = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    return [r["history"]["item"] for r in records if r["type"] == "history"]


def test_with_wandb_on_each_step_is_a_row_of_an_offline_run_and_eval_is_a_run_of_its_own(wandb_env):
    from activities.curves import CurveWriter, curves_dir, wandb_runs
    from openclaw_rl.settings import WandbSettings

    tmp_path = wandb_env
    settings = WandbSettings(enabled=True, project="curves-test")
    train, evals = CurveWriter(tmp_path, wandb=settings), CurveWriter(tmp_path, run="eval", wandb=settings)
    first, second = _lines(tmp_path, 0.5, 0.25)
    train.write(first)
    evals.write_scalars({"eval/score": 0.75}, step=1)  # both open in one process: neither ends the other
    train.write(second)
    train.close()
    evals.close()

    runs = wandb_runs(tmp_path)
    assert len(runs) == 2 and all(r.parent == tmp_path / "wandb" for r in runs)
    by_run = {}
    for run_dir in runs:
        rows = _history(run_dir)
        by_run["eval" if any("eval/score" in r for r in rows) else "train"] = rows
    train_rows = by_run["train"]
    assert [(r["step"], r["train/loss"]) for r in train_rows] == [(1, 0.5), (2, 0.25)]
    assert train_rows[0]["train/dropped_stale"] == 1 and "personal/reward_mean" in train_rows[0]
    assert [(r["step"], r["eval/score"]) for r in by_run["eval"]] == [(1, 0.75)]
    assert list((curves_dir(tmp_path) / "train").glob("events.out.tfevents.*"))  # TensorBoard all the same
    assert not (tmp_path / "wandb-home" / "dir").exists()  # the data directory, not WANDB_DIR


@pytest.mark.parametrize("enabled", [None, False])
def test_with_wandb_off_no_wandb_directory_appears(wandb_env, enabled):
    from activities.curves import CurveWriter, curves_dir
    from openclaw_rl.settings import WandbSettings

    tmp_path = wandb_env
    writer = CurveWriter(tmp_path, wandb=None if enabled is None else WandbSettings(enabled=enabled))
    writer.write(_lines(tmp_path, 0.5)[0])
    writer.close()
    assert list((curves_dir(tmp_path) / "train").glob("events.out.tfevents.*"))
    assert not (tmp_path / "wandb").exists()


def _tensorboard_losses(tmp_path) -> list[tuple[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from activities.curves import curves_dir

    acc = EventAccumulator(str(curves_dir(tmp_path) / "train"))
    acc.Reload()
    return [(e.step, round(e.value, 3)) for e in acc.Scalars("train/loss")]


def test_a_wandb_that_will_not_start_leaves_the_steps_standing(wandb_env, monkeypatch):
    import wandb
    from structlog.testing import capture_logs

    from activities.curves import CurveWriter
    from openclaw_rl.settings import WandbSettings

    tmp_path = wandb_env
    calls = []

    def broken_init(**kwargs):
        calls.append(kwargs)
        raise RuntimeError("wandb-core would not start")

    monkeypatch.setattr(wandb, "init", broken_init)
    writer = CurveWriter(tmp_path, wandb=WandbSettings(enabled=True))
    with capture_logs() as logs:
        for line in _lines(tmp_path, 0.5, 0.25):
            writer.write(line)  # raises nothing
    writer.close()
    assert len(calls) == 1 and calls[0]["mode"] == "offline"  # not tried again at every step
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == [
        "W&B run not started: curves go to TensorBoard only"
    ]
    assert "would not start" in logs[0]["error"]
    assert _tensorboard_losses(tmp_path) == [(1, 0.5), (2, 0.25)]


def test_a_wandb_point_that_fails_is_a_warning_and_the_next_step_tries_again(wandb_env, monkeypatch):
    import wandb
    from structlog.testing import capture_logs

    from activities.curves import CurveWriter
    from openclaw_rl.settings import WandbSettings

    tmp_path = wandb_env

    class Run:
        logged: list[dict] = []
        dir = str(tmp_path)

        def define_metric(self, *args, **kwargs):
            pass

        def log(self, values):
            self.logged.append(values)
            raise OSError("disk full")

        def finish(self):
            pass

    monkeypatch.setattr(wandb, "init", lambda **kwargs: Run())
    writer = CurveWriter(tmp_path, wandb=WandbSettings(enabled=True))
    with capture_logs() as logs:
        for line in _lines(tmp_path, 0.5, 0.25):
            writer.write(line)
    writer.close()
    assert [v["step"] for v in Run.logged] == [1, 2]
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["the step's W&B points were not written"] * 2
    assert _tensorboard_losses(tmp_path) == [(1, 0.5), (2, 0.25)]
