"""The whole loop on the real stack: chats -> judged samples -> a train step -> the engine serves the new version."""

from __future__ import annotations

import json
import subprocess
import threading
import time

import httpx
import pytest
import redis

from tests.api.conftest import chat_stack_env, create_key
from tests.helpers import CLI, REPO, RunningStack
from tests.learning.conftest import chat

pytestmark = pytest.mark.timeout(400)

FIXED = {
    "text": "A fixed prompt to watch the policy change",
    "return_logprob": True,
    "logprob_start_len": 0,
    "sampling_params": {"max_new_tokens": 1, "temperature": 1.0},
}


@pytest.fixture(scope="module")
def loop_stack(tiny_model, tmp_path_factory):
    env = chat_stack_env(
        tmp_path_factory.mktemp("loop") / "data",
        tiny_model,
        OPENCLAW_RL_TRAINING__AUTO_START="true",
        OPENCLAW_RL_TRAINING__WAIT_S="2",
        OPENCLAW_RL_TRAINING__LR="1e-3",
        OPENCLAW_RL_SESSION__DEFAULT_MAX_TOKENS="8",
        OPENCLAW_RL_TRAINING__HEARTBEAT_TIMEOUT_S="4",
        OPENCLAW_RL_TRAINING__MICRO_BATCH_TOKENS="16",  # one sample per micro-batch: a step long enough to be killed in
        OPENCLAW_RL_TRAINING__KEEP_VERSIONS="20",  # keep every step's summary for the exactly-once audit
    )
    stack = RunningStack(env).start()
    yield stack
    stack.stop()


def converse(stack, key: str, sid: str) -> None:
    """18 turns: 17 get a next state, each scored +-1 by the heuristic judge (at least 16 samples)."""
    history = [{"role": "user", "content": "tell me something"}]
    for t in range(17):
        reply = chat(stack, key, sid, history)
        feedback = "thanks, perfect!" if t % 2 else "That's wrong, you should be brief instead."
        history = history + [{"role": "assistant", "content": reply["content"]}, {"role": "user", "content": feedback}]
    chat(stack, key, sid, history)


def status(stack) -> dict:
    out = subprocess.run(
        CLI + ["train", "status", "--json"], env=stack.env, capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout)


def ui_details(stack) -> str:
    import asyncio

    from temporalio.api.sdk.v1 import WorkflowMetadata
    from temporalio.client import Client

    async def read() -> str:
        client = await Client.connect(stack.temporal)
        md = await client.get_workflow_handle("training/openclaw-rl-policy").query(
            "__temporal_workflow_metadata", result_type=WorkflowMetadata
        )
        return md.current_details

    return asyncio.run(read())


def test_sixteen_samples_make_a_step_and_the_engine_serves_it(loop_stack):
    stack = loop_stack
    key = create_key(stack, "lena")
    before = httpx.post(f"{stack.engine}/generate", json=FIXED, timeout=60).json()
    assert before["meta_info"]["weight_version"] == "0"
    assert status(stack)["version"] == 0

    failures: list[str] = []
    stop = threading.Event()

    def keep_chatting() -> None:  # another user chats all along, through the update
        k = create_key(stack, "max")
        i = 0
        while not stop.is_set():
            r = httpx.post(
                f"{stack.api}/v1/chat/completions",
                json={"messages": [{"role": "user", "content": f"side question {i}"}], "max_tokens": 4},
                headers={"Authorization": f"Bearer {k}", "X-Session-Id": f"bg-{i}"},
                timeout=120,
            )
            if r.status_code != 200:
                failures.append(r.text)
            i += 1

    bg = threading.Thread(target=keep_chatting, daemon=True)
    bg.start()
    converse(stack, key, "loop")

    deadline = time.monotonic() + 240
    while status(stack)["version"] < 1:
        assert time.monotonic() < deadline, status(stack)
        time.sleep(1)
    stop.set()
    bg.join(timeout=120)
    assert failures == []  # serving never failed, during judging or the weight update

    s = status(stack)
    assert s["steps"] >= 1 and s["samples_trained"] >= 16
    m = s["last_metrics"]
    assert m["tokens"] > 0 and m["logprob_gap"] < 1e-3  # trainer and engine agree on the rollout policy
    assert s["recent_losses"][-1] == pytest.approx(m["loss"]) and s["backlog"] >= 0
    assert f"policy v{s['version']}" in ui_details(
        stack
    )  # what the Temporal UI shows as the workflow's current details
    after = httpx.post(f"{stack.engine}/generate", json=FIXED, timeout=60).json()
    assert after["meta_info"]["weight_version"] == str(s["version"])
    lp_before = [e[0] for e in before["meta_info"]["input_token_logprobs"][1:]]
    lp_after = [e[0] for e in after["meta_info"]["input_token_logprobs"][1:]]
    assert max(abs(a - b) for a, b in zip(lp_before, lp_after)) > 1e-4  # the policy moved
    r = redis.Redis.from_url(stack.redis)
    assert r.xpending("oc:samples:personal", "oc-trainer")["pending"] < 16  # the trained batch was acknowledged
    assert (stack.data_dir / "checkpoints" / f"policy-{s['version']}" / "model.safetensors").is_file()
    # the serving side was told: the update stream has the version, and the API follows it
    updates = [int(f[b"version"]) for _, f in r.xrange("oc:policy:updates")]
    assert updates and updates[-1] == s["version"]
    deadline = time.monotonic() + 15
    while True:
        card = httpx.get(f"{stack.api}/v1/models", headers={"Authorization": f"Bearer {key}"}, timeout=30).json()[
            "data"
        ][0]
        if card["policy_version"] == s["version"]:
            break
        assert time.monotonic() < deadline, card
        time.sleep(0.2)
    assert card["policy_updated_at"] > 0


def test_a_trainer_killed_mid_step_resumes_and_trains_every_entry_exactly_once(loop_stack):
    import asyncio
    import os
    import signal

    from temporalio.client import Client

    stack = loop_stack
    start = status(stack)
    key = create_key(stack, "nico")
    converse(stack, key, "again")

    async def wait_for_step() -> None:
        client = await Client.connect(stack.temporal)
        handle = client.get_workflow_handle("training/openclaw-rl-policy")
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            desc = await handle.describe()
            if any(a.activity_type.name == "train_step" for a in desc.raw_description.pending_activities):
                return
            await asyncio.sleep(0.05)
        raise AssertionError("no train step started")

    asyncio.run(wait_for_step())
    old = stack.service_pid("worker-trainer")
    os.kill(old, signal.SIGKILL)  # mid-step
    stack.wait_restarted("worker-trainer", old)
    deadline = time.monotonic() + 240
    while status(stack)["version"] <= start["version"]:
        assert time.monotonic() < deadline, status(stack)
        time.sleep(1)
    end = status(stack)
    assert end["version"] == start["version"] + 1 and end["steps"] == start["steps"] + 1
    assert end["samples_trained"] - start["samples_trained"] == 16  # the same batch once, not twice
    r = redis.Redis.from_url(stack.redis)
    summary = json.loads(
        (stack.data_dir / "checkpoints" / f"policy-{end['version']}" / "openclaw-rl-version.json").read_text()
    )["summary"]
    assert summary["trained"] == 16
    # every acknowledged entry was trained in exactly one step: nothing of this batch is pending any more
    pending = r.xpending_range("oc:samples:personal", "oc-trainer", min="-", max="+", count=1000)
    assert len(pending) < 16
    assert httpx.post(f"{stack.engine}/generate", json=FIXED, timeout=60).json()["meta_info"]["weight_version"] == str(
        end["version"]
    )


def test_redis_and_temporal_restarts_mid_run_lose_nothing_and_train_nothing_twice(loop_stack):
    import os
    import signal

    stack = loop_stack
    start = status(stack)
    key = create_key(stack, "olga")
    converse(stack, key, "restarts")
    for name in ("valkey", "temporal"):  # judging and training are under way
        old = stack.service_pid(name)
        os.kill(old, signal.SIGKILL)
        stack.wait_restarted(name, old)
    deadline = time.monotonic() + 300
    while status(stack)["version"] <= start["version"]:
        assert time.monotonic() < deadline, status(stack)
        time.sleep(1)
    trained: list[str] = []
    for folder in sorted((stack.data_dir / "checkpoints").glob("policy-*")):
        trained += json.loads((folder / "openclaw-rl-version.json").read_text())["summary"]["sample_ids"]
    assert len(trained) == len(set(trained)), "a sample was trained twice"
    r = redis.Redis.from_url(stack.redis)
    # Trained entries leave the sample stream once acknowledged: the record streams keep every published sample.
    published = {
        json.loads(f[b"record"])["sample_id"]
        for key in r.scan_iter("oc:records:personal:v*")
        for _, f in r.xrange(key)
        if json.loads(f[b"record"])["result"]["published"]
    }
    mine = {sid for sid in published if sid.split("#")[0].split("@")[0] == "session/olga/restarts"}
    assert len(mine) >= 16  # judging survived the restarts
    assert set(trained) <= published and len(trained) == status(stack)["samples_trained"]


def test_a_checkpoint_on_request_is_saved_under_its_label_and_never_pruned(loop_stack):
    stack = loop_stack
    v = status(stack)["version"]

    def run(*a):
        return subprocess.run(CLI + ["train", *a], env=stack.env, capture_output=True, text=True, cwd=REPO, timeout=120)

    out = run("checkpoint", "--label", "before-release")
    assert out.returncode == 0, out.stdout + out.stderr
    saved = stack.data_dir / "checkpoints" / "saved" / "before-release"
    assert f"saved policy version {v} as before-release" in out.stdout
    assert (saved / "model.safetensors").is_file() and json.loads((saved / "openclaw-rl-saved.json").read_text())[
        "version"
    ] == v
    again = run("checkpoint", "--label", "before-release")  # the same version again: idempotent
    assert again.returncode == 0, again.stdout + again.stderr
    bad = run("checkpoint", "--label", "../escape")
    assert bad.returncode == 1 and "checkpoint label '../escape'" in bad.stdout
    assert status(stack)["saved_checkpoints"][-1]["label"] == "before-release"
    watch = run("status", "--watch", "--until-version", str(v))  # returns once the version is there
    assert watch.returncode == 0 and f"v{v} " in watch.stdout and "samples" in watch.stdout
