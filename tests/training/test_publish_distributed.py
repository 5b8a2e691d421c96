"""publish_weights with training.weight_sync.mode = distributed: a real trainer step, a real engine, real valkey."""

from __future__ import annotations

import contextlib

import httpx
import pytest
import redis
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.training import TrainingActivities
from contracts.errors import ErrorType
from contracts.training import PublishWeightsInput
from openclaw_rl.settings import Settings
from store import keys
from tests.conftest import start_engine
from tests.training.test_train_step_activity import claim_and_train, publish, valkey  # noqa: F401 (fixture)

FIXED = {
    "text": "a fixed prompt for comparing weights",
    "sampling_params": {"max_new_tokens": 0},
    "return_logprob": True,
    "logprob_start_len": 1,
}


def distributed_settings(tmp_path, port: int, tiny_model, engine_url: str, backend: str) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        redis={"port": port},
        engine={"model_path": str(tiny_model)},
        policy={"server_urls": [engine_url]},
        training={"weight_sync": {"mode": "distributed", "backend": backend, "bucket_mb": 8, "timeout_s": 30}},
    )


async def trained_and_published(tmp_path, valkey_port: int, tiny_model, backend: str):
    """Train v0 -> v1 in the activity, then publish v1 to a fresh engine; (engine url, activities, messages)."""
    (tmp_path / "data").mkdir(parents=True, exist_ok=True)
    proc, url = start_engine(tiny_model, tmp_path / "data")
    publish(valkey_port, 0, 4)
    acts = TrainingActivities(distributed_settings(tmp_path, valkey_port, tiny_model, url, backend))
    summary = await claim_and_train(acts, batch=4, version=0, max_staleness=4)
    assert summary.version == 1
    messages = await ActivityEnvironment().run(
        acts.publish_weights, PublishWeightsInput(checkpoint=summary.checkpoint, version=1)
    )
    return proc, url, acts, summary, messages


async def logprobs(http: httpx.AsyncClient) -> list[float]:
    body = (await http.post("/generate", json=FIXED)).json()
    return [e[0] for e in body["meta_info"]["input_token_logprobs"] if e[0] is not None]


async def test_a_trained_version_is_broadcast_and_serves_as_its_checkpoint_would(tmp_path, valkey, tiny_model):  # noqa: F811
    proc, url, acts, summary, messages = await trained_and_published(tmp_path, valkey, tiny_model, "gloo")
    try:
        assert "broadcast" in messages[0]
        async with httpx.AsyncClient(base_url=url, timeout=120) as http:
            info = (await http.get("/get_server_info")).json()
            assert info["weight_version"] == "1" and info["weight_update_groups"]  # kept for the next version
            assert not info["generation_paused"]
            sent = await logprobs(http)
            r = await http.post("/update_weights_from_disk", json={"model_path": summary.checkpoint})
            assert r.status_code == 200, r.text
            assert await logprobs(http) == sent  # the same weights the checkpoint holds
        r = redis.Redis(port=valkey)
        assert r.get(keys.POLICY_VERSION) == b"1"
        assert r.xrevrange(keys.POLICY_UPDATES, count=1)[0][1][b"version"] == b"1"
    finally:
        await acts.aclose()
        proc.terminate()
        proc.wait(timeout=30)


async def test_a_failed_group_setup_falls_back_to_disk_and_still_publishes(tmp_path, valkey, tiny_model):  # noqa: F811
    # nccl: the CPU engine refuses to join, so the version must go out from disk.
    proc, url, acts, summary, messages = await trained_and_published(tmp_path, valkey, tiny_model, "nccl")
    try:
        assert "broadcast" not in messages[0] and "Succeeded" in messages[0]
        async with httpx.AsyncClient(base_url=url, timeout=120) as http:
            info = (await http.get("/get_server_info")).json()
            assert info["weight_version"] == "1" and info["weight_update_groups"] == []
            assert not info["generation_paused"]
        assert redis.Redis(port=valkey).get(keys.POLICY_VERSION) == b"1"
    finally:
        await acts.aclose()
        proc.terminate()
        proc.wait(timeout=30)


async def test_a_restarted_trainer_broadcasts_the_durable_checkpoint_it_loads_never_a_path(
    tmp_path,
    valkey,  # noqa: F811
    tiny_model,
    monkeypatch,
):
    """No shared disk: a trainer process that restarted holds nothing, and the servers cannot read its checkpoint
    folder. Publishing the checkpoint loads it into the trainer's memory and broadcasts it."""
    from activities.weight_publication import WeightPublisher

    proc, url, acts, summary, _ = await trained_and_published(tmp_path, valkey, tiny_model, "gloo")
    await acts.aclose()
    try:
        async with httpx.AsyncClient(base_url=url, timeout=120) as http:
            sent_before = await logprobs(http)
            r = await http.post("/update_weights_from_disk", json={"model_path": str(tiny_model)})  # back to v0
            assert r.status_code == 200, r.text

        def no_path(self, checkpoint, version):
            raise AssertionError(f"the servers were sent a path: {checkpoint}")

        monkeypatch.setattr(WeightPublisher, "_load_from_disk", no_path)
        monkeypatch.setattr(TrainingActivities, "_preload", lambda self: None)  # holds nothing, as after a crash
        settings = distributed_settings(tmp_path, valkey, tiny_model, url, "gloo")
        settings.training.weight_sync.disk_fallback = False
        restarted = TrainingActivities(settings)
        try:
            assert restarted.held.version is None
            messages = await ActivityEnvironment().run(
                restarted.publish_weights, PublishWeightsInput(checkpoint=summary.checkpoint, version=1)
            )
            assert "broadcast" in messages[0] and restarted.held.version == 1
            async with httpx.AsyncClient(base_url=url, timeout=120) as http:
                info = (await http.get("/get_server_info")).json()
                assert info["weight_version"] == "1" and not info["generation_paused"]
                assert await logprobs(http) == sent_before  # version 1's weights, from the trainer's memory
        finally:
            await restarted.aclose()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def test_without_disk_fallback_a_failed_broadcast_is_retried_never_sent_as_a_path(
    tmp_path,
    valkey,  # noqa: F811
    tiny_model,
    monkeypatch,
):
    from activities.weight_publication import WeightPublisher

    def no_path(self, checkpoint, version):
        raise AssertionError(f"the servers were sent a path: {checkpoint}")

    monkeypatch.setattr(WeightPublisher, "_load_from_disk", no_path)
    (tmp_path / "data").mkdir(parents=True, exist_ok=True)
    proc, url = start_engine(tiny_model, tmp_path / "data")
    publish(valkey, 0, 4)
    settings = distributed_settings(tmp_path, valkey, tiny_model, url, "nccl")  # the CPU engine refuses to join
    settings.training.weight_sync.disk_fallback = False
    acts = TrainingActivities(settings)
    try:
        summary = await claim_and_train(acts, batch=4, version=0, max_staleness=4)
        for _ in range(2):  # each attempt sets a group up again
            with pytest.raises(ApplicationError) as failed:
                await ActivityEnvironment().run(
                    acts.publish_weights, PublishWeightsInput(checkpoint=summary.checkpoint, version=1)
                )
            assert failed.value.type == ErrorType.WEIGHT_LOAD_FAILED and not failed.value.non_retryable
        async with httpx.AsyncClient(base_url=url, timeout=120) as http:
            info = (await http.get("/get_server_info")).json()
            assert info["weight_version"] != "1" and not info["generation_paused"]
        assert redis.Redis(port=valkey).get(keys.POLICY_VERSION) != b"1"
    finally:
        await acts.aclose()
        proc.terminate()
        proc.wait(timeout=30)


def megatron_settings(tmp_path, valkey_port: int, tiny_model, url: str, backend: str, timeout_s: float) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        redis={"port": valkey_port},
        engine={"model_path": str(tiny_model)},
        policy={"server_urls": [url]},
        training={
            "backend": "megatron",
            "megatron": {"tensor_parallel": 2, "nproc_per_node": 2},
            "weight_sync": {"mode": "distributed", "backend": backend, "bucket_mb": 8, "timeout_s": timeout_s},
        },
    )


def no_export_through_the_pool(monkeypatch) -> None:
    """The weights must go from the job's rank 0 to the servers, never through this process."""
    from trainers.megatron_job_client import MegatronJobTrainer

    def refuse(self):
        raise AssertionError("the job's weights were exported to the pool's process")

    monkeypatch.setattr(MegatronJobTrainer, "hf_state_dict", refuse)


@contextlib.asynccontextmanager
async def megatron_job_activities(tmp_path, valkey_port: int, tiny_model, monkeypatch, backend: str, timeout_s: float):
    """A fresh engine and the training activities on a tensor-parallel 2 megatron job, with 4 samples of version 0
    published; (engine url, activities), both ended after."""
    pytest.importorskip("megatron.core", reason="the megatron extra is not installed")
    no_export_through_the_pool(monkeypatch)
    (tmp_path / "data").mkdir(parents=True, exist_ok=True)
    proc, url = start_engine(tiny_model, tmp_path / "data")
    publish(valkey_port, 0, 4)
    acts = TrainingActivities(megatron_settings(tmp_path, valkey_port, tiny_model, url, backend, timeout_s))
    try:
        yield url, acts
    finally:
        await acts.aclose()
        proc.terminate()
        proc.wait(timeout=30)


async def test_a_megatron_jobs_version_is_broadcast_and_serves_as_its_checkpoint_would(
    tmp_path,
    valkey,  # noqa: F811
    tiny_model,
    monkeypatch,
):
    """The weights live in a torchrun job's ranks (tensor parallel 2): its rank 0 gathers and broadcasts them."""
    async with megatron_job_activities(tmp_path, valkey, tiny_model, monkeypatch, "gloo", 30) as (url, acts):
        for version in (1, 2):  # the second version goes out on the group the first one set up
            summary = await claim_and_train(acts, batch=4, version=version - 1, max_staleness=4)
            assert summary.version == version
            messages = await ActivityEnvironment().run(
                acts.publish_weights, PublishWeightsInput(checkpoint=summary.checkpoint, version=version)
            )
            assert "broadcast" in messages[0] and "megatron job's rank 0" in messages[0], messages
            async with httpx.AsyncClient(base_url=url, timeout=120) as http:
                info = (await http.get("/get_server_info")).json()
                assert info["weight_version"] == str(version) and len(info["weight_update_groups"]) == 1
                sent = await logprobs(http)
                r = await http.post("/update_weights_from_disk", json={"model_path": summary.checkpoint})
                assert r.status_code == 200, r.text
                assert await logprobs(http) == sent  # the weights the version's checkpoint holds
            if version == 1:
                publish(valkey, 1, 4)


async def test_a_group_the_jobs_rank_0_cannot_open_falls_back_to_disk_and_the_job_trains_on(
    tmp_path,
    valkey,  # noqa: F811
    tiny_model,
    monkeypatch,
):
    # nccl: the CPU engine refuses to join, so the job's rank 0 waits out the group's timeout, answers the failure
    # (it must not crash the job), and the version goes out from disk.
    async with megatron_job_activities(tmp_path, valkey, tiny_model, monkeypatch, "nccl", 3) as (url, acts):
        summary = await claim_and_train(acts, batch=4, version=0, max_staleness=4)
        messages = await ActivityEnvironment().run(
            acts.publish_weights, PublishWeightsInput(checkpoint=summary.checkpoint, version=1)
        )
        assert "broadcast" not in messages[0] and "Succeeded" in messages[0], messages
        async with httpx.AsyncClient(base_url=url, timeout=120) as http:
            info = (await http.get("/get_server_info")).json()
            assert info["weight_version"] == "1" and not info["weight_update_groups"]
        publish(valkey, 1, 4)
        assert (await claim_and_train(acts, batch=4, version=1, max_staleness=4)).version == 2  # the job lives on
