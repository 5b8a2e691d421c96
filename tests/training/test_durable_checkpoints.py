"""Versions in the trainer's memory and durable checkpoints on a cadence: the trainer pool's activities against a
real valkey server and the real torch trainer (the training workflow's side is tests/workflows)."""

from __future__ import annotations

import asyncio
import json
import os
import threading

import pytest
import torch
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities import durable_checkpoints
from activities.training import TrainingActivities
from contracts.errors import ErrorType
from contracts.training import (
    ClaimInput,
    ConfirmInput,
    DurableBatch,
    ExportInput,
    SaveCheckpointInput,
    TrainInput,
)
from openclaw_rl.checkpoints import CONFIRMED, is_confirmed, newest_version, version_dir
from openclaw_rl.trained_log import TRAINED_LOG
from tests.training.test_train_step_activity import publish, settings_for, valkey  # noqa: F401 (fixture)


async def _step(acts: TrainingActivities, version: int, durable: int, n: int = 4, skip=(), **kw):
    """A claim (skipping the entries of `skip`, claims trained but not durable yet, as the workflow does) and a step."""
    env = ActivityEnvironment()
    skipped = {"personal": [i for c in skip for i in c.ids.get("personal", [])]}
    claim = await env.run(
        acts.claim_batch,
        ClaimInput(consumer="t", batch_size=n, source_weights={"personal": 1.0}, wait_s=1.0, skip=skipped),
    )
    summary = await env.run(
        acts.train_step, TrainInput(ids=claim.ids, version=version, max_staleness=8, durable_version=durable, **kw)
    )
    return claim, summary


def _weights(acts: TrainingActivities) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in acts.held.trainer.model.state_dict().items()}


async def _checkpoint(acts: TrainingActivities, version: int, since: int):
    env = ActivityEnvironment()
    req = SaveCheckpointInput(version=version, since=since)
    started = await env.run(acts.start_checkpoint, req)
    return started, await env.run(acts.finish_checkpoint, req)


async def test_steps_stay_in_memory_and_a_durable_checkpoint_is_confirmed_then_recorded(tmp_path, valkey, tiny_model):  # noqa: F811
    settings = settings_for(tmp_path, valkey, tiny_model)
    publish(valkey, 0, 8)
    acts = TrainingActivities(settings)
    c1, s1 = await _step(acts, version=0, durable=0)
    c2, s2 = await _step(acts, version=1, durable=0, skip=[c1])
    assert not set(c1.ids["personal"]) & set(c2.ids["personal"])  # the claim skips what awaits a checkpoint
    assert (s1.version, s2.version) == (1, 2) and s1.in_memory and s2.in_memory
    assert s2.metrics.step_s is not None and s2.memory["weights_bytes"] > 0
    assert not any(settings.checkpoints_dir.glob("policy-*"))  # nothing written per version
    started, cp = await _checkpoint(acts, version=2, since=0)
    folder = version_dir(settings.checkpoints_dir, 2)
    assert cp.path == str(folder) and cp.bytes > 0 and started.snapshot_s >= 0
    assert not is_confirmed(folder) and newest_version(settings.checkpoints_dir) == 0  # not resumed from yet
    batches = [
        DurableBatch(version=s.version, ids=c.ids, batch=s.batch, sample_ids=s.sample_ids)
        for c, s in ((c1, s1), (c2, s2))
    ]
    inp = ConfirmInput(checkpoint=cp, since=0, batches=batches)
    assert await ActivityEnvironment().run(acts.confirm_checkpoint, inp) == 8
    assert await ActivityEnvironment().run(acts.confirm_checkpoint, inp) == 0  # a retry acknowledges nothing twice
    assert (folder / CONFIRMED).is_file() and newest_version(settings.checkpoints_dir) == 2
    lines = [json.loads(x) for x in (settings.records_dir / TRAINED_LOG).read_text().splitlines()]
    assert len(lines) == 1  # the retry wrote no second line
    assert lines[0]["durable"] and lines[0]["version"] == 2 and lines[0]["from_version"] == 0
    assert sorted(lines[0]["sample_ids"]) == sorted(s1.sample_ids + s2.sample_ids) and len(lines[0]["sample_ids"]) == 8
    # the checkpoint holds version 2's weights: a trainer resumed from it has the same weights
    held = _weights(acts)
    fresh = TrainingActivities(settings)
    trainer = fresh.held.from_durable(2, 2)
    for name, t in trainer.model.state_dict().items():
        assert torch.equal(t, held[name]), name
    await acts.aclose()
    await fresh.aclose()


async def test_a_restarted_trainer_says_it_lost_the_versions_and_starts_again_from_the_durable_one(
    tmp_path,
    valkey,  # noqa: F811
    tiny_model,
):
    settings = settings_for(tmp_path, valkey, tiny_model)
    publish(valkey, 0, 12)
    acts = TrainingActivities(settings)
    c1, _ = await _step(acts, version=0, durable=0)
    await _step(acts, version=1, durable=0, skip=[c1])
    dead = _weights(acts)  # version 2, in this process's memory only
    await acts.aclose()
    restarted = TrainingActivities(settings)  # the process died
    with pytest.raises(ApplicationError) as lost:
        await _step(restarted, version=2, durable=0)
    assert lost.value.type == ErrorType.TRAINER_LOST and lost.value.non_retryable
    # starting again from the durable checkpoint (0: the base model), labelled with the version it replaces
    trainer = await asyncio.to_thread(restarted.held.from_durable, 0, 2)
    base = TrainingActivities(settings)
    base_weights = (await asyncio.to_thread(base.held.at_checkpoint, 0)).model.state_dict()
    assert all(torch.equal(t, base_weights[k]) for k, t in trainer.model.state_dict().items())
    assert any(not torch.equal(t, dead[k]) for k, t in trainer.model.state_dict().items())
    claim, summary = await _step(restarted, version=2, durable=0, from_durable=True)
    assert summary.version == 3 and restarted.held.version == 3  # version numbers keep growing
    await restarted.aclose()
    await base.aclose()


async def test_a_checkpoint_is_not_written_when_the_disk_cannot_take_it_and_the_reserve(
    tmp_path,
    valkey,  # noqa: F811
    tiny_model,
):
    free_gb = os.statvfs(tmp_path).f_bavail * os.statvfs(tmp_path).f_frsize / 1024**3
    settings = settings_for(tmp_path, valkey, tiny_model)
    settings.training.checkpoint.disk_reserve_gb = free_gb + 1  # more than the disk has
    publish(valkey, 0, 4)
    acts = TrainingActivities(settings)
    await _step(acts, version=0, durable=0)
    with pytest.raises(ApplicationError, match="no room for the durable checkpoint") as full:
        await ActivityEnvironment().run(acts.start_checkpoint, SaveCheckpointInput(version=1, since=0))
    assert full.value.type == ErrorType.DISK_FULL
    assert not any(settings.checkpoints_dir.glob("policy-*"))
    await acts.aclose()


async def test_checkpoints_are_kept_within_their_count_and_byte_budget(tmp_path, valkey, tiny_model):  # noqa: F811
    settings = settings_for(tmp_path, valkey, tiny_model)
    settings.training.checkpoint.keep = 3
    publish(valkey, 0, 16)
    acts = TrainingActivities(settings)
    env = ActivityEnvironment()
    for v in range(4):
        claim, s = await _step(acts, version=v, durable=v)
        _, cp = await _checkpoint(acts, version=v + 1, since=v)
        batch = DurableBatch(version=s.version, ids=claim.ids, batch=s.batch, sample_ids=s.sample_ids)
        await env.run(acts.confirm_checkpoint, ConfirmInput(checkpoint=cp, since=v, batches=[batch]))
    kept = sorted(int(p.name.split("-")[1]) for p in settings.checkpoints_dir.glob("policy-*"))
    assert kept == [2, 3, 4]  # the count
    one = cp.bytes
    settings.training.checkpoint.budget_gb = (2.5 * one) / 1024**3  # room for two, not three
    need, pruned = durable_checkpoints.make_room(settings, 5)
    assert sorted(pruned) == [2, 3] and need == one  # the newest stays; room for the one to come
    assert sorted(int(p.name.split("-")[1]) for p in settings.checkpoints_dir.glob("policy-*")) == [4]
    await acts.aclose()


async def test_export_writes_a_version_held_only_in_memory(tmp_path, valkey, tiny_model):  # noqa: F811
    settings = settings_for(tmp_path, valkey, tiny_model)
    publish(valkey, 0, 4)
    acts = TrainingActivities(settings)
    await _step(acts, version=0, durable=0)
    saved = await ActivityEnvironment().run(acts.export_checkpoint, ExportInput(version=1, label="keep-me"))
    folder = settings.checkpoints_dir / "saved" / "keep-me"
    assert saved.version == 1 and (folder / "model.safetensors").is_file()
    assert json.loads((folder / "openclaw-rl-version.json").read_text())["weight_version"] == "1"
    await acts.aclose()


async def test_the_engine_gives_its_memory_back_during_a_step_and_takes_it_again(tmp_path, valkey, tiny_model):  # noqa: F811
    import httpx

    from tests.conftest import start_engine

    (tmp_path / "engine-data").mkdir()
    proc, url = start_engine(tiny_model, tmp_path / "engine-data")
    try:
        settings = settings_for(
            tmp_path, valkey, tiny_model, engine_memory_during_step="kv_cache", micro_batch_tokens=16
        )
        settings.engine.port = int(url.rsplit(":", 1)[1])
        publish(valkey, 0, 8)
        acts = TrainingActivities(settings)
        seen: list[dict] = []
        stop = asyncio.Event()

        async def watch() -> None:
            async with httpx.AsyncClient(timeout=10) as http:
                while not stop.is_set():
                    seen.append((await http.get(f"{url}/get_server_info")).json()["memory"])
                    await asyncio.sleep(0.02)

        watcher = asyncio.create_task(watch())
        _, summary = await _step(acts, version=0, durable=0, n=8)
        stop.set()
        await watcher
        assert summary.trained == 8
        assert any(m["released"] for m in seen), seen[-3:]  # released while the step ran
        after = httpx.get(f"{url}/get_server_info", timeout=10).json()["memory"]
        assert not after["released"]  # and taken again right after
        done = httpx.post(f"{url}/generate", json={"text": "hi", "sampling_params": {"max_new_tokens": 2}}, timeout=60)
        assert done.status_code == 200
        await acts.aclose()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_durable_line_longer_than_the_tail_window_is_found_again(tmp_path):
    """A checkpoint confirmed again (a retry, or after its trainer was lost) writes no second line, however long its
    line: batch 64 over 20 versions names about 1,300 sample ids."""
    from openclaw_rl import trained_log

    ids = [f"session/user-{i:04d}/chat-{i}@01a21663-66c0-7a64-b361-bd04ac6846d6#{i % 7}" for i in range(1300)]
    batches = [{"version": v, "batch": f"d{v}", "sample_ids": ids[(v - 1) * 65 : v * 65]} for v in range(1, 21)]
    trained_log.record_durable(tmp_path, 20, 0, batches)
    path = tmp_path / trained_log.TRAINED_LOG
    assert path.stat().st_size > trained_log._TAIL_BYTES
    trained_log.record_durable(tmp_path, 20, 0, batches)
    assert len(path.read_text().splitlines()) == 1


def test_one_version_confirmed_twice_at_once_with_a_slow_tail_read_writes_one_line(tmp_path, monkeypatch):
    """A confirmation retried while its first attempt still runs (it outlived its heartbeat timeout): both attempts
    look for the version's line, and the tail read is slow. Before: both found none and both appended (2 lines,
    every sample id twice)."""
    import time

    from openclaw_rl import trained_log

    last_lines = trained_log._last_lines

    def slow_tail(path, count=8):
        lines = last_lines(path, count)
        time.sleep(0.3)  # a read that takes its time: both writers have read the tail before either appends
        return lines

    monkeypatch.setattr(trained_log, "_last_lines", slow_tail)
    (tmp_path / trained_log.TRAINED_LOG).write_text("")  # a file to read: the tail is read, not skipped
    batches = [
        {"version": v, "batch": f"d{v}", "sample_ids": [f"session/u/s#{v}.{i}" for i in range(2)]} for v in (1, 2)
    ]
    start = threading.Barrier(2)

    def confirm() -> None:
        start.wait()
        trained_log.record_durable(tmp_path, 2, 0, batches)

    writers = [threading.Thread(target=confirm) for _ in range(2)]
    for t in writers:
        t.start()
    for t in writers:
        t.join(timeout=10)
    lines = [json.loads(x) for x in (tmp_path / trained_log.TRAINED_LOG).read_text().splitlines()]
    assert len(lines) == 1, lines
    assert lines[0]["version"] == 2 and len(lines[0]["sample_ids"]) == 4


async def test_a_confirmation_without_its_checkpoint_fails_and_records_and_acknowledges_nothing(
    tmp_path,
    valkey,  # noqa: F811
    tiny_model,
):
    """Before: the batches were recorded as trained and acknowledged with no checkpoint holding them (never trained
    again after a restart). A checkpoint not on disk whole (no folder; a folder without its version file, as a
    staging folder is before its rename; another version's) is refused, typed and non-retryable."""
    settings = settings_for(tmp_path, valkey, tiny_model)
    publish(valkey, 0, 4)
    acts = TrainingActivities(settings)
    claim, s1 = await _step(acts, version=0, durable=0)
    _, cp = await _checkpoint(acts, version=1, since=0)
    batches = [DurableBatch(version=1, ids=claim.ids, batch=s1.batch, sample_ids=s1.sample_ids)]
    half = tmp_path / "policy-1-half"
    half.mkdir()
    (half / "model.safetensors").write_bytes(b"")
    other = version_dir(settings.checkpoints_dir, 7)
    other.mkdir()
    (other / "openclaw-rl-version.json").write_text(json.dumps({"weight_version": "6", "durable": True}))
    for path, why in ((tmp_path / "gone", "no such folder"), (half, "no version file"), (other, "holds version 6")):
        wrong = ConfirmInput(checkpoint=cp.model_copy(update={"path": str(path)}), since=0, batches=batches)
        with pytest.raises(ApplicationError, match=why) as refused:
            await ActivityEnvironment().run(acts.confirm_checkpoint, wrong)
        assert refused.value.type == ErrorType.CHECKPOINT_MISSING and refused.value.non_retryable
        assert not (path / CONFIRMED).exists()
    assert not (settings.records_dir / TRAINED_LOG).exists()  # nothing recorded as trained
    # nothing acknowledged: the real checkpoint's confirmation still finds all four entries pending
    assert (
        await ActivityEnvironment().run(acts.confirm_checkpoint, ConfirmInput(checkpoint=cp, since=0, batches=batches))
        == 4
    )
    assert is_confirmed(version_dir(settings.checkpoints_dir, 1))
    await acts.aclose()


async def test_a_slow_confirmation_heartbeats(tmp_path, valkey, tiny_model, monkeypatch):  # noqa: F811
    """It runs under the trainer calls' heartbeat timeout and is retried without limit: silent for longer than the
    timeout, it was retried while it still ran (and recorded its samples a second time)."""
    import time

    from activities import training
    from openclaw_rl import trained_log

    settings = settings_for(tmp_path, valkey, tiny_model)
    publish(valkey, 0, 4)
    acts = TrainingActivities(settings)
    claim, s1 = await _step(acts, version=0, durable=0)
    _, cp = await _checkpoint(acts, version=1, since=0)
    last_lines = trained_log._last_lines

    def slow_tail(path, count=8):
        time.sleep(1.0)  # a slow disk: many heartbeat periods
        return last_lines(path, count)

    monkeypatch.setattr(trained_log, "_last_lines", slow_tail)
    monkeypatch.setattr(training, "HEARTBEAT_S", 0.1)
    (settings.records_dir / TRAINED_LOG).parent.mkdir(parents=True, exist_ok=True)
    (settings.records_dir / TRAINED_LOG).write_text("")
    beats: list = []
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *details: beats.append(details)
    batches = [DurableBatch(version=1, ids=claim.ids, batch=s1.batch, sample_ids=s1.sample_ids)]
    assert await env.run(acts.confirm_checkpoint, ConfirmInput(checkpoint=cp, since=0, batches=batches)) == 4
    assert len(beats) >= 3, beats
    await acts.aclose()


async def test_an_entry_gone_from_its_stream_is_dropped_and_recorded_and_the_step_trains_the_rest(
    tmp_path,
    valkey,  # noqa: F811
    tiny_model,
):
    """Before: the step failed with SAMPLE_MISSING (non-retryable) and the training workflow with it. An entry
    deleted after it was claimed (trimmed, deleted by hand) is dropped and reported; the durable checkpoint's line
    names it as missing, and its confirmation acknowledges it with the rest of the batch."""
    import redis

    from store import keys
    from store.samples import TRAINER_GROUP

    settings = settings_for(tmp_path, valkey, tiny_model)
    publish(valkey, 0, 4)
    acts = TrainingActivities(settings)
    env = ActivityEnvironment()
    claim = await env.run(
        acts.claim_batch, ClaimInput(consumer="t", batch_size=4, source_weights={"personal": 1.0}, wait_s=1.0)
    )
    gone = claim.ids["personal"][1]
    r = redis.Redis(port=valkey)
    assert r.xdel(keys.sample_stream("personal"), gone) == 1  # still pending for the trainer's group
    summary = await env.run(acts.train_step, TrainInput(ids=claim.ids, version=0, max_staleness=8, durable_version=0))
    assert (summary.version, summary.trained, summary.missing) == (1, 3, {"personal": [gone]})
    assert len(summary.sample_ids) == 3
    _, cp = await _checkpoint(acts, version=1, since=0)
    batch = DurableBatch(
        version=1, ids=claim.ids, batch=summary.batch, sample_ids=summary.sample_ids, missing=summary.missing
    )
    assert await env.run(acts.confirm_checkpoint, ConfirmInput(checkpoint=cp, since=0, batches=[batch])) == 4
    (line,) = [json.loads(x) for x in (settings.records_dir / TRAINED_LOG).read_text().splitlines()]
    assert line["missing"] == {"personal": [gone]} and sorted(line["sample_ids"]) == sorted(summary.sample_ids)
    assert r.xpending(keys.sample_stream("personal"), TRAINER_GROUP)["pending"] == 0  # never claimed again
    await acts.aclose()


async def test_a_batch_too_stale_to_learn_from_makes_no_version_but_names_its_samples_on_disk(
    tmp_path,
    valkey,  # noqa: F811
    tiny_model,
):
    """Before: a batch whose every sample was too stale made no step and was acknowledged (deleted from its stream),
    with only a log line and a counter to say so; no file named its samples (seen by the several-hosts bench: its
    accounting could not find 80 published samples on disk). Now a `"dropped": true` line names them, once."""
    settings = settings_for(tmp_path, valkey, tiny_model)
    publish(valkey, 0, 4)
    published = [f"session/u/s#0.{i}" for i in range(4)]  # the sample ids `publish` gives
    acts = TrainingActivities(settings)
    # The trainer holds version 9, as a run's would. Its preload (the base here: no checkpoint on disk) is awaited
    # first, else it could finish between the two attempts and leave version 0 held (TrainerLost, seen in a suite).
    for t in threading.enumerate():
        if t.name == "trainer-preload":
            t.join(timeout=120)
    await asyncio.to_thread(acts.held.from_durable, 0, 9)
    env = ActivityEnvironment()
    claim = await env.run(
        acts.claim_batch, ClaimInput(consumer="t", batch_size=4, source_weights={"personal": 1.0}, wait_s=1.0)
    )
    step = TrainInput(ids=claim.ids, version=9, max_staleness=8, durable_version=9)  # generated by v0: 9 behind
    for _ in range(2):  # a retried step writes no second line
        summary = await env.run(acts.train_step, step)
        assert summary.trained == 0 and sorted(summary.stale_ids) == sorted(published)
    (line,) = [json.loads(x) for x in (settings.records_dir / TRAINED_LOG).read_text().splitlines()]
    assert line["dropped"] is True and line["version"] == 9 and line["sample_ids"] == []
    assert sorted(line["stale_ids"]) == sorted(published) and line["batch"] == summary.batch
    await acts.aclose()
