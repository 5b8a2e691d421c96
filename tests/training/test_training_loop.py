"""The whole loop on the real stack: chats -> judged samples -> a train step -> the engine serves the new version.

Versions are published from the trainer's memory; a durable checkpoint every CHECKPOINT_EVERY versions confirms
the batches it holds (records/trained.jsonl) and only then are they acknowledged."""

from __future__ import annotations

import json
import subprocess
import threading
import time

import httpx
import pytest
import redis

from activities.step_log import read_steps
from control.sessions import session_workflow_id
from tests.api.conftest import chat_stack_env, create_key
from tests.helpers import CLI, REPO, RunningStack
from tests.learning.conftest import chat

pytestmark = pytest.mark.timeout(400)

CHECKPOINT_EVERY = 2

FIXED = {
    "text": "A fixed prompt to watch the policy change",
    "return_logprob": True,
    "logprob_start_len": 0,
    "sampling_params": {"max_new_tokens": 1, "temperature": 1.0},
}


def free_port_run(n: int) -> int:
    """The first of `n` consecutive free loopback ports (the pools' metrics endpoints), from this test process's
    range (its own slice under two test workers, below the ephemeral range)."""
    import random
    import socket

    from openclaw_rl import ports

    low, top = ports._range()
    for _ in range(200):
        base = random.Random().randrange(low, top - n)
        try:
            socks = []
            for p in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no run of free ports")


METRICS_BASE = free_port_run(5)


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
        OPENCLAW_RL_TRAINING__CHECKPOINT__KEEP="20",
        OPENCLAW_RL_TRAINING__CHECKPOINT__EVERY_VERSIONS=str(CHECKPOINT_EVERY),
        OPENCLAW_RL_METRICS__PORT_BASE=str(METRICS_BASE),
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


def durable_lines(stack) -> list[dict]:
    """records/trained.jsonl's lines of confirmed durable checkpoints."""
    path = stack.data_dir / "records" / "trained.jsonl"
    lines = [json.loads(x) for x in path.read_text().splitlines()] if path.is_file() else []
    return [x for x in lines if x.get("durable")]


def status_or_none(stack) -> dict | None:
    """The status, or None while the stack cannot answer (a service restarting)."""
    try:
        return status(stack)
    except (AssertionError, ValueError, subprocess.TimeoutExpired):
        return None


def wait_for(stack, what: str, check, timeout: float = 240) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        s = status_or_none(stack)
        if s is not None and check(s):
            return s
        assert time.monotonic() < deadline, f"{what}: {s}"
        time.sleep(1)


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
    steps = read_steps(stack.data_dir / "records")  # the curves' source: the step's line, its samples by stream
    assert steps and steps[0].version == 1 and steps[0].metrics.loss == pytest.approx(s["recent_losses"][0])
    assert steps[0].sources["personal"].samples >= 16 and steps[0].sources["personal"].tokens > 0
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    curves = EventAccumulator(str(stack.data_dir / "tensorboard" / "train"))
    curves.Reload()  # and the curves: the step's points, the version's latency until served, by version
    tags = set(curves.Tags()["scalars"])
    assert {"train/loss", "train/samples", "personal/reward_mean", "train/version_latency_s"} <= tags, tags
    assert [e.step for e in curves.Scalars("train/loss")][0] == 1
    assert f"policy v{s['version']}" in ui_details(
        stack
    )  # what the Temporal UI shows as the workflow's current details
    after = httpx.post(f"{stack.engine}/generate", json=FIXED, timeout=60).json()
    assert after["meta_info"]["weight_version"] == str(s["version"])
    lp_before = [e[0] for e in before["meta_info"]["input_token_logprobs"][1:]]
    lp_after = [e[0] for e in after["meta_info"]["input_token_logprobs"][1:]]
    assert max(abs(a - b) for a, b in zip(lp_before, lp_after)) > 1e-4  # the policy moved
    r = redis.Redis.from_url(stack.redis)
    # Served from the trainer's memory: no checkpoint folder of it, and its batch waits, unacknowledged, for a
    # durable checkpoint to hold it (every CHECKPOINT_EVERY versions).
    assert s["durable_version"] == 0 and s["versions_since_durable"] == s["version"] == 1
    assert not (stack.data_dir / "checkpoints" / "policy-1").exists()
    assert r.xpending("oc:samples:personal", "oc-trainer")["pending"] >= 16
    assert durable_lines(stack) == []
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
    assert (
        "trainer weights"
        in subprocess.run(
            CLI + ["train", "status"], env=stack.env, capture_output=True, text=True, cwd=REPO, timeout=60
        ).stdout
    )  # the memory each side holds


def test_every_pool_serves_prometheus_metrics_and_the_dashboard_queries_only_metrics_that_exist(loop_stack):
    """Runs after the first test's train step: the trainer's own metrics have values."""
    import re

    names: set[str] = set()
    texts = {}
    for offset, pool in enumerate(("workflow", "policy", "judge", "env", "trainer")):
        r = httpx.get(f"http://127.0.0.1:{METRICS_BASE + offset}/metrics", timeout=30)
        assert r.status_code == 200, pool
        texts[pool] = r.text
        assert f'pool="{pool}"' in r.text and "temporal_" in r.text, pool  # the SDK's, tagged with the pool
        names |= {line.split("{")[0].split(" ")[0] for line in r.text.splitlines() if line and line[0] != "#"}
    steps = [ln for ln in texts["trainer"].splitlines() if ln.startswith("openclaw_train_steps{")]
    assert sum(float(ln.rsplit(" ", 1)[1]) for ln in steps) >= 1  # the declared zero, and the steps counted
    key = create_key(loop_stack, "scraper")
    for url, auth in ((loop_stack.api, {"Authorization": f"Bearer {key}"}), (loop_stack.engine, {})):
        text = httpx.get(f"{url}/metrics", headers=auth, timeout=30).text  # the API's and the engine's own
        names |= {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and line[0] != "#"}
    dashboard = json.loads((REPO / "deploy" / "grafana" / "openclaw-rl-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    used = {m for e in exprs for m in re.findall(r"\b((?:openclaw|temporal|api|engine)_[a-z0-9_]+)\b", e)}
    assert used and not used - names, sorted(used - names)


def test_a_trainer_killed_between_two_durable_checkpoints_trains_its_versions_again_exactly_once(loop_stack):
    """kill -9 of the trainer while a version exists only in its memory: the workflow goes back to the last durable
    checkpoint, the unacknowledged samples are trained again, and every sample counts as trained exactly once (one
    durable line of records/trained.jsonl names it); none is lost."""
    import os
    import signal

    stack = loop_stack
    key = create_key(stack, "nico")
    start = status(stack)
    assert start["versions_since_durable"] >= 1  # the first test's version lives in memory only
    old = stack.service_pid("worker-trainer")
    os.kill(old, signal.SIGKILL)
    stack.wait_restarted("worker-trainer", old)
    converse(stack, key, "again")  # 16 more samples: the next step finds the trainer lost its versions
    s = wait_for(
        stack, "the lost versions trained again", lambda s: s["trainer_lost"] >= 1 and s["version"] > start["version"]
    )
    assert s["samples_trained"] >= 32 - 16  # the lost batch is counted again only once trained again
    converse(stack, key, "more")
    # lena's 16 trained again and nico's and these 17 each: three versions after the loss, the third durable
    s = wait_for(
        stack,
        "a durable checkpoint after the loss",
        lambda s: s["durable_version"] >= start["version"] + 3 and s["versions_since_durable"] == 0,
        timeout=300,
    )
    lines = durable_lines(stack)
    trained = [i for x in lines for i in x["sample_ids"]]
    assert len(trained) == len(set(trained)), "a sample counted as trained twice"
    assert lines[-1]["version"] == s["durable_version"] and len(trained) == s["samples_trained"]
    sessions = (session_workflow_id("lena", "loop"), session_workflow_id("nico", "again"))
    mine = {i for i in trained if i.split("#")[0].split("@")[0] in sessions}
    assert len(mine) >= 32  # the batch trained before the kill is there (trained again), and the next one
    r = redis.Redis.from_url(stack.redis)
    pending = r.xpending_range("oc:samples:personal", "oc-trainer", min="-", max="+", count=1000)
    assert len(pending) < 16  # what the checkpoints hold was acknowledged
    assert httpx.post(f"{stack.engine}/generate", json=FIXED, timeout=60).json()["meta_info"]["weight_version"] == str(
        s["version"]
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
    s = wait_for(
        stack,
        "a version trained after the restarts",
        lambda s: s["version"] > start["version"],
        timeout=300,
    )
    trained = [i for x in durable_lines(stack) for i in x["sample_ids"]]
    assert len(trained) == len(set(trained)), "a sample was trained twice"
    r = redis.Redis.from_url(stack.redis)
    # Trained entries leave the sample stream once acknowledged: the record streams keep every published sample.
    published = {
        json.loads(f[b"record"])["sample_id"]
        for key in r.scan_iter("oc:records:personal:v*")
        for _, f in r.xrange(key)
        if json.loads(f[b"record"])["result"]["published"]
    }
    mine = {sid for sid in published if sid.split("#")[0].split("@")[0] == session_workflow_id("olga", "restarts")}
    assert len(mine) >= 16  # judging survived the restarts
    # every trained sample is recorded once a durable checkpoint holds it; the rest lives in versions since
    assert set(trained) <= published and len(trained) + s["samples_since_durable"] == s["samples_trained"]


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
    assert (
        bad.returncode == 1 and "checkpoint label '../escape'" in bad.stderr
    )  # errors: stderr (openclaw_rl/console.py)
    assert status(stack)["saved_checkpoints"][-1]["label"] == "before-release"
    watch = run("status", "--watch", "--until-version", str(v))  # returns once the version is there
    assert watch.returncode == 0 and f"v{v} " in watch.stdout and "samples" in watch.stdout
