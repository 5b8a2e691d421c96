"""Weight sync without disk against a real engine process: the trainer side runs here (rank 0) over gloo.

One engine serves every test of this module; each test reads the version it starts from, so their order is free.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest
import torch

from openclaw_rl.ports import free_port
from openclaw_rl.settings import WeightSyncSettings
from policy_client.weight_sync import WeightSyncClient, WeightSyncError
from tests.conftest import start_engine
from tests.helpers import REPO
from trainers.weight_sync import WeightBroadcaster, resolve_wire_dtype

FIXED = {
    "text": "a fixed prompt for comparing weights",
    "sampling_params": {"max_new_tokens": 0},
    "return_logprob": True,
    "logprob_start_len": 1,
}


@pytest.fixture(scope="module")
def engine(tiny_model, tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("weight-sync")
    proc, url = start_engine(tiny_model, data_dir)
    yield url, data_dir
    proc.terminate()
    proc.wait(timeout=30)


def perturbed_state(tiny_model: Path, seed: int) -> dict[str, torch.Tensor]:
    """The tiny model's weights, each nudged: same architecture, different log-probs."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.05)
    return model.state_dict()


def save_checkpoint(state: dict[str, torch.Tensor], tiny_model: Path, out: Path) -> Path:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    model.load_state_dict(state)
    model.save_pretrained(out)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tiny_model / name, out / name)
    return out


def broadcaster(url: str, bucket_mb: float = 4.0) -> WeightBroadcaster:
    cfg = WeightSyncSettings(mode="distributed", backend="gloo", bucket_mb=bucket_mb, timeout_s=30)
    return WeightBroadcaster(cfg, WeightSyncClient([url], timeout_s=60), torch.device("cpu"))


async def fixed_logprobs(http: httpx.AsyncClient) -> list[float]:
    body = (await http.post("/generate", json=FIXED)).json()
    return [e[0] for e in body["meta_info"]["input_token_logprobs"] if e[0] is not None]


async def served(http: httpx.AsyncClient) -> dict:
    return (await http.get("/get_server_info")).json()


async def test_distributed_update_serves_what_a_disk_load_serves(engine, tiny_model):
    url, data_dir = engine
    state = perturbed_state(tiny_model, seed=11)
    sender = broadcaster(url, bucket_mb=2.0)  # the 39 MiB embedding alone, the layers in a few buckets
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        before = await fixed_logprobs(http)
        await sender.publish(state, "d1")
        info = await served(http)
        assert info["weight_version"] == "d1"
        assert (await http.get("/get_weight_version")).json() == {"weight_version": "d1"}
        assert info["weight_update_groups"] == [sender.group_name]
        distributed = await fixed_logprobs(http)
        assert max(abs(a - b) for a, b in zip(before, distributed)) > 1e-3

        checkpoint = save_checkpoint(state, tiny_model, data_dir / "perturbed-11")
        r = await http.post("/update_weights_from_disk", json={"model_path": str(checkpoint), "weight_version": "k1"})
        assert r.status_code == 200, r.text
        from_disk = await fixed_logprobs(http)
        assert from_disk == distributed

        # The group is kept for the next version: no second rendezvous, same name.
        group = sender.group_name
        await sender.publish(perturbed_state(tiny_model, seed=12), "d2")
        assert sender.group_name == group and (await served(http))["weight_version"] == "d2"
        assert await fixed_logprobs(http) != distributed
    await sender.close()


async def test_weights_sent_in_bf16_serve_as_the_bf16_rounded_checkpoint(engine, tiny_model):
    """wire_dtype=bfloat16 (auto's choice for a bf16 trainer on CUDA): half the bytes, and the server holds exactly
    the weights rounded to bf16 (this fp32 engine widens them back)."""
    url, data_dir = engine
    state = perturbed_state(tiny_model, seed=21)
    cfg = WeightSyncSettings(mode="distributed", backend="gloo", bucket_mb=4.0, timeout_s=30, wire_dtype="bfloat16")
    sender = WeightBroadcaster(cfg, WeightSyncClient([url], timeout_s=60), torch.device("cpu"))
    rounded = {k: v.to(torch.bfloat16).to(torch.float32) for k, v in state.items()}
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        await sender.publish(state, "bf16-wire")
        assert (await served(http))["weight_version"] == "bf16-wire"
        on_wire = await fixed_logprobs(http)
        for name, st in (("rounded", rounded), ("full", state)):
            checkpoint = save_checkpoint(st, tiny_model, data_dir / f"wire-{name}")
            r = await http.post("/update_weights_from_disk", json={"model_path": str(checkpoint)})
            assert r.status_code == 200, r.text
            if name == "rounded":
                assert await fixed_logprobs(http) == on_wire
            else:
                assert await fixed_logprobs(http) != on_wire  # the rounding is real: fp32 weights serve otherwise
    await sender.close()


def test_the_wire_dtype_follows_the_trainers_precision_unless_set():
    assert resolve_wire_dtype("auto", bf16_on_cuda=True) == torch.bfloat16
    assert resolve_wire_dtype("auto", bf16_on_cuda=False) is None
    assert resolve_wire_dtype("float32", bf16_on_cuda=True) == torch.float32
    assert resolve_wire_dtype("bfloat16", bf16_on_cuda=False) == torch.bfloat16


@pytest.mark.parametrize("defect", ["unknown name", "wrong shape"])
async def test_refused_update_keeps_old_weights_and_version(engine, tiny_model, defect):
    url, _ = engine
    state = perturbed_state(tiny_model, seed=21)
    if defect == "unknown name":
        state["model.layers.9.not_a_weight"] = torch.zeros(4, 4)  # last: earlier buckets are staged by then
    else:
        name = "model.layers.1.mlp.up_proj.weight"
        state[name] = state[name].T.contiguous()
    sender = broadcaster(url, bucket_mb=1.0)
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        version = (await served(http))["weight_version"]
        before = await fixed_logprobs(http)
        with pytest.raises(WeightSyncError):
            await sender.publish(state, "never")
        info = await served(http)
        assert info["weight_version"] == version and not info["generation_paused"]
        assert info["weight_update_groups"] == []  # the trainer dropped its group after the failure
        assert await fixed_logprobs(http) == before
        assert (await http.get("/health_generate")).status_code == 200
        r = await http.post(
            "/generate", json={"text": "still serving", "sampling_params": {"max_new_tokens": 8, "ignore_eos": True}}
        )
        assert r.status_code == 200 and r.json()["meta_info"]["finish_reason"]["type"] == "length"


DYING_TRAINER = textwrap.dedent(
    """
    import asyncio, os, sys
    from transformers import AutoModelForCausalLM
    from policy_client.weight_sync import (
        InitWeightsUpdateGroupRequest, UpdateWeightsFromDistributedRequest, WeightSyncClient,
        broadcast_bucket, dtype_name, open_process_group,
    )
    from openclaw_rl.ports import free_port
    from trainers.weight_sync import distinct

    url, model_dir = sys.argv[1:3]
    named = distinct(AutoModelForCausalLM.from_pretrained(model_dir).state_dict())
    port, name = free_port(), "dying-trainer"

    def bucket(part):
        return UpdateWeightsFromDistributedRequest(
            names=[n for n, _ in part], dtypes=[dtype_name(t.dtype) for _, t in part],
            shapes=[list(t.shape) for _, t in part], group_name=name, weight_version="dying",
        )

    async def main():
        client = WeightSyncClient([url])
        joined = asyncio.ensure_future(client.init_group(url, InitWeightsUpdateGroupRequest(
            master_address="127.0.0.1", master_port=port, rank_offset=1, world_size=2, group_name=name,
            backend="gloo")))
        group = await asyncio.to_thread(open_process_group, "127.0.0.1", port, 0, 2, name, "gloo", 60)
        await joined
        first, rest = named[1:4], named[4:] + named[:1]
        await asyncio.gather(client.update(bucket(first)),
                             asyncio.to_thread(broadcast_bucket, group, [t for _, t in first], 60))
        print("first bucket staged", flush=True)
        asyncio.ensure_future(client.update(bucket(rest)))
        await asyncio.sleep(1.0)  # the engine now waits in the second bucket's broadcast
        os._exit(3)

    asyncio.run(main())
    """
)


async def test_a_server_that_does_not_answer_is_left_out_and_joins_once_it_answers(engine, tiny_model, tmp_path):
    """A server that does not answer (stopped here, as a host whose link is cut) must not hold the others paused for
    the collective's timeout: the publication goes to those that answer, and one that answers again is in the
    next publication's group."""
    import os
    import signal

    url, _ = engine
    proc, other = start_engine(tiny_model, tmp_path)
    cfg = WeightSyncSettings(mode="distributed", backend="gloo", bucket_mb=4.0, timeout_s=30, probe_timeout_s=1.0)
    sender = WeightBroadcaster(cfg, WeightSyncClient([url, other], timeout_s=60), torch.device("cpu"))
    try:
        os.kill(proc.pid, signal.SIGSTOP)
        async with httpx.AsyncClient(base_url=url, timeout=120) as http:
            t0 = time.monotonic()
            await sender.publish(perturbed_state(tiny_model, seed=31), "p1")
            took = time.monotonic() - t0
            assert (await served(http))["weight_version"] == "p1"
            assert took < cfg.timeout_s / 2, f"the publication waited {took:.1f} s for the server that is gone"
            group = sender.group_name
            assert (await served(http))["weight_update_groups"] == [group]

            os.kill(proc.pid, signal.SIGCONT)
            await sender.publish(perturbed_state(tiny_model, seed=32), "p2")
            assert sender.group_name != group  # set up afresh with both servers
            async with httpx.AsyncClient(timeout=60) as both:
                versions = [(await both.get(f"{u}/get_weight_version")).json()["weight_version"] for u in (url, other)]
            assert versions == ["p2", "p2"]

            # Silent mid-publication (stopped as the first bucket goes out): the publication ends within a few
            # looks, not at the collective's timeout, and the server that answers is let go on its old weights.
            members = sender._members
            real_update = members.update
            stopped_at: list[float] = []

            async def stop_then_update(req):
                if not stopped_at:
                    os.kill(proc.pid, signal.SIGSTOP)
                    stopped_at.append(time.monotonic())
                return await real_update(req)

            members.update = stop_then_update
            publishing = asyncio.ensure_future(sender.publish(perturbed_state(tiny_model, seed=33), "p3"))
            answer = await http.post("/generate", json={"text": "hello", "sampling_params": {"max_new_tokens": 2}})
            waited = time.monotonic() - stopped_at[0]
            assert answer.status_code == 200 and waited < cfg.timeout_s / 2, f"held paused {waited:.1f} s"
            os.kill(proc.pid, signal.SIGCONT)  # lets the publication's last calls to it end
            with pytest.raises(WeightSyncError, match="stopped answering"):
                await publishing
            assert (await served(http))["weight_version"] == "p2"
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        await sender.close()
        await sender.client.aclose()
        proc.terminate()
        proc.wait(timeout=30)


async def test_a_publication_no_server_answers_fails_with_the_reason(tmp_path):
    cfg = WeightSyncSettings(mode="distributed", backend="gloo", timeout_s=30, probe_timeout_s=1.0)
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    sender = WeightBroadcaster(cfg, WeightSyncClient([dead], timeout_s=5), torch.device("cpu"))
    with pytest.raises(WeightSyncError, match="no policy server answers"):
        await sender.publish({}, "x1")
    assert sender.group_name is None
    await sender.client.aclose()


async def test_a_publication_cancelled_half_way_drops_the_group_and_what_it_staged(engine, tiny_model):
    """A worker shutting down cancels a publication: the group goes (a server may wait for the rest of a bucket),
    generation continues on the old weights, and rank 0 lets go of the version it staged."""
    url, _ = engine
    sender = broadcaster(url, bucket_mb=2.0)
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        before = await fixed_logprobs(http)
        stuck = asyncio.Event()
        real_update = sender.client.update

        async def update_then_hang(req):
            await real_update(req)
            stuck.set()
            await asyncio.Event().wait()  # the second bucket's call never returns

        sender.client.update = update_then_hang
        publishing = asyncio.ensure_future(sender.publish(perturbed_state(tiny_model, seed=41), "cancelled"))
        await asyncio.wait_for(stuck.wait(), timeout=60)
        await asyncio.sleep(0.2)  # the next bucket's call is under way
        publishing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await publishing
        assert sender.group_name is None and sender.rank0.end.group is None
        assert sender.rank0.end._parts == []  # nothing of the version kept alive
        info = await served(http)
        assert info["weight_version"] != "cancelled" and not info["generation_paused"]
        assert not info["weight_update_groups"]
        assert await fixed_logprobs(http) == before
    await sender.close()


async def test_trainer_dying_mid_broadcast_leaves_old_weights(engine, tiny_model):
    url, _ = engine
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        version = (await served(http))["weight_version"]
        before = await fixed_logprobs(http)
        proc = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-c", DYING_TRAINER, url, str(tiny_model)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 3, proc.stderr[-2000:]
        assert "first bucket staged" in proc.stdout
        deadline = time.monotonic() + 30
        while (await served(http))["weight_update_groups"]:  # the engine notices the broken broadcast
            assert time.monotonic() < deadline, "the engine kept the dead trainer's group"
            await asyncio.sleep(0.2)
        info = await served(http)
        assert info["weight_version"] == version
        assert await fixed_logprobs(http) == before
        assert (await http.get("/health_generate")).status_code == 200

        # A new trainer (group) goes through afterwards.
        sender = broadcaster(url)
        await sender.publish(perturbed_state(tiny_model, seed=31), "after-death")
        assert (await served(http))["weight_version"] == "after-death"
        assert await fixed_logprobs(http) != before
        await sender.close()


async def test_requests_in_flight_complete_across_a_paused_update(engine, tiny_model):
    url, _ = engine
    tokens = 300
    sender = broadcaster(url)
    state = perturbed_state(tiny_model, seed=41)
    async with httpx.AsyncClient(base_url=url, timeout=300) as http:
        old = (await served(http))["weight_version"]

        async def generate(i: int) -> dict:
            r = await http.post(
                "/generate",
                json={
                    "text": f"in flight {i}",
                    "sampling_params": {"max_new_tokens": tokens, "ignore_eos": True},
                    "return_logprob": True,
                },
            )
            assert r.status_code == 200, r.text
            return r.json()

        flying = [asyncio.create_task(generate(i)) for i in range(4)]
        deadline = time.monotonic() + 60
        while sum(t["running"] for t in (await served(http))["tenants"]) < 4:
            assert time.monotonic() < deadline, "the requests never started"
            await asyncio.sleep(0.02)
        await sender.publish(state, "inflight")
        late = await generate(99)  # admitted after the update: entirely on the new weights
        answers = await asyncio.gather(*flying)
        await sender.close()

    for body in [*answers, late]:
        meta = body["meta_info"]
        assert meta["finish_reason"]["type"] == "length", meta["finish_reason"]
        assert len(body["output_ids"]) == tokens == len(meta["output_token_logprobs"])
    # Rows running at the update went on, on the new weights (they report it); none finished before the update.
    assert {a["meta_info"]["weight_version"] for a in answers} == {"inflight"} != {old}
    assert late["meta_info"]["weight_version"] == "inflight"


async def test_pause_holds_requests_and_continue_resumes_them(engine):
    url, _ = engine
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        r = await http.post("/pause_generation", json={"mode": "in_place"})
        assert r.status_code == 200 and r.json() == {"message": "Generation paused successfully.", "status": "ok"}
        assert (await served(http))["generation_paused"] is True
        waiting = asyncio.create_task(
            http.post("/generate", json={"text": "queued", "sampling_params": {"max_new_tokens": 4}})
        )
        await asyncio.sleep(1.0)
        assert not waiting.done()  # queued, not served, not refused
        assert (await served(http))["queue_depth"] == 1

        r = await http.post("/continue_generation", json={})
        assert r.json() == {"message": "Generation continued successfully.", "status": "ok"}
        answer = (await asyncio.wait_for(waiting, 60)).json()
        assert answer["meta_info"]["finish_reason"]["type"] in ("length", "stop")
        assert (await served(http))["generation_paused"] is False


async def test_pause_holds_a_running_stream_in_place(engine):
    url, _ = engine
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        events: list[dict] = []
        started = asyncio.Event()

        async def stream() -> None:
            body = {"text": "streamed", "sampling_params": {"max_new_tokens": 200, "ignore_eos": True}, "stream": True}
            async with http.stream("POST", "/generate", json=body) as resp:
                async for line in resp.aiter_lines():
                    if line.startswith("data:") and line[5:].strip() != "[DONE]":
                        events.append(__import__("json").loads(line[5:]))
                        started.set()

        task = asyncio.create_task(stream())
        await asyncio.wait_for(started.wait(), 60)
        await http.post("/pause_generation", json={"mode": "in_place"})
        held = len(events)
        await asyncio.sleep(0.8)
        assert len(events) <= held + 1 and not task.done()  # at most one event already on its way
        await http.post("/continue_generation", json={})
        await asyncio.wait_for(task, 120)
        final = events[-1]["meta_info"]
        assert final["finish_reason"]["type"] == "length" and final["completion_tokens"] == 200


async def test_pause_in_abort_mode_ends_running_requests(engine):
    url, _ = engine
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        long = asyncio.create_task(
            http.post(
                "/generate", json={"text": "aborted", "sampling_params": {"max_new_tokens": 2000, "ignore_eos": True}}
            )
        )
        deadline = time.monotonic() + 60
        while not sum(t["running"] for t in (await served(http))["tenants"]):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        await http.post("/pause_generation", json={"mode": "abort"})
        answer = (await asyncio.wait_for(long, 60)).json()
        assert answer["meta_info"]["finish_reason"]["type"] == "abort"
        assert len(answer["output_ids"]) < 2000
        await http.post("/continue_generation", json={})
        r = await http.post("/generate", json={"text": "after", "sampling_params": {"max_new_tokens": 2}})
        assert r.status_code == 200


async def test_group_routes_refuse_bad_requests(engine):
    url, _ = engine
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        r = await http.post(
            "/update_weights_from_distributed",
            json={"names": ["lm_head.weight"], "dtypes": ["float32"], "shapes": [[2, 2]], "group_name": "nope"},
        )
        assert r.status_code == 400 and r.json()["success"] is False and "no weight-update group" in r.json()["message"]
        r = await http.post(
            "/init_weights_update_group",
            json={
                "master_address": "127.0.0.1",
                "master_port": 1,
                "rank_offset": 1,
                "world_size": 2,
                "backend": "nccl",
            },
        )
        assert r.status_code == 400 and "nccl" in r.json()["message"]
        r = await http.post(
            "/update_weights_from_distributed",
            json={"names": ["a", "b"], "dtypes": ["float32"], "shapes": [[1]]},
        )
        assert r.status_code == 400 and "one entry per tensor" in r.json()["error"]["message"]
        r = await http.post("/destroy_weights_update_group", json={"group_name": "nope"})
        assert r.status_code == 400 and r.json()["success"] is False


async def test_a_trainer_cut_off_between_pause_and_continue_does_not_leave_the_engine_paused(tiny_model, tmp_path):
    """The trainer's link is cut half way through a publication: its next bucket never reaches the engine, nor
    does its /continue_generation while the publication hangs. Once the pause's lease runs out with no
    weight-update call, the engine serves again on its old weights while the publication is still stuck."""
    lease_s = 3.0
    proc, url = start_engine(tiny_model, tmp_path, OPENCLAW_RL_ENGINE__PAUSE_LEASE_S=str(lease_s))
    sender = broadcaster(url, bucket_mb=2.0)
    try:
        async with httpx.AsyncClient(base_url=url, timeout=120) as http:
            version = (await served(http))["weight_version"]
            before = await fixed_logprobs(http)
            first_bucket = asyncio.Event()
            real_update = sender.client.update

            async def update_then_cut(req):
                if first_bucket.is_set():
                    await asyncio.Event().wait()  # the link is cut: this bucket never goes out
                await real_update(req)
                first_bucket.set()

            sender.client.update = update_then_cut
            publishing = asyncio.ensure_future(sender.publish(perturbed_state(tiny_model, seed=51), "cut"))
            await asyncio.wait_for(first_bucket.wait(), timeout=60)
            staged_at = time.monotonic()
            assert (await served(http))["generation_paused"] is True

            ask = http.post("/generate", json={"text": "hello", "sampling_params": {"max_new_tokens": 2}})
            answer = await asyncio.wait_for(ask, timeout=lease_s + 30)
            waited = time.monotonic() - staged_at
            assert answer.status_code == 200 and answer.json()["meta_info"]["weight_version"] == version
            assert lease_s * 0.8 < waited < lease_s + 5, f"served {waited:.1f} s after the last bucket"
            assert not publishing.done()  # the trainer is still stuck on its cut link
            info = await served(http)
            assert info["generation_paused"] is False and info["weight_version"] == version
            assert await fixed_logprobs(http) == before  # nothing of the half-sent version serves
            metrics = (await http.get("/metrics")).text
            assert "engine_pause_lapsed_total 1" in metrics.replace(".0", "")

            publishing.cancel()
            with pytest.raises(asyncio.CancelledError):
                await publishing
    finally:
        await sender.client.aclose()
        proc.terminate()
        proc.wait(timeout=30)
