"""A user's client-driven episodes (`/v1/episodes`) under their data rights, through the real stack (Temporal dev
server, valkey, the tiny engine, the heuristic judge): the export lists them with their steps and samples, and a
forget removes their workflows, episode data, token data, requests and samples, an open episode's too, while
another user's stay (docs/user-data.md)."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import httpx
import pytest
import redis
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from envs.sandbox import sandbox_problem
from store.samples import EpisodeStep, decode_sample
from tests.api.conftest import chat_stack_env, create_key
from tests.api.test_user_data import auth, nothing_left_on_disk, store_hits, users_cli
from tests.helpers import RunningStack, workflow_exists

pytestmark = pytest.mark.timeout(600)


SANDBOX_ROOT = Path(f"/tmp/oc-userdata-{uuid.uuid4().hex[:8]}")
"""The env worker's workspaces (under /tmp: the sandbox uids must traverse its parents)."""


@pytest.fixture(scope="module")
def stack(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory):
    env = chat_stack_env(
        tmp_path_factory.mktemp("userdata-episodes") / "data",
        tiny_model,
        OPENCLAW_RL_ENVS__SANDBOX__ROOT=str(SANDBOX_ROOT),
    )
    s = RunningStack(env).start()
    yield s
    s.stop()


def open_episode(stack: RunningStack, key: str) -> dict:
    r = httpx.post(f"{stack.api}/v1/episodes", json={"samples": 1}, headers=auth(key), timeout=60)
    assert r.status_code == 200, r.text
    return {"group_id": r.json()["group_id"], **r.json()["episodes"][0]}


def step(stack: RunningStack, key: str, ep: dict, messages: list[dict]) -> str:
    r = httpx.post(
        f"{ep['base_url']}/chat/completions",
        json={"messages": messages, "max_tokens": 6},
        headers=auth(key),
        timeout=120,
    )
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["message"]["content"] or ""


def run_episode(stack: RunningStack, key: str, marker: str, finish: bool = True) -> dict:
    """A free-form episode of two model calls (the second adds the user's reply: step 0's next state), ended with
    an outcome unless `finish` is False."""
    ep = open_episode(stack, key)
    messages = [{"role": "user", "content": f"plan a trip to {marker}"}]
    answer = step(stack, key, ep, messages)
    messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": f"cheaper please ({marker})"}]
    step(stack, key, ep, messages)
    if finish:
        r = httpx.post(f"{ep['base_url']}/outcome", json={"outcome": 0.75}, headers=auth(key), timeout=60)
        assert r.status_code == 200, r.text
    return ep


def group_samples(stack: RunningStack, group_id: str) -> list:
    r = redis.Redis.from_url(stack.redis)
    return [
        s
        for name in r.scan_iter("oc:samples:*", _type="stream")
        for _, fields in r.xrange(name)
        if isinstance((s := decode_sample(fields)).provenance, EpisodeStep) and s.provenance.group_id == group_id
    ]


def wait_samples(stack: RunningStack, group_id: str, timeout: float = 120.0) -> list:
    deadline = time.monotonic() + timeout
    while not (found := group_samples(stack, group_id)):
        assert time.monotonic() < deadline, f"no sample of {group_id} within {timeout}s"
        time.sleep(0.3)
    return found


def test_client_episodes_are_exported_and_forgotten_with_their_user(stack):
    user, other = f"ada-{uuid.uuid4().hex[:6]}", f"bob-{uuid.uuid4().hex[:6]}"
    marker, open_marker, other_marker = (f"{w}{uuid.uuid4().hex[:8]}" for w in ("timbuktu", "ushuaia", "reykjavik"))
    key, other_key = create_key(stack, user), create_key(stack, other)
    ep = run_episode(stack, key, marker)
    theirs = run_episode(stack, other_key, other_marker)
    mine = wait_samples(stack, ep["group_id"])
    wait_samples(stack, theirs["group_id"])
    still_open = run_episode(stack, key, open_marker, finish=False)  # forgotten mid-episode

    doc = httpx.get(f"{stack.api}/v1/me/data", headers=auth(key), timeout=60).json()
    episodes = {e["id"]: e for e in doc["episodes"]}
    assert set(episodes) == {ep["id"], still_open["id"]}, doc["episodes"]
    done = episodes[ep["id"]]
    assert done["status"] == "completed" and done["outcome"] == 0.75 and done["group_id"] == ep["group_id"]
    assert marker in done["opening"][0]["content"]
    assert len(done["steps"]) == 2 and done["steps"][0]["action"]["role"] == "assistant"
    assert marker in done["steps"][0]["observation"][0]["content"]  # the user's reply: step 0's next state
    assert episodes[still_open["id"]]["status"] == "running"
    exported = {s["sample_id"]: s for s in doc["samples"]}
    assert {s.sample_id for s in mine} <= set(exported)
    assert all(exported[s.sample_id]["episode_id"] == ep["workflow_id"] for s in mine)
    assert other_marker not in str(doc)

    r = httpx.delete(f"{stack.api}/v1/me/data", headers=auth(key), timeout=180)
    assert r.status_code == 200, r.text
    report = r.json()
    assert report["workflows"] >= 4 and report["samples"] >= 1 and report["store_keys"] > 0, report

    time.sleep(2)  # anything still in flight had its chance to write back
    needles = [user, marker, open_marker, ep["group_id"], still_open["group_id"]]
    assert store_hits(stack, needles) == []
    assert group_samples(stack, ep["group_id"]) == []
    for gone in (ep, still_open):
        assert not workflow_exists(stack, f"group/{gone['group_id']}")
        assert not workflow_exists(stack, gone["workflow_id"])
    nothing_left_on_disk(stack.data_dir, user, marker)
    nothing_left_on_disk(stack.data_dir, user, open_marker)
    # The open episode's next call: its key went with the user.
    late = httpx.post(
        f"{still_open['base_url']}/chat/completions",
        json={"messages": [{"role": "user", "content": "still there?"}]},
        headers=auth(key),
        timeout=60,
    )
    assert late.status_code == 401, late.text
    # The other user's episode and sample stay.
    assert group_samples(stack, theirs["group_id"])
    other_doc = httpx.get(f"{stack.api}/v1/me/data", headers=auth(other_key), timeout=60).json()
    assert [e["id"] for e in other_doc["episodes"]] == [theirs["id"]]
    assert other_marker in other_doc["episodes"][0]["opening"][0]["content"]
    # Twice is a no-op.
    again = users_cli(stack, "forget", user, "--yes")
    assert again.returncode == 0 and "already forgotten" in again.stdout, again.stdout + again.stderr
    assert store_hits(stack, needles) == []


def test_a_group_opened_while_its_user_is_forgotten_is_removed_by_its_own_request(stack):
    """The race a forget cannot close alone: a request authenticated before the key went opens a group after the
    forget collected the user's groups. The request sees the tombstone and removes what it made (a 410)."""
    from contracts.chat import tenant_of

    user = f"late-{uuid.uuid4().hex[:6]}"
    key = create_key(stack, user)
    r = redis.Redis.from_url(stack.redis)
    r.set(f"oc:forgotten:{tenant_of(user)}", f"{time.time():.3f}")  # the forget's first act; the key still works
    resp = httpx.post(f"{stack.api}/v1/episodes", json={"samples": 1}, headers=auth(key), timeout=60)
    assert resp.status_code == 410 and resp.json()["error"]["code"] == "user_forgotten", resp.text
    assert not r.exists(f"oc:user:{tenant_of(user)}:groups")  # no index entry left for a later sweep to miss

    async def groups_left() -> list[str]:
        client = await Client.connect(stack.temporal)
        query = f"WorkflowId STARTS_WITH 'group/' AND OpenclawUser IN ('{tenant_of(user)}', '{user}')"
        return [wf.id async for wf in client.list_workflows(query) if await _exists(client, wf.id)]

    assert asyncio.run(groups_left()) == []


async def _exists(client: Client, wf_id: str) -> bool:
    try:
        await client.get_workflow_handle(wf_id).describe()
        return True
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return False
        raise


def workspaces_holding(marker: str) -> list[Path]:
    return (
        [f for f in SANDBOX_ROOT.rglob("*") if f.is_file() and marker.encode() in f.read_bytes()[: 1 << 20]]
        if SANDBOX_ROOT.is_dir()
        else []
    )


@pytest.mark.skipif(sandbox_problem() is not None, reason=f"no sandbox here: {sandbox_problem()}")
def test_a_forget_ends_the_users_open_task_episode_and_removes_its_workspace(stack):
    """A forget left the user's open task sandbox on disk, their files in it, 30 s and more after it returned
    (issue 42, item 12): the episode was terminated, so nothing closed its environment."""
    user, marker = f"cleo-{uuid.uuid4().hex[:6]}", f"diary{uuid.uuid4().hex[:8]}"
    key = create_key(stack, user)
    r = httpx.post(
        f"{stack.api}/v1/episodes",
        json={"setting": "terminal", "task_id": "text-top-ips", "samples": 1},
        headers=auth(key),
        timeout=120,
    )
    assert r.status_code == 200, r.text
    ep = {"group_id": r.json()["group_id"], **r.json()["episodes"][0]}
    deadline = time.monotonic() + 120
    while not httpx.get(f"{stack.api}/v1/episodes/{ep['id']}", headers=auth(key), timeout=60).json().get("ready"):
        assert time.monotonic() < deadline, "the task's environment never opened"
        time.sleep(0.5)
    r = httpx.post(
        f"{stack.api}/v1/episodes/{ep['id']}/exec",
        json={"command": f"echo {marker} > notes.txt"},
        headers=auth(key),
        timeout=120,
    )
    assert r.status_code == 200, r.text
    assert workspaces_holding(marker), "the exec wrote nothing into a workspace under the sandbox root"

    r = httpx.delete(f"{stack.api}/v1/me/data", headers=auth(key), timeout=300)
    assert r.status_code == 200, r.text
    assert workspaces_holding(marker) == []  # at once: not after an idle janitor's hour
    assert not workflow_exists(stack, ep["workflow_id"])
    assert not workflow_exists(stack, f"group/{ep['group_id']}")
