"""Per-user adapters on the real stack (training.adapters = per_user): two users chat, their judged turns train
each one's own LoRA adapter on the shared base, every policy server loads both, and each user's next turns are
served by their own adapter, labelled with its version."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest
import redis

from contracts.chat import tenant_of
from tests.api.conftest import chat_stack_env, create_key
from tests.helpers import RunningStack
from tests.training.test_training_loop import FIXED, converse, status

pytestmark = pytest.mark.timeout(500)


@pytest.fixture(scope="module")
def adapters_stack(tiny_model, tmp_path_factory):
    env = chat_stack_env(
        tmp_path_factory.mktemp("adapters") / "data",
        tiny_model,
        OPENCLAW_RL_TRAINING__AUTO_START="true",
        OPENCLAW_RL_TRAINING__WAIT_S="2",
        OPENCLAW_RL_TRAINING__LR="5e-4",  # the adapters train at 10x (training.lora.lr_scale): 5e-3
        OPENCLAW_RL_SESSION__DEFAULT_MAX_TOKENS="8",
        OPENCLAW_RL_TRAINING__LORA__ENABLED="true",
        OPENCLAW_RL_TRAINING__LORA__RANK="4",
        OPENCLAW_RL_TRAINING__ADAPTERS="per_user",
    )
    stack = RunningStack(env).start()
    yield stack
    stack.stop()


def test_each_users_turns_train_and_are_served_by_their_own_adapter(adapters_stack):
    stack = adapters_stack
    keys = {user: create_key(stack, user) for user in ("ines", "omar")}
    threads = [threading.Thread(target=converse, args=(stack, keys[u], f"s-{u}")) for u in keys]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    r = redis.Redis.from_url(stack.redis)
    records = {}
    deadline = time.monotonic() + 300
    while len(records) < 2:
        assert time.monotonic() < deadline, (status(stack), records)
        for user in keys:
            raw = r.get(f"oc:adapter:{tenant_of(user)}")
            if raw:
                records[user] = json.loads(raw)
        time.sleep(1)
    s = status(stack)
    assert s["steps"] >= 1 and s["samples_trained"] >= 16
    assert {tenant_of(u) for u in keys} <= set(s["user_adapters"])  # `train status` lists each user's version

    for user, ref in records.items():
        assert ref["version"] >= 1 and ref["name"] == f"{tenant_of(user)}-v{ref['version']}"
        folder = stack.data_dir / "adapters" / tenant_of(user) / f"v{ref['version']}"
        assert (folder / "adapter_config.json").is_file() and ref["path"] == str(folder)

    # The engine serves each adapter: the same prompt scores differently under each, and under the base. (Training
    # goes on meanwhile: a newer version may replace an adapter between reading its record and using it.)
    def scored(user: str | None) -> list[float]:
        for _ in range(5):
            ref = json.loads(r.get(f"oc:adapter:{tenant_of(user)}")) if user else None
            body = FIXED | ({"lora_path": ref["name"]} if ref else {})
            out = httpx.post(f"{stack.engine}/generate", json=body, timeout=60).json()
            if "meta_info" in out:
                assert out["meta_info"]["weight_version"] == "0"  # the shared base never changes
                return [e[0] for e in out["meta_info"]["input_token_logprobs"][1:]]
            assert "is not loaded" in out["error"]["message"], out
        raise AssertionError("the adapter kept changing")

    ines, omar, base = scored("ines"), scored("omar"), scored(None)
    assert max(abs(a - b) for a, b in zip(ines, base)) > 1e-4
    assert max(abs(a - b) for a, b in zip(ines, omar)) > 1e-4

    # A user's next turn goes to their adapter: the turn is labelled with its version, one that was published.
    reply = httpx.post(
        f"{stack.api}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "and now?"}], "max_tokens": 4},
        headers={"Authorization": f"Bearer {keys['ines']}", "X-Session-Id": "after"},
        timeout=120,
    )
    assert reply.status_code == 200, reply.text
    log = httpx.get(
        f"{stack.api}/v1/sessions/after/turns", headers={"Authorization": f"Bearer {keys['ines']}"}, timeout=30
    ).json()
    (served,) = [t["weight_version"] for t in log["turns"]]
    assert int(served) >= 1 and (stack.data_dir / "adapters" / tenant_of("ines") / f"v{served}").is_dir(), log


def test_a_users_adapters_are_in_their_export_and_gone_when_they_are_forgotten(adapters_stack):
    stack = adapters_stack  # after the test above: both users have adapters
    r = redis.Redis.from_url(stack.redis)
    key = create_key(stack, "ines")  # a second key of the same user
    auth = {"Authorization": f"Bearer {key}"}
    export = httpx.get(f"{stack.api}/v1/me/data", headers=auth, timeout=60).json()
    versions = export["adapter_versions"]
    assert versions and all(
        v["path"].startswith(str(stack.data_dir / "adapters" / tenant_of("ines"))) for v in versions
    )

    assert any(n.startswith(tenant_of("ines")) for n in loaded_adapters(stack))
    assert engine_info(stack)["prefix_cache"]["cached_blocks"] > 0  # their prompts' KV

    gone = httpx.delete(f"{stack.api}/v1/me/data", headers=auth, timeout=180)
    assert gone.status_code == 200, gone.text
    assert gone.json()["adapter_versions"] == len(versions)
    # The engine: no version of their adapter loaded, and its prefix cache emptied (no per-user eviction exists).
    assert gone.json()["engine_caches_flushed"] is True
    assert not [n for n in loaded_adapters(stack) if n.startswith(tenant_of("ines"))], loaded_adapters(stack)
    assert any(n.startswith(tenant_of("omar")) for n in loaded_adapters(stack))
    assert engine_info(stack)["prefix_cache"]["cached_blocks"] == 0
    assert r.get(f"oc:adapter:{tenant_of('ines')}") is None
    assert not (stack.data_dir / "adapters" / tenant_of("ines")).exists()
    assert not list(stack.data_dir.glob(f"checkpoints/*/user-adapters/{tenant_of('ines')}"))
    assert r.get(f"oc:adapter:{tenant_of('omar')}") is not None  # the other user's stays
    assert (stack.data_dir / "adapters" / tenant_of("omar")).is_dir()


def engine_info(stack: RunningStack) -> dict:
    return httpx.get(f"{stack.engine}/get_server_info", timeout=30).json()


def loaded_adapters(stack: RunningStack) -> list[str]:
    """The adapters the engine holds: its answer to unloading one it does not have lists them."""
    r = httpx.post(f"{stack.engine}/unload_lora_adapter", json={"lora_name": "no-such-adapter"}, timeout=30)
    return list(r.json()["loaded_adapters"])
